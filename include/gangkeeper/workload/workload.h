// gangkeeper: the Workload, all the broker ever sees of a Kubernetes object.
//
// A Workload is a gang: one or more pod sets, each with a pod count and the
// requests of one pod, plus the queue and priority it was submitted with.
// ExtractWorkload (extract.h) builds it from a Job, PyTorchJob, TFJob,
// MPIJob, XGBoostJob, PaddleJob, JAXJob, JobSet, RayJob, RayCluster, Pod,
// LeaderWorkerSet, StatefulSet, Deployment, AppWrapper or TrainJob (with
// its runtime, ExtractOptions::training_runtime). Value
// types; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::workload {

// Labels and annotations gangkeeper reads (DESIGN §4).
inline constexpr absl::string_view kQueueNameLabel = "kueue.x-k8s.io/queue-name";
inline constexpr absl::string_view kPriorityClassLabel = "kueue.x-k8s.io/priority-class";
inline constexpr absl::string_view kPodGroupNameLabel = "kueue.x-k8s.io/pod-group-name";
inline constexpr absl::string_view kPodGroupTotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count";
// Partial admission of a batch Job (Kueue's): the fewest pods it may start
// with when its parallelism does not fit.
inline constexpr absl::string_view kJobMinParallelismAnnotation = "kueue.x-k8s.io/job-min-parallelism";
// Set by the Deployment controller on a ReplicaSet and on its pods.
inline constexpr absl::string_view kPodTemplateHashLabel = "pod-template-hash";
// What gangkeeper writes.
inline constexpr absl::string_view kSchedulingGate = "gangkeeper.io/admission";
// A Job released with fewer pods than it asked for keeps its own
// parallelism here while spec.parallelism holds the admitted count; the
// Job is read with this count, and suspending it puts the count back.
inline constexpr absl::string_view kFullParallelismAnnotation = "gangkeeper.io/full-parallelism";
// A kind held by its replica count (HoldMethod::kReplicas) keeps the count
// it asked for here while spec.replicas is 0; it is read with this count.
inline constexpr absl::string_view kHeldReplicasAnnotation = "gangkeeper.io/held-replicas";

// Whether an object's annotation is kept on its Workload: Kueue's and
// gangkeeper's own are (every annotation gangkeeper reads is one of them);
// the rest (kubectl's last-applied configuration, ...) would only cost a
// copy per review and memory per tracked workload.
inline bool IsKeptAnnotation(absl::string_view key) {
  return key.substr(0, 15) == "kueue.x-k8s.io/" || key.substr(0, 14) == "gangkeeper.io/";
}

enum class Kind {
  kJob,
  kPyTorchJob,
  kTFJob,
  kMPIJob,
  kXGBoostJob,
  kPaddleJob,
  kJobSet,
  kRayJob,
  kRayCluster,
  kPod,
  // Appended (the durable state stores the number): issue #25's kinds.
  kJAXJob,
  kLeaderWorkerSet,
  kStatefulSet,
  kDeployment,
  kAppWrapper,
  // Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1): its pod sets are
  // its runtime's (workload/trainjob.h).
  kTrainJob,
};
// The last Kind (the bound the state decoders check).
inline constexpr Kind kLastKind = Kind::kTrainJob;

// Where a kind keeps its suspend switch. (GCC's -Wshadow flags the scoped
// enumerator kSchedulingGate against the constant above; both names are used.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
enum class SuspendMechanism {
  kSpecSuspend,       // spec.suspend (Job, JobSet, RayJob, RayCluster, AppWrapper, TrainJob)
  kRunPolicySuspend,  // spec.runPolicy.suspend (Kubeflow jobs)
  kSchedulingGate,    // spec.schedulingGates (Pods)
  kScaleToZero,       // spec.replicas 0 (StatefulSet, Deployment, LeaderWorkerSet: no suspend field)
};
#pragma GCC diagnostic pop

// How gangkeeper holds a kind back until its gang is admitted, and lets it go.
enum class HoldMethod {
  kSuspendFlag,  // a boolean set true at creation, false on release
  kGate,         // gangkeeper's scheduling gate in a list, removed on release
  // A replica count set to 0 at creation, the count asked for kept in the
  // gangkeeper.io/held-replicas annotation; release puts the count back and
  // takes the annotation out. Held: the annotation is there and the count
  // is 0 (for kinds without a suspend field).
  kReplicas,
};

// Where a kind's hold lives: the method and the RFC 6901 pointer of the
// field from the object's root ("/spec/suspend", "/spec/runPolicy/suspend",
// "/spec/schedulingGates"). The operations on it are in hold.h.
struct HoldField {
  HoldMethod method;
  absl::string_view pointer;
};

struct KindInfo {
  Kind kind;
  absl::string_view group;     // "" for core
  absl::string_view version;   // "v1", "v1alpha2"
  absl::string_view name;      // "Job"
  absl::string_view resource;  // "jobs"
  // The same fact as `hold`, named by the shape the kinds share (kinds.cc
  // checks at compile time that the two agree).
  SuspendMechanism suspend;
  HoldField hold;
};

// True for the owner kind of a Deployment's pods (apps/v1 ReplicaSet): a
// pod it controls that carries kPodTemplateHashLabel is the Deployment's,
// so not a workload of its own.
bool IsDeploymentPodOwner(absl::string_view group, absl::string_view kind);

// True for a kind that wraps other objects (workload.codeflare.dev
// AppWrapper): the objects its controller creates for its components are
// controlled by it and belong to its gang, whatever their kind, so they
// are neither held nor counted on their own.
bool IsWrapperKind(absl::string_view group, absl::string_view kind);

