// gangkeeper: TLS listeners on cpp-httplib (see server.h).
//
// Each listener is an httplib::SSLServer whose SSL_CTX gets gangkeeper's TLS
// policy and a certificate callback (tls.h), an elastic worker pool
// (task_queue.h), a larger accept backlog, SO_REUSEADDR without
// SO_REUSEPORT (a second instance on the same port fails to start instead
// of silently sharing it), TCP_NODELAY, and long keep-alive. Every request
// goes through Dispatch(); httplib's own routing only forwards to it.
#include "gangkeeper/server/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <condition_variable>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/base/status_macros.h"
#include "src/server/task_queue.h"
#include "src/server/tls.h"

namespace gangkeeper::server {
namespace {

constexpr absl::string_view kOtherPath = "other";

class ReadinessImpl final : public Readiness {
 public:
  void Set(absl::string_view name, bool ready, absl::string_view reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.erase(std::string(name));
    conditions_[std::string(name)] = ready ? std::string() : (reason.empty() ? "not ready" : std::string(reason));
  }
  void Watch(absl::string_view name, std::function<std::string()> check) override {
    std::lock_guard<std::mutex> lock(mu_);
    conditions_.erase(std::string(name));
    watched_[std::string(name)] = std::make_shared<std::function<std::string()>>(std::move(check));
  }
  bool Ready(std::string* why) const override {
    std::map<std::string, std::string> now;
    std::map<std::string, std::shared_ptr<std::function<std::string()>>> checks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      now = conditions_;
      checks = watched_;
    }
    for (const auto& [name, check] : checks) now[name] = (*check)();
    std::vector<std::string> waiting;
    for (const auto& [name, reason] : now) {
      if (!reason.empty()) waiting.push_back(absl::StrCat(name, ": ", reason));
    }
    if (why != nullptr) *why = absl::StrJoin(waiting, "; ");
    return waiting.empty();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> conditions_;  // name -> "" when ready, else the reason
  std::map<std::string, std::shared_ptr<std::function<std::string()>>> watched_;
};

// Gives access to the listening socket (protected in httplib::Server) to
// raise the backlog after bind.
class GkSslServer final : public httplib::SSLServer {
 public:
  using httplib::SSLServer::SSLServer;
  int listening_fd() const { return svr_sock_; }
};

// Per-thread request start time, set when routing begins and read by the
// access logger on the same worker thread.
thread_local bool tls_request_started = false;
thread_local int64_t tls_request_start_us = 0;

// Stops reading on every connection accepted on one of `ports` (sockets of
// this process whose local port is ours, other than the listening ones):
// a worker waiting on an idle keep-alive connection sees the end of it and
// closes it; a response being written still goes out. httplib's stop()
// alone leaves each idle connection's worker waiting out its keep-alive
// timeout (the API server keeps such connections open all the time).
int ShutDownReading(const std::vector<int>& ports, const std::vector<int>& listening) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &fd) || fd < 0) continue;
    if (std::find(listening.begin(), listening.end(), fd) != listening.end()) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    int port = -1;
    if (addr.ss_family == AF_INET) port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (port <= 0 || std::find(ports.begin(), ports.end(), port) == ports.end()) continue;
    if (::shutdown(fd, SHUT_RD) == 0) ++n;
  }
  return n;
}

int64_t NowMicros(const base::Stopwatch& epoch) { return absl::ToInt64Microseconds(epoch.Elapsed()); }

std::string ClientSubject(const httplib::Request& req) {
  if (req.ssl == nullptr) return "";
  X509* peer = SSL_get1_peer_certificate(const_cast<SSL*>(req.ssl));
  if (peer == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(peer), buf, sizeof(buf));
  X509_free(peer);
  return buf;
}

// Metric handles resolved once at start-up (STYLE §6.9 rule 7).
struct ServerMetrics {
  metrics::CounterFamily* requests;
  metrics::HistogramFamily* durations;
  metrics::CounterFamily* reloads;
  metrics::Gauge* cert_expiry;
};

