// gangkeeper: tests for the kinds table and each kind's pod sets.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Strings = std::map<std::string, std::string>;

// A one-container pod spec requesting `cpu` CPUs and `gpus` GPUs.
std::string PodSpec(const std::string& cpu, int gpus = 0, const std::string& extra = "") {
  std::string requests = absl::StrCat(R"("cpu": ")", cpu, R"(")");
  if (gpus > 0) absl::StrAppend(&requests, R"(, "nvidia.com/gpu": )", gpus);
  return absl::StrCat(R"({)", extra, R"("containers": [{"name": "c", "resources": {"requests": {)", requests,
                      "}}}]}");
}

std::string Template(const std::string& cpu, int gpus = 0, const std::string& extra = "") {
  return absl::StrCat(R"({"spec": )", PodSpec(cpu, gpus, extra), "}");
}

// ---------------------------------------------------------------- the table

TEST(KindsTest, ManagedKindsListsEveryKindInEnumOrder) {
  const std::vector<KindInfo>& kinds = ManagedKinds();
  ASSERT_EQ(kinds.size(), 16u);
  for (size_t i = 0; i < kinds.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(kinds[i].kind), i);
    EXPECT_EQ(&InfoFor(kinds[i].kind), FindKind(kinds[i].group, kinds[i].name));
  }
  EXPECT_EQ(InfoFor(Kind::kJob).group, "batch");
  EXPECT_EQ(InfoFor(Kind::kJob).resource, "jobs");
  EXPECT_EQ(InfoFor(Kind::kMPIJob).version, "v2beta1");
  EXPECT_EQ(InfoFor(Kind::kJobSet).version, "v1alpha2");
  EXPECT_EQ(InfoFor(Kind::kPod).group, "");
  EXPECT_EQ(InfoFor(Kind::kPod).suspend, SuspendMechanism::kSchedulingGate);
  EXPECT_EQ(InfoFor(Kind::kTFJob).suspend, SuspendMechanism::kRunPolicySuspend);
  EXPECT_EQ(InfoFor(Kind::kRayJob).suspend, SuspendMechanism::kSpecSuspend);
  EXPECT_EQ(InfoFor(Kind::kTrainJob).group, "trainer.kubeflow.org");
  EXPECT_EQ(InfoFor(Kind::kTrainJob).resource, "trainjobs");
  EXPECT_EQ(InfoFor(Kind::kTrainJob).suspend, SuspendMechanism::kSpecSuspend);
  EXPECT_EQ(kLastKind, Kind::kTrainJob);
}

TEST(KindsTest, FindKindMatchesGroupAndKindExactly) {
  ASSERT_NE(FindKind("kubeflow.org", "MPIJob"), nullptr);
  EXPECT_EQ(FindKind("kubeflow.org", "MPIJob")->kind, Kind::kMPIJob);
  EXPECT_EQ(FindKind("ray.io", "RayCluster")->kind, Kind::kRayCluster);
  EXPECT_EQ(FindKind("jobset.x-k8s.io", "JobSet")->kind, Kind::kJobSet);
  EXPECT_EQ(FindKind("", "Pod")->kind, Kind::kPod);
  EXPECT_EQ(FindKind("batch", "Pod"), nullptr);
  EXPECT_EQ(FindKind("batch", "job"), nullptr);
  EXPECT_EQ(FindKind("batch.volcano.sh", "Job"), nullptr);
  EXPECT_EQ(FindKind("apps", "Deployment")->kind, Kind::kDeployment);
  EXPECT_EQ(FindKind("apps", "StatefulSet")->kind, Kind::kStatefulSet);
  EXPECT_EQ(FindKind("apps", "ReplicaSet"), nullptr);
  EXPECT_EQ(FindKind("apps", "DaemonSet"), nullptr);
  EXPECT_EQ(FindKind("leaderworkerset.x-k8s.io", "LeaderWorkerSet")->kind, Kind::kLeaderWorkerSet);
  EXPECT_EQ(FindKind("kubeflow.org", "JAXJob")->kind, Kind::kJAXJob);
  EXPECT_EQ(FindKind("workload.codeflare.dev", "AppWrapper")->kind, Kind::kAppWrapper);
  EXPECT_EQ(InfoFor(Kind::kAppWrapper).version, "v1beta2");
  EXPECT_EQ(InfoFor(Kind::kAppWrapper).resource, "appwrappers");
  EXPECT_EQ(InfoFor(Kind::kAppWrapper).suspend, SuspendMechanism::kSpecSuspend);
  EXPECT_TRUE(IsWrapperKind("workload.codeflare.dev", "AppWrapper"));
  EXPECT_FALSE(IsWrapperKind("jobset.x-k8s.io", "JobSet"));
}

// ---------------------------------------------------------------- Job

