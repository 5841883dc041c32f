// gangkeeper broker: what the front ends hold instead of a Broker (DESIGN
// §9, issue #21 item 3). A node plays one role at a time:
//
//   leading    a Broker (broker.h) of its own for the term, with the term's
//              fenced sink and the actuator; it schedules
//   following  a ReadOnlyView: the state the leader made durable, published
//              as a read-only Snapshot; no scheduler thread, no changes
//
// SwitchingPort is the one EventQueue and SnapshotSource the webhook, the
// API, metrics, the reconciler and the actuator are given; whoever owns
// the roles (replica::Replica, or the node with a file journal) points it
// at the current one.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::broker {

// A follower's state: a snapshot of a durable state (the leader's, as the
// replicated log has it), built on the caller's thread with nothing
// scheduled, made durable or actuated. As an EventQueue it refuses every
// change (FailedPrecondition: changes go through the replicated store) and
// answers a flush at once. Thread-safe.
class ReadOnlyView final : public EventQueue, public SnapshotSource {
 public:
  // Shows an empty state with `policies` (null: none). `options` shapes
  // the snapshots as a broker's (keep_finished, ...); `clock` dates them.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<ReadOnlyView>> Create(
      std::shared_ptr<const model::PolicySet> policies, BrokerOptions options, const base::Clock* clock);

  // Shows `state` (its workloads are moved out) from now on; its policies,
  // or when it has none the ones shown now. The totals of BrokerStats go
  // on from the snapshot shown before. On error the shown state stays.
  [[nodiscard]] absl::Status Show(DurableState state);
  // Shows `snapshot` as it is (a leader's last one, when it steps down).
  void Show(std::shared_ptr<const Snapshot> snapshot);

  // EventQueue: Submit ignores the event; SubmitAndWait and SubmitAsync
  // (at once, on the caller's thread) answer a flush with OK and every
  // change with FailedPrecondition.
  void Submit(Event e) override;
  [[nodiscard]] absl::Status SubmitAndWait(Event e, absl::Duration timeout = absl::ZeroDuration()) override;
  void SubmitAsync(Event e, Ack done, absl::Duration timeout = absl::ZeroDuration()) override;
  // SnapshotSource: never null.
  std::shared_ptr<const Snapshot> snapshot() const override;

  ReadOnlyView(BrokerOptions options, const base::Clock* clock, std::shared_ptr<const Snapshot> first);

 private:
  const BrokerOptions options_;
  const base::Clock* const clock_;
  absl::Mutex build_mu_;  // one Show at a time
  std::atomic<std::shared_ptr<const Snapshot>> current_;
};

// The EventQueue and SnapshotSource of whatever role the node plays now.
// A call in flight finishes with the role it started with: the old one is
// kept alive until then. Thread-safe.
class SwitchingPort final : public EventQueue, public SnapshotSource {
 public:
  // Starts pointed at `first` (a Broker or a ReadOnlyView; not null).
  template <typename T>
  explicit SwitchingPort(std::shared_ptr<T> first) {
    Switch(std::move(first));
  }
  // From now on events go to, and snapshots come from, `to` (not null).
  template <typename T>
  void Switch(std::shared_ptr<T> to) {
    Switch(std::shared_ptr<EventQueue>(to), std::shared_ptr<const SnapshotSource>(to));
  }
  void Switch(std::shared_ptr<EventQueue> events, std::shared_ptr<const SnapshotSource> view);

  void Submit(Event e) override;
  [[nodiscard]] absl::Status SubmitAndWait(Event e, absl::Duration timeout = absl::ZeroDuration()) override;
  // Goes to the role of the moment; that role answers `done` even if the
  // port switches away from it meanwhile (a Broker answers what it holds
  // when it stops).
  void SubmitAsync(Event e, Ack done, absl::Duration timeout = absl::ZeroDuration()) override;
  std::shared_ptr<const Snapshot> snapshot() const override;

 private:
  std::atomic<std::shared_ptr<EventQueue>> events_;
  std::atomic<std::shared_ptr<const SnapshotSource>> view_;
};

}  // namespace gangkeeper::broker