absl::StatusOr<ServerMetrics> RegisterServerMetrics(metrics::Registry& registry) {
  ServerMetrics m;
  GK_ASSIGN_OR_RETURN(m.requests, registry.AddCounter("gangkeeper_http_requests_total",
                                                      "HTTP requests served, by listener, route and status code.",
                                                      {"listener", "path", "code"}));
  GK_ASSIGN_OR_RETURN(m.durations,
                      registry.AddHistogram("gangkeeper_http_request_duration_seconds",
                                            "Time from routing a request to its response, by listener and route.",
                                            {"listener", "path"}, metrics::LatencyBuckets()));
  GK_ASSIGN_OR_RETURN(m.reloads, registry.AddCounter("gangkeeper_tls_certificate_reloads_total",
                                                     "Serving certificate reloads by result (ok, error).",
                                                     {"result"}));
  GK_ASSIGN_OR_RETURN(metrics::GaugeFamily * expiry,
                      registry.AddGauge("gangkeeper_tls_certificate_expiry_timestamp_seconds",
                                        "notAfter of the serving certificate in use, as Unix time."));
  m.cert_expiry = &expiry->WithLabels();
  return m;
}

class ServerImpl final : public Server {
 public:
  ServerImpl(Options options, metrics::Registry& registry, const ServerMetrics& m,
             std::unique_ptr<CertificateSource> certs);
  ~ServerImpl() override;

  absl::Status Start() override;
  int webhook_port() const override { return ports_[0]; }
  int api_port() const override { return ports_[1]; }
  Readiness& readiness() override { return readiness_; }
  absl::Status ReloadCertificates() override;
  absl::Status Shutdown(absl::Duration grace) override;

 private:
  struct Listening {
    Listener listener;
    std::string host;
    int port = 0;
    std::unique_ptr<GkSslServer> http;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::atomic<int64_t> in_flight_{0};  // routed, not yet logged

  // Creates listener `l`'s server with its TLS context, handlers and bound
  // socket (SetUp: ConfigureConnections, InstallHandlers, Bind).
  absl::Status SetUp(Listening& l);
  void ConfigureConnections(httplib::Server& http) const;
  void InstallHandlers(httplib::Server& http, Listener listener);
  absl::Status Bind(Listening& l);
  // A routed request: adapted to an HttpRequest, dispatched, answered.
  void Forward(Listener listener, const httplib::Request& req, httplib::Response& res) const;
  // Errors httplib answers itself (413, 400, ...), in our JSON shape.
  static httplib::Server::HandlerResponse AnswerHttplibError(const httplib::Request& req, httplib::Response& res);
  // A handler threw (a bug): logged, 500.
  void OnHandlerException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) const;
  std::optional<HttpResponse> RefuseBeforeTheBody(const httplib::Request& req) const;
  HttpResponse Dispatch(Listener listener, const HttpRequest& req) const;
  std::string RouteLabel(Listener listener, const std::string& path) const;
  void OnRequestDone(Listener listener, const httplib::Request& req, const httplib::Response& res);
  void CertWatchLoop();

  Options options_;
  metrics::Registry& registry_;
  std::unique_ptr<CertificateSource> certs_;
  ReadinessImpl readiness_;
  base::Stopwatch epoch_;
  std::shared_ptr<spdlog::logger> log_ = base::GetLogger("server");
  std::shared_ptr<spdlog::logger> access_log_ = base::GetLogger("access");

  // Routing tables, fixed after construction.
  absl::flat_hash_map<std::string, const Route*> exact_;  // "L METHOD PATH"
  std::vector<const Route*> prefixes_;
  absl::flat_hash_map<std::string, bool> known_paths_;  // "L PATH" -> true

  metrics::CounterFamily* requests_;
  metrics::HistogramFamily* durations_;
  metrics::CounterFamily* reloads_;
  metrics::Gauge* cert_expiry_;

  Listening listeners_[2];
  int ports_[2] = {0, 0};
  bool started_ = false;

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;  // guarded by watch_mu_
  std::thread watcher_;
};

