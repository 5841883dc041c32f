// gangkeeper broker: a follower's ReadOnlyView and the SwitchingPort the
// front ends hold (see roles.h).
#include "gangkeeper/broker/roles.h"

#include <utility>

#include "gangkeeper/base/check.h"
#include "src/broker/broker_impl.h"

namespace gangkeeper::broker {

ReadOnlyView::ReadOnlyView(BrokerOptions options, const base::Clock* clock, std::shared_ptr<const Snapshot> first)
    : options_(std::move(options)), clock_(clock), current_(std::move(first)) {}

absl::StatusOr<std::shared_ptr<ReadOnlyView>> ReadOnlyView::Create(std::shared_ptr<const model::PolicySet> policies,
                                                                   BrokerOptions options, const base::Clock* clock) {
  if (clock == nullptr) return absl::InvalidArgumentError("read-only view: a clock is required");
  // A follower observes nothing: its changes are the leader's.
  options.observers.clear();
  DurableState empty;
  absl::StatusOr<std::shared_ptr<const Snapshot>> first = ReadOnlySnapshot(&empty, std::move(policies), options, clock);
  if (!first.ok()) return first.status();
  return std::make_shared<ReadOnlyView>(std::move(options), clock, *std::move(first));
}

absl::Status ReadOnlyView::Show(DurableState state) {
  absl::MutexLock lock(&build_mu_);
  const std::shared_ptr<const Snapshot> shown = current_.load();
  BrokerOptions options = options_;
  options.start_stats = shown->stats();
  absl::StatusOr<std::shared_ptr<const Snapshot>> next =
      ReadOnlySnapshot(&state, shown->shared_policies(), options, clock_);
  if (!next.ok()) return next.status();
  current_.store(*std::move(next));
  return absl::OkStatus();
}

void ReadOnlyView::Show(std::shared_ptr<const Snapshot> snapshot) {
  GK_CHECK(snapshot != nullptr);
  absl::MutexLock lock(&build_mu_);
  current_.store(std::move(snapshot));
}

void ReadOnlyView::Submit(Event) {}

absl::Status ReadOnlyView::SubmitAndWait(Event e, absl::Duration) {
  if (!IsChange(e)) return absl::OkStatus();
  return absl::FailedPreconditionError("this replica follows the leader: changes go through the replicated store");
}

void ReadOnlyView::SubmitAsync(Event e, Ack done, absl::Duration timeout) {
  done(SubmitAndWait(std::move(e), timeout));
}

std::shared_ptr<const Snapshot> ReadOnlyView::snapshot() const { return current_.load(); }

void SwitchingPort::Switch(std::shared_ptr<EventQueue> events, std::shared_ptr<const SnapshotSource> view) {
  GK_CHECK(events != nullptr && view != nullptr);
  // The view first: a writer told "not the leader" by the new role finds the
  // new role's state when it looks.
  view_.store(std::move(view));
  events_.store(std::move(events));
}

void SwitchingPort::Submit(Event e) { events_.load()->Submit(std::move(e)); }

absl::Status SwitchingPort::SubmitAndWait(Event e, absl::Duration timeout) {
  return events_.load()->SubmitAndWait(std::move(e), timeout);
}

void SwitchingPort::SubmitAsync(Event e, Ack done, absl::Duration timeout) {
  events_.load()->SubmitAsync(std::move(e), std::move(done), timeout);
}

std::shared_ptr<const Snapshot> SwitchingPort::snapshot() const { return view_.load()->snapshot(); }

}  // namespace gangkeeper::broker
