// gangkeeper broker: the scheduler's record of one tracked workload (Entry)
// and of one ClusterQueue's queues (Queue): what the queues and the
// scheduling cycle (queues.cc, cycle.cc), the flavor assigner and the
// preemptor all read. Plain data, owned by Scheduler::State
// (scheduler_state.h); tests build them directly. Thread-compatible: the
// broker thread (or a test) is their only user.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

// Which ClusterQueue's queue holds an entry, as a pointer to the queue
// map's key (QueueMap never erases a queue; replacing the whole map
// re-files every queued entry): 8 bytes per tracked workload instead of a
// copy of the name.
class QueuedIn {
 public:
  bool empty() const { return name_ == nullptr; }
  void clear() { name_ = nullptr; }
  // `name` must outlive the entry's stay in that queue (the queue map's key).
  void Set(const std::string* name) { name_ = name; }
  // "" when none.
  const std::string& name() const {
    static const std::string kNone;
    return name_ == nullptr ? kNone : *name_;
  }
  friend bool operator==(const QueuedIn& a, const std::string& b) { return a.name() == b; }
  // Whether it points at `key` itself (the invariant check's question).
  bool At(const std::string& key) const { return name_ == &key; }

 private:
  const std::string* name_ = nullptr;
};

// One tracked workload.
struct Entry {
  // Copy-on-write: the broker's snapshots share the WorkloadInfo until it
  // changes, so a tracked workload costs one copy, not two. info() is for
  // changes (it copies a shared one first and marks the workload dirty so
  // the next snapshot takes the copy); cinfo() is for reads.
  std::shared_ptr<WorkloadInfo> info_ptr = std::make_shared<WorkloadInfo>();
  absl::flat_hash_set<WorkloadKey>* dirty = nullptr;
  WorkloadInfo& info() {
    if (info_ptr.use_count() > 1) {
      info_ptr = std::make_shared<WorkloadInfo>(*info_ptr);
      if (dirty != nullptr) dirty->insert(info_ptr->key);
    }
    return *info_ptr;
  }
  const WorkloadInfo& info() const { return *info_ptr; }
  const WorkloadInfo& cinfo() const { return *info_ptr; }
  // A pod group's pods merged by shape (other workloads use their own).
  // A pod group's members (null for every other workload).
  struct Group {
    std::vector<workload::PodSet> pod_sets;  // merged by shape
    std::set<std::string> pods;              // names of the pods seen
  };
  std::unique_ptr<Group> group;
  bool is_pod_group() const { return group != nullptr; }
  // The pod sets the scheduler places.
  const std::vector<workload::PodSet>& PodSets() const {
    return group != nullptr ? group->pod_sets : info_ptr->workload->pod_sets;
  }
  QueuedIn queued_in;  // the ClusterQueue whose queue holds it (empty = none)
  // SchedulerOptions::defer_reason_numbers: the reason it was last given,
  // when that differs from cinfo().reason only in the live numbers
  // (available, used, used by), with the flavors tried for its sentence;
  // RefreshReasons() brings it in (null: none newer).
  struct FreshReason {
    PendingReason reason;
    std::vector<std::string> flavors_tried;
  };
  // Shared: the heads set aside together share one (SetAsideReason).
  std::shared_ptr<const FreshReason> fresh_reason;
  // The small fields side by side (an entry per tracked workload: no
  // padding between them).
  // The queue-order key's priority (see order_time below).
  int32_t order_priority = 0;
  int32_t release_failures = 0;  // failed releases in a row
  // Preempted at least once (see preempted_seq).
  bool preempted_once = false;
  // After a failed release: out of every queue until `backoff_it->first`.
  bool in_backoff = false;
  // Whether shape_hash is its current scheduling shape (cycle.cc's ShapeOf:
  // pod sets, priority, preemption policy); SetOrderKey, called whenever
  // those change, forgets it. A pod group's shape is never cached (its
  // pod sets change as members arrive).
  mutable bool shape_cached = false;
  mutable size_t shape_hash = 0;
  // The queue-order key, kept beside the entry (not behind info_ptr) for
  // cache-friendly comparisons; set by SetOrderKey whenever they change.
  absl::Time order_time;
  // The uid's first 8 bytes, big-endian: compares as the uid does whenever
  // they differ, without a string compare (most ties end there; the rest
  // read the uid, which an instance never changes).
  uint64_t order_uid_prefix = 0;
  void SetOrderKey() {
    shape_cached = false;
    order_priority = info_ptr->priority;
    order_time = info_ptr->queued_at;
    const std::string& uid = info_ptr->workload->uid;
    order_uid_prefix = 0;
    for (size_t i = 0; i < 8; ++i) {
      const unsigned char c = i < uid.size() ? static_cast<unsigned char>(uid[i]) : 0;
      order_uid_prefix = (order_uid_prefix << 8) | c;
    }
  }
  uint64_t seq = 0;  // registration order, the last tie-break
  // The instance this entry is (key and uid; uid "" for a pod group).
  InstanceKey instance() const { return InstanceOf(info_ptr->key, info_ptr->workload->uid); }
  // A preemptor's state (null for every other entry: most never preempt,
  // and a tracked workload should cost little).
  struct Preemption {
    // The victims it waits for. While one of them is still being evicted,
    // trying it again would only find them again.
    std::vector<InstanceKey> awaiting;
    // ...and the quota it will take once they stop (the usage of the
    // assignment it chose them for, `plan`). While it waits, every cycle
    // holds for it what its evicting victims do not cover, whatever its
    // position in its queue, and every admission in its tree must leave
    // room for it (VirtualFits), so that nobody else (its victims least of
    // all) can take what it preempted for. Kueue holds a preemptor's usage
    // only in the cycle that issued the preemptions, and keeps the
    // preemptor at the head of a BestEffortFIFO queue instead (its "sticky"
    // preemptor): see docs/decisions.md.
    ResourceAmounts need;
    Assignment plan;
    // What this cycle's holds added to the tree for it (given back when it
    // is tried, and at the end of the cycle).
    ResourceAmounts held;
  };
  std::unique_ptr<Preemption> preemption;
  bool waiting() const { return preemption != nullptr; }
  bool holding() const { return preemption != nullptr && !preemption->held.empty(); }
  // A victim: the preemptor that counts on the quota it gives back (null
  // when none; only meaningful while it is being evicted).
  Entry* awaited_by = nullptr;
  // The world-change sequence (ChurnGuard::seq()) when it was last
  // preempted (preempted_once): it is not preempted again until something
  // changes in its tree (ChurnGuard::Guarded), the anti-churn rule behind
  // DESIGN §2's invariant "with no change in the world a workload is
  // preempted at most once".
  uint64_t preempted_seq = 0;
  // While in_backoff: where it waits in the release backoff.
  std::multimap<absl::Time, Entry*>::iterator backoff_it;
};