ServerImpl::ServerImpl(Options options, metrics::Registry& registry, const ServerMetrics& m,
                       std::unique_ptr<CertificateSource> certs)
    : options_(std::move(options)),
      registry_(registry),
      certs_(std::move(certs)),
      requests_(m.requests),
      durations_(m.durations),
      reloads_(m.reloads),
      cert_expiry_(m.cert_expiry) {
  for (const Route& r : options_.routes) {
    std::string l(ListenerName(r.listener));
    known_paths_[absl::StrCat(l, " ", r.path)] = true;
    if (r.prefix) {
      prefixes_.push_back(&r);
    } else {
      exact_[absl::StrCat(l, " ", r.method, " ", r.path)] = &r;
    }
  }
  if (auto pair = certs_->current()) cert_expiry_->Set(absl::ToDoubleSeconds(pair->not_after() - absl::UnixEpoch()));
  readiness_.Set("listeners", false, "not started");
}

ServerImpl::~ServerImpl() {
  if (started_) {
    absl::Status s = Shutdown(absl::Seconds(5));
    if (!s.ok()) log_->warn("shutdown in destructor: {}", s.ToString());
  }
}

// The request header that carries a refused Content-Encoding from the
// pre-routing handler to the route (see RefuseBeforeTheBody).
constexpr char kRefusedEncoding[] = "X-Gangkeeper-Refused-Content-Encoding";

// What is refused from the headers alone, before the body is read (#20):
// more headers, or more header bytes, than any API server or client sends
// (431). And a compressed body: httplib (built with zlib and brotli) would
// inflate it while reading, before any limit or authentication (a 1 MB
// gzip body grows to a gigabyte); the API server never compresses what it
// sends. Its Content-Encoding header is taken away here, so that httplib
// reads the body as it came (at most max_body_bytes on the wire, else 413)
// without inflating it, and the route answers 415. (Closing without
// reading it would reset the connection under the client's feet, and the
// answer would be lost.) `req` is httplib's own, non-const request object,
// handed to this hook as const.
std::optional<HttpResponse> ServerImpl::RefuseBeforeTheBody(const httplib::Request& req) const {
  size_t header_bytes = 0;
  for (const auto& [k, v] : req.headers) header_bytes += k.size() + v.size() + 4;  // "k: v\r\n"
  if (req.headers.size() > options_.max_header_count || header_bytes > options_.max_header_bytes) {
    return ErrorResponse(431, absl::StrCat("request headers too large: ", req.headers.size(), " headers, ",
                                           header_bytes, " bytes (at most ", options_.max_header_count,
                                           " headers and ", options_.max_header_bytes, " bytes)"));
  }
  auto& mutable_req = const_cast<httplib::Request&>(req);  // NOLINT: see above
  mutable_req.headers.erase(kRefusedEncoding);              // only we may set it
  if (req.has_header("Content-Encoding")) {
    const std::string encoding = req.get_header_value("Content-Encoding");
    const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(encoding));
    mutable_req.headers.erase("Content-Encoding");
    if (!lower.empty() && lower != "identity") mutable_req.headers.emplace(kRefusedEncoding, encoding);
  }
  return std::nullopt;
}

absl::Status ServerImpl::SetUp(Listening& l) {
  const bool webhook = l.listener == Listener::kWebhook;
  std::string client_ca = webhook ? options_.client_ca_file : "";
  CertificateSource* certs = certs_.get();
  absl::Status tls_status;
  l.http = std::make_unique<GkSslServer>([&](SSL_CTX& ctx) {
    tls_status = ApplyTlsPolicy(&ctx, client_ca);
    certs->Attach(&ctx);
    return tls_status.ok();
  });
  if (!tls_status.ok()) return tls_status;
  if (!l.http->is_valid()) return absl::InternalError("cannot create the TLS server context");
  ConfigureConnections(*l.http);
  InstallHandlers(*l.http, l.listener);
  return Bind(l);
}

