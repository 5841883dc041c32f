// gangkeeper: the one-replica PolicyEditor (see policy_editor.h).
#include "gangkeeper/api/policy_editor.h"

#include <utility>

namespace gangkeeper::api {
namespace {

uint64_t GenerationOf(const std::shared_ptr<const model::PolicyOverlay>& overlay) {
  return overlay == nullptr ? 0 : overlay->generation;
}

class LocalEditor final : public PolicyEditor {
 public:
  LocalEditor(broker::EventQueue* events, const broker::SnapshotSource* broker) : events_(events), broker_(broker) {}

  absl::StatusOr<Current> Read() override {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    Current c;
    c.policies = snap->shared_policies();
    c.overlay = snap->overlay();
    c.version = static_cast<int64_t>(GenerationOf(c.overlay));
    return c;
  }

  absl::Status Write(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                     std::shared_ptr<const model::PolicySet> policies, const std::string& actor,
                     const std::string& what) override {
    // The broker is the only writer here; the API edits one at a time, so
    // this compare only guards against a caller that did not.
    if (static_cast<int64_t>(GenerationOf(broker_->snapshot()->overlay())) != base.version) {
      return absl::AbortedError("the quota objects changed since they were read");
    }
    return events_->SubmitAndWait(broker::Event::Policies(std::move(policies), std::move(overlay), actor, what));
  }

 private:
  broker::EventQueue* const events_;
  const broker::SnapshotSource* const broker_;
};

}  // namespace

std::unique_ptr<PolicyEditor> LocalPolicyEditor(broker::EventQueue* events, const broker::SnapshotSource* broker) {
  return std::make_unique<LocalEditor>(events, broker);
}

}  // namespace gangkeeper::api
