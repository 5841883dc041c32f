// gangkeeper broker: Scheduler (see scheduler.h) — events, queues and the
// scheduling cycle (KUEUE-SEMANTICS.md §3.2, §3.3).
#include "gangkeeper/broker/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/clock.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

constexpr char kFairSharingLabel[] = "gangkeeper.io/fair-sharing";

bool HoldsQuota(Phase p) { return p == Phase::kReserved || p == Phase::kRunning || p == Phase::kEvicting; }

std::string Name(const WorkloadKey& k) { return absl::StrCat(k.namespace_name, "/", k.name); }

bool SameShape(const workload::PodSet& a, const workload::PodSet& b) {
  return a.requests == b.requests && a.node_selector == b.node_selector &&
         a.tolerations.size() == b.tolerations.size();
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending: return "pending";
    case Phase::kReserved: return "reserved";
    case Phase::kRunning: return "running";
    case Phase::kEvicting: return "evicting";
    case Phase::kFinished: return "finished";
  }
  return "pending";
}

WorkloadState StateOf(Phase phase) {
  switch (phase) {
    case Phase::kPending: return WorkloadState::kPending;
    case Phase::kFinished: return WorkloadState::kFinished;
    default: return WorkloadState::kAdmitted;
  }
}

const char* PendingReasonCodeName(PendingReason::Code code) {
  switch (code) {
    case PendingReason::Code::kQueued: return "Queued";
    case PendingReason::Code::kWaitingForQuota: return "WaitingForQuota";
    case PendingReason::Code::kExceedsMaxQuota: return "ExceedsMaxQuota";
    case PendingReason::Code::kNoMatchingFlavor: return "NoMatchingFlavor";
    case PendingReason::Code::kWaitingForPreemption: return "WaitingForPreemptedWorkloads";
    case PendingReason::Code::kPreemptionNoCandidates: return "PreemptionNoCandidates";
    case PendingReason::Code::kBlockedByHead: return "BlockedByHead";
    case PendingReason::Code::kStopped: return "Stopped";
    case PendingReason::Code::kInactive: return "Inactive";
    case PendingReason::Code::kNamespaceMismatch: return "NamespaceMismatch";
    case PendingReason::Code::kIncompletePodGroup: return "IncompletePodGroup";
    case PendingReason::Code::kReleaseFailed: return "ReleaseFailed";
    case PendingReason::Code::kUnconfirmed: return "Unconfirmed";
  }
  return "Queued";
}

const char* StateChangeTypeName(StateChange::Type type) {
  switch (type) {
    case StateChange::Type::kRegistered: return "registered";
    case StateChange::Type::kUpdated: return "updated";
    case StateChange::Type::kRemoved: return "removed";
    case StateChange::Type::kAdmitted: return "admitted";
    case StateChange::Type::kReleased: return "released";
    case StateChange::Type::kReleaseFailed: return "release_failed";
    case StateChange::Type::kEvicted: return "evicted";
    case StateChange::Type::kRequeued: return "requeued";
    case StateChange::Type::kFinished: return "finished";
    case StateChange::Type::kPoliciesChanged: return "policies_changed";
    case StateChange::Type::kReviewed: return "reviewed";
  }
  return "registered";
}

