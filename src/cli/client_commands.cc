// gangkeeper CLI: client subcommands that read the API (DESIGN §5):
//   gangkeeper get clusterqueues|workloads [-n NS] [--cluster-queue CQ]
//                  [--state pending|admitted|all] [-o table|json]
//   gangkeeper describe workload NS/NAME [-o json]
// --server, --token and --ca, or GANGKEEPER_SERVER, GANGKEEPER_TOKEN and
// GANGKEEPER_CA. Exit codes: 0 done, 1 the API refused or failed (its
// message on stderr), 2 usage errors.
#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/kube/client.h"
#include "nlohmann/json.hpp"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

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
  flags.String("o", &f->output, "output: table or json");
  flags.String("output", &f->output, "output: table or json");
}

// Parses the flags; an exit code when the command should end here (2 after
// printing the problem, 0 after --help), nullopt to go on.
std::optional<int> ParseOrExit(FlagSet& flags, const std::vector<std::string>& args,
                               std::vector<std::string>* positional) {
  bool help = false;
  if (absl::Status s = flags.Parse(args, positional, &help); !s.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  return std::nullopt;
}

// A client for the API listener; prints the problem and returns null.
std::unique_ptr<kube::Client> Connect(const ClientFlags& f) {
  absl::string_view rest = f.server;
  if (!absl::ConsumePrefix(&rest, "https://")) {
    std::fprintf(stderr, "gangkeeper: --server %s: use https://HOST:PORT\n", f.server.c_str());
    return nullptr;
  }
  rest = absl::StripSuffix(rest, "/");
  kube::ClusterConfig c;
  c.source = "--server";
  size_t colon = rest.rfind(':');
  if (absl::ConsumePrefix(&rest, "[")) {
    size_t close = rest.find(']');
    c.host = std::string(rest.substr(0, close));
    colon = rest.find(':', close);
  } else {
    c.host = std::string(rest.substr(0, colon));
  }
  c.port = 443;
  if (colon != absl::string_view::npos && !absl::SimpleAtoi(rest.substr(colon + 1), &c.port)) {
    std::fprintf(stderr, "gangkeeper: --server %s: bad port\n", f.server.c_str());
    return nullptr;
  }
  std::ifstream in(f.ca, std::ios::binary);
  std::ostringstream pem;
  pem << in.rdbuf();
  c.ca_pem = pem.str();
  if (c.ca_pem.empty()) {
    std::fprintf(stderr, "gangkeeper: --ca %s: cannot read it (the CA that signed the API's certificate)\n",
                 f.ca.c_str());
    return nullptr;
  }
  c.token = f.token;
  kube::ClientOptions o;
  o.retry.max_attempts = 3;
  o.retry.max_total = absl::Seconds(10);
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<kube::Client>> client = kube::Client::Create(c, o);
  if (!client.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(client.status().message()).c_str());
    return nullptr;
  }
  return *std::move(client);
}

