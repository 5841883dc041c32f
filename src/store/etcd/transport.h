// gangkeeper store/etcd: the client's HTTP side (client.h): the endpoints,
// a small pool of keep-alive connections per endpoint (a watch opens its
// own and keeps it for its whole life), one POST per attempt, and failover
// with backoff over the endpoints, answering the gateway's JSON.
//
// Thread-safe.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/store/etcd/client.h"
#include "src/store/etcd/gateway.h"

namespace gangkeeper::etcd {

struct Endpoint {
  std::string host;  // without IPv6 brackets
  int port = 0;
  std::string name;  // "host:port" as given
};

// "host:port" or "[v6]:port"; `what` names it in messages.
absl::StatusOr<Endpoint> SplitHostPort(absl::string_view text, absl::string_view what);

// Reads a PEM file's first certificate or key to reject a bad file at
// Create() rather than on every connection.
absl::Status CheckPemFile(const std::string& path, const char* field, bool key);

// The base of the HTTP client and its TLS variant (SSLClient derives from it).
using Connection = httplib::ClientImpl;

// How a call may be repeated after a failure.
enum class Retry {
  // A repeat leaves the same state: reads, puts, deletes (a repeated delete
  // may count 0), lease calls (a repeated grant may leave an unused lease
  // behind until its TTL runs out), compaction.
  kSafe,
  // Only when the request surely did not reach etcd: a transaction's
  // compares make a repeat unsafe.
  kIfUnsent,
};

class Transport {
 public:
  // `endpoints` are options.endpoints, split (at least one).
  Transport(ClientOptions options, std::vector<Endpoint> endpoints);

  // One call with failover and retries. `stream`: the answer is a stream
  // of {"result":..} / {"error":..} objects of which the first counts.
  absl::StatusOr<Json> Call(const std::string& what, const std::string& path, const Json& request, Retry retry,
                            bool stream = false);

  // A new connection to endpoint `idx` (not pooled) with `read_timeout`.
  std::unique_ptr<Connection> NewConnection(size_t idx, absl::Duration read_timeout);
  // Sleeps before `attempt` when a whole round over the endpoints failed.
  void BackoffBefore(int attempt);
  // Unavailable after `attempts` with the last endpoint's error.
  absl::Status NoEndpoint(absl::string_view what, int attempts, const absl::Status& last);

  const ClientOptions& options() const { return options_; }
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  // The endpoint that answered last: calls start there.
  size_t preferred() const { return preferred_.load(); }
  void set_preferred(size_t idx) { preferred_.store(idx); }

 private:
  std::unique_ptr<Connection> Borrow(size_t idx);
  void Return(size_t idx, std::unique_ptr<Connection> c);

  const ClientOptions options_;
  const std::vector<Endpoint> endpoints_;
  std::atomic<size_t> preferred_{0};

  absl::Mutex pool_mu_;
  std::vector<std::vector<std::unique_ptr<Connection>>> idle_ ABSL_GUARDED_BY(pool_mu_);
};

}  // namespace gangkeeper::etcd
