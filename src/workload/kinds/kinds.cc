// gangkeeper: the explicit table of managed kinds (see kinds.h).
#include "src/workload/kinds/kinds.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"

namespace gangkeeper::workload {
namespace {

// Where each kind keeps its hold (the one place that says so; hold.cc
// implements the operations on it).
constexpr HoldField kSpecSuspendFlag{HoldMethod::kSuspendFlag, "/spec/suspend"};
constexpr HoldField kRunPolicySuspendFlag{HoldMethod::kSuspendFlag, "/spec/runPolicy/suspend"};
constexpr HoldField kPodSchedulingGates{HoldMethod::kGate, "/spec/schedulingGates"};
constexpr HoldField kSpecReplicas{HoldMethod::kReplicas, "/spec/replicas"};

struct KindEntry {
  KindInfo info;
  KindExtractor extract;
  PodTemplates templates;
  // How many of its pods are ready (waitForPodsReady): a kind declares its
  // reader here, defined beside its extractor or in readiness.cc.
  ReadyCounter ready;
};


// In the order of the Kind enum, which InfoFor relies on.
constexpr KindEntry kKinds[] = {
    {{Kind::kJob, "batch", "v1", "Job", "jobs", SuspendMechanism::kSpecSuspend, kSpecSuspendFlag}, &ExtractJob,
     {"/spec/template", ""},
     &ReadyJob},
    {{Kind::kPyTorchJob, "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractPyTorchJob,
     {"", "/spec/pytorchReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kTFJob, "kubeflow.org", "v1", "TFJob", "tfjobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractTFJob,
     {"", "/spec/tfReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kMPIJob, "kubeflow.org", "v2beta1", "MPIJob", "mpijobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractMPIJob,
     {"", "/spec/mpiReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kXGBoostJob, "kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractXGBoostJob,
     {"", "/spec/xgbReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kPaddleJob, "kubeflow.org", "v1", "PaddleJob", "paddlejobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractPaddleJob,
     {"", "/spec/paddleReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kJobSet, "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", SuspendMechanism::kSpecSuspend,
      kSpecSuspendFlag},
     &ExtractJobSet,
     {"", "/spec/replicatedJobs/{}/template/spec/template"},
     &ReadyJobSet},
    {{Kind::kRayJob, "ray.io", "v1", "RayJob", "rayjobs", SuspendMechanism::kSpecSuspend, kSpecSuspendFlag},
     &ExtractRayJob,
     {"/spec/rayClusterSpec/headGroupSpec/template", "/spec/rayClusterSpec/workerGroupSpecs/{}/template"},
     &ReadyRayJob},
    {{Kind::kRayCluster, "ray.io", "v1", "RayCluster", "rayclusters", SuspendMechanism::kSpecSuspend,
      kSpecSuspendFlag},
     &ExtractRayCluster,
     {"/spec/headGroupSpec/template", "/spec/workerGroupSpecs/{}/template"},
     &ReadyRayCluster},
    {{Kind::kPod, "", "v1", "Pod", "pods", SuspendMechanism::kSchedulingGate, kPodSchedulingGates}, &ExtractPod,
     {"", ""},
     &ReadyPod},
    {{Kind::kJAXJob, "kubeflow.org", "v1", "JAXJob", "jaxjobs", SuspendMechanism::kRunPolicySuspend,
      kRunPolicySuspendFlag},
     &ExtractJAXJob,
     {"", "/spec/jaxReplicaSpecs/{}/template"},
     &ReadyKubeflow},
    {{Kind::kLeaderWorkerSet, "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets",
      SuspendMechanism::kScaleToZero, kSpecReplicas},
     &ExtractLeaderWorkerSet,
     {"/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"},
     &ReadyLeaderWorkerSet},
    {{Kind::kStatefulSet, "apps", "v1", "StatefulSet", "statefulsets", SuspendMechanism::kScaleToZero, kSpecReplicas},
     &ExtractStatefulSet,
     {"/spec/template", ""},
     &ReadyReplicas},
    {{Kind::kDeployment, "apps", "v1", "Deployment", "deployments", SuspendMechanism::kScaleToZero, kSpecReplicas},
     &ExtractDeployment,
     {"/spec/template", ""},
     &ReadyReplicas},
    {{Kind::kAppWrapper, "workload.codeflare.dev", "v1beta2", "AppWrapper", "appwrappers",
      SuspendMechanism::kSpecSuspend, kSpecSuspendFlag},
     &ExtractAppWrapper,
     {"", "", /*beside=*/true},
     &ReadyAppWrapper},
    // Its pod templates are its runtime's: ExtractWorkload builds its pod
    // sets with ExtractOptions::training_runtime (TrainJobPodSets), and
    // ObserveObject counts its ready pods with it (TrainJobReadyPods); its
    // placement goes into its spec.runtimePatches (the actuator).
    {{Kind::kTrainJob, "trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", SuspendMechanism::kSpecSuspend,
      kSpecSuspendFlag},
     &ExtractTrainJob,
     {"", ""},
     &ReadyTrainJob},
};
static_assert(std::size(kKinds) == static_cast<size_t>(kLastKind) + 1, "kLastKind must be the table's last kind");

constexpr bool TableMatchesEnum() {
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    if (static_cast<size_t>(kKinds[i].info.kind) != i) return false;
  }
  return true;
}
static_assert(TableMatchesEnum(), "kKinds must list the kinds in Kind enum order");

// GCC does not fold a function's address compared with nullptr under
// -fsanitize=address, so the sanitizer build leaves this check to the
// release build.
#if !defined(__SANITIZE_ADDRESS__)
constexpr bool EveryKindCountsReadyPods() {
  for (const KindEntry& e : kKinds) {
    if (e.ready == nullptr || e.extract == nullptr) return false;
  }
  return true;
}
static_assert(EveryKindCountsReadyPods(), "every kind needs an extractor and a ready counter");
#endif

constexpr bool HoldMatchesSuspend() {
  for (const KindEntry& e : kKinds) {
    const HoldField& h = e.info.hold;
    switch (e.info.suspend) {
      case SuspendMechanism::kSpecSuspend:
        if (h.method != HoldMethod::kSuspendFlag || h.pointer != kSpecSuspendFlag.pointer) return false;
        break;
      case SuspendMechanism::kRunPolicySuspend:
        if (h.method != HoldMethod::kSuspendFlag || h.pointer != kRunPolicySuspendFlag.pointer) return false;
        break;
      case SuspendMechanism::kSchedulingGate:
        if (h.method != HoldMethod::kGate) return false;
        break;
      case SuspendMechanism::kScaleToZero:
        if (h.method != HoldMethod::kReplicas || h.pointer != kSpecReplicas.pointer) return false;
        break;
    }
  }
  return true;
}
static_assert(HoldMatchesSuspend(), "a kind's hold field and its SuspendMechanism must agree");

}  // namespace

const std::vector<KindInfo>& ManagedKinds() {
  static const std::vector<KindInfo>* const kinds = [] {
    auto* out = new std::vector<KindInfo>();
    for (const KindEntry& e : kKinds) out->push_back(e.info);
    return out;
  }();
  return *kinds;
}

const KindInfo* FindKind(absl::string_view group, absl::string_view kind) {
  for (const KindEntry& e : kKinds) {
    if (e.info.group == group && e.info.name == kind) return &e.info;
  }
  return nullptr;
}

bool IsDeploymentPodOwner(absl::string_view group, absl::string_view kind) {
  return group == "apps" && kind == "ReplicaSet";
}

bool IsWrapperKind(absl::string_view group, absl::string_view kind) {
  const KindInfo* info = FindKind(group, kind);
  return info != nullptr && info->kind == Kind::kAppWrapper;
}

const KindInfo& InfoFor(Kind kind) {
  const size_t i = static_cast<size_t>(kind);
  GK_CHECK(i < std::size(kKinds));
  return kKinds[i].info;
}

const PodTemplates& TemplatesFor(Kind kind) {
  const size_t i = static_cast<size_t>(kind);
  GK_CHECK(i < std::size(kKinds));
  return kKinds[i].templates;
}

std::string TemplatePointer(absl::string_view pattern, absl::string_view key) {
  const size_t at = pattern.find("{}");
  if (at == absl::string_view::npos) return std::string(pattern);
  return absl::StrCat(pattern.substr(0, at), JsonPointerEscape(key), pattern.substr(at + 2));
}

ReadyCounter ReadyCounterFor(Kind kind) {
  const size_t i = static_cast<size_t>(kind);
  GK_CHECK(i < std::size(kKinds));
  return kKinds[i].ready;
}

KindExtractor ExtractorFor(Kind kind) {
  const size_t i = static_cast<size_t>(kind);
  GK_CHECK(i < std::size(kKinds));
  return kKinds[i].extract;
}

}  // namespace gangkeeper::workload
