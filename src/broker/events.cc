// gangkeeper broker: the Scheduler's events (scheduler.h): workloads
// added, updated, adopted, removed, finished; policies replaced; the
// actuator's answers. Each validates its input, changes nothing on error,
// and records its StateChanges (queues.h has the moves they are made of).
#include "gangkeeper/broker/scheduler.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "src/broker/holds.h"
#include "src/broker/queues.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

bool SameShape(const workload::PodSet& a, const workload::PodSet& b) {
  return a.requests == b.requests && a.node_selector == b.node_selector &&
         a.tolerations.size() == b.tolerations.size();
}

// stopPolicy HoldAndDrain: the admitted gangs of a drained ClusterQueue or
// LocalQueue are evicted.
void Drain(State& s, absl::Time now) {
  for (auto& [name, q] : s.queues) {
    const model::ClusterQueue* cq = LiveClusterQueue(s, name);
    const bool cq_drain = cq != nullptr && cq->stop_policy == model::StopPolicy::kHoldAndDrain;
    for (Entry* e : q.admitted) {
      if (e->cinfo().phase == Phase::kEvicting) continue;
      bool drain = cq_drain;
      std::string why = absl::StrCat("ClusterQueue ", name, " is stopped with stopPolicy HoldAndDrain");
      if (!drain) {
        auto lq = s.policies->local_queues.find({e->cinfo().key.namespace_name, e->cinfo().local_queue});
        if (lq != s.policies->local_queues.end() && lq->second.stop_policy == model::StopPolicy::kHoldAndDrain) {
          drain = true;
          why = absl::StrCat("LocalQueue ", e->cinfo().key.namespace_name, "/", e->cinfo().local_queue,
                             " is stopped with stopPolicy HoldAndDrain");
        }
      }
      if (drain) Evict(s, e, "Stopped", why, nullptr, now);
    }
  }
}

// Forgets instance `e` (deleted, or ended): it leaves its queue, gives back
// its quota, and the change says what it freed.
// `world_change`: false when the end was already counted (an object that
// was replaced under its name leaves once its pods stopped).
void Forget(State& s, Entry* e, StateChange::Type type, absl::Time now, bool world_change = true) {
  Dequeue(s, e);
  s.unready.erase(e->seq);  // (ReleaseQuota does it too; nothing may point at `e` once it is gone)
  TakeHold(s, e);
  ClearPreemptor(s, e);
  if (world_change && !e->cinfo().workload->unconfirmed) WorldChanged(s, *e);
  // The change carries the quota it frees (the audit log tallies usage).
  StateChange c = Change(type, *e, now);
  c.unconfirmed = e->cinfo().workload->unconfirmed;
  c.assignment = e->cinfo().admission;
  if (c.assignment.has_value()) c.cluster_queue = c.assignment->cluster_queue;
  if (e->cinfo().admission.has_value()) ReleaseQuota(s, e);
  if (type == StateChange::Type::kFinished) {
    auto last = std::make_shared<WorkloadInfo>(e->cinfo());
    last->phase = Phase::kFinished;
    last->finished_at = now;
    last->reason = PendingReason{};
    s.finished.push_back(std::move(last));
  }
  Record(s, std::move(c));
  s.Touch(*e);
  auto list = s.entries.find(e->cinfo().key);
  GK_CHECK(list != s.entries.end());
  auto it = std::find_if(list->second.begin(), list->second.end(),
                         [e](const std::unique_ptr<Entry>& x) { return x.get() == e; });
  GK_CHECK(it != list->second.end());
  if (e->cinfo().workload->unconfirmed) --s.unconfirmed_count;
  list->second.erase(it);  // destroys `e`
  --s.instance_count;
  if (list->second.empty()) s.entries.erase(list);
}

// Whether a newer instance under `e`'s key exists: its object was deleted
// (a new uid under a name means so), only its quota was kept until its
// pods stopped. Only the API server's word counts: an unconfirmed newer
// instance (a review, perhaps forged) says nothing about `e`.
bool Superseded(const State& s, const Entry& e) {
  auto list = s.entries.find(e.cinfo().key);
  if (list == s.entries.end()) return false;
  return std::any_of(list->second.begin(), list->second.end(), [&](const std::unique_ptr<Entry>& x) {
    return x.get() != &e && x->seq > e.seq && !x->cinfo().workload->unconfirmed;
  });
}

