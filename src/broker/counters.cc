// gangkeeper broker: WorkloadCounters (see counters.h).
#include "gangkeeper/broker/counters.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace gangkeeper::broker {
namespace {

// What the counters need of a batch's workloads (priority class and
// LocalQueue): tracked ones from the snapshot, finished ones (no longer
// tracked) from its finished list.
class Lookup {
 public:
  struct Of {
    std::string priority_class;
    std::string local_queue;
  };
  Lookup(const std::vector<StateChange>& changes, const Snapshot& after) : after_(after) {
    for (const StateChange& c : changes) {
      if (c.type == StateChange::Type::kFinished) finished_[c.key];
    }
    if (finished_.empty()) return;
    for (const auto& w : after.finished()) {
      auto it = finished_.find(w->key);
      if (it != finished_.end() && w->workload != nullptr) it->second = {w->workload->priority_class, w->local_queue};
    }
  }
  Of Find(const WorkloadKey& key) const {
    if (const WorkloadInfo* info = after_.Find(key); info != nullptr && info->workload != nullptr) {
      return {info->workload->priority_class, info->local_queue};
    }
    auto it = finished_.find(key);
    return it != finished_.end() ? it->second : Of{};
  }

 private:
  const Snapshot& after_;
  std::map<WorkloadKey, Of> finished_;
};

// The cohorts above the ClusterQueue `cq`, nearest first.
std::vector<std::string> CohortsOf(const model::PolicySet& policies, const model::ClusterQueueName& cq) {
  auto it = policies.cluster_queues.find(cq);
  return it != policies.cluster_queues.end() ? policies.CohortsAbove(it->second.cohort) : std::vector<std::string>{};
}

}  // namespace

void WorkloadCounters::OnDurable(const std::vector<StateChange>& changes, const Snapshot& after) {
  const Lookup lookup(changes, after);
  std::vector<AdmittedGang> admissions;
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
      } else if (const WorkloadInfo* info = after.Find(c.key)) {
        since = info->created_at;
      }
      Lookup::Of of = lookup.Find(c.key);
      admissions.push_back({c.cluster_queue, c.key.namespace_name, std::move(of.local_queue),
                            std::move(of.priority_class), std::max(absl::ZeroDuration(), c.time - since)});
    }
  }
  for (const AdmittedGang& gang : admissions) on_admitted_(gang);
  absl::MutexLock lock(&mu_);
  for (const StateChange& c : changes) {
    const Lookup::Of of = lookup.Find(c.key);
    Count(c, of.priority_class, of.local_queue, after);
  }
}

void WorkloadCounters::Count(const StateChange& c, const std::string& pc, const std::string& local_queue,
                             const Snapshot& after) {
  const std::string& ns = c.key.namespace_name;
  switch (c.type) {
    case StateChange::Type::kAdmitted:
      ++counters_.admitted[{c.cluster_queue, pc}];
      if (!local_queue.empty()) ++counters_.local_admitted[{local_queue, ns, pc}];
      for (const std::string& cohort : CohortsOf(after.policies(), c.cluster_queue)) {
        ++counters_.cohort_admitted[{cohort, pc}];
      }
      break;
    case StateChange::Type::kFinished:
      ++counters_.finished[{c.cluster_queue, pc}];
      if (!local_queue.empty()) ++counters_.local_finished[{local_queue, ns, pc}];
      break;
    case StateChange::Type::kEvicted: {
      const bool preempted = !c.preemptor.name.empty();
      const std::string reason = preempted ? "Preempted" : c.reason;
      const std::string cause = preempted ? c.reason : "";
      ++counters_.evicted[{c.cluster_queue, reason, cause, pc}];
      if (!local_queue.empty()) ++counters_.local_evicted[{local_queue, ns, reason, cause, pc}];
      if (preempted) {
        const WorkloadInfo* by =
            c.preemptor_uid.empty() ? after.Find(c.preemptor) : after.FindInstance(c.preemptor, c.preemptor_uid);
        ++counters_.preempted[{by != nullptr ? by->cluster_queue : "", c.reason}];
      }
      break;
    }
    default:
      break;
  }
}

BrokerCounters WorkloadCounters::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace gangkeeper::broker
