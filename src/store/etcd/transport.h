// gangkeeper store/etcd: the client's HTTP side (client.h): the endpoints,
// one httpc::Pool of keep-alive connections per endpoint (a watch opens its
// own and keeps it for its whole life), one JSON POST per attempt, and
// failover with backoff (httpc::Backoff) over the endpoints, answering the
// gateway's JSON.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/httpc/backoff.h"
#include "gangkeeper/httpc/pool.h"
#include "gangkeeper/httpc/request.h"
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

// One connection to an endpoint.
using Connection = httpc::Connection;

// The request every gateway call is: a POST of `body` (JSON) to `path`
// that accepts JSON; a whole answer is read up to `max_body_bytes` (a
// streamed one is bounded by its reader).
httpc::Request JsonPost(const std::string& path, std::string body,
                        size_t max_body_bytes = std::numeric_limits<size_t>::max());

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
  // `endpoints` are options.endpoints, split (at least one); the pools of
  // connections to them, made from `options` (InvalidArgument: a TLS file
  // that is not PEM).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Transport>> Create(ClientOptions options,
                                                                        std::vector<Endpoint> endpoints);

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
  Transport(ClientOptions options, std::vector<Endpoint> endpoints, std::vector<std::unique_ptr<httpc::Pool>> pools);

  const ClientOptions options_;
  const std::vector<Endpoint> endpoints_;
  const std::vector<std::unique_ptr<httpc::Pool>> pools_;  // one per endpoint
  httpc::Backoff backoff_;
  httpc::Sleeper sleeper_;  // never cancelled: a call's waits are short
  std::atomic<size_t> preferred_{0};
};

}  // namespace gangkeeper::etcd
