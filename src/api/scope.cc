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

ReadScope::ReadScope(const Principal& who, const model::PolicySet& p) : who_(who), policies_(p) {
  all_ = who.authorizer == nullptr && who.MayReadQuota() && who.role != Role::kTeamAdmin;
}

void ReadScope::Derive() const {
  if (derived_) return;
  derived_ = true;
  const model::PolicySet& p = policies_;
  std::set<std::string> namespaces_read, namespaces_denied;
  for (const auto& [key, lq] : p.local_queues) {
    const std::string& ns = key.first;
    if (namespaces_denied.count(ns) != 0) continue;
    if (namespaces_read.count(ns) == 0) {
      if (!who_.MayReadLocalQueues(ns)) {
        namespaces_denied.insert(ns);
        continue;
      }
      namespaces_read.insert(ns);
    }
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
  any_namespace_ = !namespaces_read.empty();
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

bool ReadScope::ClusterQueue(const std::string& name) const {
  if (!ReadsQuota()) return false;
  if (all_ || KindWhole("ClusterQueue")) return true;
  Derive();
  return cluster_queues_.count(name) != 0;
}

bool ReadScope::Object(const std::string& kind, const std::string& namespace_name, const std::string& name) const {
  if (!ReadsQuota()) return false;
  if (all_ || KindWhole(kind)) return true;
  if (kind == "LocalQueue") return Namespace(namespace_name);
  Derive();
  if (kind == "ClusterQueue") return cluster_queues_.count(name) != 0;
  if (kind == "Cohort") return cohorts_.count(name) != 0;
  if (kind == "ResourceFlavor") return flavors_.count(name) != 0;
  if (kind == "GPUNodePool") return gpu_node_pools_.count(name) != 0;
  // The priority names any job may carry (a Kubernetes identity: one that
  // reads some namespace's LocalQueues).
  if (kind == "WorkloadPriorityClass" || kind == "PriorityClass") {
    return who_.authorizer == nullptr || any_namespace_;
  }
  return false;
}

}  // namespace gangkeeper::api
