// gangkeeper broker: holds.h — the quota held for preemptors, and the
// checks every admission makes against it.
#include "src/broker/holds.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/inlined_vector.h"

#include "gangkeeper/base/check.h"
#include "src/broker/queues.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

// max(0, a - b).
Quantity Sub0(Quantity a, Quantity b) {
  absl::StatusOr<Quantity> d = a.Sub(b);
  return d.ok() && !d->IsNegative() ? *d : Quantity();
}

// Runs `f` with the preemptors' holds out of the tree (they guide the
// flavor assigner; the decision to admit rests on VirtualFits).
template <typename F>
auto WithoutHolds(Scheduler::State& s, F f) {
  for (Entry* p : s.preemptors) {
    if (p->holding()) GK_CHECK_OK(s.tree.RemoveUsage(p->cinfo().cluster_queue, p->preemption->held));
  }
  auto result = f();
  for (Entry* p : s.preemptors) {
    if (p->holding()) GK_CHECK_OK(s.tree.AddUsage(p->cinfo().cluster_queue, p->preemption->held));
  }
  return result;
}

}  // namespace

namespace {

bool IsOwnEvicting(const Entry* v, const Entry& p) {
  return v != nullptr && v->cinfo().phase == Phase::kEvicting && v->awaited_by == &p &&
         v->cinfo().admission.has_value();
}

}  // namespace

std::vector<const Entry*> OwnEvicting(const Scheduler::State& s, const Entry& p) {
  std::vector<const Entry*> out;
  if (p.preemption == nullptr) return out;
  for (const InstanceKey& k : p.preemption->awaiting) {
    const Entry* v = FindEntry(s, k);
    if (IsOwnEvicting(v, p)) out.push_back(v);
  }
  return out;
}

// (A policy change clears every preemptor; other changes leave its plan
// standing: quota freed elsewhere only makes it fit sooner, once its
// victims have stopped, and retrying it at every completion in its tree
// would cost a preemption search each time.)
bool AwaitingVictims(const Scheduler::State& s, const Entry& e) {
  if (e.preemption == nullptr) return false;
  for (const InstanceKey& k : e.preemption->awaiting) {
    if (IsOwnEvicting(FindEntry(s, k), e)) return true;
  }
  return false;
}

// Per FlavorResource: its need less what its victims' leaving adds to the
// queue's Available (which, in a cohort tree with lending and borrowing
// limits, may be less than their usage), as far as the queue could admit
// it now. Once every victim stopped, that is its whole need.
void PutHold(Scheduler::State& s, Entry* e) {
  if (!e->waiting()) return;
  GK_DCHECK(e->preemption->held.empty());
  const std::string& cq = e->cinfo().cluster_queue;
  const int cq_node = cq.empty() ? -1 : s.tree.ClusterQueueNode(cq);
  if (cq_node < 0) return;
  const ResourceAmounts& needs = e->preemption->need;
  // Available now and with the victims gone, in `needs`' order.
  absl::InlinedVector<Quantity, 4> now;
  for (const auto& [fr, need] : needs) now.push_back(s.tree.Available(cq_node, fr));
  absl::InlinedVector<Quantity, 4> after = now;
  const std::vector<const Entry*> evicting = OwnEvicting(s, *e);
  if (!evicting.empty()) {
    for (const Entry* v : evicting) GK_CHECK_OK(s.tree.RemoveUsage(v->cinfo().admission->cluster_queue, v->cinfo().admission->usage));
    size_t i = 0;
    for (const auto& [fr, need] : needs) after[i++] = s.tree.Available(cq_node, fr);
    for (const Entry* v : evicting) GK_CHECK_OK(s.tree.AddUsage(v->cinfo().admission->cluster_queue, v->cinfo().admission->usage));
  }
  ResourceAmounts hold;
  size_t i = 0;
  for (const auto& [fr, need] : needs) {
    const Quantity freed = Sub0(after[i], now[i]);
    const Quantity room = std::min(Sub0(need, freed), now[i]);
    ++i;
    if (!room.IsZero() && !room.IsNegative()) hold.emplace_hint(hold.end(), fr, room);
  }
  if (!hold.empty() && s.tree.AddUsage(cq_node, hold).ok()) e->preemption->held = std::move(hold);
}

void TakeHold(Scheduler::State& s, Entry* e) {
  if (!e->holding()) return;
  GK_CHECK_OK(s.tree.RemoveUsage(e->cinfo().cluster_queue, e->preemption->held));
  e->preemption->held.clear();
}

bool FitsWithoutHolds(Scheduler::State& s, const std::string& cq, const ResourceAmounts& usage) {
  return WithoutHolds(s, [&] { return s.tree.Fits(cq, usage); });
}