// --- Internal operations, as free functions over State. ---
namespace {

using State = Scheduler::State;

// A ClusterQueue that exists in the current policies (not one kept only
// because it still holds quota).
const model::ClusterQueue* LiveClusterQueue(const State& s, const std::string& name) {
  auto it = s.policies->cluster_queues.find(name);
  return it == s.policies->cluster_queues.end() ? nullptr : &it->second;
}

// Why `cq` cannot admit anything now, or nullopt when it can.
std::optional<PendingReason> ClusterQueueBlocked(const State& s, const std::string& name) {
  PendingReason r;
  const model::ClusterQueue* cq = LiveClusterQueue(s, name);
  if (cq == nullptr) {
    r.code = PendingReason::Code::kInactive;
    r.message = absl::StrCat("ClusterQueue ", name, " does not exist");
    return r;
  }
  if (s.tree.ClusterQueueDisabled(name)) {
    r.code = PendingReason::Code::kInactive;
    r.message = absl::StrCat("ClusterQueue ", name, " is in cohort ", cq->cohort,
                             ", which is on a cycle of parent cohorts");
    return r;
  }
  if (cq->stop_policy != model::StopPolicy::kNone) {
    r.code = PendingReason::Code::kStopped;
    r.message = absl::StrCat("ClusterQueue ", name, " is stopped (stopPolicy ",
                             model::StopPolicyName(cq->stop_policy), ")");
    return r;
  }
  for (const model::ResourceGroup& rg : cq->resource_groups) {
    for (const model::FlavorQuotas& fq : rg.flavors) {
      if (s.policies->flavors.count(fq.name) == 0) {
        r.code = PendingReason::Code::kInactive;
        r.message = absl::StrCat("ClusterQueue ", name, " uses ResourceFlavor ", fq.name,
                                 ", which does not exist");
        return r;
      }
    }
  }
  return std::nullopt;
}

// An empty selector selects every namespace without looking at its labels
// (most ClusterQueues say `namespaceSelector: {}`).
bool SelectsNamespace(const model::PolicySet& p, const model::LabelSelector& selector, const std::string& ns) {
  if (selector.match_labels.empty() && selector.match_expressions.empty()) return true;
  return selector.Matches(p.NamespaceLabels(ns));
}

void Record(State& s, StateChange c) { s.changes.push_back(std::move(c)); }

// Something changed in the world where `e` is (an arrival, update,
// deletion, completion, failed release, adoption, backoff expiry): a
// workload preempted before may be preempted again.
void WorldChanged(State& s, const Entry& e) {
  if (e.cinfo().admission.has_value()) s.churn.WorldChanged(e.cinfo().admission->cluster_queue);
  if (!e.cinfo().cluster_queue.empty()) s.churn.WorldChanged(e.cinfo().cluster_queue);
  if (!e.queued_in.empty()) s.churn.WorldChanged(e.queued_in);
}

// The newest instance of `key` the API server confirmed, else the newest
// (known only from reviews); nullptr when none.
Entry* Newest(const State& s, const WorkloadKey& key) {
  auto it = s.entries.find(key);
  if (it == s.entries.end() || it->second.empty()) return nullptr;
  for (auto e = it->second.rbegin(); e != it->second.rend(); ++e) {
    if (!(*e)->cinfo().workload->unconfirmed) return e->get();
  }
  return it->second.back().get();
}

Entry* FindEntry(const State& s, const InstanceKey& instance) {
  auto it = s.entries.find(instance.key);
  if (it == s.entries.end()) return nullptr;
  for (const std::unique_ptr<Entry>& e : it->second) {
    if (instance.key.pod_group || e->cinfo().workload->uid == instance.uid) return e.get();
  }
  return nullptr;
}

// The victims `p` still waits for: being evicted, and evicted for it (a
// workload preempted again for another preemptor counts for that one only).
std::vector<const Entry*> OwnEvicting(const State& s, const Entry& p) {
  std::vector<const Entry*> out;
  if (p.preemption == nullptr) return out;
  for (const InstanceKey& k : p.preemption->awaiting) {
    const Entry* v = FindEntry(s, k);
    if (v != nullptr && v->cinfo().phase == Phase::kEvicting && v->awaited_by == &p &&
        v->cinfo().admission.has_value()) {
      out.push_back(v);
    }
  }
  return out;
}

// Calls `f` for every tracked instance.
template <typename F>
void ForEachEntry(const State& s, F f) {
  for (const auto& [key, list] : s.entries) {
    for (const std::unique_ptr<Entry>& e : list) f(e.get());
  }
}

std::string BlockedMessage(const std::string& head, const std::string& cq) {
  return absl::StrCat("waiting behind ", head, ", the head of StrictFIFO ClusterQueue ", cq,
                      ", which does not fit yet");
}

StateChange Change(StateChange::Type type, const Entry& e, absl::Time now) {
  StateChange c;
  c.type = type;
  c.time = now;
  c.key = e.cinfo().key;
  c.uid = e.cinfo().workload->uid;
  c.cluster_queue = e.cinfo().cluster_queue;
  return c;
}

void Dequeue(State& s, Entry* e) {
  s.Touch(*e);
  if (e->in_backoff) {
    s.backoff.erase(e->backoff_it);
    e->in_backoff = false;
  }
  if (!e->queued_in.empty()) {
    auto q = s.queues.find(e->queued_in);
    if (q != s.queues.end()) {
      q->second.active.erase(e);
      q->second.inadmissible.erase(e);
      q->second.blocked = false;  // the head may have changed
    }
    e->queued_in.clear();
  }
  s.orphans.erase(e);
  e->inadmissible = false;
}

// `e` no longer waits for victims (admitted, changed, gone, or the policies
// changed): it holds nothing from the next cycle on.
void ClearPreemptor(State& s, Entry* e) {
  if (!e->waiting()) return;
  GK_DCHECK(e->preemption->held.empty());
  for (const InstanceKey& k : e->preemption->awaiting) {
    Entry* v = FindEntry(s, k);
    if (v != nullptr && v->awaited_by == e) v->awaited_by = nullptr;
  }
  e->preemption.reset();
  s.preemptors.erase(std::remove(s.preemptors.begin(), s.preemptors.end(), e), s.preemptors.end());
}

// Puts a pending entry in its ClusterQueue's queue (active), or among the
// orphans with the reason it cannot be queued.
void Enqueue(State& s, Entry* e) {
  Dequeue(s, e);
  const workload::Workload& w = *e->cinfo().workload;
  if (e->cinfo().local_queue != w.queue_name) e->info().local_queue = w.queue_name;
  auto lq = s.policies->local_queues.find({w.namespace_name, w.queue_name});
  PendingReason r;
  if (w.unconfirmed) {
    // Known only from a review: nothing is decided on it (DESIGN §2) until
    // the reconciler confirms it from the stored object. Not queued, so it
    // neither takes a place a real workload would wait behind nor blocks a
    // StrictFIFO queue.
    if (lq != s.policies->local_queues.end() && e->cinfo().cluster_queue != lq->second.cluster_queue) {
      e->info().cluster_queue = lq->second.cluster_queue;
    }
    r.code = PendingReason::Code::kUnconfirmed;
    r.message = absl::StrCat("known only from an admission review: waiting for the API server to store ",
                             w.namespace_name, "/", w.name, " (uid ", w.uid, ")");
  } else if (lq == s.policies->local_queues.end()) {
    if (!e->cinfo().cluster_queue.empty()) e->info().cluster_queue.clear();
    r.code = PendingReason::Code::kInactive;
    r.message = absl::StrCat("LocalQueue ", w.queue_name, " does not exist in namespace ", w.namespace_name);
  } else {
    if (e->cinfo().cluster_queue != lq->second.cluster_queue) e->info().cluster_queue = lq->second.cluster_queue;
    const model::ClusterQueue* cq = LiveClusterQueue(s, lq->second.cluster_queue);
    if (lq->second.stop_policy != model::StopPolicy::kNone) {
      r.code = PendingReason::Code::kStopped;
      r.message = absl::StrCat("LocalQueue ", w.namespace_name, "/", w.queue_name, " is stopped (stopPolicy ",
                               model::StopPolicyName(lq->second.stop_policy), ")");
    } else if (std::optional<PendingReason> blocked = ClusterQueueBlocked(s, lq->second.cluster_queue)) {
      r = *blocked;
    } else if (!cq->namespace_selector.has_value() ||
               !SelectsNamespace(*s.policies, *cq->namespace_selector, w.namespace_name)) {
      r.code = PendingReason::Code::kNamespaceMismatch;
      r.message = absl::StrCat("ClusterQueue ", cq->meta.name, " does not select namespace ", w.namespace_name);
    } else if (!w.pod_group_name.empty() && e->cinfo().pod_group_members < w.pod_group_total_count) {
      r.code = PendingReason::Code::kIncompletePodGroup;
      r.message = absl::StrCat("pod group ", w.pod_group_name, " has ", e->cinfo().pod_group_members, " of ",
                               w.pod_group_total_count, " pods; the gang is released when all exist");
    } else {
      e->queued_in = cq->meta.name;
      Queue& q = s.queues[cq->meta.name];
      q.active.insert(e);
      q.blocked = false;
      if (!q.blocked_by.empty() && *q.active.begin() != e && e->cinfo().reason.code == PendingReason::Code::kQueued &&
          cq->queueing_strategy == model::QueueingStrategy::kStrictFIFO) {
        PendingReason b;
        b.code = PendingReason::Code::kBlockedByHead;
        b.message = BlockedMessage(q.blocked_by, cq->meta.name);
        e->info().reason = std::move(b);
      }
      s.Touch(*e);
      if (e->cinfo().reason.code == PendingReason::Code::kInactive ||
          e->cinfo().reason.code == PendingReason::Code::kStopped ||
          e->cinfo().reason.code == PendingReason::Code::kNamespaceMismatch ||
          e->cinfo().reason.code == PendingReason::Code::kIncompletePodGroup ||
          e->cinfo().reason.code == PendingReason::Code::kUnconfirmed) {
        e->info().reason = PendingReason{};
      }
      return;
    }
  }
  e->info().reason = r;
  s.orphans.insert(e);
  s.Touch(*e);
}

// Something freed quota or changed policy in `cq`'s tree: its inadmissible
// workloads get another chance (Kueue's QueueInadmissibleWorkloads).
void RequeueInadmissible(State& s, const std::string& cq) {
  const int node = s.tree.ClusterQueueNode(cq);
  const int root = node >= 0 ? s.tree.Root(node) : -1;
  for (auto& [name, q] : s.queues) {
    if (q.inadmissible.empty() && !q.blocked) continue;
    if (name != cq) {
      const int n = s.tree.ClusterQueueNode(name);
      if (root < 0 || n < 0 || s.tree.Root(n) != root) continue;
    }
    for (Entry* e : q.inadmissible) e->inadmissible = false;
    q.active.merge(q.inadmissible);
    q.inadmissible.clear();
    q.blocked = false;
  }
}

// Over-quota marks (after a policy change) that no longer apply are dropped
// so that a later over-admission would be caught.
void PruneOverQuota(State& s) {
  for (auto it = s.over_quota_by_policy.begin(); it != s.over_quota_by_policy.end();) {
    const int node = s.tree.ClusterQueueNode(it->first);
    if (node < 0 || !s.tree.RawAvailable(node, it->second).IsNegative()) {
      it = s.over_quota_by_policy.erase(it);
    } else {
      ++it;
    }
  }
}

// Gives back the quota `e` holds and forgets its admission.
void ReleaseQuota(State& s, Entry* e) {
  GK_CHECK(e->cinfo().admission.has_value());
  s.Touch(*e);
  const std::string cq = e->cinfo().admission->cluster_queue;
  GK_CHECK_OK(s.tree.RemoveUsage(cq, e->cinfo().admission->usage));
  auto q = s.queues.find(cq);
  if (q != s.queues.end()) q->second.admitted.erase(e);
  e->info().admission.reset();
  PruneOverQuota(s);
  RequeueInadmissible(s, cq);
}

void Evict(State& s, Entry* victim, const char* reason, std::string message, const Entry* by, absl::Time now) {
  static const WorkloadKey kNobody;
  const WorkloadKey& preemptor = by != nullptr ? by->cinfo().key : kNobody;
  if (victim->cinfo().phase == Phase::kEvicting) return;
  s.Touch(*victim);
  victim->info().phase = Phase::kEvicting;
  victim->info().eviction_reason = message;
  ++victim->info().evictions;
  if (!preemptor.name.empty()) {
    victim->preempted_once = true;
    victim->preempted_seq = s.churn.seq();
  }
  StateChange c = Change(StateChange::Type::kEvicted, *victim, now);
  c.cluster_queue = victim->cinfo().admission->cluster_queue;
  c.assignment = victim->cinfo().admission;
  c.reason = reason;
  c.message = std::move(message);
  c.preemptor = preemptor;
  if (by != nullptr) c.preemptor_uid = by->cinfo().workload->uid;
  Record(s, std::move(c));
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

// Each flavor's reason, after the sentence about the first blocker; the
// notes themselves are dropped (their hash stays).
void AppendFlavors(PendingReason& r) {
  if (r.flavors.empty()) return;
  if (r.code != PendingReason::Code::kNoMatchingFlavor) {
    absl::StrAppend(&r.message, "; flavors tried: ", absl::StrJoin(r.flavors, "; "));
  }
  r.flavors.clear();
  r.flavors.shrink_to_fit();
}

// Fills in the numbers only known from the admitted set and the sentence.
void Describe(const State& s, const std::string& cq, PendingReason& r) {
  if (!r.message.empty()) {
    AppendFlavors(r);
    return;
  }
  if (r.code == PendingReason::Code::kWaitingForQuota || r.code == PendingReason::Code::kPreemptionNoCandidates ||
      r.code == PendingReason::Code::kExceedsMaxQuota) {
    FlavorResource fr{r.flavor, r.resource};
    r.used_by = 0;
    if (auto q = s.queues.find(cq); q != s.queues.end()) {
      for (const Entry* e : q->second.admitted) {
        auto u = e->cinfo().admission->usage.find(fr);
        if (u != e->cinfo().admission->usage.end() && !u->second.IsZero()) ++r.used_by;
      }
    }
    const std::string limit = r.borrowing_limit.has_value()
                                  ? absl::StrCat("borrowing limit ", r.borrowing_limit->Format())
                                  : std::string("no borrowing limit");
    absl::StatusOr<Quantity> more = r.requested.Sub(r.available);
    const std::string where = absl::StrCat(cq, "/", r.flavor);
    if (r.code == PendingReason::Code::kExceedsMaxQuota) {
      r.message = absl::StrCat("pod set ", r.pod_set, " needs ", r.requested.Format(), " ", r.resource, " in ",
                               where, " but at most ", r.max_capacity.Format(),
                               " can ever be available (nominal ", r.nominal.Format(), ", ", limit,
                               "): lower the request or ask for quota");
    } else {
      r.message = absl::StrCat("waiting for ", more.ok() ? more->Format() : r.requested.Format(), " ", r.resource,
                               " in ", where, ": ", r.used.Format(), " of ", r.nominal.Format(), " used by ",
                               r.used_by, r.used_by == 1 ? " workload" : " workloads", "; ", limit);
      if (r.code == PendingReason::Code::kPreemptionNoCandidates) {
        absl::StrAppend(&r.message, "; its PriorityClass has preemptionPolicy: Never, so it waits instead of preempting");
      }
    }
  }
  AppendFlavors(r);
}

void SetReason(State& s, Entry* e, PendingReason r) {
  if (!r.flavors.empty()) r.flavors_hash = absl::HashOf(r.flavors);
  const PendingReason& old = e->cinfo().reason;
  if (r.message.empty() && old.code == r.code && old.pod_set == r.pod_set && old.flavor == r.flavor &&
      old.resource == r.resource && old.requested == r.requested && old.available == r.available &&
      old.used == r.used && old.nominal == r.nominal && old.max_capacity == r.max_capacity &&
      old.flavors_hash == r.flavors_hash) {
    return;  // the same numbers: keep the sentence (and the snapshot) as they are
  }
  Describe(s, e->cinfo().cluster_queue, r);
  e->info().reason = std::move(r);
  s.Touch(*e);
}

struct Nomination {
  size_t slot = 0;  // RunCycle's queue slot
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

// Copies a pod group's members into its WorkloadInfo (what is made
// durable and shown).
void SyncPodGroup(Entry* e) {
  auto g = std::make_shared<PodGroupState>();
  g->pods.assign(e->group->pods.begin(), e->group->pods.end());
  g->pod_sets = e->group->pod_sets;
  e->info().pod_group = std::move(g);
}

void Admit(State& s, Entry* e, const Assignment& assignment, absl::Time now) {
  GK_CHECK_OK(s.tree.AddUsage(assignment.cluster_queue, assignment.usage));
  Dequeue(s, e);
  s.queues[assignment.cluster_queue].admitted.insert(e);
  const bool was_preemptor = e->waiting();
  ClearPreemptor(s, e);
  e->info().phase = Phase::kReserved;
  e->info().admission = assignment;
  e->info().cluster_queue = assignment.cluster_queue;
  e->info().admitted_at = now;
  e->info().eviction_reason.clear();
  e->info().reason = PendingReason{};
  ++e->info().admissions;
  s.Touch(*e);
  StateChange c = Change(StateChange::Type::kAdmitted, *e, now);
  c.assignment = assignment;
  Record(s, std::move(c));
  // What it held is now its usage: workloads that were set aside against
  // the hold may now reclaim from it or fit elsewhere.
  if (was_preemptor) RequeueInadmissible(s, assignment.cluster_queue);
}

// max(0, a - b).
Quantity Sub0(Quantity a, Quantity b) {
  absl::StatusOr<Quantity> d = a.Sub(b);
  return d.ok() && !d->IsNegative() ? *d : Quantity();
}

// What decides a gang's fate besides the queue state: its pod sets and
// its priority.
size_t ShapeOf(const Entry& e) {
  size_t h = absl::HashOf(e.cinfo().priority, e.cinfo().can_preempt);
  for (const workload::PodSet& ps : e.PodSets()) {
    h = absl::HashOf(h, ps.count, ps.tolerations.size());
    for (const auto& [res, q] : ps.requests) h = absl::HashOf(h, res, q);
    for (const auto& [k, v] : ps.node_selector) h = absl::HashOf(h, k, v);
    for (const model::Toleration& t : ps.tolerations) h = absl::HashOf(h, t.key, t.op, t.value, t.effect);
  }
  return h;
}

// True while a preemptor has nothing to do but wait: some victim is still
// being evicted (its hold keeps what the others gave back). Once every
// victim stopped it is tried again.
// (A policy change clears every preemptor; other changes leave its plan
// standing: quota freed elsewhere only makes it fit sooner, once its
// victims have stopped, and retrying it at every completion in its tree
// would cost a preemption search each time.)
bool AwaitingVictims(const State& s, const Entry& e) {
  return !OwnEvicting(s, e).empty();
}

// Gives back what this cycle's holds added to the tree for `e`.
void TakeHold(State& s, Entry* e) {
  if (!e->holding()) return;
  GK_CHECK_OK(s.tree.RemoveUsage(e->cinfo().cluster_queue, e->preemption->held));
  e->preemption->held.clear();
}

// Holds for preemptor `e` what it needs beyond what its still-evicting
// victims will give back to its ClusterQueue: per FlavorResource, its need
// less what their leaving adds to the queue's Available (which, in a cohort
// tree with lending and borrowing limits, may be less than their usage), as
// far as the queue could admit it now. Once every victim stopped, that is
// its whole need.
void PutHold(State& s, Entry* e) {
  if (!e->waiting()) return;
  GK_DCHECK(e->preemption->held.empty());
  const std::string& cq = e->cinfo().cluster_queue;
  if (cq.empty() || s.tree.ClusterQueueNode(cq) < 0) return;
  const std::vector<const Entry*> evicting = OwnEvicting(s, *e);
  ResourceAmounts now;
  for (const auto& [fr, need] : e->preemption->need) now[fr] = s.tree.Available(cq, fr);
  ResourceAmounts after = now;
  if (!evicting.empty()) {
    for (const Entry* v : evicting) GK_CHECK_OK(s.tree.RemoveUsage(v->cinfo().admission->cluster_queue, v->cinfo().admission->usage));
    for (const auto& [fr, need] : e->preemption->need) after[fr] = s.tree.Available(cq, fr);
    for (const Entry* v : evicting) GK_CHECK_OK(s.tree.AddUsage(v->cinfo().admission->cluster_queue, v->cinfo().admission->usage));
  }
  ResourceAmounts hold;
  for (const auto& [fr, need] : e->preemption->need) {
    const Quantity freed = Sub0(after[fr], now[fr]);
    const Quantity room = std::min(Sub0(need, freed), now[fr]);
    if (!room.IsZero() && !room.IsNegative()) hold[fr] = room;
  }
  if (!hold.empty() && s.tree.AddUsage(cq, hold).ok()) e->preemption->held = std::move(hold);
}

// Runs `f` with the preemptors' holds out of the tree (they guide the
// flavor assigner; the decision to admit rests on VirtualFits).
template <typename F>
auto WithoutHolds(State& s, F f) {
  for (Entry* p : s.preemptors) {
    if (p->holding()) GK_CHECK_OK(s.tree.RemoveUsage(p->cinfo().cluster_queue, p->preemption->held));
  }
  auto result = f();
  for (Entry* p : s.preemptors) {
    if (p->holding()) GK_CHECK_OK(s.tree.AddUsage(p->cinfo().cluster_queue, p->preemption->held));
  }
  return result;
}

// The promise behind a preemption: once its victims are gone, a preemptor
// fits. `extra` may be added to `cq` now (an admission, or the need of a new
// preemptor whose victims `gone` will leave) only if the state where every
// waiting preemptor of the tree (other than `x`) holds its whole need and
// every one of their victims is gone stays within what the cohort allows
// (where it already was over, after a quota was lowered, no worse). Holds
// alone cannot promise it: in a cohort tree with lending and borrowing
// limits what a victim gives back depends on everyone else's usage.
bool VirtualFits(State& s, const Entry* x, const std::string& cq, const ResourceAmounts& extra,
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
    std::set<FlavorResource> frs;
    for (const auto& [fr, q] : extra) frs.insert(fr);
    for (const Entry* p : mine) {
      for (const auto& [fr, q] : p->preemption->need) frs.insert(fr);
    }
    std::vector<int> nodes;
    for (const auto& [name, q] : s.queues) {
      const int n = s.tree.ClusterQueueNode(name);
      if (n >= 0 && s.tree.Root(n) == root) nodes.push_back(n);
    }
    std::map<std::pair<int, FlavorResource>, Quantity> before;
    for (int n : nodes) {
      for (const FlavorResource& fr : frs) before[{n, fr}] = s.tree.RawAvailable(n, fr);
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
    for (int n : nodes) {
      for (const FlavorResource& fr : frs) {
        const Quantity after = s.tree.RawAvailable(n, fr);
        if (after.IsNegative() && after < before[{n, fr}]) fits = false;
      }
    }
    for (const Entry* p : mine) move(p->cinfo().cluster_queue, p->preemption->need, false);
    for (const auto& [where, amounts] : removed) move(where, *amounts, true);
    move(cq, extra, false);
    return fits;
  });
}

// Whether `usage` may be admitted to `cq` now: it fits what the cohort
// allows (the holds aside) and keeps every waiting preemptor's promise.
bool MayAdmit(State& s, const Entry* x, const std::string& cq, const ResourceAmounts& usage) {
  return WithoutHolds(s, [&] { return s.tree.Fits(cq, usage); }) && VirtualFits(s, x, cq, usage, {});
}

// A preemption victim's phrase for the audit and events.
const char* PreemptionWhy(const std::string& reason) {
  if (reason == "InClusterQueue") return "prioritization in the ClusterQueue";
  if (reason == "InCohortReclaimWhileBorrowing") return "reclamation within the cohort while borrowing";
  if (reason == "InCohortFairSharing") return "fair sharing within the cohort";
  return "reclamation within the cohort";
}

// One scheduling cycle (numbered as DESIGN §2 and KUEUE-SEMANTICS §3.3).
// Returns true when it admitted, preempted, or set a head aside.
bool RunCycle(State& s, absl::Time now, ScheduleStats& stats, const base::Stopwatch& watch) {
  // 1. The queues with something to try, looked up once per cycle.
  struct Slot {
    const std::string* name;
    Queue* q;
    const model::ClusterQueue* cq;
    bool done = false;  // finished for this cycle
    // BestEffortFIFO: shapes that found no room in this cycle.
    absl::flat_hash_map<size_t, PendingReason> failed_shapes;
  };
  std::vector<Slot> slots;
  for (auto& [name, q] : s.queues) {
    if (q.active.empty() || q.blocked) continue;
    const model::ClusterQueue* cq = LiveClusterQueue(s, name);
    if (cq == nullptr || ClusterQueueBlocked(s, name).has_value()) {
      // The policy changed under it; Enqueue re-files the entries.
      std::vector<Entry*> moved(q.active.begin(), q.active.end());
      for (Entry* e : moved) {
        TakeHold(s, e);
        Enqueue(s, e);
      }
      continue;
    }
    slots.push_back(Slot{&name, &q, cq});
  }
  // 2. Holds. Every preemptor waiting for its victims in a tree where
  // something is tried holds the quota they gave back so far, before
  // anybody else is tried (in the order they preempted): the quota a
  // preemptor waits for cannot be taken by its victims or by anyone ranked
  // below it, wherever it stands in its queue.
  std::vector<Entry*> preemptors;
  if (!s.preemptors.empty()) {
    absl::flat_hash_set<int> roots;
    for (const Slot& slot : slots) {
      const int node = s.tree.ClusterQueueNode(*slot.name);
      if (node >= 0) roots.insert(s.tree.Root(node));
    }
    for (Entry* p : s.preemptors) {
      if (p->cinfo().phase != Phase::kPending || p->queued_in.empty()) continue;
      const int node = s.tree.ClusterQueueNode(p->cinfo().cluster_queue);
      if (node < 0 || roots.count(s.tree.Root(node)) == 0) continue;
      PutHold(s, p);
      preemptors.push_back(p);
    }
  }
  // Capacity held for the rest of this cycle for heads that need
  // preemption without victims (Kueue's reserveCapacityForUnreclaimablePreempt).
  std::vector<std::pair<std::string, ResourceAmounts>> reserved;

  std::set<const Entry*> victims;
  bool progress = false;
  bool set_aside = false;
  while (true) {
    // 3. Nominate the head of every queue.
    std::vector<Nomination> noms;
    for (size_t slot_index = 0; slot_index < slots.size(); ++slot_index) {
      Slot& slot = slots[slot_index];
      Queue& q = *slot.q;
      if (slot.done || q.active.empty() || q.blocked) continue;
      const model::ClusterQueue* cq = slot.cq;
      // Scheduling equivalence (Kueue's SchedulingEquivalenceHashing): in a
      // BestEffortFIFO queue, a head shaped exactly like one that found no
      // room earlier in this cycle finds none either; it is set aside
      // without trying.
      if (cq->queueing_strategy == model::QueueingStrategy::kBestEffortFIFO &&
          cq->preemption.within_cluster_queue != model::WithinClusterQueuePolicy::kLowerOrNewerEqualPriority) {
        while (!slot.failed_shapes.empty() && !q.active.empty()) {
          Entry* head = *q.active.begin();
          if (head->waiting()) break;  // a preemptor is always tried
          auto same = slot.failed_shapes.find(ShapeOf(*head));
          if (same == slot.failed_shapes.end()) break;
          SetReason(s, head, same->second);
          q.active.erase(q.active.begin());
          q.inadmissible.insert(head);
          head->inadmissible = true;
          ++stats.equivalent;
        }
        if (q.active.empty()) continue;
      }
      Entry* head = *q.active.begin();
      if (head->waiting() && AwaitingVictims(s, *head)) {
        // A preemptor whose victims are all still stopping: trying it again
        // would choose them again. Its hold stays.
        q.blocked = true;
        continue;
      }
      // Its own hold is not in its way.
      TakeHold(s, head);
      Nomination n;
      n.slot = slot_index;
      n.entry = head;
      n.cq = cq;
      n.fair = s.FairSharingFor(cq->meta.name);
      ++stats.nominated;
      if (head->waiting() && MayAdmit(s, head, cq->meta.name, head->preemption->plan.usage)) {
        // A preemptor whose victims stopped takes the flavors it preempted
        // for (its hold is there), not a fresh scan that might prefer a
        // flavor needing other victims.
        n.result.mode = FitMode::kFit;
        n.result.assignment = head->preemption->plan;
      } else {
        n.result = s.AssignFlavors(*n.entry, *cq, n.fair);
      }
      if (n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim) {
        n.targets = n.result.targets.has_value() ? *std::move(n.result.targets)
                                                 : s.FindTargets(*n.entry, *cq, n.fair, n.result);
      }
      // Until it is processed, what it holds stays held for the others.
      if (head->waiting()) PutHold(s, head);
      noms.push_back(std::move(n));
    }
    if (noms.empty()) break;
    // 4. Order the nominations.
    const bool fair = std::any_of(noms.begin(), noms.end(), [](const Nomination& n) { return n.fair; });
    if (!fair) std::stable_sort(noms.begin(), noms.end(), ClassicalBefore);
    bool round_progress = false;
    // 5. Process each against the current usage.
    for (size_t i = 0; i < noms.size(); ++i) {
      if (fair) {
        // The tournament is re-run after every admission: shares changed.
        auto best = std::min_element(noms.begin() + static_cast<std::ptrdiff_t>(i), noms.end(),
                                     [&](const Nomination& a, const Nomination& b) { return FairBefore(s, a, b); });
        std::iter_swap(noms.begin() + static_cast<std::ptrdiff_t>(i), best);
      }
      Nomination& n = noms[i];
      Entry* e = n.entry;
      const std::string& cq = n.cq->meta.name;
      const bool strict = n.cq->queueing_strategy == model::QueueingStrategy::kStrictFIFO;
      TakeHold(s, e);
      if (n.result.mode == FitMode::kFit) {
        const bool fits = WithoutHolds(s, [&] { return s.tree.Fits(cq, n.result.assignment.usage); });
        if (fits && VirtualFits(s, e, cq, n.result.assignment.usage, {})) {
          Admit(s, e, n.result.assignment, now);
          ++stats.admitted;
          progress = round_progress = true;
        } else {
          if (e->waiting()) PutHold(s, e);
          PendingReason r;
          r.code = PendingReason::Code::kWaitingForQuota;
          r.message = fits ? "the quota it fits in is held for a preemptor whose victims are stopping; retried when "
                             "they have"
                           : "the quota it fitted in was taken by another workload in the same cycle; retried next cycle";
          SetReason(s, e, r);
          slots[n.slot].done = true;
        }
        continue;
      }
      if ((n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim) && !n.targets.empty()) {
        // Its victims are its own: one that another preemptor counts on
        // since this search (earlier in this cycle) frees nothing for it.
        bool overlap = false;
        for (const Target& t : n.targets) overlap = overlap || AwaitedByOther(*t.entry, *e);
        // And with them gone it must fit as things are now (Kueue's fits
        // check on preemptions): what was admitted or held since its search
        // counts.
        bool fits_after = !overlap;
        if (fits_after) {
          for (const Target& t : n.targets) GK_CHECK_OK(s.tree.RemoveUsage(t.entry->cinfo().admission->cluster_queue,
                                                                             t.entry->cinfo().admission->usage));
          fits_after = WithoutHolds(s, [&] { return s.tree.Fits(cq, n.result.assignment.usage); });
          for (const Target& t : n.targets) GK_CHECK_OK(s.tree.AddUsage(t.entry->cinfo().admission->cluster_queue,
                                                                          t.entry->cinfo().admission->usage));
          // Nor may it take what another waiting preemptor counts on.
          fits_after = fits_after && VirtualFits(s, e, cq, n.result.assignment.usage, n.targets);
        }
        slots[n.slot].done = true;  // the preemptor stays the head while it waits
        if (!fits_after) {
          if (e->waiting()) PutHold(s, e);
          PendingReason r;
          r.code = PendingReason::Code::kWaitingForQuota;
          r.message = overlap ? "its preemption targets overlap another workload's; retried next cycle"
                              : "the quota it would preempt for was taken in the same cycle; retried next cycle";
          SetReason(s, e, r);
          continue;
        }
        std::vector<std::string> names;
        for (const Target& t : n.targets) {
          names.push_back(Name(t.entry->cinfo().key));
          victims.insert(t.entry);
          if (t.entry->cinfo().phase == Phase::kEvicting) continue;
          Evict(s, t.entry, t.reason.c_str(),
                absl::StrCat("preempted to accommodate ", Name(e->cinfo().key), " (priority ", e->cinfo().priority,
                             ", ClusterQueue ", cq, ") due to ", PreemptionWhy(t.reason)),
                e, now);
          ++stats.preempted;
          progress = round_progress = true;
        }
        // Until a victim stops (which frees quota in this tree and wakes
        // the queue) another try would choose the same victims.
        slots[n.slot].q->blocked = true;
        // It waits for them and, from now on, holds what they give back
        // (and what it needs besides, when free) in every cycle until it is
        // admitted.
        if (!e->waiting()) {
          s.preemptors.push_back(e);
          e->preemption = std::make_unique<Entry::Preemption>();
        }
        e->preemption->awaiting.clear();
        for (const Target& t : n.targets) {
          e->preemption->awaiting.push_back(t.entry->instance());
          t.entry->awaited_by = e;
        }
        e->preemption->need = n.result.assignment.usage;
        e->preemption->plan = n.result.assignment;
        PutHold(s, e);
        PendingReason r;
        r.code = PendingReason::Code::kWaitingForPreemption;
        r.message = absl::StrCat("waiting for ", names.size(), " preempted workload(s) to stop: ",
                                 absl::StrJoin(names, ", "));
        SetReason(s, e, r);
        continue;
      }
      // No fit (or preemption without victims). A preemptor whose victims
      // are gone and still does not fit lets go: something changed.
      ClearPreemptor(s, e);
      if ((n.result.mode == FitMode::kPreempt || n.result.mode == FitMode::kReclaim) &&
          n.cq->preemption.reclaim_within_cohort != model::ReclaimWithinCohortPolicy::kAny) {
        // Kueue's reserveCapacityForUnreclaimablePreempt: hold, for the rest
        // of this cycle, the capacity this workload waits for, so that
        // lower-ranked workloads of other queues cannot take it first.
        ResourceAmounts hold;
        const int node = s.tree.ClusterQueueNode(cq);
        for (const auto& [fr, amount] : n.result.assignment.usage) {
          const Quota& quota = s.tree.QuotaAt(node, fr);
          const Quantity usage = s.tree.UsageAt(node, fr);
          Quantity room;
          if (s.tree.BorrowingWith(node, fr, amount)) {
            room = quota.borrowing_limit.has_value()
                       ? Sub0(quota.nominal.SaturatingAdd(*quota.borrowing_limit), usage)
                       : amount;
          } else {
            room = Sub0(quota.nominal, usage);
          }
          room = std::min(room, amount);
          if (!room.IsZero() && !room.IsNegative()) hold[fr] = room;
        }
        if (!hold.empty() && s.tree.AddUsage(cq, hold).ok()) reserved.emplace_back(cq, std::move(hold));
      }
      PendingReason r = n.result.reason;
      if (n.result.mode != FitMode::kNoFit && r.code == PendingReason::Code::kPreemptionNoCandidates) {
        // Like Kueue's QuotaReserved reason: it waits for quota. Only a
        // workload that may never preempt is told so.
        r.code = e->cinfo().can_preempt ? PendingReason::Code::kWaitingForQuota
                                     : PendingReason::Code::kPreemptionNoCandidates;
      }
      SetReason(s, e, r);
      if (strict) {
        Queue& q = *slots[n.slot].q;
        q.blocked = true;  // the head blocks the queue until something changes
        // Everything behind it waits for it (KUEUE-SEMANTICS §3.2). They are
        // told once per blocking head; later arrivals when they are queued.
        // A preemptor behind it lets go of its hold: it cannot be admitted
        // before this head.
        const std::string head = Name(e->cinfo().key);
        std::vector<Entry*> waiting_behind;
        for (Entry* p : s.preemptors) {
          if (p != e && p->queued_in == cq) waiting_behind.push_back(p);
        }
        for (Entry* p : waiting_behind) {
          TakeHold(s, p);
          ClearPreemptor(s, p);
        }
        if (q.blocked_by != head) {
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
            s.Touch(*behind);
          }
        }
      } else {
        Queue& q = *slots[n.slot].q;
        q.active.erase(e);
        q.inadmissible.insert(e);
        e->inadmissible = true;
        slots[n.slot].failed_shapes.emplace(ShapeOf(*e), e->cinfo().reason);
        round_progress = true;
        set_aside = true;  // the queue has a new head to try
      }
    }
    if (s.options.one_head_per_cycle || !round_progress) break;
    if (watch.Elapsed() >= s.options.time_budget) {
      stats.more = true;  // the rest next time; the queues keep their state
      break;
    }
  }
  // 6. Give back what was held: the holds are taken again next cycle.
  for (const auto& [cq, amounts] : reserved) GK_CHECK_OK(s.tree.RemoveUsage(cq, amounts));
  for (Entry* p : s.preemptors) TakeHold(s, p);
  for (Entry* p : preemptors) TakeHold(s, p);
  // With one head per cycle, a head set aside leaves another to try: one
  // more cycle (otherwise the rounds above already tried it).
  return progress || (set_aside && s.options.one_head_per_cycle);
}

}  // namespace

