// gangkeeper: a TrainJob's pod sets from its runtime (trainjob.h), with the
// Kubeflow Trainer's documented example and table cases around it.
#include "gangkeeper/workload/trainjob.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

// Placement through runtimePatches: the operations applied as the API
// server would apply them.
using json = nlohmann::json;

json Applied(const std::string& object, const std::vector<PatchOp>& ops) {
  json patch = json::array();
  for (const PatchOp& op : ops) {
    json o = {{"op", op.op}, {"path", op.path}};
    if (!op.value_json.empty()) o["value"] = json::parse(op.value_json);
    patch.push_back(o);
  }
  return json::parse(object).patch(patch);
}

model::Toleration Sku() {
  model::Toleration t;
  t.key = "sku";
  t.op = "Exists";
  t.effect = "NoSchedule";
  return t;
}

TrainJobPlacement Nvidia(const std::string& pod_set) {
  return {pod_set, {{"accelerator", "nvidia"}}, {Sku()}};
}

// The pod spec patch gangkeeper's entry makes for `job`, or null.
json OurPodSpec(const json& trainjob, const std::string& job) {
  for (const json& entry : trainjob["spec"].value("runtimePatches", json::array())) {
    if (entry.value("manager", "") != kTrainJobRuntimePatchManager) continue;
    for (const json& j : entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]) {
      if (j.value("name", "") == job) return j["template"]["spec"]["template"]["spec"];
    }
  }
  return nullptr;
}

TEST(TrainJobPlacementTest, TheDocumentedExampleGetsAnEntryOfItsOwnAndSuspendTakesItOut) {
  const std::string trainjob = Fixture("trainjob-torch-distributed.yaml");
  absl::StatusOr<std::vector<PodSet>> sets =
      TrainJobPodSets(trainjob, Fixture("clustertrainingruntime-torch-distributed.yaml"));
  ASSERT_THAT(sets, IsOk());
  absl::StatusOr<std::vector<PatchOp>> ops = TrainJobPlacementOps(trainjob, *sets, {Nvidia("node")});
  ASSERT_THAT(ops, IsOk());
  const json placed = Applied(trainjob, *ops);
  ASSERT_EQ(placed["spec"]["runtimePatches"].size(), 1u) << placed.dump();
  EXPECT_EQ(placed["spec"]["runtimePatches"][0]["manager"], "gangkeeper.io/manager");
  const json spec = OurPodSpec(placed, "node");
  EXPECT_EQ(spec["nodeSelector"], json({{"accelerator", "nvidia"}}));
  EXPECT_EQ(spec["tolerations"], json::parse(R"([{"key": "sku", "operator": "Exists", "effect": "NoSchedule"}])"));
  // Nothing else of the TrainJob changed.
  json without = placed;
  without["spec"].erase("runtimePatches");
  EXPECT_EQ(without, json::parse(trainjob));

  const json restored = Applied(placed.dump(), TrainJobRestoreOps(placed.dump()));
  EXPECT_EQ(restored, json::parse(trainjob)) << "the list was gangkeeper's alone: it goes";
  EXPECT_TRUE(TrainJobRestoreOps(restored.dump()).empty());
}

// A user's own entry stays as it is; the flavor's labels merge with its,
// and since the Trainer replaces a toleration list, gangkeeper's repeats
// the tolerations the pods already have (the runtime's, then the user's
// entry's) before the flavor's.
TEST(TrainJobPlacementTest, OtherEntriesAreKeptAndTheirTolerationsRepeated) {
  const std::string runtime = R"({"spec": {"template": {"spec": {"replicatedJobs": [
      {"name": "launcher", "template": {"spec": {"template": {"spec": {"tolerations": [{"key": "batch", "operator": "Exists"}],
        "containers": [{"name": "l", "resources": {"requests": {"cpu": "1"}}}]}}}}},
      {"name": "node", "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "batch", "operator": "Exists"}],
        "containers": [{"name": "node", "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}}}]}}}})";
  const std::string trainjob = R"({"spec": {"runtimeRef": {"name": "r"}, "suspend": true, "runtimePatches": [
      {"manager": "example.com/user", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"},
          "tolerations": [{"key": "spot", "operator": "Exists"}]}}}}}]}}}}]}})";
  absl::StatusOr<std::vector<PodSet>> sets = TrainJobPodSets(trainjob, runtime);
  ASSERT_THAT(sets, IsOk());
  absl::StatusOr<std::vector<PatchOp>> ops =
      TrainJobPlacementOps(trainjob, *sets, {Nvidia("launcher"), Nvidia("node")});
  ASSERT_THAT(ops, IsOk());
  const json placed = Applied(trainjob, *ops);
  ASSERT_EQ(placed["spec"]["runtimePatches"].size(), 2u);
  EXPECT_EQ(placed["spec"]["runtimePatches"][0], json::parse(trainjob)["spec"]["runtimePatches"][0]);
  EXPECT_EQ(OurPodSpec(placed, "launcher")["tolerations"],
            json::parse(R"([{"key": "batch", "operator": "Exists"}, {"key": "sku", "operator": "Exists", "effect": "NoSchedule"}])"));
  EXPECT_EQ(OurPodSpec(placed, "node")["tolerations"],
            json::parse(R"([{"key": "spot", "operator": "Exists"}, {"key": "sku", "operator": "Exists", "effect": "NoSchedule"}])"))
      << "the user's entry replaced the runtime's list; gangkeeper's replaces that one";
  EXPECT_EQ(OurPodSpec(placed, "node")["nodeSelector"], json({{"accelerator", "nvidia"}}));
  EXPECT_EQ(Applied(placed.dump(), TrainJobRestoreOps(placed.dump())), json::parse(trainjob));
}

