// gangkeeper store/etcd: the etcd v3 JSON-gateway client (see client.h).
//
// Gateway facts this file relies on, checked against etcd 3.4.23:
//  * every call is a POST of one JSON object; bytes fields are base64,
//    int64 fields are strings, and fields holding their default value
//    (0, false, "", PUT) are left out of answers;
//  * a refused call answers a non-200 status with
//    {"error":..,"message":..,"code":<gRPC code>}, sent chunked with an HTTP
//    trailer that cpp-httplib 0.11 cannot read (it reports Error::Read after
//    the whole body arrived), so status and body are captured by callbacks
//    and an error is judged by whether the body is complete JSON;
//  * /v3/lease/keepalive answers one {"result":{...}} and ends the response
//    once the request body is over;
//  * /v3/watch answers {"result":{...}} objects, one per line, and never ends
//    the response by itself: not after a cancel (a compacted start revision
//    gives "created" and then "canceled" + "compact_revision"), nor after
//    an error object {"error":{"grpc_code":..,"message":..}} (etcd stopping).
//
// Connections: calls borrow a keep-alive connection per endpoint from a
// small pool; a watch opens its own and keeps it for its whole life.
#include "gangkeeper/store/etcd/client.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::etcd {
namespace {

using Json = nlohmann::json;

// A watch stream is quiet while nothing changes. etcd sends progress
// notifications every 10 minutes by default
// (--experimental-watch-progress-notify-interval), so a stream silent for
// longer than this is taken for dead: the watch ends with Unavailable and
// the caller resumes from its last revision.
constexpr absl::Duration kWatchIdleTimeout = absl::Minutes(11);
// Idle keep-alive connections kept per endpoint.
constexpr size_t kMaxIdlePerEndpoint = 4;
// The largest answer (etcd's own request limit is 1.5 MiB; a range of many
// keys can be far larger).
constexpr size_t kMaxAnswerBytes = size_t{256} << 20;
// The longest watch line (one etcd response) kept while waiting for its end.
constexpr size_t kMaxWatchLineBytes = size_t{64} << 20;
// The longest backoff between two rounds over the endpoints.
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);

struct Endpoint {
  std::string host;  // without IPv6 brackets
  int port = 0;
  std::string name;  // "host:port" as given
};

// "host:port" or "[v6]:port"; `what` names it in messages.
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
      return absl::InvalidArgumentError(absl::StrCat(what, ": host: \"", absl::CHexEscape(host),
                                                     "\" holds a character a host name cannot have"));
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