TEST(JobTest, CountIsParallelismCappedByCompletions) {
  struct Case {
    const char* name;
    const char* spec;
    int64_t want;
  };
  const Case cases[] = {
      {"defaults to one pod", "", 1},
      {"parallelism alone", R"("parallelism": 4,)", 4},
      {"completions cap parallelism", R"("parallelism": 4, "completions": 2,)", 2},
      {"completions above parallelism do not raise it", R"("parallelism": 2, "completions": 10,)", 2},
      {"completions alone cap the default", R"("completions": 5,)", 1},
      {"indexed jobs count the same", R"("parallelism": 3, "completions": 8, "completionMode": "Indexed",)", 3},
      {"zero parallelism is zero pods", R"("parallelism": 0,)", 0},
      {"null parallelism is the default", R"("parallelism": null, "completions": null,)", 1},
      {"the largest count", R"("parallelism": 1000000,)", 1000000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(
        absl::StrCat(R"({"apiVersion": "batch/v1", "kind": "Job", "spec": {)", c.spec, R"("template": )",
                     Template("1"), "}}"),
        Kind::kJob);
    ASSERT_THAT(w, IsOk());
    EXPECT_THAT(PodSetNames(*w), ElementsAre("main"));
    EXPECT_THAT(PodSetCounts(*w), ElementsAre(c.want));
    EXPECT_EQ(w->TotalPods(), c.want);
  }
}

TEST(JobTest, ReadsTheTemplate) {
  absl::StatusOr<Workload> w = Extract(R"({
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "team-a"},
    "spec": {"suspend": true, "parallelism": 2, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
      "nodeSelector": {"accelerator": "nvidia", "pool": "a100"},
      "tolerations": [
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"operator": "Exists", "tolerationSeconds": 30},
        {"key": "plain"}
      ],
      "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
      "containers": [{"name": "c", "resources": {"requests": {"cpu": 2, "memory": "8Gi", "nvidia.com/gpu": 1},
                                                 "limits": {"memory": "8Gi", "nvidia.com/gpu": 1}}}]
    }}}})",
                                       Kind::kJob);
  ASSERT_THAT(w, IsOk());
  ASSERT_EQ(w->pod_sets.size(), 1u);
  const PodSet& ps = w->pod_sets[0];
  EXPECT_EQ(ps.count, 2);
  EXPECT_EQ(Formatted(ps.requests), (Strings{{"cpu", "2"}, {"memory", "8Gi"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(Formatted(ps.limits), (Strings{{"memory", "8Gi"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(ps.node_selector, (Strings{{"accelerator", "nvidia"}, {"pool", "a100"}}));
  ASSERT_EQ(ps.tolerations.size(), 3u);
  EXPECT_EQ(ps.tolerations[0].key, "sku");
  EXPECT_EQ(ps.tolerations[0].op, "Equal");
  EXPECT_EQ(ps.tolerations[0].value, "gpu");
  EXPECT_EQ(ps.tolerations[0].effect, "NoSchedule");
  EXPECT_EQ(ps.tolerations[0].toleration_seconds, std::nullopt);
  EXPECT_EQ(ps.tolerations[1].op, "Exists");
  EXPECT_EQ(ps.tolerations[1].toleration_seconds, 30);
  EXPECT_EQ(ps.tolerations[2].op, "Equal");  // the default
  EXPECT_TRUE(ps.has_persistent_volume);
  EXPECT_TRUE(w->suspended);
  EXPECT_EQ(w->api_version, "batch/v1");
}

TEST(JobTest, PersistentVolumesAreClaimsOrEphemeralClaimTemplates) {
  struct Case {
    const char* name;
    const char* volumes;
    bool want;
  };
  const Case cases[] = {
      {"no volumes", "[]", false},
      {"emptyDir and configMap", R"([{"name": "a", "emptyDir": {}}, {"name": "b", "configMap": {"name": "x"}}])",
       false},
      {"a claim", R"([{"name": "a", "emptyDir": {}}, {"name": "b", "persistentVolumeClaim": {"claimName": "x"}}])",
       true},
      {"an ephemeral volume with a claim template",
       R"([{"name": "a", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}])", true},
      {"an ephemeral volume without one", R"([{"name": "a", "ephemeral": {}}])", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(
        absl::StrCat(R"({"spec": {"template": )", Template("1", 0, absl::StrCat(R"("volumes": )", c.volumes, ",")),
                     "}}"),
        Kind::kJob);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->pod_sets[0].has_persistent_volume, c.want);
  }
}

TEST(JobTest, RequestsFollowTheEffectivePodRequestRules) {
  absl::StatusOr<Workload> w = Extract(R"({"spec": {"template": {"spec": {
      "overhead": {"cpu": "100m", "memory": "64Mi"},
      "initContainers": [
        {"name": "log-shipper", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}}},
        {"name": "download", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}
      ],
      "containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}},
        {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}}
      ]}}}})",
                                       Kind::kJob);
  ASSERT_THAT(w, IsOk());
  // cpu: max(1 + 1 + 0.25, 4 + 0.25) + 0.1; memory: max(4Gi + 128Mi, 1Gi + 128Mi) + 64Mi.
  EXPECT_EQ(Formatted(w->pod_sets[0].requests),
            (Strings{{"cpu", "4350m"}, {"memory", "4288Mi"}, {"nvidia.com/gpu", "2"}}));
  EXPECT_EQ(Formatted(w->pod_sets[0].limits), (Strings{{"cpu", "1100m"}, {"nvidia.com/gpu", "2"}}));
}

// ---------------------------------------------------------------- Kubeflow

TEST(KubeflowTest, PyTorchJobHasMasterThenWorker) {
  absl::StatusOr<Workload> w = Extract(absl::StrCat(R"({
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
    "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": {
      "Worker": {"replicas": 3, "template": )",
                                                    Template("8", 1), R"(},
      "Master": {"template": )",
                                                    Template("2"), R"(}}}})"),
                                       Kind::kPyTorchJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("master", "worker"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 3));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), (Strings{{"cpu", "2"}}));
  EXPECT_EQ(Formatted(w->pod_sets[1].requests), (Strings{{"cpu", "8"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(w->suspended);
  EXPECT_EQ(w->TotalPods(), 4);
}

TEST(KubeflowTest, TFJobOrdersChiefPsWorkerEvaluator) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"tfReplicaSpecs": {
        "Evaluator": {"replicas": 1, "template": )",
                   Template("1"), R"(},
        "Worker": {"replicas": 4, "template": )",
                   Template("4", 1), R"(},
        "PS": {"replicas": 2, "template": )",
                   Template("2"), R"(},
        "Chief": {"replicas": 1, "template": )",
                   Template("4", 1), R"(}}}})"),
      Kind::kTFJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("chief", "ps", "worker", "evaluator"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 2, 4, 1));
  EXPECT_FALSE(w->suspended);
}

TEST(KubeflowTest, ReplicaTypesMatchCaseInsensitively) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"spec": {"tfReplicaSpecs": {"worker": {"replicas": 2, "template": )", Template("1"),
                   R"(}, "ps": {"template": )", Template("1"), "}}}}"),
      Kind::kTFJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("ps", "worker"));
}

TEST(KubeflowTest, MPIJobAcceptsV2beta1AndV1) {
  for (const char* version : {"kubeflow.org/v2beta1", "kubeflow.org/v1"}) {
    SCOPED_TRACE(version);
    absl::StatusOr<Workload> w =
        Extract(absl::StrCat(R"({"apiVersion": ")", version, R"(", "kind": "MPIJob", "spec": {
          "runPolicy": {"suspend": false},
          "mpiReplicaSpecs": {"Worker": {"replicas": 8, "template": )",
                             Template("16", 2), R"(}, "Launcher": {"replicas": 1, "template": )", Template("1"),
                             "}}}}"),
                Kind::kMPIJob);
    ASSERT_THAT(w, IsOk());
    EXPECT_THAT(PodSetNames(*w), ElementsAre("launcher", "worker"));
    EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 8));
    EXPECT_EQ(w->api_version, version);
    EXPECT_FALSE(w->suspended);
  }
}

