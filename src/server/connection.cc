// gangkeeper: one TLS connection's state machine (see connection.h).
#include "src/server/connection.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gangkeeper::server::wire {
namespace {

constexpr size_t kReadChunk = 4096;
// The first read of a request is sized after the connection's last
// request (its body plus this much for the header), within
// [kReadChunk, kMaxFirstRead]: the API server sends reviews of similar
// size on a connection, and a 5 KB review read in one TLS read instead of
// two costs about 0.4 syscalls and a tenth of the CPU less per request. A
// connection that has sent nothing yet waits with kReadChunk.
constexpr size_t kHeaderAllowance = 1024;
constexpr size_t kMaxFirstRead = 64 * 1024;
// A connection closed after an answer reads (and drops) what the client
// still sends for this long, or this many bytes, so that the close does not
// reset the connection before the client has read the answer.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 16 << 20;
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
// OpenSSL's record buffers (about 17 KB for reading and as much for
// writing) are kept between requests while the listener has at most this
// many open connections: allocating and freeing them for every request (the
// release mode Asio sets on every stream) cost about 5 % of a request's CPU
// under load. An API server keeps a few dozen keep-alive connections; beyond
// this many, a connection going idle frees them, so that thousands of idle
// (or hostile) connections cost what they did before. The TLS handshake
// always runs in release mode.
constexpr int kTlsBuffersKeptUpTo = 256;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(absl::ToChronoNanoseconds(d));
}

absl::string_view Sv(beast::string_view v) { return absl::string_view(v.data(), v.size()); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; `plus_is_space` for query components.
std::string Decode(absl::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%' && i + 2 < in.size()) {
      const int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && c == '+') ? ' ' : c;
  }
  return out;
}

void ParseTarget(absl::string_view target, HttpRequest* req) {
  const size_t q = target.find('?');
  req->path = Decode(target.substr(0, q), false);
  if (q == absl::string_view::npos) return;
  absl::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    absl::string_view part = query.substr(0, amp);
    query = amp == absl::string_view::npos ? absl::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      req->query.emplace_back(Decode(part, true), "");
    } else {
      req->query.emplace_back(Decode(part.substr(0, eq), true), Decode(part.substr(eq + 1), true));
    }
  }
}

std::string SubjectOf(SSL* ssl) {
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (peer == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(peer), buf, sizeof(buf));
  X509_free(peer);
  return buf;
}

bool IsParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category();
}

// The number of requests one connection serves before it answers with
// "Connection: close": at most `max`, and as few as nine tenths of it, drawn
// for each connection. Connections opened together (an API server that has
// just started, a load test) then end at different times instead of all
// reconnecting, and handshaking, in the same millisecond.
int RequestsBeforeClose(int max) {
  if (max <= 1) return max;
  thread_local std::minstd_rand draw(std::random_device{}());
  std::uniform_int_distribution<int> spread(0, max / 10);
  return max - spread(draw);
}

}  // namespace

const char* LimitName(Limit limit) {
  switch (limit) {
    case Limit::kMaxConnections: return "max_connections";
    case Limit::kPerSource: return "max_connections_per_source";
    case Limit::kHandshakeDeadline: return "handshake_deadline";
    case Limit::kHeaderDeadline: return "read_deadline";
    case Limit::kIdleTimeout: return "idle_timeout";
    case Limit::kAcceptError: return "accept_error";
  }
  return "unknown";
}

void ListenerState::LimitBit(Limit limit, const std::string& detail) {
  const int i = static_cast<int>(limit);
  if (limit_counters[i] != nullptr) limit_counters[i]->Increment();
  if (limit == Limit::kIdleTimeout) return;  // the normal end of a keep-alive connection
  const int64_t now = NowMicros();
  int64_t last = last_limit_log_us[i].load(std::memory_order_relaxed);
  if (last != 0 && now - last < 1'000'000) return;
  if (!last_limit_log_us[i].compare_exchange_strong(last, now)) return;
  log->warn("{} listener: limit {} reached: {} (logged at most once a second; see "
            "gangkeeper_http_connection_limits_total)",
            ListenerName(listener), LimitName(limit), detail);
}

Connection::Connection(LoopSocket socket, ListenerState& state, std::string remote)
    : stream_(LoopStream(std::move(socket)), state.ssl),
      handling_timer_(stream_.get_executor()),
      state_(state),
      remote_(std::move(remote)),
      max_requests_(RequestsBeforeClose(state.options.keep_alive_max_requests)) {
  idle_since_us_.store(state_.NowMicros());  // a handshake in progress counts as idle for the caps
}