// The managed kinds, in a fixed order (an explicit table; no registration).
const std::vector<KindInfo>& ManagedKinds();
// The kind for a group/kind (any version of the group), or nullptr.
const KindInfo* FindKind(absl::string_view group, absl::string_view kind);
const KindInfo& InfoFor(Kind kind);

struct PodSet {
  std::string name;   // "main", "master", "worker", "launcher", "head", a replicated job or worker group
  int64_t count = 0;  // pods in this set
  // Partial admission (KUEUE-SEMANTICS.md §3.8): the fewest pods the set
  // may be admitted with when `count` does not fit (a Job's
  // kueue.x-k8s.io/job-min-parallelism annotation, a kind's minCount);
  // nullopt: only the whole count.
  std::optional<int64_t> min_count;
  // The fewest pods it may be admitted with: min_count clamped to
  // [0, count], or count.
  int64_t MinCount() const {
    if (!min_count.has_value() || *min_count >= count) return count;
    return *min_count < 0 ? 0 : *min_count;
  }
  // Per pod, as Kubernetes computes the pod's effective request:
  // max(sum of containers, each init container) + sidecars + overhead,
  // with limits standing in for missing requests.
  std::map<std::string, quantity::Quantity> requests;
  // Per pod, summed the same way, for the requests == limits rule on
  // extended resources.
  std::map<std::string, quantity::Quantity> limits;
  std::string priority_class_name;  // the template's spec.priorityClassName
  std::map<std::string, std::string> node_selector;
  std::vector<model::Toleration> tolerations;
  // The template mounts a PersistentVolumeClaim (somewhere to checkpoint).
  bool has_persistent_volume = false;
  // RFC 6901 pointer to this pod set's pod template (the object with
  // metadata and spec) inside the Kubernetes object, e.g. "/spec/template"
  // for a Job or "/spec/pytorchReplicaSpecs/Worker/template"; "" for a Pod,
  // which is its own template. The actuator patches nodeSelector and
  // tolerations under it. For a kind that takes placement beside its
  // templates (an AppWrapper: its controller copies
  // spec.components[i].podSetInfos[j] into the wrapped object's template
  // when it creates it) this is that target instead,
  // "/spec/components/0/podSetInfos/1" (PlacementPointer in hold.h).
  std::string template_pointer;
};

struct Workload;
// Sets the pod sets' min_count from the annotation that carries it (a
// Job's kueue.x-k8s.io/job-min-parallelism) when not set: for a Workload
// rebuilt from durable state, which keeps the annotation but not the
// minimum. True when it set one.
bool RestoreMinCounts(Workload* w);

// `token` escaped for a JSON pointer ("~" -> "~0", "/" -> "~1").
std::string JsonPointerEscape(absl::string_view token);

// Fields are ordered so that the small ones share words (a tracked
// workload keeps one Workload: padding is paid 100,000 times).
struct Workload {
  // (The small fields are kept together: the broker holds 100,000 of these,
  // and 8 bytes more would move each to the allocator's next size class.
  // broker_bench's BM_Memory100k measures the total.)
  Kind kind = Kind::kJob;
  bool suspended = false;  // suspended, or (Pods) carrying our scheduling gate
  // submitted_by is only what the review says: anything that can reach the
  // webhook port can send one (DESIGN §2), so the audit marks it claimed.
  bool submitter_claimed = false;
  // Known only from an AdmissionReview, not yet from the object the API
  // server stored (DESIGN §2 trust model: with a Kubernetes API a review
  // is a hint). The broker tracks such a workload but neither queues nor
  // admits it until the reconciler confirms it from a watch event, a list
  // or a GET by uid, with the pod sets read from the stored object; one
  // that the API server never stored is dropped. False for everything read
  // from the cluster, and for reviews when they are trusted (--kube none).
  bool unconfirmed = false;
  // Pods owned by a managed kind (Job, JobSet, ...) are not workloads.
  bool owned_by_managed_object = false;
  std::string api_version;
  std::string namespace_name;
  // Empty only in a review of a CREATE with generateName that the API
  // server has not named yet (a mutating review).
  std::string name;
  std::string uid;
  // metadata.creationTimestamp (the queue-order time, as in Kueue), or
  // InfinitePast when the object has none yet.
  absl::Time creation_timestamp = absl::InfinitePast();
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;

  std::string queue_name;  // the LocalQueue, from the queue-name label (or defaulted)
  // Priority as resolved (extract.h): the value, where it came from, and the
  // PriorityClass's preemptionPolicy (kNever: this workload never preempts).
  int32_t priority = 0;
  model::PreemptionPolicy preemption_policy = model::PreemptionPolicy::kPreemptLowerPriority;
  std::string priority_class;         // the class name used, if any
  std::string priority_class_source;  // "WorkloadPriorityClass", "PriorityClass", "globalDefault", ""
  // The pod PriorityClass the templates name (kept to compare with the
  // Kueue priority for warnings), empty when none.
  std::string pod_priority_class;

  std::vector<PodSet> pod_sets;
  // The user whose request created (or last changed) it, from the
  // AdmissionReview's userInfo.username; empty when not known. For the audit.
  std::string submitted_by;

  // Pod groups: the group name and its declared total (0 when absent).
  std::string pod_group_name;
  int64_t pod_group_total_count = 0;

  // Total pods over all pod sets.
  int64_t TotalPods() const;
};

}  // namespace gangkeeper::workload
