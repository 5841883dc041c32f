// gangkeeper: the broker's decisions as Events on the objects they are
// about (issue #23, "Events"), written through an EventRecorder.
//
// EventPublisher observes the broker's durable change stream (a
// broker::ChangeObserver given to the leader's broker only, so a follower
// writes nothing) and turns each change into the Event a user would look
// for with `kubectl describe`, with Kueue's reasons where Kueue has one:
//   QuotaReserved + Admitted   kAdmitted (ClusterQueue, flavors per pod set)
//   Preempted (Warning)        kEvicted by a preemptor (who, its ClusterQueue, why)
//   Evicted (Warning)          kEvicted otherwise
//   Requeued                   kRequeued
//   ReleaseFailed (Warning)    kReleaseFailed (the API server's answer)
//   Finished                   kFinished
// Why a workload waits changes between cycles without a durable change, so
// `Pending` comes from a comparison: every `pending_check` (and at
// CheckPending()) each pending workload that was tried at least once gets
// one Event when its reason (code and message, with the numbers) differs
// from the last one written for it; an unchanged reason writes nothing,
// however many cycles run. Pod groups have no single object and get no
// Events.
//
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/events.h"

namespace gangkeeper::kube {

struct EventPublisherOptions {
  absl::Duration pending_check = absl::Seconds(5);
  // Whether this replica leads now (checked before each Pending
  // comparison); null: always (one node on the file journal).
  std::function<bool()> leading;
};

class EventPublisher final : public broker::ChangeObserver {
 public:
  // `recorder` and `view` must outlive the publisher.
  EventPublisher(EventRecorder* recorder, const broker::SnapshotSource* view, EventPublisherOptions options);
  ~EventPublisher() override;  // Stop()
  EventPublisher(const EventPublisher&) = delete;
  EventPublisher& operator=(const EventPublisher&) = delete;

  void OnDurable(const std::vector<broker::StateChange>& changes, const broker::Snapshot& after) override;

  // The Pending comparisons' thread.
  void Start();
  void Stop();
  // One Pending comparison now (the thread calls it every pending_check).
  void CheckPending();

 private:
  void Run();

  EventRecorder* const recorder_;
  const broker::SnapshotSource* const view_;
  const EventPublisherOptions options_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The Pending reason last written per object uid (code and message).
  std::map<std::string, std::string> pending_written_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gangkeeper::kube
