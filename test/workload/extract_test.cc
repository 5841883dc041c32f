// gangkeeper: tests for ExtractWorkload's common parts: metadata, priority,
// queue, and malformed input.
#include "gangkeeper/workload/extract.h"

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
using ::testing::Not;

constexpr char kPolicies[] = R"(
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: training-batch
value: 10000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: inference-critical
value: 100000
preemptionPolicy: PreemptLowerPriority
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: inference-critical
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: training-batch
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  name: default
  namespace: team-a
spec:
  clusterQueue: team-a-gpu
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  name: gpu-queue
  namespace: team-b
spec:
  clusterQueue: team-b-gpu
)";

constexpr char kGlobalDefaults[] = R"(
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: zz-default-high
value: 500
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: default-low
value: 50
globalDefault: true
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: lower-but-not-default
value: 1
)";

// A Job in namespace `ns` with `labels` (JSON object members) and a pod
// template naming `pod_class` (none when empty).
std::string JobJson(const std::string& ns, const std::string& labels, const std::string& pod_class = "") {
  const std::string pc = pod_class.empty() ? "" : absl::StrCat(R"("priorityClassName": ")", pod_class, R"(",)");
  return absl::StrCat(R"({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": ")", ns,
                      R"(", "labels": {)", labels, R"(}}, "spec": {"template": {"spec": {)", pc,
                      R"("containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}})");
}

// ---------------------------------------------------------------- metadata

TEST(ExtractTest, CopiesMetadata) {
  absl::StatusOr<Workload> w = Extract(R"({
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"generateName": "sample-job-", "namespace": "team-a", "uid": "6f1d-42",
                 "labels": {"kueue.x-k8s.io/queue-name": "gpu-queue", "app": "x"},
                 "annotations": {"note": "hello", "kueue.x-k8s.io/job-min-parallelism": "1",
                                 "gangkeeper.io/full-parallelism": "2",
                                 "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})",
                                       Kind::kJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->kind, Kind::kJob);
  EXPECT_EQ(w->name, "");
  EXPECT_EQ(w->namespace_name, "team-a");
  EXPECT_EQ(w->uid, "6f1d-42");
  EXPECT_EQ(w->labels, (std::map<std::string, std::string>{{"app", "x"}, {"kueue.x-k8s.io/queue-name", "gpu-queue"}}));
  // Only Kueue's and gangkeeper's annotations are kept: nothing else is read.
  EXPECT_EQ(w->annotations, (std::map<std::string, std::string>{{"gangkeeper.io/full-parallelism", "2"},
                                                                {"kueue.x-k8s.io/job-min-parallelism", "1"}}));
  EXPECT_EQ(w->queue_name, "gpu-queue");
  EXPECT_FALSE(w->suspended);
  EXPECT_TRUE(w->pod_sets[0].requests.empty());
}

// An annotation that is not kept is still checked: a value that is not a
// string is an error naming it.
TEST(ExtractTest, AnAnnotationNotKeptMustStillBeAString) {
  EXPECT_THAT(Extract(R"({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"annotations": {"note": 3}},
    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})",
                      Kind::kJob),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.annotations[note]: must be a string"));
}

// generateName is not kept either, and a value that is not a string is
// still an error naming it.
TEST(ExtractTest, AGenerateNameNotKeptMustStillBeAString) {
  EXPECT_THAT(Extract(R"({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": 7},
    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})",
                      Kind::kJob),
              StatusIs(absl::StatusCode::kInvalidArgument, "metadata.generateName"));
}

TEST(ExtractTest, TypeMetaMustMatchTheKind) {
  EXPECT_THAT(Extract(R"({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {}})", Kind::kJob),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "apiVersion: \"batch.volcano.sh/v1alpha1\" is not a version of Job (batch/v1)"));
  EXPECT_THAT(Extract(JobJson("ns", "").replace(JobJson("ns", "").find("\"Job\""), 5, "\"CronJob\""), Kind::kJob),
              StatusIs(absl::StatusCode::kInvalidArgument, "kind: expected Job, got \"CronJob\""));
  EXPECT_THAT(Extract(R"({"apiVersion": "apps/v1", "kind": "Pod", "spec": {"containers": [{}]}})", Kind::kPod),
              StatusIs(absl::StatusCode::kInvalidArgument, "apiVersion"));
}

