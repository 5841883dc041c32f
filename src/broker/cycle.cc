// gangkeeper broker: the scheduling cycle and Scheduler::Schedule()
// (DESIGN §2, KUEUE-SEMANTICS.md §3.3).
//
// A cycle runs in phases, numbered as in DESIGN §2:
//   1. heads of queues    — HeadsOfQueues(): the queues with a head to try,
//                           and the holds of the preemptors waiting there;
//   2. flavor assignment  — AssignFlavors(): each queue's head is nominated
//                           with its flavors (and its victims when it needs
//                           preemption);
//   3. fit / borrow / preempt — FitBorrowOrPreempt(): the nominations, in
//                           entry order (borrowing last, or the fair-sharing
//                           tournament), are decided against the usage as it
//                           is now: preempt, or wait (NoFit);
//   4. reserve gang       — ReserveGang(): a gang that fits gets its whole
//                           quota in one step, or none.
// Phases 2-4 repeat in rounds while something happened (a cycle admits as
// many workloads of a queue as fit, unless one_head_per_cycle), then the
// holds are given back (holds.h). Only the broker thread runs it.
#include "gangkeeper/broker/scheduler.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/clock.h"
#include "src/broker/holds.h"
#include "src/broker/queues.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

struct Nomination {
  size_t slot = 0;  // the cycle's queue slot
  Entry* entry = nullptr;
  const model::ClusterQueue* cq = nullptr;
  bool fair = false;  // its cohort tree uses fair sharing
  AssignmentResult result;
  std::vector<Target> targets;
};

// Fair sharing order between two nominations of the same tree: lower
// dominant share (with the workload added) at the level where their paths
// meet, then priority, then queue time.
bool FairBefore(const State& s, const Nomination& a, const Nomination& b) {
  const int na = s.tree.ClusterQueueNode(a.cq->meta.name);
  const int nb = s.tree.ClusterQueueNode(b.cq->meta.name);
  if (na >= 0 && nb >= 0 && s.tree.Root(na) == s.tree.Root(nb)) {
    std::set<int> up;
    for (int n = na; n != -1; n = s.tree.Parent(n)) up.insert(n);
    int lca = -1;
    for (int n = nb; n != -1 && lca == -1; n = s.tree.Parent(n)) {
      if (up.count(n) != 0) lca = n;
    }
    auto child = [&](int n) {
      while (n != -1 && s.tree.Parent(n) != lca) n = s.tree.Parent(n);
      return n;
    };
    const int64_t da = s.tree.DominantResourceShare(child(na), a.result.assignment.usage);
    const int64_t db = s.tree.DominantResourceShare(child(nb), b.result.assignment.usage);
    if (da != db) return da < db;
  }
  if (a.entry->cinfo().priority != b.entry->cinfo().priority) return a.entry->cinfo().priority > b.entry->cinfo().priority;
  return QueueOrder()(a.entry, b.entry);
}

bool ClassicalBefore(const Nomination& a, const Nomination& b) {
  if (a.result.assignment.borrowing_level != b.result.assignment.borrowing_level) {
    return a.result.assignment.borrowing_level < b.result.assignment.borrowing_level;
  }
  if (a.entry->cinfo().priority != b.entry->cinfo().priority) return a.entry->cinfo().priority > b.entry->cinfo().priority;
  return QueueOrder()(a.entry, b.entry);
}

// What decides a gang's fate besides the queue state: its pod sets and
// its priority.
// Every requeued head of a long queue is asked this in every cycle: kept
// in the entry until SetOrderKey says the inputs changed (not for pod
// groups, whose pod sets change as members arrive).
size_t ShapeOf(const Entry& e) {
  if (e.shape_cached) return e.shape_hash;
  size_t h = absl::HashOf(e.cinfo().priority, e.cinfo().can_preempt);
  for (const workload::PodSet& ps : e.PodSets()) {
    h = absl::HashOf(h, ps.count, ps.MinCount(), ps.tolerations.size());
    for (const auto& [res, q] : ps.requests) h = absl::HashOf(h, res, q);
    for (const auto& [k, v] : ps.node_selector) h = absl::HashOf(h, k, v);
    for (const model::Toleration& t : ps.tolerations) h = absl::HashOf(h, t.key, t.op, t.value, t.effect);
  }
  if (!e.is_pod_group()) {
    e.shape_hash = h;
    e.shape_cached = true;
  }
  return h;
}