// GET `path`; prints the API's error and returns nullopt on failure.
std::optional<json> Fetch(kube::Client& client, const std::string& path) {
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


int GetClusterQueues(kube::Client& client, const ClientFlags& f) {
  std::optional<json> j = Fetch(client, "/v1/clusterqueues");
  if (!j.has_value()) return 1;
  if (f.output == "json") {
    std::printf("%s\n", j->dump(2).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "COHORT", "PENDING", "ADMITTED", "USAGE/NOMINAL"}};
  for (const json& q : (*j)["items"]) {
    std::vector<std::string> usage;
    for (const json& r : q["resources"]) {
      if (S(r, "nominal") == "0" && S(r, "usage") == "0") continue;
      usage.push_back(absl::StrCat(S(r, "resource"), "@", S(r, "flavor"), " ", S(r, "usage"), "/", S(r, "nominal")));
    }
    rows.push_back({S(q, "name"), S(q, "cohort"), S(q, "pending"), S(q, "admitted"), absl::StrJoin(usage, ", ")});
  }
  PrintTable(rows);
  return 0;
}

int GetWorkloads(kube::Client& client, const ClientFlags& f, const std::string& ns, const std::string& cq,
                 const std::string& state) {
  std::string path = "/v1/workloads";
  std::vector<std::string> q;
  if (!ns.empty()) q.push_back("namespace=" + kube::QueryEscape(ns));
  if (!cq.empty()) q.push_back("clusterQueue=" + kube::QueryEscape(cq));
  if (!state.empty()) q.push_back("state=" + kube::QueryEscape(state));
  if (!q.empty()) absl::StrAppend(&path, "?", absl::StrJoin(q, "&"));
  std::optional<json> j = Fetch(client, path);
  if (!j.has_value()) return 1;
  if (f.output == "json") {
    std::printf("%s\n", j->dump(2).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NAMESPACE", "NAME", "CLUSTERQUEUE", "STATE", "POSITION", "PRIORITY", "REASON"}};
  for (const json& w : (*j)["items"]) {
    std::string position = w.contains("position") ? S(w["position"], "clusterQueue") : "";
    std::string reason = w.contains("reason") ? S(w["reason"], "message") : S(w, "phase");
    rows.push_back({S(w, "namespace"), S(w, "name"), S(w, "clusterQueue"), S(w, "state"), position,
                    S(w, "priority"), reason});
  }
  PrintTable(rows);
  return 0;
}

int DescribeWorkload(kube::Client& client, const ClientFlags& f, const std::string& ns_name) {
  const size_t slash = ns_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ns_name.size()) {
    std::fprintf(stderr, "gangkeeper: describe workload NAMESPACE/NAME\n");
    return 2;
  }
  std::optional<json> w = Fetch(client, absl::StrCat("/v1/workloads/", kube::QueryEscape(ns_name.substr(0, slash)), "/",
                                                     kube::QueryEscape(ns_name.substr(slash + 1))));
  if (!w.has_value()) return 1;
  if (f.output == "json") {
    std::printf("%s\n", w->dump(2).c_str());
    return 0;
  }
  std::printf("Workload:      %s/%s (%s, uid %s)\n", S(*w, "namespace").c_str(), S(*w, "name").c_str(),
              S(*w, "kind").c_str(), S(*w, "uid").c_str());
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
int Audit(kube::Client& client, const ClientFlags& f, const std::string& query, int64_t limit, bool follow,
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
      rows.push_back({S(e, "seq"), S(e, "time"), S(e, "actor"), S(e, "action"), object, S(e, "clusterQueue"),
                      S(e, "reason")});
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
  flags.String("since", &since, "RFC 3339 time: events at or after it");
  flags.String("until", &until, "RFC 3339 time: events at or before it");
  flags.Int("limit", &limit, "print at most this many events");
  flags.Bool("follow", &follow, "keep printing new events as they come");
  flags.Duration("follow-for", &follow_for, "with --follow, stop after this long (default: until interrupted)");
  std::vector<std::string> rest;
  if (std::optional<int> done = ParseOrExit(flags, args, &rest)) return *done;
  if (!rest.empty() || limit < 1 || (f.output != "table" && f.output != "json")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper audit [--namespace NS] [--name N] [--action A] [--actor U] "
                         "[--cluster-queue CQ] [--since T] [--until T] [--limit N] [--follow] [-o table|json]\n");
    return 2;
  }
  std::string query;
  for (const auto& [key, value] : std::vector<std::pair<const char*, std::string>>{
           {"namespace", ns}, {"name", name}, {"kind", kind}, {"action", action}, {"actor", actor},
           {"clusterQueue", cq}, {"since", since}, {"until", until}}) {
    if (value.empty()) continue;
    absl::StrAppend(&query, query.empty() ? "" : "&", key, "=", kube::QueryEscape(value));
  }
  std::unique_ptr<kube::Client> client = Connect(f);
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
  if (std::optional<int> done = ParseOrExit(flags, args, &rest)) return *done;
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
  std::unique_ptr<kube::Client> client = Connect(f);
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
  FlagSet flags("get", "Lists clusterqueues or workloads from the API.\nusage: gangkeeper get clusterqueues|workloads [flags]");
  AddClientFlags(flags, &f);
  flags.String("n", &ns, "namespace (workloads)");
  flags.String("namespace", &ns, "namespace (workloads)");
  flags.String("cluster-queue", &cq, "ClusterQueue (workloads)");
  flags.String("state", &state, "pending, admitted or all (workloads)");
  std::vector<std::string> what;
  if (std::optional<int> done = ParseOrExit(flags, args, &what)) return *done;
  if (what.size() != 1 || (f.output != "table" && f.output != "json")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper get clusterqueues|workloads [-n NS] [-o table|json]\n");
    return 2;
  }
  const std::string kind = what[0];
  const bool queues = kind == "clusterqueues" || kind == "clusterqueue" || kind == "cq";
  const bool workloads = kind == "workloads" || kind == "workload" || kind == "wl";
  if (!queues && !workloads) {
    std::fprintf(stderr, "gangkeeper: get %s: use clusterqueues or workloads\n", kind.c_str());
    return 2;
  }
  std::unique_ptr<kube::Client> client = Connect(f);
  if (client == nullptr) return 2;
  return queues ? GetClusterQueues(*client, f) : GetWorkloads(*client, f, ns, cq, state);
}

int RunDescribe(const std::vector<std::string>& args) {
  ClientFlags f;
  FlagSet flags("describe", "Shows one workload: where it queues and why it waits.\nusage: gangkeeper describe workload NAMESPACE/NAME");
  AddClientFlags(flags, &f);
  std::vector<std::string> what;
  if (std::optional<int> done = ParseOrExit(flags, args, &what)) return *done;
  if (what.size() != 2 || (what[0] != "workload" && what[0] != "workloads")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper describe workload NAMESPACE/NAME\n");
    return 2;
  }
  std::unique_ptr<kube::Client> client = Connect(f);
  if (client == nullptr) return 2;
  return DescribeWorkload(*client, f, what[1]);
}

}  // namespace gangkeeper::cli