void ServerImpl::ConfigureConnections(httplib::Server& http) const {
  const size_t min_threads = static_cast<size_t>(options_.threads);
  const size_t max_threads = static_cast<size_t>(options_.max_connections);
  http.new_task_queue = [min_threads, max_threads] {
    return new ElasticTaskQueue(min_threads, max_threads, absl::Seconds(60));
  };
  http.set_socket_options([](socket_t fd) {
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  });
  http.set_tcp_nodelay(true);
  http.set_keep_alive_max_count(static_cast<size_t>(options_.keep_alive_max_requests));
  http.set_keep_alive_timeout(absl::ToInt64Seconds(options_.keep_alive_timeout));
  http.set_read_timeout(absl::ToChronoMicroseconds(options_.read_timeout));
  http.set_write_timeout(absl::ToChronoMicroseconds(options_.write_timeout));
  http.set_payload_max_length(options_.max_body_bytes);
}

void ServerImpl::InstallHandlers(httplib::Server& http, Listener listener) {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    in_flight_.fetch_add(1);
    tls_request_started = true;
    tls_request_start_us = NowMicros(epoch_);
    if (std::optional<HttpResponse> refused = RefuseBeforeTheBody(req)) {
      res.status = refused->status;
      res.set_header("Connection", "close");  // its unread body must not be taken for a next request
      res.set_content(refused->body, refused->content_type);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto forward = [this, listener](const httplib::Request& req, httplib::Response& res) { Forward(listener, req, res); };
  http.Get(".*", forward);
  http.Post(".*", forward);
  http.Put(".*", forward);
  http.Delete(".*", forward);
  http.Patch(".*", forward);
  http.Options(".*", forward);
  // Errors httplib produces itself (413, 400 for a broken request line)
  // get the same JSON shape as ours.
  http.set_error_handler(httplib::Server::HandlerWithResponse(AnswerHttplibError));
  http.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    OnHandlerException(req, res, ep);
  });
  http.set_logger([this, listener](const httplib::Request& req, const httplib::Response& res) {
    OnRequestDone(listener, req, res);
  });
}

void ServerImpl::Forward(Listener listener, const httplib::Request& req, httplib::Response& res) const {
  if (req.has_header(kRefusedEncoding)) {  // its body was read as it came, not inflated
    HttpResponse refused =
        ErrorResponse(415, absl::StrCat("Content-Encoding \"", req.get_header_value(kRefusedEncoding),
                                        "\" is not accepted: send the body uncompressed (at most ",
                                        options_.max_body_bytes, " bytes)"));
    res.status = refused.status;
    res.set_content(std::move(refused.body), refused.content_type);
    return;
  }
  HttpRequest in;
  in.method = req.method;
  in.path = req.path;
  in.body = req.body;
  in.remote_addr = req.remote_addr;
  for (const auto& [k, v] : req.params) in.query.emplace_back(k, v);
  in.headers.reserve(req.headers.size());
  for (const auto& [k, v] : req.headers) in.headers.emplace_back(absl::AsciiStrToLower(k), v);
  if (listener == Listener::kWebhook && !options_.client_ca_file.empty()) in.client_subject = ClientSubject(req);
  HttpResponse out = Dispatch(listener, in);
  res.status = out.status;
  for (const auto& [k, v] : out.headers) res.set_header(k, v);
  res.set_content(std::move(out.body), out.content_type);
}

httplib::Server::HandlerResponse ServerImpl::AnswerHttplibError(const httplib::Request&, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // one of ours
  // httplib could not read the request. For broken or timed-out headers
  // (a slow client) the stream is in an unknown state and httplib would
  // wait for another request on it: end the read side so its next read
  // sees EOF and the connection closes after this answer. For a body
  // over the limit, ask the client to close; shutting down here would
  // discard the unread body and reset the connection before the 413
  // reaches the client.
  if (res.status == 400 || res.status == 413) res.set_header("Connection", "close");
  if (res.status == 400) {
    if (int fd = CurrentConnectionFd(); fd >= 0) ::shutdown(fd, SHUT_RD);
  }
  std::string message = res.status == 413   ? "request body too large"
                        : res.status == 400 ? "malformed HTTP request"
                                            : absl::StrCat("HTTP ", res.status);
  HttpResponse err = ErrorResponse(res.status, message);
  res.set_content(err.body, err.content_type);
  return httplib::Server::HandlerResponse::Handled;
}

