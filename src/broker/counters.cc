// gangkeeper broker: WorkloadCounters (see counters.h).
#include "gangkeeper/broker/counters.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace gangkeeper::broker {
namespace {

// The priority classes of a batch's workloads: tracked ones from the
// snapshot, finished ones (no longer tracked) from its finished list.
class PriorityClasses {
 public:
  PriorityClasses(const std::vector<StateChange>& changes, const Snapshot& after) : after_(after) {
    for (const StateChange& c : changes) {
      if (c.type == StateChange::Type::kFinished) finished_[c.key];
    }
    if (finished_.empty()) return;
    for (const auto& w : after.finished()) {
      auto it = finished_.find(w->key);
      if (it != finished_.end() && w->workload != nullptr) it->second = w->workload->priority_class;
    }
  }
  std::string Of(const WorkloadKey& key) const {
    if (const WorkloadInfo* info = after_.Find(key); info != nullptr && info->workload != nullptr) {
      return info->workload->priority_class;
    }
    auto it = finished_.find(key);
    return it != finished_.end() ? it->second : "";
  }

 private:
  const Snapshot& after_;
  std::map<WorkloadKey, std::string> finished_;
};

}  // namespace

void WorkloadCounters::OnDurable(const std::vector<StateChange>& changes, const Snapshot& after) {
  const PriorityClasses classes(changes, after);
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
      } else if (const WorkloadInfo* info = after.Find(c.key)) {
        since = info->created_at;
      }
      admissions.push_back({&c, classes.Of(c.key), std::max(absl::ZeroDuration(), c.time - since)});
    }
  }
  for (const Waited& w : admissions) on_admitted_(w.c->cluster_queue, w.priority_class, w.waited);
  absl::MutexLock lock(&mu_);
  for (const StateChange& c : changes) {
    switch (c.type) {
      case StateChange::Type::kAdmitted:
        ++counters_.admitted[{c.cluster_queue, classes.Of(c.key)}];
        break;
      case StateChange::Type::kFinished:
        ++counters_.finished[{c.cluster_queue, classes.Of(c.key)}];
        break;
      case StateChange::Type::kEvicted: {
        const bool preempted = !c.preemptor.name.empty();
        ++counters_.evicted[{c.cluster_queue, preempted ? "Preempted" : c.reason, preempted ? c.reason : "",
                             classes.Of(c.key)}];
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
}

BrokerCounters WorkloadCounters::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace gangkeeper::broker
