// gangkeeper: per-kind pod-set extraction, behind an explicit table.
//
// kinds.cc holds the table of managed kinds (KindInfo plus the function that
// reads the kind's pod sets); one file per kind family implements those
// functions: job.cc (batch/v1 Job), kubeflow.cc (PyTorchJob, TFJob, MPIJob,
// XGBoostJob, PaddleJob, JAXJob), jobset.cc, ray.cc (RayJob, RayCluster),
// pod.cc (Pods and pod groups), apps.cc (StatefulSet, Deployment,
// LeaderWorkerSet: held by their replica count), appwrapper.cc (AppWrapper:
// pod sets at paths into its components, placement in podSetInfos). No self-registration (STYLE §6.10): a kind exists
// because the table names it. ExtractWorkload (extract.cc) does the parts
// common to every kind: metadata, suspension, priority, queue, limits.
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/workload/trainjob.h"
#include "gangkeeper/workload/workload.h"
#include "src/workload/json_access.h"

namespace gangkeeper::workload {

// The largest pod count one pod set may have, and the most pod sets a
// workload may have.
inline constexpr int64_t kMaxPodCount = 1000000;
inline constexpr size_t kMaxPodSets = 1000;

// What a kind contributes to its Workload.
struct KindResult {
  std::vector<PodSet> pod_sets;
  // Parallel to pod_sets: where each pod set's name comes from (for
  // duplicate-name errors) and the path of its PodSpec (for errors about the
  // priorityClassName in it).
  std::vector<base::FieldPath> name_paths;
  std::vector<base::FieldPath> spec_paths;

  // A pod PriorityClass named outside the templates (Kubeflow's
  // runPolicy.schedulingPolicy.priorityClass), and its path. When empty, the
  // first template's priorityClassName is used.
  std::string priority_class;
  base::FieldPath priority_class_path;

  // Pods only.
  std::string pod_group_name;
  int64_t pod_group_total_count = 0;
  bool owned_by_managed_object = false;