// A preemption victim's phrase for the audit and events.
const char* PreemptionWhy(const std::string& reason) {
  if (reason == "InClusterQueue") return "prioritization in the ClusterQueue";
  if (reason == "InCohortReclaimWhileBorrowing") return "reclamation within the cohort while borrowing";
  if (reason == "InCohortFairSharing") return "fair sharing within the cohort";
  return "reclamation within the cohort";
}

class Cycle {
 public:
  Cycle(State& s, absl::Time now, ScheduleStats& stats, const base::Stopwatch& watch)
      : s_(s), now_(now), stats_(stats), watch_(watch), holds_(s) {}

  // Returns true when it admitted, preempted, or set a head aside.
  bool Run();

 private:
  // A queue with something to try, looked up once per cycle.
  struct Slot {
    const std::string* name;
    Queue* q;
    const model::ClusterQueue* cq;
    bool done = false;  // finished for this cycle
    int root = -1;      // its cohort tree's root node
    // BestEffortFIFO: shapes that found no room in this cycle, with the
    // reason as the assigner gave it (SetReason writes each head's).
    absl::flat_hash_map<size_t, Entry::FreshReason> failed_shapes;
  };

  // 1. Heads of queues.
  void HeadsOfQueues();
  // 2. Flavor assignment: a nomination per queue with a head to try.
  std::vector<Nomination> AssignFlavors();
  bool SetAsideEquivalentHeads(Slot& slot);
  Nomination Nominate(size_t slot_index, Entry* head);
  // 3. Fit / borrow / preempt, in entry order.
  void DecideInOrder(std::vector<Nomination>& noms);
  bool ReclaimableBorrower(const Nomination& n) const;
  void FitBorrowOrPreempt(Nomination& n);
  void Preempt(Nomination& n);
  void WaitForVictims(Nomination& n, std::vector<std::string> names);
  void NoFit(Nomination& n);
  void BlockStrictFifoQueue(Nomination& n);
  void SetAside(Nomination& n, Entry::FreshReason why);
  // 4. Reserve gang.
  void ReserveGang(Nomination& n);

  State& s_;
  const absl::Time now_;
  ScheduleStats& stats_;
  const base::Stopwatch& watch_;
  std::vector<Slot> slots_;
  // The slots that admitted a workload within their own nominal quota in
  // the current round: they may have more such demand behind
  // (ReclaimableBorrower).
  std::vector<size_t> lenders_;
  CycleHolds holds_;
  bool progress_ = false;        // admitted or preempted
  bool round_progress_ = false;  // ... or set a head aside, in this round
  bool set_aside_ = false;
};

bool Cycle::Run() {
  HeadsOfQueues();
  while (true) {
    std::vector<Nomination> noms = AssignFlavors();
    if (noms.empty()) break;
    round_progress_ = false;
    lenders_.clear();
    DecideInOrder(noms);
    if (s_.options.one_head_per_cycle || !round_progress_) break;
    if (watch_.Elapsed() >= s_.options.time_budget) {
      stats_.more = true;  // the rest next time; the queues keep their state
      break;
    }
  }
  holds_.GiveBack();
  // With one head per cycle, a head set aside leaves another to try: one
  // more cycle (otherwise the rounds above already tried it).
  return progress_ || (set_aside_ && s_.options.one_head_per_cycle);
}

void Cycle::HeadsOfQueues() {
  // By tree node rather than through the queue map (a fixed cost of every
  // cycle): ClusterQueue nodes are numbered in name order, the map's order,
  // and every queue with entries has a node (Enqueue files into live
  // ClusterQueues only, and a policy change re-files everything).
  for (size_t node = 0; node < s_.queue_by_node.size(); ++node) {
    if (s_.queue_by_node[node] == nullptr) continue;
    Queue& q = *s_.queue_by_node[node];
    if (q.active.empty() || q.blocked) continue;
    const std::string& name = s_.tree.NodeName(static_cast<int>(node));
    const model::ClusterQueue* cq = LiveClusterQueue(s_, name);
    if (cq == nullptr || ClusterQueueBlocked(s_, name).has_value()) {
      // The policy changed under it; Enqueue re-files the entries.
      std::vector<Entry*> moved(q.active.begin(), q.active.end());
      for (Entry* e : moved) {
        TakeHold(s_, e);
        Enqueue(s_, e);
      }
      continue;
    }
    slots_.push_back(Slot{&name, &q, cq, false, s_.tree.Root(static_cast<int>(node))});
  }
  if (s_.preemptors.empty()) return;
  absl::flat_hash_set<int> roots;
  for (const Slot& slot : slots_) {
    const int node = s_.tree.ClusterQueueNode(*slot.name);
    if (node >= 0) roots.insert(s_.tree.Root(node));
  }
  holds_.HoldForPreemptors(roots);
}

