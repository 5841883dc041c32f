// gangkeeper broker: Preemptor (see preemption.h): the candidate sets, their
// order, and the search with fill-back (KUEUE-SEMANTICS.md §3.6, §3.7).
// A workload whose PriorityClass says preemptionPolicy: Never never
// preempts (the webhook resolved that into Workload::preemption_policy).
// A workload preempted once is not a candidate again until something
// changes in its tree (ChurnGuard::Guarded): the anti-churn rule.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "gangkeeper/base/check.h"
#include "src/broker/preemption.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

enum class Class { kHierarchical = 0, kCohort = 1, kSameQueue = 2 };

struct VictimCandidate {
  VictimCandidate(Entry* e, Class c, bool rwb, int node, const char* why)
      : entry(e), cls(c), reclaim_without_borrowing(rwb), cq_node(node), reason(why),
        evicting(e->cinfo().phase == Phase::kEvicting), priority(e->cinfo().priority),
        admitted_at(e->cinfo().admitted_at), uid_prefix(e->order_uid_prefix) {}
  Entry* entry = nullptr;
  Class cls = Class::kSameQueue;
  bool reclaim_without_borrowing = false;  // only usable when the preemptor does not borrow
  int cq_node = -1;
  const char* reason = "InClusterQueue";
  // Sort keys, copied so that sorting does not chase pointers.
  bool evicting = false;
  int32_t priority = 0;
  absl::Time admitted_at;
  // The uid's first eight bytes in big-endian order (Entry's
  // order_uid_prefix): compares like the uid itself as far as they reach,
  // so the full strings are compared only when the prefixes tie (rare for
  // real uids, which are random).
  uint64_t uid_prefix = 0;
};

bool UsesAny(const Entry& e, const std::set<FlavorResource>& frs) {
  if (!e.cinfo().admission.has_value()) return false;
  for (const auto& [fr, q] : e.cinfo().admission->usage) {
    if (q.IsZero()) continue;
    for (const FlavorResource& want : frs) {  // usually one: a linear scan beats a lookup
      if (fr.resource.size() == want.resource.size() && fr.flavor == want.flavor && fr.resource == want.resource) {
        return true;
      }
    }
  }
  return false;
}

// Calls `f` for every gang of `admitted` that holds some of `frs`: with one
// FlavorResource (the flavor assigner's searches) from its index, without
// looking at the others.
template <typename F>
void ForEachUsing(const AdmittedSet& admitted, const std::set<FlavorResource>& frs, F f) {
  if (frs.size() == 1) {
    for (Entry* e : admitted.Using(*frs.begin())) f(e);
    return;
  }
  for (Entry* e : admitted) {
    if (UsesAny(*e, frs)) f(e);
  }
}

bool LowerOrNewerEqual(const Entry& cand, const Entry& in) {
  return cand.cinfo().priority < in.cinfo().priority ||
         (cand.cinfo().priority == in.cinfo().priority && in.cinfo().queued_at < cand.cinfo().queued_at);
}

bool Within(model::WithinClusterQueuePolicy p, const Entry& cand, const Entry& in) {
  switch (p) {
    case model::WithinClusterQueuePolicy::kNever: return false;
    case model::WithinClusterQueuePolicy::kLowerPriority: return cand.cinfo().priority < in.cinfo().priority;
    case model::WithinClusterQueuePolicy::kLowerOrNewerEqualPriority: return LowerOrNewerEqual(cand, in);
  }
  return false;
}

bool Reclaim(model::ReclaimWithinCohortPolicy p, const Entry& cand, const Entry& in) {
  switch (p) {
    case model::ReclaimWithinCohortPolicy::kNever: return false;
    case model::ReclaimWithinCohortPolicy::kLowerPriority: return cand.cinfo().priority < in.cinfo().priority;
    case model::ReclaimWithinCohortPolicy::kAny: return true;
  }
  return false;
}

