// gangkeeper: the two TLS listeners (see server.h): options, routing,
// readiness, certificate reload and shutdown. The wire side (event loops,
// TLS, HTTP/1.1, deadlines and caps) is the Transport (transport.h); every
// complete request comes to Handle(), which answers built-in paths on the
// loop, runs routes that may block on the worker pool (task_queue.h),
// whose answer goes back to the connection's loop, and starts asynchronous
// routes on the loop with a Responder for their later answer.
#include "gangkeeper/server/server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
#include "src/server/transport.h"

namespace gangkeeper::server {

// One asynchronous request's answer path (http.h).
struct Responder::State {
  RequestSink::Respond respond;  // only refers to the connection
  std::shared_ptr<ElasticTaskQueue> pool;
  std::shared_ptr<spdlog::logger> log;
  std::string what;  // "POST /validate"
  std::atomic<bool> answered{false};

  ~State() {
    if (answered.load()) return;
    log->error("bug: asynchronous handler for {} let go of its request without answering", what);
    respond(ErrorResponse(absl::InternalError("internal error; see the server log")));
  }
};

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
  void Note(absl::string_view name, std::function<std::string()> check) override {
    std::lock_guard<std::mutex> lock(mu_);
    notes_[std::string(name)] = std::make_shared<std::function<std::string()>>(std::move(check));
  }
  std::vector<std::string> Notes() const override {
    std::map<std::string, std::shared_ptr<std::function<std::string()>>> notes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      notes = notes_;
    }
    std::vector<std::string> out;
    for (const auto& [name, check] : notes) {
      std::string text = (*check)();
      if (!text.empty()) out.push_back(absl::StrCat(name, ": ", text));
    }
    return out;
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
  std::map<std::string, std::shared_ptr<std::function<std::string()>>> notes_;  // reported, never failing
};

// A process-unique id for each server (never reused, unlike an address).
uint64_t NextServerId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
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

class ServerImpl final : public Server, public RequestSink {
 public:
  ServerImpl(Options options, metrics::Registry& registry, const ServerMetrics& m,
             std::unique_ptr<CertificateSource> certs);
  ~ServerImpl() override;

  // Builds the transport (its metrics go to `registry`).
  absl::Status Init(metrics::Registry& registry);

  absl::Status Start() override;
  int webhook_port() const override { return ports_[0]; }
  int api_port() const override { return ports_[1]; }
  Readiness& readiness() override { return readiness_; }
  absl::Status ReloadCertificates() override;
  absl::Status Shutdown(absl::Duration grace) override;

  // RequestSink (loop threads).
  absl::Duration Handle(Listener listener, HttpRequest request, Respond respond) override;
  void Done(Listener listener, const RequestRecord& record) override;

 private:
  // What answers a request: a route's handler, the built-in /metrics
  // (exposition can take a while: off the loop), or an answer at once.
  struct Resolved {
    const Route* route = nullptr;
    bool metrics = false;
    HttpResponse answer;
  };
  Resolved Resolve(Listener listener, const HttpRequest& req) const;
  HttpResponse Call(const Route& route, const HttpRequest& req) const;
  void CallAsync(const Route& route, HttpRequest req, Respond respond);
  HttpResponse BuiltIn(const HttpRequest& req) const;
  std::string RouteLabel(Listener listener, const std::string& path) const;
  void CertWatchLoop();
  // Ends connections during Shutdown; false when `grace` ran out first.
  bool DrainConnections(absl::Duration grace, const base::Stopwatch& clock);

  Options options_;
  metrics::Registry& registry_;
  std::unique_ptr<CertificateSource> certs_;
  ReadinessImpl readiness_;
  std::shared_ptr<spdlog::logger> log_ = base::GetLogger("server");
  std::shared_ptr<spdlog::logger> access_log_ = base::GetBatchingLogger("access");

  // Routing tables, fixed after construction.
  absl::flat_hash_map<std::string, const Route*> exact_;  // "L METHOD PATH"
  std::vector<const Route*> prefixes_;
  absl::flat_hash_map<std::string, bool> known_paths_;  // "L PATH" -> true