// --- State members. ---

bool Scheduler::State::FairSharingFor(const model::ClusterQueueName& cq) const {
  if (options.fair_sharing) return true;
  const int node = tree.ClusterQueueNode(cq);
  if (node < 0 || tree.Parent(node) < 0) return false;
  auto c = policies->cohorts.find(tree.NodeName(tree.Root(node)));
  if (c == policies->cohorts.end()) return false;
  auto l = c->second.meta.labels.find(kFairSharingLabel);
  return l != c->second.meta.labels.end() && l->second == "true";
}

// --- Scheduler. ---

Scheduler::Scheduler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(std::shared_ptr<const model::PolicySet> policies,
                                                             SchedulerOptions options) {
  if (policies == nullptr) policies = std::make_shared<const model::PolicySet>();
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(*policies);
  if (!tree.ok()) return tree.status();
  auto state = std::make_unique<State>(options);
  state->policies = std::move(policies);
  state->tree = *std::move(tree);
  for (const auto& [name, cq] : state->policies->cluster_queues) state->queues[name];
  state->IndexQueues();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(state)));
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Restore(
    std::shared_ptr<const model::PolicySet> policies, const std::vector<model::ClusterQueue>& terminating,
    std::vector<std::shared_ptr<const WorkloadInfo>> workloads, SchedulerOptions options) {
  if (policies == nullptr) policies = std::make_shared<const model::PolicySet>();
  std::map<model::ClusterQueueName, model::ClusterQueue> kept;
  for (const model::ClusterQueue& cq : terminating) {
    if (policies->cluster_queues.count(cq.meta.name) == 0) kept.emplace(cq.meta.name, cq);
  }
  model::PolicySet with_terminating;
  if (!kept.empty()) {
    with_terminating = *policies;
    for (const auto& [name, cq] : kept) with_terminating.cluster_queues.emplace(name, cq);
  }
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(kept.empty() ? *policies : with_terminating);
  if (!tree.ok()) return tree.status();
  auto state = std::make_unique<State>(options);
  State& s = *state;
  s.policies = std::move(policies);
  s.tree = *std::move(tree);
  s.terminating = std::move(kept);
  for (const auto& [name, cq] : s.policies->cluster_queues) s.queues[name];
  for (const auto& [name, cq] : s.terminating) s.queues[name];
  s.IndexQueues();
  // Registration order (the last tie-break of queue order): creation time,
  // then name, so that a restore is deterministic.
  workloads.erase(std::remove_if(workloads.begin(), workloads.end(),
                                 [](const std::shared_ptr<const WorkloadInfo>& w) {
                                   return w == nullptr || w->workload == nullptr || w->phase == Phase::kFinished;
                                 }),
                  workloads.end());
  std::sort(workloads.begin(), workloads.end(), [](const auto& a, const auto& b) {
    if (a->created_at != b->created_at) return a->created_at < b->created_at;
    if (a->key != b->key) return a->key < b->key;
    return a->workload->uid < b->workload->uid;
  });
  for (const std::shared_ptr<const WorkloadInfo>& info : workloads) {
    const InstanceKey instance = InstanceOf(info->key, info->workload->uid);
    if (FindEntry(s, instance) != nullptr) continue;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    e->seq = s.next_seq++;
    e->dirty = &s.dirty_workloads;
    // The caller hands over its images: one held nowhere else is taken as
    // it is (it was built mutable by the decoder), others are copied.
    std::shared_ptr<WorkloadInfo> mine = info.use_count() == 1 ? std::const_pointer_cast<WorkloadInfo>(info)
                                                               : std::make_shared<WorkloadInfo>(*info);
    mine->reason = PendingReason{};
    e->info_ptr = std::move(mine);
    const workload::Workload& w = *e->cinfo().workload;
    if (!w.pod_group_name.empty()) {
      e->group = std::make_unique<Entry::Group>();
      if (e->cinfo().pod_group != nullptr) {
        e->group->pod_sets = e->cinfo().pod_group->pod_sets;
        e->group->pods.insert(e->cinfo().pod_group->pods.begin(), e->cinfo().pod_group->pods.end());
      } else {
        e->group->pod_sets = w.pod_sets;
        for (size_t i = 0; i < e->group->pod_sets.size(); ++i) e->group->pod_sets[i].name = absl::StrCat("group-", i);
        e->group->pods.insert(w.name);
        SyncPodGroup(e);
      }
    }
    e->SetOrderKey();
    s.dirty_workloads.insert(e->cinfo().key);
    s.entries[instance.key].push_back(std::move(entry));
    ++s.instance_count;
    if (e->cinfo().workload->unconfirmed) ++s.unconfirmed_count;
    if (HoldsQuota(e->cinfo().phase) && e->cinfo().admission.has_value()) {
      const Assignment& a = *e->cinfo().admission;
      absl::Status held = s.queues.count(a.cluster_queue) != 0 ? s.tree.AddUsage(a.cluster_queue, a.usage)
                                                                 : absl::NotFoundError(absl::StrCat(
                                                                       "ClusterQueue ", a.cluster_queue, " is gone"));
      if (held.ok()) {
        s.queues[a.cluster_queue].admitted.insert(e);
        continue;
      }
      e->info().actuation = absl::StrCat("its quota could not be restored after a restart (", held.message(),
                                         "); queued again");
      e->info().admission.reset();
    }
    e->info().phase = Phase::kPending;
    Enqueue(s, e);
  }
  for (const auto& [name, q] : s.queues) {
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) continue;
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      if (s.tree.RawAvailable(node, fr).IsNegative()) s.over_quota_by_policy.insert({name, fr});
    }
  }
  s.all_queues_dirty = true;
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(state)));
}

