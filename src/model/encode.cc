// gangkeeper model: policy objects to Kubernetes manifests (see encode.h).
//
// Every field is spelled the way decode.cc reads it; where the two could
// drift (version-dependent names, optional fields whose absence matters), the
// comment says what the decoder does with the output. Only non-throwing
// nlohmann operations are used (construction, operator[] on objects,
// push_back, dump with the replace handler).
#include "gangkeeper/model/encode.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "src/model/configuration_codec.h"

namespace gangkeeper::model {
namespace {

using nlohmann::json;

constexpr char kKueueV1alpha1[] = "kueue.x-k8s.io/v1alpha1";
constexpr char kEncodedV1beta1[] = "kueue.x-k8s.io/v1beta1";
constexpr char kEncodedV1beta2[] = "kueue.x-k8s.io/v1beta2";
constexpr char kSchedulingV1[] = "scheduling.k8s.io/v1";
constexpr char kCoreV1[] = "v1";

// The recorded version when DecodeManifests accepts it for the kind, else the
// default. Writing a version the decoder refuses would make the whole object
// unreadable, which is worse than normalising it.
std::string KueueVersion(const ObjectMeta& meta, bool v1alpha1_allowed) {
  if (meta.api_version == kEncodedV1beta1 || meta.api_version == kEncodedV1beta2) return meta.api_version;
  if (v1alpha1_allowed && meta.api_version == kKueueV1alpha1) return meta.api_version;
  return kEncodedV1beta1;
}

json Header(const std::string& api_version, absl::string_view kind, const ObjectMeta& meta, bool namespaced) {
  json metadata = json::object();
  metadata["name"] = meta.name;
  // Cluster-scoped kinds never carry a namespace: the decoder would warn and
  // drop it.
  if (namespaced) metadata["namespace"] = meta.namespace_name;
  if (!meta.labels.empty()) metadata["labels"] = meta.labels;
  if (!meta.resource_version.empty()) metadata["resourceVersion"] = meta.resource_version;
  json out = json::object();
  out["apiVersion"] = api_version;
  out["kind"] = std::string(kind);
  out["metadata"] = std::move(metadata);
  return out;
}

std::string QuantityText(const quantity::Quantity& q) { return q.Format(); }

// Kueue writes weights as quantities ("1", "500m"). The decoder turns a
// quantity string into milli / 1000.0, so that form is used only when it
// gives back the same double; any other weight (1/3, 1e-9) is a JSON number,
// which nlohmann prints with enough digits to parse back exactly. Beyond 1e15
// the milli-units would approach the int64 range, and such weights are whole
// numbers that print exactly as JSON numbers anyway.
json WeightValue(double weight) {
  if (std::isfinite(weight) && std::fabs(weight) <= 1e15) {
    const double milli = std::round(weight * 1000.0);
    if (static_cast<double>(static_cast<int64_t>(milli)) / 1000.0 == weight) {
      return quantity::Quantity::FromMilli(static_cast<int64_t>(milli)).Format();
    }
  }
  // Non-finite weights (which the decoder never produces) print as null and
  // read back as the default, 1.
  return weight;
}

json FairSharing(double weight) {
  json fs = json::object();
  fs["weight"] = WeightValue(weight);
  return fs;
}

const char* WithinClusterQueueName(WithinClusterQueuePolicy p) {
  switch (p) {
    case WithinClusterQueuePolicy::kLowerPriority: return "LowerPriority";
    case WithinClusterQueuePolicy::kLowerOrNewerEqualPriority: return "LowerOrNewerEqualPriority";
    case WithinClusterQueuePolicy::kNever: break;
  }
  return "Never";
}

const char* ReclaimWithinCohortName(ReclaimWithinCohortPolicy p) {
  switch (p) {
    case ReclaimWithinCohortPolicy::kLowerPriority: return "LowerPriority";
    case ReclaimWithinCohortPolicy::kAny: return "Any";
    case ReclaimWithinCohortPolicy::kNever: break;
  }
  return "Never";
}

const char* BorrowWithinCohortName(BorrowWithinCohortPolicy p) {
  return p == BorrowWithinCohortPolicy::kLowerPriority ? "LowerPriority" : "Never";
}

// MayStopSearch, not v1beta1's deprecated Borrow/Preempt: v1beta2 refuses the
// old names, and current v1beta1 defaults to MayStopSearch.
const char* FungibilityName(FungibilityPolicy p) {
  return p == FungibilityPolicy::kTryNextFlavor ? "TryNextFlavor" : "MayStopSearch";
}

const char* SelectorOperatorName(LabelSelectorRequirement::Operator op) {
  switch (op) {
    case LabelSelectorRequirement::Operator::kNotIn: return "NotIn";
    case LabelSelectorRequirement::Operator::kExists: return "Exists";
    case LabelSelectorRequirement::Operator::kDoesNotExist: return "DoesNotExist";
    case LabelSelectorRequirement::Operator::kIn: break;
  }
  return "In";
}

json Selector(const LabelSelector& selector) {
  json out = json::object();
  if (!selector.match_labels.empty()) out["matchLabels"] = selector.match_labels;
  if (!selector.match_expressions.empty()) {
    json exprs = json::array();
    for (const LabelSelectorRequirement& r : selector.match_expressions) {
      json e = json::object();
      e["key"] = r.key;
      e["operator"] = SelectorOperatorName(r.op);
      if (!r.values.empty()) e["values"] = r.values;
      exprs.push_back(std::move(e));
    }
    out["matchExpressions"] = std::move(exprs);
  }
  return out;
}

json ResourceGroups(const std::vector<ResourceGroup>& groups) {
  json out = json::array();
  for (const ResourceGroup& g : groups) {
    json group = json::object();
    // Always written, even when empty: without the field the decoder would
    // fill it in from the first flavor's resources.
    group["coveredResources"] = g.covered_resources;
    json flavors = json::array();
    for (const FlavorQuotas& f : g.flavors) {
      json flavor = json::object();
      flavor["name"] = f.name;
      json resources = json::array();  // required by the decoder even when empty
      for (const ResourceQuota& q : f.resources) {
        json r = json::object();
        r["name"] = q.name;
        r["nominalQuota"] = QuantityText(q.nominal);
        // Absent means unlimited; "0" is a real limit of nothing.
        if (q.borrowing_limit.has_value()) r["borrowingLimit"] = QuantityText(*q.borrowing_limit);
        if (q.lending_limit.has_value()) r["lendingLimit"] = QuantityText(*q.lending_limit);
        resources.push_back(std::move(r));
      }
      flavor["resources"] = std::move(resources);
      flavors.push_back(std::move(flavor));
    }
    group["flavors"] = std::move(flavors);
    out.push_back(std::move(group));
  }
  return out;
}

template <typename Map>
void AppendAll(const Map& objects, json* items) {
  for (const auto& [key, object] : objects) items->push_back(EncodeObject(object));
}

// The ClusterQueues, a stand-in's inactive_reason as the annotation
// kInactiveReasonAnnotation (the decoder reads it back): the record of the
// policies, and so their digest, says which queues are refused and why.
void AppendClusterQueues(const std::map<std::string, ClusterQueue>& queues, json* items) {
  for (const auto& [key, cq] : queues) {
    json item = EncodeObject(cq);
    if (!cq.inactive_reason.empty()) {
      json annotations = json::object();
      annotations[std::string(kInactiveReasonAnnotation)] = cq.inactive_reason;
      item["metadata"]["annotations"] = std::move(annotations);
    }
    items->push_back(std::move(item));
  }
}

}  // namespace

json EncodeObject(const ResourceFlavor& flavor) {
  json out = Header(KueueVersion(flavor.meta, false), "ResourceFlavor", flavor.meta, false);
  json spec = json::object();
  if (!flavor.node_labels.empty()) spec["nodeLabels"] = flavor.node_labels;
  if (!flavor.node_taints.empty()) {
    json taints = json::array();
    for (const Taint& t : flavor.node_taints) {
      json taint = json::object();
      taint["key"] = t.key;
      if (!t.value.empty()) taint["value"] = t.value;
      taint["effect"] = t.effect;
      taints.push_back(std::move(taint));
    }
    spec["nodeTaints"] = std::move(taints);
  }
  if (!flavor.tolerations.empty()) {
    json tolerations = json::array();
    for (const Toleration& t : flavor.tolerations) {
      json tol = json::object();
      if (!t.key.empty()) tol["key"] = t.key;
      if (!t.op.empty()) tol["operator"] = t.op;
      if (!t.value.empty()) tol["value"] = t.value;
      if (!t.effect.empty()) tol["effect"] = t.effect;
      if (t.toleration_seconds.has_value()) tol["tolerationSeconds"] = *t.toleration_seconds;
      tolerations.push_back(std::move(tol));
    }
    spec["tolerations"] = std::move(tolerations);
  }
  if (!flavor.topology_name.empty()) spec["topologyName"] = flavor.topology_name;
  out["spec"] = std::move(spec);
  return out;
}

json EncodeObject(const ClusterQueue& cq) {
  const std::string version = KueueVersion(cq.meta, false);
  json out = Header(version, "ClusterQueue", cq.meta, false);
  json spec = json::object();
  if (!cq.cohort.empty()) spec[version == kEncodedV1beta2 ? "cohortName" : "cohort"] = cq.cohort;
  // Kueue: a nil selector matches no namespace, `{}` matches all. The decoder
  // keeps the difference only through the field's presence.
  if (cq.namespace_selector.has_value()) spec["namespaceSelector"] = Selector(*cq.namespace_selector);
  spec["queueingStrategy"] = QueueingStrategyName(cq.queueing_strategy);
  if (!cq.resource_groups.empty()) spec["resourceGroups"] = ResourceGroups(cq.resource_groups);

  json fungibility = json::object();
  fungibility["whenCanBorrow"] = FungibilityName(cq.flavor_fungibility.when_can_borrow);
  fungibility["whenCanPreempt"] = FungibilityName(cq.flavor_fungibility.when_can_preempt);
  switch (cq.flavor_fungibility.preference) {
    case FungibilityPreference::kBorrowingOverPreemption:
      fungibility["preference"] = "BorrowingOverPreemption";
      break;
    case FungibilityPreference::kPreemptionOverBorrowing:
      fungibility["preference"] = "PreemptionOverBorrowing";
      break;
    case FungibilityPreference::kUnset:
      break;
  }
  spec["flavorFungibility"] = std::move(fungibility);

  json preemption = json::object();
  preemption["withinClusterQueue"] = WithinClusterQueueName(cq.preemption.within_cluster_queue);
  preemption["reclaimWithinCohort"] = ReclaimWithinCohortName(cq.preemption.reclaim_within_cohort);
  json borrow = json::object();
  borrow["policy"] = BorrowWithinCohortName(cq.preemption.borrow_within_cohort);
  if (cq.preemption.borrow_max_priority_threshold.has_value()) {
    borrow["maxPriorityThreshold"] = *cq.preemption.borrow_max_priority_threshold;
  }
  preemption["borrowWithinCohort"] = std::move(borrow);
  spec["preemption"] = std::move(preemption);

  spec["fairSharing"] = FairSharing(cq.fair_sharing_weight);
  spec["stopPolicy"] = StopPolicyName(cq.stop_policy);
  out["spec"] = std::move(spec);
  return out;
}

json EncodeObject(const LocalQueue& lq) {
  json out = Header(KueueVersion(lq.meta, false), "LocalQueue", lq.meta, true);
  json spec = json::object();
  spec["clusterQueue"] = lq.cluster_queue;
  spec["stopPolicy"] = StopPolicyName(lq.stop_policy);
  out["spec"] = std::move(spec);
  return out;
}

json EncodeObject(const Cohort& cohort) {
  const std::string version = KueueVersion(cohort.meta, true);
  json out = Header(version, "Cohort", cohort.meta, false);
  json spec = json::object();
  if (!cohort.parent.empty()) spec[version == kKueueV1alpha1 ? "parent" : "parentName"] = cohort.parent;
  if (!cohort.resource_groups.empty()) spec["resourceGroups"] = ResourceGroups(cohort.resource_groups);
  spec["fairSharing"] = FairSharing(cohort.fair_sharing_weight);
  out["spec"] = std::move(spec);
  return out;
}

json EncodeObject(const WorkloadPriorityClass& wpc) {
  json out = Header(KueueVersion(wpc.meta, false), "WorkloadPriorityClass", wpc.meta, false);
  out["value"] = wpc.value;
  if (!wpc.description.empty()) out["description"] = wpc.description;
  return out;
}

json EncodeObject(const PriorityClass& pc) {
  // The decoder takes any scheduling.k8s.io version (v1beta1, v1alpha1 exist).
  const std::string version =
      absl::StartsWith(pc.meta.api_version, "scheduling.k8s.io/") ? pc.meta.api_version : kSchedulingV1;
  json out = Header(version, "PriorityClass", pc.meta, false);
  out["value"] = pc.value;
  out["preemptionPolicy"] = pc.preemption_policy == PreemptionPolicy::kNever ? "Never" : "PreemptLowerPriority";
  out["globalDefault"] = pc.global_default;
  if (!pc.description.empty()) out["description"] = pc.description;
  return out;
}

json EncodeObject(const Namespace& ns) { return Header(kCoreV1, "Namespace", ns.meta, false); }

json EncodeObject(const GpuNodePool& pool) {
  json metadata = json::object();
  metadata["name"] = pool.name;
  if (!pool.resource_version.empty()) metadata["resourceVersion"] = pool.resource_version;
  json spec = json::object();
  spec["flavor"] = pool.flavor;
  spec["gpu"] = GpuModelName(pool.gpu);
  spec["gpusPerNode"] = pool.gpus_per_node;
  spec["nodes"] = pool.nodes;
  spec["migStrategy"] = MigStrategyName(pool.mig_strategy);
  if (!pool.mig_profiles.empty()) spec["migProfiles"] = pool.mig_profiles;
  json out = json::object();
  out["apiVersion"] = std::string(kGpuNodePoolApiVersion);
  out["kind"] = std::string(kGpuNodePoolKind);
  out["metadata"] = std::move(metadata);
  out["spec"] = std::move(spec);
  return out;
}

std::string EncodeManifests(const PolicySet& policies) {
  json items = json::array();
  // Referenced kinds before the kinds that reference them, so a reader that
  // applies the items in order never sees a dangling name.
  AppendAll(policies.namespaces, &items);
  AppendAll(policies.priority_classes, &items);
  AppendAll(policies.workload_priority_classes, &items);
  AppendAll(policies.flavors, &items);
  AppendAll(policies.gpu_node_pools, &items);
  AppendAll(policies.cohorts, &items);
  AppendClusterQueues(policies.cluster_queues, &items);
  AppendAll(policies.local_queues, &items);
  if (policies.configuration.present) items.push_back(EncodeConfiguration(policies.configuration));
  json list = json::object();
  list["apiVersion"] = kCoreV1;
  list["kind"] = "List";
  list["items"] = std::move(items);
  return list.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gangkeeper::model
