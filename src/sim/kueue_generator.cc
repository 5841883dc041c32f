// gangkeeper sim: Kueue's scheduler-performance generator configuration
// (trace.h, format 3; KUEUE-SEMANTICS.md §7.1). The configuration becomes
// Kueue manifests that go through the model's own decoding and validation,
// and a list of timed workloads.
#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/status_macros.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/validate.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/sim/trace.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::sim {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxClusterQueues = 100'000;
constexpr int64_t kMaxWorkloads = 10'000'000;
constexpr size_t kMaxErrors = 20;
constexpr char kDefaultFlavor[] = "rf";

// Walks the YAML with paths and line numbers, collecting problems.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  void Error(const YAML::Node& node, const std::string& path, const std::string& message) {
    if (errors_.size() >= kMaxErrors) return;
    const int line = node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    errors_.push_back(line > 0 ? absl::StrCat(file_, ":", line, ": ", path, ": ", message)
                               : absl::StrCat(file_, ": ", path, ": ", message));
  }
  bool ok() const { return errors_.empty(); }
  absl::Status ToStatus() const {
    return errors_.empty() ? absl::OkStatus() : absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }
  int Line(const YAML::Node& node) const { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }
  const std::string& file() const { return file_; }

  // Reports keys of a map that are not in `known`; `unsupported` keys get
  // `why` instead. False when `node` is not a map.
  bool CheckMap(const YAML::Node& node, const std::string& path, const std::set<std::string>& known,
                const std::set<std::string>& unsupported = {}, const std::string& why = "") {
    if (!node.IsMap()) {
      Error(node, path, "must be a mapping");
      return false;
    }
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (unsupported.count(key) != 0) {
        Error(kv.first, Child(path, key), why);
      } else if (known.count(key) == 0) {
        Error(kv.first, Child(path, key), absl::StrCat("unknown key; known: ", absl::StrJoin(known, ", ")));
      }
    }
    return true;
  }

  static std::string Child(const std::string& path, const std::string& key) {
    return path.empty() ? key : absl::StrCat(path, ".", key);
  }

  // A required (or optional, with `fallback`) whole number in [min, max].
  int64_t Int(const YAML::Node& map, const std::string& path, const std::string& key, int64_t min, int64_t max,
              std::optional<int64_t> fallback = std::nullopt) {
    const YAML::Node v = map[key];
    if (!v.IsDefined() || v.IsNull()) {
      if (fallback.has_value()) return *fallback;
      Error(map, Child(path, key), "required");
      return min;
    }
    int64_t out = 0;
    if (!v.IsScalar() || !absl::SimpleAtoi(v.Scalar(), &out) || out < min || out > max) {
      Error(v, Child(path, key),
            absl::StrCat("\"", v.IsScalar() ? v.Scalar() : "?", "\" must be a whole number from ", min, " to ", max));
      return min;
    }
    return out;
  }

  std::string String(const YAML::Node& map, const std::string& path, const std::string& key, bool required,
                     const std::string& fallback = "") {
    const YAML::Node v = map[key];
    if (!v.IsDefined() || v.IsNull()) {
      if (required) Error(map, Child(path, key), "required");
      return fallback;
    }
    if (!v.IsScalar() || v.Scalar().empty()) {
      Error(v, Child(path, key), "must be a non-empty string");
      return fallback;
    }
    return v.Scalar();
  }

  // A quantity (kept as written after checking it parses), or "" when
  // absent and optional.
  std::string Quantity(const YAML::Node& map, const std::string& path, const std::string& key, bool required) {
    std::string text = String(map, path, key, required);
    if (text.empty()) return text;
    absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(text);
    if (!q.ok() || q->IsNegative()) {
      Error(map[key], Child(path, key),
            absl::StrCat("\"", text, "\" is not a non-negative quantity (write 20, 500m, 1.5)"));
      return "";
    }
    return text;
  }

  std::string Policy(const YAML::Node& map, const std::string& path, const std::string& key,
                     const std::set<std::string>& allowed) {
    std::string text = String(map, path, key, false, "Never");
    if (allowed.count(text) == 0) {
      Error(map[key], Child(path, key),
            absl::StrCat("\"", text, "\" is not one of ", absl::StrJoin(allowed, ", ")));
      return "Never";
    }
    return text;
  }

  // The sequence at `key`, or an empty one (with an error when required).
  YAML::Node Seq(const YAML::Node& map, const std::string& path, const std::string& key, bool required) {
    const YAML::Node v = map[key];
    if (!v.IsDefined() || v.IsNull()) {
      if (required) Error(map, Child(path, key), "required: a list");
      return YAML::Node(YAML::NodeType::Sequence);
    }
    if (!v.IsSequence()) {
      Error(v, Child(path, key), "must be a list");
      return YAML::Node(YAML::NodeType::Sequence);
    }
    return v;
  }

 private:
  std::string file_;
  std::vector<std::string> errors_;
};

