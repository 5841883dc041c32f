// gangkeeper: the event-driven HTTP/1.1 + TLS transport under the listeners.
//
// A few event-loop threads (Boost.Asio io_contexts, one per thread) serve
// every connection of both listeners; a connection costs memory, not a
// thread. Transport owns the loops, one acceptor per listener and each
// connection's state machine (TLS handshake, request header, body, answer,
// keep-alive) with its deadlines and caps. It knows nothing of routes: each
// complete request goes to a RequestSink, whose answer may come back from
// any thread, later (blocking handlers run off the loops).
//
// This header names no Boost type: Boost.Asio and Boost.Beast stay inside
// transport.cc, connection.cc and boost_src.cc (compile time).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/server/http.h"
#include "gangkeeper/server/server.h"
#include "src/server/tls.h"

namespace gangkeeper::server {

struct TransportOptions {
  int threads = 1;  // event-loop threads, shared by both listeners
  int listen_backlog = 1024;
  int max_connections = 10000;             // per listener
  int max_connections_per_source = 10000;  // per listener and source address
  absl::Duration handshake_timeout = absl::Seconds(10);
  // The whole request header must arrive within this, and then the whole
  // body within it again (slowloris).
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  // An idle keep-alive connection (nothing in flight) is closed after this.
  absl::Duration keep_alive_timeout = absl::Seconds(120);
  int keep_alive_max_requests = 10000;
  size_t max_body_bytes = 4 << 20;
  size_t max_header_count = 100;
  size_t max_header_bytes = 32 << 10;
};

// What a connection reports once its answer is written (or failed).
struct RequestRecord {
  std::string method;
  std::string path;
  std::string remote;
  int status = 0;
  size_t bytes = 0;
  int64_t micros = 0;  // from the first byte of the request to the answer written
};

class RequestSink {
 public:
  using Respond = std::function<void(HttpResponse)>;
  virtual ~RequestSink() = default;
  // Called on a loop thread for each complete request. `respond` is called
  // once, from any thread, now or later; it must not block the loop: hand
  // blocking work to another thread. Returns how long the connection waits
  // for the answer (absl::InfiniteDuration(): as long as it takes); past
  // that it answers 503 itself and drops the late answer. `respond` only
  // refers to the connection: when the connection is gone, the answer is
  // dropped. Answers on one connection go out in the order of its
  // requests (the next request is read once the answer is written).
  virtual absl::Duration Handle(Listener listener, HttpRequest request, Respond respond) = 0;
  // Called on a loop thread after each answer (metrics, access log).
  virtual void Done(Listener listener, const RequestRecord& record) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // `sink` and `certs` must outlive the transport. Registers the
  // connection metrics in `registry`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Transport>> Create(const TransportOptions& options,
                                                                         RequestSink* sink, CertificateSource* certs,
                                                                         metrics::Registry& registry);

  // Binds listener `listener` on host:port (port 0: a free one) with the TLS
  // policy; `client_ca_file` non-empty requires client certificates.
  // Unavailable when the address is in use. Returns the bound port.
  [[nodiscard]] virtual absl::StatusOr<int> Bind(Listener listener, const std::string& host, int port,
                                                 const std::string& client_ca_file) = 0;
  // Starts the loop threads and accepting on every bound listener.
  virtual void Run() = 0;
  // Stops accepting; answers written from now on carry "Connection: close".
  virtual void StopAccepting() = 0;
  // Closes every connection with nothing in flight (idle keep-alive or
  // still in the handshake); returns how many idle keep-alive ones it
  // closed (counted when their loop gets to them: call again to settle).
  virtual void CloseIdle() = 0;
  virtual int idle_closed() const = 0;
  virtual int open_connections() const = 0;
  // Stops the loops and joins their threads. Connections still open are
  // dropped.
  virtual void Stop() = 0;
};

}  // namespace gangkeeper::server
