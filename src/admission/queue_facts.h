// gangkeeper admission: what the validating checks read of a ClusterQueue's
// policies, derived once per policy set rather than once per review.
//
// The checks (validate.cc) ask of the ClusterQueue a workload lands in: the
// resources it covers, the most it can ever hold of each resource in each
// flavor (its nominal quota plus what the rest of its cohort tree could lend),
// and how many of each GPU/MIG resource one node of the pools behind its
// flavors advertises. All of that is a function of the PolicySet alone, and
// walking it is not cheap: the lendable capacity visits every ClusterQueue of
// the cohort tree (1,000 in the large-scale shape) for every resource of every
// review. FactsOf computes a queue's facts on first use and keeps them, per
// thread, for as long as the policies' content (their sealed digest) stays
// the same; an unsealed set is computed afresh every time.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::admission {

// What one ClusterQueue can ever hold of one resource in one flavor.
struct Capacity {
  quantity::Quantity nominal;
  quantity::Quantity borrowable;  // the most it can borrow from its cohort tree
  bool borrowing_limited = false;
  std::string flavor;
  quantity::Quantity Max() const { return nominal.SaturatingAdd(borrowable); }
};

// The GPU/MIG pools behind a queue's flavors for one resource.
struct NodeFit {
  int64_t best_per_node = -1;                          // -1: no pool behind them
  std::vector<std::pair<std::string, int64_t>> pools;  // pool name, per node
};

struct QueueFacts {
  // Every resource the queue's resource groups cover.
  std::set<std::string> covered;
  // By resource: one Capacity per flavor with quota for it, in the queue's
  // order. A resource with no quota in any flavor is absent.
  std::map<std::string, std::vector<Capacity>> capacities;
  // By GPU/MIG resource with quota in some flavor: what one node offers.
  std::map<std::string, NodeFit> node_fit;

  // capacities[res], or an empty list.
  const std::vector<Capacity>& CapacitiesOf(const std::string& res) const;
  // node_fit[res], or "no pool" (best_per_node -1).
  const NodeFit& NodeFitOf(const std::string& res) const;
};

// Whether the checks count `resource` as a GPU (nvidia.com/gpu or a MIG
// profile).
bool IsGpu(const std::string& resource);

// The facts of `cq`, one of `p`'s ClusterQueues. The reference stays valid
// until the next FactsOf on the same thread.
const QueueFacts& FactsOf(const model::PolicySet& p, const model::ClusterQueue& cq);

// The facts computed from scratch (what FactsOf keeps).
QueueFacts ComputeFacts(const model::PolicySet& p, const model::ClusterQueue& cq);

}  // namespace gangkeeper::admission