const std::set<std::string> kTasKeys = {"tasConstraint", "tasLevel", "sliceSize"};
const char kTasWhy[] =
    "topology-aware scheduling (TAS) is not simulated: gangkeeper simulate has no nodes; remove the TAS settings";

struct Template {
  std::string class_name;
  int64_t runtime_ms = 0;
  int32_t priority = 0;
  std::string request;
  int64_t pod_count = 1;
  int line = 0;
};

struct WorkloadsSet {
  int64_t count = 0;
  int64_t interval_ms = 0;
  std::vector<Template> templates;
};

struct QueuesSet {
  std::string class_name;
  int64_t count = 0;
  std::string nominal;
  std::string borrowing_limit;
  std::string reclaim_within_cohort;
  std::string within_cluster_queue;
  std::vector<WorkloadsSet> workloads_sets;
};

struct CohortSet {
  std::string class_name;
  int64_t count = 0;
  std::vector<QueuesSet> queues_sets;
};

json Meta(const std::string& name, const std::string& ns = "") {
  json m = json::object();
  m["name"] = name;
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

// What a configuration asks for, as read (ReadConfig).
struct GeneratorConfig {
  std::string flavor = kDefaultFlavor;
  std::vector<CohortSet> cohort_sets;
};

// The Read* functions below add problems to `r` and return nothing for an
// entry that is not a mapping of the known keys. yaml-cpp may throw
// YAML::Exception from them; ParseKueueGenerator catches it.

std::optional<Template> ReadTemplate(Reader& r, const YAML::Node& t, const std::string& tpath) {
  if (!r.CheckMap(t, tpath, {"className", "runtimeMs", "priority", "request", "podCount"}, kTasKeys, kTasWhy)) {
    return std::nullopt;
  }
  Template tmpl;
  tmpl.class_name = r.String(t, tpath, "className", true, "workload");
  tmpl.runtime_ms = r.Int(t, tpath, "runtimeMs", 1, 86'400'000);
  tmpl.priority = static_cast<int32_t>(r.Int(t, tpath, "priority", INT32_MIN, INT32_MAX, 0));
  tmpl.request = r.Quantity(t, tpath, "request", true);
  tmpl.pod_count = r.Int(t, tpath, "podCount", 1, 1'000'000, 1);
  tmpl.line = r.Line(t);
  return tmpl;
}

std::optional<WorkloadsSet> ReadWorkloadsSet(Reader& r, const YAML::Node& ws, const std::string& wpath) {
  if (!r.CheckMap(ws, wpath, {"count", "creationIntervalMs", "workloads"})) return std::nullopt;
  WorkloadsSet set;
  set.count = r.Int(ws, wpath, "count", 0, kMaxWorkloads);
  set.interval_ms = r.Int(ws, wpath, "creationIntervalMs", 0, 86'400'000, 0);
  const YAML::Node templates = r.Seq(ws, wpath, "workloads", true);
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    std::optional<Template> t = ReadTemplate(r, templates[ti], absl::StrCat(wpath, ".workloads[", ti, "]"));
    if (t.has_value()) set.templates.push_back(*std::move(t));
  }
  return set;
}

std::optional<QueuesSet> ReadQueuesSet(Reader& r, const YAML::Node& q, const std::string& qpath) {
  if (!r.CheckMap(q, qpath,
                  {"className", "count", "nominalQuota", "borrowingLimit", "reclaimWithinCohort",
                   "withinClusterQueue", "workloadsSets"})) {
    return std::nullopt;
  }
  QueuesSet qs;
  qs.class_name = r.String(q, qpath, "className", true, "cq");
  qs.count = r.Int(q, qpath, "count", 1, kMaxClusterQueues);
  qs.nominal = r.Quantity(q, qpath, "nominalQuota", true);
  qs.borrowing_limit = r.Quantity(q, qpath, "borrowingLimit", false);
  qs.reclaim_within_cohort = r.Policy(q, qpath, "reclaimWithinCohort", {"Never", "LowerPriority", "Any"});
  qs.within_cluster_queue =
      r.Policy(q, qpath, "withinClusterQueue", {"Never", "LowerPriority", "LowerOrNewerEqualPriority"});
  const YAML::Node wsets = r.Seq(q, qpath, "workloadsSets", false);
  for (size_t wi = 0; wi < wsets.size(); ++wi) {
    std::optional<WorkloadsSet> ws = ReadWorkloadsSet(r, wsets[wi], absl::StrCat(qpath, ".workloadsSets[", wi, "]"));
    if (ws.has_value()) qs.workloads_sets.push_back(*std::move(ws));
  }
  return qs;
}

