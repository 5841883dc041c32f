// gangkeeper: the two TLS listeners (webhook and API), their routing,
// certificate reload, readiness and graceful shutdown.
//
// Server::Create() validates the options and loads the certificate;
// Start() binds both listeners (port 0 picks a free port, for tests) and
// serves on a few event-loop threads (a connection costs memory, not a
// thread); Shutdown() drains (waiting for asynchronous answers too).
// Handlers run on a worker pool (or, for a route that never blocks, on a
// loop thread; an asynchronous route starts on the loop and answers later
// from any thread) and must be thread-safe. `src/cli` wires the
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
  // False for a handler that never blocks and is quick (no I/O, no lock
  // held for long, microseconds of CPU): it then runs on the event loop,
  // saving two thread hand-offs per request. A handler that may block (the
  // webhook's /validate waits for the broker and the journal's fsync, the
  // API's writes) keeps the default and runs on the worker pool.
  bool may_block = true;
  // Instead of `handler`: a handler that answers later, from any thread,
  // through its Responder (http.h). It is called on the event loop (so it
  // must not block: it hands blocking work to Responder::RunBlocking or to
  // something that calls back, like the broker's durable acknowledgement)
  // and the loop serves other connections meanwhile. `may_block` does not
  // apply. An answer that has not come within Options::async_timeout is
  // given by the server: 503 DeadlineExceeded.
  AsyncHandler async_handler;
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

  // Event-loop threads, shared by both listeners; 0: one per core. Each
  // open connection costs memory, not a thread.
  int threads = 0;
  // Open connections per listener, and per listener and source address.
  // When one is reached the oldest idle connection (or one still in its
  // handshake) is closed for the new one; with none idle the new one is
  // closed. Either way a log line and
  // gangkeeper_http_connection_limits_total say so.
  int max_connections = 10000;
  int max_connections_per_source = 1000;
  // Most worker threads for handlers that may block (the pool keeps
  // max(2, threads) and grows on demand; beyond this, requests queue).
  int max_handler_threads = 128;
  // Kernel accept queue (cpp-httplib's own is 5: bursts lose SYNs).
  int listen_backlog = 1024;
  // The TLS handshake must end within this (half-open connections).
  absl::Duration handshake_timeout = absl::Seconds(10);
  // A request's whole header must arrive within this, however slowly it
  // trickles in (slowloris), and then its whole body within it again.
  absl::Duration read_timeout = absl::Seconds(10);
  // Writing one answer must end within this (a client that stops reading).
  absl::Duration write_timeout = absl::Seconds(10);
  // Idle keep-alive connections (nothing in flight) are kept this long:
  // longer than the API server's 90 s so it, not we, closes idle
  // connections (no reuse race).
  absl::Duration keep_alive_timeout = absl::Seconds(120);
  // Requests per connection before "Connection: close" (spreads load across
  // replicas now and then; a new handshake per 10k requests costs nothing).
  // Each connection draws its own limit between nine tenths of this and
  // this, so connections opened together do not all reconnect together.
  int keep_alive_max_requests = 10000;
  // Larger bodies get 413; a compressed body (Content-Encoding other than
  // identity) gets 415 unread.
  size_t max_body_bytes = 4 << 20;
  // More request headers, or more header bytes, get 431 (the API server
  // sends about ten, in under 2 KiB).
  size_t max_header_count = 100;
  size_t max_header_bytes = 32 << 10;
  // An asynchronous route (Route::async_handler) that has not answered
  // within this gets 503 (DeadlineExceeded) and its late answer is
  // dropped; the connection goes on. Above the broker's acknowledgement
  // timeout (5 s), so that its own answer comes first.
  absl::Duration async_timeout = absl::Seconds(10);
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
  // A note /readyz reports without failing readiness (e.g. "kueue:
  // Kueue's own controller runs; gangkeeper publishes nothing to Kueue's
  // API"): `check` returns "" when there is nothing to say. Called like a
  // Watch() check.
  virtual void Note(absl::string_view name, std::function<std::string()> check) = 0;
  // The notes that have something to say now, as "name: text".
  virtual std::vector<std::string> Notes() const = 0;
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
