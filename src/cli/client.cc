// gangkeeper CLI: the API client the client subcommands share (client.h).
#include "src/cli/client.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/httpc/request.h"
#include "src/cli/kube_token.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

std::string ClientEnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

std::string ClientReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool ClientIsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// Why a request got no answer, and what to check.
std::string ConnectionSentence(const std::string& server, const std::string& ca, const httpc::Response& r,
                               int port) {
  switch (r.failure) {
    case httpc::Failure::kConnection:
    case httpc::Failure::kConnectionTimeout:
      return absl::StrCat("cannot connect to the gangkeeper API at ", server,
                          r.failure == httpc::Failure::kConnectionTimeout ? " (timed out)" : "",
                          ": is `gangkeeper serve` running there, and is ", port,
                          " its API port (serve --api-addr)? Point --server or GANGKEEPER_SERVER at it");
    case httpc::Failure::kTlsVerify:
    case httpc::Failure::kTls:
      return absl::StrCat("the TLS handshake with ", server, " failed (", r.error,
                          "): is its certificate signed by the CA in ", ca,
                          "? Pass the CA that signed it with --ca or GANGKEEPER_CA, and check that the port (", port,
                          ") is gangkeeper's API port");
    default:
      return absl::StrCat("the gangkeeper API at ", server, " did not answer (", r.error,
                          "): check that the server is running and that ", port, " is its API port");
  }
}

}  // namespace

int Complain(int code, const std::string& message) {
  std::fprintf(stderr, "gangkeeper: %s\n", message.c_str());
  return code;
}

std::string Field(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

const json& Member(const json& j, const char* key) {
  static const json* const kNull = new json();
  if (!j.is_object()) return *kNull;
  auto it = j.find(key);
  return it == j.end() ? *kNull : *it;
}

void AddClientFlags(FlagSet& flags, ClientFlags* f, const std::string& output_help) {
  f->server = ClientEnvOr("GANGKEEPER_SERVER", "https://localhost:8443");
  f->token = ClientEnvOr("GANGKEEPER_TOKEN", "");
  f->token_file = ClientEnvOr("GANGKEEPER_TOKEN_FILE", "");
  f->ca = ClientEnvOr("GANGKEEPER_CA", "certs/dev/ca.crt");
  flags.String("s,server", &f->server, "the API listener, https://HOST:PORT (or GANGKEEPER_SERVER)");
  flags.String("token", &f->token, "bearer token (or GANGKEEPER_TOKEN)");
  flags.String("token-file", &f->token_file,
               "file holding the bearer token (or GANGKEEPER_TOKEN_FILE); without a token, a server on this "
               "machine is asked with ./data/dev-token, the one ./run.sh makes");
  flags.String("ca", &f->ca, "CA certificate that signed the API's certificate (or GANGKEEPER_CA)");
  flags.String("kubeconfig", &f->kubeconfig,
               "without any other token, send the current context's token of this kubeconfig (default: "
               "KUBECONFIG, else ~/.kube/config), for a server run with --api-auth kubernetes or both");
  if (!output_help.empty()) flags.String("o,output", &f->output, output_help);
}

std::string ApiErrorSentence(int status, const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string message, field;
  if (j.is_object()) {
    const auto error = j.find("error");
    if (error != j.end() && error->is_object()) {
      message = Field(*error, "message");
      field = Field(*error, "field");
    } else {
      message = Field(j, "message");
    }
  }
  if (message.empty()) message = std::string(absl::StripAsciiWhitespace(body));
  if (message.empty()) message = "no message";
  if (!field.empty() && !absl::StrContains(message, field)) message = absl::StrCat(field, ": ", message);
  return absl::StrCat(message, " (HTTP ", status, ")");
}

absl::StatusOr<json> ApiClient::Call(const std::string& method, const std::string& path, const std::string& body,
                                     const std::string& content_type, bool retry_conflict) {
  constexpr int kMaxAttempts = 3;
  httpc::Request req;
  req.method = method;
  req.path = path;
  req.headers = {{"Accept", "application/json"}, {"User-Agent", "gangkeeper"}};
  if (!token_.empty()) req.headers.emplace_back("Authorization", absl::StrCat("Bearer ", token_));
  req.body = body;
  req.content_type = content_type;
  httpc::RetryBudget budget(base::RealClock(), absl::Seconds(10));
  absl::Status last;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    httpc::Response r = pool_->Send(req, /*resend_if_stale=*/true);
    const bool answered = r.failure == httpc::Failure::kNone;
    if (answered && r.status >= 200 && r.status < 300) {
      json j = json::parse(r.body, nullptr, false);
      if (j.is_discarded()) {
        return absl::DataLossError(absl::StrCat(method, " ", path, ": the answer of ", server_, " is not JSON"));
      }
      return j;
    }
    if (answered) {
      const std::string sentence = ApiErrorSentence(r.status, r.body);
      last = r.status == 404   ? absl::NotFoundError(sentence)
             : r.status == 409 ? absl::AbortedError(sentence)
             : r.status == 401 ? absl::UnauthenticatedError(absl::StrCat(
                                     sentence, "; give a token with --token, --token-file or GANGKEEPER_TOKEN"))
                               : absl::UnavailableError(sentence);
    } else {
      last = absl::UnavailableError(ConnectionSentence(server_, ca_, r, pool_->options().port));
    }
    const bool retry = !answered || r.status == 429 || r.status >= 500 || (r.status == 409 && retry_conflict);
    if (!retry || attempt + 1 >= kMaxAttempts) break;
    if (!answered && (r.failure == httpc::Failure::kConnection || r.failure == httpc::Failure::kTlsVerify ||
                      r.failure == httpc::Failure::kTls)) {
      break;  // a refused connection or a wrong CA will not heal in seconds
    }
    const absl::Duration wait = backoff_.Delay(attempt, answered ? r.Header("Retry-After") : "");
    if (!budget.Allows(wait)) break;
    sleeper_.Sleep(wait);
  }
  return last;
}