// The instances `uid` names under `key` ("" = all of them).
std::vector<Entry*> Named(const State& s, const WorkloadKey& key, const std::string& uid) {
  std::vector<Entry*> out;
  if (uid.empty() || key.pod_group) {
    auto list = s.entries.find(key);
    if (list != s.entries.end()) {
      for (const std::unique_ptr<Entry>& e : list->second) out.push_back(e.get());
    }
  } else if (Entry* e = FindEntry(s, InstanceOf(key, uid))) {
    out.push_back(e);
  }
  return out;
}

// The object `keep` is now what its name denotes (the API server says so):
// every other instance under its key that holds no quota is gone (an older
// object, or one only a review spoke of); one that holds quota keeps it
// until its end is seen, since its pods may still run.
void ReplaceOthers(State& s, const WorkloadKey& key, const Entry* keep, absl::Time now) {
  for (Entry* old : Named(s, key, "")) {
    if (old != keep && !HoldsQuota(old->cinfo().phase)) Forget(s, old, StateChange::Type::kRemoved, now);
  }
}

// Kueue orders by creationTimestamp; the arrival time when the object has
// none (or one from a clock ahead of ours).
void SetQueueTimes(Entry* e, const workload::Workload& w, absl::Time now) {
  const absl::Time created =
      w.creation_timestamp != absl::InfinitePast() && w.creation_timestamp <= now ? w.creation_timestamp : now;
  e->info().created_at = created;
  e->info().queued_at = created;
}

// The API server stored the object an unconfirmed entry was registered for
// (same uid): from now on the entry is the stored object's image, its pod
// sets, priority, queue and creationTimestamp, with the submitter the
// review named (the stored object does not say who created it). It is
// queued from here on.
void Confirm(State& s, Entry* e, const workload::Workload& stored, absl::Time now) {
  auto w = std::make_shared<workload::Workload>(stored);
  const workload::Workload& before = *e->cinfo().workload;
  if (w->submitted_by.empty()) {
    w->submitted_by = before.submitted_by;
    w->submitter_claimed = before.submitter_claimed;
  }
  w->unconfirmed = false;
  if (before.unconfirmed) --s.unconfirmed_count;
  e->info().workload = std::move(w);
  e->info().priority = stored.priority;
  e->info().can_preempt = stored.preemption_policy != model::PreemptionPolicy::kNever;
  e->info().reason = PendingReason{};
  SetQueueTimes(e, stored, now);
  e->SetOrderKey();
  Enqueue(s, e);
  WorldChanged(s, *e);
  // Pending for the audit log from here on: the registration it did not see.
  StateChange c = Change(StateChange::Type::kRegistered, *e, now);
  c.workload = e->cinfo().workload;
  c.actor = e->cinfo().workload->submitted_by;
  c.actor_claimed = e->cinfo().workload->submitter_claimed;
  c.reason = "Confirmed";
  c.message = "the API server stored the object; its pod sets, priority and queue are read from it";
  Record(s, std::move(c));
}

// The entry `key` with `uid` when it is in `phase`, else nullptr (the
// actuator's answer is stale: the workload moved on or was replaced).
Entry* FindInPhase(State& s, const WorkloadKey& key, const std::string& uid, Phase phase) {
  Entry* e = FindEntry(s, InstanceOf(key, uid));
  if (e == nullptr) return nullptr;
  const WorkloadInfo& info = e->cinfo();
  return info.workload->uid == uid && info.phase == phase ? e : nullptr;
}

}  // namespace