void ServerImpl::OnHandlerException(const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) const {
  std::string what = "unknown exception";
  try {
    if (ep) std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  log_->error("bug: handler for {} {} threw: {}", req.method, req.path, what);
  HttpResponse err = ErrorResponse(absl::InternalError("internal error; see the server log"));
  res.status = err.status;
  res.set_content(err.body, err.content_type);
}

// Binds now so that errors surface from Start().
absl::Status ServerImpl::Bind(Listening& l) {
  const bool webhook = l.listener == Listener::kWebhook;
  const Listener listener = l.listener;
  httplib::Server& http = *l.http;
  if (l.port == 0) {
    l.port = http.bind_to_any_port(l.host);
    if (l.port <= 0) {
      return absl::UnavailableError(absl::StrCat("cannot bind ", l.host, ":0 (", std::strerror(errno), ")"));
    }
  } else if (!http.bind_to_port(l.host, l.port)) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", ListenerName(listener), " listener on ", l.host, ":",
                                               l.port, " (", std::strerror(errno),
                                               "); is another gangkeeper running? Pick another port with --",
                                               webhook ? "webhook-addr" : "api-addr"));
  }
  if (::listen(l.http->listening_fd(), options_.listen_backlog) != 0) {
    log_->warn("listen backlog {} not applied: {}", options_.listen_backlog, std::strerror(errno));
  }
  return absl::OkStatus();
}

absl::Status ServerImpl::Start() {
  if (started_) return absl::FailedPreconditionError("server already started");
  const std::string* addrs[2] = {&options_.webhook_addr, &options_.api_addr};
  for (int i = 0; i < 2; ++i) {
    Listening& l = listeners_[i];
    l.listener = i == 0 ? Listener::kWebhook : Listener::kApi;
    absl::Status s = ParseListenAddress(*addrs[i], &l.host, &l.port);
    if (!s.ok()) return s;
    s = SetUp(l);
    if (!s.ok()) {
      for (int j = 0; j <= i; ++j) listeners_[j].http.reset();
      return s;
    }
    ports_[i] = l.port;
  }
  for (Listening& l : listeners_) {
    l.thread = std::thread([&l] {
      l.http->listen_after_bind();
      l.done.store(true);
    });
  }
  started_ = true;
  watcher_ = std::thread([this] { CertWatchLoop(); });
  readiness_.Set("listeners", true, "");
  log_->info("webhook listener on {}:{}, API listener on {}:{}", listeners_[0].host, ports_[0], listeners_[1].host,
             ports_[1]);
  return absl::OkStatus();
}

absl::Status ServerImpl::ReloadCertificates() {
  bool changed = false;
  absl::Status s = certs_->Reload(&changed);
  if (!s.ok()) {
    reloads_->WithLabels({"error"}).Increment();
    log_->error("TLS certificate reload refused, the previous certificate keeps serving: {}", s.message());
    return s;
  }
  if (changed) {
    auto pair = certs_->current();
    reloads_->WithLabels({"ok"}).Increment();
    cert_expiry_->Set(absl::ToDoubleSeconds(pair->not_after() - absl::UnixEpoch()));
    log_->info("TLS certificate reloaded: serial={} not_after={}", pair->serial(),
               absl::FormatTime(absl::RFC3339_sec, pair->not_after(), absl::UTCTimeZone()));
  }
  return absl::OkStatus();
}

void ServerImpl::CertWatchLoop() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stopping_) {
    watch_cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.cert_reload_interval));
    if (stopping_) break;
    lock.unlock();
    (void)ReloadCertificates();  // logged and counted inside
    lock.lock();
  }
}

