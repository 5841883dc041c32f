// gangkeeper: event loops, acceptors and connection caps (see transport.h).
#include "src/server/transport.h"

#include <openssl/ssl.h>

#include <cerrno>
#include <future>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/loop_round.h"
#include "gangkeeper/base/status_macros.h"
#include "src/server/connection.h"

namespace gangkeeper::server {
namespace {

using namespace wire;  // NOLINT: the transport's own private namespace

// After an accept error that says the process is out of descriptors or
// memory, accepting pauses this long (the pending connection stays in the
// kernel's queue, so retrying at once would spin).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

bool OutOfResources(const beast::error_code& ec) {
  return ec == net::error::no_descriptors || ec == net::error::no_buffer_space || ec == net::error::no_memory ||
         (ec.category() == boost::system::system_category() && ec.value() == ENFILE);
}

// A loop's round end (base::LoopRound): what the handlers of one round
// defer runs in one handler posted behind them, after the loop has polled
// for I/O once more without waiting. Lives on the loop's thread, for as
// long as the loop runs there; deferred functions still pending when it
// goes are destroyed uncalled (see loop_round.h).
class AsioRound final : public base::LoopRound {
 public:
  explicit AsioRound(net::io_context& loop) : loop_(loop) {}

  void AtEnd(absl::AnyInvocable<void() &&> fn) override {
    pending_.push_back(std::move(fn));
    if (pending_.size() == 1) net::post(loop_, [this] { RunPending(); });
  }

 private:
  void RunPending() {
    std::vector<absl::AnyInvocable<void() &&>> run;
    run.swap(pending_);
    for (auto& fn : run) std::move(fn)();
  }

  net::io_context& loop_;
  std::vector<absl::AnyInvocable<void() &&>> pending_;
};

class TransportImpl final : public Transport {
 public:
  TransportImpl(const TransportOptions& options, RequestSink* sink, CertificateSource* certs,
                metrics::CounterFamily* limits)
      : options_(options), sink_(sink), certs_(certs), limits_(limits) {
    for (int i = 0; i < options_.threads; ++i) {
      loops_.push_back(std::make_unique<net::io_context>(1));
      guards_.emplace_back(net::make_work_guard(*loops_.back()));
    }
  }

  ~TransportImpl() override {
    Stop();
    for (Bound& b : bound_) {
      b.pause.reset();
      b.acceptor.reset();
    }
    loops_.clear();  // destroys pending handlers, hence connections, while their listener state lives
  }

  absl::StatusOr<int> Bind(Listener listener, const std::string& host, int port,
                           const std::string& client_ca_file) override;
  void Run() override;
  void StopAccepting() override;
  void CloseIdle() override;
  int idle_closed() const override {
    int n = 0;
    for (const Bound& b : bound_) n += b.state ? b.state->idle_closed.load() : 0;
    return n;
  }
  int open_connections() const override {
    int n = 0;
    for (const Bound& b : bound_) {
      if (!b.state) continue;
      std::lock_guard<std::mutex> lock(b.state->mu);
      n += static_cast<int>(b.state->open.size());
    }
    return n;
  }
  void Stop() override;

 private:
  struct Bound {
    std::unique_ptr<ListenerState> state;
    std::unique_ptr<tcp::acceptor> acceptor;
    std::unique_ptr<net::steady_timer> pause;
  };

  void DoAccept(Bound& b);
  void OnAccept(Bound& b, beast::error_code ec, LoopSocket socket);
  void Admit(Bound& b, LoopSocket socket);
  // The oldest idle connection of `state` (from `source` when not null),
  // claimed so that no other admission picks it; null when none is idle.
  static std::shared_ptr<Connection> ClaimOldestIdle(ListenerState& state, const std::string* source);