TEST(KubeflowTest, XGBoostAndPaddleJobs) {
  absl::StatusOr<Workload> xgb =
      Extract(absl::StrCat(R"({"spec": {"xgbReplicaSpecs": {"Master": {"replicas": 1, "template": )", Template("1"),
                           R"(}, "Worker": {"replicas": 2, "template": )", Template("2"), "}}}}"),
              Kind::kXGBoostJob);
  ASSERT_THAT(xgb, IsOk());
  EXPECT_THAT(PodSetNames(*xgb), ElementsAre("master", "worker"));
  EXPECT_THAT(PodSetCounts(*xgb), ElementsAre(1, 2));
  EXPECT_EQ(xgb->api_version, "kubeflow.org/v1");  // from the table when absent

  absl::StatusOr<Workload> paddle = Extract(
      absl::StrCat(R"({"spec": {"runPolicy": {"suspend": true}, "paddleReplicaSpecs": {"Worker": {"replicas": 5, "template": )",
                   Template("2", 1), "}}}}"),
      Kind::kPaddleJob);
  ASSERT_THAT(paddle, IsOk());
  EXPECT_THAT(PodSetNames(*paddle), ElementsAre("worker"));
  EXPECT_THAT(PodSetCounts(*paddle), ElementsAre(5));
  EXPECT_TRUE(paddle->suspended);
}

TEST(KubeflowTest, UnknownAndDuplicateReplicaTypesAreErrors) {
  absl::StatusOr<Workload> unknown = Extract(
      absl::StrCat(R"({"spec": {"pytorchReplicaSpecs": {"Master": {"template": )", Template("1"),
                   R"(}, "Launcher": {"template": )", Template("1"), "}}}}"),
      Kind::kPyTorchJob);
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kInvalidArgument,
                                "spec.pytorchReplicaSpecs[Launcher]: unknown replica type \"Launcher\"; a "
                                "PyTorchJob has Master, Worker"));

  absl::StatusOr<Workload> twice = Extract(
      absl::StrCat(R"({"spec": {"pytorchReplicaSpecs": {"Worker": {"template": )", Template("1"),
                   R"(}, "worker": {"template": )", Template("1"), "}}}}"),
      Kind::kPyTorchJob);
  EXPECT_THAT(twice, StatusIs(absl::StatusCode::kInvalidArgument, "spec.pytorchReplicaSpecs[worker]: replica type "
                                                                  "Worker is given twice"));

  absl::StatusOr<Workload> none = Extract(R"({"spec": {"pytorchReplicaSpecs": {}}})", Kind::kPyTorchJob);
  EXPECT_THAT(none, StatusIs(absl::StatusCode::kInvalidArgument, "spec.pytorchReplicaSpecs: a PyTorchJob needs at "
                                                                 "least one replica type (Master, Worker)"));
}

// ---------------------------------------------------------------- JobSet

std::string ReplicatedJob(const std::string& name, const std::string& fields, const std::string& job_spec,
                          const std::string& pod_template) {
  return absl::StrCat(R"({"name": ")", name, R"(", )", fields, R"("template": {"spec": {)", job_spec,
                      R"("template": )", pod_template, "}}}");
}

TEST(JobSetTest, OnePodSetPerReplicatedJob) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"suspend": true, "replicatedJobs": [)",
                   ReplicatedJob("driver", "", "", Template("1")), ",",
                   ReplicatedJob("workers", R"("replicas": 4,)", R"("parallelism": 2, "completions": 2,)",
                                 Template("8", 1)),
                   ",",
                   ReplicatedJob("capped", R"("replicas": 3,)", R"("parallelism": 5, "completions": 2,)",
                                 Template("1")),
                   "]}}"),
      Kind::kJobSet);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("driver", "workers", "capped"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 8, 6));
  EXPECT_EQ(Formatted(w->pod_sets[1].requests), (Strings{{"cpu", "8"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(w->suspended);
  EXPECT_EQ(w->TotalPods(), 15);
}

TEST(JobSetTest, ErrorsNameTheReplicatedJob) {
  absl::StatusOr<Workload> dup = Extract(
      absl::StrCat(R"({"spec": {"replicatedJobs": [)", ReplicatedJob("w", "", "", Template("1")), ",",
                   ReplicatedJob("w", "", "", Template("1")), "]}}"),
      Kind::kJobSet);
  EXPECT_THAT(dup, StatusIs(absl::StatusCode::kInvalidArgument,
                            "spec.replicatedJobs[1].name: pod set name \"w\" is already used by "
                            "spec.replicatedJobs[0].name"));

  absl::StatusOr<Workload> too_many = Extract(
      absl::StrCat(R"({"spec": {"replicatedJobs": [)",
                   ReplicatedJob("w", R"("replicas": 1000000,)", R"("parallelism": 2,)", Template("1")), "]}}"),
      Kind::kJobSet);
  EXPECT_THAT(too_many, StatusIs(absl::StatusCode::kInvalidArgument,
                                 "spec.replicatedJobs[0]: replicas * job pods = 1000000 * 2 = 2000000 pods"));

  absl::StatusOr<Workload> bad = Extract(
      absl::StrCat(R"({"spec": {"replicatedJobs": [)",
                   ReplicatedJob("w", R"("replicas": -1,)", R"("parallelism": "2",)", Template("1")), "]}}"),
      Kind::kJobSet);
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "spec.replicatedJobs[0].replicas: must be an integer"));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "spec.replicatedJobs[0].template.spec.parallelism: must be an integer"));

  EXPECT_THAT(Extract(R"({"spec": {"replicatedJobs": []}})", Kind::kJobSet),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.replicatedJobs: a JobSet needs at least one"));
}

// ---------------------------------------------------------------- Ray

std::string WorkerGroup(const std::string& name, const std::string& fields, const std::string& pod_template) {
  return absl::StrCat(R"({"groupName": ")", name, R"(", )", fields, R"("template": )", pod_template, "}");
}

std::string RayClusterSpec(const std::string& extra, const std::vector<std::string>& groups) {
  std::string list;
  for (const std::string& g : groups) absl::StrAppend(&list, list.empty() ? "" : ",", g);
  return absl::StrCat(R"({)", extra, R"("headGroupSpec": {"rayStartParams": {}, "template": )", Template("2"),
                      R"(}, "workerGroupSpecs": [)", list, "]}");
}

