// gangkeeper CLI: client subcommands that read the API (DESIGN §5):
//   gangkeeper get clusterqueues|workloads|localqueues|flavors|cohorts|
//                  workloadpriorityclasses|priorityclasses [-n NS]
//                  [--cluster-queue CQ] [--state pending|admitted|all]
//                  [-o table|wide|json|yaml]
//   gangkeeper describe workload [KIND/]NS/NAME [-o json|yaml]
// --server, --token and --ca, or GANGKEEPER_SERVER, GANGKEEPER_TOKEN and
// GANGKEEPER_CA; without a token, the current kubeconfig context's
// (KUBECONFIG or ~/.kube/config, kube_token.h). Exit codes: 0 done, 1 the API refused or failed (its
// message on stderr), 2 usage errors.
#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/httpc/backoff.h"
#include "gangkeeper/httpc/pool.h"
#include "gangkeeper/httpc/request.h"
#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/cli/kube_token.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

struct ClientFlags {
  std::string server;
  std::string token;
  std::string ca;
  std::string output = "table";
};

void AddClientFlags(FlagSet& flags, ClientFlags* f) {
  const char* server = std::getenv("GANGKEEPER_SERVER");
  const char* token = std::getenv("GANGKEEPER_TOKEN");
  const char* ca = std::getenv("GANGKEEPER_CA");
  f->server = server != nullptr ? server : "https://localhost:8443";
  f->token = token != nullptr ? token : "";
  f->ca = ca != nullptr ? ca : "certs/dev/ca.crt";
  flags.String("server", &f->server, "the API listener, https://HOST:PORT (or GANGKEEPER_SERVER)");
  flags.String("token", &f->token, "bearer token (or GANGKEEPER_TOKEN)");
  flags.String("ca", &f->ca, "CA certificate that signed the API's certificate (or GANGKEEPER_CA)");
  flags.String("o", &f->output, "output: table, wide (more columns), json or yaml");
  flags.String("output", &f->output, "output: table, wide (more columns), json or yaml");
}

// gangkeeper's own API over the HTTP client layer: GET and POST with the
// bearer token, JSON answers. A call is tried up to 3 times within 10 s on
// connection errors, 429 and 5xx (and 409 for GET), waiting with full
// jitter and at least the answer's Retry-After. A refusal's message is the
// API's own ({"error":{"message":..}}).
class ApiClient {
 public:
  ApiClient(std::unique_ptr<httpc::Pool> pool, std::string token) : pool_(std::move(pool)), token_(std::move(token)) {}

  absl::StatusOr<json> Get(const std::string& path) { return Call("GET", path, "", "", /*retry_conflict=*/true); }
  // Retried like a GET (the API's /v1/apply is all or nothing: a repeat
  // applies the same bundle), except on 409.
  absl::StatusOr<json> Post(const std::string& path, const std::string& body, const std::string& content_type) {
    return Call("POST", path, body, content_type, /*retry_conflict=*/false);
  }

 private:
  static constexpr int kMaxAttempts = 3;

  // The API's message in an error answer, else the body's start.
  static std::string ApiMessage(const std::string& body) {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      const auto error = j.find("error");
      if (error != j.end() && error->is_object()) {
        const auto m = error->find("message");
        if (m != error->end() && m->is_string()) return m->get<std::string>();
      }
      const auto m = j.find("message");
      if (m != j.end() && m->is_string()) return m->get<std::string>();
    }
    std::string text(absl::StripAsciiWhitespace(absl::string_view(body).substr(0, 200)));
    return text.empty() ? "no message" : text;
  }

  absl::StatusOr<json> Call(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& content_type, bool retry_conflict) {
    const std::string what = absl::StrCat(method, " ", path);
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
        if (j.is_discarded()) return absl::DataLossError(absl::StrCat(what, ": the answer is not JSON"));
        return j;
      }
      last = answered ? absl::UnavailableError(absl::StrCat(what, ": HTTP ", r.status, ": ", ApiMessage(r.body)))
                      : absl::UnavailableError(absl::StrCat(what, ": ", r.error));
      const bool retry = !answered || r.status == 429 || r.status >= 500 || (r.status == 409 && retry_conflict);
      if (!retry || attempt + 1 >= kMaxAttempts) break;
      const absl::Duration wait = backoff_.Delay(attempt, answered ? r.Header("Retry-After") : "");
      if (!budget.Allows(wait)) break;
      sleeper_.Sleep(wait);
    }
    return last;
  }

  const std::unique_ptr<httpc::Pool> pool_;
  const std::string token_;
  httpc::Backoff backoff_{httpc::BackoffPolicy{}};
  httpc::Sleeper sleeper_;
};