// A key for messages: printable, escaped, at most ~80 bytes.
std::string Quote(absl::string_view key) {
  constexpr size_t kMax = 80;
  std::string out = absl::StrCat("\"", absl::CHexEscape(key.substr(0, kMax)), "\"");
  if (key.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

std::string B64(absl::string_view bytes) { return absl::Base64Escape(bytes); }

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// proto3 JSON writes int64 as a string (and a missing field means 0);
// a plain number is accepted too.
bool GetInt64(const Json& obj, const char* name, int64_t* out) {
  *out = 0;
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (it->is_string()) return absl::SimpleAtoi(it->get_ref<const std::string&>(), out);
  return false;
}

bool GetBool(const Json& obj, const char* name, bool* out) {
  *out = false;
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

// A base64 bytes field; missing means empty.
bool GetBytes(const Json& obj, const char* name, std::string* out) {
  out->clear();
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  return absl::Base64Unescape(it->get_ref<const std::string&>(), out);
}

std::string GetString(const Json& obj, const char* name) {
  if (!obj.is_object()) return "";
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json* GetObject(const Json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

const Json* GetArray(const Json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it != obj.end() && it->is_array() ? &*it : nullptr;
}

absl::Status NotGateway(absl::string_view what, absl::string_view detail) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": the answer is not etcd's v3 JSON gateway: ", detail));
}

absl::StatusOr<int64_t> HeaderRevision(absl::string_view what, const Json& answer) {
  int64_t rev = 0;
  const Json* header = GetObject(answer, "header");
  if (header != nullptr && !GetInt64(*header, "revision", &rev)) return NotGateway(what, "header.revision");
  return rev;
}

absl::Status DecodeKv(absl::string_view what, const Json& j, KeyValue* kv) {
  if (!j.is_object()) return NotGateway(what, "a kv is not an object");
  if (!GetBytes(j, "key", &kv->key) || !GetBytes(j, "value", &kv->value) ||
      !GetInt64(j, "create_revision", &kv->create_revision) || !GetInt64(j, "mod_revision", &kv->mod_revision) ||
      !GetInt64(j, "version", &kv->version) || !GetInt64(j, "lease", &kv->lease)) {
    return NotGateway(what, "a kv field has the wrong type");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KeyValue>> DecodeKvs(absl::string_view what, const Json& answer) {
  std::vector<KeyValue> kvs;
  if (!answer.is_object() || !answer.contains("kvs")) return kvs;
  const Json* list = GetArray(answer, "kvs");
  if (list == nullptr) return NotGateway(what, "kvs is not a list");
  kvs.reserve(list->size());
  for (const Json& j : *list) {
    KeyValue kv;
    GK_RETURN_IF_ERROR(DecodeKv(what, j, &kv));
    kvs.push_back(std::move(kv));
  }
  return kvs;
}

// etcd's gRPC code as the absl code (the two share their numbering).
absl::StatusCode FromGrpc(int64_t code) {
  if (code <= 0 || code > 16) return absl::StatusCode::kUnknown;
  return static_cast<absl::StatusCode>(code);
}

constexpr int kGrpcUnavailable = 14;

// The gateway's error object: {"error":"..","message":"..","code":N} as an
// answer, or {"grpc_code":N,"message":".."} inside a stream. Sets *code.
bool ParseGatewayError(const Json& j, int64_t* code, std::string* message) {
  if (!j.is_object()) return false;
  if (!GetInt64(j, "code", code) || *code == 0) {
    if (!GetInt64(j, "grpc_code", code) || *code == 0) return false;
  }
  *message = GetString(j, "message");
  if (message->empty()) *message = GetString(j, "error");
  return true;
}

absl::Status GatewayError(absl::string_view what, int64_t code, const std::string& message) {
  return absl::Status(FromGrpc(code), absl::StrCat(what, ": ", message.empty() ? "no message" : message));
}

// The base of the HTTP client and its TLS variant (SSLClient derives from it).
using Connection = httplib::ClientImpl;

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
  const absl::string_view line = nl == std::string::npos ? absl::string_view(body) : absl::string_view(body).substr(0, nl);
  return Json::parse(line.begin(), line.end(), nullptr, false);
}

std::string CompareTarget(Compare::Target t) {
  switch (t) {
    case Compare::Target::kVersion: return "VERSION";
    case Compare::Target::kCreateRevision: return "CREATE";
    case Compare::Target::kModRevision: return "MOD";
    case Compare::Target::kValue: return "VALUE";
    case Compare::Target::kLease: return "LEASE";
  }
  return "MOD";
}

std::string CompareResult(Compare::Result r) {
  switch (r) {
    case Compare::Result::kEqual: return "EQUAL";
    case Compare::Result::kNotEqual: return "NOT_EQUAL";
    case Compare::Result::kGreater: return "GREATER";
    case Compare::Result::kLess: return "LESS";
  }
  return "EQUAL";
}

Json CompareJson(const Compare& c) {
  Json j = {{"key", B64(c.key)}, {"target", CompareTarget(c.target)}, {"result", CompareResult(c.result)}};
  const std::string n = absl::StrCat(c.number);
  switch (c.target) {
    case Compare::Target::kVersion: j["version"] = n; break;
    case Compare::Target::kCreateRevision: j["create_revision"] = n; break;
    case Compare::Target::kModRevision: j["mod_revision"] = n; break;
    case Compare::Target::kLease: j["lease"] = n; break;
    case Compare::Target::kValue: j["value"] = B64(c.value); break;
  }
  if (!c.range_end.empty()) j["range_end"] = B64(c.range_end);
  return j;
}

Json OpJson(const Op& op) {
  Json body = {{"key", B64(op.key)}};
  switch (op.type) {
    case Op::Type::kPut:
      body["value"] = B64(op.value);
      if (op.lease != 0) body["lease"] = absl::StrCat(op.lease);
      return {{"request_put", std::move(body)}};
    case Op::Type::kDelete:
      if (!op.range_end.empty()) body["range_end"] = B64(op.range_end);
      return {{"request_delete_range", std::move(body)}};
    case Op::Type::kRange:
      if (!op.range_end.empty()) body["range_end"] = B64(op.range_end);
      return {{"request_range", std::move(body)}};
  }
  return Json::object();
}

// Reads a PEM file's first certificate or key to reject a bad file at
// Create() rather than on every connection.
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
    return absl::InvalidArgumentError(absl::StrCat("etcd client: ", field, " \"", path, "\": not a PEM ",
                                                   key ? "private key" : "certificate"));
  }
  return absl::OkStatus();
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

using EventsFn = std::function<void(const std::vector<WatchEvent>&, int64_t)>;
using EndFn = std::function<void(const absl::Status&)>;

// One watch: one streamed POST on its own connection and thread.
class HttpWatch final : public Watch {
 public:
  HttpWatch(std::string what, std::unique_ptr<Connection> conn, EventsFn on_events, EndFn on_end)
      : what_(std::move(what)), conn_(std::move(conn)), on_events_(std::move(on_events)), on_end_(std::move(on_end)) {}

  ~HttpWatch() override {
    // Joining from the watch's own thread would wait for itself.
    GK_CHECK_MSG(std::this_thread::get_id() != thread_.get_id(),
                 "an etcd Watch was destroyed from inside its own callback");
    Cancel();
    StopUntilDone();
    if (thread_.joinable()) thread_.join();
  }

  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // Cuts a stream in flight at once (a shutdown of its socket), without
    // waiting for the read timeout.
    conn_->stop();
    // After Cancel() returns no callback runs, unless Cancel() came from a
    // callback (which then is the one running).
    if (std::this_thread::get_id() != thread_.get_id()) {
      mu_.Await(absl::Condition(+[](bool* delivering) { return !*delivering; }, &delivering_));
    }
  }

  void Begin(std::string path, std::string body) {
    thread_ = std::thread([this, path = std::move(path), body = std::move(body)] { Run(path, body); });
  }

  // Waits up to `timeout` for etcd's "created". OK: the watch is the
  // caller's from now on. Otherwise the watch is abandoned (no callback
  // will run) and the status says why.
  absl::Status AwaitCreated(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &HttpWatch::Started), timeout);
    if (state_ == State::kCreated) {
      released_ = true;
      return absl::OkStatus();
    }
    if (state_ == State::kStarting) {
      state_ = State::kFailed;
      start_status_ = absl::DeadlineExceededError(
          absl::StrCat(what_, ": etcd did not confirm the watch within ", absl::FormatDuration(timeout)));
    }
    cancelled_ = true;
    conn_->stop();
    return start_status_;
  }

  // The start failed in a way another endpoint or a later attempt may not
  // see (etcd unreachable or unavailable).
  bool StartRetryable() {
    absl::MutexLock lock(&mu_);
    return start_retryable_;
  }

 private:
  enum class State { kStarting, kCreated, kFailed };

  bool Started() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_ != State::kStarting; }
  bool ReleasedOrCancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_ || cancelled_; }
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; }

  bool IsCancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // stop() finds nothing to cut while the thread is between requests (not
  // yet sending): repeat it until the thread is done. The first one
  // normally ends the stream; the bound only guards against a thread stuck
  // in the library.
  void StopUntilDone() {
    for (int i = 0; i < 200; ++i) {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      conn_->stop();
      mu_.AwaitWithTimeout(absl::Condition(this, &HttpWatch::Done), absl::Milliseconds(50));
    }
  }

  // Runs a user callback unless the watch was cancelled; false when it was
  // (or became so during the callback).
  template <typename F>
  bool Deliver(F&& f) {
    {
      absl::MutexLock lock(&mu_);
      // StartWatch() hands the watch over right after "created": callbacks
      // begin only once the caller holds the Watch.
      mu_.Await(absl::Condition(this, &HttpWatch::ReleasedOrCancelled));
      if (cancelled_) return false;
      delivering_ = true;
    }
    f();
    absl::MutexLock lock(&mu_);
    delivering_ = false;
    return !cancelled_;
  }

  void Fail(absl::Status why, bool retryable) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kStarting) return;
    state_ = State::kFailed;
    start_status_ = std::move(why);
    start_retryable_ = retryable;
  }

  // Handles one etcd response; false ends the stream with end_ set.
  bool HandleLine(absl::string_view line) {
    Json j = Json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      end_ = NotGateway(what_, "a watch line is not a JSON object");
      return false;
    }
    if (const Json* error = GetObject(j, "error")) {
      int64_t code = 0;
      std::string message;
      if (!ParseGatewayError(*error, &code, &message)) code = 2;
      end_ = GatewayError(what_, code, message);
      end_retryable_ = code == kGrpcUnavailable;
      return false;
    }
    const Json* result = GetObject(j, "result");
    if (result == nullptr) {
      end_ = NotGateway(what_, "a watch line has neither result nor error");
      return false;
    }
    int64_t revision = 0, compact_revision = 0;
    bool created = false, canceled = false;
    const Json* header = GetObject(*result, "header");
    if ((header != nullptr && !GetInt64(*header, "revision", &revision)) ||
        !GetInt64(*result, "compact_revision", &compact_revision) || !GetBool(*result, "created", &created) ||
        !GetBool(*result, "canceled", &canceled)) {
      end_ = NotGateway(what_, "a watch response field has the wrong type");
      return false;
    }
    if (compact_revision > 0) {
      end_ = absl::OutOfRangeError(absl::StrCat(what_, ": the start revision is compacted (etcd kept revisions from ",
                                                compact_revision, " on); read the current state and watch again"));
      return false;
    }
    if (canceled) {
      const std::string reason = GetString(*result, "cancel_reason");
      if (!created_) {
        // Refused at creation ("created" and "canceled" together): e.g. an
        // empty key range.
        end_ = absl::InvalidArgumentError(absl::StrCat(what_, ": etcd refused the watch: ", reason));
      } else {
        end_ = absl::UnavailableError(
            absl::StrCat(what_, ": etcd canceled the watch", reason.empty() ? "" : ": ", reason));
        end_retryable_ = true;
      }
      return false;
    }
    if (created) {
      if (!created_) {
        created_ = true;
        absl::MutexLock lock(&mu_);
        if (state_ != State::kStarting) return false;  // StartWatch() gave up
        state_ = State::kCreated;
        return true;
      }
      return true;
    }
    if (!created_) {
      end_ = NotGateway(what_, "the first watch response is not \"created\"");
      return false;
    }
    std::vector<WatchEvent> events;
    if (result->contains("events")) {
      const Json* list = GetArray(*result, "events");
      if (list == nullptr) {
        end_ = NotGateway(what_, "events is not a list");
        return false;
      }
      events.reserve(list->size());
      for (const Json& e : *list) {
        WatchEvent ev;
        const std::string type = GetString(e, "type");
        if (type == "DELETE") {
          ev.type = WatchEvent::Type::kDelete;
        } else if (!type.empty() && type != "PUT") {
          end_ = NotGateway(what_, absl::StrCat("an event of type ", type));
          return false;
        }
        const Json* kv = GetObject(e, "kv");
        if (kv == nullptr) {
          end_ = NotGateway(what_, "an event without kv");
          return false;
        }
        if (absl::Status s = DecodeKv(what_, *kv, &ev.kv); !s.ok()) {
          end_ = std::move(s);
          return false;
        }
        events.push_back(std::move(ev));
      }
    }
    return Deliver([&] { on_events_(events, revision); });
  }

  void Run(const std::string& path, const std::string& body) {
    int http_status = 0;
    std::string buffer;  // bytes of a line not yet complete
    std::string error_body;
    bool stopped = false;  // a handler ended the stream (end_ says why)
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body;
    req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
    req.response_handler = [&](const httplib::Response& res) {
      http_status = res.status;
      return !IsCancelled();
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (http_status != 200) {
        if (error_body.size() < 65536) error_body.append(data, n);
        return true;
      }
      buffer.append(data, n);
      size_t start = 0;
      for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n', start)) {
        const absl::string_view line = absl::StripAsciiWhitespace(absl::string_view(buffer).substr(start, nl - start));
        start = nl + 1;
        if (line.empty()) continue;
        if (!HandleLine(line)) {
          stopped = true;
          return false;
        }
      }
      buffer.erase(0, start);
      if (buffer.size() > kMaxWatchLineBytes) {
        end_ = absl::ResourceExhaustedError(absl::StrCat(what_, ": a watch response over ",
                                                         kMaxWatchLineBytes >> 20, " MiB"));
        stopped = true;
        return false;
      }
      return !IsCancelled();
    };
    httplib::Result r = IsCancelled() ? httplib::Result(nullptr, httplib::Error::Canceled) : conn_->send(req);

    if (!created_) {
      absl::Status why = end_;
      bool retryable = end_retryable_;
      if (why.ok()) {
        if (http_status != 0 && http_status != 200) {
          Json j = Json::parse(error_body, nullptr, false);
          int64_t code = 0;
          std::string message;
          if (ParseGatewayError(j, &code, &message)) {
            why = GatewayError(what_, code, message);
            retryable = code == kGrpcUnavailable;
          } else {
            why = absl::UnavailableError(absl::StrCat(what_, ": HTTP ", http_status));
            retryable = http_status >= 500;
          }
        } else {
          why = absl::UnavailableError(absl::StrCat(what_, ": ", httplib::to_string(r.error())));
          retryable = true;
        }
      }
      Fail(std::move(why), retryable);
    } else if (!stopped || !end_.ok()) {
      absl::Status why = end_;
      if (why.ok()) {
        why = absl::UnavailableError(
            absl::StrCat(what_, ": the stream ended: ", r ? "etcd closed it" : httplib::to_string(r.error())));
      }
      Deliver([&] { on_end_(why); });
    }
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  const std::string what_;
  // The connection never changes; its stop() is thread-safe.
  const std::unique_ptr<Connection> conn_;
  const EventsFn on_events_;
  const EndFn on_end_;
  std::thread thread_;

  // Only the watch thread touches these.
  bool created_ = false;
  absl::Status end_;
  bool end_retryable_ = false;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kStarting;
  absl::Status start_status_ ABSL_GUARDED_BY(mu_);
  bool start_retryable_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// How a call may be repeated after a failure.