TEST(RayTest, RayClusterHasHeadThenWorkerGroups) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": )",
                   RayClusterSpec("", {WorkerGroup("gpu", R"("replicas": 2,)", Template("8", 1)),
                                       WorkerGroup("from-min", R"("minReplicas": 3, "maxReplicas": 10,)", Template("1")),
                                       WorkerGroup("capped", R"("replicas": 10, "maxReplicas": 4,)", Template("1")),
                                       WorkerGroup("multi-host", R"("replicas": 3, "numOfHosts": 2,)", Template("1")),
                                       WorkerGroup("defaults", "", Template("1")),
                                       WorkerGroup("zero", R"("replicas": 0,)", Template("1"))}),
                   "}"),
      Kind::kRayCluster);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("head", "gpu", "from-min", "capped", "multi-host", "defaults", "zero"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 2, 3, 4, 6, 1, 0));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), (Strings{{"cpu", "2"}}));
  EXPECT_EQ(Formatted(w->pod_sets[1].requests), (Strings{{"cpu", "8"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_FALSE(w->suspended);
}

TEST(RayTest, InTreeAutoscalingAddsTheAutoscalerToTheHead) {
  absl::StatusOr<Workload> defaults = Extract(
      absl::StrCat(R"({"spec": )", RayClusterSpec(R"("enableInTreeAutoscaling": true,)", {}), "}"),
      Kind::kRayCluster);
  ASSERT_THAT(defaults, IsOk());
  EXPECT_EQ(Formatted(defaults->pod_sets[0].requests), (Strings{{"cpu", "2500m"}, {"memory", "512Mi"}}));
  EXPECT_EQ(Formatted(defaults->pod_sets[0].limits), (Strings{{"cpu", "500m"}, {"memory", "512Mi"}}));

  absl::StatusOr<Workload> custom = Extract(
      absl::StrCat(R"({"spec": )",
                   RayClusterSpec(R"("enableInTreeAutoscaling": true,
                                     "autoscalerOptions": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},)",
                                  {}),
                   "}"),
      Kind::kRayCluster);
  ASSERT_THAT(custom, IsOk());
  EXPECT_EQ(Formatted(custom->pod_sets[0].requests), (Strings{{"cpu", "3"}, {"memory", "1Gi"}}));

  absl::StatusOr<Workload> off = Extract(
      absl::StrCat(R"({"spec": )", RayClusterSpec(R"("enableInTreeAutoscaling": false,)", {}), "}"),
      Kind::kRayCluster);
  ASSERT_THAT(off, IsOk());
  EXPECT_EQ(Formatted(off->pod_sets[0].requests), (Strings{{"cpu", "2"}}));
}

TEST(RayTest, RayJobUsesItsClusterSpecAndSuspend) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"suspend": true,
        "entrypoint": "python train.py", "submissionMode": "K8sJobMode", "rayClusterSpec": )",
                   RayClusterSpec("", {WorkerGroup("workers", R"("replicas": 4,)", Template("4", 1))}), "}}"),
      Kind::kRayJob);
  ASSERT_THAT(w, IsOk());
  // The submitter pod is not a pod set (see kinds/ray.cc).
  EXPECT_THAT(PodSetNames(*w), ElementsAre("head", "workers"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 4));
  EXPECT_TRUE(w->suspended);
}

TEST(RayTest, Errors) {
  EXPECT_THAT(Extract(R"({"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}})", Kind::kRayJob),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.rayClusterSpec: required"));
  EXPECT_THAT(Extract(absl::StrCat(R"({"spec": )",
                                   RayClusterSpec("", {WorkerGroup("head", "", Template("1"))}), "}"),
                      Kind::kRayCluster),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "spec.workerGroupSpecs[0].groupName: pod set name \"head\" is already used"));
  absl::StatusOr<Workload> bad = Extract(
      absl::StrCat(R"({"spec": )",
                   RayClusterSpec("", {R"({"replicas": "4", "template": {"spec": {"containers": []}}})"}), "}"),
      Kind::kRayCluster);
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "spec.workerGroupSpecs[0].groupName: required"));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "spec.workerGroupSpecs[0].replicas: must be"));
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "spec.workerGroupSpecs[0].template.spec.containers: a pod needs at least one container"));
  EXPECT_THAT(Extract(R"({"spec": {"workerGroupSpecs": []}})", Kind::kRayCluster),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.headGroupSpec: required"));
}

TEST(RayTest, AtMostAThousandPodSets) {
  std::vector<std::string> groups;
  for (int i = 0; i < 1000; ++i) groups.push_back(WorkerGroup(absl::StrCat("g", i), "", Template("1")));
  absl::StatusOr<Workload> w = Extract(absl::StrCat(R"({"spec": )", RayClusterSpec("", groups), "}"),
                                       Kind::kRayCluster);
  EXPECT_THAT(w, StatusIs(absl::StatusCode::kInvalidArgument, "spec: has 1001 pod sets; at most 1000"));
  groups.pop_back();
  EXPECT_THAT(Extract(absl::StrCat(R"({"spec": )", RayClusterSpec("", groups), "}"), Kind::kRayCluster), IsOk());
}

// ---------------------------------------------------------------- Pod

std::string PodJson(const std::string& metadata, const std::string& spec_extra = "") {
  return absl::StrCat(R"({"apiVersion": "v1", "kind": "Pod", "metadata": )", metadata, R"(, "spec": )",
                      PodSpec("1", 1, spec_extra), "}");
}

TEST(PodTest, ASinglePodIsOnePodSetOfOne) {
  absl::StatusOr<Workload> w = Extract(PodJson(R"({"name": "p", "namespace": "ns"})"), Kind::kPod);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("main"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), (Strings{{"cpu", "1"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(w->api_version, "v1");
  EXPECT_FALSE(w->suspended);
  EXPECT_EQ(w->pod_group_name, "");
  EXPECT_EQ(w->pod_group_total_count, 0);
  EXPECT_FALSE(w->owned_by_managed_object);
}

TEST(PodTest, SuspendedMeansCarryingOurSchedulingGate) {
  absl::StatusOr<Workload> gated = Extract(
      PodJson("{}", R"("schedulingGates": [{"name": "example.com/other"}, {"name": "gangkeeper.io/admission"}],)"),
      Kind::kPod);
  ASSERT_THAT(gated, IsOk());
  EXPECT_TRUE(gated->suspended);
  absl::StatusOr<Workload> other =
      Extract(PodJson("{}", R"("schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],)"), Kind::kPod);
  ASSERT_THAT(other, IsOk());
  EXPECT_FALSE(other->suspended);
}

TEST(PodTest, PodGroupsRecordNameAndTotal) {
  absl::StatusOr<Workload> w = Extract(
      PodJson(R"({"name": "p-0", "labels": {"kueue.x-k8s.io/pod-group-name": "trainers",
                                              "kueue.x-k8s.io/queue-name": "q"},
                  "annotations": {"kueue.x-k8s.io/pod-group-total-count": "8"}})"),
      Kind::kPod);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->pod_group_name, "trainers");
  EXPECT_EQ(w->pod_group_total_count, 8);
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1));
  EXPECT_EQ(w->queue_name, "q");
}

