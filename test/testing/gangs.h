// gangkeeper tests: policies from YAML and GPU gangs, shared by the broker,
// journal and replica tests (one definition instead of a copy in each).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gangkeeper/model/manifest.h"
#include "test/testing/policies.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"
#include "gtest/gtest.h"

namespace gangkeeper::testing {

// One team on 8 A100 GPUs: ClusterQueue team-a, LocalQueue a/q.
inline constexpr char kOneTeamPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
)";

// A gang in namespace a, LocalQueue q: `pods` workers of `gpus` GPUs each.
inline workload::Workload GpuGang(const std::string& name, int64_t pods, int64_t gpus, int32_t priority = 0) {
  workload::Workload w;
  w.namespace_name = "a";
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "q";
  w.priority = priority;
  workload::PodSet ps;
  ps.name = "worker";
  ps.count = pods;
  ps.requests["nvidia.com/gpu"] = quantity::Quantity::FromUnits(gpus);
  ps.template_pointer = "/spec/template";
  w.pod_sets.push_back(ps);
  return w;
}

}  // namespace gangkeeper::testing
