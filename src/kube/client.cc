// gangkeeper: the Kubernetes REST client (see client.h).
//
// On the HTTP client layer (gangkeeper/httpc): calls go through one
// httpc::Pool of keep-alive TLS connections; a watch opens a connection of
// its own and registers it so that Shutdown() can cut it. Retries wait
// with httpc::Backoff (full jitter, Retry-After) within a budget measured
// on the options' clock, in an httpc::Sleeper that Shutdown() wakes.
#include "gangkeeper/kube/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/httpc/backoff.h"
#include "gangkeeper/httpc/line_reader.h"
#include "gangkeeper/httpc/pool.h"
#include "gangkeeper/httpc/request.h"

namespace gangkeeper::kube {
namespace {

constexpr char kHttpCodePayload[] = "gangkeeper.io/http-code";

absl::Status WithCode(absl::Status s, int code) {
  s.SetPayload(kHttpCodePayload, absl::Cord(absl::StrCat(code)));
  return s;
}

// The server's message: the Status object's message, else the body's start.
std::string ServerMessage(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  std::string text(absl::StripAsciiWhitespace(body.substr(0, 200)));
  return text.empty() ? "no message" : text;
}

absl::Status HttpError(int code, const std::string& what, const std::string& body) {
  const std::string message = absl::StrCat(what, ": HTTP ", code, ": ", ServerMessage(body));
  absl::StatusCode sc = absl::StatusCode::kUnknown;
  switch (code) {
    case 400: sc = absl::StatusCode::kInvalidArgument; break;
    case 401: sc = absl::StatusCode::kUnauthenticated; break;
    case 403: sc = absl::StatusCode::kPermissionDenied; break;
    case 404: sc = absl::StatusCode::kNotFound; break;
    case 409: sc = absl::StatusCode::kAborted; break;
    case 410: sc = absl::StatusCode::kOutOfRange; break;
    case 415: sc = absl::StatusCode::kInvalidArgument; break;
    case 422: sc = absl::StatusCode::kFailedPrecondition; break;
    case 429: sc = absl::StatusCode::kResourceExhausted; break;
    default:
      sc = code >= 500 ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnknown;
  }
  return WithCode(absl::Status(sc, message), code);
}

bool Retryable(int code) { return code == 0 || code == 409 || code == 429 || code >= 500; }

}  // namespace

std::string QueryEscape(absl::string_view v) { return httpc::QueryEscape(v); }

absl::Status WithHttpCode(absl::Status status, int code) { return WithCode(std::move(status), code); }

int HttpCode(const absl::Status& status) {
  auto p = status.GetPayload(kHttpCodePayload);
  int code = 0;
  if (p.has_value() && absl::SimpleAtoi(std::string(*p), &code)) return code;
  return 0;
}

std::string ResourcePath(const workload::KindInfo& kind, const std::string& namespace_name, const std::string& name) {
  std::string path = kind.group.empty() ? absl::StrCat("/api/", kind.version)
                                        : absl::StrCat("/apis/", kind.group, "/", kind.version);
  if (!namespace_name.empty()) absl::StrAppend(&path, "/namespaces/", namespace_name);
  absl::StrAppend(&path, "/", kind.resource);
  if (!name.empty()) absl::StrAppend(&path, "/", name);
  return path;
}

struct Client::Impl {
  ClusterConfig config;
  ClientOptions options;
  const base::Clock* clock = nullptr;
  std::unique_ptr<httpc::Pool> pool;
  std::unique_ptr<httpc::Backoff> backoff;
  httpc::Sleeper sleeper;  // retry waits; Shutdown() wakes them for good

  std::mutex mu;
  std::set<httpc::Connection*> watching;
  bool shut_down = false;

  std::mutex token_mu;
  std::string token;
  struct timespec token_mtime {};
  off_t token_size = -1;

