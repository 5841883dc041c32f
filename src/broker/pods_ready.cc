// gangkeeper broker: waitForPodsReady (Kueue's; KUEUE-SEMANTICS.md, and
// Kueue's workload controller for what the documents leave open).
//
// An admitted gang is "ready" once its object says that all the pods it
// was admitted with are ready (Scheduler::PodsReady, fed by the
// reconciler; each kind counts its own, workload/kinds/readiness.cc). A
// gang holding quota and not ready is watched (State::unready) from its
// admission, or from the moment a ready gang dropped below ready:
//   - not ready within `timeout` of its admission, or not ready again
//     within `recoveryTimeout` (0s: never) of the drop, it is evicted whole
//     with reason PodsReadyTimeout (suspended; quota held until its pods
//     stopped, as for preemption);
//   - once stopped it is requeued after a backoff: the n-th requeue waits
//     backoffBaseSeconds * 2^(n-1), at most backoffMaxSeconds (Kueue adds a
//     small random jitter; gangkeeper does not, so runs replay exactly);
//     with timestamp Eviction it queues behind what was queued before its
//     eviction, with Creation at its original place;
//   - a timeout that would be requeue backoffLimitCount + 1 deactivates it
//     instead (Kueue's spec.active=false): it stays pending, reason
//     Deactivated, until its object is changed (any update the reconciler
//     passes on: queue, priority, pod sets) or deleted and re-created.
// blockAdmission: while a watched gang (not being evicted) is not ready,
// no workload is admitted anywhere.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/broker/queues.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

int64_t AdmittedPods(const Entry& e) {
  int64_t n = 0;
  if (e.cinfo().admission.has_value()) {
    for (const PodSetAssignment& ps : e.cinfo().admission->pod_sets) n += ps.count;
  }
  return n;
}

std::string Ordinal(int64_t n) {
  const int64_t mod100 = n % 100;
  const char* suffix = "th";
  if (mod100 < 11 || mod100 > 13) {
    if (n % 10 == 1) suffix = "st";
    if (n % 10 == 2) suffix = "nd";
    if (n % 10 == 3) suffix = "rd";
  }
  return absl::StrCat(n, suffix);
}

// Why a deactivated workload is pending (live, and after a restart).
PendingReason DeactivatedReason(const model::WaitForPodsReady& w, const WorkloadInfo& info) {
  PendingReason r;
  r.code = PendingReason::Code::kDeactivated;
  r.message = absl::StrCat("deactivated: its pods were not ready in time after ", info.requeue_count, " requeue(s)",
                           w.backoff_limit_count.has_value()
                               ? absl::StrCat(" (waitForPodsReady backoffLimitCount ", *w.backoff_limit_count, ")")
                               : "",
                           "; change or re-create the object to queue it again");
  return r;
}

// Parks `e` out of every queue until `until` (InfiniteFuture: deactivated).
void Park(State& s, Entry* e, absl::Time until) {
  e->info().requeue_at = until;
  Dequeue(s, e);
  e->backoff_it = s.backoff.emplace(until, e);
  e->in_backoff = true;
}

// Whether the next PodsReady timeout of `e` deactivates it.
bool NextTimeoutDeactivates(const model::WaitForPodsReady& w, const Entry& e) {
  return w.backoff_limit_count.has_value() && e.cinfo().requeue_count + 1 > *w.backoff_limit_count;
}

}  // namespace

const model::WaitForPodsReady& PodsReadyConfig(const State& s) {
  if (s.policies != nullptr && s.policies->configuration.wait_for_pods_ready.enabled) {
    return s.policies->configuration.wait_for_pods_ready;
  }
  return s.options.wait_for_pods_ready;
}

void WatchReadiness(State& s, Entry* e, absl::Time now) {
  WorkloadInfo& info = e->info();
  info.ready_pods = 0;
  info.pods_ready = false;
  info.was_ready = false;
  info.unready_since = now;
  info.pods_ready_timeout = false;
  s.unready[e->seq] = e;
}

void UnwatchReadiness(State& s, Entry* e) {
  s.unready.erase(e->seq);
  e->info().unready_since = absl::InfinitePast();
}

