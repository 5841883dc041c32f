// gangkeeper CLI: `gangkeeper get`, lists from the API (DESIGN §5):
//   gangkeeper get clusterqueues|workloads|localqueues|flavors|cohorts|
//                  workloadpriorityclasses|priorityclasses|gpunodepools
//                  [NAME...] [-n NS | -A] [--cluster-queue CQ]
//                  [--state pending|admitted|finished|all]
//                  [-o table|wide|json|yaml|name]
// Server selection and exit codes: see client.h and the --help text.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/httpc/request.h"
#include "nlohmann/json.hpp"
#include "src/cli/client.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

constexpr size_t kTableWidth = 120;

struct GetOptions {
  ClientFlags client;
  std::string kind;  // the plural, as kResourceKinds maps it
  std::set<std::string> names;
  std::string ns;
  std::string cluster_queue;
  std::string state;
};

// The row's object is one the command line named (or no names were given).
bool GetWanted(const GetOptions& o, const std::string& name) { return o.names.empty() || o.names.count(name) != 0; }

// A table, or "No KIND found." when it has only its header.
void GetPrintRows(const TableRows& rows, const std::string& kind) {
  if (rows.size() <= 1) {
    std::printf("No %s found.\n", kind.c_str());
    return;
  }
  PrintTable(rows);
}

// Names the command line asked for that the answer lacks: an error.
int GetMissing(const GetOptions& o, const std::set<std::string>& seen) {
  for (const std::string& n : o.names) {
    if (seen.count(n) == 0) {
      return Complain(1, absl::StrCat(o.kind, " \"", n, "\" not found",
                                      o.ns.empty() ? "" : absl::StrCat(" in namespace ", o.ns)));
    }
  }
  return 0;
}

int GetClusterQueues(ApiClient& client, const GetOptions& o) {
  std::optional<json> j = Fetch(client, "/v1/clusterqueues");
  if (!j.has_value()) return 1;
  json items = json::array();
  std::set<std::string> seen;
  for (const json& q : (*j)["items"]) {
    if (!GetWanted(o, Field(q, "name"))) continue;
    seen.insert(Field(q, "name"));
    items.push_back(q);
  }
  if (int missing = GetMissing(o, seen)) return missing;
  if (PrintStructured({{"items", items}}, o.client.output)) return 0;
  if (o.client.output == "name") {
    for (const json& q : items) std::printf("clusterqueue/%s\n", Field(q, "name").c_str());
    return 0;
  }
  const bool wide = o.client.output == "wide";
  // One row per flavor and resource with quota or usage; the queue's own
  // columns on its first row.
  TableRows rows = {{"NAME", "COHORT", "PENDING", "ADMITTED", "RESOURCE@FLAVOR", "USAGE/NOMINAL"}};
  if (wide) rows[0].insert(rows[0].end(), {"BORROWED", "LENT", "SHARE"});
  for (const json& q : items) {
    bool first = true;
    for (const json& r : Member(q, "resources")) {
      if (Field(r, "nominal") == "0" && Field(r, "usage") == "0" && Field(r, "borrowed") == "0") continue;
      std::vector<std::string> row = {Field(q, "name"), "", "", "", absl::StrCat(Field(r, "resource"), "@", Field(r, "flavor")),
                                      absl::StrCat(HumanQuantity(Field(r, "usage")), "/", HumanQuantity(Field(r, "nominal")))};
      if (first) row = {row[0], Field(q, "cohort"), Field(q, "pending"), Field(q, "admitted"), row[4], row[5]};
      if (wide) {
        row.insert(row.end(), {HumanQuantity(Field(r, "borrowed")), HumanQuantity(Field(r, "lent")),
                               first ? Field(q, "weightedShare") : ""});
      }
      rows.push_back(std::move(row));
      first = false;
    }
    if (first) {
      rows.push_back({Field(q, "name"), Field(q, "cohort"), Field(q, "pending"), Field(q, "admitted"), "", ""});
      if (wide) rows.back().insert(rows.back().end(), {"", "", Field(q, "weightedShare")});
    }
  }
  if (rows.size() <= 1) {
    std::printf("No clusterqueues found.\n");
  } else {
    PrintTable(rows, wide ? 2 : 3);  // -o wide fits 120 columns with narrower gutters
  }
  return 0;
}

// kubectl's spelling of a workload, kind.group/name: a Job and a
// PyTorchJob may share a name.
std::string GetWorkloadName(const json& w) {
  const std::string ref = Field(w, "ref");
  const size_t first = ref.find('/');
  const size_t second = first == std::string::npos ? std::string::npos : ref.find('/', first + 1);
  return second == std::string::npos ? Field(w, "name") : absl::StrCat(ref.substr(0, first), "/", ref.substr(second + 1));
}

