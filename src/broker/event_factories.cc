// gangkeeper broker: the Event factories (see event.h; events.cc is the
// scheduler applying them).
#include "gangkeeper/broker/event.h"

#include <utility>

namespace gangkeeper::broker {
namespace {

Event OfType(Event::Type type, WorkloadKey key = {}, std::string uid = "") {
  Event e;
  e.type = type;
  e.key = std::move(key);
  e.uid = std::move(uid);
  return e;
}

}  // namespace

Event Event::Add(workload::Workload w) {
  Event e = OfType(Type::kAdd);
  e.workload = std::move(w);
  return e;
}

Event Event::Update(workload::Workload w) {
  Event e = OfType(Type::kUpdate);
  e.workload = std::move(w);
  return e;
}

Event Event::Remove(WorkloadKey key, std::string uid) { return OfType(Type::kRemove, std::move(key), std::move(uid)); }

Event Event::Finish(WorkloadKey key, std::string uid) { return OfType(Type::kFinish, std::move(key), std::move(uid)); }

Event Event::Adopt(workload::Workload w, std::map<std::string, std::map<std::string, std::string>> flavors,
                   std::optional<absl::Time> admitted_at, std::map<std::string, int64_t> running_counts) {
  Event e = OfType(Type::kAdopt, KeyOf(w));
  e.workload = std::move(w);
  e.flavors = std::move(flavors);
  e.admitted_at = admitted_at;
  e.running_counts = std::move(running_counts);
  return e;
}

Event Event::Rerelease(WorkloadKey key) { return OfType(Type::kRerelease, std::move(key)); }

Event Event::PodsReady(WorkloadKey key, std::string uid, int64_t ready) {
  Event e = OfType(Type::kPodsReady, std::move(key), std::move(uid));
  e.ready = ready;
  return e;
}

Event Event::Policies(std::shared_ptr<const model::PolicySet> policies,
                      std::shared_ptr<const model::PolicyOverlay> overlay, std::string actor, std::string what) {
  Event e = OfType(Type::kPolicies);
  e.policies = std::move(policies);
  e.overlay = std::move(overlay);
  e.actor = std::move(actor);
  e.message = std::move(what);
  return e;
}

Event Event::ReleaseResult(WorkloadKey key, std::string uid, const absl::Status& result, std::string detail) {
  Event e = OfType(result.ok() ? Type::kReleaseOk : Type::kReleaseFailed, std::move(key), std::move(uid));
  e.message = result.ok() ? std::move(detail) : std::string(result.message());
  return e;
}

Event Event::Stopped(WorkloadKey key, std::string uid, std::string detail) {
  Event e = OfType(Type::kStopped, std::move(key), std::move(uid));
  e.message = std::move(detail);
  return e;
}

Event Event::Flush() { return OfType(Type::kFlush); }

}  // namespace gangkeeper::broker
