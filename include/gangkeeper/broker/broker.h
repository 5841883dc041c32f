// gangkeeper broker: the quota broker service (DESIGN §2).
//
// One writer thread owns a Scheduler (scheduler.h). Everything reaches it as
// an Event (event.h) through one queue: workloads created / updated /
// deleted / finished (the webhook, through NewBrokerRegistry; the
// reconciler), policy changes, the actuator's answers; a
// clock tick runs a pass without events. The thread takes the queued events
// in batches; for each batch it applies them, runs scheduling cycles to a
// fixed point, hands the batch's StateChanges to the StateSink (durable
// before anything else happens), tells the ChangeObservers, then tells the
// Actuator to release admitted gangs and suspend evicted ones (ports.h),
// publishes an immutable Snapshot (snapshot.h), and only then acknowledges
// the batch's events. Readers use snapshot() and never wait for the writer.
//
// A broker always leads: with several replicas (DESIGN §9) the elected one
// creates a Broker for its term, with the term's fenced sink, and stops and
// drops it when the term ends; followers show a ReadOnlyView (roles.h).
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::broker {

struct BrokerOptions {
  // time_budget defaults to 50 ms here: acknowledgements wait for the batch.
  // A pending reason's live numbers are published at most every second
  // (and on a Flush), as long queues' positions are (defer_reason_numbers).
  SchedulerOptions scheduler{.time_budget = absl::Milliseconds(50), .defer_reason_numbers = true};
  // How long a registering caller waits for its event to be applied and
  // made durable before it gets Unavailable.
  absl::Duration ack_timeout = absl::Seconds(5);
  // Events taken per batch at most.
  size_t max_batch = 4096;
  // Period of clock ticks (a scheduling pass even without events).
  absl::Duration tick = absl::Seconds(1);
  // Finished workloads kept for Snapshot::finished() (the API's
  // state=finished): at most this many, none older than keep_finished_for.
  size_t keep_finished = 1000;
  absl::Duration keep_finished_for = absl::Hours(1);
  // See every durable batch of changes (counters.h's WorkloadCounters,
  // ...), in this order; each must outlive the broker.
  std::vector<ChangeObserver*> observers;
  // Called on the broker's thread after each scheduling pass that had
  // something to decide (Kueue's admission attempt), with what it did and
  // how long it took. Must not block. May be null.
  std::function<void(const ScheduleStats& stats, absl::Duration took)> on_schedule;
  // The totals Snapshot::stats() starts from (a replica's earlier terms).
  BrokerStats start_stats;
};

class Broker final : public EventQueue, public SnapshotSource {
 public:
  // `actuator` and `sink` must outlive the broker; either may be null
  // (no actuation / nothing made durable). `clock` stamps events.
  // `recovered` (may be null) is the durable state to start from (the
  // journal's recovery; its workloads are moved out): they are restored as
  // they were, gangs whose release or suspension was not confirmed are
  // released or suspended again when the broker starts (both are
  // idempotent), and then `policies` replace the recorded ones the way
  // Event::Policies does.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Broker>> Create(
      std::shared_ptr<const model::PolicySet> policies, BrokerOptions options, Actuator* actuator,
      StateSink* sink, const base::Clock* clock, DurableState* recovered = nullptr);
  ~Broker() override;  // stops the thread
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Starts the writer thread. Events sent before Start wait in the queue.
  void Start();
  // Applies what is queued, then stops the thread (and answers what a
  // broker never started holds with Unavailable). Idempotent.
  void Stop();

  // EventQueue (event.h).
  void Submit(Event e) override;
  [[nodiscard]] absl::Status SubmitAndWait(Event e, absl::Duration timeout = absl::ZeroDuration()) override;
  void SubmitAsync(Event e, Ack done, absl::Duration timeout = absl::ZeroDuration()) override;
  // Waits until every event queued before the call is applied. For tests
  // and shutdown; false on timeout.
  bool Flush(absl::Duration timeout);

  // SnapshotSource (snapshot.h): the latest snapshot; never null.
  std::shared_ptr<const Snapshot> snapshot() const override;

  struct Impl;

 private:
  explicit Broker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The webhook's view of the broker (registry.h): Register, Update, Remove
// and Finish become events and wait until durable (their *Async forms are
// called back then, through EventQueue::SubmitAsync) (Register of a workload
// with the ClusterQueue's name ignored: the broker resolves it); the reads
// come from the latest snapshot. `events` and `view` must outlive it.
std::unique_ptr<WorkloadRegistry> NewBrokerRegistry(EventQueue* events, const SnapshotSource* view);

}  // namespace gangkeeper::broker
