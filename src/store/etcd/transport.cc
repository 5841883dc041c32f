// gangkeeper store/etcd: the HTTP transport (see transport.h).
//
// A refused call answers a non-200 status with
// {"error":..,"message":..,"code":<gRPC code>}, sent chunked with an HTTP
// trailer that cpp-httplib 0.11 cannot read (it reports Error::Read after
// the whole body arrived), so status and body are captured by callbacks and
// an error is judged by whether the body is complete JSON.
// /v3/lease/keepalive answers one {"result":{...}} and ends the response
// once the request body is over (a `stream` call).
#include "src/store/etcd/transport.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gangkeeper::etcd {
namespace {

// Idle keep-alive connections kept per endpoint.
constexpr size_t kMaxIdlePerEndpoint = 4;
// The largest answer (etcd's own request limit is 1.5 MiB; a range of many
// keys can be far larger).
constexpr size_t kMaxAnswerBytes = size_t{256} << 20;
// The longest backoff between two rounds over the endpoints.
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

// What one attempt got.
struct Attempt {
  int http_status = 0;  // 0: no answer
  std::string body;
  httplib::Error error = httplib::Error::Success;
  bool unsent = false;  // the request surely did not reach etcd
  bool complete = false;
};

// Sends one POST and reads the whole answer.
Attempt PostOnce(Connection* c, const std::string& path, const std::string& body) {
  Attempt a;
  bool too_big = false;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  req.response_handler = [&](const httplib::Response& res) {
    a.http_status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (a.body.size() + n > kMaxAnswerBytes) {
      too_big = true;
      return false;
    }
    a.body.append(data, n);
    return true;
  };
  httplib::Result r = c->send(req);
  a.error = r.error();
  a.complete = static_cast<bool>(r) && !too_big;
  if (too_big) {
    a.http_status = 0;
    a.error = httplib::Error::Read;
    a.body = absl::StrCat("an answer over ", kMaxAnswerBytes >> 20, " MiB");
  }
  // Connection, its time-out and TLS failures happen before the request is
  // written. A write that failed left the body incomplete: the gateway reads
  // the whole body before it calls etcd, so it did not act on it either.
  a.unsent = !r && a.http_status == 0 &&
             (a.error == httplib::Error::Connection || a.error == httplib::Error::ConnectionTimeout ||
              a.error == httplib::Error::SSLConnection || a.error == httplib::Error::SSLServerVerification ||
              a.error == httplib::Error::SSLLoadingCerts || a.error == httplib::Error::Write);
  return a;
}

// The first JSON line of a streamed answer ({"result":..} or {"error":..}).
Json FirstStreamObject(const std::string& body) {
  const size_t nl = body.find('\n');
  const absl::string_view line =
      nl == std::string::npos ? absl::string_view(body) : absl::string_view(body).substr(0, nl);
  return Json::parse(line.begin(), line.end(), nullptr, false);
}

void SetTimeouts(Connection* c, absl::Duration timeout, absl::Duration read_timeout) {
  const int64_t us = absl::ToInt64Microseconds(timeout);
  c->set_connection_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  c->set_write_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  const int64_t rus = absl::ToInt64Microseconds(read_timeout);
  c->set_read_timeout(static_cast<time_t>(rus / 1000000), static_cast<time_t>(rus % 1000000));
}

// An idle keep-alive connection has nothing to read; anything readable
// (EOF, a TLS close_notify) means etcd closed it. Sending on such a
// connection fails only after the request went out, which for a
// transaction would leave its outcome unknown.
bool IdleConnectionUsable(const Connection& c) {
  const socket_t fd = c.socket();
  if (fd == INVALID_SOCKET) return true;  // closed: cpp-httplib reconnects
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace

absl::StatusOr<Endpoint> SplitHostPort(absl::string_view text, absl::string_view what) {
  Endpoint ep;
  ep.name = std::string(text);
  absl::string_view host, port;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": host: \"[\" without \"]\""));
    }
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": port: missing (want host:port)"));
    }
    port = rest;
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": port: missing (want host:port)"));
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": host: an IPv6 address needs brackets ([::1]:2379)"));
    }
  }
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": host: empty"));
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != ':' &&
        c != '%') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": host: \"", absl::CHexEscape(host), "\" holds a character a host name cannot have"));
    }
  }
  int n = 0;
  if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(port, &n) || n < 1 || n > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": port: \"", absl::CHexEscape(port), "\" is not a number in 1..65535"));
  }
  ep.host = std::string(host);
  ep.port = n;
  return ep;
}

absl::Status CheckPemFile(const std::string& path, const char* field, bool key) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("etcd client: ", field, " \"", path, "\": cannot open it"));
  }
  bool ok = false;
  if (key) {
    EVP_PKEY* k = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
    ok = k != nullptr;
    EVP_PKEY_free(k);
  } else {
    X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
    ok = x != nullptr;
    X509_free(x);
  }
  std::fclose(f);
  ERR_clear_error();
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd client: ", field, " \"", path, "\": not a PEM ", key ? "private key" : "certificate"));
  }
  return absl::OkStatus();
}

Transport::Transport(ClientOptions options, std::vector<Endpoint> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)), idle_(endpoints_.size()) {}

void Transport::BackoffBefore(int attempt) {
  // A failed endpoint is followed by the next one at once; a pause only
  // comes when a whole round over the endpoints failed.
  const int n = static_cast<int>(endpoints_.size());
  if (attempt == 0 || attempt % n != 0) return;
  const int round = std::min(attempt / n - 1, 10);
  absl::SleepFor(std::min(options_.backoff * (int64_t{1} << round), kMaxBackoff));
}

