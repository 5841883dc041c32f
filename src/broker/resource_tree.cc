// gangkeeper broker: ResourceTree (see resource_tree.h), the quota arithmetic
// of KUEUE-SEMANTICS.md §3.4. Thread-compatible.
#include "src/broker/resource_tree.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

// Quota sums saturate: "too large to count" means unlimited.
Quantity SatAdd(Quantity a, Quantity b) { return a.SaturatingAdd(b); }

Quantity SatSub(Quantity a, Quantity b) {
  absl::StatusOr<Quantity> r = a.Sub(b);
  if (r.ok()) return *r;
  return b.IsNegative() ? Quantity::Max() : Quantity::Min();
}

Quantity ClampZero(Quantity q) { return q.IsNegative() ? Quantity() : q; }

std::string FrName(const FlavorResource& fr) { return absl::StrCat(fr.flavor, "/", fr.resource); }

const std::vector<model::ResourceGroup> kNoGroups;

}  // namespace

const ResourceTree::FrState ResourceTree::kEmptyState{};

int ResourceTree::InternFr(const FlavorResource& fr) {
  auto [it, inserted] = fr_ids_.emplace(fr, static_cast<int>(fr_names_.size()));
  if (inserted) {
    fr_names_.push_back(fr);
    for (Node& node : nodes_) node.frs.resize(fr_names_.size());
  }
  return it->second;
}

// Parent cycles: the members of a cycle and their descendants are
// disabled; each cycle is cut so the forest below stays acyclic.
void ResourceTree::DisableCycles() {
  std::vector<int> state(nodes_.size(), 0);  // 0 new, 1 on path, 2 done
  for (int start = 0; start < static_cast<int>(nodes_.size()); ++start) {
    std::vector<int> path;
    int n = start;
    bool disabled = false;
    while (n != -1 && state[n] == 0) {
      state[n] = 1;
      path.push_back(n);
      n = nodes_[n].parent;
    }
    if (n != -1 && state[n] == 1) {
      disabled = true;
      nodes_[path.back()].parent = -1;  // cut the cycle
    } else if (n != -1) {
      disabled = nodes_[n].disabled;
    }
    for (int p : path) {
      state[p] = 2;
      if (disabled) {
        nodes_[p].disabled = true;
        disabled_.insert(nodes_[p].name);
      }
    }
  }
}