// A client for the API listener; prints the problem and returns null.
std::unique_ptr<ApiClient> Connect(const ClientFlags& f) {
  absl::string_view rest = f.server;
  if (!absl::ConsumePrefix(&rest, "https://")) {
    std::fprintf(stderr, "gangkeeper: --server %s: use https://HOST:PORT\n", f.server.c_str());
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
    std::fprintf(stderr, "gangkeeper: --server %s: bad port\n", f.server.c_str());
    return nullptr;
  }
  std::ifstream in(f.ca, std::ios::binary);
  std::ostringstream pem;
  pem << in.rdbuf();
  if (pem.str().empty()) {
    std::fprintf(stderr, "gangkeeper: --ca %s: cannot read it (the CA that signed the API's certificate)\n",
                 f.ca.c_str());
    return nullptr;
  }
  o.tls.emplace();
  o.tls->ca_pem = pem.str();
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<httpc::Pool>> pool = httpc::Pool::Create(std::move(o));
  if (!pool.ok()) {
    std::fprintf(stderr, "gangkeeper: --server %s --ca %s: %s\n", f.server.c_str(), f.ca.c_str(),
                 std::string(pool.status().message()).c_str());
    return nullptr;
  }
  // No --token: the current kubeconfig context's, for --api-auth kubernetes|both.
  return std::make_unique<ApiClient>(*std::move(pool), f.token.empty() ? KubeconfigApiToken() : f.token);
}

// GET `path`; prints the API's error and returns nullopt on failure.
std::optional<json> Fetch(ApiClient& client, const std::string& path) {
  absl::StatusOr<json> j = client.Get(path);
  if (!j.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(j.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(j);
}

std::string S(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const json& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}

// A string as a YAML scalar: plain when nothing in it could be read as
// another type or as YAML syntax, else double-quoted with JSON's escapes
// (which YAML's double-quoted style accepts).
std::string YamlScalar(const std::string& v) {
  static const char* kWords[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
  bool plain = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == '/';
  });
  if (plain) {
    for (const char* w : kWords) plain = plain && !absl::EqualsIgnoreCase(v, w);
    double d = 0;
    plain = plain && !absl::SimpleAtod(v, &d) && v.front() != '-' && v.front() != '.';
  }
  return plain ? v : json(v).dump(-1, ' ', false, json::error_handler_t::replace);
}

// `j` as block-style YAML, `indent` spaces deep.
void AppendYaml(const json& j, int indent, std::string* out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  auto inline_value = [](const json& v) -> std::optional<std::string> {
    if (v.is_string()) return YamlScalar(v.get<std::string>());
    if (v.is_object() && v.empty()) return "{}";
    if (v.is_array() && v.empty()) return "[]";
    if (!v.is_object() && !v.is_array()) return v.dump();
    return std::nullopt;
  };
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (std::optional<std::string> x = inline_value(v)) {
        absl::StrAppend(out, pad, YamlScalar(k), ": ", *x, "\n");
      } else {
        absl::StrAppend(out, pad, YamlScalar(k), ":\n");
        AppendYaml(v, indent + 2, out);
      }
    }
  } else if (j.is_array()) {
    for (const json& v : j) {
      if (std::optional<std::string> x = inline_value(v)) {
        absl::StrAppend(out, pad, "- ", *x, "\n");
      } else {
        // The first line of a nested block goes after the dash.
        std::string inner;
        AppendYaml(v, indent + 2, &inner);
        absl::StrAppend(out, pad, "- ", inner.substr(static_cast<size_t>(indent) + 2));
      }
    }
  } else if (std::optional<std::string> x = inline_value(j)) {
    absl::StrAppend(out, pad, *x, "\n");
  }
}

