// gangkeeper: EventPublisher (see event_publisher.h).
#include "gangkeeper/kube/event_publisher.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::kube {
namespace {

using broker::StateChange;

// The object a workload key and uid name; false for a pod group (no
// single object to describe).
bool EventTarget(const broker::WorkloadKey& key, const std::string& uid, ObjectRef* out) {
  if (key.pod_group || uid.empty()) return false;
  const workload::KindInfo& kind = workload::InfoFor(key.kind);
  out->api_version =
      kind.group.empty() ? std::string(kind.version) : absl::StrCat(kind.group, "/", kind.version);
  out->kind = std::string(kind.name);
  out->namespace_name = key.namespace_name;
  out->name = key.name;
  out->uid = uid;
  return true;
}

// "launcher: nvidia.com/gpu=a100, cpu=default; worker: ..."
std::string FlavorsNote(const broker::Assignment& a) {
  std::vector<std::string> sets;
  for (const broker::PodSetAssignment& ps : a.pod_sets) {
    std::vector<std::string> flavors;
    for (const auto& [resource, flavor] : ps.flavors) flavors.push_back(absl::StrCat(resource, "=", flavor));
    sets.push_back(absl::StrCat(ps.name, " (", ps.count, " pods): ", absl::StrJoin(flavors, ", ")));
  }
  return absl::StrJoin(sets, "; ");
}

ClusterEvent NewEvent(const ObjectRef& target, bool warning, const char* reason, const char* action,
                      std::string note) {
  ClusterEvent e;
  e.regarding = target;
  e.warning = warning;
  e.reason = reason;
  e.action = action;
  e.note = std::move(note);
  return e;
}

}  // namespace

EventPublisher::EventPublisher(EventRecorder* recorder, const broker::SnapshotSource* view,
                               EventPublisherOptions options)
    : recorder_(recorder), view_(view), options_(std::move(options)) {}

EventPublisher::~EventPublisher() { Stop(); }

void EventPublisher::OnDurable(const std::vector<StateChange>& changes, const broker::Snapshot& after) {
  for (const StateChange& c : changes) {
    ObjectRef target;
    if (!EventTarget(c.key, c.uid, &target)) continue;
    const std::string cq = c.assignment.has_value() ? c.assignment->cluster_queue : c.cluster_queue;
    switch (c.type) {
      case StateChange::Type::kAdmitted: {
        {
          absl::MutexLock lock(&mu_);
          pending_written_.erase(c.uid);  // pending again later: a Pending again
        }
        const std::string flavors = c.assignment.has_value() ? FlavorsNote(*c.assignment) : "";
        recorder_->Record(NewEvent(target, false, "QuotaReserved", "Reserve",
                                   absl::StrCat("Quota reserved in ClusterQueue ", cq,
                                                flavors.empty() ? "" : absl::StrCat("; flavors: ", flavors),
                                                c.message.empty() ? "" : absl::StrCat("; ", c.message))));
        recorder_->Record(NewEvent(target, false, "Admitted", "Admit",
                                   absl::StrCat("Admitted by ClusterQueue ", cq, ": the whole gang is released")));
        break;
      }
      case StateChange::Type::kEvicted: {
        if (!c.preemptor.name.empty()) {
          const broker::WorkloadInfo* by = c.preemptor_uid.empty() ? after.Find(c.preemptor)
                                                                   : after.FindInstance(c.preemptor, c.preemptor_uid);
          const std::string by_cq = by != nullptr ? by->cluster_queue : "";
          recorder_->Record(NewEvent(
              target, true, "Preempted", "Preempt",
              absl::StrCat("Preempted to accommodate ", c.preemptor.namespace_name, "/", c.preemptor.name,
                           by_cq.empty() ? "" : absl::StrCat(" (ClusterQueue ", by_cq, ")"), " in ClusterQueue ",
                           cq, ": ", c.reason, c.message.empty() ? "" : absl::StrCat(": ", c.message),
                           "; the whole gang is suspended and requeued")));
        } else {
          recorder_->Record(NewEvent(target, true, "Evicted", "Evict",
                                     absl::StrCat("Evicted from ClusterQueue ", cq, ": ", c.reason,
                                                  c.message.empty() ? "" : absl::StrCat(": ", c.message))));
        }
        break;
      }
      case StateChange::Type::kRequeued:
        // After a PodsReady timeout (waitForPodsReady) the change says
        // when it is queued again, or that it was deactivated.
        recorder_->Record(NewEvent(target, false, c.reason.empty() ? "Requeued" : c.reason.c_str(), "Requeue",
                                   absl::StrCat("Stopped and requeued in ClusterQueue ", cq, "; its quota is free",
                                                c.reason.empty() ? "" : absl::StrCat(": ", c.message))));
        break;
      case StateChange::Type::kReleaseFailed:
        recorder_->Record(NewEvent(target, true, "ReleaseFailed", "Release",
                                   absl::StrCat("The release failed and the quota in ClusterQueue ", cq,
                                                " was given back; retried: ", c.message)));
        break;
      case StateChange::Type::kFinished:
        recorder_->Record(NewEvent(target, false, "Finished", "Finish",
                                   absl::StrCat("Finished; its quota in ClusterQueue ", cq, " is free")));
        [[fallthrough]];
      case StateChange::Type::kRemoved: {
        absl::MutexLock lock(&mu_);
        pending_written_.erase(c.uid);
        break;
      }
      default:
        break;
    }
  }
}

void EventPublisher::CheckPending() {
  if (options_.leading && !options_.leading()) return;
  std::shared_ptr<const broker::Snapshot> snap = view_->snapshot();
  std::vector<ClusterEvent> out;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::string> pending;
    snap->ForEachWorkload([&](const broker::WorkloadInfo& w) {
      if (w.phase != broker::Phase::kPending || w.workload == nullptr) return;
      ObjectRef target;
      if (!EventTarget(w.key, w.workload->uid, &target)) return;
      pending.insert(target.uid);
      // Not tried yet (or known only from a review): nothing to say.
      if (w.reason.code == broker::PendingReason::Code::kQueued ||
          w.reason.code == broker::PendingReason::Code::kUnconfirmed) {
        return;
      }
      const std::string written = absl::StrCat(static_cast<int>(w.reason.code), "\x1f", w.reason.message);
      auto [it, first] = pending_written_.try_emplace(target.uid, written);
      if (!first && it->second == written) return;
      it->second = written;
      out.push_back(NewEvent(target, false, "Pending", "Queue",
                             w.cluster_queue.empty() ? w.reason.message
                                                     : absl::StrCat("ClusterQueue ", w.cluster_queue, ": ",
                                                                    w.reason.message)));
    });
    for (auto it = pending_written_.begin(); it != pending_written_.end();) {
      it = pending.count(it->first) == 0 ? pending_written_.erase(it) : std::next(it);
    }
  }
  for (ClusterEvent& e : out) recorder_->Record(std::move(e));
}

void EventPublisher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void EventPublisher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void EventPublisher::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.pending_check)) return;
    }
    CheckPending();
  }
}

}  // namespace gangkeeper::kube