// VictimCandidate order: already evicting first, then other queues (hierarchy,
// cohort) before the preemptor's own, lower priority, most recently
// admitted, smaller uid.
bool CandidateBefore(const VictimCandidate& a, const VictimCandidate& b) {
  if (a.evicting != b.evicting) return a.evicting;
  if (a.cls != b.cls) return a.cls < b.cls;
  if (a.priority != b.priority) return a.priority < b.priority;
  if (a.admitted_at != b.admitted_at) return a.admitted_at > b.admitted_at;
  if (a.uid_prefix != b.uid_prefix) return a.uid_prefix < b.uid_prefix;
  if (a.entry->cinfo().workload->uid != b.entry->cinfo().workload->uid) {
    return a.entry->cinfo().workload->uid < b.entry->cinfo().workload->uid;
  }
  return a.entry->seq < b.entry->seq;
}

// Candidates in CandidateBefore order, sorted only as far as a walk goes:
// a classical search usually stops after a few victims, and a full sort of
// every candidate of the cohort cost more than the walk. CandidateBefore is
// a total order (the last tie-break is the entry's registration sequence),
// so the order is the one a sort gives.
class CandidateOrder {
 public:
  explicit CandidateOrder(std::vector<VictimCandidate> cands) : heap_(std::move(cands)) {
    std::make_heap(heap_.begin(), heap_.end(), After);
    sorted_.reserve(heap_.size());
  }
  // The i-th candidate, or nullptr past the last. Valid until the next call.
  const VictimCandidate* At(size_t i) {
    while (sorted_.size() <= i && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), After);
      sorted_.push_back(heap_.back());
      heap_.pop_back();
    }
    return i < sorted_.size() ? &sorted_[i] : nullptr;
  }

 private:
  static bool After(const VictimCandidate& a, const VictimCandidate& b) { return CandidateBefore(b, a); }

  std::vector<VictimCandidate> heap_;
  std::vector<VictimCandidate> sorted_;
};

// The tree's ids of a search's FlavorResources (usually one).
using FrIds = absl::InlinedVector<int, 4>;

bool OverNominalAny(const ResourceTree& tree, int node, const FrIds& frs) {
  for (const int fr : frs) {
    if (tree.UsageAt(node, fr) > tree.SubtreeQuotaAt(node, fr)) return true;
  }
  return false;
}

int LowestCommonAncestor(const ResourceTree& tree, int a, int b) {
  // Trees are shallow: walk, do not allocate.
  for (int x = a; x != -1; x = tree.Parent(x)) {
    for (int y = b; y != -1; y = tree.Parent(y)) {
      if (x == y) return x;
    }
  }
  return -1;
}

// The child of `ancestor` on the path from `node` (node itself when its
// parent is `ancestor`).
int ChildToward(const ResourceTree& tree, int node, int ancestor) {
  while (node != -1 && tree.Parent(node) != ancestor) node = tree.Parent(node);
  return node;
}

}  // namespace

// The search shared by classical and fair-sharing preemption.
class Preemptor::Search {
 public:
  Search(const Preemptor& p, const Entry& in, const model::ClusterQueue& cq, const ResourceAmounts& request,
         const std::set<FlavorResource>& frs)
      : p_(p), tree_(p.tree_), in_(in), cq_(cq), request_(request), frs_(frs) {
    cq_node_ = tree_.ClusterQueueNode(cq.meta.name);
    for (const FlavorResource& fr : frs_) fr_ids_.push_back(tree_.FrId(fr));
  }

  std::vector<Target> Classical();
  std::vector<Target> Fair();

