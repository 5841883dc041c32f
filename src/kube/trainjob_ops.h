// gangkeeper kube: the actuator's steps for a TrainJob (issue #25 item 5).
//
// A TrainJob's pod sets point into its runtime, not into the TrainJob, so
// its placement is not written into a template but as gangkeeper's entry
// of its own spec.runtimePatches (workload/trainjob.h). Defined in
// training_runtimes.cc, beside the runtimes its pod sets come from. Pure
// functions; thread-compatible.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/workload/hold.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

// Release: gangkeeper's spec.runtimePatches entry with `order`'s
// placements (workload::TrainJobPlacementOps). FailedPrecondition, saying
// why, when the TrainJob cannot take them (a label its runtime sets to
// another value).
[[nodiscard]] absl::StatusOr<std::vector<workload::PatchOp>> TrainJobReleaseOps(const nlohmann::json& trainjob,
                                                                                const broker::ReleaseOrder& order);

// Suspension's second step, after spec.suspend is true: the operations
// that take gangkeeper's entry out (workload::TrainJobRestoreOps; none when
// there is none). Unavailable, naming `path`, while the TrainJob still has
// active Jobs (workload::TrainJobActive): the Trainer refuses a change of
// runtimePatches until they are gone, so the actuator tries again later,
// the gang's quota held meanwhile.
[[nodiscard]] absl::StatusOr<std::vector<workload::PatchOp>> TrainJobSuspendOps(const nlohmann::json& trainjob,
                                                                                absl::string_view path);

}  // namespace gangkeeper::kube
