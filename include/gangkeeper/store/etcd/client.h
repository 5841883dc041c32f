// gangkeeper store/etcd: a client for etcd's v3 JSON gateway (DESIGN §9,
// issue #10), on cpp-httplib (plain HTTP or TLS with client certificates).
// It is the lowest part of the store module (gangkeeper::store_etcd) and
// knows nothing of the broker; the etcd journal (store/etcd_journal.h) and
// the replicas (replica/) build on it. Its namespace stays gangkeeper::etcd:
// the names are etcd's own vocabulary (Range, Txn, Compare, Lease, Watch),
// and store::etcd:: would add a word to every call without telling apart
// anything that gangkeeper::etcd does not.
//
// What the replicated store and the leader election need: range, put,
// delete, transactions with compares, leases (grant, keep-alive, revoke,
// time-to-live) and watches (a streamed response). Keys and values are raw
// bytes here; the gateway's base64 and its int64-as-string numbers stay
// inside the client.
//
// Several endpoints may be given; a call that cannot reach one (connection
// error, timeout, 5xx, etcd's Unavailable) tries the next at once, up to
// ClientOptions::max_attempts, with a backoff after each full round over
// the endpoints. A transaction is sent once per endpoint at most and only
// retried when it surely did not reach etcd (the connection failed before
// the request was written); a timeout after the request went out is
// Unavailable with "outcome unknown" in the message, and the caller reads
// back to find out.
//
// Errors: Unavailable (no endpoint answered in time, after every attempt;
// the message has the last endpoint's error), InvalidArgument (etcd
// refused the request: the message is etcd's), OutOfRange (a watch or
// range asked for a compacted or future revision), NotFound (an unknown
// lease), FailedPrecondition (etcd answered something that is not the
// gateway's JSON). Any other refusal keeps etcd's gRPC code (the same
// numbering as absl's), e.g. ResourceExhausted when etcd's database is full.
//
// Thread-safe; each watch has its own connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gangkeeper::etcd {

struct ClientOptions {
  // "host:port" each; the scheme comes from `tls`.
  std::vector<std::string> endpoints;
  // TLS to etcd when ca_file is set: verify etcd's certificate with this CA
  // (only this one) and, when cert_file and key_file are set, present a
  // client certificate. The files are read again for every new connection,
  // so rotated certificates are picked up. With TLS, Create() ignores
  // SIGPIPE process-wide unless the program set its own handler: OpenSSL's
  // writes to a socket etcd closed would otherwise end the process.
  std::string ca_file, cert_file, key_file;
  absl::Duration timeout = absl::Seconds(5);  // per attempt: connect, write, read
  int max_attempts = 3;                       // over all endpoints, including the first
  absl::Duration backoff = absl::Milliseconds(100);
};

// Parses "etcd://host:port[,host:port...]" into endpoints.
absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view url);

struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeOptions {
  std::string range_end;  // "" = the key alone; PrefixEnd(key) = every key under it
  int64_t limit = 0;      // 0 = no limit
  int64_t revision = 0;   // 0 = the newest
  bool keys_only = false;
  bool count_only = false;
};

struct RangeResult {
  int64_t revision = 0;  // the store's revision when etcd answered
  std::vector<KeyValue> kvs;
  bool more = false;
  int64_t count = 0;
};

// The key just after every key that starts with `prefix` (etcd's range_end
// for a prefix).
std::string PrefixEnd(absl::string_view prefix);

// One compare of a transaction.
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kModRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // for the revision, version and lease targets
  std::string value;   // for kValue
  std::string range_end;

  static Compare ModRevision(std::string key, int64_t rev) {
    return {std::move(key), Target::kModRevision, Result::kEqual, rev, "", ""};
  }
  static Compare CreateRevision(std::string key, int64_t rev) {
    return {std::move(key), Target::kCreateRevision, Result::kEqual, rev, "", ""};
  }
  // The key does not exist.
  static Compare Absent(std::string key) { return CreateRevision(std::move(key), 0); }
  static Compare ValueIs(std::string key, std::string value) {
    return {std::move(key), Target::kValue, Result::kEqual, 0, std::move(value), ""};
  }
};

