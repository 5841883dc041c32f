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

#include <algorithm>
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

// The first JSON line of a streamed answer ({"result":..} or {"error":..}).
Json FirstStreamObject(const std::string& body) {
  const size_t nl = body.find('\n');
  const absl::string_view line =
      nl == std::string::npos ? absl::string_view(body) : absl::string_view(body).substr(0, nl);
  return Json::parse(line.begin(), line.end(), nullptr, false);
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

httpc::Request JsonPost(const std::string& path, std::string body, size_t max_body_bytes) {
  httpc::Request req;
  req.method = "POST";
  req.path = path;
  req.body = std::move(body);
  req.content_type = "application/json";
  req.headers = {{"Accept", "application/json"}};
  req.max_body_bytes = max_body_bytes;
  return req;
}

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(ClientOptions options, std::vector<Endpoint> endpoints) {
  std::vector<std::unique_ptr<httpc::Pool>> pools;
  for (const Endpoint& ep : endpoints) {
    httpc::PoolOptions po;
    po.host = ep.host;
    po.port = ep.port;
    if (!options.ca_file.empty()) {
      // Only ca_file is trusted (no system CAs); the files are read by
      // every new connection, so a rotated certificate is picked up
      // without a restart.
      po.tls.emplace();
      po.tls->ca_file = options.ca_file;
      po.tls->cert_file = options.cert_file;
      po.tls->key_file = options.key_file;
    }
    po.timeout = options.timeout;
    po.max_idle = kMaxIdlePerEndpoint;
    absl::StatusOr<std::unique_ptr<httpc::Pool>> pool = httpc::Pool::Create(std::move(po));
    if (!pool.ok()) {
      return absl::Status(pool.status().code(), absl::StrCat("etcd client: ", ep.name, ": ", pool.status().message()));
    }
    pools.push_back(*std::move(pool));
  }
  return std::unique_ptr<Transport>(new Transport(std::move(options), std::move(endpoints), std::move(pools)));
}

Transport::Transport(ClientOptions options, std::vector<Endpoint> endpoints,
                     std::vector<std::unique_ptr<httpc::Pool>> pools)
    : options_(std::move(options)),
      endpoints_(std::move(endpoints)),
      pools_(std::move(pools)),
      // A doubling pause per failed round, no jitter, up to kMaxBackoff.
      backoff_(httpc::BackoffPolicy{
          .initial = options_.backoff, .max = kMaxBackoff, .max_doublings = 10, .full_jitter = false}) {}

void Transport::BackoffBefore(int attempt) {
  // A failed endpoint is followed by the next one at once; a pause only
  // comes when a whole round over the endpoints failed.
  const int n = static_cast<int>(endpoints_.size());
  if (attempt == 0 || attempt % n != 0) return;
  sleeper_.Sleep(backoff_.Delay(attempt / n - 1));
}

absl::Status Transport::NoEndpoint(absl::string_view what, int attempts, const absl::Status& last) {
  return absl::UnavailableError(
      absl::StrCat(what, ": no etcd endpoint answered in ", attempts, " attempts; last: ", last.message()));
}

std::unique_ptr<Connection> Transport::NewConnection(size_t idx, absl::Duration read_timeout) {
  return pools_[idx]->Open(read_timeout);
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
    std::unique_ptr<Connection> c = pools_[idx]->Borrow();
    httpc::Response a = c->Send(JsonPost(path, body, kMaxAnswerBytes));
    Json answer;
    if (a.status != 0) answer = stream ? FirstStreamObject(a.body) : Json::parse(a.body, nullptr, false);
    const bool is_json = a.status != 0 && !answer.is_discarded() && answer.is_object();

    if (a.status == 0 || (!is_json && !a.complete)) {
      // No answer, or one that broke off.
      last = absl::UnavailableError(
          absl::StrCat(name, ": ", a.status == 0 ? "" : "the answer broke off: ", a.error));
      if (retry == Retry::kIfUnsent && !a.unsent) {
        return absl::UnavailableError(absl::StrCat(what, ": ", last.message(),
                                                   " after the request was sent: outcome unknown; read back to "
                                                   "find out"));
      }
      continue;
    }
    if (a.complete) pools_[idx]->Return(std::move(c));
    if (!is_json) {
      if (a.status >= 500 && retry == Retry::kSafe) {
        last = absl::UnavailableError(absl::StrCat(name, ": HTTP ", a.status));
        continue;
      }
      const std::string start(absl::StripAsciiWhitespace(absl::string_view(a.body).substr(0, 120)));
      return NotGateway(what,
                        absl::StrCat(name, " answered HTTP ", a.status, " \"", absl::CHexEscape(start), "\""));
    }
    // A streamed answer wraps the message in "result" and sends errors as
    // {"error":{"grpc_code":..}}; a plain one is the message or, when not
    // 200, {"error":"..","code":..}.
    const Json* error = nullptr;
    if (a.status != 200) {
      error = &answer;
    } else if (stream) {
      error = GetObject(answer, "error");
    }
    if (error != nullptr) {
      int64_t code = 0;
      std::string message;
      if (!ParseGatewayError(*error, &code, &message)) {
        return NotGateway(what, absl::StrCat(name, " answered HTTP ", a.status, " without an error code"));
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
