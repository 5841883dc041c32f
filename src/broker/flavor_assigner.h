// gangkeeper broker: the flavor assigner (KUEUE-SEMANTICS.md §3.5), which
// places a gang's pod sets on the ResourceFlavors of its ClusterQueue.
//
// Pod sets are placed in order; quota taken by earlier pod sets counts
// against later ones. For each resource group a pod set uses, the flavors
// are tried in the order the ClusterQueue lists them: a flavor whose taints
// the pod set does not tolerate, or whose node labels contradict its node
// selector, is skipped; otherwise every resource of the group is checked
// against Available (fit), the maximum capacity (no fit ever) and the
// preemption oracle (preempt / reclaim / no candidates). flavorFungibility
// decides whether to stop at a flavor that borrows or needs preemption.
// The gang's mode is the worst of its pod sets: one pod set that cannot be
// placed leaves the whole workload unplaced.
//
// The scheduling cycle builds one per nomination (it only holds
// references) with the Preemptor as the oracle. Thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"
#include "src/broker/preemption.h"
#include "src/broker/resource_tree.h"

namespace gangkeeper::broker {

// How well a flavor (or a whole gang) fits, worst first (Kueue's granular
// modes).
enum class FitMode { kNoFit = 0, kNoCandidates = 1, kPreempt = 2, kReclaim = 3, kFit = 4 };

// The flavor assigner's answer for one workload.
struct AssignmentResult {
  FitMode mode = FitMode::kNoFit;
  Assignment assignment;  // complete when mode != kNoFit
  // FlavorResources that need preemption (mode kPreempt / kReclaim).
  std::set<FlavorResource> need_preemption;
  PendingReason reason;  // the first blocker when mode != kFit
  // With mode kNoFit / kNoCandidates, when the resource group that failed
  // offers several flavors: why each flavor tried could not take the pod
  // set, in the order tried (SetReason appends them to the reason's
  // sentence and keeps their hash).
  std::vector<std::string> flavors_tried;
  // The victims the preemption oracle found, when its search was the one
  // Preemptor::FindTargets would run (one FlavorResource needs preemption
  // and it is the gang's only one): saves repeating it.
  std::optional<std::vector<Target>> targets;
};

// The preemption oracle: could the ClusterQueue make room for `amount` of
// `fr` (what the earlier pod sets and this one need of it) by preempting?
// When it can, `targets` gets the victims and `only_other_queues` whether
// all are in other ClusterQueues. Preemptor::CanPreemptFor answers it.
using PreemptionOracle = absl::FunctionRef<bool(const FlavorResource& fr, quantity::Quantity amount,
                                                bool* only_other_queues, std::vector<Target>* targets)>;

// Total requests of pod set `ps` (count x per-pod request, the request
// as the Configuration's resources.transformations charge it), plus `pods`
// when the ClusterQueue covers it. Saturates on overflow.
std::map<model::ResourceName, quantity::Quantity> PodSetTotals(const workload::PodSet& ps,
                                                               const model::ClusterQueue& cq,
                                                               const model::KueueConfiguration& config);

class FlavorAssigner {
 public:
  // Reads the quota and usage in `tree`, the ResourceFlavors (taints,
  // node labels) in `flavors` and the resource transformations in
  // `config`; owns none, and all must outlive it.
  FlavorAssigner(const ResourceTree& tree, const std::map<std::string, model::ResourceFlavor>& flavors,
                 const model::KueueConfiguration& config)
      : tree_(tree), flavors_(flavors), config_(config) {}

  // Assigns a flavor per resource group to every pod set in `pod_sets` in
  // ClusterQueue `cq` against the tree's current usage. `fair_sharing`:
  // `cq`'s cohort tree uses fair sharing (then a request beyond nominal may
  // still reclaim when reclaimWithinCohort allows it). `oracle` is asked
  // for a flavor only where preemption could make room. The result is kFit
  // with the assignment, kPreempt / kReclaim with the FlavorResources that
  // need preemption, or kNoFit / kNoCandidates with the first blocker.
  AssignmentResult Assign(const std::vector<workload::PodSet>& pod_sets, const model::ClusterQueue& cq,
                          bool fair_sharing, PreemptionOracle oracle) const;

 private:
  const ResourceTree& tree_;
  const std::map<std::string, model::ResourceFlavor>& flavors_;
  const model::KueueConfiguration& config_;
};

}  // namespace gangkeeper::broker