std::vector<Nomination> Cycle::AssignFlavors() {
  std::vector<Nomination> noms;
  for (size_t slot_index = 0; slot_index < slots_.size(); ++slot_index) {
    Slot& slot = slots_[slot_index];
    Queue& q = *slot.q;
    if (slot.done || q.active.empty() || q.blocked) continue;
    if (!SetAsideEquivalentHeads(slot)) continue;
    Entry* head = *q.active.begin();
    if (head->waiting() && AwaitingVictims(s_, *head)) {
      // A preemptor whose victims are all still stopping: trying it again
      // would choose them again. Its hold stays.
      q.blocked = true;
      continue;
    }
    noms.push_back(Nominate(slot_index, head));
  }
  return noms;
}

// Scheduling equivalence (Kueue's SchedulingEquivalenceHashing): in a
// BestEffortFIFO queue, a head shaped exactly like one that found no room
// earlier in this cycle finds none either; it is set aside without trying.
// False when that leaves the queue empty.
bool Cycle::SetAsideEquivalentHeads(Slot& slot) {
  const model::ClusterQueue* cq = slot.cq;
  if (cq->queueing_strategy != model::QueueingStrategy::kBestEffortFIFO ||
      cq->preemption.within_cluster_queue == model::WithinClusterQueuePolicy::kLowerOrNewerEqualPriority) {
    return true;
  }
  Queue& q = *slot.q;
  if (slot.failed_shapes.empty() || q.active.empty()) return !q.active.empty();
  // Nothing is admitted during the pass: the heads of one shape share its
  // reason (SetAsideReason). First the run of heads to set aside is found
  // and told, then it moves as a whole.
  // After a completion RequeueInadmissible put thousands back, and each
  // head is a walk through cold memory (its entry, then its reason): the
  // entry a few places ahead and the next head's reason are asked for
  // while this one is handled.
  constexpr int kAhead = 4;
  absl::flat_hash_map<size_t, SharedReason> shared;
  const auto end = q.active.end();
  auto stop = q.active.begin();
  auto ahead = stop;
  for (int i = 0; i < kAhead && ahead != end; ++i) ++ahead;
  size_t count = 0;
  while (stop != end) {
    if (ahead != end) __builtin_prefetch(*ahead++);
    if (auto next = std::next(stop); next != end) __builtin_prefetch(&(*next)->cinfo().reason);
    Entry* head = *stop;
    if (head->waiting()) break;  // a preemptor is always tried
    const size_t shape = ShapeOf(*head);
    auto same = slot.failed_shapes.find(shape);
    if (same == slot.failed_shapes.end()) break;
    SetAsideReason(s_, head, same->second, &shared[shape]);
    ++stop;
    ++count;
  }
  if (stop == end) {
    MergeInto(q.inadmissible, q.active);  // the whole queue, as after a requeue
  } else {
    // Inserted at the end when they sort last (the B-tree's iterators do
    // not survive an erase: the run is copied, then erased).
    for (auto it = q.active.begin(); it != stop; ++it) q.inadmissible.insert(q.inadmissible.end(), *it);
    q.active.erase(q.active.begin(), stop);
  }
  stats_.equivalent += count;
  return !q.active.empty();
}