// ---------------------------------------------------------------- priority

TEST(PriorityTest, WorkloadPriorityClassLabelWins) {
  const model::PolicySet policies = Policies(kPolicies);
  absl::StatusOr<Workload> w =
      Extract(JobJson("team-a", R"("kueue.x-k8s.io/priority-class": "inference-critical")", "training-batch"),
              Kind::kJob, policies);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->priority, 1000);
  EXPECT_EQ(w->priority_class, "inference-critical");
  EXPECT_EQ(w->priority_class_source, "WorkloadPriorityClass");
  // The pods still run as training-batch, which never preempts.
  EXPECT_EQ(w->preemption_policy, model::PreemptionPolicy::kNever);
  EXPECT_EQ(w->pod_priority_class, "training-batch");
}

TEST(PriorityTest, PodPriorityClassGivesValueAndPreemptionPolicy) {
  const model::PolicySet policies = Policies(kPolicies);
  absl::StatusOr<Workload> batch = Extract(JobJson("team-a", "", "training-batch"), Kind::kJob, policies);
  ASSERT_THAT(batch, IsOk());
  EXPECT_EQ(batch->priority, 10000);
  EXPECT_EQ(batch->priority_class, "training-batch");
  EXPECT_EQ(batch->priority_class_source, "PriorityClass");
  EXPECT_EQ(batch->preemption_policy, model::PreemptionPolicy::kNever);

  absl::StatusOr<Workload> critical = Extract(JobJson("team-a", "", "inference-critical"), Kind::kJob, policies);
  ASSERT_THAT(critical, IsOk());
  EXPECT_EQ(critical->priority, 100000);
  EXPECT_EQ(critical->preemption_policy, model::PreemptionPolicy::kPreemptLowerPriority);

  absl::StatusOr<Workload> system = Extract(JobJson("team-a", "", "system-cluster-critical"), Kind::kJob, policies);
  ASSERT_THAT(system, IsOk());
  EXPECT_EQ(system->priority, 2000000000);
  EXPECT_EQ(system->priority_class_source, "PriorityClass");
}

TEST(PriorityTest, GlobalDefaultIsTheLowestDefault) {
  const model::PolicySet policies = Policies(kGlobalDefaults);
  absl::StatusOr<Workload> w = Extract(JobJson("ns", ""), Kind::kJob, policies);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->priority, 50);
  EXPECT_EQ(w->priority_class, "default-low");
  EXPECT_EQ(w->priority_class_source, "globalDefault");
  EXPECT_EQ(w->preemption_policy, model::PreemptionPolicy::kNever);
  EXPECT_EQ(w->pod_priority_class, "");

  // A named class beats the default.
  absl::StatusOr<Workload> named = Extract(JobJson("ns", "", "zz-default-high"), Kind::kJob, policies);
  ASSERT_THAT(named, IsOk());
  EXPECT_EQ(named->priority, 500);
  EXPECT_EQ(named->priority_class_source, "PriorityClass");
  EXPECT_EQ(named->preemption_policy, model::PreemptionPolicy::kPreemptLowerPriority);
}

TEST(PriorityTest, NothingMeansZero) {
  absl::StatusOr<Workload> w = Extract(JobJson("ns", ""), Kind::kJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->priority, 0);
  EXPECT_EQ(w->priority_class, "");
  EXPECT_EQ(w->priority_class_source, "");
  EXPECT_EQ(w->preemption_policy, model::PreemptionPolicy::kPreemptLowerPriority);
}

