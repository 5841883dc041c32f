// gangkeeper: a workload's priority, resolved the way Kueue does.
//
// Called by ExtractWorkload once the object's labels and pod templates are
// read. Pure function of the PolicySet; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::workload {

// Workload::priority_class_source values.
inline constexpr absl::string_view kSourceWorkloadPriorityClass = "WorkloadPriorityClass";
inline constexpr absl::string_view kSourcePriorityClass = "PriorityClass";
inline constexpr absl::string_view kSourceGlobalDefault = "globalDefault";

struct ResolvedPriority {
  int32_t priority = 0;
  std::string priority_class;  // the class whose value was used; empty for 0
  std::string source;          // one of the kSource* values, or empty
  model::PreemptionPolicy preemption_policy = model::PreemptionPolicy::kPreemptLowerPriority;
};

// Resolves, in order:
//   1. `workload_class` (the kueue.x-k8s.io/priority-class label) names a
//      WorkloadPriorityClass → its value, source "WorkloadPriorityClass";
//   2. else `pod_class` (the templates' PriorityClass) names a PriorityClass
//      → its value, source "PriorityClass";
//   3. else the globalDefault PriorityClass (the lowest value if several,
//      then the first by name) → its value, source "globalDefault";
//   4. else 0 and no source.
// The preemption policy is always that of the PriorityClass the pods will
// run with: `pod_class` when named, else the globalDefault, so a
// "Never"-preempting pod class makes the workload non-preempting even when
// its queue priority comes from a WorkloadPriorityClass.
// Kubernetes' built-in system-cluster-critical and system-node-critical
// classes exist even when the policies do not list them.
// An unknown class name adds an error at `workload_class_path` /
// `pod_class_path` that lists the classes that do exist.
ResolvedPriority ResolvePriority(const model::PolicySet& policies, absl::string_view workload_class,
                                 const base::FieldPath& workload_class_path, absl::string_view pod_class,
                                 const base::FieldPath& pod_class_path, base::FieldErrors* errors);

}  // namespace gangkeeper::workload
