// gangkeeper: what a principal may read (see scope.h).
#include "src/api/scope.h"

#include <vector>

namespace gangkeeper::api {
namespace {

void AddFlavors(const std::vector<model::ResourceGroup>& groups, std::set<std::string>* flavors) {
  for (const model::ResourceGroup& g : groups) {
    for (const model::FlavorQuotas& f : g.flavors) flavors->insert(f.name);
  }
}

}  // namespace

ReadScope::ReadScope(const Principal& who, const model::PolicySet& p) : who_(who) {
  if (!who.MayReadQuota()) return;
  if (who.role != Role::kTeamAdmin) {
    all_ = true;
    return;
  }
  for (const auto& [key, lq] : p.local_queues) {
    const std::string& ns = key.first;
    if (!who.MayRead(ns)) continue;
    // Only a ClusterQueue that takes this namespace's workloads: pointing a
    // LocalQueue (which a team-admin may write) at another team's queue
    // shows nothing of it.
    auto cq = p.cluster_queues.find(lq.cluster_queue);
    if (cq == p.cluster_queues.end() || !cq->second.namespace_selector.has_value() ||
        !cq->second.namespace_selector->Matches(p.NamespaceLabels(ns))) {
      continue;
    }
    cluster_queues_.insert(cq->first);
  }
  for (const std::string& name : cluster_queues_) {
    const model::ClusterQueue& cq = p.cluster_queues.at(name);
    AddFlavors(cq.resource_groups, &flavors_);
    // The cohort tree above it; the set stops a (refused, but cheap to
    // guard) parent cycle.
    for (std::string cohort = cq.cohort; !cohort.empty() && cohorts_.insert(cohort).second;) {
      auto c = p.cohorts.find(cohort);
      if (c == p.cohorts.end()) break;  // implicit cohort: a name only
      AddFlavors(c->second.resource_groups, &flavors_);
      cohort = c->second.parent;
    }
  }
  for (const auto& [name, pool] : p.gpu_node_pools) {
    if (flavors_.count(pool.flavor) != 0) gpu_node_pools_.insert(name);
  }
}

bool ReadScope::Object(const std::string& kind, const std::string& namespace_name, const std::string& name) const {
  if (!ReadsQuota()) return false;
  if (all_) return true;
  if (kind == "LocalQueue") return Namespace(namespace_name);
  if (kind == "ClusterQueue") return cluster_queues_.count(name) != 0;
  if (kind == "Cohort") return cohorts_.count(name) != 0;
  if (kind == "ResourceFlavor") return flavors_.count(name) != 0;
  if (kind == "GPUNodePool") return gpu_node_pools_.count(name) != 0;
  // The priority names any job may carry.
  return kind == "WorkloadPriorityClass" || kind == "PriorityClass";
}

}  // namespace gangkeeper::api
