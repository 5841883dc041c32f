// gangkeeper broker: the quota held for preemptors — the promise behind a
// preemption — all in one place.
//
// A preemptor waiting for its victims to stop (Entry::Preemption) must get
// the quota they give back: nobody else may take it first, least of all
// its victims. So, during a scheduling cycle (and only then: between
// cycles the tree holds admitted usage alone):
//   - each waiting preemptor in a tree where something is tried holds what
//     its stopped victims gave back so far and what it needs besides, as
//     far as its queue could admit it now (PutHold / TakeHold);
//   - a head that needs preemption but found no victims holds, for the
//     rest of the cycle, the capacity it waits for, unless its ClusterQueue
//     may always reclaim (Kueue's reserveCapacityForUnreclaimablePreempt);
//   - an admission must fit with the holds aside (FitsWithoutHolds) and
//     keep every waiting preemptor's promise (VirtualFits).
// Kueue holds a preemptor's usage only in the cycle that issued the
// preemptions (see docs/decisions.md). Only the broker thread calls these.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {

// The victims `p` still waits for: being evicted, and evicted for it (a
// workload preempted again for another preemptor counts for that one only).
std::vector<const Entry*> OwnEvicting(const Scheduler::State& s, const Entry& p);
// True while a preemptor has nothing to do but wait: some victim is still
// being evicted (its hold keeps what the others gave back). Once every
// victim stopped it is tried again.
bool AwaitingVictims(const Scheduler::State& s, const Entry& e);

// Holds for preemptor `e` what it needs beyond what its still-evicting
// victims will give back to its ClusterQueue (no-op for other entries).
void PutHold(Scheduler::State& s, Entry* e);
// Gives back what this cycle's holds added to the tree for `e` (no-op when
// it holds nothing, as outside a cycle).
void TakeHold(Scheduler::State& s, Entry* e);

// `usage` fits in `cq` now with every preemptor's hold aside.
bool FitsWithoutHolds(Scheduler::State& s, const std::string& cq, const ResourceAmounts& usage);
// The promise behind a preemption: once its victims are gone, a preemptor
// fits. `extra` may be added to `cq` now (an admission, or the need of a
// new preemptor whose victims `gone` will leave) only if the state where
// every waiting preemptor of the tree (other than `x`) holds its whole need
// and every one of their victims is gone stays within what the cohort
// allows (where it already was over, after a quota was lowered, no worse).
bool VirtualFits(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& extra,
                 const std::vector<Target>& gone);
// Whether `usage` may be admitted to `cq` now: it fits (the holds aside)
// and keeps every waiting preemptor's promise.
bool MayAdmit(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& usage);
// Whether preemptor `x` fits `usage` in `cq` once `targets` are gone, as
// things are now (what was admitted or held since its search counts), and
// keeps every other waiting preemptor's promise (Kueue's fits check on
// preemptions).
bool FitsAfterPreemption(Scheduler::State& s, const Entry* x, const std::string& cq, const ResourceAmounts& usage,
                         const std::vector<Target>& targets);

// What one scheduling cycle holds in the tree, given back at its end.
class CycleHolds {
 public:
  explicit CycleHolds(Scheduler::State& s) : s_(s) {}
  CycleHolds(const CycleHolds&) = delete;
  CycleHolds& operator=(const CycleHolds&) = delete;

  // At the start of a cycle: every preemptor waiting for its victims in a
  // tree whose root is in `roots` (something is tried there) holds the
  // quota they gave back so far, before anybody else is tried (in the order
  // they preempted): the quota a preemptor waits for cannot be taken by its
  // victims or by anyone ranked below it, wherever it stands in its queue.
  void HoldForPreemptors(const absl::flat_hash_set<int>& roots);
  // A head of `cq` that needs preemption found no victims and its
  // ClusterQueue cannot always reclaim: hold, for the rest of the cycle,
  // the capacity it waits for (when borrowing: what its borrowing limit
  // leaves, or all of `usage` without one; otherwise what its nominal quota
  // leaves), so that lower-ranked workloads of other queues cannot take it
  // first (Kueue's reserveCapacityForUnreclaimablePreempt).
  void ReserveForUnreclaimable(const std::string& cq, const ResourceAmounts& usage);
  // At the end of the cycle: gives back everything held.
  void GiveBack();

 private:
  Scheduler::State& s_;
  std::vector<Entry*> held_for_;  // the preemptors HoldForPreemptors held for
  std::vector<std::pair<std::string, ResourceAmounts>> reserved_;
};

}  // namespace gangkeeper::broker
