// gangkeeper benchmarks: the cluster shapes and workloads the broker and
// store benchmarks share.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

using quantity::Quantity;

inline model::ResourceQuota RQ(const std::string& name, int64_t nominal, std::optional<int64_t> borrow = std::nullopt) {
  model::ResourceQuota q;
  q.name = name;
  q.nominal = Quantity::FromUnits(nominal);
  if (borrow) q.borrowing_limit = Quantity::FromUnits(*borrow);
  return q;
}

// ClusterQueue cq-C-I in cohort-C, selecting every namespace, and the
// LocalQueue "q" pointing to it in the namespace of the same name.
inline model::ClusterQueue& AddCohortQueue(model::PolicySet& p, int c, int i) {
  const std::string name = absl::StrCat("cq-", c, "-", i);
  model::ClusterQueue& cq = p.cluster_queues[name];
  cq.meta.name = name;
  cq.cohort = absl::StrCat("cohort-", c);
  cq.namespace_selector = model::LabelSelector{};
  model::LocalQueue& lq = p.local_queues[{name, "q"}];
  lq.meta.name = "q";
  lq.meta.namespace_name = name;
  lq.cluster_queue = name;
  return cq;
}

// 100 ClusterQueues in 10 cohorts; GPUs in two flavors, MIG in a third.
inline std::shared_ptr<const model::PolicySet> GpuShape(int cohorts, int per_cohort, bool preemption = true) {
  auto p = std::make_shared<model::PolicySet>();
  for (const char* f : {"a100", "h100", "a100-mig"}) p->flavors[f].meta.name = f;
  for (int c = 0; c < cohorts; ++c) {
    for (int i = 0; i < per_cohort; ++i) {
      model::ClusterQueue& cq = AddCohortQueue(*p, c, i);
      cq.queueing_strategy = i % 2 == 0 ? model::QueueingStrategy::kBestEffortFIFO : model::QueueingStrategy::kStrictFIFO;
      if (preemption) {
        cq.preemption.within_cluster_queue = model::WithinClusterQueuePolicy::kLowerPriority;
        cq.preemption.reclaim_within_cohort = model::ReclaimWithinCohortPolicy::kAny;
      }
      model::ResourceGroup gpus;
      gpus.covered_resources = {"nvidia.com/gpu"};
      gpus.flavors.push_back({"a100", {RQ("nvidia.com/gpu", 16, 16)}});
      gpus.flavors.push_back({"h100", {RQ("nvidia.com/gpu", 8, 8)}});
      model::ResourceGroup mig;
      mig.covered_resources = {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"};
      mig.flavors.push_back({"a100-mig", {RQ("nvidia.com/mig-1g.10gb", 14, 14), RQ("nvidia.com/mig-3g.40gb", 4, 4)}});
      cq.resource_groups = {gpus, mig};
    }
  }
  return p;
}

inline workload::Workload RandomGang(std::mt19937_64& rng, const std::string& ns, int n) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = absl::StrCat("job-", n);
  w.uid = absl::StrCat("uid-", n);
  w.queue_name = "q";
  static constexpr int32_t kPriorities[] = {0, 100, 1000};
  w.priority = kPriorities[rng() % 3];
  workload::PodSet ps;
  ps.name = "worker";
  // Mostly small gangs, some up to 64 pods.
  ps.count = 1 + static_cast<int64_t>(rng() % 8 == 0 ? rng() % 64 : rng() % 8);
  const int kind = static_cast<int>(rng() % 10);
  if (kind < 7) {
    ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(1);
  } else if (kind < 9) {
    ps.requests["nvidia.com/mig-1g.10gb"] = Quantity::FromUnits(1);
  } else {
    ps.requests["nvidia.com/mig-3g.40gb"] = Quantity::FromUnits(1);
  }
  w.pod_sets.push_back(ps);
  return w;
}

}  // namespace gangkeeper::broker