// json or yaml output of a whole answer; false for table and wide.
bool PrintStructured(const json& j, const ClientFlags& f) {
  if (f.output == "json") {
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return true;
  }
  if (f.output == "yaml") {
    std::string out;
    AppendYaml(j, 0, &out);
    std::fputs(out.c_str(), stdout);
    return true;
  }
  return false;
}

// Columns padded to their widest cell.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 3, ' ');
    }
    std::printf("%s\n", std::string(absl::StripTrailingAsciiWhitespace(line)).c_str());
  }
}


int GetClusterQueues(ApiClient& client, const ClientFlags& f) {
  std::optional<json> j = Fetch(client, "/v1/clusterqueues");
  if (!j.has_value()) return 1;
  if (PrintStructured(*j, f)) return 0;
  const bool wide = f.output == "wide";
  std::vector<std::vector<std::string>> rows = {{"NAME", "COHORT", "PENDING", "ADMITTED", "USAGE/NOMINAL"}};
  if (wide) rows[0].insert(rows[0].end(), {"BORROWED", "LENT", "SHARE"});
  for (const json& q : (*j)["items"]) {
    std::vector<std::string> usage, borrowed, lent;
    for (const json& r : q["resources"]) {
      const std::string at = absl::StrCat(S(r, "resource"), "@", S(r, "flavor"), " ");
      if (S(r, "borrowed") != "0") borrowed.push_back(at + S(r, "borrowed"));
      if (S(r, "lent") != "0") lent.push_back(at + S(r, "lent"));
      if (S(r, "nominal") == "0" && S(r, "usage") == "0") continue;
      usage.push_back(at + S(r, "usage") + "/" + S(r, "nominal"));
    }
    rows.push_back({S(q, "name"), S(q, "cohort"), S(q, "pending"), S(q, "admitted"), absl::StrJoin(usage, ", ")});
    if (wide) rows.back().insert(rows.back().end(), {absl::StrJoin(borrowed, ", "), absl::StrJoin(lent, ", "), S(q, "weightedShare")});
  }
  PrintTable(rows);
  return 0;
}

int GetWorkloads(ApiClient& client, const ClientFlags& f, const std::string& ns, const std::string& cq,
                 const std::string& state) {
  std::string path = "/v1/workloads";
  std::vector<std::string> q;
  if (!ns.empty()) q.push_back("namespace=" + httpc::QueryEscape(ns));
  if (!cq.empty()) q.push_back("clusterQueue=" + httpc::QueryEscape(cq));
  if (!state.empty()) q.push_back("state=" + httpc::QueryEscape(state));
  if (!q.empty()) absl::StrAppend(&path, "?", absl::StrJoin(q, "&"));
  std::optional<json> j = Fetch(client, path);
  if (!j.has_value()) return 1;
  if (PrintStructured(*j, f)) return 0;
  const bool wide = f.output == "wide";
  std::vector<std::vector<std::string>> rows = {
      {"NAMESPACE", "NAME", "CLUSTERQUEUE", "STATE", "POSITION", "PRIORITY", "REASON"}};
  if (wide) rows[0].insert(rows[0].end(), {"LOCALQUEUE", "UID", "PODS", "FLAVORS", "CREATED", "ADMITTED"});
  for (const json& w : (*j)["items"]) {
    std::string position = w.contains("position") ? S(w["position"], "clusterQueue") : "";
    std::string reason = w.contains("reason") ? S(w["reason"], "message") : S(w, "phase");
    // kubectl's spelling, kind.group/name: a Job and a PyTorchJob may share a name.
    std::string ref = S(w, "ref");
    const size_t first = ref.find('/');
    const size_t second = first == std::string::npos ? std::string::npos : ref.find('/', first + 1);
    const std::string name =
        second == std::string::npos ? S(w, "name") : absl::StrCat(ref.substr(0, first), "/", ref.substr(second + 1));
    rows.push_back({S(w, "namespace"), name, S(w, "clusterQueue"), S(w, "state"), position, S(w, "priority"), reason});
    if (wide) {
      int64_t pods = 0;
      for (const json& ps : w.value("podSets", json::array())) pods += ps.value("count", int64_t{0});
      std::vector<std::string> flavors;
      if (w.contains("assignment")) {
        for (const json& ps : w["assignment"]["podSets"]) {
          for (const auto& [res, flavor] : ps["flavors"].items()) {
            flavors.push_back(absl::StrCat(S(ps, "name"), ":", res, "@", flavor.get<std::string>()));
          }
        }
      }
      rows.back().insert(rows.back().end(), {S(w, "localQueue"), S(w, "uid"), absl::StrCat(pods),
                                             absl::StrJoin(flavors, ","), S(w, "created"), S(w, "admitted")});
    }
  }
  PrintTable(rows);
  return 0;
}