absl::Status Scheduler::Add(const workload::Workload& w, absl::Time now) {
  State& s = *state_;
  if (w.namespace_name.empty()) return absl::InvalidArgumentError("workload: metadata.namespace is empty");
  if (w.name.empty() && w.pod_group_name.empty()) {
    return absl::InvalidArgumentError("workload: metadata.name is empty");
  }
  const InstanceKey instance = InstanceOf(w);
  const WorkloadKey& key = instance.key;
  if (Entry* e = FindEntry(s, instance)) {
    if (!w.pod_group_name.empty()) {
      // Another pod of a known group (a retried review repeats a name).
      if (e->group == nullptr) return absl::InternalError(absl::StrCat("pod group ", KeyString(key), " has no members"));
      if (!e->group->pods.insert(w.name).second) return absl::OkStatus();
      if (e->cinfo().phase != Phase::kPending) {
        return absl::OkStatus();  // a replacement pod of a running group
      }
      ++e->info().pod_group_members;
      for (const workload::PodSet& ps : w.pod_sets) {
        auto same = std::find_if(e->group->pod_sets.begin(), e->group->pod_sets.end(),
                                 [&](const workload::PodSet& p) { return SameShape(p, ps); });
        if (same != e->group->pod_sets.end()) {
          same->count += ps.count;
        } else {
          e->group->pod_sets.push_back(ps);
          e->group->pod_sets.back().name = absl::StrCat("group-", e->group->pod_sets.size() - 1);
        }
      }
      TakeHold(s, e);
      ClearPreemptor(s, e);
      SyncPodGroup(e);
      Enqueue(s, e);
      WorldChanged(s, *e);
      StateChange c = Change(StateChange::Type::kRegistered, *e, now);
      c.workload = std::make_shared<const workload::Workload>(w);  // the member pod
      c.actor = w.submitted_by;
      c.actor_claimed = w.submitter_claimed;
      Record(s, std::move(c));
      return absl::OkStatus();
    }
    if (e->cinfo().workload->unconfirmed && !w.unconfirmed) {
      Confirm(s, e, w, now);
      ReplaceOthers(s, key, e, now);
    }
    return absl::OkStatus();  // a retried review
  }
  // Another uid under a known key: a new object (names are unique per
  // kind, so the old one was deleted; we missed it). A pending old instance
  // is simply replaced; one that holds quota keeps it until its end is
  // seen (its pods may still run), and the new one is queued beside it.
  // Only the API server's word replaces anything: a review under a known
  // name (perhaps forged) is tracked beside what is there until confirmed.
  if (!w.unconfirmed) ReplaceOthers(s, key, nullptr, now);
  auto entry = std::make_unique<Entry>();
  Entry* e = entry.get();
  e->seq = s.next_seq++;
  e->dirty = &s.dirty_workloads;
  e->info().key = key;
  e->info().workload = std::make_shared<const workload::Workload>(w);
  e->info().priority = w.priority;
  e->info().can_preempt = w.preemption_policy != model::PreemptionPolicy::kNever;
  SetQueueTimes(e, w, now);
  e->SetOrderKey();
  if (!w.pod_group_name.empty()) {
    e->group = std::make_unique<Entry::Group>();
    e->group->pod_sets = w.pod_sets;
    e->group->pods.insert(w.name);
    e->info().pod_group_members = 1;
    for (size_t i = 0; i < e->group->pod_sets.size(); ++i) e->group->pod_sets[i].name = absl::StrCat("group-", i);
    SyncPodGroup(e);
  }
  s.entries[key].push_back(std::move(entry));
  ++s.instance_count;
  if (w.unconfirmed) ++s.unconfirmed_count;
  Enqueue(s, e);
  // A review alone changes nothing in the world: it must not lift the
  // anti-churn guard (a flood of forged reviews would otherwise let the
  // same workloads be preempted again and again).
  if (!w.unconfirmed) WorldChanged(s, *e);
  StateChange c = Change(StateChange::Type::kRegistered, *e, now);
  c.workload = e->cinfo().workload;
  c.actor = w.submitted_by;
  c.actor_claimed = w.submitter_claimed;
  c.unconfirmed = w.unconfirmed;
  Record(s, std::move(c));
  return absl::OkStatus();
}

