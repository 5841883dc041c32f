// gangkeeper CLI: `gangkeeper describe clusterqueue|localqueue|workload`,
// one object for a person: its settings, its quota and usage, and for a
// workload where it queues and why it waits.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/httpc/request.h"
#include "nlohmann/json.hpp"
#include "src/cli/client.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

constexpr int kDescribeListed = 10;  // workloads listed under a queue

void DescribeLine(const char* label, const std::string& value) {
  std::printf("%-15s%s\n", absl::StrCat(label, ":").c_str(), value.c_str());
}

// Up to kDescribeListed workloads of a queue, pending ones first in line.
void DescribeWorkloadList(const json& items) {
  TableRows rows = {{"  WORKLOAD", "STATE", "POSITION", "PRIORITY"}};
  int listed = 0;
  for (const char* state : {"pending", "admitted"}) {
    for (const json& w : items) {
      if (Field(w, "state") != state || listed >= kDescribeListed) continue;
      ++listed;
      rows.push_back({absl::StrCat("  ", Field(w, "namespace"), "/", Field(w, "name")), state,
                      w.contains("position") ? Field(w["position"], "clusterQueue") : "", Field(w, "priority")});
    }
  }
  if (listed == 0) return;
  std::printf("Workloads:\n");
  PrintTable(rows);
  if (static_cast<int>(items.size()) > listed) {
    std::printf("  ... and %d more (gangkeeper get workloads)\n", static_cast<int>(items.size()) - listed);
  }
}

int DescribeClusterQueue(ApiClient& client, const ClientFlags& f, const std::string& name) {
  std::optional<json> status = Fetch(client, absl::StrCat("/v1/clusterqueues/", httpc::QueryEscape(name), "/status"));
  if (!status.has_value()) return 1;
  std::optional<json> object = Fetch(client, *QuotaPath("clusterqueue", "", name));
  if (!object.has_value()) return 1;
  if (PrintStructured({{"status", *status}, {"object", *object}}, f.output)) return 0;
  std::optional<json> workloads = Fetch(client, "/v1/workloads?clusterQueue=" + httpc::QueryEscape(name));
  if (!workloads.has_value()) return 1;
  const json spec = object->value("spec", json::object());
  DescribeLine("Name", name);
  DescribeLine("Cohort", Field(*status, "cohort").empty() ? "(none)" : Field(*status, "cohort"));
  const std::string stop = Field(spec, "stopPolicy");
  DescribeLine("Active", absl::StrCat(Field(*status, "active"), stop.empty() || stop == "None" ? "" : " (stopPolicy " + stop + ")"));
  DescribeLine("Queueing", Field(spec, "queueingStrategy"));
  DescribeLine("Workloads", absl::StrCat(Field(*status, "pending"), " pending, ", Field(*status, "admitted"), " admitted"));
  DescribeLine("Fair share", Field(*status, "weightedShare"));
  TableRows rows = {{"  RESOURCE@FLAVOR", "USAGE", "NOMINAL", "BORROWED", "LENT", "AVAILABLE", "BORROW LIMIT",
                     "LEND LIMIT"}};
  for (const json& r : Member(*status, "resources")) {
    auto q = [&](const char* key) { return r.contains(key) ? HumanQuantity(Field(r, key)) : "-"; };
    rows.push_back({absl::StrCat("  ", Field(r, "resource"), "@", Field(r, "flavor")), q("usage"), q("nominal"),
                    q("borrowed"), q("lent"), q("available"), q("borrowingLimit"), q("lendingLimit")});
  }
  std::printf("Quota:\n");
  PrintTable(rows);
  DescribeWorkloadList((*workloads)["items"]);
  return 0;
}