// "k=v,k=v" of a JSON object of strings.
std::string Pairs(const json& m) {
  std::vector<std::string> out;
  if (m.is_object()) {
    for (const auto& [k, v] : m.items()) out.push_back(absl::StrCat(k, "=", v.is_string() ? v.get<std::string>() : v.dump()));
  }
  return absl::StrJoin(out, ",");
}

// Quota objects in Kueue's form, from the Kubernetes-style paths.
int GetPolicyObjects(ApiClient& client, const ClientFlags& f, const std::string& kind, const std::string& ns) {
  std::string path;
  if (kind == "localqueues") {
    path = ns.empty() ? "/apis/kueue.x-k8s.io/v1beta1/localqueues"
                      : absl::StrCat("/apis/kueue.x-k8s.io/v1beta1/namespaces/", httpc::QueryEscape(ns), "/localqueues");
  } else if (kind == "priorityclasses") {
    path = "/apis/scheduling.k8s.io/v1/priorityclasses";
  } else if (kind == "gpunodepools") {
    path = "/apis/gangkeeper.io/v1alpha1/gpunodepools";
  } else {
    path = absl::StrCat("/apis/kueue.x-k8s.io/v1beta1/", kind);
  }
  std::optional<json> j = Fetch(client, path);
  if (!j.has_value()) return 1;
  if (PrintStructured(*j, f)) return 0;
  const bool wide = f.output == "wide";
  // LocalQueues in wide form count their workloads.
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> counts;
  if (kind == "localqueues" && wide) {
    std::optional<json> w = Fetch(client, ns.empty() ? "/v1/workloads" : "/v1/workloads?namespace=" + httpc::QueryEscape(ns));
    if (!w.has_value()) return 1;
    for (const json& x : (*w)["items"]) {
      auto& c = counts[{S(x, "namespace"), S(x, "localQueue")}];
      (S(x, "state") == "pending" ? c.first : c.second)++;
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& o : (*j)["items"]) {
    const json meta = o.value("metadata", json::object());
    const json spec = o.value("spec", json::object());
    const std::string name = S(meta, "name");
    if (kind == "localqueues") {
      if (rows.empty()) rows.push_back({"NAMESPACE", "NAME", "CLUSTERQUEUE", "STOPPOLICY"});
      rows.push_back({S(meta, "namespace"), name, S(spec, "clusterQueue"), S(spec, "stopPolicy")});
      if (wide) {
        const auto c = counts[{S(meta, "namespace"), name}];
        rows.back().insert(rows.back().end(), {absl::StrCat(c.first), absl::StrCat(c.second)});
      }
    } else if (kind == "resourceflavors") {
      if (rows.empty()) rows.push_back({"NAME", "NODELABELS"});
      rows.push_back({name, Pairs(spec.value("nodeLabels", json::object()))});
      if (wide) {
        std::vector<std::string> taints, tolerations;
        for (const json& t : spec.value("nodeTaints", json::array())) {
          taints.push_back(absl::StrCat(S(t, "key"), t.contains("value") ? "=" + S(t, "value") : "", ":", S(t, "effect")));
        }
        for (const json& t : spec.value("tolerations", json::array())) {
          tolerations.push_back(absl::StrCat(S(t, "key"), t.contains("value") ? "=" + S(t, "value") : "", ":", S(t, "effect")));
        }
        rows.back().insert(rows.back().end(), {absl::StrJoin(taints, ","), absl::StrJoin(tolerations, ",")});
      }
    } else if (kind == "cohorts") {
      if (rows.empty()) rows.push_back({"NAME", "PARENT"});
      rows.push_back({name, spec.contains("parentName") ? S(spec, "parentName") : S(spec, "parent")});
      if (wide) {
        std::vector<std::string> quota;
        for (const json& rg : spec.value("resourceGroups", json::array())) {
          for (const json& fl : rg.value("flavors", json::array())) {
            for (const json& r : fl.value("resources", json::array())) {
              quota.push_back(absl::StrCat(S(r, "name"), "@", S(fl, "name"), " ", S(r, "nominalQuota")));
            }
          }
        }
        rows.back().push_back(absl::StrJoin(quota, ", "));
      }
    } else if (kind == "gpunodepools") {
      if (rows.empty()) rows.push_back({"NAME", "FLAVOR", "GPU", "GPUS/NODE", "NODES", "MIG"});
      std::string mig = S(spec, "migStrategy");
      if (spec.contains("migProfiles")) {
        std::vector<std::string> profiles;
        for (const json& p : spec["migProfiles"]) profiles.push_back(p.is_string() ? p.get<std::string>() : p.dump());
        absl::StrAppend(&mig, " [", absl::StrJoin(profiles, ","), "]");
      }
      rows.push_back({name, S(spec, "flavor"), S(spec, "gpu"), S(spec, "gpusPerNode"), S(spec, "nodes"), mig});
    } else {  // workloadpriorityclasses, priorityclasses
      if (rows.empty()) rows.push_back({"NAME", "VALUE"});
      rows.push_back({name, S(o, "value")});
      if (wide) {
        if (kind == "priorityclasses") rows.back().push_back(S(o, "preemptionPolicy"));
        rows.back().push_back(S(o, "description"));
      }
    }
  }
  if (rows.empty()) {
    std::printf("No %s found.\n", kind.c_str());
    return 0;
  }
  if (wide) {
    if (kind == "localqueues") rows[0].insert(rows[0].end(), {"PENDING", "ADMITTED"});
    if (kind == "resourceflavors") rows[0].insert(rows[0].end(), {"TAINTS", "TOLERATIONS"});
    if (kind == "cohorts") rows[0].push_back("QUOTA");
    if (kind == "priorityclasses") rows[0].push_back("PREEMPTIONPOLICY");
    if (kind == "workloadpriorityclasses" || kind == "priorityclasses") rows[0].push_back("DESCRIPTION");
  }
  PrintTable(rows);
  return 0;
}

int DescribeWorkload(ApiClient& client, const ClientFlags& f, const std::string& ref) {
  std::vector<std::string> parts = absl::StrSplit(ref, '/');
  const bool ok = (parts.size() == 2 || parts.size() == 3) &&
                  std::none_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  if (!ok) {
    std::fprintf(stderr, "gangkeeper: describe workload [KIND/]NAMESPACE/NAME (e.g. job/team-a/train or "
                         "pytorchjob.kubeflow.org/team-a/train), not \"%s\"\n",
                 ref.c_str());
    return 2;
  }
  std::string path = "/v1/workloads";
  for (const std::string& p : parts) absl::StrAppend(&path, "/", httpc::QueryEscape(p));
  std::optional<json> w = Fetch(client, path);
  if (!w.has_value()) return 1;
  if (PrintStructured(*w, f)) return 0;
  std::printf("Workload:      %s (%s, uid %s)\n", S(*w, "ref").c_str(), S(*w, "kind").c_str(), S(*w, "uid").c_str());
  std::printf("Queue:         LocalQueue %s -> ClusterQueue %s\n", S(*w, "localQueue").c_str(),
              S(*w, "clusterQueue").c_str());
  std::printf("State:         %s (%s)\n", S(*w, "state").c_str(), S(*w, "phase").c_str());
  std::printf("Priority:      %s%s\n", S(*w, "priority").c_str(),
              S(*w, "priorityClass").empty() ? "" : absl::StrCat(" (", S(*w, "priorityClass"), ")").c_str());
  std::printf("Created:       %s\n", S(*w, "created").c_str());
  if (w->contains("position")) {
    std::printf("Position:      %s in ClusterQueue, %s in LocalQueue\n",
                S((*w)["position"], "clusterQueue").c_str(), S((*w)["position"], "localQueue").c_str());
  }
  if (w->contains("reason")) {
    std::printf("Waiting:       %s: %s\n", S((*w)["reason"], "code").c_str(), S((*w)["reason"], "message").c_str());
  }
  std::printf("Pod sets:\n");
  for (const json& ps : (*w)["podSets"]) {
    std::vector<std::string> req;
    for (const auto& [k, v] : ps["requests"].items()) req.push_back(absl::StrCat(k, "=", v.get<std::string>()));
    std::printf("  %-12s %s x {%s}\n", S(ps, "name").c_str(), S(ps, "count").c_str(), absl::StrJoin(req, ", ").c_str());
  }
  if (w->contains("assignment")) {
    std::printf("Admitted:      %s in ClusterQueue %s\n", S(*w, "admitted").c_str(),
                S((*w)["assignment"], "clusterQueue").c_str());
    for (const json& ps : (*w)["assignment"]["podSets"]) {
      std::vector<std::string> flavors;
      for (const auto& [res, flavor] : ps["flavors"].items()) {
        flavors.push_back(absl::StrCat(res, "@", flavor.get<std::string>()));
      }
      std::printf("  %-12s %s\n", S(ps, "name").c_str(), absl::StrJoin(flavors, ", ").c_str());
    }
  }
  if (w->contains("actuation")) std::printf("Last action:   %s\n", S(*w, "actuation").c_str());
  return 0;
}

}  // namespace