absl::Status ServerImpl::Shutdown(absl::Duration grace) {
  if (!started_) return absl::OkStatus();
  started_ = false;
  base::Stopwatch clock;
  readiness_.Set("shutdown", false, "shutting down");
  if (options_.drain_delay > absl::ZeroDuration()) {
    log_->info("draining: /readyz fails for {} before the listeners close", absl::FormatDuration(options_.drain_delay));
    absl::SleepFor(std::min(options_.drain_delay, grace));
  }
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // stop() closes the listening socket; httplib then finishes requests in
  // flight and joins its workers, each once its connection ends.
  std::vector<int> ports, listening;
  for (Listening& l : listeners_) {
    ports.push_back(l.port);
    listening.push_back(l.http->listening_fd());
  }
  for (Listening& l : listeners_) l.http->stop();
  // Requests in flight finish; then idle keep-alive connections are ended
  // (again while workers remain: one may have been between requests). A
  // request still arriving is not yet counted in flight, so connections are
  // left alone for a moment first: clients send a request in one go.
  const absl::Duration settle = std::min(absl::Seconds(1), grace / 4);
  const absl::Duration stopped_at = clock.Elapsed();
  int closed = 0;
  for (Listening& l : listeners_) {
    while (!l.done.load() && clock.Elapsed() < grace) {
      if (in_flight_.load() == 0 && clock.Elapsed() - stopped_at >= settle) {
        closed = std::max(closed, ShutDownReading(ports, listening));
      }
      absl::SleepFor(absl::Milliseconds(in_flight_.load() == 0 ? 50 : 5));
    }
  }
  if (closed > 0) log_->info("shutdown: ended {} idle keep-alive connection(s)", closed);
  bool all_done = true;
  for (Listening& l : listeners_) {
    if (l.done.load()) {
      l.thread.join();
    } else {
      all_done = false;
      l.thread.detach();  // the process is about to exit
    }
  }
  base::FlushLogs();
  if (!all_done) {
    return absl::DeadlineExceededError(
        absl::StrCat("requests still in flight after the shutdown grace of ", absl::FormatDuration(grace)));
  }
  for (Listening& l : listeners_) l.http.reset();
  return absl::OkStatus();
}

std::string ServerImpl::RouteLabel(Listener listener, const std::string& path) const {
  absl::string_view l = ListenerName(listener);
  if (path == "/healthz" || path == "/readyz" || (listener == Listener::kApi && path == "/metrics")) return path;
  if (known_paths_.contains(absl::StrCat(l, " ", path))) return path;
  for (const Route* r : prefixes_) {
    if (r->listener == listener && absl::StartsWith(path, r->path)) return r->path;
  }
  return std::string(kOtherPath);
}

HttpResponse ServerImpl::Dispatch(Listener listener, const HttpRequest& req) const {
  absl::string_view l = ListenerName(listener);
  // A route of its own for a built-in path (the API's /metrics, which asks
  // for a token) comes first.
  auto it = exact_.find(absl::StrCat(l, " ", req.method, " ", req.path));
  if (it != exact_.end()) return it->second->handler(req);
  if (req.path == "/healthz" || req.path == "/readyz" ||
      (listener == Listener::kApi && req.path == "/metrics")) {
    if (req.method != "GET") return ErrorResponse(405, absl::StrCat(req.path, " supports GET only"));
    HttpResponse r;
    if (req.path == "/healthz") {
      r.body = R"({"status":"ok"})";
    } else if (req.path == "/readyz") {
      std::string why;
      if (readiness_.Ready(&why)) {
        r.body = R"({"status":"ready"})";
      } else {
        r.status = 503;
        r.body = absl::StrCat(R"({"status":"not ready","reason":")", base::JsonEscape(why), "\"}");
      }
    } else {
      r.content_type = std::string(metrics::kPrometheusContentType);
      r.body = registry_.ExposePrometheus();
    }
    return r;
  }
  for (const Route* r : prefixes_) {
    if (r->listener == listener && r->method == req.method && absl::StartsWith(req.path, r->path)) {
      return r->handler(req);
    }
  }
  if (RouteLabel(listener, req.path) != kOtherPath) {
    return ErrorResponse(405, absl::StrCat("method ", req.method, " is not allowed on ", req.path));
  }
  return ErrorResponse(404, absl::StrCat("no such path on the ", l, " listener: ", req.path));
}

