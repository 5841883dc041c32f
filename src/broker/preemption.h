// gangkeeper broker: the preemptor, which chooses preemption victims
// (KUEUE-SEMANTICS.md §3.6 classical preemption, §3.7 fair-sharing
// preemption).
//
// Victims are whole admitted gangs. The search removes candidates from the
// quota tree one by one, in Kueue's candidate order, until the incoming gang
// fits; then it "fills back": walks the chosen victims from the
// second-to-last to the first and keeps every one whose removal turns out
// not to be needed. The tree is always restored before a call returns.
// The scheduling cycle asks FindTargets for a gang the flavor assigner
// placed in a preempting mode; the flavor assigner asks CanPreemptFor (its
// preemption oracle) per flavor. Thread-compatible: the broker thread (or a
// test) is its only user.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "src/broker/churn_guard.h"
#include "src/broker/entry.h"
#include "src/broker/resource_tree.h"

namespace gangkeeper::broker {

// A preemption victim and the reason it is preempted.
struct Target {
  Entry* entry = nullptr;
  std::string reason;  // InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing
};

class Preemptor {
 public:
  // Reads the quota tree (and changes it during a search, restoring it
  // before returning), every ClusterQueue's admitted gangs (`queues`, and
  // `queue_by_node` indexed by the tree's nodes: nullptr for cohorts), the
  // tracked entries (a waiting preemptor's victims are looked up there) and
  // the anti-churn guard. None is owned; all must outlive the Preemptor.
  Preemptor(ResourceTree& tree, const QueueMap& queues, const std::vector<Queue*>& queue_by_node,
            const EntryIndex& entries, const ChurnGuard& guard)
      : tree_(tree), queues_(queues), queue_by_node_(queue_by_node), entries_(entries), guard_(guard) {}
  Preemptor(const Preemptor&) = delete;
  Preemptor& operator=(const Preemptor&) = delete;

  // The fair-sharing preemption strategies come from `config` (Kueue's
  // Configuration, fairSharing.preemptionStrategies): the first decides
  // each candidate of the main pass, a second (LessThanInitialShare) runs
  // on the candidates the first refused. Must outlive the searches; Kueue's
  // default order until set.
  void UseConfiguration(const model::KueueConfiguration* config) { config_ = config; }

  // The victims whose eviction lets `in` take `request` in ClusterQueue
  // `cq`, where `need_preemption` are the FlavorResources it cannot get
  // otherwise, each with the reason it is preempted; empty when no set of
  // victims makes room, when `in` may not preempt (preemptionPolicy: Never)
  // or `cq` is not in the tree. `fair_sharing`: `cq`'s cohort tree uses
  // fair sharing (then §3.7's rules apply instead of §3.6's).
  std::vector<Target> FindTargets(const Entry& in, const model::ClusterQueue& cq, bool fair_sharing,
                                  const ResourceAmounts& request, const std::set<FlavorResource>& need_preemption);
  // The flavor assigner's preemption oracle: true when some victims make
  // room for `amount` of `fr` for `in` in `cq`; then `targets` holds them
  // and `only_other_queues` says whether all are in other ClusterQueues (a
  // reclaim rather than a preemption).
  bool CanPreemptFor(const Entry& in, const model::ClusterQueue& cq, bool fair_sharing, const FlavorResource& fr,
                     quantity::Quantity amount, bool* only_other_queues, std::vector<Target>* targets);

 private:
  class Search;  // one search, in preemption.cc

  ResourceTree& tree_;
  const QueueMap& queues_;
  const std::vector<Queue*>& queue_by_node_;
  const EntryIndex& entries_;
  const ChurnGuard& guard_;
  const model::KueueConfiguration* config_ = nullptr;
};

}  // namespace gangkeeper::broker