 private:
  bool Fits(bool allow_borrowing) const {
    for (const auto& [fr, amount] : request_) {
      if (amount > tree_.Available(cq_node_, fr)) return false;
      if (!allow_borrowing && tree_.BorrowingWith(cq_node_, fr, amount)) return false;
    }
    return true;
  }
  void Take(const VictimCandidate& c) {
    GK_CHECK_OK(tree_.RemoveUsage(c.cq_node, c.entry->cinfo().admission->usage));
  }
  void Give(const VictimCandidate& c) {
    GK_CHECK_OK(tree_.AddUsage(c.cq_node, c.entry->cinfo().admission->usage));
  }
  // Fill back, restore the tree, and return the victims.
  std::vector<Target> Finish(std::vector<VictimCandidate> taken, bool allow_borrowing) {
    for (int i = static_cast<int>(taken.size()) - 2; i >= 0; --i) {
      Give(taken[i]);
      if (Fits(allow_borrowing)) {
        taken.erase(taken.begin() + i);
      } else {
        Take(taken[i]);
      }
    }
    std::vector<Target> out;
    for (const VictimCandidate& c : taken) {
      Give(c);
      out.push_back(Target{c.entry, c.reason});
    }
    return out;
  }
  void Restore(const std::vector<VictimCandidate>& taken) {
    for (const VictimCandidate& c : taken) Give(c);
  }
  std::vector<VictimCandidate> SameQueueCandidates() const;
  void CohortCandidates(std::vector<VictimCandidate>* out) const;
  void Collect(int node, bool advantage, std::vector<VictimCandidate>* out) const;
  bool StillUseful(const VictimCandidate& c) const;
  void OwnEvicting(Class cls, const char* reason, std::vector<VictimCandidate>* out) const;
  // A necessary condition, cheap to check: evicting every candidate frees
  // at least what is missing on every FlavorResource that needs it.
  bool Freeable(const std::vector<VictimCandidate>& cands) const {
    for (const FlavorResource& fr : frs_) {
      auto want = request_.find(fr);
      if (want == request_.end()) continue;
      absl::StatusOr<Quantity> m = want->second.Sub(tree_.Available(cq_node_, fr));
      const Quantity missing = m.ok() ? *m : want->second;
      if (missing.IsZero() || missing.IsNegative()) continue;
      Quantity freed;
      for (const VictimCandidate& c : cands) {
        auto u = c.entry->cinfo().admission->usage.find(fr);
        if (u != c.entry->cinfo().admission->usage.end()) freed = freed.SaturatingAdd(u->second);
        if (freed >= missing) break;
      }
      if (freed < missing) return false;
    }
    return true;
  }

  const Preemptor& p_;
  ResourceTree& tree_;
  const Entry& in_;
  const model::ClusterQueue& cq_;
  const ResourceAmounts& request_;
  const std::set<FlavorResource>& frs_;
  FrIds fr_ids_;  // frs_'s ids in the tree
  int cq_node_ = -1;
};

std::vector<VictimCandidate> Preemptor::Search::SameQueueCandidates() const {
  std::vector<VictimCandidate> out;
  out.reserve(64);  // the cohort's are appended: most searches collect dozens
  auto q = p_.queues_.find(cq_.meta.name);
  if (q == p_.queues_.end()) return out;
  ForEachUsing(q->second.admitted, frs_, [&](Entry* e) {
    if (e == &in_) return;
    if (e->cinfo().phase != Phase::kEvicting && !Within(cq_.preemption.within_cluster_queue, *e, in_)) return;
    if (p_.guard_.Guarded(*e) || AwaitedByOther(*e, in_)) return;
    out.push_back(VictimCandidate{e, Class::kSameQueue, false, cq_node_, "InClusterQueue"});
  });
  return out;
}

