// gangkeeper broker: the anti-churn rule (SchedulerOptions::anti_churn_guard,
// DESIGN §2's invariant "with no change in the world a workload is preempted
// at most once").
//
// ChurnGuard counts the changes of the world (an arrival, update, deletion,
// completion, failed release, adoption, backoff expiry, policy change) per
// cohort tree. A workload preempted once (Entry::preempted_seq) is spared
// by the preemptor until something changes in its tree. Our own
// consequences (a victim stopping, a release confirmed) are not changes of
// the world. The scheduler's events report changes; the preemptor asks
// Guarded(). Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gangkeeper/model/objects.h"
#include "src/broker/entry.h"
#include "src/broker/resource_tree.h"

namespace gangkeeper::broker {

class ChurnGuard {
 public:
  // `tree` (not owned; it must outlive the guard) places ClusterQueues in
  // their cohort trees. With `enabled` false nothing is ever guarded.
  ChurnGuard(const ResourceTree& tree, bool enabled) : tree_(tree), enabled_(enabled) {}
  ChurnGuard(const ChurnGuard&) = delete;
  ChurnGuard& operator=(const ChurnGuard&) = delete;

  // Something changed in the world in `cq`'s cohort tree (nothing when `cq`
  // is empty): a workload preempted there before may be preempted again.
  void WorldChanged(const model::ClusterQueueName& cq);
  // The policies changed: every workload may be preempted again (and the
  // changes before it no longer matter: the tree may be renumbered).
  void PoliciesChanged() {
    last_policy_change_ = ++seq_;
    by_root_.clear();
    outside_.clear();
  }
  // The sequence of the last change; a workload preempted now keeps it in
  // Entry::preempted_seq.
  uint64_t seq() const { return seq_; }

  // True when `candidate` was preempted once and nothing changed in its
  // tree since, so it is not preempted again; each true is counted.
  bool Guarded(const Entry& candidate) const;
  // How many candidates were spared in all.
  int64_t guarded() const { return guarded_; }

 private:
  // The root node of `cq`'s cohort tree (a ClusterQueue without a cohort
  // is its own root), or -1 when `cq` is not in the tree.
  int RootOf(const model::ClusterQueueName& cq) const;

  const ResourceTree& tree_;
  const bool enabled_;
  uint64_t seq_ = 0;
  // Per cohort tree, the sequence of the last change in it: by root node
  // (0 = none), and by name for ClusterQueues outside the tree. Both are
  // cleared on a policy change, which outdates everything before it.
  std::vector<uint64_t> by_root_;
  absl::flat_hash_map<std::string, uint64_t> outside_;
  uint64_t last_policy_change_ = 0;
  mutable int64_t guarded_ = 0;  // counted by the const Guarded()
};

}  // namespace gangkeeper::broker
