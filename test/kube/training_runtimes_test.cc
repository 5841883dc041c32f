// Tests for TrainingRuntimeCache against FakeKubeApi (a real HTTPS server
// on loopback): the runtimes a TrainJob's pods are read from come from the
// cluster, follow creates, edits and deletes without a restart, survive an
// expired watch, and a cluster without the Trainer counts as one without
// runtimes. The cached runtime is what workload::TrainJobPodSets reads.
#include "gangkeeper/kube/training_runtimes.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/kube/fake_cluster.h"
#include "src/kube/trainjob_ops.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/status_matchers.h"
#include "test/testing/wait.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::WaitFor;

constexpr char kCluster[] = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes";
constexpr char kTeamA[] = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainingruntimes";

// A runtime whose trainer step runs `gpus` GPUs per node.
json Runtime(const std::string& kind, const std::string& name, int gpus) {
  json container = {{"name", "node"},
                    {"resources", {{"requests", {{"nvidia.com/gpu", gpus}}}, {"limits", {{"nvidia.com/gpu", gpus}}}}}};
  json job = {{"name", "node"},
              {"template",
               {{"metadata", {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
                {"spec", {{"template", {{"spec", {{"containers", json::array({container})}}}}}}}}}};
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"spec", {{"mlPolicy", {{"numNodes", 2}}}, {"template", {{"spec", {{"replicatedJobs", json::array({job})}}}}}}}};
}

const std::string kTrainJob = R"({"spec": {"runtimeRef": {"name": "torch"}}})";

class TrainingRuntimeCacheTest : public FakeClusterTest {
 protected:
  void TearDown() override {
    if (cache_ != nullptr) cache_->Stop();
  }
  void StartCache(absl::Duration absent_retry = absl::Seconds(60)) {
    TrainingRuntimeWatchOptions o;
    o.error_backoff = absl::Milliseconds(50);
    o.absent_retry = absent_retry;
    cache_ = std::make_unique<TrainingRuntimeCache>(
        client_.get(),
        [this](const TrainingRuntimeId& id) {
          absl::MutexLock lock(&mu_);
          changes_.push_back(id);
        },
        o);
    cache_->Start();
  }
  size_t Changes(const TrainingRuntimeId& id) {
    absl::MutexLock lock(&mu_);
    return static_cast<size_t>(std::count(changes_.begin(), changes_.end(), id));
  }
  // The GPUs per pod of the trainer step a TrainJob naming `ref` in
  // team-a gets from the cache; -1 when the runtime is unknown.
  int64_t GpusPerPod(const workload::TrainingRuntimeRef& ref) {
    std::optional<std::string> runtime = cache_->Find(ref, "team-a");
    if (!runtime.has_value()) return -1;
    absl::StatusOr<std::vector<workload::PodSet>> sets = workload::TrainJobPodSets(kTrainJob, *runtime);
    if (!sets.ok() || sets->empty()) return -2;
    auto it = (*sets)[0].requests.find("nvidia.com/gpu");
    return it == (*sets)[0].requests.end() ? 0 : it->second.CeilUnits();
  }

  std::unique_ptr<TrainingRuntimeCache> cache_;
  absl::Mutex mu_;
  std::vector<TrainingRuntimeId> changes_ ABSL_GUARDED_BY(mu_);
};

const workload::TrainingRuntimeRef kClusterTorch{"ClusterTrainingRuntime", "torch"};
const workload::TrainingRuntimeRef kLocalTorch{"TrainingRuntime", "torch"};

TEST_F(TrainingRuntimeCacheTest, BothScopesAreListedAndFoundByTheTrainJobsRef) {
  ASSERT_THAT(fake_->Create(kCluster, Runtime("ClusterTrainingRuntime", "torch", 1)), IsOk());
  ASSERT_THAT(fake_->Create(kTeamA, Runtime("TrainingRuntime", "torch", 4)), IsOk());
  StartCache();
  ASSERT_TRUE(cache_->WaitSynced(absl::Seconds(30)));
  EXPECT_EQ(GpusPerPod(kClusterTorch), 1);
  EXPECT_EQ(GpusPerPod(kLocalTorch), 4) << "a TrainingRuntime is the TrainJob's namespace's";
  EXPECT_FALSE(cache_->Find(kLocalTorch, "team-b").has_value()) << "another namespace has none";
  EXPECT_FALSE(cache_->Find({"ClusterTrainingRuntime", "jax"}, "team-a").has_value());
  EXPECT_EQ(Changes({"TrainingRuntime", "team-a", "torch"}), 1u);
}