// One operation of a transaction.
struct Op {
  enum class Type { kPut, kDelete, kRange };
  Type type = Type::kPut;
  std::string key, value;  // value: kPut
  std::string range_end;   // kDelete, kRange
  int64_t lease = 0;       // kPut

  static Op Put(std::string key, std::string value, int64_t lease = 0) {
    return {Type::kPut, std::move(key), std::move(value), "", lease};
  }
  static Op Delete(std::string key, std::string range_end = "") {
    return {Type::kDelete, std::move(key), "", std::move(range_end), 0};
  }
  static Op Get(std::string key, std::string range_end = "") {
    return {Type::kRange, std::move(key), "", std::move(range_end), 0};
  }
};

struct TxnResult {
  int64_t revision = 0;  // after the transaction (unchanged when nothing was written)
  bool succeeded = false;
  // One per op of the branch that ran, in order; kvs are filled for kRange
  // ops, empty for the others.
  std::vector<std::vector<KeyValue>> responses;
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_seconds = 0;
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: the key and mod_revision (the deletion's revision)
};

struct WatchOptions {
  std::string range_end;        // as RangeOptions::range_end
  int64_t start_revision = 0;   // 0 = from now; else every change from this revision on
  bool progress_notify = true;  // etcd sends empty progress updates (revision only)
};

// A running watch: events are delivered on the watch's own thread, in
// revision order, with every event of one revision in one call. `on_events`
// gets (events, header revision); an empty list is a progress notification.
// When the stream ends for any reason other than Cancel() (etcd gone,
// compacted, canceled by etcd) `on_end` is called once with the reason,
// and the watch is over; the caller starts a new one from the last revision
// + 1 it saw. Destroying the Watch cancels it and joins its thread.
// Callbacks begin only after StartWatch() returned, and none runs once
// Cancel() returned (unless Cancel() is called from a callback, which is
// allowed). Destroying a Watch from inside its own callback is a bug
// (fatal): it would join its own thread.
class Watch {
 public:
  virtual ~Watch() = default;
  virtual void Cancel() = 0;
};

class Client {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  virtual ~Client() = default;

  virtual absl::StatusOr<RangeResult> Range(const std::string& key, const RangeOptions& options = {}) = 0;
  // Returns the revision after the put.
  virtual absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0) = 0;
  // Returns (revision, number of keys deleted).
  virtual absl::StatusOr<std::pair<int64_t, int64_t>> Delete(const std::string& key,
                                                             const std::string& range_end = "") = 0;
  virtual absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                                        const std::vector<Op>& failure = {}) = 0;

  // `ttl` is rounded up to whole seconds (InvalidArgument under 1 s); etcd
  // raises one under its minimum (1.5 election timeouts), and the grant
  // says what it gave.
  virtual absl::StatusOr<LeaseGrant> Grant(absl::Duration ttl) = 0;
  // One keep-alive: the TTL the lease has again; NotFound when it expired.
  virtual absl::StatusOr<int64_t> KeepAlive(int64_t lease) = 0;
  virtual absl::Status Revoke(int64_t lease) = 0;
  // The remaining TTL in seconds; NotFound when expired or revoked.
  virtual absl::StatusOr<int64_t> TimeToLive(int64_t lease) = 0;

  // Compacts the history up to `revision`.
  virtual absl::Status Compact(int64_t revision) = 0;

  // Returns once etcd confirmed the watch (its "created" answer): every
  // change from start_revision (or from then on) is delivered after that.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Watch>> StartWatch(
      const std::string& key, const WatchOptions& options,
      std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> on_events,
      std::function<void(const absl::Status& why)> on_end) = 0;
};

}  // namespace gangkeeper::etcd
