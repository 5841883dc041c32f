// gangkeeper: ExtractWorkload never crashes on wrongly typed input.
//
// For a valid object of every kind, replaces each value in the document, one
// at a time, with values of every other JSON type (and extreme numbers), and
// checks the result is OK or InvalidArgument with a message. Under the
// Debug + ASan build RapidJSON's type assertions are live, so a missed type
// check aborts the test.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

constexpr char kPodSpec[] = R"({"priorityClassName": "pc", "nodeSelector": {"a": "b"},
  "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule", "tolerationSeconds": 5}],
  "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}],
  "overhead": {"cpu": "100m"}, "resources": {"requests": {"cpu": "1"}},
  "schedulingGates": [{"name": "gangkeeper.io/admission"}],
  "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
  "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}}]})";

std::string Tmpl() { return absl::StrCat(R"({"metadata": {"labels": {"x": "y"}}, "spec": )", kPodSpec, "}"); }

std::string Meta() {
  return R"("metadata": {"name": "n", "namespace": "ns", "uid": "u", "generateName": "g",
    "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "grp"},
    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": true}]})";
}

struct Sample {
  Kind kind;
  std::string json;
};

std::vector<Sample> Samples() {
  const std::string kubeflow_run_policy =
      R"("runPolicy": {"suspend": true, "schedulingPolicy": {"priorityClass": "pc"}})";
  return {
      {Kind::kJob, absl::StrCat(R"({"apiVersion": "batch/v1", "kind": "Job", )", Meta(),
                                R"(, "spec": {"suspend": true, "parallelism": 2, "completions": 3, "template": )",
                                Tmpl(), "}}")},
      {Kind::kPyTorchJob,
       absl::StrCat(R"({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", )", Meta(), R"(, "spec": {)",
                    kubeflow_run_policy, R"(, "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": )", Tmpl(),
                    R"(}, "Worker": {"replicas": 2, "template": )", Tmpl(), "}}}}")},
      {Kind::kMPIJob, absl::StrCat(R"({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", )", Meta(),
                                   R"(, "spec": {)", kubeflow_run_policy,
                                   R"(, "mpiReplicaSpecs": {"Launcher": {"template": )", Tmpl(), "}}}}")},
      {Kind::kJobSet,
       absl::StrCat(R"({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", )", Meta(),
                    R"(, "spec": {"suspend": false, "replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": )",
                    Tmpl(), "}}}]}}")},
      {Kind::kRayJob,
       absl::StrCat(R"({"apiVersion": "ray.io/v1", "kind": "RayJob", )", Meta(),
                    R"(, "spec": {"suspend": true, "rayClusterSpec": {"enableInTreeAutoscaling": true,
                      "autoscalerOptions": {"resources": {"requests": {"cpu": "1"}}},
                      "headGroupSpec": {"template": )",
                    Tmpl(),
                    R"(}, "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "minReplicas": 1, "maxReplicas": 4,
                      "numOfHosts": 2, "template": )",
                    Tmpl(), "}]}}}")},
      {Kind::kPod, absl::StrCat(R"({"apiVersion": "v1", "kind": "Pod", )", Meta(), R"(, "spec": )", kPodSpec, "}")},
  };
}

// Every value in the tree, in a fixed pre-order.
void Collect(rapidjson::Value& v, std::vector<rapidjson::Value*>* out) {
  out->push_back(&v);
  if (v.IsObject()) {
    for (rapidjson::SizeType i = 0; i < v.MemberCount(); ++i) Collect((v.MemberBegin() + i)->value, out);
  } else if (v.IsArray()) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) Collect(v[i], out);
  }
}

TEST(RobustnessTest, EveryValueReplacedByEveryOtherTypeIsOkOrInvalidArgument) {
  const std::vector<std::function<void(rapidjson::Value&, rapidjson::Document::AllocatorType&)>> replacements = {
      [](rapidjson::Value& v, auto&) { v.SetNull(); },
      [](rapidjson::Value& v, auto&) { v.SetBool(true); },
      [](rapidjson::Value& v, auto&) { v.SetInt(-1); },
      [](rapidjson::Value& v, auto&) { v.SetInt64(INT64_MAX); },
      [](rapidjson::Value& v, auto&) { v.SetUint64(UINT64_MAX); },
      [](rapidjson::Value& v, auto&) { v.SetDouble(1e300); },
      [](rapidjson::Value& v, auto&) { v.SetDouble(0.5); },
      [](rapidjson::Value& v, auto&) { v.SetString("x"); },
      [](rapidjson::Value& v, auto&) { v.SetString(""); },
      [](rapidjson::Value& v, auto&) { v.SetArray(); },
      [](rapidjson::Value& v, auto& a) {
        v.SetArray();
        v.PushBack(rapidjson::Value(7), a);
      },
      [](rapidjson::Value& v, auto&) { v.SetObject(); },
  };
  int runs = 0;
  int ok = 0;
  for (const Sample& sample : Samples()) {
    SCOPED_TRACE(InfoFor(sample.kind).name);
    {
      rapidjson::Document doc = ParseJson(sample.json);
      absl::StatusOr<Workload> w = ExtractWorkload(doc, InfoFor(sample.kind), {});
      // The unmutated sample is valid apart from the priority class "pc".
      ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
      ASSERT_THAT(std::string(w.status().message()), ::testing::HasSubstr("PriorityClass \"pc\" does not exist"));
    }
    rapidjson::Document probe = ParseJson(sample.json);
    std::vector<rapidjson::Value*> nodes;
    Collect(probe, &nodes);
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const auto& replace : replacements) {
        rapidjson::Document doc = ParseJson(sample.json);
        std::vector<rapidjson::Value*> targets;
        Collect(doc, &targets);
        replace(*targets[i], doc.GetAllocator());
        absl::StatusOr<Workload> w = ExtractWorkload(doc, InfoFor(sample.kind), {});
        ++runs;
        if (w.ok()) {
          ++ok;
          continue;
        }
        ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << w.status();
        ASSERT_FALSE(w.status().message().empty());
      }
    }
  }
  EXPECT_GT(runs, 1000);
  EXPECT_GT(ok, 0);  // replacing the unknown priority class name makes some valid
}

}  // namespace
}  // namespace gangkeeper::workload