// Queue order: higher priority, earlier queue time, smaller uid, earlier seq.
struct QueueOrder {
  bool operator()(const Entry* a, const Entry* b) const {
    if (a->order_priority != b->order_priority) return a->order_priority > b->order_priority;
    if (a->order_time != b->order_time) return a->order_time < b->order_time;
    if (a->order_uid_prefix != b->order_uid_prefix) return a->order_uid_prefix < b->order_uid_prefix;
    const std::string& ua = a->info_ptr->workload->uid;
    const std::string& ub = b->info_ptr->workload->uid;
    if (ua != ub) return ua < ub;
    return a->seq < b->seq;
  }
};

// A B-tree: a queue is walked in order far more often than it changes
// (after a completion every pending workload of the cohort is requeued and
// set aside again), and a B-tree's nodes keep many entries side by side
// where a red-black tree's are scattered, one cache miss each; it is also
// a fifth of the memory per entry.
using OrderedEntries = absl::btree_set<Entry*, QueueOrder>;

// A ClusterQueue's admitted gangs (holding quota there), and the same
// indexed by the FlavorResources they hold a non-zero amount of: a
// preemption search for one FlavorResource (the flavor assigner asks per
// flavor) and a pending reason's "used by N workloads" read the few that
// use it instead of every admitted gang. An entry's admission does not
// change while it is listed: insert after it is set, erase before it goes.
class AdmittedSet {
 public:
  void insert(Entry* e) {
    if (!all_.insert(e).second) return;
    for (const auto& [fr, q] : e->cinfo().admission->usage) {
      if (!q.IsZero()) by_fr_[fr].insert(e);
    }
  }
  void erase(Entry* e) {
    if (all_.erase(e) == 0) return;
    for (const auto& [fr, q] : e->cinfo().admission->usage) {
      if (q.IsZero()) continue;
      auto it = by_fr_.find(fr);
      if (it == by_fr_.end()) continue;
      it->second.erase(e);
      if (it->second.empty()) by_fr_.erase(it);
    }
  }
  // The admitted gangs holding a non-zero amount of `fr`.
  const std::set<Entry*>& Using(const FlavorResource& fr) const {
    static const std::set<Entry*> kNone;
    auto it = by_fr_.find(fr);
    return it == by_fr_.end() ? kNone : it->second;
  }
  const std::map<FlavorResource, std::set<Entry*>>& by_flavor_resource() const { return by_fr_; }
  size_t count(Entry* e) const { return all_.count(e); }
  bool empty() const { return all_.empty(); }
  size_t size() const { return all_.size(); }
  std::set<Entry*>::const_iterator begin() const { return all_.begin(); }
  std::set<Entry*>::const_iterator end() const { return all_.end(); }

 private:
  std::set<Entry*> all_;
  std::map<FlavorResource, std::set<Entry*>> by_fr_;
};

struct Queue {
  OrderedEntries active;
  OrderedEntries inadmissible;
  AdmittedSet admitted;  // holding quota in this ClusterQueue
  // StrictFIFO: the head did not fit and nothing has changed since; the
  // queue is skipped until something does (quota freed in its tree, policy
  // change, a new workload in it). Trying again would give the same answer.
  bool blocked = false;
  // StrictFIFO: the head whose no-fit the entries behind it were last told
  // about (their reasons name it), "" when none.
  std::string blocked_by;
};

// Every tracked instance, by key: usually one, oldest first (a newer
// object under a known name is queued while the older one keeps its quota
// until its end is seen).
using EntryIndex = absl::flat_hash_map<WorkloadKey, absl::InlinedVector<std::unique_ptr<Entry>, 1>>;

// Every ClusterQueue's queues, by name (plus deleted ones holding quota).
using QueueMap = std::map<model::ClusterQueueName, Queue>;

// `candidate` is being evicted for a preemptor other than `in`, which
// counts on the quota it gives back: it frees nothing for `in`.
inline bool AwaitedByOther(const Entry& candidate, const Entry& in) {
  return candidate.awaited_by != nullptr && candidate.awaited_by != &in &&
         candidate.cinfo().phase == Phase::kEvicting;
}

}  // namespace gangkeeper::broker
