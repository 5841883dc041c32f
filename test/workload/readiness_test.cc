// gangkeeper: tests for the kinds table's ready counters (waitForPodsReady):
// each kind answers "how many of my pods are ready" from its own status,
// as Kueue's integrations read it.
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/workload/observe.h"
#include "gtest/gtest.h"
#include "src/workload/kinds/kinds.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

constexpr char kReadinessPodSpec[] = R"({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]})";

// `object` (without its status) plus `status`, read as `kind`: the ready
// count ObserveObject reports.
int64_t Ready(Kind kind, const std::string& object_without_status, const std::string& status) {
  std::string json = object_without_status;
  json.pop_back();  // the closing brace
  absl::StrAppend(&json, R"(, "status": )", status, "}");
  absl::StatusOr<ObservedObject> o = ObserveObject(json, InfoFor(kind), model::PolicySet{});
  EXPECT_TRUE(o.ok()) << o.status();
  if (!o.ok()) return -1;
  EXPECT_TRUE(o->workload.has_value()) << o->extract_error;
  return o->ready_pods;
}

std::string Job(int parallelism) {
  return absl::StrCat(R"({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
    "spec": {"parallelism": )",
                      parallelism, R"(, "template": {"spec": )", kReadinessPodSpec, "}}}");
}

TEST(ReadinessTest, EveryKindHasAReadyCounter) {
  for (const KindInfo& k : ManagedKinds()) EXPECT_NE(ReadyCounterFor(k.kind), nullptr) << k.name;
}

TEST(ReadinessTest, JobCountsReadyAndSucceededPods) {
  EXPECT_EQ(Ready(Kind::kJob, Job(4), "{}"), 0);
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"({"active": 4, "ready": 1})"), 1);
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"({"ready": 2, "succeeded": 1})"), 3);
  // Succeeded pods the Job controller has not counted yet are counted.
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"({"ready": 2, "succeeded": 1,
      "uncountedTerminatedPods": {"succeeded": ["u1"], "failed": ["u2"]}})"),
            4);
  // Never more than the Job's pods; nonsense counts as nothing.
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"({"ready": 9})"), 4);
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"({"ready": -3, "succeeded": "2"})"), 0);
  EXPECT_EQ(Ready(Kind::kJob, Job(4), R"("Running")"), 0);
}

TEST(ReadinessTest, JobSetCountsReadyJobsTimesTheirPods) {
  const std::string jobset = absl::StrCat(
      R"({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "ns"},
    "spec": {"replicatedJobs": [
      {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": )",
      kReadinessPodSpec, R"(}}}},
      {"name": "workers", "replicas": 3, "template": {"spec": {"parallelism": 2, "template": {"spec": )", kReadinessPodSpec,
      R"(}}}}]}})");
  EXPECT_EQ(Ready(Kind::kJobSet, jobset, "{}"), 0);
  EXPECT_EQ(Ready(Kind::kJobSet, jobset, R"({"replicatedJobsStatus": [
      {"name": "leader", "ready": 1}, {"name": "workers", "ready": 1, "active": 3}]})"),
            3);
  EXPECT_EQ(Ready(Kind::kJobSet, jobset, R"({"replicatedJobsStatus": [
      {"name": "leader", "succeeded": 1}, {"name": "workers", "ready": 2, "succeeded": 1}]})"),
            7);
  // More ready Jobs than replicas, and unknown names, add nothing.
  EXPECT_EQ(Ready(Kind::kJobSet, jobset, R"({"replicatedJobsStatus": [
      {"name": "leader", "ready": 5}, {"name": "other", "ready": 3}]})"),
            1);
}

std::string PyTorchJob() {
  return absl::StrCat(
      R"({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": )",
      kReadinessPodSpec, R"(}}, "Worker": {"replicas": 3, "template": {"spec": )", kReadinessPodSpec, "}}}}}");
}

TEST(ReadinessTest, KubeflowIsReadyByItsRunningCondition) {
  EXPECT_EQ(Ready(Kind::kPyTorchJob, PyTorchJob(), R"({"conditions": [
      {"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]})"),
            4);
  // Every replica active but no Running condition: counted, yet not all.
  EXPECT_EQ(Ready(Kind::kPyTorchJob, PyTorchJob(), R"({"replicaStatuses": {
      "Master": {"active": 1}, "Worker": {"active": 3}},
      "conditions": [{"type": "Running", "status": "False"}]})"),
            3);
  EXPECT_EQ(Ready(Kind::kPyTorchJob, PyTorchJob(), R"({"replicaStatuses": {"Worker": {"active": 2}}})"), 2);
}

TEST(ReadinessTest, RayIsReadyByItsClusterState) {
  const std::string cluster_spec = absl::StrCat(R"({"headGroupSpec": {"template": {"spec": )", kReadinessPodSpec,
                                                R"(}}, "workerGroupSpecs": [{"groupName": "g", "replicas": 2,
      "template": {"spec": )",
                                                kReadinessPodSpec, "}}]}");
  const std::string cluster = absl::StrCat(
      R"({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "namespace": "ns"}, "spec": )",
      cluster_spec, "}");
  const std::string job = absl::StrCat(
      R"({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "ns"},
    "spec": {"entrypoint": "python x.py", "rayClusterSpec": )",
      cluster_spec, "}}");
  EXPECT_EQ(Ready(Kind::kRayCluster, cluster, R"({"state": "ready", "readyWorkerReplicas": 2})"), 3);
  EXPECT_EQ(Ready(Kind::kRayCluster, cluster, R"({"readyWorkerReplicas": 2})"), 2);
  EXPECT_EQ(Ready(Kind::kRayCluster, cluster, R"({"state": "suspended"})"), 0);
  EXPECT_EQ(Ready(Kind::kRayJob, job, R"({"rayClusterStatus": {"state": "ready"}})"), 3);
  EXPECT_EQ(Ready(Kind::kRayJob, job, R"({"jobDeploymentStatus": "Initializing"})"), 0);
}

