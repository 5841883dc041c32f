// gangkeeper: a TrainJob's pod sets from its runtime (trainjob.h), with the
// Kubeflow Trainer's documented example and table cases around it.
#include "gangkeeper/workload/trainjob.h"

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
using Strings = std::map<std::string, std::string>;

std::string Fixture(const std::string& file) {
  absl::StatusOr<std::vector<std::string>> docs =
      testing::YamlFileToJson(std::string(GK_SOURCE_DIR) + "/test/fixtures/kinds/" + file);
  if (!docs.ok() || docs->size() != 1) {
    ADD_FAILURE() << file << ": " << (docs.ok() ? "not one document" : docs.status().ToString());
    return "{}";
  }
  return (*docs)[0];
}

std::vector<std::string> Names(const std::vector<PodSet>& sets) {
  std::vector<std::string> out;
  for (const PodSet& ps : sets) out.push_back(ps.name);
  return out;
}
std::vector<int64_t> Counts(const std::vector<PodSet>& sets) {
  std::vector<int64_t> out;
  for (const PodSet& ps : sets) out.push_back(ps.count);
  return out;
}

TEST(TrainJobTest, TheDocumentedExampleRunsNumNodesPodsWithResourcesPerNode) {
  const std::string trainjob = Fixture("trainjob-torch-distributed.yaml");
  absl::StatusOr<TrainingRuntimeRef> ref = ReadTrainingRuntimeRef(trainjob);
  ASSERT_THAT(ref, IsOk());
  EXPECT_EQ(ref->kind, "ClusterTrainingRuntime");
  EXPECT_EQ(ref->name, "torch-distributed");
  absl::StatusOr<std::vector<PodSet>> sets =
      TrainJobPodSets(trainjob, Fixture("clustertrainingruntime-torch-distributed.yaml"));
  ASSERT_THAT(sets, IsOk());
  EXPECT_THAT(Names(*sets), ElementsAre("node"));
  EXPECT_THAT(Counts(*sets), ElementsAre(3));
  EXPECT_EQ(Formatted((*sets)[0].requests), (Strings{{"cpu", "2"}, {"memory", "4Gi"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ((*sets)[0].template_pointer, "/spec/template/spec/replicatedJobs/0/template/spec/template");
}

// The runtime's own numbers when the TrainJob leaves them out; the other
// steps (initializers) as the runtime's JobSet says.
TEST(TrainJobTest, RuntimeDefaultsAndInitializerSteps) {
  const std::string runtime = R"({"spec": {"mlPolicy": {"numNodes": 2}, "template": {"spec": {"replicatedJobs": [
      {"name": "dataset-initializer", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "resources": {"requests": {"cpu": "1"}}}]}}}}},
      {"name": "trainer", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"parallelism": 9, "template": {"spec": {"containers": [
          {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}},
          {"name": "node", "resources": {"requests": {"cpu": "8"}}}]}}}}}]}}}})";
  const std::string bare = R"({"spec": {"runtimeRef": {"name": "r"}}})";
  absl::StatusOr<std::vector<PodSet>> sets = TrainJobPodSets(bare, runtime);
  ASSERT_THAT(sets, IsOk());
  EXPECT_THAT(Names(*sets), ElementsAre("dataset-initializer", "trainer"));
  EXPECT_THAT(Counts(*sets), ElementsAre(1, 2)) << "mlPolicy.numNodes sets the trainer's parallelism";
  EXPECT_EQ(Formatted((*sets)[1].requests), (Strings{{"cpu", "8100m"}}));

  const std::string sized =
      R"({"spec": {"runtimeRef": {"name": "r"}, "trainer": {"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}}})";
  sets = TrainJobPodSets(sized, runtime);
  ASSERT_THAT(sets, IsOk());
  EXPECT_THAT(Counts(*sets), ElementsAre(1, 4));
  EXPECT_EQ(Formatted((*sets)[1].requests), (Strings{{"cpu", "2100m"}, {"nvidia.com/gpu", "1"}}))
      << "only the container named node takes resourcesPerNode";
}

TEST(TrainJobTest, RuntimeRefsAndErrorsNameTheField) {
  absl::StatusOr<TrainingRuntimeRef> ns =
      ReadTrainingRuntimeRef(R"({"spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "mine"}}})");
  ASSERT_THAT(ns, IsOk());
  EXPECT_EQ(ns->kind, "TrainingRuntime");
  EXPECT_THAT(ReadTrainingRuntimeRef(R"({"spec": {}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.runtimeRef"));
  EXPECT_THAT(ReadTrainingRuntimeRef(R"({"spec": {"runtimeRef": {"kind": "JobSet", "name": "x"}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "is not a training runtime"));
  const std::string runtime = Fixture("clustertrainingruntime-torch-distributed.yaml");
  EXPECT_THAT(TrainJobPodSets(R"({"spec": {"trainer": {"numNodes": 0}}})", runtime),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.trainer.numNodes"));
  EXPECT_THAT(TrainJobPodSets(R"({"spec": {"trainer": {"resourcesPerNode": {"requests": {"cpu": "lots"}}}}})", runtime),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.trainer.resourcesPerNode.requests"));
  EXPECT_THAT(TrainJobPodSets(R"({"spec": {}})", R"({"spec": {"template": {"spec": {"replicatedJobs": []}}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "the runtime runs no pods"));
  EXPECT_THAT(TrainJobPodSets(R"({"spec": {"trainer": {"numNodes": 2}}})",
                              R"({"spec": {"template": {"spec": {"replicatedJobs": [{"name": "x", "template": {"spec": {"template": {"spec": {"containers": []}}}}}]}}}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "no replicated job is the trainer step"));
  EXPECT_THAT(TrainJobPodSets("[]", runtime), StatusIs(absl::StatusCode::kInvalidArgument, "TrainJob: not a JSON object"));
}

}  // namespace
}  // namespace gangkeeper::workload