Nomination Cycle::Nominate(size_t slot_index, Entry* head) {
  const model::ClusterQueue* cq = slots_[slot_index].cq;
  // Its own hold is not in its way.
  TakeHold(s_, head);
  Nomination n;
  n.slot = slot_index;
  n.entry = head;
  n.cq = cq;
  n.fair = s_.FairSharingFor(cq->meta.name);
  ++stats_.nominated;
  if (head->waiting() && MayAdmit(s_, head, cq->meta.name, head->preemption->plan.usage)) {
    // A preemptor whose victims stopped takes the flavors it preempted
    // for (its hold is there), not a fresh scan that might prefer a
    // flavor needing other victims.
    n.result.mode = FitMode::kFit;
    n.result.assignment = head->preemption->plan;
  } else {
    n.result = s_.AssignFlavors(*n.entry, *cq, n.fair);
  }
  if (n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim) {
    n.targets = n.result.targets.has_value() ? *std::move(n.result.targets)
                                             : s_.FindTargets(*n.entry, *cq, n.fair, n.result);
  }
  // Neither fits nor finds victims whole: the largest counts that do
  // (Kueue's partial admission); otherwise the whole gang's answer stands.
  if (n.result.mode != FitMode::kFit && n.targets.empty() && CanBePartiallyAdmitted(head->PodSets())) {
    if (std::optional<State::Reduced> reduced = s_.AssignReduced(*n.entry, *cq, n.fair)) {
      n.result = std::move(reduced->result);
      n.targets = std::move(reduced->targets);
      ++stats_.partial;
    }
  }
  // Until it is processed, what it holds stays held for the others.
  if (head->waiting()) PutHold(s_, head);
  return n;
}

void Cycle::DecideInOrder(std::vector<Nomination>& noms) {
  // Classical order: not borrowing first, then priority, then queue order;
  // with fair sharing, the tournament is re-run after every admission
  // (shares changed).
  const bool fair = std::any_of(noms.begin(), noms.end(), [](const Nomination& n) { return n.fair; });
  if (!fair) std::stable_sort(noms.begin(), noms.end(), ClassicalBefore);
  for (size_t i = 0; i < noms.size(); ++i) {
    if (fair) {
      auto best = std::min_element(noms.begin() + static_cast<std::ptrdiff_t>(i), noms.end(),
                                   [&](const Nomination& a, const Nomination& b) { return FairBefore(s_, a, b); });
      std::iter_swap(noms.begin() + static_cast<std::ptrdiff_t>(i), best);
    }
    if (ReclaimableBorrower(noms[i])) {
      // Tried again next round (the lender's admission was progress), once
      // the lender's own demand has been served or has stopped.
      ++stats_.deferred_borrowers;
      continue;
    }
    FitBorrowOrPreempt(noms[i]);
  }
}

// Whether `n` fits only by borrowing quota that a ClusterQueue of its tree
// would at once take back: one that admitted within its own nominal quota
// in this round, has more pending workloads to try, and may reclaim from
// `n` (reclaimWithinCohort Any, or LowerPriority and its next head ranks
// above `n`). Kueue admits such a borrower, and in its next cycle the
// lender's next head preempts it; run to a fixed point here, that was an
// admission and a preemption of the same gang in one pass with nothing
// changed between them (the e2e baseline: one gang admitted and preempted
// 131 times, 10,000 preemptions for 15,000 workloads). Deferred, the
// borrower takes what the lender's demand leaves. Not with fair sharing
// (its own order) nor one_head_per_cycle (Kueue's cycle exactly).
bool Cycle::ReclaimableBorrower(const Nomination& n) const {
  if (n.fair || s_.options.one_head_per_cycle || n.result.mode != FitMode::kFit ||
      n.result.assignment.borrowing_level == 0) {
    return false;
  }
  const Slot& mine = slots_[n.slot];
  for (const size_t i : lenders_) {
    const Slot& lender = slots_[i];
    if (i == n.slot || lender.root != mine.root || lender.done || lender.q->blocked || lender.q->active.empty()) {
      continue;
    }
    switch (lender.cq->preemption.reclaim_within_cohort) {
      case model::ReclaimWithinCohortPolicy::kAny: return true;
      case model::ReclaimWithinCohortPolicy::kLowerPriority:
        if ((*lender.q->active.begin())->cinfo().priority > n.entry->cinfo().priority) return true;
        break;
      case model::ReclaimWithinCohortPolicy::kNever: break;
    }
  }
  return false;
}

void Cycle::FitBorrowOrPreempt(Nomination& n) {
  TakeHold(s_, n.entry);
  if (AdmissionBlocked(s_)) {
    // waitForPodsReady blockAdmission: a gang admitted earlier in this
    // pass is not ready yet; nothing else is admitted (nor preempts) until
    // it is, or is evicted.
    if (n.entry->waiting()) PutHold(s_, n.entry);
    PendingReason r;
    r.code = PendingReason::Code::kWaitingForQuota;
    r.message = "waitForPodsReady blockAdmission: waiting until every admitted workload's pods are ready";
    SetReason(s_, n.entry, r);
    slots_[n.slot].done = true;
    return;
  }
  if (n.result.mode == FitMode::kFit) {
    ReserveGang(n);
  } else if ((n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim) && !n.targets.empty()) {
    Preempt(n);
  } else {
    NoFit(n);  // or preemption without victims
  }
}

