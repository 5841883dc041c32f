// gangkeeper broker: what the broker makes durable.
//
// After every batch of events the broker hands a DurableBatch to its
// StateSink (broker.h): the batch's StateChanges (for the audit log) and
// the state *after* the batch of every workload those changes name (an
// after-image, or "gone"), plus the policy set when it changed. Recovery
// folds batches into a DurableState: image by image, so that applying a
// batch twice, or a batch the snapshot already holds, changes nothing.
// A snapshot is a whole DurableState.
//
// These are the broker's types; their byte encoding belongs to the store
// (store/state_codec.h, specified in src/store/FORMAT.md §4 and §5), which
// implements the StateSink. Value types and pure functions;
// thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"

namespace gangkeeper::broker {

class Snapshot;  // broker.h

// One broker batch, as made durable.
struct DurableBatch {
  std::vector<StateChange> changes;  // in order
  // The state after the batch of every workload a change names; null when
  // it is no longer tracked (removed, finished).
  std::vector<std::pair<InstanceKey, std::shared_ptr<const WorkloadInfo>>> workloads;
  // Set when the batch replaced the policies: the new set (recorded with
  // its digest, model/policy_digest.h), and the deleted ClusterQueues that
  // still hold quota (terminating).
  std::shared_ptr<const model::PolicySet> policies;
  std::vector<model::ClusterQueue> terminating;
  // With the policies: the objects the API changed over the policy files.
  std::shared_ptr<const model::PolicyOverlay> overlay;
  // Not encoded: the highest revision of the intake events (Broker::Submit)
  // applied up to this batch, for a store that records how far its intake
  // is consumed in the same write; 0 when none. A batch may carry only
  // this (intake events that changed nothing).
  int64_t intake_revision = 0;
};

// The broker's durable state: what a snapshot holds, and what recovery
// rebuilds the Scheduler from.
struct DurableState {
  // The last journal record folded in (or the snapshot's position).
  uint64_t position = 0;
  // Null until a batch or snapshot carried policies. Sealed with the
  // recorded digest: Broker::Create compares it with the digest of the
  // policies it is given to decide whether they changed.
  std::shared_ptr<const model::PolicySet> policies;
  std::vector<model::ClusterQueue> terminating;
  std::shared_ptr<const model::PolicyOverlay> overlay;  // null: the API changed nothing
  // Tracked instances by DurableKey: "kind/namespace/name#uid".
  absl::flat_hash_map<std::string, std::shared_ptr<const WorkloadInfo>> workloads;
};

// "job.batch/namespace/name#uid" (KeyString, "#", the uid; no uid for a
// pod group): the key of DurableState::workloads.
std::string DurableKey(const InstanceKey& instance);
std::string DurableKey(const WorkloadInfo& info);

// The durable state a published snapshot stands for (what a snapshot
// file, or the etcd store's snapshot, holds). Shares the workloads.
DurableState DurableStateOf(const Snapshot& snap);

}  // namespace gangkeeper::broker
