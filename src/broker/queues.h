// gangkeeper broker: where each tracked workload is, and the moves between
// places (KUEUE-SEMANTICS.md §3.2): queued in its ClusterQueue (active or
// inadmissible), parked as an orphan with the reason, admitted (holding
// quota), evicting; plus the pending reasons users read. Free functions
// over Scheduler::State, shared by the events (events.cc), the cycle
// (cycle.cc) and the reads (scheduler.cc); defined in queues.cc. Only the
// broker thread calls them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {

using State = Scheduler::State;

// kReserved, kRunning and kEvicting hold quota.
bool HoldsQuota(Phase p);
// "namespace/name", for messages.
std::string Name(const WorkloadKey& k);

// A ClusterQueue that exists in the current policies (not one kept only
// because it still holds quota); nullptr otherwise.
const model::ClusterQueue* LiveClusterQueue(const State& s, const std::string& name);
// Why ClusterQueue `name` cannot admit anything now, or nullopt when it can.
std::optional<PendingReason> ClusterQueueBlocked(const State& s, const std::string& name);

// --- Lookups. ---
// The newest instance of `key` the API server confirmed, else the newest
// (known only from reviews); nullptr when none.
Entry* Newest(const State& s, const WorkloadKey& key);
Entry* FindEntry(const State& s, const InstanceKey& instance);
// Calls `f` for every tracked instance.
template <typename F>
void ForEachEntry(const State& s, F f) {
  for (const auto& [key, list] : s.entries) {
    for (const std::unique_ptr<Entry>& e : list) f(e.get());
  }
}

// --- Changes recorded for TakeChanges(). ---
StateChange Change(StateChange::Type type, const Entry& e, absl::Time now);
void Record(State& s, StateChange c);
// Something changed in the world where `e` is (an arrival, update,
// deletion, completion, failed release, adoption, backoff expiry): a
// workload preempted before may be preempted again.
void WorldChanged(State& s, const Entry& e);

// --- Moves. ---
// Takes `e` out of every queue, the orphans and the release backoff.
void Dequeue(State& s, Entry* e);
// Puts a pending entry in its ClusterQueue's queue (active), or among the
// orphans with the reason it cannot be queued.
void Enqueue(State& s, Entry* e);
// Moves every entry of `from` into `to`, the smaller set's into the larger
// (a swap when `to` is empty).
void MergeInto(OrderedEntries& to, OrderedEntries& from);
// Something freed quota or changed policy in `cq`'s tree: its inadmissible
// workloads get another chance (Kueue's QueueInadmissibleWorkloads).
void RequeueInadmissible(State& s, const std::string& cq);
// `e` no longer waits for victims (admitted, changed, gone, or the policies
// changed): it holds nothing from the next cycle on.
void ClearPreemptor(State& s, Entry* e);
// Reserves `assignment` for `e` (the whole gang in one step) and records
// kAdmitted.
void Admit(State& s, Entry* e, const Assignment& assignment, absl::Time now);
// Gives back the quota `e` holds and forgets its admission.
void ReleaseQuota(State& s, Entry* e);
// Starts evicting `victim` (preempted by `by`, or drained when null) and
// records kEvicted; its quota is held until it is Stopped.
void Evict(State& s, Entry* victim, const char* reason, std::string message, const Entry* by, absl::Time now);
// Copies a pod group's members into its WorkloadInfo (what is made
// durable and shown).
void SyncPodGroup(Entry* e);
// Marks every (ClusterQueue, FlavorResource) whose usage is beyond what the
// cohort allows as tolerated (after a quota was lowered, or an adoption):
// nothing new is admitted there until usage falls back.
void NoteOverQuota(State& s);

// --- waitForPodsReady (pods_ready.cc). ---
// The waitForPodsReady in effect (Scheduler::wait_for_pods_ready).
const model::WaitForPodsReady& PodsReadyConfig(const State& s);
// A gang just admitted waits for its pods: not ready, watched from `now`.
void WatchReadiness(State& s, Entry* e, absl::Time now);
// It no longer holds quota: no longer watched (ReleaseQuota calls it).
void UnwatchReadiness(State& s, Entry* e);
// Evicts every watched gang whose wait passed its timeout (Kueue's
// PodsReadyTimeout); nothing when waitForPodsReady is off.
void EvictUnready(State& s, absl::Time now);
// blockAdmission: a watched gang is not ready yet, so nothing is admitted.
bool AdmissionBlocked(const State& s);
// An evicted gang has stopped: when it was evicted for a PodsReady timeout
// it waits out its backoff, or is deactivated past backoffLimitCount (true:
// it is parked, not queued).
bool BackOffAfterPodsReadyTimeout(State& s, Entry* e, absl::Time now);
// Restore: a pending workload restored deactivated, or within its
// PodsReady backoff, is parked again as it was before the restart (true);
// false: queue it as usual.
bool RestorePodsReadyBackoff(State& s, Entry* e);
// A deactivated workload whose object changed is active again, with its
// requeue count reset (Kueue resets requeueState on reactivation).
void Reactivate(State& s, Entry* e);

// --- Pending reasons. ---
// The reason of a workload waiting behind StrictFIFO head `head` of `cq`.
std::string BlockedMessage(const std::string& head, const std::string& cq);
// Sets `e`'s pending reason, writing its sentence (and keeping the old one
// when the numbers are the same); `flavors_tried` (AssignmentResult's) are
// appended to it, and only their hash is kept.
// Reasons that are the same but for the numbers keep their sentence and
// snapshot; with defer_reason_numbers the new numbers wait in
// Entry::fresh_reason for RefreshReasons.
void SetReason(State& s, Entry* e, PendingReason r, const std::vector<std::string>& flavors_tried = {});
// SetReason for the heads of one queue set aside in one pass for the same
// failed shape (cycle.cc's SetAsideEquivalentHeads): `why` is prepared
// once, on the first call with an empty `shared`, and its deferred numbers
// are shared by every entry that takes them rather than copied into each.
// No admission may happen between calls sharing `shared` (its users count).
struct SharedReason {
  std::shared_ptr<const Entry::FreshReason> fresh;
};
void SetAsideReason(State& s, Entry* e, const Entry::FreshReason& why, SharedReason* shared);
// Gives every pending workload with a fresh_reason that reason (and marks
// it dirty), unless its reason changed in kind since; returns how many.
size_t RefreshReasons(State& s);

}  // namespace gangkeeper::broker