std::optional<CohortSet> ReadCohortSet(Reader& r, const YAML::Node& c, const std::string& cpath) {
  if (!r.CheckMap(c, cpath, {"className", "count", "queuesSets"})) return std::nullopt;
  CohortSet cs;
  cs.class_name = r.String(c, cpath, "className", true, "cohort");
  cs.count = r.Int(c, cpath, "count", 1, kMaxClusterQueues);
  const YAML::Node qsets = r.Seq(c, cpath, "queuesSets", true);
  for (size_t qi = 0; qi < qsets.size(); ++qi) {
    std::optional<QueuesSet> qs = ReadQueuesSet(r, qsets[qi], absl::StrCat(cpath, ".queuesSets[", qi, "]"));
    if (qs.has_value()) cs.queues_sets.push_back(*std::move(qs));
  }
  return cs;
}

// The configuration in `root`, a mapping.
GeneratorConfig ReadConfig(Reader& r, const YAML::Node& root) {
  GeneratorConfig config;
  r.CheckMap(root, "", {"cohorts", "resourceFlavor"}, {"topology"}, kTasWhy);
  if (const YAML::Node rf = root["resourceFlavor"]; rf.IsDefined() && !rf.IsNull()) {
    if (r.CheckMap(rf, "resourceFlavor", {"name"}, {"nodeLabel", "topologyName"}, kTasWhy)) {
      config.flavor = r.String(rf, "resourceFlavor", "name", false, kDefaultFlavor);
    }
  }
  const YAML::Node cohorts = r.Seq(root, "", "cohorts", true);
  if (cohorts.size() == 0 && r.ok()) r.Error(root, "cohorts", "must list at least one cohort set");
  for (size_t ci = 0; ci < cohorts.size(); ++ci) {
    std::optional<CohortSet> cs = ReadCohortSet(r, cohorts[ci], absl::StrCat("cohorts[", ci, "]"));
    if (cs.has_value()) config.cohort_sets.push_back(*std::move(cs));
  }
  return config;
}

// The number of workloads `config` makes; InvalidArgument past the limits
// (counted in 128 bits: counts multiply).
absl::StatusOr<int64_t> CountWorkloads(const GeneratorConfig& config, absl::string_view file) {
  absl::int128 cluster_queues = 0, workloads = 0;
  for (const CohortSet& cs : config.cohort_sets) {
    for (const QueuesSet& qs : cs.queues_sets) {
      const absl::int128 queues = absl::int128(cs.count) * qs.count;
      cluster_queues += queues;
      for (const WorkloadsSet& ws : qs.workloads_sets) {
        workloads += queues * ws.count * static_cast<int64_t>(ws.templates.size());
      }
    }
  }
  if (cluster_queues > kMaxClusterQueues || workloads > kMaxWorkloads) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": the configuration makes more than ", kMaxClusterQueues,
                                                   " ClusterQueues or ", kMaxWorkloads,
                                                   " workloads: lower the counts"));
  }
  return static_cast<int64_t>(workloads);
}

// ClusterQueue `cq` of `qs` in `cohort`, its Namespace and LocalQueue (both
// named like it), as Kueue manifests.
void AddQueueManifests(const QueuesSet& qs, const std::string& cq, const std::string& cohort,
                       const std::string& flavor, json* items) {
  json resource = {{"name", "cpu"}, {"nominalQuota", qs.nominal}};
  if (!qs.borrowing_limit.empty()) resource["borrowingLimit"] = qs.borrowing_limit;
  json spec = {
      {"cohort", cohort},
      {"namespaceSelector", json::object()},
      {"resourceGroups",
       json::array({{{"coveredResources", json::array({"cpu"})},
                     {"flavors", json::array({{{"name", flavor}, {"resources", json::array({resource})}}})}}})},
      {"preemption",
       {{"reclaimWithinCohort", qs.reclaim_within_cohort}, {"withinClusterQueue", qs.within_cluster_queue}}}};
  items->push_back(
      {{"apiVersion", "kueue.x-k8s.io/v1beta1"}, {"kind", "ClusterQueue"}, {"metadata", Meta(cq)}, {"spec", spec}});
  items->push_back({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Meta(cq)}});
  items->push_back({{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                    {"kind", "LocalQueue"},
                    {"metadata", Meta(cq, cq)},
                    {"spec", {{"clusterQueue", cq}}}});
}