TEST(PriorityTest, UnknownClassesAreErrorsListingTheDefinedOnes) {
  const model::PolicySet policies = Policies(kPolicies);
  absl::StatusOr<Workload> wpc =
      Extract(JobJson("team-a", R"("kueue.x-k8s.io/priority-class": "urgent")"), Kind::kJob, policies);
  EXPECT_THAT(wpc, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(wpc.status().message(),
            "metadata.labels[kueue.x-k8s.io/priority-class]: WorkloadPriorityClass \"urgent\" does not exist "
            "(defined: inference-critical, training-batch)");

  absl::StatusOr<Workload> pc = Extract(JobJson("team-a", "", "gold"), Kind::kJob, policies);
  EXPECT_EQ(pc.status().message(),
            "spec.template.spec.priorityClassName: PriorityClass \"gold\" does not exist (defined: "
            "inference-critical, training-batch)");

  absl::StatusOr<Workload> none = Extract(JobJson("team-a", R"("kueue.x-k8s.io/priority-class": "x")"), Kind::kJob);
  EXPECT_THAT(none, StatusIs(absl::StatusCode::kInvalidArgument, "does not exist (defined: none)"));
}

TEST(PriorityTest, KubeflowSchedulingPolicyThenReplicaOrder) {
  const model::PolicySet policies = Policies(kPolicies);
  const std::string worker = R"({"template": {"spec": {"priorityClassName": "inference-critical", "containers": [{}]}}})";
  const std::string master = R"({"template": {"spec": {"priorityClassName": "training-batch", "containers": [{}]}}})";
  // Worker comes first in the document, but Master first in replica order.
  absl::StatusOr<Workload> by_template = Extract(
      absl::StrCat(R"({"spec": {"pytorchReplicaSpecs": {"Worker": )", worker, R"(, "Master": )", master, "}}}"),
      Kind::kPyTorchJob, policies);
  ASSERT_THAT(by_template, IsOk());
  EXPECT_EQ(by_template->pod_priority_class, "training-batch");
  EXPECT_EQ(by_template->priority, 10000);

  absl::StatusOr<Workload> by_policy =
      Extract(absl::StrCat(R"({"spec": {"runPolicy": {"schedulingPolicy": {"priorityClass": "inference-critical"}},
                                        "pytorchReplicaSpecs": {"Master": )",
                           master, "}}}"),
              Kind::kPyTorchJob, policies);
  ASSERT_THAT(by_policy, IsOk());
  EXPECT_EQ(by_policy->pod_priority_class, "inference-critical");
  EXPECT_EQ(by_policy->priority, 100000);

  absl::StatusOr<Workload> unknown =
      Extract(absl::StrCat(R"({"spec": {"runPolicy": {"schedulingPolicy": {"priorityClass": "nope"}},
                                        "pytorchReplicaSpecs": {"Master": )",
                           master, "}}}"),
              Kind::kPyTorchJob, policies);
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kInvalidArgument,
                                "spec.runPolicy.schedulingPolicy.priorityClass: PriorityClass \"nope\" does not exist"));
}

TEST(PriorityTest, JobSetUsesTheFirstTemplateThatNamesAClass) {
  const model::PolicySet policies = Policies(kPolicies);
  absl::StatusOr<Workload> w = Extract(R"({"spec": {"replicatedJobs": [
      {"name": "a", "template": {"spec": {"template": {"spec": {"containers": [{}]}}}}},
      {"name": "b", "template": {"spec": {"template": {"spec": {"priorityClassName": "unknown-one", "containers": [{}]}}}}}
    ]}})",
                                       Kind::kJobSet, policies);
  EXPECT_THAT(w, StatusIs(absl::StatusCode::kInvalidArgument,
                          "spec.replicatedJobs[1].template.spec.template.spec.priorityClassName: PriorityClass "
                          "\"unknown-one\" does not exist"));
}

// ---------------------------------------------------------------- queue

TEST(QueueTest, LabelOrDefaultLocalQueue) {
  const model::PolicySet policies = Policies(kPolicies);
  const ExtractOptions manage{.manage_jobs_without_queue_name = true};
  struct Case {
    const char* name;
    std::string json;
    ExtractOptions options;
    const char* want;
  };
  const Case cases[] = {
      {"the label names the queue", JobJson("team-b", R"("kueue.x-k8s.io/queue-name": "gpu-queue")"), {}, "gpu-queue"},
      {"the label wins over defaulting", JobJson("team-a", R"("kueue.x-k8s.io/queue-name": "other")"), manage,
       "other"},
      {"defaulted to the namespace's default LocalQueue", JobJson("team-a", ""), manage, "default"},
      {"an empty label is no label", JobJson("team-a", R"("kueue.x-k8s.io/queue-name": "")"), manage, "default"},
      {"no default LocalQueue in the namespace", JobJson("team-b", ""), manage, ""},
      {"not defaulted without the option", JobJson("team-a", ""), {}, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(c.json, Kind::kJob, policies, c.options);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->queue_name, c.want);
  }
}

// ---------------------------------------------------------------- malformed

struct Malformed {
  const char* name;
  Kind kind;
  std::string json;
  std::string want;  // a substring of the message: usually "path: detail"
};