void Cycle::ReserveGang(Nomination& n) {
  Entry* e = n.entry;
  const std::string& cq = n.cq->meta.name;
  const bool fits = FitsWithoutHolds(s_, cq, n.result.assignment.usage);
  if (fits && VirtualFits(s_, e, cq, n.result.assignment.usage, {})) {
    if (n.result.assignment.borrowing_level == 0 &&
        std::find(lenders_.begin(), lenders_.end(), n.slot) == lenders_.end()) {
      lenders_.push_back(n.slot);
    }
    Admit(s_, e, n.result.assignment, now_);
    ++stats_.admitted;
    progress_ = round_progress_ = true;
    return;
  }
  if (e->waiting()) PutHold(s_, e);
  PendingReason r;
  r.code = PendingReason::Code::kWaitingForQuota;
  r.message = fits ? "the quota it fits in is held for a preemptor whose victims are stopping; retried when "
                     "they have"
                   : "the quota it fitted in was taken by another workload in the same cycle; retried next cycle";
  SetReason(s_, e, r);
  slots_[n.slot].done = true;
}

void Cycle::Preempt(Nomination& n) {
  Entry* e = n.entry;
  const std::string& cq = n.cq->meta.name;
  // Its victims are its own: one that another preemptor counts on since
  // this search (earlier in this cycle) frees nothing for it. And with them
  // gone it must fit as things are now.
  bool overlap = false;
  for (const Target& t : n.targets) overlap = overlap || AwaitedByOther(*t.entry, *e);
  const bool fits_after = !overlap && FitsAfterPreemption(s_, e, cq, n.result.assignment.usage, n.targets);
  slots_[n.slot].done = true;  // the preemptor stays the head while it waits
  if (!fits_after) {
    if (e->waiting()) PutHold(s_, e);
    PendingReason r;
    r.code = PendingReason::Code::kWaitingForQuota;
    r.message = overlap ? "its preemption targets overlap another workload's; retried next cycle"
                        : "the quota it would preempt for was taken in the same cycle; retried next cycle";
    SetReason(s_, e, r);
    return;
  }
  std::vector<std::string> names;
  for (const Target& t : n.targets) {
    names.push_back(Name(t.entry->cinfo().key));
    if (t.entry->cinfo().phase == Phase::kEvicting) continue;
    Evict(s_, t.entry, t.reason.c_str(),
          absl::StrCat("preempted to accommodate ", Name(e->cinfo().key), " (priority ", e->cinfo().priority,
                       ", ClusterQueue ", cq, ") due to ", PreemptionWhy(t.reason)),
          e, now_);
    ++stats_.preempted;
    progress_ = round_progress_ = true;
  }
  // Until a victim stops (which frees quota in this tree and wakes the
  // queue) another try would choose the same victims.
  slots_[n.slot].q->blocked = true;
  WaitForVictims(n, std::move(names));
}

// The preemptor waits for its victims and, from now on, holds what they
// give back (and what it needs besides, when free) in every cycle until it
// is admitted.
void Cycle::WaitForVictims(Nomination& n, std::vector<std::string> names) {
  Entry* e = n.entry;
  if (!e->waiting()) {
    s_.preemptors.push_back(e);
    e->preemption = std::make_unique<Entry::Preemption>();
  }
  e->preemption->awaiting.clear();
  for (const Target& t : n.targets) {
    e->preemption->awaiting.push_back(t.entry->instance());
    t.entry->awaited_by = e;
  }
  e->preemption->need = n.result.assignment.usage;
  e->preemption->plan = n.result.assignment;
  PutHold(s_, e);
  PendingReason r;
  r.code = PendingReason::Code::kWaitingForPreemption;
  r.message = absl::StrCat("waiting for ", names.size(), " preempted workload(s) to stop: ", absl::StrJoin(names, ", "));
  SetReason(s_, e, r);
}

