// gangkeeper broker: quota accounting over the ClusterQueue/Cohort tree.
//
// ResourceTree holds, for every ClusterQueue and Cohort and every
// FlavorResource, the quota (nominal, borrowing and lending limits), the
// subtree quota and the usage, and answers "how much can this ClusterQueue
// admit now" with the arithmetic of KUEUE-SEMANTICS.md §3.4 (SubtreeQuota,
// localQuota, LocalAvailable, available(), potentialAvailable(), addUsage).
// The broker's scheduling cycle builds one per PolicySet and charges and
// releases admitted workloads through AddUsage/RemoveUsage. Thread-compatible:
// only the broker thread mutates it; readers get copies.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::broker {

// The accounting key: one resource of one ResourceFlavor.
struct FlavorResource {
  model::FlavorName flavor;
  model::ResourceName resource;

  friend bool operator==(const FlavorResource&, const FlavorResource&) = default;
  friend auto operator<=>(const FlavorResource&, const FlavorResource&) = default;
};

// The quota a node declares for one FlavorResource.
struct Quota {
  quantity::Quantity nominal;
  std::optional<quantity::Quantity> borrowing_limit;  // nullopt = unlimited
  std::optional<quantity::Quantity> lending_limit;    // nullopt = everything lendable
};

using ResourceAmounts = std::map<FlavorResource, quantity::Quantity>;

// The ClusterQueue/Cohort forest with per-FlavorResource quota and usage.
// A ClusterQueue's cohort with no Cohort object, and a Cohort's missing
// parent, are implicit root Cohorts without quota. Cohorts on (or below) a
// parent cycle are disabled: their ClusterQueues report no availability.
// Thread-compatible.
class ResourceTree {
 public:
  // Builds the tree from `policies` with zero usage. Returns InvalidArgument
  // when a quota is negative or a FlavorResource is declared twice by one
  // ClusterQueue or Cohort. Parent cycles are not an error (see disabled()).
  [[nodiscard]] static absl::StatusOr<ResourceTree> Build(const model::PolicySet& policies);

  bool HasClusterQueue(const model::ClusterQueueName& cq) const;
  // Cohorts that are on, or descend from, a parent cycle.
  const std::set<model::CohortName>& disabled() const { return disabled_; }
  // True when `cq` belongs to a disabled Cohort (it cannot admit anything).
  bool ClusterQueueDisabled(const model::ClusterQueueName& cq) const;

  // What `cq` can admit on `fr` now without preemption: max(0, available()).
  // Zero for unknown or disabled ClusterQueues, and when quota was lowered
  // below usage.
  quantity::Quantity Available(const model::ClusterQueueName& cq, const FlavorResource& fr) const;
  // What `cq` could use on `fr` if every other queue were idle.
  quantity::Quantity PotentialAvailable(const model::ClusterQueueName& cq,
                                        const FlavorResource& fr) const;
  // Usage, nominal quota and borrowed amount (max(0, usage - nominal)) of
  // `cq` on `fr`; zero for unknown ClusterQueues or FlavorResources.
  quantity::Quantity Usage(const model::ClusterQueueName& cq, const FlavorResource& fr) const;
  quantity::Quantity Nominal(const model::ClusterQueueName& cq, const FlavorResource& fr) const;
  quantity::Quantity Borrowing(const model::ClusterQueueName& cq, const FlavorResource& fr) const;
  // Usage of a Cohort (what its children take beyond their local quota).
  quantity::Quantity CohortUsage(const model::CohortName& cohort, const FlavorResource& fr) const;

  // True when every amount of `request` is at most Available(cq, fr). False
  // for unknown or disabled ClusterQueues unless the request is all zeros.
  bool Fits(const model::ClusterQueueName& cq, const ResourceAmounts& request) const;

  // Charges `amounts` to `cq` and propagates what exceeds each node's
  // LocalAvailable to its parent. Does not check Fits: usage may exceed quota.
  // Returns NotFound for an unknown ClusterQueue, InvalidArgument for a
  // negative amount, OutOfRange on overflow; on error nothing changes.
  [[nodiscard]] absl::Status AddUsage(const model::ClusterQueueName& cq,
                                      const ResourceAmounts& amounts);
  // The exact inverse of AddUsage. Returns NotFound, InvalidArgument as
  // above, and FailedPrecondition when `cq`'s usage would drop below zero;
  // on error nothing changes.
  [[nodiscard]] absl::Status RemoveUsage(const model::ClusterQueueName& cq,
                                         const ResourceAmounts& amounts);

  // For tests: every Cohort's usage equals Σ_children max(0, child usage -
  // child localQuota), and no usage is negative. Returns Internal otherwise.
  [[nodiscard]] absl::Status CheckInvariants() const;

 private:
  struct FrState {
    Quota quota;
    quantity::Quantity subtree_quota;
    quantity::Quantity usage;
  };
  struct Node {
    std::string name;
    bool is_cluster_queue = false;
    bool disabled = false;
    int parent = -1;  // index into nodes_; -1 = root
    std::vector<int> children;
    std::map<FlavorResource, FrState> frs;
  };

  ResourceTree() = default;

  const FrState& State(int node, const FlavorResource& fr) const;
  quantity::Quantity LocalQuota(int node, const FlavorResource& fr) const;
  quantity::Quantity LocalAvailable(int node, const FlavorResource& fr) const;
  // What `node` passes up to its parent given `usage`.
  quantity::Quantity Contribution(int node, const FlavorResource& fr,
                                  quantity::Quantity usage) const;
  quantity::Quantity AvailableAt(int node, const FlavorResource& fr) const;
  quantity::Quantity PotentialAvailableAt(int node, const FlavorResource& fr) const;
  int FindClusterQueue(const model::ClusterQueueName& cq) const;
  // Shared by AddUsage (sign +1) and RemoveUsage (sign -1).
  absl::Status ChangeUsage(const model::ClusterQueueName& cq, const ResourceAmounts& amounts,
                           int sign);

  std::vector<Node> nodes_;
  std::map<model::ClusterQueueName, int> cluster_queues_;
  std::map<model::CohortName, int> cohorts_;
  std::set<model::CohortName> disabled_;
};

}  // namespace gangkeeper::broker