// The last column cut so that the table fits kTableWidth.
void GetFitLastColumn(TableRows* rows) {
  std::vector<size_t> width;
  for (const auto& r : *rows) {
    for (size_t i = 0; i + 1 < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  size_t used = 0;
  for (size_t w : width) used += w + 3;
  const size_t room = used + 20 < kTableWidth ? kTableWidth - used : 20;
  for (auto& r : *rows) {
    std::string& last = r.back();
    if (last.size() > room) last = absl::StrCat(last.substr(0, room - 3), "...");
  }
}

int GetWorkloads(ApiClient& client, const GetOptions& o) {
  std::string path = "/v1/workloads";
  std::vector<std::string> q;
  if (!o.ns.empty()) q.push_back("namespace=" + httpc::QueryEscape(o.ns));
  if (!o.cluster_queue.empty()) q.push_back("clusterQueue=" + httpc::QueryEscape(o.cluster_queue));
  if (!o.state.empty()) q.push_back("state=" + httpc::QueryEscape(o.state));
  if (!q.empty()) absl::StrAppend(&path, "?", absl::StrJoin(q, "&"));
  std::optional<json> j = Fetch(client, path);
  if (!j.has_value()) return 1;
  json items = json::array();
  std::set<std::string> seen;
  for (const json& w : (*j)["items"]) {
    const std::string name = GetWorkloadName(w);
    const std::string matched = GetWanted(o, name) ? name : GetWanted(o, Field(w, "name")) ? Field(w, "name") : "";
    if (matched.empty()) continue;
    seen.insert(matched);
    items.push_back(w);
  }
  if (int missing = GetMissing(o, seen)) return missing;
  if (PrintStructured({{"items", items}}, o.client.output)) return 0;
  if (o.client.output == "name") {
    for (const json& w : items) std::printf("%s\n", GetWorkloadName(w).c_str());
    return 0;
  }
  const bool wide = o.client.output == "wide";
  TableRows rows = {{"NAMESPACE", "NAME", "CLUSTERQUEUE", "STATE", "POSITION", "PRIORITY", "REASON"}};
  if (wide) rows[0] = {"NAMESPACE", "NAME", "CLUSTERQUEUE", "STATE", "POSITION", "PRIORITY", "LOCALQUEUE", "PODS",
                       "FLAVORS", "CREATED", "ADMITTED", "REASON"};
  for (const json& w : items) {
    const std::string position = w.contains("position") ? Field(w["position"], "clusterQueue") : "";
    const std::string reason = w.contains("reason") ? Field(w["reason"], "message") : Field(w, "phase");
    rows.push_back({Field(w, "namespace"), GetWorkloadName(w), Field(w, "clusterQueue"), Field(w, "state"), position,
                    Field(w, "priority")});
    if (wide) {
      int64_t pods = 0;
      for (const json& ps : Member(w, "podSets")) pods += ps.value("count", int64_t{0});
      std::vector<std::string> flavors;
      if (w.contains("assignment")) {
        for (const json& ps : Member(w["assignment"], "podSets")) {
          for (const auto& [res, flavor] : Member(ps, "flavors").items()) {
            flavors.push_back(absl::StrCat(Field(ps, "name"), ":", res, "@", flavor.is_string() ? flavor.get<std::string>() : flavor.dump()));
          }
        }
      }
      rows.back().insert(rows.back().end(), {Field(w, "localQueue"), absl::StrCat(pods), absl::StrJoin(flavors, ","),
                                             Field(w, "created"), Field(w, "admitted")});
    }
    rows.back().push_back(reason);
  }
  if (!wide) GetFitLastColumn(&rows);
  GetPrintRows(rows, "workloads");
  return 0;
}

// "k=v,k=v" of a JSON object of strings.
std::string GetPairs(const json& m) {
  std::vector<std::string> out;
  if (m.is_object()) {
    for (const auto& [k, v] : m.items()) out.push_back(absl::StrCat(k, "=", v.is_string() ? v.get<std::string>() : v.dump()));
  }
  return absl::StrJoin(out, ",");
}

std::string GetTaints(const json& list) {
  std::vector<std::string> out;
  for (const json& t : list) {
    out.push_back(absl::StrCat(Field(t, "key"), t.contains("value") ? "=" + Field(t, "value") : "", ":", Field(t, "effect")));
  }
  return absl::StrJoin(out, ",");
}

// One row of a quota object (and the header, when `rows` is empty).
void GetPolicyRow(const GetOptions& o, const json& obj,
                  std::map<std::pair<std::string, std::string>, std::pair<int, int>>& counts, TableRows* rows) {
  const bool wide = o.client.output == "wide";
  const json meta = obj.value("metadata", json::object());
  const json spec = obj.value("spec", json::object());
  const std::string name = Field(meta, "name");
  const std::string& kind = o.kind;
  auto header = [&](std::vector<std::string> narrow, std::vector<std::string> more) {
    if (!rows->empty()) return;
    if (wide) narrow.insert(narrow.end(), more.begin(), more.end());
    rows->push_back(std::move(narrow));
  };
  if (kind == "localqueues") {
    header({"NAMESPACE", "NAME", "CLUSTERQUEUE", "STOPPOLICY"}, {"PENDING", "ADMITTED"});
    rows->push_back({Field(meta, "namespace"), name, Field(spec, "clusterQueue"), Field(spec, "stopPolicy")});
    if (wide) {
      const auto c = counts[{Field(meta, "namespace"), name}];
      rows->back().insert(rows->back().end(), {absl::StrCat(c.first), absl::StrCat(c.second)});
    }
  } else if (kind == "resourceflavors") {
    header({"NAME", "NODELABELS"}, {"TAINTS", "TOLERATIONS"});
    rows->push_back({name, GetPairs(Member(spec, "nodeLabels"))});
    if (wide) {
      rows->back().insert(rows->back().end(), {GetTaints(Member(spec, "nodeTaints")),
                                               GetTaints(Member(spec, "tolerations"))});
    }
  } else if (kind == "cohorts") {
    header({"NAME", "PARENT"}, {"QUOTA"});
    rows->push_back({name, spec.contains("parentName") ? Field(spec, "parentName") : Field(spec, "parent")});
    if (wide) {
      std::vector<std::string> quota;
      for (const json& rg : Member(spec, "resourceGroups")) {
        for (const json& fl : Member(rg, "flavors")) {
          for (const json& r : Member(fl, "resources")) {
            quota.push_back(absl::StrCat(Field(r, "name"), "@", Field(fl, "name"), " ", HumanQuantity(Field(r, "nominalQuota"))));
          }
        }
      }
      rows->back().push_back(absl::StrJoin(quota, ", "));
    }
  } else if (kind == "gpunodepools") {
    header({"NAME", "FLAVOR", "GPU", "GPUS/NODE", "NODES", "MIG"}, {});
    std::string mig = Field(spec, "migStrategy");
    if (spec.contains("migProfiles")) {
      std::vector<std::string> profiles;
      for (const json& p : spec["migProfiles"]) profiles.push_back(p.is_string() ? p.get<std::string>() : p.dump());
      absl::StrAppend(&mig, " [", absl::StrJoin(profiles, ","), "]");
    }
    rows->push_back({name, Field(spec, "flavor"), Field(spec, "gpu"), Field(spec, "gpusPerNode"), Field(spec, "nodes"), mig});
  } else {  // workloadpriorityclasses, priorityclasses
    if (kind == "priorityclasses") {
      header({"NAME", "VALUE"}, {"PREEMPTIONPOLICY", "DESCRIPTION"});
    } else {
      header({"NAME", "VALUE"}, {"DESCRIPTION"});
    }
    rows->push_back({name, Field(obj, "value")});
    if (wide) {
      if (kind == "priorityclasses") rows->back().push_back(Field(obj, "preemptionPolicy"));
      rows->back().push_back(Field(obj, "description"));
    }
  }
}

// Quota objects in Kueue's form, from the Kubernetes-style paths.
int GetPolicyObjects(ApiClient& client, const GetOptions& o) {
  const std::optional<std::string> path = QuotaPath(o.kind, o.ns, "");
  std::optional<json> j = Fetch(client, *path);
  if (!j.has_value()) return 1;
  json items = json::array();
  std::set<std::string> seen;
  for (const json& obj : (*j)["items"]) {
    const std::string name = Field(obj.value("metadata", json::object()), "name");
    if (!GetWanted(o, name)) continue;
    seen.insert(name);
    items.push_back(obj);
  }
  if (int missing = GetMissing(o, seen)) return missing;
  json list = *j;
  list["items"] = items;
  if (PrintStructured(list, o.client.output)) return 0;
  if (o.client.output == "name") {
    std::string singular = o.kind.substr(0, o.kind.size() - (absl::EndsWith(o.kind, "sses") ? 2 : 1));
    for (const json& obj : items) {
      std::printf("%s/%s\n", singular.c_str(), Field(obj.value("metadata", json::object()), "name").c_str());
    }
    return 0;
  }
  // LocalQueues in wide form count their workloads.
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> counts;
  if (o.kind == "localqueues" && o.client.output == "wide") {
    std::optional<json> w =
        Fetch(client, o.ns.empty() ? "/v1/workloads" : "/v1/workloads?namespace=" + httpc::QueryEscape(o.ns));
    if (!w.has_value()) return 1;
    for (const json& x : (*w)["items"]) {
      auto& c = counts[{Field(x, "namespace"), Field(x, "localQueue")}];
      (Field(x, "state") == "pending" ? c.first : c.second)++;
    }
  }
  TableRows rows;
  for (const json& obj : items) GetPolicyRow(o, obj, counts, &rows);
  if (rows.empty()) {
    std::printf("No %s found.\n", o.kind.c_str());
    return 0;
  }
  PrintTable(rows);
  return 0;
}

constexpr char kGetKindsText[] =
    "clusterqueues (cq), workloads (wl), localqueues (lq), resourceflavors (flavors, rf), cohorts,\n"
    "      workloadpriorityclasses (wpc), priorityclasses (pc) or gpunodepools (pools)";
constexpr char kGetKindsLine[] =
    "clusterqueues, workloads, localqueues, resourceflavors, cohorts, workloadpriorityclasses, priorityclasses or "
    "gpunodepools";

}  // namespace

std::optional<std::string> ResourceKind(const std::string& word) {
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
  auto it = kKinds.find(absl::AsciiStrToLower(word));
  if (it == kKinds.end()) return std::nullopt;
  return it->second;
}

int RunGet(const std::vector<std::string>& args) {
  GetOptions o;
  bool all_namespaces = false;
  FlagSet flags("get", "Lists objects from the gangkeeper API, as kubectl get does.");
  flags.Synopsis("gangkeeper get KIND [NAME...] [-n NAMESPACE | -A] [-o table|wide|json|yaml|name] [flags]\n"
                 "       gangkeeper get KIND/NAME\n\n"
                 "KIND: " + std::string(kGetKindsText));
  AddClientFlags(flags, &o.client, "output format: table, wide (more columns), json, yaml or name");
  flags.String("n,namespace", &o.ns, "only this namespace (workloads, localqueues); without it, every namespace");
  flags.Bool("A,all-namespaces", &all_namespaces, "every namespace (the default; for kubectl's habit)");
  flags.String("cluster-queue", &o.cluster_queue, "only workloads of this ClusterQueue");
  flags.String("state", &o.state, "workloads in this state: pending, admitted, finished or all");
  flags.Examples(
      "  gangkeeper get clusterqueues                 quota and usage, one row per resource and flavor\n"
      "  gangkeeper get cq -o wide                    with what each queue borrows and lends\n"
      "  gangkeeper get workloads -n team-a --state pending\n"
      "  gangkeeper get workloads -A -o name\n"
      "  gangkeeper get localqueue/gpu-queue -n team-a -o yaml");
  std::vector<std::string> what;
  if (std::optional<int> done = flags.ParseOrExit(args, &what)) return *done;
  static const std::set<std::string> kOutputs = {"table", "wide", "json", "yaml", "name"};
  if (kOutputs.count(o.client.output) == 0) {
    return Complain(2, absl::StrCat("get: -o ", o.client.output, ": use table, wide, json, yaml or name"));
  }
  if (all_namespaces && !o.ns.empty()) return Complain(2, "get: give -n NAMESPACE or -A, not both");
  if (what.empty()) return Complain(2, absl::StrCat("get: which kind? ", kGetKindsLine, "; see gangkeeper get --help"));
  std::string word = what[0];
  if (const size_t slash = word.find('/'); slash != std::string::npos) {
    what.push_back(word.substr(slash + 1));
    word = word.substr(0, slash);
  }
  std::optional<std::string> kind = ResourceKind(word);
  if (!kind.has_value()) return Complain(2, absl::StrCat("get ", word, ": use ", kGetKindsLine));
  o.kind = *kind;
  o.names.insert(what.begin() + 1, what.end());
  std::unique_ptr<ApiClient> client = Connect(o.client);
  if (client == nullptr) return 2;
  if (o.kind == "clusterqueues") return GetClusterQueues(*client, o);
  if (o.kind == "workloads") return GetWorkloads(*client, o);
  return GetPolicyObjects(*client, o);
}

}  // namespace gangkeeper::cli