std::string JobWithPodSpec(const std::string& pod_spec) {
  return absl::StrCat(R"({"spec": {"template": {"spec": )", pod_spec, "}}}");
}

TEST(MalformedTest, InvalidArgumentWithThePath) {
  std::string many_containers;
  for (int i = 0; i <= 1000; ++i) absl::StrAppend(&many_containers, i == 0 ? "" : ",", "{}");
  const std::vector<Malformed> cases = {
      {"the object is a list", Kind::kJob, "[]", "a Job must be a JSON object, got list"},
      {"the object is a string", Kind::kPod, R"("pod")", "a Pod must be a JSON object, got string"},
      {"metadata is a string", Kind::kJob, R"({"metadata": "x", "spec": {}})", "metadata: must be an object, got string"},
      {"labels is a list", Kind::kJob, R"({"metadata": {"labels": []}})", "metadata.labels: must be an object"},
      {"a label value is a number", Kind::kJob, R"({"metadata": {"labels": {"a": 1}}})",
       "metadata.labels[a]: must be a string, got number"},
      {"name is a number", Kind::kJob, R"({"metadata": {"name": 5}})", "metadata.name: must be a string"},
      {"no spec", Kind::kJob, R"({"metadata": {}})", "spec: required"},
      {"spec is a list", Kind::kJob, R"({"spec": []})", "spec: must be an object, got list"},
      {"parallelism is a string", Kind::kJob, R"({"spec": {"parallelism": "2"}})",
       "spec.parallelism: must be an integer from 0 to 1000000, got string \"2\""},
      {"parallelism is negative", Kind::kJob, R"({"spec": {"parallelism": -1}})",
       "spec.parallelism: must be an integer from 0 to 1000000, got -1"},
      {"parallelism is fractional", Kind::kJob, R"({"spec": {"parallelism": 2.5}})", "spec.parallelism: must be"},
      {"parallelism is huge", Kind::kJob, R"({"spec": {"parallelism": 1e300}})",
       "spec.parallelism: must be an integer from 0 to 1000000, got 1e+300"},
      {"parallelism beyond int64", Kind::kJob, R"({"spec": {"parallelism": 18446744073709551615}})",
       "spec.parallelism: must be"},
      {"completions above the limit", Kind::kJob, R"({"spec": {"completions": 1000001}})", "spec.completions: must be"},
      {"suspend is a string", Kind::kJob, R"({"spec": {"suspend": "yes", "template": {"spec": {"containers": [{}]}}}})",
       "spec.suspend: must be true or false, got string"},
      {"no template", Kind::kJob, R"({"spec": {}})", "spec.template: required"},
      {"template without spec", Kind::kJob, R"({"spec": {"template": {}}})", "spec.template.spec: required"},
      {"containers is not a list", Kind::kJob, JobWithPodSpec(R"({"containers": {"name": "c"}})"),
       "spec.template.spec.containers: must be a list, got object"},
      {"containers is missing", Kind::kJob, JobWithPodSpec("{}"), "spec.template.spec.containers: required"},
      {"containers is empty", Kind::kJob, JobWithPodSpec(R"({"containers": []})"),
       "spec.template.spec.containers: a pod needs at least one container"},
      {"a container is a string", Kind::kJob, JobWithPodSpec(R"({"containers": ["c"]})"),
       "spec.template.spec.containers[0]: must be an object, got string"},
      {"resources is a list", Kind::kJob, JobWithPodSpec(R"({"containers": [{"resources": []}]})"),
       "spec.template.spec.containers[0].resources: must be an object, got list"},
      {"requests is a string", Kind::kJob, JobWithPodSpec(R"({"containers": [{"resources": {"requests": "4"}}]})"),
       "spec.template.spec.containers[0].resources.requests: must be an object"},
      {"a request is not a quantity", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{"name": "c"}, {"resources": {"requests": {"nvidia.com/gpu": "four"}}}]})"),
       "spec.template.spec.containers[1].resources.requests[nvidia.com/gpu]: \"four\" is not a quantity"},
      {"a limit is negative", Kind::kJob, JobWithPodSpec(R"({"containers": [{"resources": {"limits": {"cpu": -1}}}]})"),
       "spec.template.spec.containers[0].resources.limits[cpu]: \"-1\" must not be negative"},
      {"a request is a bool", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{"resources": {"requests": {"cpu": true}}}]})"),
       "spec.template.spec.containers[0].resources.requests[cpu]: must be a quantity"},
      {"a request is out of range", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{"resources": {"requests": {"memory": "100E"}}}]})"),
       "spec.template.spec.containers[0].resources.requests[memory]: \"100E\" is out of range"},
      {"requests add up past the range", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{"resources": {"requests": {"memory": "8E"}}},
                                         {"resources": {"requests": {"memory": "8E"}}}]})"),
       "spec.template.spec: the pod's total memory does not fit in a quantity"},
      {"an init container restartPolicy other than Always", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{}], "initContainers": [{"restartPolicy": "OnFailure"}]})"),
       "spec.template.spec.initContainers[0].restartPolicy: an init container's restartPolicy may only be Always"},
      {"initContainers is an object", Kind::kJob, JobWithPodSpec(R"({"containers": [{}], "initContainers": {}})"),
       "spec.template.spec.initContainers: must be a list"},
      {"overhead is not quantities", Kind::kJob, JobWithPodSpec(R"({"containers": [{}], "overhead": {"cpu": "x"}})"),
       "spec.template.spec.overhead[cpu]: \"x\" is not a quantity"},
      {"tolerations is an object", Kind::kJob, JobWithPodSpec(R"({"containers": [{}], "tolerations": {}})"),
       "spec.template.spec.tolerations: must be a list"},
      {"a toleration operator is unknown", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{}], "tolerations": [{"key": "a"}, {"operator": "Maybe"}]})"),
       "spec.template.spec.tolerations[1].operator: must be Equal or Exists"},
      {"tolerationSeconds is a string", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{}], "tolerations": [{"tolerationSeconds": "30"}]})"),
       "spec.template.spec.tolerations[0].tolerationSeconds: must be an integer"},
      {"a nodeSelector value is a number", Kind::kJob,
       JobWithPodSpec(R"({"containers": [{}], "nodeSelector": {"gpu": 1}})"),
       "spec.template.spec.nodeSelector[gpu]: must be a string"},
      {"volumes is a string", Kind::kJob, JobWithPodSpec(R"({"containers": [{}], "volumes": "pvc"})"),
       "spec.template.spec.volumes: must be a list"},
      {"priorityClassName is a number", Kind::kJob, JobWithPodSpec(R"({"containers": [{}], "priorityClassName": 7})"),
       "spec.template.spec.priorityClassName: must be a string"},
      {"too many containers", Kind::kJob, JobWithPodSpec(absl::StrCat(R"({"containers": [)", many_containers, "]}")),
       "spec.template.spec.containers: has 1001 items; at most 1000 are supported"},
      {"kubeflow replica specs missing", Kind::kPyTorchJob, R"({"spec": {"runPolicy": {}}})",
       "spec.pytorchReplicaSpecs: required"},
      {"kubeflow replica spec is a string", Kind::kTFJob, R"({"spec": {"tfReplicaSpecs": {"Worker": "x"}}})",
       "spec.tfReplicaSpecs[Worker]: must be an object, got string"},
      {"kubeflow replicas negative", Kind::kPyTorchJob,
       R"({"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": -2, "template": {"spec": {"containers": [{}]}}}}}})",
       "spec.pytorchReplicaSpecs[Worker].replicas: must be an integer from 0 to 1000000, got -2"},
      {"kubeflow replicas not an integer", Kind::kMPIJob,
       R"({"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1.5, "template": {"spec": {"containers": [{}]}}}}}})",
       "spec.mpiReplicaSpecs[Worker].replicas: must be"},
      {"kubeflow runPolicy is a list", Kind::kPyTorchJob, R"({"spec": {"runPolicy": [], "pytorchReplicaSpecs": {}}})",
       "spec.runPolicy: must be an object, got list"},
      {"kubeflow runPolicy.suspend is a string", Kind::kPyTorchJob,
       R"({"spec": {"runPolicy": {"suspend": "true"}, "pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": [{}]}}}}}})",
       "spec.runPolicy.suspend: must be true or false"},
      {"jobset replicatedJobs is an object", Kind::kJobSet, R"({"spec": {"replicatedJobs": {}}})",
       "spec.replicatedJobs: must be a list, got object"},
      {"jobset replicatedJob without a name", Kind::kJobSet,
       R"({"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {"containers": [{}]}}}}}]}})",
       "spec.replicatedJobs[0].name: required"},
      {"jobset job template without spec", Kind::kJobSet, R"({"spec": {"replicatedJobs": [{"name": "a", "template": {}}]}})",
       "spec.replicatedJobs[0].template.spec: required"},
      {"ray workerGroupSpecs is an object", Kind::kRayCluster,
       R"({"spec": {"headGroupSpec": {"template": {"spec": {"containers": [{}]}}}, "workerGroupSpecs": {}}})",
       "spec.workerGroupSpecs: must be a list"},
      {"ray numOfHosts is a string", Kind::kRayCluster,
       R"({"spec": {"headGroupSpec": {"template": {"spec": {"containers": [{}]}}},
                    "workerGroupSpecs": [{"groupName": "g", "numOfHosts": "2", "template": {"spec": {"containers": [{}]}}}]}})",
       "spec.workerGroupSpecs[0].numOfHosts: must be"},
      {"ray worker count times hosts too large", Kind::kRayCluster,
       R"({"spec": {"headGroupSpec": {"template": {"spec": {"containers": [{}]}}},
                    "workerGroupSpecs": [{"groupName": "g", "replicas": 1000, "numOfHosts": 1001, "template": {"spec": {"containers": [{}]}}}]}})",
       "spec.workerGroupSpecs[0]: replicas * numOfHosts = 1000 * 1001 = 1001000 pods"},
      {"ray enableInTreeAutoscaling is a string", Kind::kRayCluster,
       R"({"spec": {"enableInTreeAutoscaling": "true", "headGroupSpec": {"template": {"spec": {"containers": [{}]}}}}})",
       "spec.enableInTreeAutoscaling: must be true or false"},
      {"pod spec is missing", Kind::kPod, R"({"metadata": {}})", "spec: required"},
      {"pod schedulingGates is an object", Kind::kPod, R"({"spec": {"containers": [{}], "schedulingGates": {}}})",
       "spec.schedulingGates: must be a list"},
      {"pod scheduling gate name is a number", Kind::kPod,
       R"({"spec": {"containers": [{}], "schedulingGates": [{"name": 1}]}})", "spec.schedulingGates[0].name: must be a string"},
      {"pod ownerReferences is an object", Kind::kPod, R"({"metadata": {"ownerReferences": {}}, "spec": {"containers": [{}]}})",
       "metadata.ownerReferences: must be a list"},
      {"pod containers deep inside are wrong", Kind::kPod,
       R"({"spec": {"containers": [{"resources": {"requests": {"cpu": [1]}}}]}})",
       "spec.containers[0].resources.requests[cpu]: must be a quantity"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Workload> w = Extract(c.json, c.kind);
    EXPECT_THAT(w, StatusIs(absl::StatusCode::kInvalidArgument, c.want));
  }
}