TEST(PodTest, PodGroupErrors) {
  const std::string count_path = "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]";
  for (const char* bad : {"0", "-1", "abc", "+3", " 3", "1.5", "1000001", "99999999999999999999", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(Extract(PodJson(absl::StrCat(R"({"labels": {"kueue.x-k8s.io/pod-group-name": "g"},
                                                 "annotations": {"kueue.x-k8s.io/pod-group-total-count": ")",
                                             bad, R"("}})")),
                        Kind::kPod),
                StatusIs(absl::StatusCode::kInvalidArgument, count_path + ": must be a positive integer"));
  }
  EXPECT_THAT(Extract(PodJson(R"({"labels": {"kueue.x-k8s.io/pod-group-name": "g"}})"), Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument, count_path + ": required"));
  EXPECT_THAT(Extract(PodJson(R"({"annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}})"), Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.labels[kueue.x-k8s.io/pod-group-name]: required"));
  EXPECT_THAT(Extract(PodJson(R"({"annotations": {"kueue.x-k8s.io/pod-group-total-count": 2}})"), Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: must be a string"));
}

TEST(PodTest, OwnedByAManagedControllerOnly) {
  struct Case {
    const char* name;
    const char* refs;
    bool want;
  };
  const Case cases[] = {
      {"a Job controller", R"([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1", "controller": true}])",
       true},
      {"a JobSet's Job",
       R"([{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "controller": true}])", true},
      {"a PyTorchJob", R"([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "p", "controller": true}])",
       true},
      {"a RayCluster", R"([{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "r", "controller": true}])", true},
      {"not the controller", R"([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": false}])", false},
      {"no controller field", R"([{"apiVersion": "batch/v1", "kind": "Job", "name": "j"}])", false},
      {"a ReplicaSet", R"([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": true}])", false},
      {"a Volcano Job", R"([{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "controller": true}])", false},
      {"another Pod", R"([{"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": true}])", false},
      {"one managed among others",
       R"([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c"},
           {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": true}])",
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(PodJson(absl::StrCat(R"({"ownerReferences": )", c.refs, "}")), Kind::kPod);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->owned_by_managed_object, c.want);
  }
  EXPECT_THAT(Extract(PodJson(R"({"ownerReferences": [{"kind": "Job", "controller": "yes"}]})"), Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.ownerReferences[0].controller: must be true or false"));
}

// ---------------------------------------------------------------- issue #25's kinds

// The one document of test/fixtures/kinds/`file` (written after each
// project's documented example), as JSON.
std::string KindFixture(const std::string& file) {
  absl::StatusOr<std::vector<std::string>> docs =
      testing::YamlFileToJson(std::string(GK_SOURCE_DIR) + "/test/fixtures/kinds/" + file);
  if (!docs.ok() || docs->size() != 1) {
    ADD_FAILURE() << file << ": " << (docs.ok() ? "not one document" : docs.status().ToString());
    return "{}";
  }
  return (*docs)[0];
}

struct KindFixtureCase {
  const char* file;
  Kind kind;
  std::vector<std::string> names;
  std::vector<int64_t> counts;
  std::vector<std::map<std::string, std::string>> requests;  // per pod set, formatted
  std::vector<std::string> templates;
};

TEST(NewKindsTest, DocumentedExamplesGiveThePodSetsKueueReads) {
  const std::vector<KindFixtureCase> cases = {
      {"jaxjob.yaml", Kind::kJAXJob, {"worker"}, {2}, {{{"cpu", "1"}, {"memory", "512Mi"}}},
       {"/spec/jaxReplicaSpecs/Worker/template"}},
      // 2 groups of 3: a leader and 2 workers each.
      {"leaderworkerset.yaml", Kind::kLeaderWorkerSet, {"leader", "worker"}, {2, 4},
       {{{"cpu", "500m"}}, {{"cpu", "250m"}}},
       {"/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"}},
      {"statefulset.yaml", Kind::kStatefulSet, {"main"}, {3}, {{{"cpu", "100m"}}}, {"/spec/template"}},
      {"deployment.yaml", Kind::kDeployment, {"main"}, {3}, {{{"cpu", "100m"}}}, {"/spec/template"}},
      // Pod sets inferred as the AppWrapper controller infers them (Master,
      // then Worker), placed in the component's podSetInfos.
      {"appwrapper-pytorchjob.yaml", Kind::kAppWrapper, {"wrapped-pytorch-0", "wrapped-pytorch-1"}, {1, 2},
       {{{"cpu", "1"}}, {{"cpu", "2"}}},
       {"/spec/components/0/podSetInfos/0", "/spec/components/0/podSetInfos/1"}},
      // Declared by path; the Service component runs no pods.
      {"appwrapper-leaderworkerset.yaml", Kind::kAppWrapper, {"wrapped-lws-0", "wrapped-lws-1"}, {2, 4},
       {{{"cpu", "100m"}}, {{"cpu", "200m"}}},
       {"/spec/components/1/podSetInfos/0", "/spec/components/1/podSetInfos/1"}},
  };
  for (const KindFixtureCase& c : cases) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<Workload> w = Extract(KindFixture(c.file), c.kind);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->queue_name, "gpu-queue");
    EXPECT_EQ(w->namespace_name, "team-a");
    EXPECT_FALSE(w->suspended);
    EXPECT_THAT(PodSetNames(*w), ::testing::ElementsAreArray(c.names));
    EXPECT_THAT(PodSetCounts(*w), ::testing::ElementsAreArray(c.counts));
    ASSERT_EQ(w->pod_sets.size(), c.requests.size());
    for (size_t i = 0; i < w->pod_sets.size(); ++i) {
      EXPECT_EQ(Formatted(w->pod_sets[i].requests), c.requests[i]) << w->pod_sets[i].name;
      EXPECT_EQ(w->pod_sets[i].template_pointer, c.templates[i]) << w->pod_sets[i].name;
    }
  }
}

