// gangkeeper admission: a ClusterQueue's facts for the checks (see
// queue_facts.h).
#include "src/admission/queue_facts.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gangkeeper/model/gpu_pool.h"
#include "gangkeeper/model/policy_digest.h"

namespace gangkeeper::admission {
namespace {

using quantity::Quantity;

// The cohort tree a ClusterQueue's cohort belongs to: every cohort name with
// the same root.
std::set<std::string> CohortTree(const model::PolicySet& p, const std::string& cohort) {
  auto root_of = [&](const std::string& c) {
    const std::vector<std::string> up = p.CohortsAbove(c);
    return up.empty() ? c : up.back();
  };
  const std::string root = root_of(cohort);
  std::set<std::string> tree = {root, cohort};
  for (const auto& [name, co] : p.cohorts) {
    if (root_of(name) == root) tree.insert(name);
  }
  for (const auto& [name, cq] : p.cluster_queues) {
    if (!cq.cohort.empty() && root_of(cq.cohort) == root) tree.insert(cq.cohort);
  }
  return tree;
}

// Everything the rest of `cq`'s cohort tree (`tree`) could lend of `res` in
// `flavor`: the other ClusterQueues' lending limits (else nominal quotas)
// and the cohorts' own quotas.
Quantity Lendable(const model::PolicySet& p, const model::ClusterQueue& cq, const std::set<std::string>& tree,
                  const std::string& flavor, const std::string& res) {
  Quantity lendable;
  for (const auto& [name, other] : p.cluster_queues) {
    if (name == cq.meta.name || tree.count(other.cohort) == 0) continue;
    for (const model::ResourceGroup& org : other.resource_groups) {
      for (const model::FlavorQuotas& ofq : org.flavors) {
        if (ofq.name != flavor) continue;
        for (const model::ResourceQuota& oq : ofq.resources) {
          if (oq.name == res) lendable = lendable.SaturatingAdd(oq.lending_limit.value_or(oq.nominal));
        }
      }
    }
  }
  for (const std::string& co_name : tree) {
    auto co = p.cohorts.find(co_name);
    if (co == p.cohorts.end()) continue;
    for (const model::ResourceGroup& org : co->second.resource_groups) {
      for (const model::FlavorQuotas& ofq : org.flavors) {
        if (ofq.name != flavor) continue;
        for (const model::ResourceQuota& oq : ofq.resources) {
          if (oq.name == res) lendable = lendable.SaturatingAdd(oq.nominal);
        }
      }
    }
  }
  return lendable;
}

// What one node of the pools behind `flavors` advertises of `res`.
NodeFit FitOf(const model::PolicySet& p, const std::set<std::string>& flavors, const std::string& res) {
  NodeFit fit;
  for (const auto& [name, pool] : p.gpu_node_pools) {
    if (flavors.count(pool.flavor) == 0) continue;
    absl::StatusOr<model::AdvertisedResources> adv = model::Advertise(pool);
    if (!adv.ok()) continue;
    auto it = adv->per_node.find(res);
    const int64_t per_node = it == adv->per_node.end() ? 0 : it->second;
    fit.best_per_node = std::max(fit.best_per_node, per_node);
    fit.pools.emplace_back(name, per_node);
  }
  return fit;
}

// One thread's facts, for the policies whose digest is `digest`.
struct FactsCache {
  std::string digest;
  std::map<std::string, QueueFacts> queues;  // by ClusterQueue name
};

}  // namespace

bool IsGpu(const std::string& resource) {
  return resource == "nvidia.com/gpu" || absl::StartsWith(resource, "nvidia.com/mig-");
}

const std::vector<Capacity>& QueueFacts::CapacitiesOf(const std::string& res) const {
  static const std::vector<Capacity> kNone;
  auto it = capacities.find(res);
  return it == capacities.end() ? kNone : it->second;
}

const NodeFit& QueueFacts::NodeFitOf(const std::string& res) const {
  static const NodeFit kNone;
  auto it = node_fit.find(res);
  return it == node_fit.end() ? kNone : it->second;
}

QueueFacts ComputeFacts(const model::PolicySet& p, const model::ClusterQueue& cq) {
  QueueFacts out;
  std::set<std::string> tree;
  if (!cq.cohort.empty()) tree = CohortTree(p, cq.cohort);
  std::map<std::string, std::set<std::string>> flavors_of;  // resource -> flavors with quota for it
  for (const model::ResourceGroup& rg : cq.resource_groups) {
    out.covered.insert(rg.covered_resources.begin(), rg.covered_resources.end());
    for (const model::FlavorQuotas& fq : rg.flavors) {
      for (const model::ResourceQuota& q : fq.resources) {
        flavors_of[q.name].insert(fq.name);
        Capacity c;
        c.flavor = fq.name;
        c.nominal = q.nominal;
        if (!cq.cohort.empty()) {
          const Quantity lendable = Lendable(p, cq, tree, fq.name, q.name);
          c.borrowable = lendable;
          if (q.borrowing_limit.has_value() && *q.borrowing_limit <= lendable) {
            c.borrowable = *q.borrowing_limit;
            c.borrowing_limited = true;
          }
        }
        out.capacities[q.name].push_back(std::move(c));
      }
    }
  }
  for (const auto& [res, flavors] : flavors_of) {
    if (IsGpu(res)) out.node_fit.emplace(res, FitOf(p, flavors, res));
  }
  return out;
}

const QueueFacts& FactsOf(const model::PolicySet& p, const model::ClusterQueue& cq) {
  const model::PolicyDigest& digest = p.sealed.digest();
  if (!digest.known()) {
    // Not sealed: its content may change; nothing is kept.
    thread_local QueueFacts fresh;
    fresh = ComputeFacts(p, cq);
    return fresh;
  }
  thread_local FactsCache cache;
  if (cache.digest != digest.bytes()) {
    cache.queues.clear();
    cache.digest = digest.bytes();
  }
  auto it = cache.queues.find(cq.meta.name);
  if (it == cache.queues.end()) it = cache.queues.emplace(cq.meta.name, ComputeFacts(p, cq)).first;
  return it->second;
}

}  // namespace gangkeeper::admission