  void Add(PodSet pod_set, base::FieldPath name_path, base::FieldPath spec_path) {
    pod_sets.push_back(std::move(pod_set));
    name_paths.push_back(std::move(name_path));
    spec_paths.push_back(std::move(spec_path));
  }
};

// Where a kind's pod templates are, as RFC 6901 pointers (the kinds table's
// column; PodSet::template_pointer is filled from it). `fixed`: the one pod
// set whose template has a fixed place (a Job's "main", a Ray head; "" for a
// Pod, its own template). `each`: the template of each further pod set,
// "{}" standing for its key (a Kubeflow replica type as the object spells
// it, a JobSet replicatedJob's or a Ray worker group's list index).
// `beside`: the kind takes its placement beside the templates, at the pod
// set's template_pointer itself (an AppWrapper's podSetInfos entry, which
// its extractor computes from the object's own podSets paths; `fixed` and
// `each` are then unused), rather than in the template's PodSpec.
struct PodTemplates {
  absl::string_view fixed;
  absl::string_view each;
  bool beside = false;
};

// The kinds table's template pointers for `kind`.
const PodTemplates& TemplatesFor(Kind kind);

// `pattern` with "{}" replaced by `key`, escaped for a JSON pointer.
std::string TemplatePointer(absl::string_view pattern, absl::string_view key);

// Reads the pod sets of `object` (already checked to be a JSON object).
// `meta` carries the object's metadata, read by the caller (labels and
// annotations for pod groups). Problems go to `errors`.
using KindExtractor = KindResult (*)(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);

// The extractor for `kind` (from the table in kinds.cc).
KindExtractor ExtractorFor(Kind kind);

// Whether `root` (the object) is held, read as ExtractWorkload reads
// everything: a hold field of the wrong type is an error (hold.cc).
bool ReadHeld(const JsonNode& root, const KindInfo& kind, base::FieldErrors* errors);

// The pod count of a batch/v1 JobSpec at `job_spec`: parallelism (default 1)
// capped by completions when set. nullopt (errors added) when malformed.
std::optional<int64_t> JobPodCount(const JsonNode& job_spec, base::FieldErrors* errors);

// `a` × `b` when the product is at most kMaxPodCount; else an error at
// `path` saying what multiplied to what.
std::optional<int64_t> CheckedPodCount(int64_t a, int64_t b, const base::FieldPath& path, absl::string_view what,
                                       base::FieldErrors* errors);

// How many of the pods of `object` are ready, as the kind itself reports
// it (waitForPodsReady; readiness.cc says what each kind reads). `w` is the
// Workload read from the same object: its pod sets give the counts. The
// answer is in [0, w.TotalPods()]; the workload is ready when it reaches
// the admitted pod count. Kinds that report readiness as a state rather
// than a count (a Ray cluster's "ready", a Kubeflow job's Running
// condition) answer w.TotalPods() in that state and less otherwise. A
// status that is missing or malformed counts 0: never an error.
using ReadyCounter = int64_t (*)(const JsonNode& object, const Workload& w);

// The ready counter for `kind` (from the table in kinds.cc).
ReadyCounter ReadyCounterFor(Kind kind);

// Helpers for ready counters (readiness.cc), lenient by design: a status
// is observed, never validated.
// The member `name` of `v` when `v` is an object and has it, else nullptr.
const rapidjson::Value* StatusMember(const rapidjson::Value* v, absl::string_view name);
// The member `name` of `v` as a count in [0, kMaxPodCount]; 0 when absent,
// negative or not an integer.
int64_t StatusCount(const rapidjson::Value* v, absl::string_view name);
// `object`'s status.conditions has one of `type` with status "True".
bool HasTrueCondition(const rapidjson::Value& object, absl::string_view type);
// `ready` clamped to [0, w.TotalPods()].
int64_t ClampReady(int64_t ready, const Workload& w);

KindResult ExtractJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractPyTorchJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractTFJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractMPIJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractXGBoostJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractPaddleJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractJobSet(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractRayJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractRayCluster(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractPod(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractJAXJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractLeaderWorkerSet(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractStatefulSet(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractDeployment(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
KindResult ExtractAppWrapper(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
// (trainjob.cc) A TrainJob's pod sets need its runtime: ExtractWorkload
// reads them with ExtractTrainJobWithRuntime; this table entry only says so.
KindResult ExtractTrainJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);
// The pod sets of the TrainJob `object` with the runtime `lookup` gives
// (TrainJobPodSets). When the lookup does not know the runtime, no pod
// sets and `*unknown_runtime` names it ("ClusterTrainingRuntime \"x\"").
KindResult ExtractTrainJobWithRuntime(const JsonNode& object, const TrainingRuntimeLookup& lookup,
                                      absl::string_view namespace_name, base::FieldErrors* errors,
                                      std::string* unknown_runtime);

// True when a controller ownerReference of `object` names a managed kind
// (or, when `meta` has the pod-template-hash label, a Deployment's
// ReplicaSet): its gang is the owner's (pod.cc).
bool ReadOwnedByManagedKind(const JsonNode& object, const Workload& meta, base::FieldErrors* errors);

// True when a controller ownerReference of `object` names a wrapper kind
// (IsWrapperKind): the object is a component of an AppWrapper (pod.cc).
// Lenient: a malformed reference is no owner (the kind's own reads report
// what is malformed).
bool ControlledByWrapper(const JsonNode& object);

int64_t ReadyJob(const JsonNode& object, const Workload& w);
int64_t ReadyJobSet(const JsonNode& object, const Workload& w);
int64_t ReadyKubeflow(const JsonNode& object, const Workload& w);  // PyTorch, TF, MPI, XGBoost, Paddle
int64_t ReadyRayJob(const JsonNode& object, const Workload& w);
int64_t ReadyRayCluster(const JsonNode& object, const Workload& w);
int64_t ReadyPod(const JsonNode& object, const Workload& w);
// (apps.cc) A StatefulSet's or Deployment's status.readyReplicas; a
// LeaderWorkerSet's status.readyReplicas (groups whose pods are all ready)
// times the pods of a group. (A JAXJob is a Kubeflow job: ReadyKubeflow.)
int64_t ReadyReplicas(const JsonNode& object, const Workload& w);
int64_t ReadyLeaderWorkerSet(const JsonNode& object, const Workload& w);
// (appwrapper.cc) All pods when the AppWrapper's PodsReady condition is
// True (its controller sets it when every pod of its components is Ready
// or Succeeded), else none.
int64_t ReadyAppWrapper(const JsonNode& object, const Workload& w);
// (trainjob.cc) Without its runtime a TrainJob's Jobs cannot be turned into
// pods: 0. ObserveObject counts them with the runtime (TrainJobReadyPods).
int64_t ReadyTrainJob(const JsonNode& object, const Workload& w);

}  // namespace gangkeeper::workload