// The workloads of `qs` for ClusterQueue `cq`. Every workloads set starts
// at 0; its k-th creation is at k * interval.
void AddWorkloads(const QueuesSet& qs, const std::string& cq, absl::string_view file, Trace* trace) {
  for (size_t wi = 0; wi < qs.workloads_sets.size(); ++wi) {
    const WorkloadsSet& ws = qs.workloads_sets[wi];
    int64_t k = 0;
    for (int64_t s = 0; s < ws.count; ++s) {
      for (size_t ti = 0; ti < ws.templates.size(); ++ti) {
        const Template& t = ws.templates[ti];
        ++k;
        TraceWorkload w;
        w.namespace_name = cq;
        w.queue = cq;
        w.name = absl::StrCat(t.class_name, "-", wi, "-", s, "-", ti);
        w.priority = t.priority;
        w.class_name = t.class_name;
        workload::PodSet ps;
        ps.name = "main";
        ps.count = t.pod_count;
        absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(t.request);
        ps.requests["cpu"] = q.ok() ? *q : quantity::Quantity();
        ps.limits = ps.requests;
        w.pod_sets.push_back(std::move(ps));
        w.arrival_ms = k * ws.interval_ms;
        w.runtime_ms = t.runtime_ms;
        w.source = absl::StrCat(file, ":", t.line);
        trace->workloads.push_back(std::move(w));
      }
    }
  }
}

// Every ClusterQueue of `config` (with its Namespace and LocalQueue) into
// `items`, its workloads into `trace`. InvalidArgument when two sets make
// the same ClusterQueue.
absl::Status Generate(const GeneratorConfig& config, absl::string_view file, json* items, Trace* trace) {
  std::set<std::string> cq_names;
  for (const CohortSet& cs : config.cohort_sets) {
    for (int64_t c = 0; c < cs.count; ++c) {
      const std::string cohort = absl::StrCat(cs.class_name, "-", c);
      for (size_t qi = 0; qi < cs.queues_sets.size(); ++qi) {
        const QueuesSet& qs = cs.queues_sets[qi];
        for (int64_t j = 0; j < qs.count; ++j) {
          const std::string cq = absl::StrCat(qs.class_name, "-", qi, "-", j, "-", cohort);
          if (!cq_names.insert(cq).second) {
            return absl::InvalidArgumentError(absl::StrCat(
                file, ": two cohort or queue sets generate ClusterQueue ", cq, ": give them different classNames"));
          }
          AddQueueManifests(qs, cq, cohort, config.flavor, items);
          trace->cluster_queue_classes[cq] = qs.class_name;
          AddWorkloads(qs, cq, file, trace);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Trace> ParseKueueGenerator(absl::string_view text, absl::string_view file) {
  Reader r{std::string(file)};
  YAML::Node loaded;
  try {
    loaded = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":", e.mark.line + 1, ":", e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  const YAML::Node& root = loaded;
  GeneratorConfig config;
  try {
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": not a Kueue generator configuration: expected a mapping with `cohorts`"));
    }
    config = ReadConfig(r, root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (!r.ok()) return r.ToStatus();
  GK_ASSIGN_OR_RETURN(const int64_t workloads, CountWorkloads(config, file));

  // The policies, as Kueue manifests, and the workloads.
  json items = json::array();
  items.push_back(
      {{"apiVersion", "kueue.x-k8s.io/v1beta1"}, {"kind", "ResourceFlavor"}, {"metadata", Meta(config.flavor)}});
  Trace trace;
  trace.format = TraceFormat::kKueueGenerator;
  trace.file = std::string(file);
  trace.workloads.reserve(static_cast<size_t>(workloads));
  GK_RETURN_IF_ERROR(Generate(config, file, &items, &trace));
  const json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
  auto policies = std::make_shared<model::PolicySet>();
  model::Diagnostics diagnostics;
  const std::string manifests = list.dump(-1, ' ', false, json::error_handler_t::replace);
  model::DecodeManifests(manifests, absl::StrCat(file, " (generated policies)"), policies.get(), &diagnostics);
  if (!diagnostics.HasErrors()) model::ValidatePolicySet(*policies, &diagnostics);
  if (diagnostics.HasErrors()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": the generated policies are not valid: ", diagnostics.ErrorSummary()));
  }
  if (trace.workloads.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": the configuration makes no workloads"));
  }
  trace.policies = std::move(policies);
  return trace;
}

}  // namespace gangkeeper::sim