int DescribeLocalQueue(ApiClient& client, const ClientFlags& f, const std::string& ns, const std::string& name) {
  std::optional<json> object = Fetch(client, *QuotaPath("localqueue", ns, name));
  if (!object.has_value()) return 1;
  if (PrintStructured(*object, f.output)) return 0;
  std::optional<json> all = Fetch(client, "/v1/workloads?namespace=" + httpc::QueryEscape(ns));
  if (!all.has_value()) return 1;
  json items = json::array();
  int pending = 0;
  for (const json& w : (*all)["items"]) {
    if (Field(w, "localQueue") != name) continue;
    pending += Field(w, "state") == "pending";
    items.push_back(w);
  }
  const json spec = object->value("spec", json::object());
  DescribeLine("Name", name);
  DescribeLine("Namespace", ns);
  DescribeLine("ClusterQueue", Field(spec, "clusterQueue"));
  DescribeLine("StopPolicy", Field(spec, "stopPolicy").empty() ? "None" : Field(spec, "stopPolicy"));
  DescribeLine("Workloads", absl::StrCat(pending, " pending, ", static_cast<int>(items.size()) - pending, " admitted"));
  DescribeWorkloadList(items);
  return 0;
}

int DescribeWorkload(ApiClient& client, const ClientFlags& f, const std::vector<std::string>& parts) {
  std::string path = "/v1/workloads";
  for (const std::string& p : parts) absl::StrAppend(&path, "/", httpc::QueryEscape(p));
  std::optional<json> w = Fetch(client, path);
  if (!w.has_value()) return 1;
  if (PrintStructured(*w, f.output)) return 0;
  std::printf("Workload:      %s (%s, uid %s)\n", Field(*w, "ref").c_str(), Field(*w, "kind").c_str(), Field(*w, "uid").c_str());
  std::printf("Queue:         LocalQueue %s -> ClusterQueue %s\n", Field(*w, "localQueue").c_str(),
              Field(*w, "clusterQueue").c_str());
  std::printf("State:         %s (%s)\n", Field(*w, "state").c_str(), Field(*w, "phase").c_str());
  std::printf("Priority:      %s%s\n", Field(*w, "priority").c_str(),
              Field(*w, "priorityClass").empty() ? "" : absl::StrCat(" (", Field(*w, "priorityClass"), ")").c_str());
  std::printf("Created:       %s\n", Field(*w, "created").c_str());
  if (w->contains("position")) {
    std::printf("Position:      %s in ClusterQueue, %s in LocalQueue\n", Field((*w)["position"], "clusterQueue").c_str(),
                Field((*w)["position"], "localQueue").c_str());
  }
  if (w->contains("reason")) {
    std::printf("Waiting:       %s: %s\n", Field((*w)["reason"], "code").c_str(), Field((*w)["reason"], "message").c_str());
  }
  std::printf("Pod sets:\n");
  for (const json& ps : Member(*w, "podSets")) {
    std::vector<std::string> req;
    for (const auto& [k, v] : Member(ps, "requests").items()) {
      req.push_back(absl::StrCat(k, "=", HumanQuantity(v.is_string() ? v.get<std::string>() : v.dump())));
    }
    std::printf("  %-12s %s x {%s}\n", Field(ps, "name").c_str(), Field(ps, "count").c_str(), absl::StrJoin(req, ", ").c_str());
  }
  if (w->contains("assignment")) {
    std::printf("Admitted:      %s in ClusterQueue %s\n", Field(*w, "admitted").c_str(),
                Field((*w)["assignment"], "clusterQueue").c_str());
    for (const json& ps : Member((*w)["assignment"], "podSets")) {
      std::vector<std::string> flavors;
      for (const auto& [res, flavor] : Member(ps, "flavors").items()) {
        flavors.push_back(absl::StrCat(res, "@", flavor.is_string() ? flavor.get<std::string>() : flavor.dump()));
      }
      std::printf("  %-12s %s\n", Field(ps, "name").c_str(), absl::StrJoin(flavors, ", ").c_str());
    }
  }
  if (w->contains("actuation")) std::printf("Last action:   %s\n", Field(*w, "actuation").c_str());
  return 0;
}

