// gangkeeper store: the byte encoding of the broker's durable state
// (broker/durable.h): journal record payloads (one DurableBatch each) and
// snapshot payloads (a whole DurableState), the same in the file journal
// (journal.h) and in etcd (etcd_journal.h).
//
// The encodings are specified byte by byte in src/store/FORMAT.md §4 and
// §5. Decoding never trusts its input: every count and enum is bounded, and
// a bad payload is DataLoss naming what and where. Older versions are read
// and migrated (FORMAT.md §6). Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/scheduler.h"

namespace gangkeeper::store {

// The journal record payload of `batch`.
std::string EncodeBatch(const broker::DurableBatch& batch);
// Folds the record `seq` into `state`. The batch's changes are appended to
// `changes` when it is not null (the audit log regenerates from them).
// DataLoss when the payload does not decode; `state` is then unchanged.
[[nodiscard]] absl::Status ApplyBatch(absl::string_view payload, uint64_t seq, broker::DurableState* state,
                                      std::vector<broker::StateChange>* changes = nullptr);

// The snapshot payload of `state` (its position goes in the file header).
std::string EncodeState(const broker::DurableState& state);
[[nodiscard]] absl::StatusOr<broker::DurableState> DecodeState(absl::string_view payload, uint64_t position);

// For tests and tools: one workload's after-image round trip.
std::string EncodeWorkloadInfo(const broker::WorkloadInfo& info);
[[nodiscard]] absl::StatusOr<broker::WorkloadInfo> DecodeWorkloadInfo(absl::string_view data);

}  // namespace gangkeeper::store
