// gangkeeper: policy overlays (see overlay.h).
#include "gangkeeper/model/overlay.h"

#include "absl/strings/str_cat.h"

namespace gangkeeper::model {
namespace {

template <typename Map, typename IdOf>
void Apply(Map& base, const Map& put, const std::set<std::string>& deleted, IdOf id_of) {
  for (auto it = base.begin(); it != base.end();) {
    if (deleted.count(id_of(it->second)) != 0) {
      it = base.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, object] : put) base.insert_or_assign(key, object);
}

}  // namespace

std::string ObjectId(absl::string_view kind, absl::string_view namespace_name, absl::string_view name) {
  return absl::StrCat(kind, "/", namespace_name, "/", name);
}

PolicySet ApplyOverlay(const PolicySet& base, const PolicyOverlay& overlay) {
  PolicySet out = base;
  const std::set<std::string>& d = overlay.deleted;
  Apply(out.flavors, overlay.put.flavors, d, [](const ResourceFlavor& o) { return ObjectId("ResourceFlavor", "", o.meta.name); });
  Apply(out.cluster_queues, overlay.put.cluster_queues, d,
        [](const ClusterQueue& o) { return ObjectId("ClusterQueue", "", o.meta.name); });
  Apply(out.local_queues, overlay.put.local_queues, d,
        [](const LocalQueue& o) { return ObjectId("LocalQueue", o.meta.namespace_name, o.meta.name); });
  Apply(out.cohorts, overlay.put.cohorts, d, [](const Cohort& o) { return ObjectId("Cohort", "", o.meta.name); });
  Apply(out.workload_priority_classes, overlay.put.workload_priority_classes, d,
        [](const WorkloadPriorityClass& o) { return ObjectId("WorkloadPriorityClass", "", o.meta.name); });
  Apply(out.priority_classes, overlay.put.priority_classes, d,
        [](const PriorityClass& o) { return ObjectId("PriorityClass", "", o.meta.name); });
  Apply(out.gpu_node_pools, overlay.put.gpu_node_pools, d,
        [](const GpuNodePool& o) { return ObjectId("GPUNodePool", "", o.name); });
  Apply(out.namespaces, overlay.put.namespaces, d,
        [](const Namespace& o) { return ObjectId("Namespace", "", o.meta.name); });
  return out;
}

}  // namespace gangkeeper::model