void Preemptor::Search::Collect(int node, bool advantage, std::vector<VictimCandidate>* out) const {
  if (!OverNominalAny(tree_, node, fr_ids_)) return;
  if (!tree_.IsClusterQueue(node)) {
    for (int child : tree_.Children(node)) Collect(child, advantage, out);
    return;
  }
  const Queue* q = p_.queue_by_node_[static_cast<size_t>(node)];
  if (q == nullptr) return;
  ForEachUsing(q->admitted, frs_, [&](Entry* e) {
    if (e->cinfo().phase != Phase::kEvicting && !Reclaim(cq_.preemption.reclaim_within_cohort, *e, in_)) return;
    if (p_.guard_.Guarded(*e) || AwaitedByOther(*e, in_)) return;
    VictimCandidate c{e, advantage ? Class::kHierarchical : Class::kCohort, false, node, "InCohortReclamation"};
    if (!advantage) {
      const auto& p = cq_.preemption;
      if (p.borrow_within_cohort == model::BorrowWithinCohortPolicy::kNever ||
          e->cinfo().priority >= in_.cinfo().priority ||
          (p.borrow_max_priority_threshold.has_value() && e->cinfo().priority > *p.borrow_max_priority_threshold)) {
        c.reclaim_without_borrowing = true;
      } else {
        c.reason = "InCohortReclaimWhileBorrowing";
      }
    }
    out->push_back(c);
  });
}

void Preemptor::Search::CohortCandidates(std::vector<VictimCandidate>* out) const {
  if (cq_.preemption.reclaim_within_cohort == model::ReclaimWithinCohortPolicy::kNever) return;
  // Advantage: the preemptor's side of the tree holds the request within
  // its own quota at this level.
  auto fits_in = [&](int node) {
    for (const auto& [fr, amount] : request_) {
      if (frs_.count(fr) == 0) continue;
      if (tree_.BorrowingWith(node, fr, amount)) return false;
    }
    return true;
  };
  bool advantage = fits_in(cq_node_);
  int child = cq_node_;
  for (int a = tree_.Parent(cq_node_); a != -1; child = a, a = tree_.Parent(a)) {
    if (!advantage && child != cq_node_) advantage = fits_in(child);
    for (int sibling : tree_.Children(a)) {
      if (sibling != child) Collect(sibling, advantage, out);
    }
  }
}

bool Preemptor::Search::StillUseful(const VictimCandidate& c) const {
  if (c.cls == Class::kSameQueue || c.evicting) return true;  // an evicting gang frees its quota anyway
  const int lca = LowestCommonAncestor(tree_, c.cq_node, cq_node_);
  for (int n = c.cq_node; n != -1 && n != lca; n = tree_.Parent(n)) {
    if (!OverNominalAny(tree_, n, fr_ids_)) return false;
  }
  return true;
}

// The preemptor's own victims still being evicted, in other ClusterQueues,
// that the walk over borrowing queues did not find (their queue is back
// within its nominal quota): they free their quota all the same, and
// choosing other victims instead would preempt twice for one admission.
void Preemptor::Search::OwnEvicting(Class cls, const char* reason, std::vector<VictimCandidate>* out) const {
  if (!in_.waiting()) return;
  for (const InstanceKey& k : in_.preemption->awaiting) {
    auto list = p_.entries_.find(k.key);
    if (list == p_.entries_.end()) continue;
    Entry* e = nullptr;
    for (const std::unique_ptr<Entry>& x : list->second) {
      if (k.key.pod_group || x->cinfo().workload->uid == k.uid) e = x.get();
    }
    if (e == nullptr) continue;
    if (e->cinfo().phase != Phase::kEvicting || e->awaited_by != &in_ || !UsesAny(*e, frs_)) continue;
    if (std::any_of(out->begin(), out->end(), [&](const VictimCandidate& c) { return c.entry == e; })) continue;
    const int node = tree_.ClusterQueueNode(e->cinfo().admission->cluster_queue);
    if (node < 0 || node == cq_node_) continue;  // the same queue's are collected anyway
    out->push_back(VictimCandidate{e, cls, false, node, reason});
  }
}

