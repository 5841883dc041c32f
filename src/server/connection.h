// gangkeeper: one TLS connection's state machine and the per-listener state
// it shares (private to transport.cc and connection.cc: names Boost types).
//
// A connection lives on one io_context (one loop thread), so its members
// need no lock. Its phases: handshake (handshake_timeout) -> idle
// (keep_alive_timeout, nothing in flight) -> header (read_timeout for the
// whole header) -> body (read_timeout) -> handling (off the loop when the
// route may block, or answered later from any thread: the sink's deadline,
// a timer that also keeps the connection alive meanwhile) -> writing
// (write_timeout) -> idle again, or a lingering
// close that drains what the client still sends so that the answer is not
// lost to a reset.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "absl/container/flat_hash_map.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "src/server/transport.h"

namespace gangkeeper::server::wire {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// A connection's I/O objects are bound to its loop's io_context by type,
// not through the type-erased any_io_executor (whose copies and calls cost
// about 1 % of a request's CPU under load).
using LoopExecutor = net::io_context::executor_type;
using LoopSocket = net::basic_stream_socket<tcp, LoopExecutor>;
using LoopStream = beast::basic_stream<tcp, LoopExecutor>;
using LoopTimer =
    net::basic_waitable_timer<std::chrono::steady_clock, net::wait_traits<std::chrono::steady_clock>, LoopExecutor>;

class Connection;

// Limits that bite, as metric labels.
enum class Limit { kMaxConnections, kPerSource, kHandshakeDeadline, kHeaderDeadline, kIdleTimeout, kAcceptError };
inline constexpr int kLimitCount = 6;
const char* LimitName(Limit limit);

// State shared by the connections of one listener. Thread-safe.
struct ListenerState {
  ListenerState(Listener l, const TransportOptions& o, RequestSink* s, const base::Stopwatch& e)
      : listener(l), options(o), sink(s), epoch(e), ssl(net::ssl::context::tls_server) {}

  const Listener listener;
  const TransportOptions& options;
  RequestSink* const sink;
  const base::Stopwatch& epoch;
  net::ssl::context ssl;
  bool want_client_subject = false;
  std::shared_ptr<spdlog::logger> log = base::GetLogger("server");

  std::atomic<bool> draining{false};
  std::atomic<int> idle_closed{0};
  metrics::Counter* limit_counters[kLimitCount] = {};
  std::atomic<int64_t> last_limit_log_us[kLimitCount] = {};

  // Open connections (registered on accept, removed by their destructor)
  // and how many per source address.
  mutable std::mutex mu;
  absl::flat_hash_map<Connection*, std::weak_ptr<Connection>> open;  // guarded by mu
  absl::flat_hash_map<std::string, int> per_source;                  // guarded by mu
  // open.size(), readable without the lock (a connection going idle asks).
  std::atomic<int> open_count{0};

  int64_t NowMicros() const { return absl::ToInt64Microseconds(epoch.Elapsed()); }
  // Counts a limit that bit and logs it, at most once a second per kind.
  void LimitBit(Limit limit, const std::string& detail);
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(LoopSocket socket, ListenerState& state, std::string remote);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts the handshake (on the connection's own loop).
  void Start();
  // Closes the connection if nothing is in flight (from any thread: posts
  // to the connection's loop). `for_drain` counts an idle keep-alive
  // connection closed by shutdown.
  void CloseIfIdle(bool for_drain);
  // When this connection became idle (the listener's epoch, microseconds),
  // or -1 when something is in flight. Any thread.
  int64_t idle_since() const { return idle_since_us_.load(std::memory_order_relaxed); }
  const std::string& remote() const { return remote_; }
  // Takes the connection out of the idle set if it is still idle since
  // `seen` (so that two new connections do not pick the same victim).
  bool ClaimIdle(int64_t seen) { return idle_since_us_.compare_exchange_strong(seen, -1); }

  bool registered = false;  // counted in the listener's registry; guarded by ListenerState::mu

 private:
  enum class Phase { kHandshake, kIdle, kHeader, kBody, kHandling, kWriting, kClosing, kClosed };

  void OnHandshake(beast::error_code ec);
  void WaitForRequest();
  void OnFirstBytes(beast::error_code ec, size_t n);
  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnBody(beast::error_code ec);
  void Dispatch();
  // The answer to request `seq`, on the loop: dropped unless that request
  // is still waiting for it.
  void Answer(uint64_t seq, HttpResponse response);
  void OnHandlingDeadline(beast::error_code ec, uint64_t seq, absl::Duration deadline);
  void Refuse(int status, const std::string& message);
  void Respond(HttpResponse response);
  void OnWrite(beast::error_code ec, size_t bytes);
  void LingeringClose();
  void Drain(size_t so_far);
  void Close();
  void SetIdle(bool idle);

  beast::ssl_stream<LoopStream> stream_;
  // Armed while a request is being handled: holds the connection (the
  // answer's callback only refers to it) and bounds the wait.
  LoopTimer handling_timer_;
  uint64_t seq_ = 0;  // requests dispatched so far
  size_t first_read_ = 4096;  // the size of the next request's first read (see kMaxFirstRead)
  ListenerState& state_;
  const std::string remote_;
  const int max_requests_;  // answered before "Connection: close" (RequestsBeforeClose)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;  // the answer being written
  std::string wire_;                            // response_ as written (start line, fields, body)
  Phase phase_ = Phase::kHandshake;
  std::string client_subject_;
  std::string refused_encoding_;
  RequestRecord record_;
  int64_t request_start_us_ = 0;
  int requests_ = 0;
  bool keep_alive_ = true;
  std::atomic<int64_t> idle_since_us_{-1};
};

}  // namespace gangkeeper::server::wire