std::vector<model::ClusterQueue> Scheduler::Terminating() const {
  std::vector<model::ClusterQueue> out;
  for (const auto& [name, cq] : state_->terminating) {
    auto q = state_->queues.find(name);
    if (q != state_->queues.end() && !q->second.admitted.empty()) out.push_back(cq);
  }
  return out;
}

namespace {

// Forgets instance `e` (deleted, or ended): it leaves its queue, gives back
// its quota, and the change says what it freed.
// `world_change`: false when the end was already counted (an object that
// was replaced under its name leaves once its pods stopped).
void Forget(State& s, Entry* e, StateChange::Type type, absl::Time now, bool world_change = true) {
  Dequeue(s, e);
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
                             std::optional<absl::Time> admitted_at, absl::Time now) {
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
  for (const workload::PodSet& ps : e->PodSets()) {
    PodSetAssignment psa;
    psa.name = ps.name;
    psa.count = ps.count;
    auto hint = flavors.find(ps.name);
    for (const auto& [res, total] : PodSetTotals(ps, *cq)) {
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
  for (const auto& [name, q] : s.queues) {
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) continue;
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      if (s.tree.RawAvailable(node, fr).IsNegative()) s.over_quota_by_policy.insert({name, fr});
    }
  }
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
    e->inadmissible = false;
    Enqueue(s, e);
  }
  // Quota lowered below usage: admitted work keeps running; nothing new is
  // admitted there until usage falls back (the invariant check knows).
  s.over_quota_by_policy.clear();
  for (const auto& [name, q] : s.queues) {
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) continue;
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      if (s.tree.RawAvailable(node, fr).IsNegative()) s.over_quota_by_policy.insert({name, fr});
    }
  }
  Drain(s, now);
  s.all_queues_dirty = true;
  StateChange c;
  c.type = StateChange::Type::kPoliciesChanged;
  c.time = now;
  Record(s, std::move(c));
  return absl::OkStatus();
}