std::vector<Target> Preemptor::Search::Classical() {
  std::vector<VictimCandidate> cands = SameQueueCandidates();
  CohortCandidates(&cands);
  OwnEvicting(Class::kCohort, "InCohortReclamation", &cands);
  if (cands.empty() || !Freeable(cands)) return {};
  bool has_other = false;
  bool has_hier = false;
  for (const VictimCandidate& c : cands) {
    has_other = has_other || c.cls != Class::kSameQueue;
    has_hier = has_hier || c.cls == Class::kHierarchical;
  }
  const bool bwc_forbidden = cq_.preemption.borrow_within_cohort == model::BorrowWithinCohortPolicy::kNever;
  bool under_nominal = true;
  for (const FlavorResource& fr : frs_) {
    under_nominal = under_nominal && tree_.UsageAt(cq_node_, fr) < tree_.QuotaAt(cq_node_, fr).nominal;
  }
  std::vector<bool> attempts;
  if (!has_other || (bwc_forbidden && !under_nominal)) {
    attempts = {true};
  } else if (bwc_forbidden && !has_hier) {
    attempts = {false, true};
  } else {
    attempts = {true, false};
  }
  CandidateOrder order(std::move(cands));
  for (bool allow_borrowing : attempts) {
    std::vector<VictimCandidate> taken;
    for (size_t i = 0; const VictimCandidate* next = order.At(i); ++i) {
      const VictimCandidate& c = *next;
      if (c.reclaim_without_borrowing && allow_borrowing) continue;
      if (!StillUseful(c)) continue;
      Take(c);
      taken.push_back(c);
      if (Fits(allow_borrowing)) return Finish(std::move(taken), allow_borrowing);
    }
    Restore(taken);
  }
  return {};
}

std::vector<Target> Preemptor::Search::Fair() {
  std::vector<VictimCandidate> own = SameQueueCandidates();
  // Cross-queue candidates: admitted gangs of borrowing ClusterQueues
  // anywhere in the preemptor's tree, per reclaimWithinCohort.
  std::map<int, std::vector<VictimCandidate>> others;  // by ClusterQueue node
  if (cq_.preemption.reclaim_within_cohort != model::ReclaimWithinCohortPolicy::kNever && cq_node_ >= 0) {
    const int root = tree_.Root(cq_node_);
    for (const auto& [name, q] : p_.queues_) {
      const int node = tree_.ClusterQueueNode(name);
      if (node < 0 || node == cq_node_ || tree_.Root(node) != root || !OverNominalAny(tree_, node, fr_ids_)) continue;
      ForEachUsing(q.admitted, frs_, [&](Entry* e) {
        if (e->cinfo().phase != Phase::kEvicting && !Reclaim(cq_.preemption.reclaim_within_cohort, *e, in_)) return;
        if (p_.guard_.Guarded(*e) || AwaitedByOther(*e, in_)) return;
        others[node].push_back(VictimCandidate{e, Class::kCohort, false, node, "InCohortFairSharing"});
      });
    }
  }
  {
    std::vector<VictimCandidate> evicting;
    for (const auto& [node, list] : others) evicting.insert(evicting.end(), list.begin(), list.end());
    const size_t before = evicting.size();
    OwnEvicting(Class::kCohort, "InCohortFairSharing", &evicting);
    for (size_t i = before; i < evicting.size(); ++i) others[evicting[i].cq_node].push_back(evicting[i]);
  }
  std::sort(own.begin(), own.end(), CandidateBefore);
  for (auto& [node, list] : others) std::sort(list.begin(), list.end(), CandidateBefore);
  if (own.empty() && others.empty()) return {};
  if (!own.empty()) others[cq_node_] = own;

  auto within_nominal = [&] {
    for (const auto& [fr, amount] : request_) {
      if (frs_.count(fr) != 0 && tree_.BorrowingWith(cq_node_, fr, amount)) return false;
    }
    return true;
  };
  // DRS of the preemptor's and the target's "almost LCA" nodes.
  auto sides = [&](int target) {
    const int lca = LowestCommonAncestor(tree_, cq_node_, target);
    return std::pair<int, int>{ChildToward(tree_, cq_node_, lca), ChildToward(tree_, target, lca)};
  };
  // Kueue's default order unless the Configuration names one.
  static const model::KueueConfiguration kDefaultConfiguration;
  const std::vector<model::FairPreemptionStrategy>& strategies =
      (p_.config_ != nullptr ? *p_.config_ : kDefaultConfiguration).preemption_strategies;
  std::vector<VictimCandidate> taken;
  std::vector<VictimCandidate> retry;
  std::map<int, size_t> next;  // per queue: the next candidate
  const ResourceAmounts none;
  while (true) {
    // The queue with the highest share that still has candidates.
    int best = -1;
    int64_t best_share = -1;
    for (const auto& [node, list] : others) {
      if (next[node] >= list.size()) continue;
      int64_t share = node == cq_node_ ? INT64_MAX : tree_.DominantResourceShare(node, none);
      if (best == -1 || share > best_share) {
        best = node;
        best_share = share;
      }
    }
    if (best == -1) break;
    const VictimCandidate c = others[best][next[best]++];
    if (best == cq_node_ || c.evicting) {  // an evicting gang goes anyway
      Take(c);
      taken.push_back(c);
    } else if (within_nominal()) {
      VictimCandidate r = c;
      r.reason = "InCohortReclamation";
      Take(r);
      taken.push_back(r);
    } else {
      auto [p_side, t_side] = sides(best);
      const int64_t preemptor_share = tree_.DominantResourceShare(p_side, request_);
      const int64_t target_before = tree_.DominantResourceShare(t_side, none);
      Take(c);
      const int64_t target_after = tree_.DominantResourceShare(t_side, none);
      const bool passed = strategies.front() == model::FairPreemptionStrategy::kLessThanInitialShare
                              ? preemptor_share < target_before
                              : preemptor_share <= target_after;
      if (passed) {
        taken.push_back(c);
      } else {
        Give(c);
        retry.push_back(c);
        continue;
      }
    }
    if (Fits(true)) return Finish(std::move(taken), true);
  }
  // Second strategy: less than the target's initial share, one per queue.
  if (strategies.size() < 2) {
    Restore(taken);
    return {};
  }
  std::set<int> used;
  for (const VictimCandidate& c : retry) {
    if (used.count(c.cq_node) != 0) continue;
    auto [p_side, t_side] = sides(c.cq_node);
    const int64_t target_before = tree_.DominantResourceShare(t_side, none);
    const int64_t preemptor_share = tree_.DominantResourceShare(p_side, request_);
    if (preemptor_share < target_before) {
      used.insert(c.cq_node);
      Take(c);
      taken.push_back(c);
      if (Fits(true)) return Finish(std::move(taken), true);
    }
  }
  Restore(taken);
  return {};
}

