// gangkeeper: the two TLS listeners (webhook and API), their routing,
// certificate reload, readiness and graceful shutdown.
//
// Server::Create() validates the options and loads the certificate;
// Start() binds both listeners (port 0 picks a free port, for tests) and
// serves on background threads; Shutdown() drains. Handlers run on the
// listener's worker threads and must be thread-safe. `src/cli` wires the
// real routes in; integration tests build the same object with port 0.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/server/http.h"

namespace gangkeeper::server {

enum class Listener { kWebhook, kApi };

absl::string_view ListenerName(Listener listener);

struct Route {
  Listener listener = Listener::kApi;
  std::string method;  // "GET", "POST", "PUT", "DELETE", "PATCH"
  // Exact path, or a prefix when `prefix` is true ("/v1/workloads/"). An
  // exact route for /healthz, /readyz or /metrics replaces the built-in
  // answer (the API guards /metrics with its tokens).
  std::string path;
  bool prefix = false;
  Handler handler;
};

struct Options {
  // "host:port", "[v6]:port" or ":port". Port 0 binds a free port.
  std::string webhook_addr = "0.0.0.0:9443";
  std::string api_addr = "0.0.0.0:8443";
  // PEM files, re-read when they change on disk (cert-manager rotation).
  std::string tls_cert_file;
  std::string tls_key_file;
  // When set, the webhook listener requires client certificates from this CA.
  std::string client_ca_file;
  // How often the certificate files are checked for changes.
  absl::Duration cert_reload_interval = absl::Seconds(5);
  // Required: the time a certificate's expiry is checked against. Must
  // outlive the server.
  const base::Clock* clock = nullptr;

  // Worker threads per listener kept alive when idle. Each open connection
  // holds one worker for its keep-alive life (cpp-httplib's model), so the
  // pool grows on demand up to `max_connections` and shrinks back after
  // 60 s idle. Beyond `max_connections` new connections wait for a worker.
  int threads = 8;
  int max_connections = 1024;
  // Kernel accept queue (cpp-httplib's own is 5: bursts lose SYNs).
  int listen_backlog = 1024;
  // Per read/write on a connection: cuts slow clients (slowloris).
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  // Idle keep-alive connections are kept this long: longer than the API
  // server's 90 s so it, not we, closes idle connections (no reuse race).
  absl::Duration keep_alive_timeout = absl::Seconds(120);
  // Requests per connection before "Connection: close" (spreads load across
  // replicas now and then; a new handshake per 10k requests costs nothing).
  int keep_alive_max_requests = 10000;
  // Larger bodies get 413; a compressed body (Content-Encoding other than
  // identity) gets 415 unread.
  size_t max_body_bytes = 4 << 20;
  // More request headers, or more header bytes, get 431 (the API server
  // sends about ten, in under 2 KiB).
  size_t max_header_count = 100;
  size_t max_header_bytes = 32 << 10;
  // On shutdown, /readyz answers 503 for this long before the listeners
  // stop accepting, so endpoints are withdrawn before connections fail.
  absl::Duration drain_delay = absl::ZeroDuration();

  std::vector<Route> routes;
};

// Named readiness conditions; /readyz is 200 when all are ready. Thread-safe.
class Readiness {
 public:
  virtual ~Readiness() = default;
  // Declares or updates a condition. `reason` explains a false one.
  virtual void Set(absl::string_view name, bool ready, absl::string_view reason = "") = 0;
  // Declares a condition computed when readiness is asked for: `check`
  // returns "" when ready, else the reason. It is called without the
  // readiness lock held, from a request thread; it must be cheap and must
  // not call back into this object. Replaces a Set() condition of the same
  // name (and Set() replaces a watched one).
  virtual void Watch(absl::string_view name, std::function<std::string()> check) = 0;
  // True when every condition is ready; otherwise false and `*why` lists the
  // conditions that are not.
  virtual bool Ready(std::string* why) const = 0;
};

class Server {
 public:
  virtual ~Server() = default;

  // Checks the options and loads the certificate. InvalidArgument names the
  // flag at fault. `registry` must outlive the server.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Create(Options options,
                                                                      metrics::Registry& registry);

  // Binds both listeners and starts serving. Unavailable when an address is
  // in use or cannot be bound.
  [[nodiscard]] virtual absl::Status Start() = 0;
  virtual int webhook_port() const = 0;
  virtual int api_port() const = 0;
  virtual Readiness& readiness() = 0;

  // Checks the certificate files now (the background check does the same
  // every cert_reload_interval). Returns the error of a broken new pair; the
  // old pair keeps serving.
  [[nodiscard]] virtual absl::Status ReloadCertificates() = 0;

  // Turns readiness false, waits drain_delay, stops accepting, lets requests
  // in flight finish and closes idle connections. DeadlineExceeded when
  // that takes longer than `grace` (the caller exits anyway).
  [[nodiscard]] virtual absl::Status Shutdown(absl::Duration grace) = 0;
};

// Splits "host:port" / "[v6]:port" / ":port" (empty host = 0.0.0.0).
[[nodiscard]] absl::Status ParseListenAddress(absl::string_view addr, std::string* host, int* port);

}  // namespace gangkeeper::server