enum class Retry {
  // A repeat leaves the same state: reads, puts, deletes (a repeated delete
  // may count 0), lease calls (a repeated grant may leave an unused lease
  // behind until its TTL runs out), compaction.
  kSafe,
  // Only when the request surely did not reach etcd: a transaction's
  // compares make a repeat unsafe.
  kIfUnsent,
};

class HttpEtcdClient final : public Client {
 public:
  HttpEtcdClient(ClientOptions options, std::vector<Endpoint> endpoints)
      : options_(std::move(options)), endpoints_(std::move(endpoints)), idle_(endpoints_.size()) {}

  absl::StatusOr<RangeResult> Range(const std::string& key, const RangeOptions& options) override {
    const std::string what = absl::StrCat("etcd range ", Quote(key));
    Json req = {{"key", B64(key)}};
    if (!options.range_end.empty()) req["range_end"] = B64(options.range_end);
    if (options.limit > 0) req["limit"] = absl::StrCat(options.limit);
    if (options.revision > 0) req["revision"] = absl::StrCat(options.revision);
    if (options.keys_only) req["keys_only"] = true;
    if (options.count_only) req["count_only"] = true;
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/kv/range", req, Retry::kSafe));
    RangeResult r;
    GK_ASSIGN_OR_RETURN(r.revision, HeaderRevision(what, answer));
    GK_ASSIGN_OR_RETURN(r.kvs, DecodeKvs(what, answer));
    if (!GetBool(answer, "more", &r.more) || !GetInt64(answer, "count", &r.count)) {
      return NotGateway(what, "more or count has the wrong type");
    }
    return r;
  }

  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease) override {
    const std::string what = absl::StrCat("etcd put ", Quote(key));
    Json req = {{"key", B64(key)}, {"value", B64(value)}};
    if (lease != 0) req["lease"] = absl::StrCat(lease);
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/kv/put", req, Retry::kSafe));
    return HeaderRevision(what, answer);
  }

  absl::StatusOr<std::pair<int64_t, int64_t>> Delete(const std::string& key, const std::string& range_end) override {
    const std::string what = absl::StrCat("etcd delete ", Quote(key));
    Json req = {{"key", B64(key)}};
    if (!range_end.empty()) req["range_end"] = B64(range_end);
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/kv/deleterange", req, Retry::kSafe));
    std::pair<int64_t, int64_t> out;
    GK_ASSIGN_OR_RETURN(out.first, HeaderRevision(what, answer));
    if (!GetInt64(answer, "deleted", &out.second)) return NotGateway(what, "deleted has the wrong type");
    return out;
  }

  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                                const std::vector<Op>& failure) override {
    const std::string what =
        absl::StrCat("etcd txn (", compares.size(), " compares, ", success.size(), "/", failure.size(), " ops)");
    Json req = {{"compare", Json::array()}, {"success", Json::array()}, {"failure", Json::array()}};
    for (const Compare& c : compares) req["compare"].push_back(CompareJson(c));
    for (const Op& op : success) req["success"].push_back(OpJson(op));
    for (const Op& op : failure) req["failure"].push_back(OpJson(op));
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/kv/txn", req, Retry::kIfUnsent));
    TxnResult r;
    GK_ASSIGN_OR_RETURN(r.revision, HeaderRevision(what, answer));
    if (!GetBool(answer, "succeeded", &r.succeeded)) return NotGateway(what, "succeeded has the wrong type");
    const std::vector<Op>& branch = r.succeeded ? success : failure;
    if (answer.contains("responses")) {
      const Json* list = GetArray(answer, "responses");
      if (list == nullptr) return NotGateway(what, "responses is not a list");
      for (const Json& one : *list) {
        if (const Json* range = GetObject(one, "response_range")) {
          GK_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, DecodeKvs(what, *range));
          r.responses.push_back(std::move(kvs));
        } else {
          r.responses.emplace_back();
        }
      }
    }
    if (r.responses.size() != branch.size()) {
      return NotGateway(what, absl::StrCat(r.responses.size(), " responses for ", branch.size(), " ops"));
    }
    return r;
  }

  absl::StatusOr<LeaseGrant> Grant(absl::Duration ttl) override {
    const std::string what = "etcd lease grant";
    if (ttl < absl::Seconds(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ttl ", absl::FormatDuration(ttl), " is under etcd's unit of 1s"));
    }
    const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/lease/grant", {{"TTL", absl::StrCat(seconds)}}, Retry::kSafe));
    if (std::string error = GetString(answer, "error"); !error.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", error));
    }
    LeaseGrant g;
    if (!GetInt64(answer, "ID", &g.id) || !GetInt64(answer, "TTL", &g.ttl_seconds) || g.id == 0) {
      return NotGateway(what, "ID or TTL");
    }
    return g;
  }

  absl::StatusOr<int64_t> KeepAlive(int64_t lease) override {
    const std::string what = absl::StrCat("etcd lease keepalive ", lease);
    GK_ASSIGN_OR_RETURN(Json answer,
                        Call(what, "/v3/lease/keepalive", {{"ID", absl::StrCat(lease)}}, Retry::kSafe, true));
    int64_t ttl = 0;
    if (!GetInt64(answer, "TTL", &ttl)) return NotGateway(what, "TTL has the wrong type");
    // An unknown (expired, revoked) lease answers without TTL.
    if (ttl <= 0) return absl::NotFoundError(absl::StrCat(what, ": the lease expired or was revoked"));
    return ttl;
  }

  absl::Status Revoke(int64_t lease) override {
    const std::string what = absl::StrCat("etcd lease revoke ", lease);
    return Call(what, "/v3/lease/revoke", {{"ID", absl::StrCat(lease)}}, Retry::kSafe).status();
  }

  absl::StatusOr<int64_t> TimeToLive(int64_t lease) override {
    const std::string what = absl::StrCat("etcd lease timetolive ", lease);
    GK_ASSIGN_OR_RETURN(Json answer, Call(what, "/v3/lease/timetolive", {{"ID", absl::StrCat(lease)}}, Retry::kSafe));
    int64_t ttl = 0;
    if (!GetInt64(answer, "TTL", &ttl)) return NotGateway(what, "TTL has the wrong type");
    if (ttl < 0) return absl::NotFoundError(absl::StrCat(what, ": the lease expired or was revoked"));
    return ttl;
  }

  absl::Status Compact(int64_t revision) override {
    const std::string what = absl::StrCat("etcd compact to ", revision);
    return Call(what, "/v3/kv/compaction", {{"revision", absl::StrCat(revision)}}, Retry::kSafe).status();
  }

  absl::StatusOr<std::unique_ptr<Watch>> StartWatch(const std::string& key, const WatchOptions& options,
                                                    EventsFn on_events, EndFn on_end) override {
    const std::string what = absl::StrCat("etcd watch ", Quote(key));
    Json create = {{"key", B64(key)}};
    if (!options.range_end.empty()) create["range_end"] = B64(options.range_end);
    if (options.start_revision > 0) create["start_revision"] = absl::StrCat(options.start_revision);
    if (options.progress_notify) create["progress_notify"] = true;
    const std::string body = Dump(Json{{"create_request", std::move(create)}});

    absl::Status last;
    const size_t first = preferred_.load();
    const int attempts = std::max(1, options_.max_attempts);
    for (int attempt = 0; attempt < attempts; ++attempt) {
      const size_t idx = (first + attempt) % endpoints_.size();
      BackoffBefore(attempt);
      auto watch = std::make_unique<HttpWatch>(absl::StrCat(what, " at ", endpoints_[idx].name),
                                               NewConnection(idx, kWatchIdleTimeout), on_events, on_end);
      watch->Begin("/v3/watch", body);
      absl::Status s = watch->AwaitCreated(options_.timeout);
      if (s.ok()) {
        preferred_.store(idx);
        return watch;
      }
      const bool retryable = watch->StartRetryable() || s.code() == absl::StatusCode::kDeadlineExceeded;
      watch.reset();
      if (!retryable) return s;
      last = std::move(s);
    }
    return NoEndpoint(what, attempts, last);
  }

 private:
  void BackoffBefore(int attempt) {
    // A failed endpoint is followed by the next one at once; a pause only
    // comes when a whole round over the endpoints failed.
    const int n = static_cast<int>(endpoints_.size());
    if (attempt == 0 || attempt % n != 0) return;
    const int round = std::min(attempt / n - 1, 10);
    absl::SleepFor(std::min(options_.backoff * (int64_t{1} << round), kMaxBackoff));
  }

  absl::Status NoEndpoint(absl::string_view what, int attempts, const absl::Status& last) {
    return absl::UnavailableError(
        absl::StrCat(what, ": no etcd endpoint answered in ", attempts, " attempts; last: ", last.message()));
  }

  std::unique_ptr<Connection> NewConnection(size_t idx, absl::Duration read_timeout) {
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

  std::unique_ptr<Connection> Borrow(size_t idx) {
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

  void Return(size_t idx, std::unique_ptr<Connection> c) {
    if (!c->is_socket_open()) return;
    absl::MutexLock lock(&pool_mu_);
    if (idle_[idx].size() < kMaxIdlePerEndpoint) idle_[idx].push_back(std::move(c));
  }

  // One call with failover and retries. `stream`: the answer is a stream
  // of {"result":..} / {"error":..} objects of which the first counts.
  absl::StatusOr<Json> Call(const std::string& what, const std::string& path, const Json& request, Retry retry,
                            bool stream = false) {
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
        last = absl::UnavailableError(absl::StrCat(name, ": ", a.http_status == 0 ? "" : "the answer broke off: ",
                                                   httplib::to_string(a.error)));
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
        return NotGateway(what, absl::StrCat(name, " answered HTTP ", a.http_status, " \"", absl::CHexEscape(start),
                                             "\""));
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

  const ClientOptions options_;
  const std::vector<Endpoint> endpoints_;
  // The endpoint that answered last: calls start there.
  std::atomic<size_t> preferred_{0};

  absl::Mutex pool_mu_;
  std::vector<std::vector<std::unique_ptr<Connection>>> idle_ ABSL_GUARDED_BY(pool_mu_);
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view url) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("etcd URL \"", absl::CHexEscape(url), "\": ", why,
                                                   " (want etcd://host:port[,host:port...])"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "etcd://")) return bad("scheme: must be etcd://");
  if (rest.empty()) return bad("no endpoint after etcd://");
  std::vector<std::string> out;
  int n = 0;
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    ++n;
    const std::string what = absl::StrCat("endpoint ", n, " \"", absl::CHexEscape(part), "\"");
    if (part.empty()) return bad(absl::StrCat("endpoint ", n, ": empty"));
    absl::StatusOr<Endpoint> ep = SplitHostPort(part, what);
    if (!ep.ok()) return bad(ep.status().message());
    if (std::find(out.begin(), out.end(), part) != out.end()) return bad(absl::StrCat(what, ": given twice"));
    out.emplace_back(part);
  }
  return out;
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  // Drop trailing 0xff bytes (they cannot be incremented), then increment
  // the last byte. Nothing left: every key from `prefix` on ("\0", as in
  // etcd's clientv3).
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd client: endpoints: none given");
  std::vector<Endpoint> endpoints;
  for (size_t i = 0; i < options.endpoints.size(); ++i) {
    GK_ASSIGN_OR_RETURN(Endpoint ep, SplitHostPort(options.endpoints[i],
                                                   absl::StrCat("etcd client: endpoints[", i, "] \"",
                                                                absl::CHexEscape(options.endpoints[i]), "\"")));
    endpoints.push_back(std::move(ep));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd client: timeout: ", absl::FormatDuration(options.timeout), " is not positive"));
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd client: max_attempts: ", options.max_attempts, " is under 1"));
  }
  if (options.backoff < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd client: backoff: negative");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("etcd client: cert_file and key_file: give both or neither");
  }
  if (!options.cert_file.empty() && options.ca_file.empty()) {
    return absl::InvalidArgumentError("etcd client: cert_file: a client certificate needs TLS (set ca_file)");
  }
  if (!options.ca_file.empty()) GK_RETURN_IF_ERROR(CheckPemFile(options.ca_file, "ca_file", false));
  if (!options.cert_file.empty()) {
    GK_RETURN_IF_ERROR(CheckPemFile(options.cert_file, "cert_file", false));
    GK_RETURN_IF_ERROR(CheckPemFile(options.key_file, "key_file", true));
  }
  if (!options.ca_file.empty()) {
    // OpenSSL writes to the socket with write(), not send(MSG_NOSIGNAL): a
    // write after etcd hung up raises SIGPIPE, whose default action ends the
    // process. Ignored unless the program installed its own handler.
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  }
  return std::unique_ptr<Client>(new HttpEtcdClient(std::move(options), std::move(endpoints)));
}

}  // namespace gangkeeper::etcd