Connection::~Connection() {
  std::lock_guard<std::mutex> lock(state_.mu);
  if (!registered) return;
  state_.open.erase(this);
  state_.open_count.store(static_cast<int>(state_.open.size()), std::memory_order_relaxed);
  auto it = state_.per_source.find(remote_);
  if (it != state_.per_source.end() && --it->second <= 0) state_.per_source.erase(it);
}

void Connection::SetIdle(bool idle) { idle_since_us_.store(idle ? state_.NowMicros() : -1); }

void Connection::Start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    beast::error_code ec;
    auto& lowest = beast::get_lowest_layer(self->stream_);
    lowest.socket().set_option(tcp::no_delay(true), ec);
    lowest.expires_after(ToChrono(self->state_.options.handshake_timeout));
    self->stream_.async_handshake(net::ssl::stream_base::server,
                                  [self](beast::error_code e) { self->OnHandshake(e); });
  });
}

void Connection::CloseIfIdle(bool for_drain) {
  net::post(stream_.get_executor(), [self = shared_from_this(), for_drain] {
    if (self->phase_ != Phase::kIdle && self->phase_ != Phase::kHandshake) return;
    if (for_drain && self->phase_ == Phase::kIdle) self->state_.idle_closed.fetch_add(1);
    self->Close();
  });
}

void Connection::OnHandshake(beast::error_code ec) {
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    if (ec == beast::error::timeout) {
      state_.LimitBit(Limit::kHandshakeDeadline, absl::StrCat("TLS handshake from ", remote_, " cut after ",
                                                              absl::FormatDuration(state_.options.handshake_timeout)));
    }
    Close();
    return;
  }
  if (state_.want_client_subject) client_subject_ = SubjectOf(stream_.native_handle());
  WaitForRequest();
}

void Connection::WaitForRequest() {
  if (state_.draining.load()) {
    Close();
    return;
  }
  if (buffer_.size() > 0) {  // the next request came with the last one
    SetIdle(false);
    ReadHeader();
    return;
  }
  if (buffer_.capacity() > kMaxFirstRead) buffer_.shrink_to_fit();  // idle connections stay small
  SSL* ssl = stream_.native_handle();
  if (state_.open_count.load(std::memory_order_relaxed) <= kTlsBuffersKeptUpTo) {
    SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  } else {
    SSL_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
    (void)SSL_free_buffers(ssl);  // refused (kept) only while a record is partly read or written
  }
  phase_ = Phase::kIdle;
  SetIdle(true);
  beast::get_lowest_layer(stream_).expires_after(ToChrono(state_.options.keep_alive_timeout));
  stream_.async_read_some(buffer_.prepare(first_read_), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->OnFirstBytes(ec, n);
  });
}

void Connection::OnFirstBytes(beast::error_code ec, size_t n) {
  if (phase_ == Phase::kClosed) return;
  SetIdle(false);
  if (ec) {
    if (ec == beast::error::timeout) state_.LimitBit(Limit::kIdleTimeout, remote_);
    Close();
    return;
  }
  buffer_.commit(n);
  ReadHeader();
}