// A TrainJob created before its runtime waits; the runtime's arrival (and
// every later change of its spec, and its deletion) is announced so the
// TrainJobs naming it are read again.
TEST_F(TrainingRuntimeCacheTest, ArrivalsEditsAndDeletesAreSeenAndAnnounced) {
  StartCache();
  ASSERT_TRUE(cache_->WaitSynced(absl::Seconds(30)));
  EXPECT_EQ(GpusPerPod(kClusterTorch), -1);
  const TrainingRuntimeId id{"ClusterTrainingRuntime", "", "torch"};
  ASSERT_THAT(fake_->Create(kCluster, Runtime("ClusterTrainingRuntime", "torch", 2)), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Changes(id) == 1; }));
  EXPECT_EQ(GpusPerPod(kClusterTorch), 2);

  json labelled = Runtime("ClusterTrainingRuntime", "torch", 2);
  labelled["metadata"]["labels"] = {{"team", "ml"}};
  ASSERT_THAT(fake_->Replace(std::string(kCluster) + "/torch", labelled), IsOk());
  ASSERT_THAT(fake_->Replace(std::string(kCluster) + "/torch", Runtime("ClusterTrainingRuntime", "torch", 8)), IsOk());
  ASSERT_TRUE(WaitFor([&] { return GpusPerPod(kClusterTorch) == 8; }));
  EXPECT_EQ(Changes(id), 2u) << "a label is not the spec: only the GPU change is announced";

  ASSERT_THAT(fake_->Delete(std::string(kCluster) + "/torch"), IsOk());
  ASSERT_TRUE(WaitFor([&] { return GpusPerPod(kClusterTorch) == -1; }));
  EXPECT_EQ(Changes(id), 3u);
}

TEST_F(TrainingRuntimeCacheTest, ExpiredWatchListsAgainAndCatchesUp) {
  ASSERT_THAT(fake_->Create(kTeamA, Runtime("TrainingRuntime", "torch", 1)), IsOk());
  StartCache();
  ASSERT_TRUE(cache_->WaitSynced(absl::Seconds(30)));
  fake_->CompactHistory();
  ASSERT_THAT(fake_->Replace(std::string(kTeamA) + "/torch", Runtime("TrainingRuntime", "torch", 3)), IsOk());
  fake_->CompactHistory();
  fake_->CloseWatches();
  EXPECT_TRUE(WaitFor([&] { return GpusPerPod(kLocalTorch) == 3; }));
}

// Without the Trainer's CRDs (404) the cache is synced and empty, and
// finds the runtimes once they are served.
TEST_F(TrainingRuntimeCacheTest, ACollectionNotServedIsEmptyUntilItIs) {
  fake_->set_served("trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", false);
  StartCache(/*absent_retry=*/absl::Milliseconds(100));
  ASSERT_TRUE(cache_->WaitSynced(absl::Seconds(30))) << "a cluster without the Trainer is not kept unready";
  EXPECT_EQ(GpusPerPod(kClusterTorch), -1);
  // The Trainer is installed (its CRDs served) and a runtime created.
  fake_->set_served("trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", true);
  ASSERT_THAT(fake_->Create(kCluster, Runtime("ClusterTrainingRuntime", "torch", 2)), IsOk());
  EXPECT_TRUE(WaitFor([&] { return GpusPerPod(kClusterTorch) == 2; }));
}

// The actuator's TrainJob steps: release is gangkeeper's runtimePatches
// entry; suspension takes it out, but not while Jobs are active.
TEST(TrainJobOpsTest, ReleaseAddsTheEntryAndSuspensionWaitsForTheJobsToEnd) {
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kTrainJob;
  workload::PodSet node;
  node.name = "node";
  node.count = 2;
  w->pod_sets.push_back(node);
  broker::ReleaseOrder order;
  order.workload = w;
  broker::ReleaseOrder::PodSetPlacement p;
  p.name = "node";
  p.node_selector = {{"accelerator", "nvidia"}};
  order.placements.push_back(p);
  json tj = {{"metadata", {{"name", "tj"}}}, {"spec", {{"suspend", true}, {"runtimeRef", {{"name", "torch"}}}}}};

  absl::StatusOr<std::vector<workload::PatchOp>> release = TrainJobReleaseOps(tj, order);
  ASSERT_THAT(release, IsOk());
  json ops = json::array();
  for (const workload::PatchOp& op : *release) {
    json o = {{"op", op.op}, {"path", op.path}};
    if (!op.value_json.empty()) o["value"] = json::parse(op.value_json);
    ops.push_back(o);
  }
  json placed = tj.patch(ops);
  ASSERT_EQ(placed["spec"]["runtimePatches"].size(), 1u) << placed.dump();
  EXPECT_EQ(placed["spec"]["runtimePatches"][0]["manager"], "gangkeeper.io/manager");

  placed["status"]["jobsStatus"] = json::array({{{"name", "node"}, {"active", 1}}});
  absl::StatusOr<std::vector<workload::PatchOp>> busy = TrainJobSuspendOps(placed, "/apis/x/trainjobs/tj");
  EXPECT_TRUE(absl::IsUnavailable(busy.status())) << busy.status();
  EXPECT_THAT(busy.status().message(), ::testing::HasSubstr("/apis/x/trainjobs/tj"));

  placed["status"]["jobsStatus"][0]["active"] = 0;
  absl::StatusOr<std::vector<workload::PatchOp>> done = TrainJobSuspendOps(placed, "/apis/x/trainjobs/tj");
  ASSERT_THAT(done, IsOk());
  EXPECT_FALSE(done->empty());
  absl::StatusOr<std::vector<workload::PatchOp>> nothing = TrainJobSuspendOps(tj, "/apis/x/trainjobs/tj");
  ASSERT_THAT(nothing, IsOk());
  EXPECT_TRUE(nothing->empty()) << "no entry: nothing to take out, nothing to wait for";
}

}  // namespace
}  // namespace gangkeeper::kube