TEST(MalformedTest, ReportsEveryProblemOnce) {
  absl::StatusOr<Workload> w = Extract(R"({"metadata": {"labels": {"a": 1}}, "spec": {"runPolicy": 3,
      "pytorchReplicaSpecs": {"Master": {"replicas": "1", "template": {"spec": {"containers": [
        {"resources": {"requests": {"cpu": "lots"}}}]}}}}}})",
                                       Kind::kPyTorchJob);
  ASSERT_THAT(w, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(w.status().message(),
            "metadata.labels[a]: must be a string, got number; "
            "spec.runPolicy: must be an object, got number; "
            "spec.pytorchReplicaSpecs[Master].replicas: must be an integer from 0 to 1000000, got string \"1\"; "
            "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].resources.requests[cpu]: \"lots\" is not a "
            "quantity (write e.g. 500m, 4, 1.5 or 16Gi)");
}

TEST(MalformedTest, TheExampleMessageForABadQuantity) {
  absl::StatusOr<Workload> w = Extract(
      JobWithPodSpec(R"({"containers": [{"resources": {"requests": {"nvidia.com/gpu": "four"}}}]})"), Kind::kJob);
  ASSERT_THAT(w, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr("spec.template.spec.containers[0].resources.requests[nvidia.com/gpu]: \"four\" is not a quantity"));
  EXPECT_THAT(std::string(w.status().message()), Not(HasSubstr("Invalid value")));
}

}  // namespace
}  // namespace gangkeeper::workload