absl::Status Scheduler::Update(const workload::Workload& w, absl::Time now) {
  State& s = *state_;
  Entry* e = FindEntry(s, InstanceOf(w));
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("workload ", KeyString(KeyOf(w)), " (uid ", w.uid, ") is not tracked"));
  }
  if (w.unconfirmed && !e->cinfo().workload->unconfirmed) {
    // A review says the object changed; the watch says what it is now.
    return absl::OkStatus();
  }
  if (HoldsQuota(e->cinfo().phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("workload ", Name(e->cinfo().key), " holds quota; its pod sets cannot change until it is suspended"));
  }
  if (e->cinfo().workload->unconfirmed && !w.unconfirmed) {
    Confirm(s, e, w, now);
    ReplaceOthers(s, e->cinfo().key, e, now);
    return absl::OkStatus();
  }
  TakeHold(s, e);
  ClearPreemptor(s, e);
  Dequeue(s, e);  // the queue order may change with the priority
  Reactivate(s, e);  // a deactivated workload whose object changed
  auto updated = std::make_shared<workload::Workload>(w);
  if (!w.pod_group_name.empty()) {
    // A pod group's shape is its members'; only the queue and priority change.
    updated->pod_sets = e->cinfo().workload->pod_sets;
    updated->uid = e->cinfo().workload->uid;
  }
  e->info().workload = std::move(updated);
  e->info().priority = w.priority;
  e->info().can_preempt = w.preemption_policy != model::PreemptionPolicy::kNever;
  e->info().reason = PendingReason{};
  e->SetOrderKey();
  WorldChanged(s, *e);
  Enqueue(s, e);
  WorldChanged(s, *e);
  StateChange c = Change(StateChange::Type::kUpdated, *e, now);
  c.workload = e->cinfo().workload;
  c.actor = w.submitted_by;
  c.actor_claimed = w.submitter_claimed;
  c.unconfirmed = w.unconfirmed;
  Record(s, std::move(c));
  return absl::OkStatus();
}

absl::Status Scheduler::Adopt(const workload::Workload& w,
                             const std::map<std::string, std::map<std::string, std::string>>& flavors,
                             std::optional<absl::Time> admitted_at, absl::Time now,
                             const std::map<std::string, int64_t>& running_counts) {
  State& s = *state_;
  const InstanceKey instance = InstanceOf(w);
  Entry* e = FindEntry(s, instance);
  if (e != nullptr && HoldsQuota(e->cinfo().phase)) return absl::OkStatus();
  if (e != nullptr && e->cinfo().workload->unconfirmed) Confirm(s, e, w, now);
  if (e == nullptr) {
    if (absl::Status added = Add(w, now); !added.ok()) return added;
    e = FindEntry(s, instance);
    if (e == nullptr) return absl::InternalError(absl::StrCat("workload ", KeyString(instance.key), " vanished"));
  }
  const model::ClusterQueue* cq = LiveClusterQueue(s, e->cinfo().cluster_queue);
  if (e->cinfo().cluster_queue.empty() || cq == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "workload ", Name(instance.key), " runs but has no usable ClusterQueue (LocalQueue ", w.queue_name,
        "); it is tracked as pending and holds no quota"));
  }
  Assignment a;
  a.cluster_queue = cq->meta.name;
  for (const workload::PodSet& full : e->PodSets()) {
    // What runs: a partially released pod set is charged for its running
    // pods (never more than its count, nor fewer than none).
    workload::PodSet ps = full;
    if (auto running = running_counts.find(ps.name); running != running_counts.end()) {
      ps.count = std::clamp<int64_t>(running->second, 0, full.count);
    }
    PodSetAssignment psa;
    psa.name = ps.name;
    psa.count = ps.count;
    auto hint = flavors.find(ps.name);
    for (const auto& [res, total] : PodSetTotals(ps, *cq, s.policies->configuration)) {
      if (total.IsZero()) continue;
      const model::ResourceGroup* group = nullptr;
      for (const model::ResourceGroup& g : cq->resource_groups) {
        if (std::find(g.covered_resources.begin(), g.covered_resources.end(), res) != g.covered_resources.end()) {
          group = &g;
          break;
        }
      }
      if (group == nullptr || group->flavors.empty()) continue;  // nothing to count it against
      std::string flavor = group->flavors.front().name;
      if (hint != flavors.end()) {
        auto f = hint->second.find(res);
        if (f != hint->second.end()) {
          for (const model::FlavorQuotas& fq : group->flavors) {
            if (fq.name == f->second) flavor = fq.name;
          }
        }
      }
      psa.flavors[res] = flavor;
      psa.usage[res] = total;
      FlavorResource fr{flavor, res};
      absl::StatusOr<Quantity> sum = a.usage[fr].Add(total);
      a.usage[fr] = sum.ok() ? *sum : Quantity::Max();
    }
    a.pod_sets.push_back(std::move(psa));
  }
  TakeHold(s, e);
  WorldChanged(s, *e);
  Admit(s, e, a, now);
  // Its admission time as recorded on the object (the preemption order,
  // newest admitted first, is then the same as before a restart).
  if (admitted_at.has_value() && *admitted_at <= now && *admitted_at > absl::InfinitePast()) {
    e->info().admitted_at = *admitted_at;
  }
  // Beyond the quota is tolerated here as after a lowered quota.
  NoteOverQuota(s);
  return absl::OkStatus();
}