std::unique_ptr<ApiClient> Connect(const ClientFlags& f) {
  absl::string_view rest = f.server;
  if (!absl::ConsumePrefix(&rest, "https://")) {
    Complain(2, absl::StrCat("--server ", f.server, ": use https://HOST:PORT (the API listens on TLS only)"));
    return nullptr;
  }
  rest = absl::StripSuffix(rest, "/");
  httpc::PoolOptions o;
  size_t colon = rest.rfind(':');
  if (absl::ConsumePrefix(&rest, "[")) {
    size_t close = rest.find(']');
    o.host = std::string(rest.substr(0, close));
    colon = rest.find(':', close);
  } else {
    o.host = std::string(rest.substr(0, colon));
  }
  o.port = 443;
  if (colon != absl::string_view::npos && !absl::SimpleAtoi(rest.substr(colon + 1), &o.port)) {
    Complain(2, absl::StrCat("--server ", f.server, ": bad port"));
    return nullptr;
  }
  const std::string pem = ClientReadFile(f.ca);
  if (pem.empty()) {
    Complain(2, absl::StrCat("--ca ", f.ca,
                             ": cannot read it; give the CA certificate that signed the API's certificate with --ca "
                             "or GANGKEEPER_CA (./run.sh makes certs/dev/ca.crt)"));
    return nullptr;
  }
  std::string token = f.token;
  if (token.empty()) {
    std::string file = f.token_file;
    std::error_code ec;
    if (file.empty() && ClientIsLoopback(o.host) && std::filesystem::exists(kDevTokenFile, ec)) file = kDevTokenFile;
    if (!file.empty()) {
      token = std::string(absl::StripAsciiWhitespace(ClientReadFile(file)));
      if (token.empty()) {
        Complain(2, absl::StrCat("--token-file ", file, ": cannot read a token from it"));
        return nullptr;
      }
    }
  }
  // Kubernetes identities (--api-auth kubernetes|both on the server).
  if (token.empty()) token = KubeconfigApiToken(f.kubeconfig);
  o.tls.emplace();
  o.tls->ca_pem = pem;
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<httpc::Pool>> pool = httpc::Pool::Create(std::move(o));
  if (!pool.ok()) {
    Complain(2, absl::StrCat("--server ", f.server, " --ca ", f.ca, ": ", pool.status().message()));
    return nullptr;
  }
  return std::make_unique<ApiClient>(*std::move(pool), f.server, f.ca, token);
}

std::optional<json> Fetch(ApiClient& client, const std::string& path) {
  absl::StatusOr<json> j = client.Get(path);
  if (!j.ok()) {
    Complain(1, std::string(j.status().message()));
    return std::nullopt;
  }
  return *std::move(j);
}

std::optional<std::string> QuotaPath(const std::string& kind, const std::string& ns, const std::string& name) {
  const std::string k = absl::AsciiStrToLower(kind);
  std::string path;
  if (k == "localqueue" || k == "localqueues") {
    path = ns.empty() ? "/apis/kueue.x-k8s.io/v1beta1/localqueues"
                      : absl::StrCat("/apis/kueue.x-k8s.io/v1beta1/namespaces/", httpc::QueryEscape(ns), "/localqueues");
  } else if (k == "priorityclass" || k == "priorityclasses") {
    path = "/apis/scheduling.k8s.io/v1/priorityclasses";
  } else if (k == "gpunodepool" || k == "gpunodepools") {
    path = "/apis/gangkeeper.io/v1alpha1/gpunodepools";
  } else if (k == "clusterqueue" || k == "clusterqueues" || k == "resourceflavor" || k == "resourceflavors" ||
             k == "cohort" || k == "cohorts" || k == "workloadpriorityclass" || k == "workloadpriorityclasses") {
    path = absl::StrCat("/apis/kueue.x-k8s.io/v1beta1/", k, absl::EndsWith(k, "s") ? "" : "s");
    if (k == "workloadpriorityclass") path = "/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses";
  } else {
    return std::nullopt;
  }
  if (!name.empty()) absl::StrAppend(&path, "/", httpc::QueryEscape(name));
  return path;
}

}  // namespace gangkeeper::cli
