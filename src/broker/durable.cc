// gangkeeper broker: the keys of the durable state and the durable state of
// a published snapshot (see durable.h). The byte encoding is the store's
// (store/state_codec.h).
#include "gangkeeper/broker/durable.h"

#include "absl/strings/str_cat.h"
#include "gangkeeper/broker/broker.h"

namespace gangkeeper::broker {

std::string DurableKey(const InstanceKey& instance) { return absl::StrCat(KeyString(instance.key), "#", instance.uid); }

std::string DurableKey(const WorkloadInfo& info) {
  return DurableKey(InstanceOf(info.key, info.workload != nullptr ? info.workload->uid : ""));
}

DurableState DurableStateOf(const Snapshot& snap) {
  DurableState state;
  state.position = snap.durable_position();
  state.policies = snap.shared_policies();
  state.terminating = snap.terminating();
  state.overlay = snap.overlay();
  state.workloads.reserve(snap.workload_count());
  snap.ForEachShared([&](const std::shared_ptr<const WorkloadInfo>& info) {
    state.workloads.emplace(DurableKey(*info), info);
  });
  return state;
}

}  // namespace gangkeeper::broker
