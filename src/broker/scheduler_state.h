// gangkeeper broker: the Scheduler's private state. Scheduler::State owns
// the quota tree, the tracked entries and the queues; its parts read them:
// the flavor assigner (flavor_assigner.h), the preemptor (preemption.h)
// and the anti-churn guard (churn_guard.h). The Scheduler's code is split
// by concern: construction and reads (scheduler.cc), events (events.cc),
// queues and reasons (queues.h), the scheduling cycle (cycle.cc), the holds
// for preemptors (holds.h), the invariant check (invariants.cc).
// Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gangkeeper/broker/scheduler.h"
#include "src/broker/churn_guard.h"
#include "src/broker/entry.h"
#include "src/broker/flavor_assigner.h"
#include "src/broker/preemption.h"
#include "src/broker/resource_tree.h"

namespace gangkeeper::broker {

// Whether some pod set may be admitted with fewer pods than its count.
bool CanBePartiallyAdmitted(const std::vector<workload::PodSet>& pod_sets);

struct Scheduler::State {
  explicit State(const SchedulerOptions& o) : options(o) {}

  const SchedulerOptions options;
  std::shared_ptr<const model::PolicySet> policies;
  ResourceTree tree;
  // Every tracked instance, by key.
  EntryIndex entries;
  size_t instance_count = 0;
  // Of those, the ones known only from reviews (Workload::unconfirmed).
  size_t unconfirmed_count = 0;
  // Preemptors waiting for their victims, in the order they chose them.
  std::vector<Entry*> preemptors;
  // The anti-churn rule's bookkeeping: which trees changed since a
  // workload was preempted.
  ChurnGuard churn{tree, options.anti_churn_guard};
  QueueMap queues;                       // every ClusterQueue, plus deleted ones holding quota
  std::vector<Queue*> queue_by_node;     // by ResourceTree node (nullptr for cohorts)
  std::set<Entry*, QueueOrder> orphans;  // pending without a usable ClusterQueue
  // (ClusterQueue node, FlavorResource) over quota after a policy change;
  // the invariant check tolerates them until usage falls back.
  std::set<std::pair<std::string, FlavorResource>> over_quota_by_policy;
  // Deleted ClusterQueues that still hold quota, with their last definition.
  std::map<model::ClusterQueueName, model::ClusterQueue> terminating;
  std::vector<StateChange> changes;
  // The last state of the workloads finished since TakeFinished.
  std::vector<std::shared_ptr<const WorkloadInfo>> finished;
  // Pending entries waiting out a release backoff, by when they return.
  std::multimap<absl::Time, Entry*> backoff;
  // waitForPodsReady: the gangs holding quota whose pods are not all ready,
  // by registration order (pods_ready.cc; ReleaseQuota takes them out).
  std::map<uint64_t, Entry*> unready;
  uint64_t next_seq = 0;
  // What changed since the last TakeDirty (for incremental snapshots).
  absl::flat_hash_set<WorkloadKey> dirty_workloads;
  absl::flat_hash_set<model::ClusterQueueName> dirty_queues;
  bool all_queues_dirty = true;
  // defer_reason_numbers: the instances given a reason newer only in its
  // numbers since the last RefreshReasons (Entry::fresh_reason; may name
  // one twice, or one gone since).
  std::vector<InstanceKey> stale_reasons;
  // Reads the tree, queues, entries and guard above (declared after them).
  Preemptor preemptor{tree, queues, queue_by_node, entries, churn};

  void Touch(const Entry& e) {
    dirty_workloads.insert(e.cinfo().key);
    if (!e.queued_in.empty()) dirty_queues.insert(e.queued_in.name());
    if (!e.cinfo().cluster_queue.empty()) dirty_queues.insert(e.cinfo().cluster_queue);
    if (e.cinfo().admission.has_value()) dirty_queues.insert(e.cinfo().admission->cluster_queue);
  }
  void IndexQueues() {
    queue_by_node.assign(static_cast<size_t>(tree.node_count()), nullptr);
    for (auto& [name, q] : queues) {
      const int node = tree.ClusterQueueNode(name);
      if (node >= 0) queue_by_node[static_cast<size_t>(node)] = &q;
    }
  }
  // Whether `cq`'s cohort tree uses fair sharing.
  bool FairSharingFor(const model::ClusterQueueName& cq) const;

  // The flavor assigner on the current usage, with the preemptor as its
  // oracle: flavors for every pod set of `e` in its ClusterQueue `cq`.
  AssignmentResult AssignFlavors(const Entry& e, const model::ClusterQueue& cq, bool fair_sharing) {
    return AssignFlavors(e, e.PodSets(), cq, fair_sharing);
  }
  // The same for `e` with `pod_sets` in place of its own (its pod sets
  // with fewer pods: partial admission).
  AssignmentResult AssignFlavors(const Entry& e, const std::vector<workload::PodSet>& pod_sets,
                                 const model::ClusterQueue& cq, bool fair_sharing) {
    preemptor.UseConfiguration(&policies->configuration);
    const FlavorAssigner assigner(tree, policies->flavors, policies->configuration);
    return assigner.Assign(pod_sets, cq, fair_sharing,
                           [&](const FlavorResource& fr, quantity::Quantity amount, bool* only_other_queues,
                               std::vector<Target>* targets) {
                             return preemptor.CanPreemptFor(e, cq, fair_sharing, fr, amount, only_other_queues,
                                                            targets);
                           });
  }
  // The victims that make room for `e` with `result`, or empty when none
  // can. Leaves the tree as it found it.
  std::vector<Target> FindTargets(const Entry& e, const model::ClusterQueue& cq, bool fair_sharing,
                                  const AssignmentResult& result) {
    preemptor.UseConfiguration(&policies->configuration);
    return preemptor.FindTargets(e, cq, fair_sharing, result.assignment.usage, result.need_preemption);
  }
  // Partial admission (partial_admission.cc): when `e`'s whole counts
  // neither fit nor find victims, the largest counts down to its pod sets'
  // minimums that fit (targets empty) or that victims make room for; nullopt
  // when none do or its pod sets cannot shrink.
  struct Reduced {
    AssignmentResult result;
    std::vector<Target> targets;
  };
  std::optional<Reduced> AssignReduced(const Entry& e, const model::ClusterQueue& cq, bool fair_sharing);
};

}  // namespace gangkeeper::broker