void Connection::ReadHeader() {
  phase_ = Phase::kHeader;
  request_start_us_ = state_.NowMicros();
  record_ = RequestRecord();
  record_.remote = remote_;
  refused_encoding_.clear();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(state_.options.max_header_bytes));
  parser_->body_limit(state_.options.max_body_bytes);
  // The whole header within read_timeout, however slowly it trickles in.
  beast::get_lowest_layer(stream_).expires_after(ToChrono(state_.options.read_timeout));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Connection::OnHeader(beast::error_code ec) {
  if (phase_ == Phase::kClosed) return;
  const TransportOptions& o = state_.options;
  if (ec == http::error::header_limit) {
    Refuse(431, absl::StrCat("request headers too large: more than ", o.max_header_bytes, " bytes (at most ",
                             o.max_header_count, " headers and ", o.max_header_bytes, " bytes)"));
    return;
  }
  if (ec == beast::error::timeout) {
    state_.LimitBit(Limit::kHeaderDeadline, absl::StrCat("request header from ", remote_, " incomplete after ",
                                                         absl::FormatDuration(o.read_timeout)));
    Close();
    return;
  }
  if (ec && ec != http::error::body_limit) {
    if (IsParseError(ec) && ec != http::error::partial_message && ec != http::error::end_of_stream) {
      Refuse(400, "malformed HTTP request");
    } else {
      Close();
    }
    return;
  }
  const auto& msg = parser_->get();
  record_.method = std::string(msg.method_string());
  record_.path = Decode(Sv(msg.target().substr(0, msg.target().find('?'))), false);
  if (ec == http::error::body_limit) {
    Refuse(413, absl::StrCat("request body too large (at most ", o.max_body_bytes, " bytes)"));
    return;
  }
  size_t count = 0;
  for (auto it = msg.begin(); it != msg.end(); ++it) ++count;
  if (count > o.max_header_count) {
    Refuse(431, absl::StrCat("request headers too large: ", count, " headers (at most ", o.max_header_count,
                             " headers and ", o.max_header_bytes, " bytes)"));
    return;
  }
  // A compressed body is read as it came (within the body limit) and
  // refused with 415, never inflated (#20).
  if (auto enc = msg.find(http::field::content_encoding); enc != msg.end()) {
    const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(Sv(enc->value())));
    if (!lower.empty() && lower != "identity") refused_encoding_ = std::string(enc->value());
  }
  if (parser_->is_done()) {
    Dispatch();
    return;
  }
  if (auto expect = msg.find(http::field::expect);
      expect != msg.end() && absl::EqualsIgnoreCase(Sv(expect->value()), "100-continue")) {
    beast::get_lowest_layer(stream_).expires_after(ToChrono(o.write_timeout));
    net::async_write(stream_, net::const_buffer(kContinue, sizeof(kContinue) - 1),
                     [self = shared_from_this()](beast::error_code e, size_t) {
                       if (self->phase_ == Phase::kClosed) return;
                       if (e) {
                         self->Close();
                         return;
                       }
                       self->ReadBody();
                     });
    return;
  }
  ReadBody();
}

void Connection::ReadBody() {
  phase_ = Phase::kBody;
  beast::get_lowest_layer(stream_).expires_after(ToChrono(state_.options.read_timeout));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void Connection::OnBody(beast::error_code ec) {
  if (phase_ == Phase::kClosed) return;
  if (ec == http::error::body_limit) {
    Refuse(413, absl::StrCat("request body too large (at most ", state_.options.max_body_bytes, " bytes)"));
    return;
  }
  if (ec == beast::error::timeout) {
    state_.LimitBit(Limit::kHeaderDeadline, absl::StrCat("request body from ", remote_, " incomplete after ",
                                                         absl::FormatDuration(state_.options.read_timeout)));
    Close();
    return;
  }
  if (ec) {
    if (IsParseError(ec) && ec != http::error::partial_message && ec != http::error::end_of_stream) {
      Refuse(400, "malformed HTTP request");
    } else {
      Close();
    }
    return;
  }
  Dispatch();
}

void Connection::Dispatch() {
  auto& msg = parser_->get();
  keep_alive_ = msg.keep_alive();
  if (!refused_encoding_.empty()) {
    Respond(ErrorResponse(415, absl::StrCat("Content-Encoding \"", refused_encoding_,
                                            "\" is not accepted: send the body uncompressed (at most ",
                                            state_.options.max_body_bytes, " bytes)")));
    return;
  }
  HttpRequest req;
  req.method = record_.method;
  ParseTarget(Sv(msg.target()), &req);
  req.headers.reserve(16);
  for (const auto& field : msg) {
    req.headers.emplace_back(absl::AsciiStrToLower(Sv(field.name_string())), std::string(field.value()));
  }
  first_read_ = std::clamp(msg.body().size() + kHeaderAllowance, kReadChunk, kMaxFirstRead);
  req.body = std::move(msg.body());
  req.remote_addr = remote_;
  req.client_subject = client_subject_;
  phase_ = Phase::kHandling;
  beast::get_lowest_layer(stream_).expires_never();
  const uint64_t seq = ++seq_;
  const absl::Duration deadline = state_.sink->Handle(
      state_.listener, std::move(req), [weak = weak_from_this(), seq](HttpResponse response) {
        std::shared_ptr<Connection> self = weak.lock();
        if (self == nullptr) return;  // the connection is gone: so is the answer
        net::dispatch(self->stream_.get_executor(),
                      [self, seq, r = std::move(response)]() mutable { self->Answer(seq, std::move(r)); });
      });
  if (phase_ != Phase::kHandling || seq_ != seq) return;  // answered already, here on the loop
  if (deadline == absl::InfiniteDuration()) {
    handling_timer_.expires_at(std::chrono::steady_clock::time_point::max());
  } else {
    handling_timer_.expires_after(ToChrono(deadline));
  }
  handling_timer_.async_wait([self = shared_from_this(), seq, deadline](beast::error_code ec) {
    self->OnHandlingDeadline(ec, seq, deadline);
  });
}

void Connection::Answer(uint64_t seq, HttpResponse response) {
  if (phase_ != Phase::kHandling || seq != seq_) return;  // late (the deadline answered), or closed
  handling_timer_.cancel();
  Respond(std::move(response));
}

void Connection::OnHandlingDeadline(beast::error_code ec, uint64_t seq, absl::Duration deadline) {
  if (ec || phase_ != Phase::kHandling || seq != seq_) return;  // answered in time
  state_.log->warn("{} listener: no answer to {} {} from {} within {}: answered 503", ListenerName(state_.listener),
                   record_.method, record_.path, remote_, absl::FormatDuration(deadline));
  Respond(ErrorResponse(absl::DeadlineExceededError(absl::StrCat(
      "no answer within ", absl::FormatDuration(deadline), "; retry"))));
}

void Connection::Refuse(int status, const std::string& message) {
  keep_alive_ = false;  // what is left of the request must not be taken for another one
  Respond(ErrorResponse(status, message));
}

void Connection::Respond(HttpResponse response) {
  if (phase_ == Phase::kClosed) return;
  ++requests_;
  const bool keep = keep_alive_ && requests_ < max_requests_ && !state_.draining.load();
  keep_alive_ = keep;
  if (response.status < 200 || response.status > 599) {  // a handler's bug; Beast refuses such a status
    state_.log->error("bug: handler for {} {} answered HTTP status {}", record_.method, record_.path,
                      response.status);
    response = ErrorResponse(absl::InternalError("internal error; see the server log"));
  }
  if (response.status == 204 || response.status == 304) response.body.clear();  // no body allowed
  response_ = http::response<http::string_body>();
  response_.version(11);
  response_.result(static_cast<unsigned>(response.status));
  response_.set(http::field::content_type, response.content_type);
  for (const auto& [k, v] : response.headers) response_.set(k, v);
  response_.body() = std::move(response.body);
  response_.keep_alive(keep);
  response_.prepare_payload();
  record_.status = response.status;
  record_.bytes = response_.body().size();
  phase_ = Phase::kWriting;
  // The message as one buffer: its start line and fields as Beast set
  // them, then the body. Beast's serializer walks the same parts through a
  // chain of buffer views on every write; one string and one write cost a
  // fraction of it.
  wire_.clear();
  const absl::string_view reason = Sv(response_.reason());
  wire_.reserve(64 + response_.body().size());
  absl::StrAppend(&wire_, "HTTP/1.1 ", response_.result_int(), " ", reason, "\r\n");
  for (const auto& field : response_) {
    absl::StrAppend(&wire_, Sv(field.name_string()), ": ", Sv(field.value()), "\r\n");
  }
  absl::StrAppend(&wire_, "\r\n", response_.body());
  response_.body() = std::string();  // held once, in wire_
  beast::get_lowest_layer(stream_).expires_after(ToChrono(state_.options.write_timeout));
  net::async_write(stream_, net::buffer(wire_), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->OnWrite(ec, n);
  });
}

