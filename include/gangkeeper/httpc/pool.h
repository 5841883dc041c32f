// gangkeeper httpc: connections to one HTTP(S) server on cpp-httplib, for
// the Kubernetes client, the etcd client and the CLI.
//
// A Pool holds the target (host, port, TLS) and up to max_idle keep-alive
// connections. A call borrows an idle connection (one the server closed
// meanwhile is dropped on the way) or opens a new one, and gives it back
// when the answer was whole. A long streamed answer (a watch) gets a
// Connection of its own from Open(), with its own read timeout, that
// another thread may Stop().
//
// TLS verification is always on when TLS is: the server's certificate must
// chain to the given CA only (never the system's) and match the host or
// tls.server_name. The CA and the client certificate come from memory
// (parsed once by Create) or from files (read again by every new
// connection, so rotated files are picked up).
//
// Thread-safe: Pool from any thread; a Connection is used by one thread at
// a time, except Stop(), which any thread may call.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/httpc/request.h"

namespace gangkeeper::httpc {

struct TlsOptions {
  // Trust anchors: a PEM bundle, or a PEM file. One of the two is required.
  std::string ca_pem;
  std::string ca_file;
  // A client certificate and its key: PEM text, or PEM files; none = no
  // client certificate.
  std::string cert_pem, key_pem;
  std::string cert_file, key_file;
  // The name the certificate must carry (and SNI) when it is not the host;
  // the connection still goes to the host.
  std::string server_name;
};

struct PoolOptions {
  std::string host;  // name or address (IPv6 without brackets)
  int port = 0;
  std::optional<TlsOptions> tls;  // nullopt: plain HTTP
  // Connecting, writing, and each read of a pooled call.
  absl::Duration timeout = absl::Seconds(5);
  size_t max_idle = 4;
  // Measures how fast a pooled connection failed (Send); nullptr =
  // base::RealClock().
  const base::Clock* clock = nullptr;
};

// One connection (not yet connected until its first request).
class Connection {
 public:
  struct Impl;
  explicit Connection(std::unique_ptr<Impl> impl);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `request` and reads the whole answer into Response::body.
  Response Send(const Request& request);
  // Sends `request`; `on_head` gets the status and headers (false: stop),
  // then `on_body` every piece of the body as it arrives (false: stop).
  // Response::body stays empty.
  Response Stream(const Request& request, const std::function<bool(int status, const Headers& headers)>& on_head,
                  const std::function<bool(absl::string_view data)>& on_body);
  // Cuts a request in flight (its socket is shut down); the call in
  // progress fails with kCanceled or kRead. Any thread.
  void Stop();
  // The socket is open and nothing is waiting to be read on it: a kept-alive
  // connection the server has not closed (EOF or a TLS close_notify would be
  // readable).
  bool IdleUsable() const;
  bool IsOpen() const;

 private:
  std::unique_ptr<Impl> impl_;
};

class Pool {
 public:
  // InvalidArgument when the options cannot work: no host, a port outside
  // 1..65535, TLS without a CA, a CA or client certificate that is not PEM
  // (files are checked once here too), a certificate without its key.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Pool>> Create(PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // One request on a pooled connection, given back when the answer was
  // whole. A pooled connection that fails at once (faster than the
  // timeout; the server closed it as the request went out) is replaced and
  // the request sent again when `resend_if_stale` (Response::resent); leave
  // it false for requests that must not reach the server twice.
  Response Send(const Request& request, bool resend_if_stale = false);

  // An idle connection that is still usable, or a new one. `*reused` says
  // which.
  std::unique_ptr<Connection> Borrow(bool* reused = nullptr);
  // Keeps `c` for the next call when it is open and there is room (and the
  // pool is not shut down); otherwise closes it.
  void Return(std::unique_ptr<Connection> c);
  // A new connection, never pooled, whose reads wait up to `read_timeout`
  // (a watch's).
  std::unique_ptr<Connection> Open(absl::Duration read_timeout);

  // Closes the idle connections and keeps none from now on.
  void Shutdown();

  const PoolOptions& options() const { return options_; }
  size_t IdleCountForTest();

  struct Tls;

 private:
  Pool(PoolOptions options, std::unique_ptr<Tls> tls);
  std::unique_ptr<Connection> NewConnection(absl::Duration read_timeout);

  const PoolOptions options_;
  const std::unique_ptr<Tls> tls_;  // parsed client certificate; null without TLS
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// InvalidArgument unless the file at `path` holds a PEM certificate (or,
// with `key`, a PEM private key): "<what> "<path>": cannot open it" or
// "...: not a PEM certificate". For a configuration's early check; the
// pool reads the files again for every new connection.
[[nodiscard]] absl::Status CheckPemFile(const std::string& path, absl::string_view what, bool key);

}  // namespace gangkeeper::httpc
