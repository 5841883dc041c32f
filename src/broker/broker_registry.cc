// gangkeeper broker: the webhook's WorkloadRegistry over a broker (see
// NewBrokerRegistry in broker.h), and the *Async defaults of every
// registry (registry.h).
#include <memory>
#include <utility>

#include "gangkeeper/broker/broker.h"

namespace gangkeeper::broker {
namespace {

// Runs `work` through `blocking`, or here when there is none.
void RunBlockingWork(const BlockingRunner& blocking, absl::AnyInvocable<void()> work) {
  if (blocking) {
    blocking(std::move(work));
  } else {
    work();
  }
}

class BrokerRegistry final : public WorkloadRegistry {
 public:
  BrokerRegistry(EventQueue* events, const SnapshotSource* view) : events_(events), view_(view) {}

  absl::Status Register(const workload::Workload& w, const std::string& /*cluster_queue*/) override {
    return events_->SubmitAndWait(Event::Add(w));
  }
  absl::Status Update(const workload::Workload& w) override { return events_->SubmitAndWait(Event::Update(w)); }
  absl::Status Remove(const WorkloadKey& key, const std::string& uid) override {
    return events_->SubmitAndWait(Event::Remove(key, uid));
  }
  absl::Status Finish(const WorkloadKey& key, const std::string& uid) override {
    return events_->SubmitAndWait(Event::Finish(key, uid));
  }

  // No thread waits: the broker calls back once the batch is durable.
  void RegisterAsync(workload::Workload w, const std::string& /*cluster_queue*/, const BlockingRunner&,
                     WriteDone done) override {
    events_->SubmitAsync(Event::Add(std::move(w)), std::move(done));
  }
  void UpdateAsync(workload::Workload w, const BlockingRunner&, WriteDone done) override {
    events_->SubmitAsync(Event::Update(std::move(w)), std::move(done));
  }
  void RemoveAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner&, WriteDone done) override {
    events_->SubmitAsync(Event::Remove(key, uid), std::move(done));
  }
  void FinishAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner&, WriteDone done) override {
    events_->SubmitAsync(Event::Finish(key, uid), std::move(done));
  }

  std::optional<WorkloadRecord> Find(const WorkloadKey& key) const override {
    return view_->snapshot()->Record(key);
  }
  int64_t PendingIn(const std::string& cluster_queue) const override {
    return view_->snapshot()->PendingIn(cluster_queue);
  }
  std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const override {
    return view_->snapshot()->AdmittedUsage(cluster_queue);
  }
  size_t UnconfirmedCount() const override { return view_->snapshot()->unconfirmed_count(); }

 private:
  EventQueue* const events_;
  const SnapshotSource* const view_;
};

}  // namespace

void WorkloadRegistry::RegisterAsync(workload::Workload w, const std::string& cluster_queue,
                                     const BlockingRunner& blocking, WriteDone done) {
  RunBlockingWork(blocking, [this, w = std::move(w), cluster_queue, done = std::move(done)]() mutable {
    done(Register(w, cluster_queue));
  });
}

void WorkloadRegistry::UpdateAsync(workload::Workload w, const BlockingRunner& blocking, WriteDone done) {
  RunBlockingWork(blocking, [this, w = std::move(w), done = std::move(done)]() mutable { done(Update(w)); });
}

void WorkloadRegistry::RemoveAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner& blocking,
                                   WriteDone done) {
  RunBlockingWork(blocking, [this, key, uid, done = std::move(done)]() mutable { done(Remove(key, uid)); });
}

void WorkloadRegistry::FinishAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner& blocking,
                                   WriteDone done) {
  RunBlockingWork(blocking, [this, key, uid, done = std::move(done)]() mutable { done(Finish(key, uid)); });
}

std::unique_ptr<WorkloadRegistry> NewBrokerRegistry(EventQueue* events, const SnapshotSource* view) {
  return std::make_unique<BrokerRegistry>(events, view);
}

}  // namespace gangkeeper::broker
