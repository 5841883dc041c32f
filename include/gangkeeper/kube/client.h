// gangkeeper: a Kubernetes REST client on the HTTP client layer (httpc).
//
// What the actuator and the reconciler need and nothing more: GET, LIST
// (selectors, pagination), WATCH (a streamed chunked response), PATCH
// (merge and JSON patches), DELETE with preconditions, and the status
// subresource. Every call has a per-attempt timeout and is retried with
// exponential backoff and full jitter on connection errors, 409, 429 and
// 5xx, honouring Retry-After; other 4xx answers are final.
//
// Errors are absl::Status values whose code follows the HTTP status (404
// NotFound, 409 Aborted, 410 OutOfRange, 401 Unauthenticated, 403
// PermissionDenied, 422 FailedPrecondition, 429 ResourceExhausted, 5xx and
// connection errors Unavailable, timeouts DeadlineExceeded); HttpCode()
// gives the HTTP status back. Messages carry the method, the path and the
// server's own message.
//
// Thread-safe: calls may come from any thread. Each call borrows a
// keep-alive connection from a small pool; every watch has its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/workload/workload.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

struct RetryPolicy {
  int max_attempts = 8;  // including the first
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(10);
  // No retry starts after this much time has gone by since the call began.
  absl::Duration max_total = absl::Seconds(60);
};

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(15);  // per attempt: connect, write and each read
  RetryPolicy retry;
  std::string user_agent = "gangkeeper";
  // Keep-alive connections kept between calls: at least as many as calls
  // made at once (the actuator's 24 workers, the Event and Kueue-object
  // writers, the confirmer), or each burst opens new TLS connections.
  size_t max_idle_connections = 40;
  // Measures RetryPolicy::max_total (and how fast a pooled connection
  // failed); nullptr = base::RealClock(). Must outlive the client.
  const base::Clock* clock = nullptr;
};

enum class PatchType { kMerge, kJson };

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 500;  // per page; 0 = no pagination
};

struct ListResult {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // of the list: watch from here
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" = from now, after the current objects as ADDED
  bool allow_bookmarks = true;
  int64_t timeout_seconds = 300;  // the server ends the watch after this
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  nlohmann::json object;
};

// The HTTP status carried by an error from Client (0 when there was no
// answer: connection error or timeout).
int HttpCode(const absl::Status& status);
// `value` escaped for a URL query or path segment (RFC 3986 unreserved
// characters kept).
std::string QueryEscape(absl::string_view value);

// `status` carrying HTTP status `code` (read back by HttpCode).
absl::Status WithHttpCode(absl::Status status, int code);

// The API path of a managed kind: the collection in `namespace_name` (all
// namespaces when empty) or, with `name`, one object.
std::string ResourcePath(const workload::KindInfo& kind, const std::string& namespace_name,
                         const std::string& name = "");

class Client {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Create(ClusterConfig config,
                                                                      ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  // Every page, as one consistent list. A continue token that expired
  // (410) restarts the list from the first page, a bounded number of times.
  absl::StatusOr<ListResult> List(const std::string& path, const ListOptions& options = {});
  // PATCH `path` (add "/status" for the status subresource). With
  // `retry_conflict` false a 409 (a stale resourceVersion in the patch) is
  // final.
  absl::StatusOr<nlohmann::json> Patch(const std::string& path, PatchType type, const nlohmann::json& patch,
                                       bool retry_conflict = true);
  // POST `body` (of `content_type`) to `path`. Retried like every call on
  // connection errors and 5xx, so use it where doing it twice is harmless
  // (a create answers 409 the second time; gangkeeper's /v1/apply puts).
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const std::string& body,
                                      const std::string& content_type = "application/json");
  // PUT `object` to `path` (a replace: metadata.resourceVersion in it is
  // the precondition). A 409 (changed meanwhile) is final (Aborted), so the
  // caller reads again.
  absl::StatusOr<nlohmann::json> Put(const std::string& path, const nlohmann::json& object);
  // DELETE with preconditions (uid, when not empty) and a propagation
  // policy ("Background", "Foreground", "Orphan"; "" = the server's default).
  // A failed uid precondition (409: the name is another object now) is not
  // retried.
  absl::StatusOr<nlohmann::json> Delete(const std::string& path, const std::string& uid,
                                        const std::string& propagation_policy);

  // Streams a watch of the collection at `path` until the server ends it
  // (OK), `on_event` returns false (OK), Shutdown() is called (Cancelled)
  // or it fails. The too-old-resourceVersion answer (HTTP 200 with an ERROR
  // event of code 410) is OutOfRange: list again, then watch from the
  // list's resourceVersion. BOOKMARK events are passed on (their object
  // carries only metadata.resourceVersion). The initial request is retried
  // like any call; a dropped stream is not (the caller re-watches).
  absl::Status Watch(const std::string& path, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& on_event);

  // Ends every open watch and makes every later call fail with Cancelled;
  // waits for nothing. For shutdown.
  void Shutdown();

  // Calls made, for metrics and tests: attempts including retries.
  uint64_t attempts() const { return attempts_.load(); }

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> attempts_{0};
};

}  // namespace gangkeeper::kube
