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

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::broker {

// The quota a node declares for one FlavorResource.
struct Quota {
  quantity::Quantity nominal;
  std::optional<quantity::Quantity> borrowing_limit;  // nullopt = unlimited
  std::optional<quantity::Quantity> lending_limit;    // nullopt = everything lendable
};

// The ClusterQueue/Cohort forest with per-FlavorResource quota and usage.
// A ClusterQueue's cohort with no Cohort object, and a Cohort's missing
// parent, are implicit root Cohorts without quota. Cohorts on (or below) a
// parent cycle are disabled: their ClusterQueues report no availability.
// Thread-compatible.
class ResourceTree {
 public:
  // An empty tree (no queues).
  ResourceTree() = default;
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
  // The same by node (a ClusterQueue's node from ClusterQueueNode()), for
  // the hot path.
  quantity::Quantity Available(int cq_node, const FlavorResource& fr) const;
  quantity::Quantity PotentialAvailable(int cq_node, const FlavorResource& fr) const;
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

  // --- Node-level reads for the scheduler (preemption, fair sharing).
  // Nodes are ClusterQueues and Cohorts, numbered 0..node_count()-1.
  int node_count() const { return static_cast<int>(nodes_.size()); }
  // The node of `cq`, or -1.
  int ClusterQueueNode(const model::ClusterQueueName& cq) const { return FindClusterQueue(cq); }
  int CohortNode(const model::CohortName& cohort) const;
  int Parent(int node) const { return nodes_[node].parent; }
  int Root(int node) const;
  const std::vector<int>& Children(int node) const { return nodes_[node].children; }
  const std::string& NodeName(int node) const { return nodes_[node].name; }
  bool IsClusterQueue(int node) const { return nodes_[node].is_cluster_queue; }
  bool Disabled(int node) const { return nodes_[node].disabled; }
  // The node's height: 0 for a ClusterQueue, 1 + the tallest child otherwise.
  int Height(int node) const { return nodes_[node].height; }
  double FairWeight(int node) const { return nodes_[node].weight; }
  const Quota& QuotaAt(int node, const FlavorResource& fr) const { return State(node, FrId(fr)).quota; }
  quantity::Quantity SubtreeQuotaAt(int node, const FlavorResource& fr) const {
    return State(node, FrId(fr)).subtree_quota;
  }
  quantity::Quantity UsageAt(int node, const FlavorResource& fr) const { return State(node, FrId(fr)).usage; }
  // available() before clamping at zero: negative when quota was lowered
  // below usage.
  quantity::Quantity RawAvailable(int node, const FlavorResource& fr) const { return AvailableAt(node, FrId(fr)); }
  quantity::Quantity PotentialAvailableOf(int node, const FlavorResource& fr) const {
    return PotentialAvailableAt(node, FrId(fr));
  }
  // Every FlavorResource `node` declares or uses.
  std::vector<FlavorResource> FlavorResources(int node) const;
  // The id of `fr` for the id-based reads below, or -1 when the tree has
  // never seen it (its state is all zeros everywhere). Ids stay valid until
  // the tree is replaced.
  int FrId(const FlavorResource& fr) const {
    // A handful per policy set: comparing beats hashing two strings.
    if (fr_names_.size() <= kLinearFrs) {
      for (size_t i = 0; i < fr_names_.size(); ++i) {
        const FlavorResource& x = fr_names_[i];
        if (x.resource.size() == fr.resource.size() && x.flavor == fr.flavor && x.resource == fr.resource) {
          return static_cast<int>(i);
        }
      }
      return -1;
    }
    auto it = fr_ids_.find(fr);
    return it == fr_ids_.end() ? -1 : it->second;
  }
  quantity::Quantity UsageAt(int node, int fr_id) const { return State(node, fr_id).usage; }
  quantity::Quantity SubtreeQuotaAt(int node, int fr_id) const { return State(node, fr_id).subtree_quota; }
  // usage + `extra` > SubtreeQuota: taking `extra` more makes `node` borrow.
  bool BorrowingWith(int node, const FlavorResource& fr, quantity::Quantity extra) const;
  // Kueue's FindHeightOfLowestSubtreeThatFits: 0 when `cq` does not borrow
  // to take `amount` more; otherwise the height of the lowest ancestor whose
  // subtree can absorb what `cq` cannot (the root's height if none can).
  int BorrowingHeight(int cq_node, const FlavorResource& fr, quantity::Quantity amount) const;
  // Dominant resource share of `node` with `extra` added to its usage
  // (KUEUE-SEMANTICS §3.7), in thousandths; 0 for a root. +infinity (as
  // INT64_MAX) when the weight is 0 and the node borrows. `dominant` gets the
  // resource that decides it.
  int64_t DominantResourceShare(int node, const ResourceAmounts& extra,
                                std::string* dominant = nullptr) const;

  // The same by node, for the hot path (preemption searches).
  [[nodiscard]] absl::Status AddUsage(int cq_node, const ResourceAmounts& amounts);
  [[nodiscard]] absl::Status RemoveUsage(int cq_node, const ResourceAmounts& amounts);

  // For tests: every Cohort's usage equals Σ_children max(0, child usage -
  // child localQuota), and no usage is negative. Returns Internal otherwise.
  [[nodiscard]] absl::Status CheckInvariants() const;

 private:
  struct FrState {
    Quota quota;
    quantity::Quantity subtree_quota;
    quantity::Quantity usage;
    // Declared or used by the node (FlavorResources()); an absent state is
    // all zeros, as one that was never touched.
    bool present = false;
  };
  struct Node {
    std::string name;
    bool is_cluster_queue = false;
    bool disabled = false;
    int parent = -1;  // index into nodes_; -1 = root
    int height = 0;
    double weight = 1.0;
    std::vector<int> children;
    // By FlavorResource id (FrId): every node has a slot for every
    // FlavorResource the tree has seen, so walking up the tree for one
    // FlavorResource looks it up once, not at every level.
    std::vector<FrState> frs;
  };
  struct FrHash {
    size_t operator()(const FlavorResource& fr) const { return absl::HashOf(fr.flavor, fr.resource); }
  };

  // Build's steps.
  void DisableCycles();
  absl::Status DeclareQuotas(const model::PolicySet& policies);

  // The id of `fr`, given a slot in every node first when it is new.
  int InternFr(const FlavorResource& fr);

  const FrState& State(int node, int fr) const { return fr < 0 ? kEmptyState : nodes_[node].frs[fr]; }
  quantity::Quantity LocalQuota(int node, int fr) const;
  quantity::Quantity LocalAvailable(int node, int fr) const;
  // What `node` passes up to its parent given `usage`.
  quantity::Quantity Contribution(int node, int fr, quantity::Quantity usage) const;
  quantity::Quantity AvailableAt(int node, int fr) const;
  quantity::Quantity PotentialAvailableAt(int node, int fr) const;
  bool BorrowingAt(int node, int fr, quantity::Quantity extra) const;
  int FindClusterQueue(const model::ClusterQueueName& cq) const;
  // Shared by AddUsage (sign +1) and RemoveUsage (sign -1).
  absl::Status ChangeUsageAt(int cq_node, const ResourceAmounts& amounts, int sign);
  absl::Status ChangeUsage(const model::ClusterQueueName& cq, const ResourceAmounts& amounts,
                           int sign);

  static const FrState kEmptyState;
  static constexpr size_t kLinearFrs = 16;

  std::vector<Node> nodes_;
  absl::flat_hash_map<model::ClusterQueueName, int> cluster_queues_;
  absl::flat_hash_map<model::CohortName, int> cohorts_;
  std::set<model::CohortName> disabled_;
  // FlavorResource ids: fr_names_[id] is the FlavorResource of id.
  std::vector<FlavorResource> fr_names_;
  absl::flat_hash_map<FlavorResource, int, FrHash> fr_ids_;
};

}  // namespace gangkeeper::broker
