// gangkeeper: Kueue's objects from the cluster laid over the policy files
// (see policy_store.h: DecodeClusterObject, KueueObjectsOf,
// SetKueueObjects, WithClusterObjects).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/model/validate.h"

namespace gangkeeper::model {
namespace {

using Severity = Diagnostic::Severity;

// A ClusterQueue that takes part in nothing: no quota, no cohort, refused
// for scheduling with `reason`.
ClusterQueue Stub(ObjectMeta meta, std::string reason) {
  ClusterQueue cq;
  cq.meta = std::move(meta);
  cq.namespace_selector = LabelSelector{};
  cq.inactive_reason = std::move(reason);
  return cq;
}

std::string Reason(const Diagnostic& d) {
  return d.path.empty() ? d.message : absl::StrCat(d.path, ": ", d.message);
}

// Applies one error of ValidatePolicySet: true when it changed `set`.
bool Quarantine(const Diagnostic& d, PolicySet* set) {
  const size_t space = d.object.find(' ');
  if (space == std::string::npos) return false;
  const std::string kind = d.object.substr(0, space);
  const std::string name = d.object.substr(space + 1);
  if (kind == "ClusterQueue") {
    auto it = set->cluster_queues.find(name);
    if (it == set->cluster_queues.end() || !it->second.inactive_reason.empty()) return false;
    it->second = Stub(it->second.meta, Reason(d));
    return true;
  }
  if (kind == "LocalQueue") {
    const size_t slash = name.find('/');
    if (slash == std::string::npos) return false;
    return set->local_queues.erase({name.substr(0, slash), name.substr(slash + 1)}) > 0;
  }
  if (kind == "Cohort") return set->cohorts.erase(name) > 0;
  if (kind == "ResourceFlavor") return set->flavors.erase(name) > 0;
  if (kind == "WorkloadPriorityClass") return set->workload_priority_classes.erase(name) > 0;
  if (kind == "GPUNodePool") {
    set->gpu_node_pool_sources.erase(name);
    return set->gpu_node_pools.erase(name) > 0;
  }
  return false;
}

}  // namespace

bool DecodeClusterObject(absl::string_view json, absl::string_view source, absl::string_view kind,
                         absl::string_view name, ClusterKueueObjects* cluster, Diagnostics* problems) {
  PolicySet one;
  Diagnostics found;
  DecodeManifests(json, source, &one, &found);
  const bool ok = !found.HasErrors() &&
                  one.flavors.size() + one.cluster_queues.size() + one.local_queues.size() + one.cohorts.size() +
                          one.workload_priority_classes.size() ==
                      1;
  if (problems != nullptr) {
    for (const Diagnostic& d : found.items) problems->items.push_back(d);
  }
  PolicySet& into = cluster->objects;
  if (!ok) {
    if (kind == "ClusterQueue" && !name.empty()) {
      std::string reason = "its object could not be read";
      for (const Diagnostic& d : found.items) {
        if (d.severity == Severity::kError) {
          reason = absl::StrCat("its object is invalid: ", Reason(d));
          break;
        }
      }
      ObjectMeta meta;
      meta.name = std::string(name);
      meta.source.file = std::string(source);
      const std::string key = meta.name;
      into.cluster_queues[key] = Stub(std::move(meta), std::move(reason));
    }
    return false;
  }
  for (auto& [k, v] : one.flavors) into.flavors[k] = std::move(v);
  for (auto& [k, v] : one.cluster_queues) {
    // Only validation marks a cluster object inactive, never an annotation
    // someone put on it.
    v.inactive_reason.clear();
    into.cluster_queues[k] = std::move(v);
  }
  for (auto& [k, v] : one.local_queues) into.local_queues[k] = std::move(v);
  for (auto& [k, v] : one.cohorts) into.cohorts[k] = std::move(v);
  for (auto& [k, v] : one.workload_priority_classes) into.workload_priority_classes[k] = std::move(v);
  return true;
}

ClusterKueueObjects KueueObjectsOf(const PolicySet& set) {
  ClusterKueueObjects out;
  out.objects.flavors = set.flavors;
  out.objects.cluster_queues = set.cluster_queues;
  out.objects.local_queues = set.local_queues;
  out.objects.cohorts = set.cohorts;
  out.objects.workload_priority_classes = set.workload_priority_classes;
  return out;
}

void SetKueueObjects(const ClusterKueueObjects& cluster, PolicySet* set) {
  set->flavors = cluster.objects.flavors;
  set->cluster_queues = cluster.objects.cluster_queues;
  set->local_queues = cluster.objects.local_queues;
  set->cohorts = cluster.objects.cohorts;
  set->workload_priority_classes = cluster.objects.workload_priority_classes;
}

PolicySet WithClusterObjects(const PolicySet& files, const ClusterKueueObjects& cluster, Diagnostics* problems) {
  PolicySet out = files;
  out.sealed = SealedDigest();
  SetKueueObjects(cluster, &out);
  // Each round refuses at least one more object (bounded by their number);
  // refusing one can only surface errors in objects that named it.
  const size_t bound = out.flavors.size() + out.cluster_queues.size() + out.local_queues.size() +
                       out.cohorts.size() + out.workload_priority_classes.size() + out.gpu_node_pools.size() + 1;
  for (size_t round = 0; round < bound; ++round) {
    Diagnostics found;
    ValidatePolicySet(out, &found);
    if (!found.HasErrors()) break;
    bool changed = false;
    for (const Diagnostic& d : found.items) {
      if (d.severity != Severity::kError) continue;
      if (Quarantine(d, &out)) {
        changed = true;
        if (problems != nullptr) problems->items.push_back(d);
      }
    }
    if (!changed) break;
  }
  return out;
}

}  // namespace gangkeeper::model