TEST(ReadinessTest, PodIsReadyByItsReadyConditionOrSuccess) {
  const std::string pod = absl::StrCat(
      R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": )", kReadinessPodSpec,
      "}");
  EXPECT_EQ(Ready(Kind::kPod, pod, R"({"phase": "Pending"})"), 0);
  EXPECT_EQ(Ready(Kind::kPod, pod, R"({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})"),
            0);
  EXPECT_EQ(Ready(Kind::kPod, pod, R"({"phase": "Running", "conditions": [
      {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]})"),
            1);
  EXPECT_EQ(Ready(Kind::kPod, pod, R"({"phase": "Succeeded"})"), 1);
}

}  // namespace
}  // namespace gangkeeper::workload

namespace gangkeeper::workload {
namespace {

// Issue #25's kinds: a JAXJob is a Kubeflow job; a StatefulSet or
// Deployment reports ready pods in status.readyReplicas; a LeaderWorkerSet
// reports ready groups there (all of a group's pods ready).
TEST(ReadinessTest, NewKindsReadTheirOwnStatus) {
  const std::string jax = absl::StrCat(
      R"({"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "j", "namespace": "ns"},
    "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 4, "template": {"spec": )",
      kReadinessPodSpec, "}}}}}");
  EXPECT_EQ(Ready(Kind::kJAXJob, jax, R"({"conditions": [{"type": "Running", "status": "True"}]})"), 4);
  EXPECT_EQ(Ready(Kind::kJAXJob, jax, R"({"replicaStatuses": {"Worker": {"active": 4}}})"), 3)
      << "a Kubeflow job is all ready only by its Running condition";

  for (const char* kind : {"StatefulSet", "Deployment"}) {
    SCOPED_TRACE(kind);
    const std::string object =
        absl::StrCat(R"({"apiVersion": "apps/v1", "kind": ")", kind,
                     R"(", "metadata": {"name": "web", "namespace": "ns"}, "spec": {"replicas": 3, "template": {"spec": )",
                     kReadinessPodSpec, "}}}");
    const Kind k = std::string(kind) == "StatefulSet" ? Kind::kStatefulSet : Kind::kDeployment;
    EXPECT_EQ(Ready(k, object, "{}"), 0);
    EXPECT_EQ(Ready(k, object, R"({"replicas": 3, "readyReplicas": 2})"), 2);
    EXPECT_EQ(Ready(k, object, R"({"readyReplicas": 3, "availableReplicas": 3})"), 3);
    EXPECT_EQ(Ready(k, object, R"({"readyReplicas": 7})"), 3) << "never more than its pods";
  }

  // 2 groups of 3 (a leader and 2 workers each).
  const std::string lws = absl::StrCat(
      R"({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
    "metadata": {"name": "l", "namespace": "ns"},
    "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "leaderTemplate": {"spec": )",
      kReadinessPodSpec, R"(}, "workerTemplate": {"spec": )", kReadinessPodSpec, "}}}}");
  EXPECT_EQ(Ready(Kind::kLeaderWorkerSet, lws, "{}"), 0);
  EXPECT_EQ(Ready(Kind::kLeaderWorkerSet, lws, R"({"replicas": 2, "readyReplicas": 1})"), 3);
  EXPECT_EQ(Ready(Kind::kLeaderWorkerSet, lws, R"({"readyReplicas": 2})"), 6);
  EXPECT_EQ(Ready(Kind::kLeaderWorkerSet, lws, R"({"readyReplicas": "2"})"), 0);
}

// An AppWrapper is all ready by its PodsReady condition (its controller
// counts the pods of every component), and ends by its phase.
TEST(ReadinessTest, AppWrapperIsReadyByItsPodsReadyCondition) {
  const std::string aw = absl::StrCat(
      R"({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "metadata": {"name": "a", "namespace": "ns"},
    "spec": {"components": [{"podSets": [{"path": "template.spec.template", "replicas": 3}],
      "template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": )",
      kReadinessPodSpec, "}}}}]}}");
  EXPECT_EQ(Ready(Kind::kAppWrapper, aw, "{}"), 0);
  EXPECT_EQ(Ready(Kind::kAppWrapper, aw, R"({"phase": "Running", "conditions": [{"type": "PodsReady", "status": "False"}]})"),
            0);
  EXPECT_EQ(Ready(Kind::kAppWrapper, aw, R"({"phase": "Running", "conditions": [{"type": "PodsReady", "status": "True"}]})"),
            3);
  for (const char* phase : {"Succeeded", "Failed"}) {
    std::string json = aw;
    json.pop_back();
    absl::StrAppend(&json, R"(, "status": {"phase": ")", phase, R"("}})");
    absl::StatusOr<ObservedObject> o = ObserveObject(json, InfoFor(Kind::kAppWrapper), model::PolicySet{});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_TRUE(o->finished) << phase;
  }
  std::string deleting = aw;
  deleting.pop_back();
  absl::StrAppend(&deleting,
                  R"(, "status": {"phase": "Failed", "conditions": [{"type": "ResourcesDeployed", "status": "True"}]}})");
  absl::StatusOr<ObservedObject> o = ObserveObject(deleting, InfoFor(Kind::kAppWrapper), model::PolicySet{});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->finished) << "failed, but its components are still being deleted";
}

}  // namespace
}  // namespace gangkeeper::workload