void EvictUnready(State& s, absl::Time now) {
  const model::WaitForPodsReady& w = PodsReadyConfig(s);
  if (!w.enabled || s.unready.empty()) return;
  std::vector<Entry*> due;
  for (const auto& [seq, e] : s.unready) {
    const WorkloadInfo& info = e->cinfo();
    if (info.phase != Phase::kReserved && info.phase != Phase::kRunning) continue;
    const absl::Duration timeout = info.was_ready ? w.recovery_timeout : w.timeout;
    if (timeout <= absl::ZeroDuration()) continue;  // recoveryTimeout 0s: never
    if (now - info.unready_since >= timeout) due.push_back(e);
  }
  for (Entry* e : due) {
    const WorkloadInfo& info = e->cinfo();
    const absl::Duration timeout = info.was_ready ? w.recovery_timeout : w.timeout;
    std::string message = absl::StrCat(
        info.ready_pods, " of ", AdmittedPods(*e), " pods ready ", absl::FormatDuration(now - info.unready_since),
        info.was_ready ? " after they dropped below ready (recoveryTimeout " : " after admission (timeout ",
        absl::FormatDuration(timeout), ")");
    if (NextTimeoutDeactivates(w, *e)) {
      absl::StrAppend(&message, "; deactivated once stopped: requeued ", info.requeue_count,
                      " time(s) already, backoffLimitCount ", *w.backoff_limit_count);
    } else {
      const int64_t n = info.requeue_count + 1;
      absl::StrAppend(&message, "; requeued once stopped, after a backoff of ",
                      absl::FormatDuration(model::PodsReadyBackoff(w, n)), " (", Ordinal(n), " requeue",
                      w.backoff_limit_count.has_value() ? absl::StrCat(" of at most ", *w.backoff_limit_count) : "",
                      ")");
    }
    e->info().pods_ready_timeout = true;
    Evict(s, e, "PodsReadyTimeout", std::move(message), nullptr, now);
  }
}

bool AdmissionBlocked(const State& s) {
  const model::WaitForPodsReady& w = PodsReadyConfig(s);
  if (!w.enabled || !w.block_admission) return false;
  for (const auto& [seq, e] : s.unready) {
    if (e->cinfo().phase == Phase::kReserved || e->cinfo().phase == Phase::kRunning) return true;
  }
  return false;
}

bool BackOffAfterPodsReadyTimeout(State& s, Entry* e, absl::Time now) {
  if (!e->cinfo().pods_ready_timeout) return false;
  e->info().pods_ready_timeout = false;
  const model::WaitForPodsReady& w = PodsReadyConfig(s);
  WorkloadInfo& info = e->info();
  PendingReason r;
  absl::Time until = absl::InfiniteFuture();
  if (NextTimeoutDeactivates(w, *e)) {
    info.active = false;
    r = DeactivatedReason(w, info);
  } else {
    ++info.requeue_count;
    const absl::Duration wait = model::PodsReadyBackoff(w, info.requeue_count);
    until = now + wait;
    // timestamp Eviction: ordered by the eviction, behind what was queued
    // before it; Creation keeps its original place.
    if (w.timestamp == model::RequeuingTimestamp::kEviction) {
      info.queued_at = now;
      e->SetOrderKey();
    }
    r.code = PendingReason::Code::kRequeueBackoff;
    r.message = absl::StrCat("its pods were not ready in time; queued again after a backoff of ",
                             absl::FormatDuration(wait), " (", Ordinal(info.requeue_count), " requeue)");
  }
  Park(s, e, until);
  info.reason = std::move(r);
  s.Touch(*e);
  return true;
}

bool RestorePodsReadyBackoff(State& s, Entry* e) {
  WorkloadInfo& info = e->info();
  if (info.phase != Phase::kPending) return false;
  if (!info.active) {
    Park(s, e, absl::InfiniteFuture());
    info.reason = DeactivatedReason(PodsReadyConfig(s), info);
    return true;
  }
  // A backoff that ran out before the restart was queued already: the
  // first Schedule queues it again (the backoff's end is in the past).
  if (info.requeue_count == 0 || info.requeue_at == absl::InfinitePast() ||
      info.requeue_at == absl::InfiniteFuture()) {
    return false;
  }
  Park(s, e, info.requeue_at);
  info.reason.code = PendingReason::Code::kRequeueBackoff;
  info.reason.message = absl::StrCat("its pods were not ready in time; queued again at ",
                                     absl::FormatTime(info.requeue_at, absl::UTCTimeZone()), " (",
                                     Ordinal(info.requeue_count), " requeue; the backoff was kept across a restart)");
  return true;
}

void Reactivate(State& s, Entry* e) {
  if (e->cinfo().active) return;
  e->info().active = true;
  e->info().requeue_count = 0;
  e->info().requeue_at = absl::InfinitePast();
  s.Touch(*e);
}

const model::WaitForPodsReady& Scheduler::wait_for_pods_ready() const { return PodsReadyConfig(*state_); }

absl::Status Scheduler::PodsReady(const WorkloadKey& key, const std::string& uid, int64_t ready, absl::Time now) {
  State& s = *state_;
  Entry* e = FindEntry(s, InstanceOf(key, uid));
  if (e == nullptr) return absl::OkStatus();
  const Phase phase = e->cinfo().phase;
  if (phase != Phase::kReserved && phase != Phase::kRunning) return absl::OkStatus();  // stale, or not admitted
  const int64_t admitted = AdmittedPods(*e);
  const bool now_ready = ready >= admitted;
  WorkloadInfo& info = e->info();
  info.ready_pods = std::max<int64_t>(ready, 0);
  s.Touch(*e);
  if (now_ready && !info.pods_ready) {
    info.pods_ready = true;
    info.was_ready = true;
    UnwatchReadiness(s, e);
  } else if (!now_ready && info.pods_ready) {
    info.pods_ready = false;
    info.unready_since = now;
    s.unready[e->seq] = e;
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::broker
