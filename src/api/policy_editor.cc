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
  LocalEditor(broker::EventQueue* events, const broker::SnapshotSource* broker, model::PolicyStore* store)
      : events_(events), broker_(broker), store_(store) {}

  absl::StatusOr<Current> Read() override {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    Current c;
    c.policies = snap->shared_policies();
    c.overlay = snap->overlay();
    c.version = static_cast<int64_t>(GenerationOf(c.overlay));
    if (store_ != nullptr) c.store_version = store_->current()->version;
    return c;
  }

  absl::Status Write(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                     std::shared_ptr<const model::PolicySet> policies, const std::string& actor,
                     const std::string& what) override {
    if (store_ == nullptr) return Submit(base, std::move(overlay), std::move(policies), actor, what);
    // `policies` was composed with the namespaces the store had at Read:
    // a set the namespace watch published since would reach the broker
    // first and be undone by this one, so the change is composed again.
    // Held until this node's store has the overlay, so the watch's next
    // set includes it.
    absl::MutexLock publication(&store_->publication());
    if (store_->current()->version != base.store_version) {
      return absl::AbortedError("the namespaces changed since the quota objects were read");
    }
    std::shared_ptr<const model::PolicyOverlay> adopted = overlay;
    absl::Status written = Submit(base, std::move(overlay), std::move(policies), actor, what);
    if (written.ok()) store_->Adopt(std::move(adopted), nullptr);
    return written;
  }

 private:
  absl::Status Submit(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                      std::shared_ptr<const model::PolicySet> policies, const std::string& actor,
                      const std::string& what) {
    // The broker is the only writer here; the API edits one at a time, so
    // this compare only guards against a caller that did not.
    if (static_cast<int64_t>(GenerationOf(broker_->snapshot()->overlay())) != base.version) {
      return absl::AbortedError("the quota objects changed since they were read");
    }
    return events_->SubmitAndWait(broker::Event::Policies(std::move(policies), std::move(overlay), actor, what));
  }

  broker::EventQueue* const events_;
  const broker::SnapshotSource* const broker_;
  model::PolicyStore* const store_;
};

}  // namespace

std::unique_ptr<PolicyEditor> LocalPolicyEditor(broker::EventQueue* events, const broker::SnapshotSource* broker,
                                                model::PolicyStore* store) {
  return std::make_unique<LocalEditor>(events, broker, store);
}

}  // namespace gangkeeper::api