  const TransportOptions options_;
  RequestSink* const sink_;
  CertificateSource* const certs_;
  metrics::CounterFamily* const limits_;
  base::Stopwatch epoch_;
  std::vector<std::unique_ptr<net::io_context>> loops_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_loop_{0};
  std::atomic<bool> accepting_{false};
  Bound bound_[2];
};

absl::StatusOr<int> TransportImpl::Bind(Listener listener, const std::string& host, int port,
                                        const std::string& client_ca_file) {
  const int index = listener == Listener::kWebhook ? 0 : 1;
  Bound& b = bound_[index];
  auto state = std::make_unique<ListenerState>(listener, options_, sink_, epoch_);
  SSL_CTX* ctx = state->ssl.native_handle();
  GK_RETURN_IF_ERROR(ApplyTlsPolicy(ctx, client_ca_file));
  certs_->Attach(ctx);
  state->want_client_subject = !client_ca_file.empty();
  for (int i = 0; i < kLimitCount; ++i) {
    state->limit_counters[i] = &limits_->WithLabels({ListenerName(listener), LimitName(static_cast<Limit>(i))});
  }
  net::io_context& loop = *loops_[static_cast<size_t>(index) % loops_.size()];
  beast::error_code ec;
  tcp::endpoint endpoint;
  net::ip::address address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<unsigned short>(port));
  } else {
    tcp::resolver resolver(loop);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("listen address ", host, ": cannot resolve (", ec.message(), ")"));
    }
    endpoint = results.begin()->endpoint();
  }
  auto acceptor = std::make_unique<tcp::acceptor>(loop);
  // SO_REUSEADDR (restart while old connections linger in TIME_WAIT) but
  // never SO_REUSEPORT: a second instance on the same port fails here.
  if (!acceptor->open(endpoint.protocol(), ec)) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (ec) {
    if (port == 0) return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":0 (", ec.message(), ")"));
    return absl::UnavailableError(absl::StrCat("cannot bind ", ListenerName(listener), " listener on ", host, ":",
                                               port, " (", ec.message(),
                                               "); is another gangkeeper running? Pick another port with --",
                                               listener == Listener::kWebhook ? "webhook-addr" : "api-addr"));
  }
  acceptor->listen(options_.listen_backlog, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, " (", ec.message(), ")"));
  const int bound_port = acceptor->local_endpoint(ec).port();
  b.state = std::move(state);
  b.acceptor = std::move(acceptor);
  b.pause = std::make_unique<net::steady_timer>(loop);
  return bound_port;
}

void TransportImpl::Run() {
  accepting_.store(true);
  for (Bound& b : bound_) {
    if (b.acceptor) net::post(b.acceptor->get_executor(), [this, &b] { DoAccept(b); });
  }
  for (auto& loop : loops_) {
    net::io_context* l = loop.get();
    threads_.emplace_back([l] {
      AsioRound round(*l);
      const base::ScopedRound in_round(&round);
      // Handlers report errors as values; a throw (allocation failure) is
      // logged and the loop goes on.
      for (int crashes = 0; crashes < 1000; ++crashes) {
        try {
          l->run();
          return;
        } catch (const std::exception& e) {
          base::GetLogger("server")->error("event loop: {}", e.what());
        }
      }
    });
  }
}

void TransportImpl::DoAccept(Bound& b) {
  if (!accepting_.load()) return;
  net::io_context& target = *loops_[next_loop_.fetch_add(1) % loops_.size()];
  b.acceptor->async_accept(target, [this, &b](beast::error_code ec, LoopSocket socket) {
    OnAccept(b, ec, std::move(socket));
  });
}

void TransportImpl::OnAccept(Bound& b, beast::error_code ec, LoopSocket socket) {
  if (ec == net::error::operation_aborted || !accepting_.load()) return;
  if (ec) {
    if (OutOfResources(ec)) {
      b.state->LimitBit(Limit::kAcceptError,
                        absl::StrCat("accept failed: ", ec.message(), "; accepting again in 100ms (raise ulimit -n?)"));
      b.pause->expires_after(kAcceptPause);
      b.pause->async_wait([this, &b](beast::error_code e) {
        if (!e) DoAccept(b);
      });
      return;
    }
    b.state->log->debug("accept failed: {}", ec.message());
    DoAccept(b);
    return;
  }
  Admit(b, std::move(socket));
  DoAccept(b);
}