TEST(NewKindsTest, JAXJobHasWorkersOnly) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"spec": {"runPolicy": {"suspend": true}, "jaxReplicaSpecs": {"worker": {"replicas": 4, "template": )",
                   Template("2", 1), "}}}}"),
      Kind::kJAXJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("worker"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(4));
  EXPECT_TRUE(w->suspended);
  EXPECT_EQ(w->api_version, "kubeflow.org/v1");
  EXPECT_THAT(Extract(absl::StrCat(R"({"spec": {"jaxReplicaSpecs": {"Master": {"template": )", Template("1"), "}}}}"),
                      Kind::kJAXJob),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown replica type \"Master\"; a JAXJob has Worker"));
}

TEST(NewKindsTest, ReplicaKindsCountWhatTheyAskForWhileHeld) {
  for (Kind kind : {Kind::kStatefulSet, Kind::kDeployment}) {
    SCOPED_TRACE(InfoFor(kind).name);
    const std::string t = Template("1");
    // Held by the webhook: spec.replicas 0, the count kept.
    absl::StatusOr<Workload> held = Extract(
        absl::StrCat(R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "4"}}, "spec": {"replicas": 0, "template": )",
                     t, "}}"),
        kind);
    ASSERT_THAT(held, IsOk());
    EXPECT_TRUE(held->suspended);
    EXPECT_THAT(PodSetCounts(*held), ElementsAre(4));
    // Released: the count is spec.replicas again.
    absl::StatusOr<Workload> running = Extract(absl::StrCat(R"({"spec": {"replicas": 4, "template": )", t, "}}"), kind);
    ASSERT_THAT(running, IsOk());
    EXPECT_FALSE(running->suspended);
    EXPECT_THAT(PodSetCounts(*running), ElementsAre(4));
    // No replicas: Kubernetes' default, 1.
    absl::StatusOr<Workload> one = Extract(absl::StrCat(R"({"spec": {"template": )", t, "}}"), kind);
    ASSERT_THAT(one, IsOk());
    EXPECT_THAT(PodSetCounts(*one), ElementsAre(1));
    // Errors name the field.
    absl::StatusOr<Workload> negative = Extract(absl::StrCat(R"({"spec": {"replicas": -1, "template": )", t, "}}"), kind);
    EXPECT_THAT(negative, StatusIs(absl::StatusCode::kInvalidArgument, "spec.replicas"));
    const std::string message(negative.status().message());
    EXPECT_EQ(message.find("spec.replicas"), message.rfind("spec.replicas")) << "reported once: " << message;
    EXPECT_THAT(
        Extract(absl::StrCat(R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "many"}}, "spec": {"replicas": 0, "template": )",
                             t, "}}"),
                kind),
        StatusIs(absl::StatusCode::kInvalidArgument, "metadata.annotations[gangkeeper.io/held-replicas]: \"many\" is not a replica count"));
    EXPECT_THAT(Extract(R"({"spec": {"replicas": 2}})", kind),
                StatusIs(absl::StatusCode::kInvalidArgument, "spec.template"));
  }
}

TEST(NewKindsTest, LeaderWorkerSetWithoutALeaderTemplateIsOneMainPodSet) {
  absl::StatusOr<Workload> w = Extract(
      absl::StrCat(R"({"spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": )", Template("1", 1),
                   "}}}"),
      Kind::kLeaderWorkerSet);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("main"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(12));
  EXPECT_EQ(w->pod_sets[0].template_pointer, "/spec/leaderWorkerTemplate/workerTemplate");
  // Defaults: 1 group of 1.
  absl::StatusOr<Workload> one =
      Extract(absl::StrCat(R"({"spec": {"leaderWorkerTemplate": {"workerTemplate": )", Template("1"), "}}}"),
              Kind::kLeaderWorkerSet);
  ASSERT_THAT(one, IsOk());
  EXPECT_THAT(PodSetCounts(*one), ElementsAre(1));
  // Held: the groups asked for are kept in the annotation.
  absl::StatusOr<Workload> held = Extract(
      absl::StrCat(R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "2"}}, "spec": {"replicas": 0, )"
                   R"("leaderWorkerTemplate": {"size": 3, "leaderTemplate": )",
                   Template("1"), R"(, "workerTemplate": )", Template("1"), "}}}"),
      Kind::kLeaderWorkerSet);
  ASSERT_THAT(held, IsOk());
  EXPECT_TRUE(held->suspended);
  EXPECT_THAT(PodSetCounts(*held), ElementsAre(2, 4));
  EXPECT_THAT(Extract(R"({"spec": {"leaderWorkerTemplate": {"size": 0}}})", Kind::kLeaderWorkerSet),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.leaderWorkerTemplate.size"));
  EXPECT_THAT(Extract(R"({"spec": {"replicas": 1}})", Kind::kLeaderWorkerSet),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.leaderWorkerTemplate"));
}

// A LeaderWorkerSet's StatefulSets, a StatefulSet's pods and a Deployment's
// pods (controlled by its ReplicaSet, with the pod-template-hash label)
// belong to their owner's gang.
TEST(NewKindsTest, ObjectsOfAManagedOwnerAreNotWorkloadsOfTheirOwn) {
  const std::string lws_owned = absl::StrCat(
      R"({"metadata": {"ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", )"
      R"("name": "l", "controller": true}]}, "spec": {"replicas": 1, "template": )",
      Template("1"), "}}");
  absl::StatusOr<Workload> sts = Extract(lws_owned, Kind::kStatefulSet);
  ASSERT_THAT(sts, IsOk());
  EXPECT_TRUE(sts->owned_by_managed_object);
  absl::StatusOr<Workload> plain = Extract(absl::StrCat(R"({"spec": {"template": )", Template("1"), "}}"), Kind::kStatefulSet);
  ASSERT_THAT(plain, IsOk());
  EXPECT_FALSE(plain->owned_by_managed_object);

  auto pod = [](const std::string& labels, const std::string& owner_kind, const std::string& api_version) {
    return absl::StrCat(R"({"metadata": {"labels": )", labels, R"(, "ownerReferences": [{"apiVersion": ")", api_version,
                        R"(", "kind": ")", owner_kind, R"(", "name": "o", "controller": true}]}, "spec": )",
                        PodSpec("1"), "}");
  };
  struct Case {
    const char* name;
    std::string object;
    bool owned;
  };
  const std::vector<Case> cases = {
      {"a StatefulSet's pod", pod(R"({"app": "web"})", "StatefulSet", "apps/v1"), true},
      {"a Deployment's pod (ReplicaSet, pod-template-hash)",
       pod(R"({"app": "web", "pod-template-hash": "5d4f8"})", "ReplicaSet", "apps/v1"), true},
      {"a bare ReplicaSet's pod", pod(R"({"app": "web"})", "ReplicaSet", "apps/v1"), false},
      {"a DaemonSet's pod", pod(R"({"pod-template-hash": "x"})", "DaemonSet", "apps/v1"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(c.object, Kind::kPod);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->owned_by_managed_object, c.owned);
  }
}