  std::string Token() {
    std::lock_guard<std::mutex> lock(token_mu);
    if (config.token_file.empty()) return config.token;
    struct stat st {};
    if (stat(config.token_file.c_str(), &st) == 0 &&
        (st.st_mtim.tv_sec != token_mtime.tv_sec || st.st_mtim.tv_nsec != token_mtime.tv_nsec ||
         st.st_size != token_size)) {
      std::ifstream in(config.token_file, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      if (in || in.eof()) {
        token = std::string(absl::StripAsciiWhitespace(s.str()));
        token_mtime = st.st_mtim;
        token_size = st.st_size;
      }
    }
    return token.empty() ? config.token : token;
  }

  bool IsShutDown() {
    std::lock_guard<std::mutex> lock(mu);
    return shut_down;
  }

  httpc::Headers Headers() {
    httpc::Headers h{{"Accept", "application/json"}, {"User-Agent", options.user_agent}};
    if (std::string t = Token(); !t.empty()) h.emplace_back("Authorization", absl::StrCat("Bearer ", t));
    return h;
  }

  httpc::Request MakeRequest(const std::string& method, const std::string& path, const std::string& body,
                             const std::string& content_type) {
    httpc::Request req;
    req.method = method;
    req.path = config.base_path + path;
    req.headers = Headers();
    req.body = body;
    req.content_type = content_type;
    return req;
  }

  // A failed exchange as a status without an HTTP code: a timeout or a
  // read that broke off is DeadlineExceeded, the rest Unavailable.
  static absl::Status TransportError(const std::string& what, const httpc::Response& r) {
    const bool slow = r.failure == httpc::Failure::kConnectionTimeout || r.failure == httpc::Failure::kRead;
    return absl::Status(
        slow ? absl::StatusCode::kDeadlineExceeded : absl::StatusCode::kUnavailable,
        absl::StrCat(what, ": ", r.error,
                     r.failure == httpc::Failure::kTlsVerify
                         ? absl::StrCat(" (verify result ", r.verify_result,
                                        "): the API server's certificate does not match the configured CA or host")
                         : ""));
  }

  // `retry_conflict`: a 409 may go away (a resourceVersion race); not so
  // for a failed precondition, whose caller passes false.
  absl::StatusOr<std::string> Call(const std::string& method, const std::string& path, const std::string& body,
                                   const std::string& content_type, Client* owner, bool retry_conflict = true) {
    const std::string what = absl::StrCat(method, " ", path);
    httpc::RetryBudget budget(*clock, options.retry.max_total);
    absl::Status last;
    for (int attempt = 0; attempt < std::max(1, options.retry.max_attempts); ++attempt) {
      if (IsShutDown()) return absl::CancelledError(absl::StrCat(what, ": the client is shut down"));
      // A pooled connection the server closed as it was taken is replaced
      // and the request sent again at once, not counted as a failed attempt.
      httpc::Response r = pool->Send(MakeRequest(method, path, body, content_type), /*resend_if_stale=*/true);
      owner->attempts_.fetch_add(r.resent ? 2 : 1);
      const bool answered = r.failure == httpc::Failure::kNone;
      const int code = answered ? r.status : 0;
      if (answered && code >= 200 && code < 300) return std::move(r.body);
      last = answered ? HttpError(code, what, r.body) : WithCode(TransportError(what, r), 0);
      if (!Retryable(code) || (code == 409 && !retry_conflict)) return last;
      if (attempt + 1 >= options.retry.max_attempts) break;
      const absl::Duration wait = backoff->Delay(attempt, answered ? r.Header("Retry-After") : "");
      if (!budget.Allows(wait)) break;
      if (!sleeper.Sleep(wait)) return absl::CancelledError(absl::StrCat(what, ": the client is shut down"));
    }
    return last;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClusterConfig config, ClientOptions options) {
  if (config.host.empty()) return absl::InvalidArgumentError("kube: the API server's host is empty");
  if (config.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kube: no CA to verify the API server (", config.source, "); TLS verification is always on"));
  }
  httpc::PoolOptions po;
  po.host = config.host;
  po.port = config.port;
  po.tls.emplace();
  po.tls->ca_pem = config.ca_pem;
  po.tls->server_name = config.tls_server_name;
  if (!config.client_cert_pem.empty()) {
    po.tls->cert_pem = config.client_cert_pem;
    po.tls->key_pem = config.client_key_pem;
  }
  po.timeout = options.timeout;
  po.max_idle = options.max_idle_connections;
  po.clock = options.clock;
  absl::StatusOr<std::unique_ptr<httpc::Pool>> pool = httpc::Pool::Create(std::move(po));
  if (!pool.ok()) {
    return absl::Status(pool.status().code(), absl::StrCat("kube: ", config.source, ": ", pool.status().message()));
  }
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock != nullptr ? options.clock : &base::RealClock();
  impl->pool = *std::move(pool);
  impl->backoff = std::make_unique<httpc::Backoff>(httpc::BackoffPolicy{
      .initial = options.retry.initial_backoff, .max = options.retry.max_backoff, .full_jitter = true});
  impl->config = std::move(config);
  impl->options = std::move(options);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<nlohmann::json> Client::Get(const std::string& path) {
  absl::StatusOr<std::string> body = impl_->Call("GET", path, "", "", this);
  if (!body.ok()) return body.status();
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat("GET ", path, ": the answer is not JSON"));
  return j;
}

absl::StatusOr<ListResult> Client::List(const std::string& path, const ListOptions& options) {
  constexpr int kMaxRestarts = 5;
  constexpr int kMaxPages = 100000;
  for (int restart = 0; restart <= kMaxRestarts; ++restart) {
    ListResult result;
    std::string cont;
    bool expired = false;
    for (int page = 0; page < kMaxPages; ++page) {
      std::vector<std::string> q;
      if (!options.label_selector.empty()) q.push_back("labelSelector=" + QueryEscape(options.label_selector));
      if (!options.field_selector.empty()) q.push_back("fieldSelector=" + QueryEscape(options.field_selector));
      if (options.limit > 0) q.push_back(absl::StrCat("limit=", options.limit));
      if (!cont.empty()) q.push_back("continue=" + QueryEscape(cont));
      std::string full = path;
      for (size_t i = 0; i < q.size(); ++i) absl::StrAppend(&full, i == 0 ? "?" : "&", q[i]);
      absl::StatusOr<nlohmann::json> j = Get(full);
      if (!j.ok()) {
        if (HttpCode(j.status()) == 410 && !cont.empty()) {
          expired = true;  // the snapshot behind the token is gone: start over
          break;
        }
        return j.status();
      }
      if (!j->is_object() || (!(*j)["items"].is_array() && !(*j)["items"].is_null())) {
        return absl::DataLossError(absl::StrCat("GET ", path, ": the answer is not a list"));
      }
      if ((*j)["items"].is_array()) {
        for (nlohmann::json& item : (*j)["items"]) result.items.push_back(std::move(item));
      }
      const nlohmann::json& meta = (*j)["metadata"];
      if (page == 0 || result.resource_version.empty()) {
        result.resource_version = meta.is_object() ? meta.value("resourceVersion", "") : "";
      }
      cont = meta.is_object() ? meta.value("continue", "") : "";
      if (cont.empty()) return result;
    }
    if (!expired) return absl::ResourceExhaustedError(absl::StrCat("GET ", path, ": more than ", kMaxPages, " pages"));
  }
  return absl::UnavailableError(absl::StrCat("GET ", path, ": the list kept expiring while paging; retry later"));
}

absl::StatusOr<nlohmann::json> Client::Patch(const std::string& path, PatchType type, const nlohmann::json& patch,
                                             bool retry_conflict) {
  const char* content_type =
      type == PatchType::kMerge ? "application/merge-patch+json" : "application/json-patch+json";
  absl::StatusOr<std::string> body = impl_->Call("PATCH", path, patch.dump(), content_type, this, retry_conflict);
  if (!body.ok()) return body.status();
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat("PATCH ", path, ": the answer is not JSON"));
  return j;
}

absl::StatusOr<nlohmann::json> Client::Post(const std::string& path, const std::string& body,
                                            const std::string& content_type) {
  absl::StatusOr<std::string> answer = impl_->Call("POST", path, body, content_type, this,
                                                   /*retry_conflict=*/false);
  if (!answer.ok()) return answer.status();
  nlohmann::json j = nlohmann::json::parse(*answer, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat("POST ", path, ": the answer is not JSON"));
  return j;
}

absl::StatusOr<nlohmann::json> Client::Put(const std::string& path, const nlohmann::json& object) {
  absl::StatusOr<std::string> answer = impl_->Call("PUT", path, object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                                   "application/json", this, /*retry_conflict=*/false);
  if (!answer.ok()) return answer.status();
  nlohmann::json j = nlohmann::json::parse(*answer, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat("PUT ", path, ": the answer is not JSON"));
  return j;
}

absl::StatusOr<nlohmann::json> Client::Delete(const std::string& path, const std::string& uid,
                                              const std::string& propagation_policy) {
  nlohmann::json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  if (!propagation_policy.empty()) options["propagationPolicy"] = propagation_policy;
  // A uid precondition that fails (409) names another object: final.
  absl::StatusOr<std::string> body =
      impl_->Call("DELETE", path, options.dump(), "application/json", this, /*retry_conflict=*/uid.empty());
  if (!body.ok()) return body.status();
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

namespace {

// The longest watch event (one line) kept while waiting for its end.
constexpr size_t kMaxWatchEventBytes = size_t{64} << 20;

// One line of a watch stream as an event for `on_event`. False to end the
// stream: `*stopped` when on_event said so, else `*status` says why (a line
// that is no event, an ERROR event: 410 OutOfRange when expired).
bool DecodeWatchLine(const std::string& path, absl::string_view line,
                     const std::function<bool(const WatchEvent&)>& on_event, absl::Status* status, bool* stopped) {
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j["type"].is_string()) {
    *status = absl::DataLossError(absl::StrCat("WATCH ", path, ": a line is not a watch event"));
    return false;
  }
  WatchEvent e;
  e.type = j["type"].get<std::string>();
  e.object = std::move(j["object"]);
  if (e.type == "ERROR") {
    const int code = e.object.is_object() ? e.object.value("code", 0) : 0;
    const std::string message = e.object.is_object() ? e.object.value("message", "") : "";
    *status = code == 410 ? WithCode(absl::OutOfRangeError(absl::StrCat("WATCH ", path, ": expired: ", message)), 410)
                          : WithCode(absl::UnavailableError(
                                         absl::StrCat("WATCH ", path, ": ERROR event ", code, ": ", message)),
                                     code);
    return false;
  }
  if (!on_event(e)) {
    *stopped = true;
    return false;
  }
  return true;
}

}  // namespace

absl::Status Client::Watch(const std::string& path, const WatchOptions& options,
                           const std::function<bool(const WatchEvent&)>& on_event) {
  std::string full = absl::StrCat(path, "?watch=true&timeoutSeconds=", options.timeout_seconds);
  if (options.allow_bookmarks) absl::StrAppend(&full, "&allowWatchBookmarks=true");
  if (!options.resource_version.empty()) absl::StrAppend(&full, "&resourceVersion=", QueryEscape(options.resource_version));
  if (!options.label_selector.empty()) absl::StrAppend(&full, "&labelSelector=", QueryEscape(options.label_selector));
  if (!options.field_selector.empty()) absl::StrAppend(&full, "&fieldSelector=", QueryEscape(options.field_selector));

  httpc::RetryBudget budget(*impl_->clock, impl_->options.retry.max_total);
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, impl_->options.retry.max_attempts); ++attempt) {
    std::unique_ptr<httpc::Connection> c =
        impl_->pool->Open(absl::Seconds(options.timeout_seconds) + absl::Seconds(30));
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      if (impl_->shut_down) return absl::CancelledError(absl::StrCat("WATCH ", path, ": the client is shut down"));
      impl_->watching.insert(c.get());
    }
    attempts_.fetch_add(1);
    int status = 0;
    httpc::LineReader lines(kMaxWatchEventBytes);
    std::string error_body;
    absl::Status stream_status;
    bool stopped_by_caller = false;
    const httpc::Response r = c->Stream(
        impl_->MakeRequest("GET", full, "", ""),
        [&](int code, const httpc::Headers&) {
          status = code;
          // Shutdown() between the registration above and this request
          // being in flight found no socket for Stop() to cut: end here
          // instead of streaming until timeoutSeconds.
          return !impl_->IsShutDown();
        },
        [&](absl::string_view data) {
          if (status != 200) {
            if (error_body.size() < 65536) error_body.append(data.data(), data.size());
            return true;
          }
          const httpc::LineReader::Result got = lines.Feed(data, [&](absl::string_view line) {
            return DecodeWatchLine(path, line, on_event, &stream_status, &stopped_by_caller);
          });
          if (got == httpc::LineReader::Result::kTooLong) {
            stream_status = absl::ResourceExhaustedError(
                absl::StrCat("WATCH ", path, ": an event over ", kMaxWatchEventBytes >> 20, " MiB"));
          }
          return got == httpc::LineReader::Result::kMore;
        });
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->watching.erase(c.get());
      cancelled = impl_->shut_down;
    }
    if (cancelled) return absl::CancelledError(absl::StrCat("WATCH ", path, ": the client is shut down"));
    if (stopped_by_caller) return absl::OkStatus();
    if (!stream_status.ok()) return stream_status;
    const bool answered = r.failure == httpc::Failure::kNone;
    if (status == 200) {
      // The server ended the stream (timeoutSeconds) or the connection
      // dropped mid-stream: either way the caller watches again.
      return answered ? absl::OkStatus()
                      : WithCode(absl::UnavailableError(absl::StrCat("WATCH ", path, ": stream ended: ", r.error)), 0);
    }
    last = status != 0 ? HttpError(status, absl::StrCat("WATCH ", path), error_body)
                       : WithCode(absl::UnavailableError(absl::StrCat("WATCH ", path, ": ", r.error)), 0);
    if (!Retryable(status)) return last;
    if (attempt + 1 >= impl_->options.retry.max_attempts) break;
    const absl::Duration wait = impl_->backoff->Delay(attempt, status != 0 ? r.Header("Retry-After") : "");
    if (!budget.Allows(wait)) break;
    if (!impl_->sleeper.Sleep(wait)) {
      return absl::CancelledError(absl::StrCat("WATCH ", path, ": the client is shut down"));
    }
  }
  return last;
}

void Client::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shut_down = true;
    for (httpc::Connection* c : impl_->watching) c->Stop();
  }
  impl_->pool->Shutdown();
  impl_->sleeper.Cancel();
}

}  // namespace gangkeeper::kube