  const uint64_t id_ = NextServerId();  // keys the loop threads' metric caches (Done)
  metrics::CounterFamily* requests_;
  metrics::HistogramFamily* durations_;
  metrics::CounterFamily* reloads_;
  metrics::Gauge* cert_expiry_;

  // The transport outlives the pool: a handler finishing on the pool posts
  // its answer to the transport's loops. Responders share the pool (their
  // RunBlocking after shutdown finds it shut down, not freed).
  std::unique_ptr<Transport> transport_;
  std::shared_ptr<ElasticTaskQueue> pool_;
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

int LoopThreads(const Options& o) {
  if (o.threads > 0) return o.threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

absl::Status ServerImpl::Init(metrics::Registry& registry) {
  TransportOptions t;
  t.threads = LoopThreads(options_);
  t.listen_backlog = options_.listen_backlog;
  t.max_connections = options_.max_connections;
  t.max_connections_per_source = options_.max_connections_per_source;
  t.handshake_timeout = options_.handshake_timeout;
  t.read_timeout = options_.read_timeout;
  t.write_timeout = options_.write_timeout;
  t.keep_alive_timeout = options_.keep_alive_timeout;
  t.keep_alive_max_requests = options_.keep_alive_max_requests;
  t.max_body_bytes = options_.max_body_bytes;
  t.max_header_count = options_.max_header_count;
  t.max_header_bytes = options_.max_header_bytes;
  GK_ASSIGN_OR_RETURN(transport_, Transport::Create(t, this, certs_.get(), registry));
  return absl::OkStatus();
}

ServerImpl::~ServerImpl() {
  if (started_) {
    absl::Status s = Shutdown(absl::Seconds(5));
    if (!s.ok()) log_->warn("shutdown in destructor: {}", s.ToString());
  }
  if (pool_) pool_->shutdown();  // before the transport (see the members)
  pool_.reset();
}

absl::Status ServerImpl::Start() {
  if (started_) return absl::FailedPreconditionError("server already started");
  if (!transport_) return absl::FailedPreconditionError("server already shut down");
  const std::string* addrs[2] = {&options_.webhook_addr, &options_.api_addr};
  std::string hosts[2];
  for (int i = 0; i < 2; ++i) {
    const Listener listener = i == 0 ? Listener::kWebhook : Listener::kApi;
    int port = 0;
    GK_RETURN_IF_ERROR(ParseListenAddress(*addrs[i], &hosts[i], &port));
    absl::StatusOr<int> bound =
        transport_->Bind(listener, hosts[i], port, listener == Listener::kWebhook ? options_.client_ca_file : "");
    if (!bound.ok()) return bound.status();
    ports_[i] = *bound;
  }
  // Handlers that may block (the webhook's registration waits for the
  // broker and the journal's fsync) run here, never on a loop thread.
  const size_t workers = static_cast<size_t>(std::max(2, LoopThreads(options_)));
  pool_ = std::make_shared<ElasticTaskQueue>(workers, std::max<size_t>(workers, options_.max_handler_threads),
                                             absl::Seconds(60));
  transport_->Run();
  started_ = true;
  watcher_ = std::thread([this] { CertWatchLoop(); });
  readiness_.Set("listeners", true, "");
  log_->info("webhook listener on {}:{}, API listener on {}:{} ({} event-loop threads)", hosts[0], ports_[0],
             hosts[1], ports_[1], LoopThreads(options_));
  return absl::OkStatus();
}

absl::Duration ServerImpl::Handle(Listener listener, HttpRequest request, Respond respond) {
  Resolved r = Resolve(listener, request);
  if (r.route == nullptr && !r.metrics) {
    respond(std::move(r.answer));
    return absl::InfiniteDuration();
  }
  if (r.route != nullptr && r.route->async_handler) {
    CallAsync(*r.route, std::move(request), std::move(respond));
    return options_.async_timeout;
  }
  if (r.route != nullptr && !r.route->may_block) {
    respond(Call(*r.route, request));
    return absl::InfiniteDuration();
  }
  pool_->enqueue([this, route = r.route, req = std::move(request), respond = std::move(respond)] {
    respond(route != nullptr ? Call(*route, req) : BuiltIn(req));
  });
  return absl::InfiniteDuration();
}

void ServerImpl::CallAsync(const Route& route, HttpRequest req, Respond respond) {
  auto state = std::make_shared<Responder::State>();
  state->respond = std::move(respond);
  state->pool = pool_;
  state->log = log_;
  state->what = absl::StrCat(req.method, " ", req.path);
  Responder responder(std::move(state));
  std::string what = "unknown exception";
  try {
    route.async_handler(std::move(req), responder);
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  log_->error("bug: asynchronous handler for {} {} threw: {}", route.method, route.path, what);
  responder.Respond(ErrorResponse(absl::InternalError("internal error; see the server log")));
}

HttpResponse ServerImpl::Call(const Route& route, const HttpRequest& req) const {
  std::string what = "unknown exception";
  try {
    return route.handler(req);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  log_->error("bug: handler for {} {} threw: {}", req.method, req.path, what);
  return ErrorResponse(absl::InternalError("internal error; see the server log"));
}

namespace {

// The metric children of one (server, listener, path, status), as a loop
// thread found them last: a request's counter and histogram without three
// label strings built and two family maps searched under their shared lock
// (children are never removed, so the pointers stay valid while the server
// lives; `server` is a process-unique id, never reused, unlike an address).
struct CachedRouteMetrics {
  uint64_t server;
  Listener listener;
  int status;
  std::string path;
  metrics::Counter* requests;
  metrics::Histogram* duration;
};
// Few routes and statuses are live at once; a flood of distinct paths only
// refills the cache (it is emptied when full).
constexpr size_t kRouteMetricsCached = 32;
thread_local std::vector<CachedRouteMetrics> t_route_metrics;

}  // namespace

void ServerImpl::Done(Listener listener, const RequestRecord& record) {
  std::string l(ListenerName(listener));
  const CachedRouteMetrics* m = nullptr;
  for (const CachedRouteMetrics& c : t_route_metrics) {
    if (c.server == id_ && c.listener == listener && c.status == record.status && c.path == record.path) {
      m = &c;
      break;
    }
  }
  if (m == nullptr) {
    const std::string label = RouteLabel(listener, record.path);
    if (t_route_metrics.size() >= kRouteMetricsCached) t_route_metrics.clear();
    t_route_metrics.push_back(CachedRouteMetrics{id_, listener, record.status, record.path,
                                                 &requests_->WithLabels({l, label, absl::StrCat(record.status)}),
                                                 &durations_->WithLabels({l, label})});
    m = &t_route_metrics.back();
  }
  m->requests->Increment();
  m->duration->Observe(static_cast<double>(record.micros) / 1e6);
  access_log_->info("listener={} remote={} method={} path={} status={} bytes={} us={}", l, record.remote,
                    record.method.empty() ? "-" : record.method, record.path.empty() ? "-" : record.path,
                    record.status, record.bytes, record.micros);
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

bool ServerImpl::DrainConnections(absl::Duration grace, const base::Stopwatch& clock) {
  // Requests in flight finish (their answers say "Connection: close"); idle
  // keep-alive connections are ended. A request may be on its way on an
  // idle connection, so those are left alone for a moment first: clients
  // send a request in one go.
  const absl::Duration settle = std::min(absl::Seconds(1), grace / 4);
  const absl::Duration stopped_at = clock.Elapsed();
  for (int round = 0; clock.Elapsed() < grace && round < 1'000'000; ++round) {
    if (clock.Elapsed() - stopped_at >= settle) transport_->CloseIdle();
    absl::SleepFor(absl::Milliseconds(20));
    if (transport_->open_connections() == 0) return true;
  }
  return transport_->open_connections() == 0;
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
  transport_->StopAccepting();
  const bool all_done = DrainConnections(grace, clock);
  if (const int closed = transport_->idle_closed(); closed > 0) {
    log_->info("shutdown: ended {} idle keep-alive connection(s)", closed);
  }
  base::FlushLogs();
  if (!all_done) {
    // A handler still runs on the pool and will post its answer to a loop:
    // both stay allocated (the process is about to exit).
    transport_->Stop();
    (void)new std::shared_ptr<ElasticTaskQueue>(std::move(pool_));
    (void)transport_.release();
    return absl::DeadlineExceededError(
        absl::StrCat("requests still in flight after the shutdown grace of ", absl::FormatDuration(grace)));
  }
  pool_->shutdown();  // no task left: every connection has ended
  pool_.reset();
  transport_->Stop();
  transport_.reset();
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

HttpResponse ServerImpl::BuiltIn(const HttpRequest& req) const {
  HttpResponse r;
  if (req.path == "/healthz") {
    r.body = R"({"status":"ok"})";
  } else if (req.path == "/readyz") {
    std::string why;
    const bool ready = readiness_.Ready(&why);
    // Notes (Readiness::Note) are reported either way and never fail it.
    std::string notes;
    for (const std::string& n : readiness_.Notes()) {
      absl::StrAppend(&notes, notes.empty() ? "" : ",", "\"", base::JsonEscape(n), "\"");
    }
    const std::string notes_field = notes.empty() ? "" : absl::StrCat(R"(,"notes":[)", notes, "]");
    if (ready) {
      r.body = absl::StrCat(R"({"status":"ready")", notes_field, "}");
    } else {
      r.status = 503;
      r.body = absl::StrCat(R"({"status":"not ready","reason":")", base::JsonEscape(why), "\"", notes_field, "}");
    }
  } else {
    r.content_type = std::string(metrics::kPrometheusContentType);
    r.body = registry_.ExposePrometheus();
  }
  return r;
}

ServerImpl::Resolved ServerImpl::Resolve(Listener listener, const HttpRequest& req) const {
  absl::string_view l = ListenerName(listener);
  Resolved out;
  // A route of its own for a built-in path (the API's /metrics, which asks
  // for a token) comes first.
  auto it = exact_.find(absl::StrCat(l, " ", req.method, " ", req.path));
  if (it != exact_.end()) {
    out.route = it->second;
    return out;
  }
  if (req.path == "/healthz" || req.path == "/readyz" || (listener == Listener::kApi && req.path == "/metrics")) {
    if (req.method != "GET") {
      out.answer = ErrorResponse(405, absl::StrCat(req.path, " supports GET only"));
    } else if (req.path == "/metrics") {
      out.metrics = true;
    } else {
      out.answer = BuiltIn(req);
    }
    return out;
  }
  for (const Route* r : prefixes_) {
    if (r->listener == listener && r->method == req.method && absl::StartsWith(req.path, r->path)) {
      out.route = r;
      return out;
    }
  }
  if (RouteLabel(listener, req.path) != kOtherPath) {
    out.answer = ErrorResponse(405, absl::StrCat("method ", req.method, " is not allowed on ", req.path));
  } else {
    out.answer = ErrorResponse(404, absl::StrCat("no such path on the ", l, " listener: ", req.path));
  }
  return out;
}

}  // namespace

void Responder::Respond(HttpResponse response) const {
  if (state_->answered.exchange(true)) return;
  state_->respond(std::move(response));
}

void Responder::RunBlocking(absl::AnyInvocable<void()> work) const {
  // The pool takes copyable tasks.
  auto task = std::make_shared<absl::AnyInvocable<void()>>(std::move(work));
  state_->pool->enqueue([task] { (*task)(); });
}

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
  if (options.threads < 0 || options.threads > 4096) {
    return absl::InvalidArgumentError("--threads must be between 0 (one per core) and 4096");
  }
  if (options.max_connections < 1 || options.max_connections > 1'000'000) {
    return absl::InvalidArgumentError("--max-connections must be between 1 and 1000000");
  }
  if (options.max_connections_per_source < 1) {
    return absl::InvalidArgumentError("--max-connections-per-source must be at least 1");
  }
  if (options.max_handler_threads < 1 || options.max_handler_threads > 4096) {
    return absl::InvalidArgumentError("max_handler_threads must be between 1 and 4096");
  }
  if (options.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--handshake-timeout must be positive");
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
    if (r.path.empty() || r.path[0] != '/' || (!r.handler == !r.async_handler)) {
      return absl::InvalidArgumentError(
          absl::StrCat("route \"", r.path, "\": path must start with / and have a handler or an async_handler"));
    }
  }
  if (options.async_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("async_timeout must be positive");
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
  auto server = std::make_unique<ServerImpl>(std::move(options), registry, *m, *std::move(certs));
  GK_RETURN_IF_ERROR(server->Init(registry));
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace gangkeeper::server
