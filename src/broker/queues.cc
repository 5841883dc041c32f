// gangkeeper broker: queues.h — queue membership, the moves between
// pending, admitted and evicting, and the pending reasons.
#include "src/broker/queues.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/check.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

// An empty selector selects every namespace without looking at its labels
// (most ClusterQueues say `namespaceSelector: {}`).
bool SelectsNamespace(const model::PolicySet& p, const model::LabelSelector& selector, const std::string& ns) {
  if (selector.match_labels.empty() && selector.match_expressions.empty()) return true;
  return selector.Matches(p.NamespaceLabels(ns));
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

// Each flavor's reason, after the sentence about the first blocker (the
// reason keeps only their hash).
void AppendFlavors(PendingReason& r, const std::vector<std::string>& flavors) {
  if (flavors.empty()) return;
  if (r.code != PendingReason::Code::kNoMatchingFlavor) {
    absl::StrAppend(&r.message, "; flavors tried: ", absl::StrJoin(flavors, "; "));
  }
}

// Whether Describe writes `r`'s sentence from its numbers.
bool Described(const PendingReason& r) {
  return r.message.empty() &&
         (r.code == PendingReason::Code::kWaitingForQuota || r.code == PendingReason::Code::kPreemptionNoCandidates ||
          r.code == PendingReason::Code::kExceedsMaxQuota);
}

// The same reason but for the live numbers (available, used, used by).
// Asked for every requeued head: the cheap fields first, the names last.
bool SameKind(const PendingReason& a, const PendingReason& b) {
  return a.code == b.code && a.flavors_hash == b.flavors_hash && a.requested == b.requested &&
         a.nominal == b.nominal && a.max_capacity == b.max_capacity && a.borrowing_limit == b.borrowing_limit &&
         a.resource == b.resource && a.flavor == b.flavor && a.pod_set == b.pod_set;
}

// The admitted workloads holding what `r` waits for (its used_by).
void CountUsers(const State& s, const std::string& cq, PendingReason& r) {
  r.used_by = 0;
  if (auto q = s.queues.find(cq); q != s.queues.end()) {
    r.used_by = static_cast<int64_t>(q->second.admitted.Using(FlavorResource{r.flavor, r.resource}).size());
  }
}

// Fills in the numbers only known from the admitted set (unless
// `counted`) and the sentence.
void Describe(const State& s, const std::string& cq, PendingReason& r, const std::vector<std::string>& flavors,
              bool counted = false) {
  if (!r.message.empty()) {
    AppendFlavors(r, flavors);
    return;
  }
  if (Described(r)) {
    if (!counted) CountUsers(s, cq, r);
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
  AppendFlavors(r, flavors);
}

}  // namespace

bool HoldsQuota(Phase p) { return p == Phase::kReserved || p == Phase::kRunning || p == Phase::kEvicting; }

std::string Name(const WorkloadKey& k) { return absl::StrCat(k.namespace_name, "/", k.name); }

const model::ClusterQueue* LiveClusterQueue(const State& s, const std::string& name) {
  auto it = s.policies->cluster_queues.find(name);
  return it == s.policies->cluster_queues.end() ? nullptr : &it->second;
}

std::optional<PendingReason> ClusterQueueBlocked(const State& s, const std::string& name) {
  PendingReason r;
  const model::ClusterQueue* cq = LiveClusterQueue(s, name);
  if (cq == nullptr) {
    r.code = PendingReason::Code::kInactive;
    r.message = absl::StrCat("ClusterQueue ", name, " does not exist");
    return r;
  }
  if (!cq->inactive_reason.empty()) {
    r.code = PendingReason::Code::kInactive;
    r.message = absl::StrCat("ClusterQueue ", name, " is inactive: ", cq->inactive_reason);
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

StateChange Change(StateChange::Type type, const Entry& e, absl::Time now) {
  StateChange c;
  c.type = type;
  c.time = now;
  c.key = e.cinfo().key;
  c.uid = e.cinfo().workload->uid;
  c.cluster_queue = e.cinfo().cluster_queue;
  return c;
}

void Record(State& s, StateChange c) { s.changes.push_back(std::move(c)); }

void WorldChanged(State& s, const Entry& e) {
  if (e.cinfo().admission.has_value()) s.churn.WorldChanged(e.cinfo().admission->cluster_queue);
  if (!e.cinfo().cluster_queue.empty()) s.churn.WorldChanged(e.cinfo().cluster_queue);
  if (!e.queued_in.empty()) s.churn.WorldChanged(e.queued_in.name());
}

void Dequeue(State& s, Entry* e) {
  s.Touch(*e);
  if (e->in_backoff) {
    s.backoff.erase(e->backoff_it);
    e->in_backoff = false;
  }
  if (!e->queued_in.empty()) {
    auto q = s.queues.find(e->queued_in.name());
    if (q != s.queues.end()) {
      q->second.active.erase(e);
      q->second.inadmissible.erase(e);
      q->second.blocked = false;  // the head may have changed
    }
    e->queued_in.clear();
  }
  s.orphans.erase(e);
}

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
      auto& [queue_name, q] = *s.queues.try_emplace(cq->meta.name).first;
      e->queued_in.Set(&queue_name);
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

void MergeInto(OrderedEntries& to, OrderedEntries& from) {
  if (to.size() < from.size()) to.swap(from);
  to.merge(from);
  GK_DCHECK(from.empty());
}

void RequeueInadmissible(State& s, const std::string& cq) {
  const int node = s.tree.ClusterQueueNode(cq);
  const int root = node >= 0 ? s.tree.Root(node) : -1;
  for (auto& [name, q] : s.queues) {
    if (q.inadmissible.empty() && !q.blocked) continue;
    if (name != cq) {
      const int n = s.tree.ClusterQueueNode(name);
      if (root < 0 || n < 0 || s.tree.Root(n) != root) continue;
    }
    MergeInto(q.active, q.inadmissible);  // usually the active set is empty
    q.blocked = false;
  }
}

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

void Admit(State& s, Entry* e, const Assignment& assignment, absl::Time now) {
  GK_CHECK_OK(s.tree.AddUsage(assignment.cluster_queue, assignment.usage));
  Dequeue(s, e);
  const bool was_preemptor = e->waiting();
  ClearPreemptor(s, e);
  e->info().phase = Phase::kReserved;
  e->info().admission = assignment;
  s.queues[assignment.cluster_queue].admitted.insert(e);  // indexed by its admission's usage
  e->info().cluster_queue = assignment.cluster_queue;
  e->info().admitted_at = now;
  e->info().eviction_reason.clear();
  e->info().reason = PendingReason{};
  ++e->info().admissions;
  WatchReadiness(s, e, now);
  s.Touch(*e);
  StateChange c = Change(StateChange::Type::kAdmitted, *e, now);
  c.assignment = assignment;
  // Partial admission: say how many of its pods it starts with.
  int64_t admitted_pods = 0;
  for (const PodSetAssignment& psa : assignment.pod_sets) admitted_pods += psa.count;
  const int64_t all_pods = e->cinfo().workload->TotalPods();
  if (e->group == nullptr && admitted_pods < all_pods) {
    c.message = absl::StrCat("admitted with ", admitted_pods, " of ", all_pods, " pods");
  }
  Record(s, std::move(c));
  // What it held is now its usage: workloads that were set aside against
  // the hold may now reclaim from it or fit elsewhere.
  if (was_preemptor) RequeueInadmissible(s, assignment.cluster_queue);
}

void ReleaseQuota(State& s, Entry* e) {
  GK_CHECK(e->cinfo().admission.has_value());
  s.Touch(*e);
  const std::string cq = e->cinfo().admission->cluster_queue;
  GK_CHECK_OK(s.tree.RemoveUsage(cq, e->cinfo().admission->usage));
  auto q = s.queues.find(cq);
  if (q != s.queues.end()) q->second.admitted.erase(e);  // before the admission it is indexed by goes
  e->info().admission.reset();
  UnwatchReadiness(s, e);
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

void SyncPodGroup(Entry* e) {
  auto g = std::make_shared<PodGroupState>();
  g->pods.assign(e->group->pods.begin(), e->group->pods.end());
  g->pod_sets = e->group->pod_sets;
  e->info().pod_group = std::move(g);
}

void NoteOverQuota(State& s) {
  for (const auto& [name, q] : s.queues) {
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) continue;
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      if (s.tree.RawAvailable(node, fr).IsNegative()) s.over_quota_by_policy.insert({name, fr});
    }
  }
}

std::string BlockedMessage(const std::string& head, const std::string& cq) {
  return absl::StrCat("waiting behind ", head, ", the head of StrictFIFO ClusterQueue ", cq,
                      ", which does not fit yet");
}

namespace {

// SetReason's work: `r` carries its flavors_hash already; `prepared`, when
// given, is `r` with `flavors_tried` and its users counted, shared by the
// entries of one queue set aside in one pass (SetAsideReason); `own`, when
// given, is `r` itself and may be moved from (SetReason's copy).
void SetReasonImpl(State& s, Entry* e, const PendingReason& r, const std::vector<std::string>& flavors_tried,
                   const std::shared_ptr<const Entry::FreshReason>* prepared, PendingReason* own) {
  const PendingReason& old = e->cinfo().reason;
  if (SameKind(old, r)) {
    const bool same_numbers = old.available == r.available && old.used == r.used;
    if (r.message.empty() ? same_numbers : same_numbers && r.message == old.message && flavors_tried.empty()) {
      // The same reason: keep the sentence (and the snapshot) as they are.
      e->fresh_reason.reset();
      return;
    }
    if (s.options.defer_reason_numbers && Described(r) && !old.message.empty()) {
      // Only the numbers changed: kept beside it for RefreshReasons.
      if (e->fresh_reason == nullptr) s.stale_reasons.push_back(e->instance());
      if (prepared != nullptr) {
        e->fresh_reason = *prepared;
        return;
      }
      auto fresh = std::make_shared<Entry::FreshReason>(
          Entry::FreshReason{own != nullptr ? std::move(*own) : r, flavors_tried});
      CountUsers(s, e->cinfo().cluster_queue, fresh->reason);
      e->fresh_reason = std::move(fresh);
      return;
    }
  }
  e->fresh_reason.reset();
  PendingReason described = own != nullptr ? std::move(*own) : r;
  Describe(s, e->cinfo().cluster_queue, described, flavors_tried);
  e->info().reason = std::move(described);
  s.Touch(*e);
}

}  // namespace

void SetReason(State& s, Entry* e, PendingReason r, const std::vector<std::string>& flavors_tried) {
  if (!flavors_tried.empty()) r.flavors_hash = absl::HashOf(flavors_tried);
  SetReasonImpl(s, e, r, flavors_tried, nullptr, &r);
}

void SetAsideReason(State& s, Entry* e, const Entry::FreshReason& why, SharedReason* shared) {
  if (shared->fresh == nullptr) {
    auto fresh = std::make_shared<Entry::FreshReason>(why);
    if (!fresh->flavors_tried.empty()) fresh->reason.flavors_hash = absl::HashOf(fresh->flavors_tried);
    CountUsers(s, e->cinfo().cluster_queue, fresh->reason);
    shared->fresh = std::move(fresh);
  }
  SetReasonImpl(s, e, shared->fresh->reason, shared->fresh->flavors_tried, &shared->fresh, nullptr);
}

size_t RefreshReasons(State& s) {
  size_t changed = 0;
  for (const InstanceKey& instance : s.stale_reasons) {
    Entry* e = FindEntry(s, instance);
    if (e == nullptr || e->fresh_reason == nullptr) continue;
    const std::shared_ptr<const Entry::FreshReason> fresh = std::move(e->fresh_reason);
    // Admitted, parked, or told another reason since: that one stands.
    if (e->cinfo().phase != Phase::kPending || !SameKind(e->cinfo().reason, fresh->reason)) continue;
    PendingReason reason = fresh->reason;
    Describe(s, e->cinfo().cluster_queue, reason, fresh->flavors_tried, /*counted=*/true);
    e->info().reason = std::move(reason);
    s.Touch(*e);
    ++changed;
  }
  s.stale_reasons.clear();
  return changed;
}

}  // namespace gangkeeper::broker