absl::Status Scheduler::Remove(const WorkloadKey& key, const std::string& uid, absl::Time now) {
  State& s = *state_;
  for (Entry* e : Named(s, key, uid)) Forget(s, e, StateChange::Type::kRemoved, now);
  return absl::OkStatus();
}

absl::Status Scheduler::Finish(const WorkloadKey& key, const std::string& uid, absl::Time now) {
  State& s = *state_;
  for (Entry* e : Named(s, key, uid)) Forget(s, e, StateChange::Type::kFinished, now);
  return absl::OkStatus();
}

absl::Status Scheduler::SetPolicies(std::shared_ptr<const model::PolicySet> policies, absl::Time now) {
  State& s = *state_;
  if (policies == nullptr) return absl::InvalidArgumentError("policies: null policy set");
  // ClusterQueues deleted while they still hold quota stay (terminating, as
  // Kueue keeps them behind a finalizer) until their gangs are gone.
  std::shared_ptr<const model::PolicySet> effective = policies;
  std::set<std::string> holding;
  ForEachEntry(s, [&](const Entry* e) {
    if (e->cinfo().admission.has_value()) holding.insert(e->cinfo().admission->cluster_queue);
  });
  std::vector<std::string> kept;
  for (const std::string& cq : holding) {
    if (policies->cluster_queues.count(cq) == 0) kept.push_back(cq);
  }
  model::PolicySet with_terminating;
  std::map<model::ClusterQueueName, model::ClusterQueue> terminating;
  if (!kept.empty()) {
    with_terminating = *policies;
    for (const std::string& cq : kept) {
      // Its definition: from the policies it was deleted from, or, when it
      // was already terminating before this change, the one kept then.
      const model::ClusterQueue* def = nullptr;
      if (auto old = s.policies->cluster_queues.find(cq); old != s.policies->cluster_queues.end()) {
        def = &old->second;
      } else if (auto t = s.terminating.find(cq); t != s.terminating.end()) {
        def = &t->second;
      }
      if (def == nullptr) continue;
      with_terminating.cluster_queues.emplace(cq, *def);
      terminating.emplace(cq, *def);
    }
  }
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(kept.empty() ? *policies : with_terminating);
  if (!tree.ok()) return tree.status();
  ForEachEntry(s, [&](const Entry* e) {
    if (e->cinfo().admission.has_value()) {
      GK_CHECK_OK(tree->AddUsage(e->cinfo().admission->cluster_queue, e->cinfo().admission->usage));
    }
  });
  s.tree = *std::move(tree);
  s.policies = std::move(effective);
  s.terminating = std::move(terminating);
  // Queues: every live ClusterQueue, plus the terminating ones.
  std::map<model::ClusterQueueName, Queue> queues;
  for (const auto& [name, cq] : s.policies->cluster_queues) queues[name];
  for (auto& [name, q] : s.queues) {
    if (queues.count(name) != 0 || !q.admitted.empty()) queues[name].admitted = std::move(q.admitted);
  }
  std::vector<Entry*> pending;
  ForEachEntry(s, [&](const Entry* e) {
    if (e->cinfo().phase == Phase::kPending) pending.push_back(const_cast<Entry*>(e));
  });
  // Every preemptor chooses again under the new policies.
  for (Entry* e : std::vector<Entry*>(s.preemptors)) ClearPreemptor(s, e);
  s.churn.PoliciesChanged();
  s.queues = std::move(queues);
  s.IndexQueues();
  s.orphans.clear();
  for (Entry* e : pending) {
    e->queued_in.clear();
    Enqueue(s, e);
  }
  // Quota lowered below usage: admitted work keeps running; nothing new is
  // admitted there until usage falls back (the invariant check knows).
  s.over_quota_by_policy.clear();
  NoteOverQuota(s);
  Drain(s, now);
  s.all_queues_dirty = true;
  StateChange c;
  c.type = StateChange::Type::kPoliciesChanged;
  c.time = now;
  Record(s, std::move(c));
  return absl::OkStatus();
}