absl::Status Transport::NoEndpoint(absl::string_view what, int attempts, const absl::Status& last) {
  return absl::UnavailableError(
      absl::StrCat(what, ": no etcd endpoint answered in ", attempts, " attempts; last: ", last.message()));
}

std::unique_ptr<Connection> Transport::NewConnection(size_t idx, absl::Duration read_timeout) {
  const Endpoint& ep = endpoints_[idx];
  std::unique_ptr<Connection> c;
  if (!options_.ca_file.empty()) {
    // From the files on every new connection: a rotated certificate is
    // picked up without a restart. Only ca_file is trusted (no system CAs).
    auto tls = std::make_unique<httplib::SSLClient>(ep.host, ep.port, options_.cert_file, options_.key_file);
    tls->set_ca_cert_path(options_.ca_file);
    tls->enable_server_certificate_verification(true);
    c = std::move(tls);
  } else {
    c = std::make_unique<Connection>(ep.host, ep.port);
  }
  SetTimeouts(c.get(), options_.timeout, read_timeout);
  c->set_keep_alive(true);
  // The request line, headers and body go out in separate writes: without
  // TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~40 ms per call.
  c->set_tcp_nodelay(true);
  return c;
}

std::unique_ptr<Connection> Transport::Borrow(size_t idx) {
  {
    absl::MutexLock lock(&pool_mu_);
    std::vector<std::unique_ptr<Connection>>& idle = idle_[idx];
    while (!idle.empty()) {
      std::unique_ptr<Connection> c = std::move(idle.back());
      idle.pop_back();
      if (IdleConnectionUsable(*c)) return c;
    }
  }
  return NewConnection(idx, options_.timeout);
}

void Transport::Return(size_t idx, std::unique_ptr<Connection> c) {
  if (!c->is_socket_open()) return;
  absl::MutexLock lock(&pool_mu_);
  if (idle_[idx].size() < kMaxIdlePerEndpoint) idle_[idx].push_back(std::move(c));
}

absl::StatusOr<Json> Transport::Call(const std::string& what, const std::string& path, const Json& request, Retry retry,
                                     bool stream) {
  const std::string body = Dump(request);
  const size_t first = preferred_.load();
  const int attempts = std::max(1, options_.max_attempts);
  absl::Status last;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const size_t idx = (first + attempt) % endpoints_.size();
    const std::string& name = endpoints_[idx].name;
    BackoffBefore(attempt);
    std::unique_ptr<Connection> c = Borrow(idx);
    Attempt a = PostOnce(c.get(), path, body);
    Json answer;
    if (a.http_status != 0) answer = stream ? FirstStreamObject(a.body) : Json::parse(a.body, nullptr, false);
    const bool is_json = a.http_status != 0 && !answer.is_discarded() && answer.is_object();

    if (a.http_status == 0 || (!is_json && !a.complete)) {
      // No answer, or one that broke off.
      last = absl::UnavailableError(
          absl::StrCat(name, ": ", a.http_status == 0 ? "" : "the answer broke off: ", httplib::to_string(a.error)));
      if (retry == Retry::kIfUnsent && !a.unsent) {
        return absl::UnavailableError(absl::StrCat(what, ": ", last.message(),
                                                   " after the request was sent: outcome unknown; read back to "
                                                   "find out"));
      }
      continue;
    }
    if (a.complete) Return(idx, std::move(c));
    if (!is_json) {
      if (a.http_status >= 500 && retry == Retry::kSafe) {
        last = absl::UnavailableError(absl::StrCat(name, ": HTTP ", a.http_status));
        continue;
      }
      const std::string start(absl::StripAsciiWhitespace(absl::string_view(a.body).substr(0, 120)));
      return NotGateway(what,
                        absl::StrCat(name, " answered HTTP ", a.http_status, " \"", absl::CHexEscape(start), "\""));
    }
    // A streamed answer wraps the message in "result" and sends errors as
    // {"error":{"grpc_code":..}}; a plain one is the message or, when not
    // 200, {"error":"..","code":..}.
    const Json* error = nullptr;
    if (a.http_status != 200) {
      error = &answer;
    } else if (stream) {
      error = GetObject(answer, "error");
    }
    if (error != nullptr) {
      int64_t code = 0;
      std::string message;
      if (!ParseGatewayError(*error, &code, &message)) {
        return NotGateway(what, absl::StrCat(name, " answered HTTP ", a.http_status, " without an error code"));
      }
      absl::Status s = GatewayError(what, code, message);
      if (code != kGrpcUnavailable) {
        preferred_.store(idx);
        return s;
      }
      if (retry == Retry::kIfUnsent) {
        // etcd's Unavailable covers "request timed out" after the
        // proposal was made as well as "no leader".
        return absl::UnavailableError(absl::StrCat(s.message(), " (outcome unknown; read back to find out)"));
      }
      last = absl::UnavailableError(absl::StrCat(name, ": ", message));
      continue;
    }
    preferred_.store(idx);
    if (stream) {
      const Json* result = GetObject(answer, "result");
      if (result == nullptr) return NotGateway(what, "a stream answer without result");
      return *result;
    }
    return answer;
  }
  return NoEndpoint(what, attempts, last);
}

}  // namespace gangkeeper::etcd