// Prints the audit events matching `query` (a query string without limit
// and cursor), page by page; with `follow`, keeps asking for new ones every
// second until `follow_for` (0: until interrupted).
int Audit(ApiClient& client, const ClientFlags& f, const std::string& query, int64_t limit, bool follow,
          absl::Duration follow_for) {
  std::string cursor;
  int64_t printed = 0;
  bool header = f.output == "table";
  const absl::Time give_up = follow_for > absl::ZeroDuration() ? base::RealClock().Now() + follow_for : absl::InfiniteFuture();
  while (true) {
    const int64_t page = std::min<int64_t>(1000, limit - printed);
    if (page <= 0) return 0;
    std::optional<json> j = Fetch(client, absl::StrCat("/v1/audit?", query, query.empty() ? "" : "&", "limit=", page,
                                                       cursor.empty() ? "" : "&cursor=" + cursor));
    if (!j.has_value()) return 1;
    std::vector<std::vector<std::string>> rows;
    if (header) rows.push_back({"SEQ", "TIME", "ACTOR", "ACTION", "OBJECT", "CLUSTERQUEUE", "REASON"});
    header = false;
    for (const json& e : (*j)["items"]) {
      ++printed;
      cursor = S(e, "seq");
      if (f.output == "json") {
        std::printf("%s\n", e.dump().c_str());
        continue;
      }
      const json& o = e.contains("object") ? e["object"] : json::object();
      std::string object = S(o, "kind");
      if (!S(o, "name").empty()) {
        absl::StrAppend(&object, " ", S(o, "namespace"), S(o, "namespace").empty() ? "" : "/", S(o, "name"));
      }
      // A review's user is what its sender wrote (DESIGN §8).
      const auto claimed = e.find("actorClaimed");
      const bool is_claimed = claimed != e.end() && claimed->is_boolean() && claimed->get<bool>();
      const std::string actor = S(e, "actor") + (is_claimed ? " (claimed)" : "");
      rows.push_back({S(e, "seq"), S(e, "time"), actor, S(e, "action"), object, S(e, "clusterQueue"), S(e, "reason")});
    }
    if (!rows.empty()) PrintTable(rows);
    std::fflush(stdout);
    if (j->contains("next")) {
      cursor = S(*j, "next");
      continue;
    }
    if (!follow || base::RealClock().Now() >= give_up) return 0;
    absl::SleepFor(absl::Seconds(1));
  }
}