namespace {

// The entry `key` with `uid` when it is in `phase`, else nullptr (the
// actuator's answer is stale: the workload moved on or was replaced).
Entry* FindInPhase(State& s, const WorkloadKey& key, const std::string& uid, Phase phase) {
  Entry* e = FindEntry(s, InstanceOf(key, uid));
  if (e == nullptr) return nullptr;
  const WorkloadInfo& info = e->cinfo();
  return info.workload->uid == uid && info.phase == phase ? e : nullptr;
}

}  // namespace

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
  Enqueue(s, e);
  Record(s, std::move(c));
  // An object replaced by a newer one under its name is gone: it is not
  // queued again (it would take quota, and preempt, for nothing).
  if (Superseded(s, *e)) Forget(s, e, StateChange::Type::kRemoved, now, /*world_change=*/false);
  return absl::OkStatus();
}

ScheduleStats Scheduler::Schedule(absl::Time now) {
  State& s = *state_;
  while (!s.backoff.empty() && s.backoff.begin()->first <= now) {
    Entry* e = s.backoff.begin()->second;
    Enqueue(s, e);  // takes it out of the backoff
    WorldChanged(s, *e);
  }
  const int64_t guarded_before = s.churn.guarded();
  ScheduleStats stats;
  const base::Stopwatch watch;
  for (int i = 0; i < state_->options.max_cycles; ++i) {
    ++stats.cycles;
    const bool progress = RunCycle(*state_, now, stats, watch);
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

void Scheduler::TakeDirty(std::vector<WorkloadKey>* workloads, std::vector<model::ClusterQueueName>* queues,
                          bool* all_queues) {
  State& s = *state_;
  workloads->assign(s.dirty_workloads.begin(), s.dirty_workloads.end());
  queues->assign(s.dirty_queues.begin(), s.dirty_queues.end());
  *all_queues = s.all_queues_dirty;
  s.dirty_workloads.clear();
  s.dirty_queues.clear();
  s.all_queues_dirty = false;
}

std::vector<StateChange> Scheduler::TakeChanges() {
  std::vector<StateChange> out;
  out.swap(state_->changes);
  return out;
}

std::vector<std::shared_ptr<const WorkloadInfo>> Scheduler::TakeFinished() {
  std::vector<std::shared_ptr<const WorkloadInfo>> out;
  out.swap(state_->finished);
  return out;
}

int64_t Scheduler::guarded_total() const { return state_->churn.guarded(); }

const model::PolicySet& Scheduler::policies() const { return *state_->policies; }
std::shared_ptr<const model::PolicySet> Scheduler::shared_policies() const { return state_->policies; }

std::vector<std::shared_ptr<const WorkloadInfo>> Scheduler::Instances(const WorkloadKey& key) const {
  std::vector<std::shared_ptr<const WorkloadInfo>> out;
  auto it = state_->entries.find(key);
  if (it == state_->entries.end()) return out;
  out.reserve(it->second.size());
  for (const std::unique_ptr<Entry>& e : it->second) out.push_back(e->info_ptr);
  return out;
}

std::shared_ptr<const WorkloadInfo> Scheduler::ShareInstance(const InstanceKey& instance) const {
  const Entry* e = FindEntry(*state_, instance);
  return e == nullptr ? nullptr : e->info_ptr;
}

const WorkloadInfo* Scheduler::Find(const WorkloadKey& key) const {
  const Entry* e = Newest(*state_, key);
  return e == nullptr ? nullptr : &e->cinfo();
}

const WorkloadInfo* Scheduler::FindInstance(const InstanceKey& instance) const {
  const Entry* e = FindEntry(*state_, instance);
  return e == nullptr ? nullptr : &e->cinfo();
}

std::vector<const WorkloadInfo*> Scheduler::Workloads() const {
  std::vector<const WorkloadInfo*> out;
  out.reserve(state_->instance_count);
  ForEachEntry(*state_, [&](const Entry* e) { out.push_back(&e->cinfo()); });
  return out;
}

size_t Scheduler::size() const { return state_->instance_count; }
size_t Scheduler::unconfirmed() const { return state_->unconfirmed_count; }

std::vector<const WorkloadInfo*> Scheduler::PendingInQueueOrder(const model::ClusterQueueName& cq) const {
  std::vector<const WorkloadInfo*> out;
  auto q = state_->queues.find(cq);
  if (q == state_->queues.end()) return out;
  // Active and inadmissible together, in queue order.
  auto a = q->second.active.begin();
  auto b = q->second.inadmissible.begin();
  QueueOrder before;
  while (a != q->second.active.end() || b != q->second.inadmissible.end()) {
    if (b == q->second.inadmissible.end() || (a != q->second.active.end() && before(*a, *b))) {
      out.push_back(&(*a++)->cinfo());
    } else {
      out.push_back(&(*b++)->cinfo());
    }
  }
  return out;
}

std::optional<ClusterQueueStatus> Scheduler::ClusterQueue(const model::ClusterQueueName& name) const {
  const State& s = *state_;
  auto q = s.queues.find(name);
  if (q == s.queues.end()) return std::nullopt;
  ClusterQueueStatus st;
  st.name = name;
  const int node = s.tree.ClusterQueueNode(name);
  if (const model::ClusterQueue* cq = LiveClusterQueue(s, name)) st.cohort = cq->cohort;
  st.active = !ClusterQueueBlocked(s, name).has_value();
  st.pending = static_cast<int64_t>(q->second.active.size() + q->second.inadmissible.size());
  st.pending_inadmissible = static_cast<int64_t>(q->second.inadmissible.size());
  st.admitted = static_cast<int64_t>(q->second.admitted.size());
  if (node >= 0) {
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      FlavorResourceStatus& r = st.resources[fr];
      const Quota& quota = s.tree.QuotaAt(node, fr);
      r.nominal = quota.nominal;
      r.borrowing_limit = quota.borrowing_limit;
      r.lending_limit = quota.lending_limit;
      r.usage = s.tree.UsageAt(node, fr);
      r.borrowed = s.tree.Borrowing(name, fr);
      r.available = s.tree.Available(name, fr);
      absl::StatusOr<Quantity> idle = r.nominal.Sub(r.usage);
      // Lent: idle nominal quota that other queues of the cohort use now.
      if (idle.ok() && !idle->IsNegative() && s.tree.Parent(node) >= 0) {
        // What the other ClusterQueues of the tree borrow, walked down from the root.
        Quantity others_borrow;
        std::vector<int> stack{s.tree.Root(node)};
        while (!stack.empty()) {
          const int n = stack.back();
          stack.pop_back();
          if (s.tree.IsClusterQueue(n)) {
            if (n == node) continue;
            absl::StatusOr<Quantity> b = s.tree.UsageAt(n, fr).Sub(s.tree.QuotaAt(n, fr).nominal);
            if (b.ok() && !b->IsNegative()) others_borrow = others_borrow.SaturatingAdd(*b);
            continue;
          }
          for (int c : s.tree.Children(n)) stack.push_back(c);
        }
        r.lent = std::min(*idle, others_borrow);
      }
    }
    st.weighted_share = static_cast<double>(s.tree.DominantResourceShare(node, {}));
  }
  return st;
}

std::string Scheduler::TreeOf(const model::ClusterQueueName& cq) const {
  const int node = state_->tree.ClusterQueueNode(cq);
  if (node < 0 || state_->tree.Parent(node) < 0) return "";
  return state_->tree.NodeName(state_->tree.Root(node));
}

std::vector<ClusterQueueStatus> Scheduler::ClusterQueues() const {
  std::vector<ClusterQueueStatus> out;
  for (const auto& [name, q] : state_->queues) {
    if (std::optional<ClusterQueueStatus> st = ClusterQueue(name)) out.push_back(*std::move(st));
  }
  return out;
}

absl::Status Scheduler::CheckInvariants() const {
  const State& s = *state_;
  if (absl::Status t = s.tree.CheckInvariants(); !t.ok()) return t;
  std::map<std::string, ResourceAmounts> sums;
  size_t queued = 0;
  size_t counted = 0;
  size_t unconfirmed = 0;
  for (const auto& [key, list] : s.entries) {
    if (list.empty()) return absl::InternalError(absl::StrCat(KeyString(key), " has no instances"));
    for (const std::unique_ptr<Entry>& e : list) {
      ++counted;
      const WorkloadInfo& info = e->cinfo();
      const std::string name = absl::StrCat(KeyString(key), " (uid ", info.workload->uid, ")");
      // Nothing is decided on a review alone (DESIGN §2).
      if (info.workload->unconfirmed) {
        ++unconfirmed;
        if (info.phase != Phase::kPending || !e->queued_in.empty() || e->waiting()) {
          return absl::InternalError(absl::StrCat(name, " is known only from a review but is ", PhaseName(info.phase),
                                                  e->queued_in.empty() ? "" : " and queued",
                                                  e->waiting() ? " and preempting" : ""));
        }
      }
      if (!(info.key == key)) return absl::InternalError(absl::StrCat(name, " is filed under another key"));
      if (FindEntry(s, e->instance()) != e.get()) {
        return absl::InternalError(absl::StrCat(name, " shares its uid with another instance"));
      }
      if (e->holding()) return absl::InternalError(absl::StrCat(name, " holds quota for preemption outside a cycle"));
      if (HoldsQuota(info.phase)) {
        if (!info.admission.has_value()) return absl::InternalError(absl::StrCat(name, " holds quota without an admission"));
        if (!e->queued_in.empty() || s.orphans.count(e.get()) != 0) {
          return absl::InternalError(absl::StrCat(name, " is admitted and queued at once"));
        }
        const Assignment& a = *info.admission;
        auto q = s.queues.find(a.cluster_queue);
        if (q == s.queues.end() || q->second.admitted.count(e.get()) == 0) {
          return absl::InternalError(absl::StrCat(name, " is admitted but not listed in ClusterQueue ", a.cluster_queue));
        }
        // The whole gang: every pod set, every non-zero request, in full.
        if (a.pod_sets.size() != e->PodSets().size()) {
          return absl::InternalError(absl::StrCat(name, " has ", a.pod_sets.size(), " pod sets admitted of ",
                                                  e->PodSets().size()));
        }
        ResourceAmounts total;
        for (size_t i = 0; i < a.pod_sets.size(); ++i) {
          const workload::PodSet& ps = e->PodSets()[i];
          if (a.pod_sets[i].count != ps.count) {
            return absl::InternalError(absl::StrCat(name, ": pod set ", ps.name, " admitted with ",
                                                    a.pod_sets[i].count, " of ", ps.count, " pods"));
          }
          for (const auto& [res, per_pod] : ps.requests) {
            absl::StatusOr<Quantity> want = per_pod.MultiplyBy(ps.count);
            if (!want.ok() || want->IsZero()) continue;
            auto f = a.pod_sets[i].flavors.find(res);
            auto u = a.pod_sets[i].usage.find(res);
            if (f == a.pod_sets[i].flavors.end() || u == a.pod_sets[i].usage.end() || u->second != *want) {
              return absl::InternalError(absl::StrCat(name, ": pod set ", ps.name, " holds no or partial quota for ", res));
            }
          }
          for (const auto& [res, amount] : a.pod_sets[i].usage) {
            if (amount.IsZero()) continue;  // a pod set without pods has a flavor and holds nothing
            FlavorResource fr{a.pod_sets[i].flavors.at(res), res};
            total[fr] = total[fr].SaturatingAdd(amount);
          }
        }
        for (const auto& [fr, amount] : total) {
          auto u = a.usage.find(fr);
          if (u == a.usage.end() || u->second != amount) {
            return absl::InternalError(absl::StrCat(name, ": admission total for ", fr.ToString(),
                                                    " differs from its pod sets"));
          }
        }
        ResourceAmounts& sum = sums[a.cluster_queue];
        for (const auto& [fr, amount] : a.usage) sum[fr] = sum[fr].SaturatingAdd(amount);
      } else {
        if (info.admission.has_value()) {
          return absl::InternalError(absl::StrCat(name, " is ", PhaseName(info.phase), " but holds an admission"));
        }
        const bool in_queue = !e->queued_in.empty();
        const bool orphan = s.orphans.count(e.get()) != 0;
        if (e->in_backoff) {
          if (in_queue || orphan) return absl::InternalError(absl::StrCat(name, " is in release backoff and queued"));
          continue;
        }
        if (in_queue == orphan) {
          return absl::InternalError(absl::StrCat(name, " is pending but ", in_queue ? "both queued and parked" : "in no queue"));
        }
        if (in_queue) {
          const Queue& q = s.queues.at(e->queued_in);
          if ((q.active.count(e.get()) != 0) + (q.inadmissible.count(e.get()) != 0) != 1) {
            return absl::InternalError(absl::StrCat(name, " is not exactly once in ClusterQueue ", e->queued_in));
          }
          ++queued;
        }
      }
    }
  }
  if (counted != s.instance_count) return absl::InternalError("the instance count is off");
  if (unconfirmed != s.unconfirmed_count) return absl::InternalError("the unconfirmed count is off");
  size_t listed = 0;
  for (const auto& [name, q] : s.queues) {
    listed += q.active.size() + q.inadmissible.size();
    for (const Entry* e : q.admitted) {
      if (!HoldsQuota(e->cinfo().phase)) return absl::InternalError(absl::StrCat("ClusterQueue ", name, " lists ", Name(e->cinfo().key), " as admitted"));
    }
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) {
      if (!q.admitted.empty()) return absl::InternalError(absl::StrCat("ClusterQueue ", name, " holds quota outside the tree"));
      continue;
    }
    const ResourceAmounts& sum = sums[name];
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      auto it = sum.find(fr);
      const Quantity want = it == sum.end() ? Quantity() : it->second;
      if (s.tree.UsageAt(node, fr) != want) {
        return absl::InternalError(absl::StrCat("ClusterQueue ", name, ": recorded usage of ", fr.ToString(), " is ",
                                                s.tree.UsageAt(node, fr).Format(), " but its admitted workloads hold ",
                                                want.Format()));
      }
      if (s.tree.RawAvailable(node, fr).IsNegative() && s.over_quota_by_policy.count({name, fr}) == 0) {
        return absl::InternalError(absl::StrCat("ClusterQueue ", name, " is over what the cohort allows on ",
                                                fr.ToString(), ": usage ", s.tree.UsageAt(node, fr).Format(),
                                                ", available ", s.tree.RawAvailable(node, fr).Format()));
      }
    }
  }
  if (listed != queued) return absl::InternalError("a queue lists a workload that is not pending in it");
  for (const Entry* p : s.preemptors) {
    if (FindEntry(s, p->instance()) != p) return absl::InternalError("a preemptor is not tracked");
    if (!p->waiting() || p->preemption->need.empty()) return absl::InternalError("a preemptor needs nothing");
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::broker
