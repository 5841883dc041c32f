// gangkeeper: the Kubernetes REST client (see client.h).
//
// One httplib::SSLClient per connection. Calls borrow an idle one from a
// small pool (keep-alive) or open a new one; a watch always opens its own
// and registers it so that Shutdown() can cut it. The CA bundle is written
// to a private temporary file because cpp-httplib 0.11 loads trust anchors
// from a path (giving it an X509_STORE would also pull in the system CAs).
#include "gangkeeper/kube/client.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::kube {
namespace {

// Every certificate of a PEM bundle in a new X509_STORE (nullptr if none).
X509_STORE* CaStore(const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  for (int i = 0; i < 1000; ++i) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  ERR_clear_error();  // the end of the bundle reads as an error
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return nullptr;
  }
  return store;
}

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

std::string QueryEscape(absl::string_view v) {
  std::string out;
  for (unsigned char c : v) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::AsciiStrToUpper(absl::StrCat(absl::Hex(c, absl::kZeroPad2))));
    }
  }
  return out;
}

namespace {

struct Raw {
  int status = 0;
  std::string body;
  std::string retry_after;
};

}  // namespace

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
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;

  std::mutex mu;
  std::vector<std::unique_ptr<httplib::SSLClient>> idle;
  std::set<httplib::SSLClient*> watching;
  bool shut_down = false;

  absl::Mutex sleep_mu;
  bool stop_sleeping ABSL_GUARDED_BY(sleep_mu) = false;

  std::mutex token_mu;
  std::string token;
  struct timespec token_mtime {};
  off_t token_size = -1;

  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};

  ~Impl() {
    if (cert != nullptr) X509_free(cert);
    if (key != nullptr) EVP_PKEY_free(key);
  }

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

  std::unique_ptr<httplib::SSLClient> NewConnection(absl::Duration read_timeout) {
    const std::string& name = config.tls_server_name.empty() ? config.host : config.tls_server_name;
    std::unique_ptr<httplib::SSLClient> c = cert != nullptr
                                                ? std::make_unique<httplib::SSLClient>(name, config.port, cert, key)
                                                : std::make_unique<httplib::SSLClient>(name, config.port);
    if (name != config.host) c->set_hostname_addr_map({{name, config.host}});
    // The CA bundle from memory (no file: the root filesystem may be
    // read-only); the connection's SSL_CTX takes the store over.
    c->set_ca_cert_store(CaStore(config.ca_pem));
    c->enable_server_certificate_verification(true);
    const int64_t us = absl::ToInt64Microseconds(options.timeout);
    c->set_connection_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
    c->set_write_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
    const int64_t rus = absl::ToInt64Microseconds(read_timeout);
    c->set_read_timeout(static_cast<time_t>(rus / 1000000), static_cast<time_t>(rus % 1000000));
    c->set_keep_alive(true);
    // Without it a request written as two TLS records (headers, then the
    // body of a PATCH) waits for the server's delayed ACK: ~40 ms a write.
    c->set_tcp_nodelay(true);
    return c;
  }

  std::unique_ptr<httplib::SSLClient> Borrow(bool* reused) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        std::unique_ptr<httplib::SSLClient> c = std::move(idle.back());
        idle.pop_back();
        *reused = true;
        return c;
      }
    }
    *reused = false;
    return NewConnection(options.timeout);
  }

  void Return(std::unique_ptr<httplib::SSLClient> c) {
    std::lock_guard<std::mutex> lock(mu);
    if (!shut_down && idle.size() < options.max_idle_connections) idle.push_back(std::move(c));
  }

  bool IsShutDown() {
    std::lock_guard<std::mutex> lock(mu);
    return shut_down;
  }

  httplib::Headers Headers(const std::string& accept = "application/json") {
    httplib::Headers h{{"Accept", accept}, {"User-Agent", options.user_agent}};
    if (std::string t = Token(); !t.empty()) h.emplace("Authorization", absl::StrCat("Bearer ", t));
    return h;
  }

  // Full jitter: uniform in [0, min(max, initial * 2^attempt)]; at least
  // Retry-After when the server gave one.
  absl::Duration Backoff(int attempt, const std::string& retry_after) {
    absl::Duration cap = options.retry.initial_backoff * (int64_t{1} << std::min(attempt, 20));
    cap = std::min(cap, options.retry.max_backoff);
    absl::Duration d;
    {
      std::lock_guard<std::mutex> lock(rng_mu);
      std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(0, absl::ToInt64Microseconds(cap)));
      d = absl::Microseconds(dist(rng));
    }
    int64_t seconds = 0;
    if (!retry_after.empty() && absl::SimpleAtoi(retry_after, &seconds) && seconds >= 0) {
      d = std::max(d, absl::Seconds(std::min<int64_t>(seconds, 3600)));
    }
    return d;
  }

  // Sleeps `d` unless Shutdown() comes first (then false).
  bool Sleep(absl::Duration d) {
    absl::MutexLock lock(&sleep_mu);
    sleep_mu.AwaitWithTimeout(absl::Condition(&stop_sleeping), d);
    return !stop_sleeping;
  }

  // One attempt.
  Raw Once(const std::string& method, const std::string& path, const std::string& body,
           const std::string& content_type, Client* owner, absl::Status* transport) {
    Raw raw;
    bool reused = false;
    std::unique_ptr<httplib::SSLClient> c = Borrow(&reused);
    owner->attempts_.fetch_add(1);
    const std::string full = config.base_path + path;
    auto send = [&] {
      return method == "GET"     ? c->Get(full.c_str(), Headers())
             : method == "PATCH" ? c->Patch(full.c_str(), Headers(), body, content_type.c_str())
             : method == "POST"  ? c->Post(full.c_str(), Headers(), body, content_type.c_str())
                                 : c->Delete(full.c_str(), Headers(), body, content_type.c_str());
    };
    base::Stopwatch sent;
    httplib::Result r = send();
    // A pooled connection the server closed while it sat idle (keep-alive
    // timeout) fails at once: cpp-httplib takes the waiting TLS close_notify
    // for "alive" and reuses the socket. Send again on a new connection right
    // away instead of spending a retry and a backoff (or, with max_attempts
    // 1, failing) on it. A timeout (as slow as options.timeout) is not this.
    if (!r && reused && sent.Elapsed() < options.timeout) {
      c = NewConnection(options.timeout);
      owner->attempts_.fetch_add(1);
      r = send();
    }
    if (!r) {
      const httplib::Error e = r.error();
      *transport = absl::Status(
          e == httplib::Error::ConnectionTimeout || e == httplib::Error::Read ? absl::StatusCode::kDeadlineExceeded
                                                                              : absl::StatusCode::kUnavailable,
          absl::StrCat(method, " ", path, ": ", httplib::to_string(e),
                       e == httplib::Error::SSLServerVerification
                           ? absl::StrCat(" (verify result ", c->get_openssl_verify_result(),
                                          "): the API server's certificate does not match the configured CA or host")
                           : ""));
      return raw;  // the connection is dropped, not returned to the pool
    }
    raw.status = r->status;
    raw.body = std::move(r->body);
    raw.retry_after = r->get_header_value("Retry-After");
    Return(std::move(c));
    return raw;
  }

  // `retry_conflict`: a 409 may go away (a resourceVersion race); not so
  // for a failed precondition, whose caller passes false.
  absl::StatusOr<std::string> Call(const std::string& method, const std::string& path, const std::string& body,
                                   const std::string& content_type, Client* owner, bool retry_conflict = true) {
    base::Stopwatch watch;
    absl::Status last;
    for (int attempt = 0; attempt < std::max(1, options.retry.max_attempts); ++attempt) {
      if (IsShutDown()) return absl::CancelledError(absl::StrCat(method, " ", path, ": the client is shut down"));
      absl::Status transport;
      Raw raw = Once(method, path, body, content_type, owner, &transport);
      int code = raw.status;
      if (transport.ok() && code >= 200 && code < 300) return std::move(raw.body);
      last = transport.ok() ? HttpError(code, absl::StrCat(method, " ", path), raw.body) : WithCode(transport, 0);
      if (!Retryable(code) || (code == 409 && !retry_conflict)) return last;
      if (attempt + 1 >= options.retry.max_attempts) break;
      const absl::Duration wait = Backoff(attempt, raw.retry_after);
      if (watch.Elapsed() + wait > options.retry.max_total) break;
      if (!Sleep(wait)) return absl::CancelledError(absl::StrCat(method, " ", path, ": the client is shut down"));
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
  auto impl = std::make_unique<Impl>();
  // The CA bundle must parse, or every call would fail obscurely.
  {
    BIO* bio = BIO_new_mem_buf(config.ca_pem.data(), static_cast<int>(config.ca_pem.size()));
    X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (ca == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kube: the CA of ", config.source, " is not a PEM certificate"));
    }
    X509_free(ca);
  }
  if (X509_STORE* store = CaStore(config.ca_pem)) {
    X509_STORE_free(store);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("kube: the CA of ", config.source, " holds no PEM certificate"));
  }
  if (!config.client_cert_pem.empty()) {
    BIO* cb = BIO_new_mem_buf(config.client_cert_pem.data(), static_cast<int>(config.client_cert_pem.size()));
    impl->cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(config.client_key_pem.data(), static_cast<int>(config.client_key_pem.size()));
    impl->key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    if (impl->cert == nullptr || impl->key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("kube: the client certificate or key of ", config.source, " is not PEM"));
    }
  }
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