TEST(TrainJobPlacementTest, ConflictsNameWhereTheLabelComesFrom) {
  const std::string runtime = Fixture("clustertrainingruntime-torch-distributed.yaml");
  const std::string trainjob = R"({"spec": {"runtimeRef": {"name": "torch-distributed"}, "runtimePatches": [
      {"manager": "example.com/user", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"accelerator": "amd"}}}}}}]}}}}]}})";
  absl::StatusOr<std::vector<PodSet>> sets = TrainJobPodSets(trainjob, runtime);
  ASSERT_THAT(sets, IsOk());
  EXPECT_THAT(TrainJobPlacementOps(trainjob, *sets, {Nvidia("node")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "accelerator=amd (from spec.runtimePatches[0] (example.com/user)) conflicts with the admitted "
                       "flavor's accelerator=nvidia"));
  EXPECT_THAT(TrainJobPlacementOps(trainjob, *sets, {Nvidia("launcher")}),
              StatusIs(absl::StatusCode::kInvalidArgument, "no such replicated job"));
  EXPECT_THAT(TrainJobPlacementOps("nope", *sets, {}), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A release not undone (gangkeeper's entry is still there) is replaced,
// not doubled; a placement that adds nothing leaves no entry.
TEST(TrainJobPlacementTest, AStaleEntryIsReplacedAndNothingToAddMeansNoEntry) {
  const std::string trainjob = Fixture("trainjob-torch-distributed.yaml");
  absl::StatusOr<std::vector<PodSet>> sets =
      TrainJobPodSets(trainjob, Fixture("clustertrainingruntime-torch-distributed.yaml"));
  ASSERT_THAT(sets, IsOk());
  absl::StatusOr<std::vector<PatchOp>> first = TrainJobPlacementOps(trainjob, *sets, {Nvidia("node")});
  ASSERT_THAT(first, IsOk());
  const json once = Applied(trainjob, *first);
  TrainJobPlacement other = {"node", {{"accelerator", "h100"}}, {}};
  absl::StatusOr<std::vector<PatchOp>> second = TrainJobPlacementOps(once.dump(), *sets, {other});
  ASSERT_THAT(second, IsOk());
  const json twice = Applied(once.dump(), *second);
  ASSERT_EQ(twice["spec"]["runtimePatches"].size(), 1u) << twice.dump();
  EXPECT_EQ(OurPodSpec(twice, "node"), json({{"nodeSelector", {{"accelerator", "h100"}}}}));

  absl::StatusOr<std::vector<PatchOp>> none = TrainJobPlacementOps(trainjob, *sets, {{"node", {}, {}}});
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->empty());
  absl::StatusOr<std::vector<PatchOp>> stale = TrainJobPlacementOps(once.dump(), *sets, {{"node", {}, {}}});
  ASSERT_THAT(stale, IsOk());
  EXPECT_EQ(Applied(once.dump(), *stale), json::parse(trainjob));
}

// Generative: whatever mix of user entries and placements (fixed seed),
// release then suspend gives the TrainJob back exactly, and release leaves
// exactly one entry of gangkeeper's, last.
TEST(TrainJobPlacementTest, ReleaseThenRestoreIsTheIdentity) {
  const std::string runtime = Fixture("clustertrainingruntime-torch-distributed.yaml");
  std::mt19937 rng(20261206);
  for (int round = 0; round < 200; ++round) {
    json tj = json::parse(Fixture("trainjob-torch-distributed.yaml"));
    const int users = static_cast<int>(rng() % 3);
    for (int u = 0; u < users; ++u) {
      json sel = json::object();
      if (rng() % 2) sel[absl::StrCat("k", rng() % 4)] = "v";
      json spec = {{"nodeSelector", sel}};
      if (rng() % 2) spec["tolerations"] = json::array({{{"key", absl::StrCat("t", rng() % 3)}, {"operator", "Exists"}}});
      json job = {{"name", "node"}};
      job["template"]["spec"]["template"]["spec"] = spec;
      json entry = {{"manager", absl::StrCat("example.com/u", u)}};
      entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = json::array({job});
      tj["spec"]["runtimePatches"].push_back(entry);
    }
    TrainJobPlacement p{"node", {}, {}};
    if (rng() % 2) p.node_selector[absl::StrCat("f", rng() % 3)] = "x";
    if (rng() % 2) p.tolerations.push_back(Sku());
    const std::string text = tj.dump();
    absl::StatusOr<std::vector<PodSet>> sets = TrainJobPodSets(text, runtime);
    ASSERT_THAT(sets, IsOk());
    absl::StatusOr<std::vector<PatchOp>> ops = TrainJobPlacementOps(text, *sets, {p});
    ASSERT_THAT(ops, IsOk());
    const json placed = Applied(text, *ops);
    const bool adds = !p.node_selector.empty() || !p.tolerations.empty();
    int ours = 0;
    for (const json& e : placed["spec"].value("runtimePatches", json::array())) {
      ours += e.value("manager", "") == kTrainJobRuntimePatchManager;
    }
    ASSERT_EQ(ours, adds ? 1 : 0) << placed.dump();
    if (adds) {
      EXPECT_EQ(placed["spec"]["runtimePatches"].back()["manager"], std::string(kTrainJobRuntimePatchManager));
    }
    ASSERT_EQ(Applied(placed.dump(), TrainJobRestoreOps(placed.dump())), tj) << "round " << round;
  }
}

// The second step of a preemption waits until no Job of the TrainJob's
// JobSet is active (the Trainer refuses runtimePatches changes until then).
TEST(TrainJobPlacementTest, ActiveWhileAnyJobOfItsJobSetIs) {
  EXPECT_FALSE(TrainJobActive(Fixture("trainjob-torch-distributed.yaml"))) << "no status yet";
  EXPECT_TRUE(TrainJobActive(
      R"({"status": {"jobsStatus": [{"name": "dataset-initializer", "active": 0, "succeeded": 1}, {"name": "node", "active": 3}]}})"));
  EXPECT_FALSE(TrainJobActive(R"({"status": {"jobsStatus": [{"name": "node", "active": 0, "suspended": 3}]}})"));
  EXPECT_FALSE(TrainJobActive(R"({"status": {"jobsStatus": "many"}})"));
  EXPECT_FALSE(TrainJobActive("not json"));
}

// Ready pods as a JobSet's are counted: ready and succeeded Jobs of each
// replicated job times the pods of one Job (the runtime says how many Jobs).
TEST(TrainJobTest, ReadyPodsCountReadyAndSucceededJobs) {
  const std::string runtime = R"({"spec": {"template": {"spec": {"replicatedJobs": [
      {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {"containers": [{"name": "i"}]}}}}},
      {"name": "node", "replicas": 2, "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}]}}}})";
  const std::string spec = R"("spec": {"runtimeRef": {"name": "r"}, "trainer": {"numNodes": 3}})";
  absl::StatusOr<std::vector<PodSet>> sets = TrainJobPodSets(absl::StrCat("{", spec, "}"), runtime);
  ASSERT_THAT(sets, IsOk());
  ASSERT_THAT(Counts(*sets), ElementsAre(1, 6)) << "2 Jobs of numNodes pods each";
  auto ready = [&](const std::string& status) {
    return TrainJobReadyPods(absl::StrCat("{", spec, R"(, "status": {"jobsStatus": )", status, "}}"), runtime, *sets);
  };
  EXPECT_EQ(ready("[]"), 0);
  EXPECT_EQ(ready(R"([{"name": "dataset-initializer", "succeeded": 1}, {"name": "node", "ready": 1, "active": 2}])"), 4);
  EXPECT_EQ(ready(R"([{"name": "dataset-initializer", "succeeded": 1}, {"name": "node", "ready": 2}])"), 7)
      << "every pod: what waitForPodsReady waits for";
  EXPECT_EQ(ready(R"([{"name": "node", "ready": 9}, {"name": "other", "ready": 5}])"), 6)
      << "at most the runtime's replicas; unknown jobs count nothing";
  EXPECT_EQ(TrainJobReadyPods("nope", runtime, *sets), 0);
}

}  // namespace
}  // namespace gangkeeper::workload