absl::Status Scheduler::ReleaseSucceeded(const WorkloadKey& key, const std::string& uid, absl::Time now,
                                         const std::string& detail) {
  State& s = *state_;
  Entry* e = FindInPhase(s, key, uid, Phase::kReserved);
  if (e == nullptr) return absl::OkStatus();  // a stale answer
  e->info().phase = Phase::kRunning;
  e->info().actuation = detail;
  e->release_failures = 0;
  s.Touch(*e);
  StateChange c = Change(StateChange::Type::kReleased, *e, now);
  c.assignment = e->cinfo().admission;
  c.message = detail;
  Record(s, std::move(c));
  return absl::OkStatus();
}

absl::Status Scheduler::ReleaseFailed(const WorkloadKey& key, const std::string& uid, const std::string& why,
                                      absl::Time now) {
  State& s = *state_;
  Entry* e = FindInPhase(s, key, uid, Phase::kReserved);
  if (e == nullptr) return absl::OkStatus();  // a stale answer
  StateChange c = Change(StateChange::Type::kReleaseFailed, *e, now);
  c.assignment = e->cinfo().admission;
  c.message = why;
  WorldChanged(s, *e);
  ReleaseQuota(s, e);
  e->info().phase = Phase::kPending;
  e->info().actuation = absl::StrCat("release failed: ", why);
  // Back off before trying again (1 s, doubling, at most 5 min) so that a
  // release the API server keeps refusing does not spin.
  ++e->release_failures;
  const absl::Duration wait =
      std::min(absl::Seconds(1) * (int64_t{1} << std::min(e->release_failures - 1, 9)), absl::Minutes(5));
  Dequeue(s, e);
  e->backoff_it = s.backoff.emplace(now + wait, e);
  e->in_backoff = true;
  e->info().reason = PendingReason{};
  e->info().reason.code = PendingReason::Code::kReleaseFailed;
  e->info().reason.message = absl::StrCat("the last release failed (", why, "); retried in ",
                                          absl::FormatDuration(wait));
  Record(s, std::move(c));
  if (Superseded(s, *e)) Forget(s, e, StateChange::Type::kRemoved, now, /*world_change=*/false);
  return absl::OkStatus();
}

absl::Status Scheduler::Stopped(const WorkloadKey& key, const std::string& uid, absl::Time now,
                                const std::string& detail) {
  State& s = *state_;
  Entry* e = FindInPhase(s, key, uid, Phase::kEvicting);
  if (e == nullptr) return absl::OkStatus();  // a stale answer
  StateChange c = Change(StateChange::Type::kRequeued, *e, now);
  c.assignment = e->cinfo().admission;
  if (c.assignment.has_value()) c.cluster_queue = c.assignment->cluster_queue;
  c.message = detail.empty() ? e->cinfo().eviction_reason : absl::StrCat(e->cinfo().eviction_reason, "; ", detail);
  e->info().actuation = detail;
  ReleaseQuota(s, e);
  e->info().phase = Phase::kPending;  // queued_at is kept: its original position
  e->info().reason = PendingReason{};
  // Evicted for a PodsReady timeout: it backs off (or is deactivated)
  // instead of being queued now; the change says which.
  if (BackOffAfterPodsReadyTimeout(s, e, now)) {
    c.reason = e->cinfo().active ? "RequeueBackoff" : "Deactivated";
    absl::StrAppend(&c.message, "; ", e->cinfo().reason.message);
  } else {
    Enqueue(s, e);
  }
  Record(s, std::move(c));
  // An object replaced by a newer one under its name is gone: it is not
  // queued again (it would take quota, and preempt, for nothing).
  if (Superseded(s, *e)) Forget(s, e, StateChange::Type::kRemoved, now, /*world_change=*/false);
  return absl::OkStatus();
}

}  // namespace gangkeeper::broker
