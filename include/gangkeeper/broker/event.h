// gangkeeper broker: Event, the one way anything changes the broker's
// state, and EventQueue, the interface the broker's writers depend on (the
// webhook through a WorkloadRegistry, the reconciler, the actuator, the
// API's policy editor, a replica's intake). Roles are not events: a
// replica leads with a Broker per term and follows with a ReadOnlyView
// (roles.h).
//
// Build events with the factories; hand them to EventQueue::Submit (do not
// wait), SubmitAndWait (wait until applied and durable) or SubmitAsync (be
// called back then, without a thread waiting).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

class Actuator;
class StateSink;

struct Event {
  enum class Type {
    kAdd,            // a new pending workload (or another pod of a known pod group)
    kUpdate,         // a pending workload's pod sets changed
    kRemove,         // the object `uid` was deleted ("" = any instance)
    kFinish,         // the object `uid` completed or failed
    kAdopt,          // a workload found running, with its recorded flavors
    kRerelease,      // a running gang has members held again: release again
    kPolicies,       // new policies (from the files or the API)
    kReleaseOk,      // the actuator's answers
    kReleaseFailed,
    kStopped,
    kFlush,          // nothing: answered once everything before it is applied
    kPodsReady,      // how many pods of an admitted gang are ready (waitForPodsReady)
  };
  Type type = Type::kFlush;
  workload::Workload workload;                                        // kAdd, kUpdate, kAdopt
  std::map<std::string, std::map<std::string, std::string>> flavors;  // kAdopt
  std::optional<absl::Time> admitted_at;                              // kAdopt
  // kAdopt: pod sets that run fewer pods than the workload's count (a Job
  // released partially), by name; the others run their count.
  std::map<std::string, int64_t> running_counts;
  WorkloadKey key;
  std::string uid;
  // kReleaseOk/kStopped: what was sent; kReleaseFailed: why; kPolicies:
  // what the API changed ("PUT ClusterQueue team-a").
  std::string message;
  std::string actor;  // kPolicies from the API: who
  int64_t ready = 0;  // kPodsReady
  std::shared_ptr<const model::PolicySet> policies;     // kPolicies
  std::shared_ptr<const model::PolicyOverlay> overlay;  // kPolicies from the API
  // kPolicies: the model::PolicyStore version that published `policies`
  // (EffectiveSet::version), 0 for a set the store did not publish (the
  // API's composed candidate, the files at start). Each set the store
  // publishes includes every earlier one's changes, so the broker skips a
  // set older than one it applied: two writers (the namespace watch, the
  // overlay feed) that published in one order and submitted in the other
  // cannot undo each other's change.
  uint64_t policies_version = 0;
  // An event that reached this replica through the replicated store: its
  // place there (increasing). Each batch hands the sink the highest applied
  // so far (DurableBatch::intake_revision), so a new leader applies exactly
  // the events after it. 0 for local events.
  int64_t intake_revision = 0;

  // --- What the cluster and the webhook say.
  static Event Add(workload::Workload w);
  static Event Update(workload::Workload w);
  static Event Remove(WorkloadKey key, std::string uid);
  static Event Finish(WorkloadKey key, std::string uid);
  // A workload found running (see Scheduler::Adopt), with its flavors and
  // admission time as the object records them (gangkeeper.io/admitted-flavors).
  // `running_counts`: the pod sets that run fewer pods than their count
  // (ObservedObject::running_counts); they are charged for what runs.
  static Event Adopt(workload::Workload w, std::map<std::string, std::map<std::string, std::string>> flavors,
                     std::optional<absl::Time> admitted_at = std::nullopt,
                     std::map<std::string, int64_t> running_counts = {});
  // Not a state change: the actuator is asked to release `key` again, which
  // lets go of members held again and leaves the rest as they are.
  static Event Rerelease(WorkloadKey key);
  // `ready` pods of the instance `uid` under `key` ("" for a pod group)
  // are ready, as its object says (Scheduler::PodsReady).
  static Event PodsReady(WorkloadKey key, std::string uid, int64_t ready);
  // --- Policies: replaced whole. Through the API, `overlay` (what the API
  // changed over the policy files) is made durable with them, and `actor`
  // and `what` go into the audit event. InvalidArgument when they cannot
  // form a quota tree (nothing changes).
  static Event Policies(std::shared_ptr<const model::PolicySet> policies,
                        std::shared_ptr<const model::PolicyOverlay> overlay = nullptr, std::string actor = "",
                        std::string what = "");
  // --- The actuator's answers. `detail` says what was sent.
  static Event ReleaseResult(WorkloadKey key, std::string uid, const absl::Status& result, std::string detail = "");
  static Event Stopped(WorkloadKey key, std::string uid, std::string detail = "");
  // Waits for nothing but the events queued before it.
  static Event Flush();
};

// Where events go. Thread-safe.
class EventQueue {
 public:
  virtual ~EventQueue() = default;
  // Queues `e` and returns at once (answers of the actuator, the intake of
  // a replica). A follower's ReadOnlyView ignores it.
  virtual void Submit(Event e) = 0;
  // Queues `e` and waits until it is applied and the batch holding it is
  // durable: its own result (InvalidArgument, FailedPrecondition, ...), or
  // Unavailable when the broker is stopping, the store failed, or nothing
  // came within `timeout` (zero: the broker's ack_timeout); a follower's
  // ReadOnlyView answers a change with FailedPrecondition.
  [[nodiscard]] virtual absl::Status SubmitAndWait(Event e, absl::Duration timeout = absl::ZeroDuration()) = 0;

  // Called once with what SubmitAndWait would have returned.
  using Ack = absl::AnyInvocable<void(absl::Status)>;
  // Queues `e` and returns at once; `done` is called exactly once, with the
  // status SubmitAndWait would have returned (the same errors, the same
  // `timeout`, Unavailable when the broker stops first). It runs on the
  // broker's thread once the batch is durable, on a timer thread when the
  // timeout passes, or on the caller's thread (before SubmitAsync returns)
  // when the answer is known at once. It must not block nor wait for the
  // broker (SubmitAndWait, Flush): hand such work to another thread.
  virtual void SubmitAsync(Event e, Ack done, absl::Duration timeout = absl::ZeroDuration()) = 0;
};

}  // namespace gangkeeper::broker