// Holds alone cannot keep the promise: in a cohort tree with lending and
// borrowing limits what a victim gives back depends on everyone else's
// usage.
bool VirtualFits(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& extra,
                 const std::vector<Target>& gone) {
  const int cq_node = s.tree.ClusterQueueNode(cq);
  if (cq_node < 0) return true;
  const int root = s.tree.Root(cq_node);
  std::vector<Entry*> mine;
  for (Entry* p : s.preemptors) {
    if (p == x || p->cinfo().phase != Phase::kPending || p->queued_in.empty()) continue;
    const int n = s.tree.ClusterQueueNode(p->cinfo().cluster_queue);
    if (n >= 0 && s.tree.Root(n) == root) mine.push_back(p);
  }
  if (mine.empty()) return true;
  return WithoutHolds(s, [&] {
    auto move = [&](const std::string& where, const ResourceAmounts& amounts, bool add) {
      if (amounts.empty()) return;
      GK_CHECK_OK(add ? s.tree.AddUsage(where, amounts) : s.tree.RemoveUsage(where, amounts));
    };
    // What can get worse: the FlavorResources added to.
    absl::InlinedVector<const FlavorResource*, 8> frs;
    auto note = [&](const FlavorResource& fr) {
      for (const FlavorResource* f : frs) {
        if (*f == fr) return;
      }
      frs.push_back(&fr);
    };
    for (const auto& [fr, q] : extra) note(fr);
    for (const Entry* p : mine) {
      for (const auto& [fr, q] : p->preemption->need) note(fr);
    }
    // The tree's ClusterQueues with queues (every one of them).
    absl::InlinedVector<int, 32> nodes;
    for (size_t n = 0; n < s.queue_by_node.size(); ++n) {
      if (s.queue_by_node[n] != nullptr && s.tree.Root(static_cast<int>(n)) == root) nodes.push_back(static_cast<int>(n));
    }
    std::vector<Quantity> before;
    before.reserve(nodes.size() * frs.size());
    for (int n : nodes) {
      for (const FlavorResource* fr : frs) before.push_back(s.tree.RawAvailable(n, *fr));
    }
    std::vector<std::pair<std::string, const ResourceAmounts*>> removed;
    for (const Target& t : gone) removed.emplace_back(t.entry->cinfo().admission->cluster_queue, &t.entry->cinfo().admission->usage);
    for (const Entry* p : mine) {
      for (const Entry* v : OwnEvicting(s, *p)) {
        removed.emplace_back(v->cinfo().admission->cluster_queue, &v->cinfo().admission->usage);
      }
    }
    move(cq, extra, true);
    for (const auto& [where, amounts] : removed) move(where, *amounts, false);
    for (const Entry* p : mine) move(p->cinfo().cluster_queue, p->preemption->need, true);
    bool fits = true;
    size_t i = 0;
    for (int n : nodes) {
      for (const FlavorResource* fr : frs) {
        const Quantity after = s.tree.RawAvailable(n, *fr);
        if (after.IsNegative() && after < before[i]) fits = false;
        ++i;
      }
    }
    for (const Entry* p : mine) move(p->cinfo().cluster_queue, p->preemption->need, false);
    for (const auto& [where, amounts] : removed) move(where, *amounts, true);
    move(cq, extra, false);
    return fits;
  });
}

bool MayAdmit(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& usage) {
  return WithoutHolds(s, [&] { return s.tree.Fits(cq, usage); }) && VirtualFits(s, x, cq, usage, {});
}

bool FitsAfterPreemption(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& usage,
                         const std::vector<Target>& targets) {
  for (const Target& t : targets) {
    GK_CHECK_OK(s.tree.RemoveUsage(t.entry->cinfo().admission->cluster_queue, t.entry->cinfo().admission->usage));
  }
  const bool fits = FitsWithoutHolds(s, cq, usage);
  for (const Target& t : targets) {
    GK_CHECK_OK(s.tree.AddUsage(t.entry->cinfo().admission->cluster_queue, t.entry->cinfo().admission->usage));
  }
  // Nor may it take what another waiting preemptor counts on.
  return fits && VirtualFits(s, x, cq, usage, targets);
}

void CycleHolds::HoldForPreemptors(const absl::flat_hash_set<int>& roots) {
  for (Entry* p : s_.preemptors) {
    if (p->cinfo().phase != Phase::kPending || p->queued_in.empty()) continue;
    const int node = s_.tree.ClusterQueueNode(p->cinfo().cluster_queue);
    if (node < 0 || roots.count(s_.tree.Root(node)) == 0) continue;
    PutHold(s_, p);
    held_for_.push_back(p);
  }
}

void CycleHolds::ReserveForUnreclaimable(const std::string& cq, const ResourceAmounts& usage) {
  ResourceAmounts hold;
  const int node = s_.tree.ClusterQueueNode(cq);
  for (const auto& [fr, amount] : usage) {
    const Quota& quota = s_.tree.QuotaAt(node, fr);
    const Quantity used = s_.tree.UsageAt(node, fr);
    Quantity room;
    if (s_.tree.BorrowingWith(node, fr, amount)) {
      room = quota.borrowing_limit.has_value() ? Sub0(quota.nominal.SaturatingAdd(*quota.borrowing_limit), used)
                                               : amount;
    } else {
      room = Sub0(quota.nominal, used);
    }
    room = std::min(room, amount);
    if (!room.IsZero() && !room.IsNegative()) hold[fr] = room;
  }
  if (!hold.empty() && s_.tree.AddUsage(cq, hold).ok()) reserved_.emplace_back(cq, std::move(hold));
}

void CycleHolds::GiveBack() {
  for (const auto& [cq, amounts] : reserved_) GK_CHECK_OK(s_.tree.RemoveUsage(cq, amounts));
  for (Entry* p : s_.preemptors) TakeHold(s_, p);
  for (Entry* p : held_for_) TakeHold(s_, p);
}

}  // namespace gangkeeper::broker