void Connection::OnWrite(beast::error_code ec, size_t) {
  record_.micros = state_.NowMicros() - request_start_us_;
  state_.sink->Done(state_.listener, record_);
  response_ = http::response<http::string_body>();
  // Idle connections stay small (a large answer's buffer is not kept).
  if (wire_.capacity() > kMaxFirstRead) {
    wire_ = std::string();
  } else {
    wire_.clear();
  }
  parser_.reset();
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    Close();
    return;
  }
  if (!keep_alive_) {
    LingeringClose();
    return;
  }
  WaitForRequest();
}

void Connection::LingeringClose() {
  phase_ = Phase::kClosing;
  SetIdle(false);
  auto& lowest = beast::get_lowest_layer(stream_);
  beast::error_code ec;
  lowest.socket().shutdown(tcp::socket::shutdown_send, ec);
  lowest.expires_after(kLingerTime);
  buffer_.clear();
  Drain(0);
}

void Connection::Drain(size_t so_far) {
  beast::get_lowest_layer(stream_).async_read_some(
      buffer_.prepare(4 * kReadChunk), [self = shared_from_this(), so_far](beast::error_code ec, size_t n) {
        if (self->phase_ == Phase::kClosed) return;
        if (ec || so_far + n > kLingerBytes) {
          self->Close();
          return;
        }
        self->Drain(so_far + n);
      });
}

void Connection::Close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  SetIdle(false);
  handling_timer_.cancel();
  auto& lowest = beast::get_lowest_layer(stream_);
  beast::error_code ec;
  lowest.socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest.close();
}

}  // namespace gangkeeper::server::wire