int RunAudit(const std::vector<std::string>& args) {
  ClientFlags f;
  std::string ns, name, kind, action, actor, cq, since, until;
  int limit = 1000;
  bool follow = false;
  absl::Duration follow_for = absl::ZeroDuration();
  FlagSet flags("audit", "Shows audit events from the API, oldest first.\nusage: gangkeeper audit [filters] [--follow]");
  AddClientFlags(flags, &f);
  flags.String("n", &ns, "namespace");
  flags.String("namespace", &ns, "namespace");
  flags.String("name", &name, "object name");
  flags.String("kind", &kind, "object kind (Workload, Job, PolicySet, ...)");
  flags.String("action", &action, "e.g. workload.admitted, workload.preempted, review.denied, quota.changed");
  flags.String("actor", &actor, "a Kubernetes user, a token name, or gangkeeper");
  flags.String("cluster-queue", &cq, "ClusterQueue");
  flags.String("since", &since, "events at or after this: an RFC 3339 time, or a duration ago (1h, 30m, 7d)");
  flags.String("until", &until, "events at or before this: an RFC 3339 time, or a duration ago");
  flags.Int("limit", &limit, "print at most this many events");
  flags.Bool("follow", &follow, "keep printing new events as they come");
  flags.Duration("follow-for", &follow_for, "with --follow, stop after this long (default: until interrupted)");
  std::vector<std::string> rest;
  if (std::optional<int> done = flags.ParseOrExit(args, &rest)) return *done;
  if (!rest.empty() || limit < 1 || (f.output != "table" && f.output != "json")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper audit [--namespace NS] [--name N] [--action A] [--actor U] "
                         "[--cluster-queue CQ] [--since T|1h] [--until T|1h] [--limit N] [--follow] [-o table|json]\n");
    return 2;
  }
  // "1h" means an hour ago ("7d" a week: days are not a Go duration unit).
  for (std::string* t : {&since, &until}) {
    if (t->empty()) continue;
    absl::Duration ago;
    std::string spelled = *t;
    int64_t days = 0;
    if (absl::EndsWith(spelled, "d") && absl::SimpleAtoi(absl::string_view(spelled).substr(0, spelled.size() - 1), &days)) {
      spelled = absl::StrCat(days * 24, "h");
    }
    if (absl::ParseDuration(spelled, &ago)) {
      if (ago < absl::ZeroDuration()) {
        std::fprintf(stderr, "gangkeeper: --since/--until %s: give a positive duration (how long ago)\n", t->c_str());
        return 2;
      }
      *t = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", base::RealClock().Now() - ago, absl::UTCTimeZone());
    }
  }
  std::string query;
  for (const auto& [key, value] : std::vector<std::pair<const char*, std::string>>{
           {"namespace", ns}, {"name", name}, {"kind", kind}, {"action", action}, {"actor", actor},
           {"clusterQueue", cq}, {"since", since}, {"until", until}}) {
    if (value.empty()) continue;
    absl::StrAppend(&query, query.empty() ? "" : "&", key, "=", httpc::QueryEscape(value));
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  return Audit(*client, f, query, limit, follow, follow_for);
}

