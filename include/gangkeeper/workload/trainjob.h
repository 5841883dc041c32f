// gangkeeper: the pod sets of a Kubeflow Trainer v2 TrainJob
// (trainer.kubeflow.org/v1alpha1), from the TrainJob and its runtime, and
// its placement through its own spec.runtimePatches.
//
// Issue #25 item 5: TrainJob is a managed kind (Kind::kTrainJob) whose pod
// sets need its runtime: ExtractWorkload asks ExtractOptions::
// training_runtime (a TrainingRuntimeLookup, in a cluster the kube
// module's TrainingRuntimeCache) for it. A TrainJob has no pod templates of its own: its pods
// are the JobSet that the runtime it names (spec.runtimeRef: a
// ClusterTrainingRuntime, or a TrainingRuntime in its namespace) describes
// in spec.template, with the TrainJob's spec.trainer laid over the trainer
// step: numNodes pods (else the runtime's spec.mlPolicy.numNodes, else 1),
// each with resourcesPerNode as the trainer container's resources. These
// functions compute that, as Kueue does through the Trainer's runtime
// framework, so that whatever holds the runtimes (a watch cache in the kube
// module) can build the Workload. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/hold.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::workload {

// The label of a runtime's replicated job that is the trainer step (the
// one spec.trainer applies to); runtimes without it call that job "node".
inline constexpr absl::string_view kTrainJobAncestorStepLabel = "trainer.kubeflow.org/trainjob-ancestor-step";

// What spec.runtimeRef names.
struct TrainingRuntimeRef {
  // "ClusterTrainingRuntime" (the default) or "TrainingRuntime" (in the
  // TrainJob's namespace).
  std::string kind;
  std::string name;
};

// The runtime `trainjob_json` (a TrainJob as JSON text) names.
// InvalidArgument, naming the field, when spec.runtimeRef or its name is
// missing or its apiGroup/kind is not one of the Trainer's runtimes.
[[nodiscard]] absl::StatusOr<TrainingRuntimeRef> ReadTrainingRuntimeRef(absl::string_view trainjob_json);

// The runtime `ref` names for a TrainJob in namespace `namespace_name`, as
// JSON text with its spec ({"spec": ...}), or nullopt when it is not known
// (yet). Empty (no function): no runtime is known.
using TrainingRuntimeLookup =
    std::function<std::optional<std::string>(const TrainingRuntimeRef& ref, absl::string_view namespace_name)>;

// The pod sets of `trainjob_json` run with `runtime_json` (the
// ClusterTrainingRuntime or TrainingRuntime it names), one per replicated
// job of the runtime's JobSet template, in its order: named as the
// replicated job, counted replicas × pods per Job (parallelism, capped by
// completions; the trainer step's both numNodes), requests as Kubernetes
// computes them from the template, the trainer container's (named "node",
// else the only container) replaced by spec.trainer.resourcesPerNode.
// template_pointer is the pod template inside the runtime
// ("/spec/template/spec/replicatedJobs/0/template/spec/template"): the
// TrainJob takes its placement through its own runtimePatches, not there.
// InvalidArgument, naming the field, when either object is malformed.
[[nodiscard]] absl::StatusOr<std::vector<PodSet>> TrainJobPodSets(absl::string_view trainjob_json,
                                                                  absl::string_view runtime_json);

// The `manager` of gangkeeper's entry in a TrainJob's spec.runtimePatches
// (Trainer v2.3: entries keyed by a domain-prefixed manager, each a
// strategic-merge patch of the runtime's JobSet template, applied in list
// order). The entry is gangkeeper's alone: release writes it, suspend takes
// it out, nothing else of the TrainJob is touched.
inline constexpr absl::string_view kTrainJobRuntimePatchManager = "gangkeeper.io/manager";

// Where one pod set (a replicated job of the runtime) is admitted: the
// flavors' nodeLabels and tolerations.
struct TrainJobPlacement {
  std::string pod_set;
  std::map<std::string, std::string> node_selector;
  std::vector<model::Toleration> tolerations;
};

// The operations that release-place `trainjob_json` (a TrainJob as JSON
// text) whose pod sets are `pod_sets` (TrainJobPodSets): gangkeeper's
// runtimePatches entry, appended last so that it is merged last, with one
// replicatedJobs patch per placement that adds something, named as the
// pod set, carrying in template.spec.template.spec
//  - nodeSelector: the flavor's labels the pods do not have yet (a map is
//    merged key by key);
//  - tolerations: the whole list the pods end with, as the runtime's
//    template and the TrainJob's other entries leave it plus the flavor's
//    tolerations it lacks (the Trainer merges a toleration list by
//    replacing it, so the runtime's own tolerations are kept by repeating
//    them); left out when the flavor adds none.
// An entry of gangkeeper's already there (a release not undone) is taken
// out first, with a `test` of its manager; spec.runtimePatches is created
// when missing. No operations when nothing is to be added and no entry is
// there. InvalidArgument, naming both, when a label the pods already have
// (from the runtime or another entry) has another value than the
// flavor's, or a placement names no pod set; InvalidArgument when the
// TrainJob is not a JSON object.
[[nodiscard]] absl::StatusOr<std::vector<PatchOp>> TrainJobPlacementOps(
    absl::string_view trainjob_json, const std::vector<PodSet>& pod_sets,
    const std::vector<TrainJobPlacement>& placements);

// The operations that undo TrainJobPlacementOps: gangkeeper's entry taken
// out (a `test` of its manager, then `remove`), every other entry and the
// list itself left as they are. None when there is no such entry (or the
// object is not JSON).
//
// A preemption takes two steps, as Kueue's: first spec.suspend true alone,
// then these operations once TrainJobActive is false. The Trainer refuses
// a change of runtimePatches while its JobSet still has active Jobs, even
// in the update that suspends; on release, one patch may set
// spec.suspend false and add the entry (it allows a change when the
// TrainJob was suspended before or after the update).
std::vector<PatchOp> TrainJobRestoreOps(absl::string_view trainjob_json);

// How many of the pods of `pod_sets` (TrainJobPodSets of the TrainJob with
// `runtime_json`) are ready, as a JobSet's are counted: per replicated job
// named in the TrainJob's status.jobsStatus, its ready plus succeeded Jobs
// (at most the runtime's replicas) times the pods of one Job. All of them
// is what waitForPodsReady waits for (Kueue: the ready and succeeded Jobs
// add up to the JobSet's replicas). 0 when either object is not JSON.
int64_t TrainJobReadyPods(absl::string_view trainjob_json, absl::string_view runtime_json,
                          const std::vector<PodSet>& pod_sets);

// True while the TrainJob's status says a Job of its JobSet is still
// active (status.jobsStatus[].active > 0): its runtimePatches cannot be
// changed yet. False when not JSON or without status.
bool TrainJobActive(absl::string_view trainjob_json);

}  // namespace gangkeeper::workload
