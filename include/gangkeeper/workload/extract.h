// gangkeeper: turning a Kubernetes object into a Workload.
//
// The one public header allowed to name a RapidJSON type (STYLE §6.3): the
// admission path parses each review once and hands the object here.
// ExtractWorkload is a pure function of (object, policies, options);
// thread-compatible.
#pragma once

#include "absl/status/statusor.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/hold.h"
#include "gangkeeper/workload/trainjob.h"
#include "gangkeeper/workload/workload.h"
#include "rapidjson/document.h"

namespace gangkeeper::workload {

struct ExtractOptions {
  // Use the namespace's LocalQueue named "default" when the object has no
  // queue-name label (--manage-jobs-without-queue-name).
  bool manage_jobs_without_queue_name = false;
  // The runtimes of TrainJobs (a TrainJob's pod sets are its runtime's).
  TrainingRuntimeLookup training_runtime;
};

// Whether `s` (from ExtractWorkload) says only that a TrainJob's runtime is
// not known (yet): the object may be fine; its message names the runtime.
bool IsRuntimeUnknown(const absl::Status& s);

// Builds the Workload for `object` of kind `info`. Priority: the
// kueue.x-k8s.io/priority-class label names a WorkloadPriorityClass; else the
// pod templates' priorityClassName (Kubeflow: runPolicy.schedulingPolicy.
// priorityClass first) names a PriorityClass; else the globalDefault
// PriorityClass; else 0. InvalidArgument, with the field path, when the
// object is malformed (wrong types, bad quantities, negative counts) or
// names a priority class that does not exist. A TrainJob whose runtime
// options.training_runtime does not know: Unavailable (IsRuntimeUnknown),
// naming the runtime.
[[nodiscard]] absl::StatusOr<Workload> ExtractWorkload(const rapidjson::Value& object, const KindInfo& info,
                                                       const model::PolicySet& policies,
                                                       const ExtractOptions& options = {});

// The hold operations of hold.h on a RapidJSON object (the admission side).
bool IsHeld(const rapidjson::Value& object, const KindInfo& kind);
std::vector<PatchOp> HoldOps(const rapidjson::Value& object, const KindInfo& kind);
std::vector<PatchOp> ReleaseOps(const rapidjson::Value& object, const KindInfo& kind);
std::vector<PatchOp> PlacementTargetOps(const rapidjson::Value& object, const Workload& w);

}  // namespace gangkeeper::workload