// Every node's declared quota per FlavorResource, from its resource groups.
absl::Status ResourceTree::DeclareQuotas(const model::PolicySet& policies) {
  for (Node& node : nodes_) {
    const std::vector<model::ResourceGroup>* groups = &kNoGroups;
    std::string kind = "Cohort";
    if (node.is_cluster_queue) {
      groups = &policies.cluster_queues.at(node.name).resource_groups;
      kind = "ClusterQueue";
    } else if (auto it = policies.cohorts.find(node.name); it != policies.cohorts.end()) {
      groups = &it->second.resource_groups;
    }
    for (const model::ResourceGroup& group : *groups) {
      for (const model::FlavorQuotas& flavor : group.flavors) {
        for (const model::ResourceQuota& rq : flavor.resources) {
          FlavorResource fr{flavor.name, rq.name};
          if (rq.nominal.IsNegative() ||
              (rq.borrowing_limit && rq.borrowing_limit->IsNegative()) ||
              (rq.lending_limit && rq.lending_limit->IsNegative())) {
            return absl::InvalidArgumentError(absl::StrCat(
                kind, " ", node.name, ": quota for ", FrName(fr),
                " is negative; nominalQuota, borrowingLimit and lendingLimit must be >= 0"));
          }
          FrState& st = node.frs[static_cast<size_t>(InternFr(fr))];
          if (st.present) {
            return absl::InvalidArgumentError(absl::StrCat(
                kind, " ", node.name, ": ", FrName(fr),
                " is declared more than once; list each flavor/resource once"));
          }
          st.present = true;
          st.quota = Quota{rq.nominal, rq.borrowing_limit, rq.lending_limit};
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceTree> ResourceTree::Build(const model::PolicySet& policies) {
  ResourceTree tree;
  auto cohort_node = [&tree](const model::CohortName& name) {
    auto [it, inserted] = tree.cohorts_.emplace(name, static_cast<int>(tree.nodes_.size()));
    if (inserted) tree.nodes_.push_back(Node{.name = name});
    return it->second;
  };

  // 1. Cohort nodes, explicit then implicit (missing parents, CQ cohorts).
  for (const auto& [name, cohort] : policies.cohorts) cohort_node(name);
  for (const auto& [name, cohort] : policies.cohorts) {
    if (!cohort.parent.empty()) {
      int parent = cohort_node(cohort.parent);
      tree.nodes_[tree.cohorts_.at(name)].parent = parent;
    }
  }
  for (const auto& [name, cq] : policies.cluster_queues) {
    if (!cq.cohort.empty()) cohort_node(cq.cohort);
  }

  // 2. Parent cycles: members and their descendants are disabled.
  tree.DisableCycles();

  // 3. ClusterQueue nodes.
  for (const auto& [name, cq] : policies.cluster_queues) {
    Node node{.name = name, .is_cluster_queue = true};
    if (!cq.cohort.empty()) {
      node.parent = tree.cohorts_.at(cq.cohort);
      node.disabled = tree.nodes_[node.parent].disabled;
    }
    tree.cluster_queues_.emplace(name, static_cast<int>(tree.nodes_.size()));
    tree.nodes_.push_back(std::move(node));
  }
  for (int i = 0; i < static_cast<int>(tree.nodes_.size()); ++i) {
    if (tree.nodes_[i].parent != -1) tree.nodes_[tree.nodes_[i].parent].children.push_back(i);
  }

  // 4. Declared quotas.
  if (absl::Status declared = tree.DeclareQuotas(policies); !declared.ok()) return declared;

  // 5. Subtree quotas, children before parents.
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(tree.nodes_.size()); ++i) {
    if (tree.nodes_[i].parent == -1) order.push_back(i);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (int c : tree.nodes_[order[i]].children) order.push_back(c);
  }
  GK_CHECK(order.size() == tree.nodes_.size());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node& node = tree.nodes_[*it];
    if (node.is_cluster_queue) {
      node.weight = policies.cluster_queues.at(node.name).fair_sharing_weight;
    } else if (auto c = policies.cohorts.find(node.name); c != policies.cohorts.end()) {
      node.weight = c->second.fair_sharing_weight;
    }
    node.height = 0;
    for (int c : node.children) node.height = std::max(node.height, tree.nodes_[c].height + 1);
    if (!node.is_cluster_queue && node.children.empty()) node.height = 1;
    for (FrState& st : node.frs) st.subtree_quota = st.quota.nominal;
    for (int c : node.children) {
      for (size_t fr = 0; fr < node.frs.size(); ++fr) {
        const FrState& child_state = tree.nodes_[c].frs[fr];
        if (!child_state.present) continue;
        FrState& st = node.frs[fr];
        st.present = true;
        st.subtree_quota = SatAdd(st.subtree_quota, SatSub(child_state.subtree_quota,
                                                           tree.LocalQuota(c, static_cast<int>(fr))));
      }
    }
  }
  return tree;
}

Quantity ResourceTree::LocalQuota(int node, int fr) const {
  const FrState& st = State(node, fr);
  if (!st.quota.lending_limit) return Quantity();
  return ClampZero(SatSub(st.subtree_quota, *st.quota.lending_limit));
}

Quantity ResourceTree::LocalAvailable(int node, int fr) const {
  return ClampZero(SatSub(LocalQuota(node, fr), State(node, fr).usage));
}

Quantity ResourceTree::Contribution(int node, int fr, Quantity usage) const {
  return ClampZero(SatSub(usage, LocalQuota(node, fr)));
}

Quantity ResourceTree::AvailableAt(int node, int fr) const {
  const FrState& st = State(node, fr);
  int parent = nodes_[node].parent;
  if (parent == -1) return SatSub(st.subtree_quota, st.usage);
  Quantity pa = AvailableAt(parent, fr);
  if (st.quota.borrowing_limit) {
    Quantity lq = LocalQuota(node, fr);
    Quantity stored = SatSub(st.subtree_quota, lq);
    Quantity used = ClampZero(SatSub(st.usage, lq));
    pa = std::min(pa, SatAdd(SatSub(stored, used), *st.quota.borrowing_limit));
  }
  return SatAdd(LocalAvailable(node, fr), pa);
}

Quantity ResourceTree::PotentialAvailableAt(int node, int fr) const {
  const FrState& st = State(node, fr);
  int parent = nodes_[node].parent;
  if (parent == -1) return st.subtree_quota;
  Quantity pa = SatAdd(LocalQuota(node, fr), PotentialAvailableAt(parent, fr));
  if (st.quota.borrowing_limit) {
    pa = std::min(pa, SatAdd(st.subtree_quota, *st.quota.borrowing_limit));
  }
  return pa;
}

int ResourceTree::FindClusterQueue(const model::ClusterQueueName& cq) const {
  auto it = cluster_queues_.find(cq);
  return it == cluster_queues_.end() ? -1 : it->second;
}

bool ResourceTree::HasClusterQueue(const model::ClusterQueueName& cq) const {
  return FindClusterQueue(cq) != -1;
}

bool ResourceTree::ClusterQueueDisabled(const model::ClusterQueueName& cq) const {
  int n = FindClusterQueue(cq);
  return n != -1 && nodes_[n].disabled;
}

Quantity ResourceTree::Available(const model::ClusterQueueName& cq,
                                 const FlavorResource& fr) const {
  int n = FindClusterQueue(cq);
  if (n == -1 || nodes_[n].disabled) return Quantity();
  return ClampZero(AvailableAt(n, FrId(fr)));
}

Quantity ResourceTree::Available(int n, const FlavorResource& fr) const {
  if (n < 0 || nodes_[n].disabled) return Quantity();
  return ClampZero(AvailableAt(n, FrId(fr)));
}

Quantity ResourceTree::PotentialAvailable(int n, const FlavorResource& fr) const {
  if (n < 0 || nodes_[n].disabled) return Quantity();
  return ClampZero(PotentialAvailableAt(n, FrId(fr)));
}

Quantity ResourceTree::PotentialAvailable(const model::ClusterQueueName& cq,
                                          const FlavorResource& fr) const {
  int n = FindClusterQueue(cq);
  if (n == -1 || nodes_[n].disabled) return Quantity();
  return ClampZero(PotentialAvailableAt(n, FrId(fr)));
}

Quantity ResourceTree::Usage(const model::ClusterQueueName& cq, const FlavorResource& fr) const {
  int n = FindClusterQueue(cq);
  return n == -1 ? Quantity() : State(n, FrId(fr)).usage;
}

Quantity ResourceTree::Nominal(const model::ClusterQueueName& cq, const FlavorResource& fr) const {
  int n = FindClusterQueue(cq);
  return n == -1 ? Quantity() : State(n, FrId(fr)).quota.nominal;
}

Quantity ResourceTree::Borrowing(const model::ClusterQueueName& cq,
                                 const FlavorResource& fr) const {
  int n = FindClusterQueue(cq);
  if (n == -1) return Quantity();
  const FrState& st = State(n, FrId(fr));
  return ClampZero(SatSub(st.usage, st.quota.nominal));
}

Quantity ResourceTree::CohortUsage(const model::CohortName& cohort,
                                   const FlavorResource& fr) const {
  auto it = cohorts_.find(cohort);
  return it == cohorts_.end() ? Quantity() : State(it->second, FrId(fr)).usage;
}

bool ResourceTree::Fits(const model::ClusterQueueName& cq, const ResourceAmounts& request) const {
  const int n = FindClusterQueue(cq);
  for (const auto& [fr, amount] : request) {
    if (amount > Available(n, fr)) return false;
  }
  return true;
}

absl::Status ResourceTree::AddUsage(const model::ClusterQueueName& cq,
                                    const ResourceAmounts& amounts) {
  return ChangeUsage(cq, amounts, +1);
}

absl::Status ResourceTree::RemoveUsage(const model::ClusterQueueName& cq,
                                       const ResourceAmounts& amounts) {
  return ChangeUsage(cq, amounts, -1);
}

absl::Status ResourceTree::ChangeUsage(const model::ClusterQueueName& cq,
                                       const ResourceAmounts& amounts, int sign) {
  int cq_node = FindClusterQueue(cq);
  if (cq_node == -1) {
    return absl::NotFoundError(absl::StrCat("ClusterQueue ", cq, " is not in the policy set"));
  }
  return ChangeUsageAt(cq_node, amounts, sign);
}

absl::Status ResourceTree::ChangeUsageAt(int cq_node, const ResourceAmounts& amounts, int sign) {
  const std::string& cq = nodes_[cq_node].name;
  struct Update {
    FrState* state;
    Quantity usage;
  };
  // A FlavorResource the tree has not seen gets its slots first: staging
  // below keeps pointers into them.
  for (const auto& [fr, amount] : amounts) {
    if (!amount.IsZero() && !amount.IsNegative() && FrId(fr) < 0) InternFr(fr);
  }
  // Stage every new usage first so that an error changes nothing (marking
  // an undeclared FlavorResource present changes nothing either).
  absl::InlinedVector<Update, 8> updates;
  for (const auto& [fr, amount] : amounts) {
    if (amount.IsNegative()) {
      return absl::InvalidArgumentError(absl::StrCat("ClusterQueue ", cq, ": amount ",
                                                     amount.Format(), " of ", FrName(fr),
                                                     " is negative"));
    }
    if (amount.IsZero()) continue;
    const int id = FrId(fr);
    FrState* st = &nodes_[cq_node].frs[static_cast<size_t>(id)];
    st->present = true;
    Quantity old_usage = st->usage;
    absl::StatusOr<Quantity> new_usage = sign > 0 ? old_usage.Add(amount) : old_usage.Sub(amount);
    if (!new_usage.ok()) return new_usage.status();
    if (new_usage->IsNegative()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ClusterQueue ", cq, ": releasing ", amount.Format(), " of ", FrName(fr),
          " exceeds its usage ", old_usage.Format()));
    }
    int node = cq_node;
    while (true) {
      updates.push_back(Update{st, *new_usage});
      int parent = nodes_[node].parent;
      if (parent == -1) break;
      // addUsage: the parent takes what no longer fits in LocalAvailable;
      // removal gives back exactly what the child stops passing up.
      Quantity old_pass = Contribution(node, id, old_usage);
      Quantity new_pass = Contribution(node, id, *new_usage);
      if (old_pass == new_pass) break;
      absl::StatusOr<Quantity> delta = new_pass.Sub(old_pass);
      if (!delta.ok()) return delta.status();
      st = &nodes_[parent].frs[static_cast<size_t>(id)];
      st->present = true;
      old_usage = st->usage;
      new_usage = old_usage.Add(*delta);
      if (!new_usage.ok()) return new_usage.status();
      GK_CHECK_MSG(!new_usage->IsNegative(), "cohort usage below zero");
      node = parent;
    }
  }
  for (const Update& u : updates) u.state->usage = u.usage;
  return absl::OkStatus();
}

absl::Status ResourceTree::AddUsage(int cq_node, const ResourceAmounts& amounts) {
  return ChangeUsageAt(cq_node, amounts, +1);
}

absl::Status ResourceTree::RemoveUsage(int cq_node, const ResourceAmounts& amounts) {
  return ChangeUsageAt(cq_node, amounts, -1);
}

int ResourceTree::CohortNode(const model::CohortName& cohort) const {
  auto it = cohorts_.find(cohort);
  return it == cohorts_.end() ? -1 : it->second;
}

int ResourceTree::Root(int node) const {
  while (nodes_[node].parent != -1) node = nodes_[node].parent;
  return node;
}

std::vector<FlavorResource> ResourceTree::FlavorResources(int node) const {
  std::vector<FlavorResource> out;
  for (size_t fr = 0; fr < nodes_[node].frs.size(); ++fr) {
    if (nodes_[node].frs[fr].present) out.push_back(fr_names_[fr]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ResourceTree::BorrowingAt(int node, int fr, Quantity extra) const {
  const FrState& st = State(node, fr);
  return SatAdd(st.usage, extra) > st.subtree_quota;
}

bool ResourceTree::BorrowingWith(int node, const FlavorResource& fr, Quantity extra) const {
  return BorrowingAt(node, FrId(fr), extra);
}

int ResourceTree::BorrowingHeight(int cq_node, const FlavorResource& fr_name, Quantity amount) const {
  const int fr = FrId(fr_name);
  if (!BorrowingAt(cq_node, fr, amount) || nodes_[cq_node].parent == -1) return 0;
  Quantity remaining = SatSub(amount, LocalAvailable(cq_node, fr));
  for (int n = nodes_[cq_node].parent; n != -1; n = nodes_[n].parent) {
    if (!BorrowingAt(n, fr, remaining)) return nodes_[n].height;
    remaining = SatSub(remaining, LocalAvailable(n, fr));
  }
  return nodes_[Root(cq_node)].height;
}

int64_t ResourceTree::DominantResourceShare(int node, const ResourceAmounts& extra,
                                            std::string* dominant) const {
  int parent = nodes_[node].parent;
  if (parent == -1) return 0;
  // Borrowed and lendable per resource, summed over flavors.
  std::map<model::ResourceName, std::pair<absl::int128, absl::int128>> per_resource;
  auto account = [&](const FlavorResource& fr_name) {
    const int fr = FrId(fr_name);
    const FrState& st = State(node, fr);
    Quantity used = st.usage;
    if (auto e = extra.find(fr_name); e != extra.end()) used = SatAdd(used, e->second);
    Quantity borrowed = ClampZero(SatSub(used, st.subtree_quota));
    auto& [b, l] = per_resource[fr_name.resource];
    b += borrowed.milli();
    l += ClampZero(PotentialAvailableAt(parent, fr)).milli();
  };
  for (size_t fr = 0; fr < nodes_[node].frs.size(); ++fr) {
    if (nodes_[node].frs[fr].present) account(fr_names_[fr]);
  }
  for (const auto& [fr, amount] : extra) {
    if (!State(node, FrId(fr)).present) account(fr);
  }
  int64_t best = 0;
  bool have = false;
  bool borrowing = false;
  for (const auto& [resource, bl] : per_resource) {  // sorted: ties keep the smaller name
    const auto& [borrowed, lendable] = bl;
    if (borrowed <= 0) continue;
    borrowing = true;
    if (lendable <= 0) continue;
    absl::int128 ratio = borrowed * 1000 / lendable;
    int64_t r = ratio > absl::int128(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(ratio);
    if (!have || r > best) {
      best = r;
      have = true;
      if (dominant != nullptr) *dominant = resource;
    }
  }
  const double weight = nodes_[node].weight;
  if (!borrowing) return 0;
  if (weight <= 0) return INT64_MAX;
  double share = static_cast<double>(best) / weight;
  if (share >= 9.2e18) return INT64_MAX;
  return static_cast<int64_t>(std::ceil(share));
}

absl::Status ResourceTree::CheckInvariants() const {
  for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
    const Node& node = nodes_[n];
    for (const FlavorResource& fr : FlavorResources(n)) {
      const FrState& st = State(n, FrId(fr));
      if (st.usage.IsNegative()) {
        return absl::InternalError(
            absl::StrCat(node.name, ": usage of ", FrName(fr), " is ", st.usage.Format()));
      }
    }
    if (node.is_cluster_queue) continue;
    std::map<FlavorResource, Quantity> want;
    for (const FlavorResource& fr : FlavorResources(n)) want[fr];
    for (int c : node.children) {
      for (const FlavorResource& fr : FlavorResources(c)) {
        want[fr] = SatAdd(want[fr], Contribution(c, FrId(fr), State(c, FrId(fr)).usage));
      }
    }
    for (const auto& [fr, usage] : want) {
      const Quantity have = State(n, FrId(fr)).usage;
      if (have != usage) {
        return absl::InternalError(absl::StrCat("Cohort ", node.name, ": usage of ", FrName(fr),
                                                " is ", have.Format(),
                                                " but its children pass up ", usage.Format()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::broker
