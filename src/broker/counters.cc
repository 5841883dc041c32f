// gangkeeper broker: WorkloadCounters (see counters.h).
#include "gangkeeper/broker/counters.h"

#include <algorithm>

namespace gangkeeper::broker {
namespace {

std::string PriorityClassIn(const Scheduler& world, const WorkloadKey& key) {
  const WorkloadInfo* info = world.Find(key);
  return info != nullptr && info->workload != nullptr ? info->workload->priority_class : "";
}

}  // namespace

void WorkloadCounters::OnDurable(const std::vector<StateChange>& changes, const Scheduler& world) {
  struct Waited {
    const StateChange* c;
    std::string priority_class;
    absl::Duration waited;
  };
  std::vector<Waited> admissions;
  for (const StateChange& c : changes) {
    if (c.type == StateChange::Type::kRequeued || c.type == StateChange::Type::kReleaseFailed) {
      requeued_at_[c.key] = c.time;
    } else if (c.type == StateChange::Type::kRemoved || c.type == StateChange::Type::kFinished) {
      requeued_at_.erase(c.key);
    } else if (c.type == StateChange::Type::kAdmitted && on_admitted_) {
      absl::Time since = c.time;
      if (auto it = requeued_at_.find(c.key); it != requeued_at_.end()) {
        since = it->second;
        requeued_at_.erase(it);
      } else if (const WorkloadInfo* info = world.Find(c.key)) {
        since = info->created_at;
      }
      admissions.push_back({&c, PriorityClassIn(world, c.key), std::max(absl::ZeroDuration(), c.time - since)});
    }
  }
  for (const Waited& w : admissions) on_admitted_(w.c->cluster_queue, w.priority_class, w.waited);
  absl::MutexLock lock(&mu_);
  for (const StateChange& c : changes) {
    switch (c.type) {
      case StateChange::Type::kAdmitted:
        ++counters_.admitted[{c.cluster_queue, PriorityClassIn(world, c.key)}];
        break;
      case StateChange::Type::kFinished:
        ++counters_.finished[{c.cluster_queue, PriorityClassIn(world, c.key)}];
        break;
      case StateChange::Type::kEvicted: {
        const bool preempted = !c.preemptor.name.empty();
        ++counters_.evicted[{c.cluster_queue, preempted ? "Preempted" : c.reason, preempted ? c.reason : "",
                             PriorityClassIn(world, c.key)}];
        if (preempted) {
          const WorkloadInfo* by = c.preemptor_uid.empty() ? world.Find(c.preemptor)
                                                           : world.FindInstance(InstanceKey{c.preemptor, c.preemptor_uid});
          ++counters_.preempted[{by != nullptr ? by->cluster_queue : "", c.reason}];
        }
        break;
      }
      default:
        break;
    }
  }
}

BrokerCounters WorkloadCounters::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace gangkeeper::broker