// The whole lines of a watch stream in `buffer` (taken out of it), each an
// event for `on_event`. False to end the stream: `*stopped` when on_event
// said so, else `*status` says why (a line that is no event, an ERROR
// event: 410 OutOfRange when expired, or a line over 64 MiB).
bool DecodeWatchLines(const std::string& path, const std::function<bool(const WatchEvent&)>& on_event,
                      std::string* buffer, absl::Status* status, bool* stopped) {
  size_t start = 0;
  for (size_t nl = buffer->find('\n', start); nl != std::string::npos; nl = buffer->find('\n', start)) {
    const absl::string_view line(buffer->data() + start, nl - start);
    start = nl + 1;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
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
  }
  buffer->erase(0, start);
  if (buffer->size() > (64u << 20)) {
    *status = absl::ResourceExhaustedError(absl::StrCat("WATCH ", path, ": an event over 64 MiB"));
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

  base::Stopwatch watch;
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, impl_->options.retry.max_attempts); ++attempt) {
    std::unique_ptr<httplib::SSLClient> c =
        impl_->NewConnection(absl::Seconds(options.timeout_seconds) + absl::Seconds(30));
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      if (impl_->shut_down) return absl::CancelledError(absl::StrCat("WATCH ", path, ": the client is shut down"));
      impl_->watching.insert(c.get());
    }
    attempts_.fetch_add(1);
    int status = 0;
    std::string retry_after;
    std::string buffer;    // bytes not yet forming a whole line
    std::string error_body;
    absl::Status stream_status;
    bool stopped_by_caller = false;
    httplib::Result r = c->Get(
        (impl_->config.base_path + full).c_str(), impl_->Headers(),
        [&](const httplib::Response& res) {
          status = res.status;
          retry_after = res.get_header_value("Retry-After");
          // Shutdown() between the registration above and this request
          // being in flight found no socket for stop() to cut: end here
          // instead of streaming until timeoutSeconds.
          return !impl_->IsShutDown();
        },
        [&](const char* data, size_t n) {
          if (status != 200) {
            if (error_body.size() < 65536) error_body.append(data, n);
            return true;
          }
          buffer.append(data, n);
          return DecodeWatchLines(path, on_event, &buffer, &stream_status, &stopped_by_caller);
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
    if (status == 200) {
      // The server ended the stream (timeoutSeconds) or the connection
      // dropped mid-stream: either way the caller watches again.
      return r ? absl::OkStatus()
               : WithCode(absl::UnavailableError(absl::StrCat("WATCH ", path, ": stream ended: ",
                                                              httplib::to_string(r.error()))),
                          0);
    }
    last = status != 0 ? HttpError(status, absl::StrCat("WATCH ", path), error_body)
                       : WithCode(absl::UnavailableError(absl::StrCat("WATCH ", path, ": ",
                                                                      httplib::to_string(r.error()))),
                                  0);
    if (!Retryable(status)) return last;
    if (attempt + 1 >= impl_->options.retry.max_attempts) break;
    const absl::Duration wait = impl_->Backoff(attempt, retry_after);
    if (watch.Elapsed() + wait > impl_->options.retry.max_total) break;
    if (!impl_->Sleep(wait)) return absl::CancelledError(absl::StrCat("WATCH ", path, ": the client is shut down"));
  }
  return last;
}

void Client::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shut_down = true;
    for (httplib::SSLClient* c : impl_->watching) c->stop();
    impl_->idle.clear();
  }
  absl::MutexLock lock(&impl_->sleep_mu);
  impl_->stop_sleeping = true;
}

}  // namespace gangkeeper::kube