void ServerImpl::OnRequestDone(Listener listener, const httplib::Request& req, const httplib::Response& res) {
  if (tls_request_started) in_flight_.fetch_sub(1);
  int64_t micros = 0;
  if (tls_request_started) {
    micros = NowMicros(epoch_) - tls_request_start_us;
    tls_request_started = false;
  }
  std::string label = RouteLabel(listener, req.path);
  std::string l(ListenerName(listener));
  requests_->WithLabels({l, label, absl::StrCat(res.status)}).Increment();
  durations_->WithLabels({l, label}).Observe(static_cast<double>(micros) / 1e6);
  access_log_->info("listener={} remote={} method={} path={} status={} bytes={} us={}", l, req.remote_addr,
                    req.method, req.path, res.status, res.body.size(), micros);
}

}  // namespace

absl::string_view ListenerName(Listener listener) { return listener == Listener::kWebhook ? "webhook" : "api"; }

absl::Status ParseListenAddress(absl::string_view addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", addr, "\": expected host:port, [v6]:port or :port"));
  }
  absl::string_view h = addr.substr(0, colon);
  absl::string_view p = addr.substr(colon + 1);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int value = 0;
  if (!absl::SimpleAtoi(p, &value) || value < 0 || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", addr, "\": port must be a number from 0 to 65535"));
  }
  *host = h.empty() ? "0.0.0.0" : std::string(h);
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Create(Options options, metrics::Registry& registry) {
  std::string host;
  int port = 0;
  absl::Status s = ParseListenAddress(options.webhook_addr, &host, &port);
  if (!s.ok()) return base::Annotate(s, "--webhook-addr");
  s = ParseListenAddress(options.api_addr, &host, &port);
  if (!s.ok()) return base::Annotate(s, "--api-addr");
  if (options.threads < 1 || options.threads > 4096) {
    return absl::InvalidArgumentError("--threads must be between 1 and 4096");
  }
  if (options.max_connections < options.threads || options.max_connections > 65536) {
    return absl::InvalidArgumentError("--max-connections must be at least --threads and at most 65536");
  }
  if (options.keep_alive_max_requests < 1) {
    return absl::InvalidArgumentError("--keep-alive-max-requests must be at least 1");
  }
  if (options.read_timeout <= absl::ZeroDuration() || options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--read-timeout and --write-timeout must be positive");
  }
  if (options.keep_alive_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--keep-alive-timeout must be at least 1s");
  }
  if (options.cert_reload_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError("--tls-reload-interval must be at least 10ms");
  }
  for (const Route& r : options.routes) {
    if (r.path.empty() || r.path[0] != '/' || !r.handler) {
      return absl::InvalidArgumentError(absl::StrCat("route \"", r.path, "\": path must start with / and have a handler"));
    }
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("server::Options.clock is required");
  absl::StatusOr<std::unique_ptr<CertificateSource>> certs =
      CertificateSource::Create(options.tls_cert_file, options.tls_key_file, options.clock);
  if (!certs.ok()) return base::Annotate(certs.status(), "--tls-cert/--tls-key");
  if (!options.client_ca_file.empty()) {
    SSL_CTX* probe = SSL_CTX_new(TLS_server_method());
    absl::Status ca = ApplyTlsPolicy(probe, options.client_ca_file);
    SSL_CTX_free(probe);
    if (!ca.ok()) return ca;
  }
  absl::StatusOr<ServerMetrics> m = RegisterServerMetrics(registry);
  if (!m.ok()) return m.status();
  return std::unique_ptr<Server>(new ServerImpl(std::move(options), registry, *m, *std::move(certs)));
}

}  // namespace gangkeeper::server