// The workload's path parts: [KIND/]NS/NAME without -n (the older
// spelling), NAME or KIND/NAME with -n (kubectl's).
std::optional<std::vector<std::string>> DescribeWorkloadParts(const std::string& ns, const std::string& arg) {
  std::vector<std::string> parts = absl::StrSplit(arg, '/');
  for (const std::string& p : parts) {
    if (p.empty()) return std::nullopt;
  }
  if (!ns.empty()) {
    if (parts.size() > 2) return std::nullopt;
    parts.insert(parts.end() - 1, ns);
    return parts;
  }
  if (parts.size() == 1) parts.insert(parts.begin(), "default");
  if (parts.size() > 3) return std::nullopt;
  return parts;
}

}  // namespace

int RunDescribe(const std::vector<std::string>& args) {
  ClientFlags f;
  std::string ns;
  FlagSet flags("describe", "Shows one object for a person: its settings, quota and usage, and for a workload "
                            "where it queues and why it waits.");
  flags.Synopsis("gangkeeper describe clusterqueue|localqueue|workload NAME [-n NAMESPACE] [flags]\n"
                 "       gangkeeper describe KIND/NAME [-n NAMESPACE]\n"
                 "       gangkeeper describe workload [WORKLOAD-KIND/]NAMESPACE/NAME");
  f.output = "text";
  AddClientFlags(flags, &f, "output format: text, json or yaml");
  flags.String("n,namespace", &ns, "the namespace of a localqueue or workload (default: default)");
  flags.Examples(
      "  gangkeeper describe clusterqueue team-a-gpu\n"
      "  gangkeeper describe lq gpu-queue -n team-a\n"
      "  gangkeeper describe workload -n team-a train          why is my job waiting?\n"
      "  gangkeeper describe workload pytorchjob/team-a/train  when a Job and a PyTorchJob share the name");
  std::vector<std::string> what;
  if (std::optional<int> done = flags.ParseOrExit(args, &what)) return *done;
  if (f.output == "table") f.output = "text";
  if (f.output != "text" && f.output != "json" && f.output != "yaml") {
    return Complain(2, absl::StrCat("describe: -o ", f.output, ": use text, json or yaml"));
  }
  if (what.size() == 1 && what[0].find('/') != std::string::npos) {
    const size_t slash = what[0].find('/');
    what = {what[0].substr(0, slash), what[0].substr(slash + 1)};
  }
  const std::optional<std::string> kind = what.empty() ? std::nullopt : ResourceKind(what[0]);
  const bool known = kind == "clusterqueues" || kind == "localqueues" || kind == "workloads";
  if (what.size() != 2 || !known) {
    return Complain(2, "usage: gangkeeper describe clusterqueue|localqueue|workload NAME [-n NAMESPACE]; see "
                       "gangkeeper describe --help");
  }
  std::optional<std::vector<std::string>> parts;
  if (*kind == "workloads") {
    parts = DescribeWorkloadParts(ns, what[1]);
    if (!parts.has_value()) {
      return Complain(2, absl::StrCat("describe workload: \"", what[1],
                                      "\" is not NAME or KIND/NAME (with -n), nor [KIND/]NAMESPACE/NAME (e.g. "
                                      "job/team-a/train)"));
    }
  } else if (what[1].find('/') != std::string::npos) {
    if (*kind == "clusterqueues" || !ns.empty()) {
      return Complain(2, absl::StrCat("describe: \"", what[1], "\" is not a name"));
    }
    const size_t slash = what[1].find('/');  // NAMESPACE/NAME of a localqueue
    ns = what[1].substr(0, slash);
    what[1] = what[1].substr(slash + 1);
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  if (*kind == "clusterqueues") return DescribeClusterQueue(*client, f, what[1]);
  if (*kind == "localqueues") return DescribeLocalQueue(*client, f, ns.empty() ? "default" : ns, what[1]);
  return DescribeWorkload(*client, f, *parts);
}

}  // namespace gangkeeper::cli
