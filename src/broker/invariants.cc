// gangkeeper broker: Scheduler::CheckInvariants (scheduler.h), the
// invariants of DESIGN §2 as the scheduler's own state shows them: every
// tracked instance exactly once where its phase says, every admission the
// whole gang, recorded usage equal to the admitted gangs', and usage within
// what the cohort allows except where a lowered quota is tolerated.
#include "gangkeeper/broker/scheduler.h"

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/broker/queues.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

// What the walk over the entries counts, for the checks of the totals.
struct Tally {
  std::map<std::string, ResourceAmounts> sums;  // usage by ClusterQueue
  size_t queued = 0;
  size_t counted = 0;
  size_t unconfirmed = 0;
};

// The whole gang: every pod set, with at least its minimum count (partial
// admission) and at most its count, every non-zero request (as the
// resource transformations charge it) in full for the count admitted, and
// the admission's total equal to its pod sets'.
absl::Status CheckWholeGang(const std::string& name, const Entry& e, const Assignment& a,
                            const model::KueueConfiguration& config) {
  if (a.pod_sets.size() != e.PodSets().size()) {
    return absl::InternalError(absl::StrCat(name, " has ", a.pod_sets.size(), " pod sets admitted of ",
                                            e.PodSets().size()));
  }
  ResourceAmounts total;
  for (size_t i = 0; i < a.pod_sets.size(); ++i) {
    const workload::PodSet& ps = e.PodSets()[i];
    const int64_t admitted = a.pod_sets[i].count;
    if (admitted > ps.count || admitted < ps.MinCount()) {
      return absl::InternalError(absl::StrCat(name, ": pod set ", ps.name, " admitted with ", admitted, " of ",
                                              ps.count, " pods (at least ", ps.MinCount(), ")"));
    }
    for (const auto& [res, per_pod] : model::QuotaRequests(config, ps.requests)) {
      absl::StatusOr<Quantity> want = per_pod.MultiplyBy(admitted);
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
  return absl::OkStatus();
}

// An instance that holds quota: admitted in its ClusterQueue, nowhere else.
// (`e` is not changed; the queues index entries by mutable pointer.)
absl::Status CheckAdmitted(const State& s, const std::string& name, Entry* e, Tally& tally) {
  const WorkloadInfo& info = e->cinfo();
  if (!info.admission.has_value()) return absl::InternalError(absl::StrCat(name, " holds quota without an admission"));
  if (!e->queued_in.empty() || s.orphans.count(e) != 0) {
    return absl::InternalError(absl::StrCat(name, " is admitted and queued at once"));
  }
  const Assignment& a = *info.admission;
  auto q = s.queues.find(a.cluster_queue);
  if (q == s.queues.end() || q->second.admitted.count(e) == 0) {
    return absl::InternalError(absl::StrCat(name, " is admitted but not listed in ClusterQueue ", a.cluster_queue));
  }
  if (absl::Status whole = CheckWholeGang(name, *e, a, s.policies->configuration); !whole.ok()) return whole;
  ResourceAmounts& sum = tally.sums[a.cluster_queue];
  for (const auto& [fr, amount] : a.usage) sum[fr] = sum[fr].SaturatingAdd(amount);
  return absl::OkStatus();
}

// A pending instance: in exactly one queue, or parked, or backing off.
absl::Status CheckPending(const State& s, const std::string& name, Entry* e, Tally& tally) {
  const WorkloadInfo& info = e->cinfo();
  if (info.admission.has_value()) {
    return absl::InternalError(absl::StrCat(name, " is ", PhaseName(info.phase), " but holds an admission"));
  }
  const bool in_queue = !e->queued_in.empty();
  const bool orphan = s.orphans.count(e) != 0;
  if (e->in_backoff) {
    if (in_queue || orphan) return absl::InternalError(absl::StrCat(name, " is in release backoff and queued"));
    return absl::OkStatus();
  }
  if (in_queue == orphan) {
    return absl::InternalError(absl::StrCat(name, " is pending but ", in_queue ? "both queued and parked" : "in no queue"));
  }
  if (in_queue) {
    auto it = s.queues.find(e->queued_in.name());
    if (it == s.queues.end() || !e->queued_in.At(it->first)) {
      return absl::InternalError(absl::StrCat(name, " is queued in ClusterQueue ", e->queued_in.name(),
                                              ", which has no queue"));
    }
    const Queue& q = it->second;
    if ((q.active.count(e) != 0) + (q.inadmissible.count(e) != 0) != 1) {
      return absl::InternalError(absl::StrCat(name, " is not exactly once in ClusterQueue ", e->queued_in.name()));
    }
    ++tally.queued;
  }
  return absl::OkStatus();
}

absl::Status CheckEntry(const State& s, const WorkloadKey& key, Entry* e, Tally& tally) {
  ++tally.counted;
  const WorkloadInfo& info = e->cinfo();
  const std::string name = absl::StrCat(KeyString(key), " (uid ", info.workload->uid, ")");
  // Nothing is decided on a review alone (DESIGN §2).
  if (info.workload->unconfirmed) {
    ++tally.unconfirmed;
    if (info.phase != Phase::kPending || !e->queued_in.empty() || e->waiting()) {
      return absl::InternalError(absl::StrCat(name, " is known only from a review but is ", PhaseName(info.phase),
                                              e->queued_in.empty() ? "" : " and queued",
                                              e->waiting() ? " and preempting" : ""));
    }
  }
  if (!(info.key == key)) return absl::InternalError(absl::StrCat(name, " is filed under another key"));
  if (FindEntry(s, e->instance()) != e) {
    return absl::InternalError(absl::StrCat(name, " shares its uid with another instance"));
  }
  if (e->holding()) return absl::InternalError(absl::StrCat(name, " holds quota for preemption outside a cycle"));
  return HoldsQuota(info.phase) ? CheckAdmitted(s, name, e, tally) : CheckPending(s, name, e, tally);
}

// The index of a ClusterQueue's admitted gangs by FlavorResource lists
// exactly those holding a non-zero amount of each.
absl::Status CheckAdmittedIndex(const std::string& name, const AdmittedSet& admitted) {
  size_t want = 0;
  for (Entry* e : admitted) {
    for (const auto& [fr, amount] : e->cinfo().admission->usage) {
      if (amount.IsZero()) continue;
      ++want;
      if (admitted.Using(fr).count(e) == 0) {
        return absl::InternalError(absl::StrCat("ClusterQueue ", name, " does not index ", Name(e->cinfo().key),
                                                " under ", fr.ToString()));
      }
    }
  }
  size_t have = 0;
  for (const auto& [fr, list] : admitted.by_flavor_resource()) have += list.size();
  if (have != want) {
    return absl::InternalError(absl::StrCat("ClusterQueue ", name, " indexes ", have, " (gang, FlavorResource) pairs of ",
                                            want));
  }
  return absl::OkStatus();
}

// Every ClusterQueue: its admitted gangs hold quota, its recorded usage is
// theirs, and it is within what the cohort allows (or tolerated over).
absl::Status CheckQueues(const State& s, Tally& tally) {
  size_t listed = 0;
  for (const auto& [name, q] : s.queues) {
    listed += q.active.size() + q.inadmissible.size();
    for (const Entry* e : q.admitted) {
      if (!HoldsQuota(e->cinfo().phase)) {
        return absl::InternalError(absl::StrCat("ClusterQueue ", name, " lists ", Name(e->cinfo().key), " as admitted"));
      }
    }
    if (absl::Status indexed = CheckAdmittedIndex(name, q.admitted); !indexed.ok()) return indexed;
    const int node = s.tree.ClusterQueueNode(name);
    if (node < 0) {
      if (!q.admitted.empty()) return absl::InternalError(absl::StrCat("ClusterQueue ", name, " holds quota outside the tree"));
      continue;
    }
    const ResourceAmounts& sum = tally.sums[name];
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
  if (listed != tally.queued) return absl::InternalError("a queue lists a workload that is not pending in it");
  return absl::OkStatus();
}

}  // namespace

absl::Status Scheduler::CheckInvariants() const {
  const State& s = *state_;
  if (absl::Status t = s.tree.CheckInvariants(); !t.ok()) return t;
  Tally tally;
  for (const auto& [key, list] : s.entries) {
    if (list.empty()) return absl::InternalError(absl::StrCat(KeyString(key), " has no instances"));
    for (const std::unique_ptr<Entry>& e : list) {
      if (absl::Status st = CheckEntry(s, key, e.get(), tally); !st.ok()) return st;
    }
  }
  if (tally.counted != s.instance_count) return absl::InternalError("the instance count is off");
  if (tally.unconfirmed != s.unconfirmed_count) return absl::InternalError("the unconfirmed count is off");
  if (absl::Status q = CheckQueues(s, tally); !q.ok()) return q;
  for (const Entry* p : s.preemptors) {
    if (FindEntry(s, p->instance()) != p) return absl::InternalError("a preemptor is not tracked");
    if (!p->waiting() || p->preemption->need.empty()) return absl::InternalError("a preemptor needs nothing");
  }
  // waitForPodsReady's watch list: tracked gangs that hold quota, not ready.
  if (!s.unready.empty()) {
    std::set<const Entry*> tracked;
    for (const auto& [key, list] : s.entries) {
      for (const std::unique_ptr<Entry>& e : list) tracked.insert(e.get());
    }
    for (const auto& [seq, e] : s.unready) {
      if (tracked.count(e) == 0) return absl::InternalError("a gang waiting for its pods is not tracked");
      if (e->seq != seq || !e->cinfo().admission.has_value() || e->cinfo().pods_ready) {
        return absl::InternalError(absl::StrCat(KeyString(e->cinfo().key),
                                                " waits for its pods but holds no quota or is ready"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::broker