std::shared_ptr<Connection> TransportImpl::ClaimOldestIdle(ListenerState& state, const std::string* source) {
  // Called with state.mu held. Scans every connection: only when a cap bites.
  for (int attempt = 0; attempt < 4; ++attempt) {
    Connection* oldest = nullptr;
    int64_t oldest_since = -1;
    for (const auto& [conn, weak] : state.open) {
      if (source != nullptr && conn->remote() != *source) continue;
      const int64_t since = conn->idle_since();
      if (since >= 0 && (oldest == nullptr || since < oldest_since)) {
        oldest = conn;
        oldest_since = since;
      }
    }
    if (oldest == nullptr) return nullptr;
    std::shared_ptr<Connection> victim = state.open[oldest].lock();
    if (victim && victim->ClaimIdle(oldest_since)) return victim;
  }
  return nullptr;
}

void TransportImpl::Admit(Bound& b, LoopSocket socket) {
  ListenerState& state = *b.state;
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  const std::string source = peer.address().to_string();
  auto conn = std::make_shared<Connection>(std::move(socket), state, source);
  std::shared_ptr<Connection> victims[2];
  bool refused = false;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    if (static_cast<int>(state.open.size()) >= options_.max_connections) {
      victims[0] = ClaimOldestIdle(state, nullptr);
      refused = victims[0] == nullptr;
    }
    auto it = state.per_source.find(source);
    if (!refused && it != state.per_source.end() && it->second >= options_.max_connections_per_source) {
      victims[1] = ClaimOldestIdle(state, &source);
      refused = victims[1] == nullptr;
    }
    if (!refused) {
      state.open[conn.get()] = conn;
      state.open_count.store(static_cast<int>(state.open.size()), std::memory_order_relaxed);
      ++state.per_source[source];
      conn->registered = true;
    }
  }
  if (victims[0] || (refused && !victims[1])) {
    state.LimitBit(Limit::kMaxConnections,
                   absl::StrCat(options_.max_connections, " open connections; ",
                                refused ? "refused a new one from " + source : "closed the oldest idle one"));
  }
  if (victims[1] || (refused && victims[0])) {
    state.LimitBit(Limit::kPerSource, absl::StrCat(options_.max_connections_per_source, " open connections from ",
                                                   source, refused ? "; refused a new one" : "; closed the oldest idle one"));
  }
  for (auto& v : victims) {
    if (v) v->CloseIfIdle(false);
  }
  if (!refused) conn->Start();
}

void TransportImpl::StopAccepting() {
  accepting_.store(false);
  for (Bound& b : bound_) {
    if (!b.state) continue;
    b.state->draining.store(true);
    std::promise<void> closed;
    std::future<void> done = closed.get_future();
    net::post(b.acceptor->get_executor(), [&b, &closed] {
      beast::error_code ec;
      b.acceptor->close(ec);
      b.pause->cancel();
      closed.set_value();
    });
    if (!threads_.empty()) done.wait_for(std::chrono::seconds(5));
  }
}

void TransportImpl::CloseIdle() {
  for (Bound& b : bound_) {
    if (!b.state) continue;
    std::vector<std::shared_ptr<Connection>> all;
    {
      std::lock_guard<std::mutex> lock(b.state->mu);
      all.reserve(b.state->open.size());
      for (const auto& [conn, weak] : b.state->open) {
        if (auto c = weak.lock()) all.push_back(std::move(c));
      }
    }
    for (auto& c : all) c->CloseIfIdle(true);
  }
}

void TransportImpl::Stop() {
  accepting_.store(false);
  guards_.clear();
  for (auto& loop : loops_) loop->stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(const TransportOptions& options, RequestSink* sink,
                                                             CertificateSource* certs, metrics::Registry& registry) {
  GK_ASSIGN_OR_RETURN(
      metrics::CounterFamily * limits,
      registry.AddCounter("gangkeeper_http_connection_limits_total",
                          "Times a connection limit bit, by listener and limit (max_connections, "
                          "max_connections_per_source, handshake_deadline, read_deadline, idle_timeout, accept_error).",
                          {"listener", "limit"}));
  TransportOptions o = options;
  if (o.threads < 1) o.threads = 1;
  return std::unique_ptr<Transport>(new TransportImpl(o, sink, certs, limits));
}

}  // namespace gangkeeper::server