// ---------------------------------------------------------------- AppWrapper

// An AppWrapper of one component `component` (a JSON object).
std::string AppWrapper(const std::string& component, const std::string& extra_spec = "") {
  return absl::StrCat(R"({"metadata": {"name": "aw"}, "spec": {)", extra_spec, R"("components": [)", component,
                      "]}}");
}

TEST(AppWrapperTest, DeclaredPathsAreFollowedThroughFieldsAndListIndices) {
  const std::string jobset = absl::StrCat(
      R"({"podSets": [{"path": "template.spec.replicatedJobs[1].template.spec.template", "replicas": 6},)"
      R"( {"path": "template.spec.replicatedJobs[0].template.spec.template"}],)"
      R"( "template": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [)"
      R"({"name": "driver", "template": {"spec": {"template": )",
      Template("1"), R"(}}}, {"name": "workers", "replicas": 3, "template": {"spec": {"parallelism": 2, "template": )",
      Template("4", 2), "}}}]}}}");
  absl::StatusOr<Workload> w = Extract(AppWrapper(jobset, R"("suspend": true, )"), Kind::kAppWrapper);
  ASSERT_THAT(w, IsOk());
  EXPECT_TRUE(w->suspended);
  EXPECT_THAT(PodSetNames(*w), ElementsAre("aw-0", "aw-1"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(6, 1)) << "replicas as declared, 1 when not";
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), (Strings{{"cpu", "4"}, {"nvidia.com/gpu", "2"}}));
  EXPECT_EQ(Formatted(w->pod_sets[1].requests), (Strings{{"cpu", "1"}}));
  EXPECT_EQ(w->pod_sets[0].template_pointer, "/spec/components/0/podSetInfos/0");
  EXPECT_EQ(w->pod_sets[1].template_pointer, "/spec/components/0/podSetInfos/1");
  EXPECT_EQ(PlacementPointer(Kind::kAppWrapper, w->pod_sets[1]), "/spec/components/0/podSetInfos/1")
      << "placement goes beside the template, not into it";
}

// A create with generateName is reviewed by /mutate before the API server
// names it: the pod sets take the generateName prefix meanwhile.
TEST(AppWrapperTest, AnUnnamedAppWrappersPodSetsTakeItsGenerateName) {
  const std::string job = absl::StrCat(
      R"({"podSets": [{"path": "template.spec.template"}], "template": {"apiVersion": "batch/v1", "kind": "Job",)"
      R"( "spec": {"template": )",
      Template("1"), "}}}");
  auto unnamed = [&](const std::string& metadata) {
    return absl::StrCat(R"({"metadata": )", metadata, R"(, "spec": {"components": [)", job, "]}}");
  };
  absl::StatusOr<Workload> generated = Extract(unnamed(R"({"generateName": "train-"})"), Kind::kAppWrapper);
  ASSERT_THAT(generated, IsOk());
  EXPECT_THAT(PodSetNames(*generated), ElementsAre("train-0"));
  absl::StatusOr<Workload> nameless = Extract(unnamed("{}"), Kind::kAppWrapper);
  ASSERT_THAT(nameless, IsOk());
  EXPECT_THAT(PodSetNames(*nameless), ElementsAre("appwrapper-0"));
}

TEST(AppWrapperTest, PodSetsAreInferredForTheKindsTheAppWrapperControllerKnows) {
  struct Case {
    const char* name;
    std::string component;
    std::vector<int64_t> counts;
  };
  const std::string t = Template("1");
  const std::vector<Case> cases = {
      {"a Job: parallelism capped by completions",
       absl::StrCat(R"({"template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 5, "completions": 3, "template": )",
                    t, "}}}"),
       {3}},
      {"a Job without parallelism: 1",
       absl::StrCat(R"({"template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": )", t, "}}}"), {1}},
      {"a PyTorchJob: Master then Worker",
       absl::StrCat(R"({"template": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": )"
                    R"({"Worker": {"replicas": 4, "template": )",
                    t, R"(}, "Master": {"template": )", t, "}}}}}"),
       {1, 4}},
      {"a JobSet: replicas × pods per Job",
       absl::StrCat(R"({"template": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": [)"
                    R"({"replicas": 2, "template": {"spec": {"parallelism": 3, "template": )",
                    t, "}}}]}}}"),
       {6}},
      {"a RayCluster: the head, then each worker group",
       absl::StrCat(R"({"template": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {"headGroupSpec": {"template": )", t,
                    R"(}, "workerGroupSpecs": [{"replicas": 3, "template": )", t, "}]}}}"),
       {1, 3}},
      {"a Deployment: its replicas",
       absl::StrCat(R"({"template": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 2, "template": )", t,
                    "}}}"),
       {2}},
      {"a Pod: itself", absl::StrCat(R"({"template": {"apiVersion": "v1", "kind": "Pod", "spec": )", PodSpec("1"), "}}"), {1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(AppWrapper(c.component), Kind::kAppWrapper);
    ASSERT_THAT(w, IsOk());
    EXPECT_THAT(PodSetCounts(*w), ::testing::ElementsAreArray(c.counts));
  }
  // A component of another kind runs no pods: with nothing else, the
  // AppWrapper has no pod sets (ExtractWorkload's error).
  absl::StatusOr<Workload> none = Extract(
      AppWrapper(R"({"template": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}})"), Kind::kAppWrapper);
  EXPECT_FALSE(none.ok());
}

