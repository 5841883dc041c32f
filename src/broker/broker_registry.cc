// gangkeeper broker: the webhook's WorkloadRegistry over a broker (see
// NewBrokerRegistry in broker.h).
#include <memory>
#include <utility>

#include "gangkeeper/broker/broker.h"

namespace gangkeeper::broker {
namespace {

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

std::unique_ptr<WorkloadRegistry> NewBrokerRegistry(EventQueue* events, const SnapshotSource* view) {
  return std::make_unique<BrokerRegistry>(events, view);
}

}  // namespace gangkeeper::broker