std::vector<Target> Preemptor::FindTargets(const Entry& in, const model::ClusterQueue& cq, bool fair_sharing,
                                           const ResourceAmounts& request,
                                           const std::set<FlavorResource>& need_preemption) {
  if (!in.cinfo().can_preempt || tree_.ClusterQueueNode(cq.meta.name) < 0) return {};
  Search search(*this, in, cq, request, need_preemption);
  return fair_sharing ? search.Fair() : search.Classical();
}

bool Preemptor::CanPreemptFor(const Entry& in, const model::ClusterQueue& cq, bool fair_sharing,
                              const FlavorResource& fr, Quantity amount, bool* only_other_queues,
                              std::vector<Target>* targets) {
  *only_other_queues = false;
  targets->clear();
  if (!in.cinfo().can_preempt || tree_.ClusterQueueNode(cq.meta.name) < 0) return false;
  const ResourceAmounts request{{fr, amount}};
  const std::set<FlavorResource> frs{fr};
  Search search(*this, in, cq, request, frs);
  *targets = fair_sharing ? search.Fair() : search.Classical();
  if (targets->empty()) return false;
  *only_other_queues = std::all_of(targets->begin(), targets->end(), [&](const Target& t) {
    return t.entry->cinfo().admission->cluster_queue != cq.meta.name;
  });
  return true;
}

}  // namespace gangkeeper::broker