TEST(AppWrapperTest, BadPodSetsNameTheFieldAndThePosition) {
  const std::string job =
      absl::StrCat(R"("template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": )", Template("1"), "}}");
  struct Case {
    const char* name;
    std::string component;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"a path not starting at the template", absl::StrCat(R"({"podSets": [{"path": "spec.template"}], )", job, "}"),
       R"(spec.components[0].podSets[0].path: "spec.template": at "" the first element must be "template")"},
      {"a missing field", absl::StrCat(R"({"podSets": [{"path": "template.spec.tmpl"}], )", job, "}"),
       R"(at "template.spec" there is no field "tmpl")"},
      {"an index into an object", absl::StrCat(R"({"podSets": [{"path": "template.spec[0]"}], )", job, "}"),
       R"(at "template.spec" the value is not a list)"},
      {"a path to something that is not a pod template",
       absl::StrCat(R"({"podSets": [{"path": "template.spec.template.spec"}], )", job, "}"),
       "spec.components[0].template.spec.template.spec.spec"},
      {"a duplicate path",
       absl::StrCat(R"({"podSets": [{"path": "template.spec.template"}, {"path": "template.spec.template"}], )", job, "}"),
       "spec.components[0].podSets[1].path"},
      {"a negative count", absl::StrCat(R"({"podSets": [{"path": "template.spec.template", "replicas": -2}], )", job, "}"),
       "spec.components[0].podSets[0].replicas"},
      {"no template", R"({"podSets": [{"path": "template"}]})", "spec.components[0].template"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(Extract(AppWrapper(c.component), Kind::kAppWrapper),
                StatusIs(absl::StatusCode::kInvalidArgument, c.want));
  }
  EXPECT_THAT(Extract(R"({"spec": {}})", Kind::kAppWrapper),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.components"));
}

// The objects its controller creates for the components are the
// AppWrapper's: not workloads of their own, whatever their kind.
TEST(AppWrapperTest, ComponentsAreNotWorkloadsOfTheirOwn) {
  const std::string owner =
      R"("ownerReferences": [{"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw", "controller": true}])";
  absl::StatusOr<Workload> job =
      Extract(absl::StrCat(R"({"metadata": {)", owner, R"(}, "spec": {"template": )", Template("1"), "}}"), Kind::kJob);
  ASSERT_THAT(job, IsOk());
  EXPECT_TRUE(job->owned_by_managed_object);
  absl::StatusOr<Workload> pytorch = Extract(
      absl::StrCat(R"({"metadata": {)", owner, R"(}, "spec": {"pytorchReplicaSpecs": {"Master": {"template": )",
                   Template("1"), "}}}}"),
      Kind::kPyTorchJob);
  ASSERT_THAT(pytorch, IsOk());
  EXPECT_TRUE(pytorch->owned_by_managed_object);
  absl::StatusOr<Workload> not_controller = Extract(
      absl::StrCat(R"({"metadata": {"ownerReferences": [{"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper", "name": "aw"}]}, "spec": {"template": )",
                   Template("1"), "}}"),
      Kind::kJob);
  ASSERT_THAT(not_controller, IsOk());
  EXPECT_FALSE(not_controller->owned_by_managed_object);
}

// ---------------------------------------------------------------- TrainJob

// A TrainJob's pod sets are its runtime's, found through
// ExtractOptions::training_runtime (a namespaced TrainingRuntime in the
// TrainJob's namespace).
TEST(TrainJobKindTest, PodSetsComeFromTheRuntimeTheLookupFinds) {
  const std::string runtime = absl::StrCat(
      R"({"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"metadata": )"
      R"({"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}, "spec": {"template": )",
      Template("1"), "}}}]}}}}");
  std::vector<std::pair<TrainingRuntimeRef, std::string>> asked;
  ExtractOptions options;
  options.training_runtime = [&](const TrainingRuntimeRef& ref, absl::string_view ns) -> std::optional<std::string> {
    asked.emplace_back(ref, std::string(ns));
    return runtime;
  };
  absl::StatusOr<Workload> w = Extract(
      R"({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
          "metadata": {"name": "tj", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
          "spec": {"suspend": true, "runtimeRef": {"name": "torch", "kind": "TrainingRuntime"},
                   "trainer": {"numNodes": 4, "resourcesPerNode": {"requests": {"nvidia.com/gpu": "2"},
                                                                   "limits": {"nvidia.com/gpu": "2"}}}}})",
      Kind::kTrainJob, {}, options);
  ASSERT_THAT(w, IsOk());
  ASSERT_EQ(w->pod_sets.size(), 1u);
  EXPECT_EQ(w->pod_sets[0].name, "node");
  EXPECT_EQ(w->pod_sets[0].count, 4);
  EXPECT_EQ(w->pod_sets[0].requests.at("nvidia.com/gpu"), Q("2"));
  EXPECT_TRUE(w->suspended);
  EXPECT_EQ(w->queue_name, "q");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].first.kind, "TrainingRuntime");
  EXPECT_EQ(asked[0].first.name, "torch");
  EXPECT_EQ(asked[0].second, "team-a");
}

// A runtime not known (yet) is not a malformed object: Unavailable, naming
// the runtime; without any lookup the same. A bad runtimeRef is an error.
TEST(TrainJobKindTest, AnUnknownRuntimeIsNamedAndNotAnError) {
  const std::string tj = R"({"metadata": {"name": "tj", "namespace": "team-a"},
                             "spec": {"runtimeRef": {"name": "torch-distributed"}}})";
  ExtractOptions none;
  none.training_runtime = [](const TrainingRuntimeRef&, absl::string_view) { return std::optional<std::string>(); };
  for (const ExtractOptions& options : {ExtractOptions{}, none}) {
    absl::StatusOr<Workload> w = Extract(tj, Kind::kTrainJob, {}, options);
    EXPECT_TRUE(IsRuntimeUnknown(w.status())) << w.status();
    EXPECT_THAT(w.status().message(), HasSubstr("ClusterTrainingRuntime \"torch-distributed\""));
  }
  absl::StatusOr<Workload> bad = Extract(R"({"metadata": {"name": "tj"}, "spec": {}})", Kind::kTrainJob);
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument, "spec.runtimeRef"));
  EXPECT_FALSE(IsRuntimeUnknown(bad.status()));
}

}  // namespace
}  // namespace gangkeeper::workload