void Cycle::NoFit(Nomination& n) {
  Entry* e = n.entry;
  // A preemptor whose victims are gone and still does not fit lets go:
  // something changed.
  ClearPreemptor(s_, e);
  const bool preempting = n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim;
  if (preempting && n.cq->preemption.reclaim_within_cohort != model::ReclaimWithinCohortPolicy::kAny) {
    holds_.ReserveForUnreclaimable(n.cq->meta.name, n.result.assignment.usage);
  }
  PendingReason r = n.result.reason;
  if (n.result.mode != FitMode::kNoFit && r.code == PendingReason::Code::kPreemptionNoCandidates) {
    // Like Kueue's QuotaReserved reason: it waits for quota. Only a
    // workload that may never preempt is told so.
    r.code = e->cinfo().can_preempt ? PendingReason::Code::kWaitingForQuota
                                    : PendingReason::Code::kPreemptionNoCandidates;
  }
  SetReason(s_, e, r, n.result.flavors_tried);
  if (n.cq->queueing_strategy == model::QueueingStrategy::kStrictFIFO) {
    BlockStrictFifoQueue(n);
  } else {
    SetAside(n, Entry::FreshReason{std::move(r), n.result.flavors_tried});
  }
}

// StrictFIFO: the head blocks the queue until something changes, and
// everything behind it waits for it (KUEUE-SEMANTICS §3.2). They are told
// once per blocking head; later arrivals when they are queued. A preemptor
// behind it lets go of its hold: it cannot be admitted before this head.
void Cycle::BlockStrictFifoQueue(Nomination& n) {
  Entry* e = n.entry;
  const std::string& cq = n.cq->meta.name;
  Queue& q = *slots_[n.slot].q;
  q.blocked = true;
  const std::string head = Name(e->cinfo().key);
  std::vector<Entry*> waiting_behind;
  for (Entry* p : s_.preemptors) {
    if (p != e && p->queued_in == cq) waiting_behind.push_back(p);
  }
  for (Entry* p : waiting_behind) {
    TakeHold(s_, p);
    ClearPreemptor(s_, p);
  }
  if (q.blocked_by == head) return;
  q.blocked_by = head;
  const std::string message = BlockedMessage(head, cq);
  for (auto it = std::next(q.active.begin()); it != q.active.end(); ++it) {
    Entry* behind = *it;
    const PendingReason::Code code = behind->cinfo().reason.code;
    if (code != PendingReason::Code::kQueued && code != PendingReason::Code::kBlockedByHead) continue;
    PendingReason b;
    b.code = PendingReason::Code::kBlockedByHead;
    b.message = message;
    behind->info().reason = std::move(b);
    s_.Touch(*behind);
  }
}

// BestEffortFIFO: the head is set aside until something changes in its
// tree, and the queue has a new head to try.
void Cycle::SetAside(Nomination& n, Entry::FreshReason why) {
  Entry* e = n.entry;
  Slot& slot = slots_[n.slot];
  if (auto node = slot.q->active.extract(e); !node.empty()) {
    slot.q->inadmissible.insert(std::move(node));
  } else {
    slot.q->inadmissible.insert(e);
  }
  slot.failed_shapes.emplace(ShapeOf(*e), std::move(why));
  round_progress_ = true;
  set_aside_ = true;
}

}  // namespace

ScheduleStats Scheduler::Schedule(absl::Time now) {
  State& s = *state_;
  while (!s.backoff.empty() && s.backoff.begin()->first <= now) {
    Entry* e = s.backoff.begin()->second;
    Enqueue(s, e);  // takes it out of the backoff
    WorldChanged(s, *e);
  }
  // waitForPodsReady: gangs not ready in time are evicted; with
  // blockAdmission nothing is admitted while one is not ready.
  EvictUnready(s, now);
  ScheduleStats stats;
  if (AdmissionBlocked(s)) return stats;
  const int64_t guarded_before = s.churn.guarded();
  const base::Stopwatch watch;
  for (int i = 0; i < state_->options.max_cycles; ++i) {
    ++stats.cycles;
    const bool progress = Cycle(*state_, now, stats, watch).Run();
    if (stats.more) break;
    if (!progress) break;
    if (watch.Elapsed() >= state_->options.time_budget) {
      stats.more = true;
      break;
    }
  }
  stats.guarded = s.churn.guarded() - guarded_before;
  return stats;
}

}  // namespace gangkeeper::broker