int RunApply(const std::vector<std::string>& args) {
  ClientFlags f;
  std::vector<std::string> files;
  std::string file;
  FlagSet flags("apply", "Applies Kueue manifests through the API, all or nothing.\n"
                         "usage: gangkeeper apply -f FILE|DIR [-f ...]");
  AddClientFlags(flags, &f);
  flags.String("f", &file, "a manifest file, or a directory of *.yaml, *.yml and *.json");
  flags.String("filename", &file, "the same as -f");
  std::vector<std::string> rest;
  if (std::optional<int> done = flags.ParseOrExit(args, &rest)) return *done;
  if (file.empty() || !rest.empty()) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper apply -f FILE|DIR\n");
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(file, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        files.push_back(entry.path().string());
      }
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(file);
  }
  std::string bundle;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "gangkeeper: -f %s: cannot read it\n", path.c_str());
      return 2;
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::string body = text.str();
    // JSON documents go in as they are: YAML is a superset of JSON.
    absl::StrAppend(&bundle, bundle.empty() ? "" : "\n---\n", body);
  }
  if (files.empty()) {
    std::fprintf(stderr, "gangkeeper: -f %s: no *.yaml, *.yml or *.json file in it\n", file.c_str());
    return 2;
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  absl::StatusOr<json> answer = client->Post("/v1/apply", bundle, "application/yaml");
  if (!answer.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(answer.status().message()).c_str());
    return 1;
  }
  if (f.output == "json") {
    std::printf("%s\n", answer->dump(2).c_str());
    return 0;
  }
  for (const json& a : (*answer)["applied"]) {
    const std::string ns = S(a, "namespace");
    std::printf("%s %s%s%s %s\n", S(a, "kind").c_str(), ns.c_str(), ns.empty() ? "" : "/", S(a, "name").c_str(),
                S(a, "action").c_str());
  }
  return 0;
}

int RunGet(const std::vector<std::string>& args) {
  ClientFlags f;
  std::string ns, cq, state;
  FlagSet flags("get",
                "Lists objects from the API.\nusage: gangkeeper get clusterqueues|workloads|localqueues|flavors|cohorts|"
                "workloadpriorityclasses|priorityclasses|gpunodepools [flags]");
  AddClientFlags(flags, &f);
  flags.String("n", &ns, "namespace (workloads, localqueues)");
  flags.String("namespace", &ns, "namespace (workloads, localqueues)");
  flags.String("cluster-queue", &cq, "ClusterQueue (workloads)");
  flags.String("state", &state, "pending, admitted, finished or all (workloads)");
  std::vector<std::string> what;
  if (std::optional<int> done = flags.ParseOrExit(args, &what)) return *done;
  const std::vector<std::string> outputs = {"table", "wide", "json", "yaml"};
  if (what.size() != 1 || std::find(outputs.begin(), outputs.end(), f.output) == outputs.end()) {
    std::fprintf(stderr,
                 "gangkeeper: usage: gangkeeper get clusterqueues|workloads|localqueues|flavors|cohorts|"
                 "workloadpriorityclasses|priorityclasses|gpunodepools [-n NS] [-o table|wide|json|yaml]\n");
    return 2;
  }
  // Names, plurals and short names, as kubectl takes them.
  static const std::map<std::string, std::string> kKinds = {
      {"clusterqueues", "clusterqueues"}, {"clusterqueue", "clusterqueues"}, {"cq", "clusterqueues"},
      {"workloads", "workloads"}, {"workload", "workloads"}, {"wl", "workloads"},
      {"localqueues", "localqueues"}, {"localqueue", "localqueues"}, {"lq", "localqueues"}, {"queues", "localqueues"},
      {"flavors", "resourceflavors"}, {"flavor", "resourceflavors"}, {"resourceflavors", "resourceflavors"},
      {"resourceflavor", "resourceflavors"}, {"rf", "resourceflavors"},
      {"cohorts", "cohorts"}, {"cohort", "cohorts"},
      {"workloadpriorityclasses", "workloadpriorityclasses"}, {"workloadpriorityclass", "workloadpriorityclasses"},
      {"wpc", "workloadpriorityclasses"},
      {"priorityclasses", "priorityclasses"}, {"priorityclass", "priorityclasses"}, {"pc", "priorityclasses"},
      {"gpunodepools", "gpunodepools"}, {"gpunodepool", "gpunodepools"}, {"pools", "gpunodepools"}};
  auto kind = kKinds.find(what[0]);
  if (kind == kKinds.end()) {
    std::fprintf(stderr,
                 "gangkeeper: get %s: use clusterqueues, workloads, localqueues, flavors, cohorts, "
                 "workloadpriorityclasses, priorityclasses or gpunodepools\n",
                 what[0].c_str());
    return 2;
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  if (kind->second == "clusterqueues") return GetClusterQueues(*client, f);
  if (kind->second == "workloads") return GetWorkloads(*client, f, ns, cq, state);
  return GetPolicyObjects(*client, f, kind->second, ns);
}

int RunDescribe(const std::vector<std::string>& args) {
  ClientFlags f;
  FlagSet flags("describe",
                "Shows one workload: where it queues and why it waits.\n"
                "usage: gangkeeper describe workload [KIND/]NAMESPACE/NAME   (KIND: job, pytorchjob, jobset, pod, "
                "podgroup, ...; needed when two kinds share the name)");
  AddClientFlags(flags, &f);
  std::vector<std::string> what;
  if (std::optional<int> done = flags.ParseOrExit(args, &what)) return *done;
  if (what.size() != 2 || (what[0] != "workload" && what[0] != "workloads")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper describe workload [KIND/]NAMESPACE/NAME\n");
    return 2;
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  return DescribeWorkload(*client, f, what[1]);
}

}  // namespace gangkeeper::cli
