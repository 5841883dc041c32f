// Tests for KueueObjectWatcher and DiscoverKueue against FakeKubeApi (a real
// HTTPS server on loopback) serving Kueue's group: the quota objects come
// from the cluster, follow creates, changes and deletes without a restart,
// survive an expired watch (410: list again), ignore status-only updates,
// and an object that does not decode never stops the others (a
// ClusterQueue stays as an inactive stand-in with the decoder's message).
#include "gangkeeper/kube/kueue_watch.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/kube/fake_cluster.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/status_matchers.h"
#include "test/testing/wait.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::WaitFor;
using ::testing::HasSubstr;

constexpr char kFlavors[] = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors";
constexpr char kClusterQueues[] = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues";
constexpr char kLocalQueues[] = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues";

json Flavor(const std::string& name) {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", name}}},
          {"spec", {{"nodeLabels", {{"accelerator", "nvidia"}}}}}};
}

json ClusterQueue(const std::string& name, const std::string& gpus) {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ClusterQueue"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"namespaceSelector", json::object()},
            {"resourceGroups",
             json::array({{{"coveredResources", json::array({"nvidia.com/gpu"})},
                           {"flavors", json::array({{{"name", "gpu"},
                                                     {"resources", json::array({{{"name", "nvidia.com/gpu"},
                                                                                  {"nominalQuota", gpus}}})}}})}}})}}}};
}

json LocalQueue(const std::string& name, const std::string& cq) {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "LocalQueue"},
          {"metadata", {{"name", name}, {"namespace", "team-a"}}},
          {"spec", {{"clusterQueue", cq}}}};
}

class KueueObjectWatcherTest : public FakeClusterTest {
 protected:
  void SetUp() override {
    FakeClusterTest::SetUp();
    fake_->ServeKueue();
  }
  void TearDown() override {
    if (watcher_ != nullptr) watcher_->Stop();
  }

  void StartWatcher() {
    KueueWatchOptions o;
    o.error_backoff = absl::Milliseconds(50);
    watcher_ = std::make_unique<KueueObjectWatcher>(
        client_.get(),
        [this](std::shared_ptr<const model::ClusterKueueObjects> now) {
          absl::MutexLock lock(&mu_);
          published_.push_back(std::move(now));
        },
        o);
    watcher_->Start();
  }
  size_t Publications() {
    absl::MutexLock lock(&mu_);
    return published_.size();
  }
  std::shared_ptr<const model::ClusterKueueObjects> Last() {
    absl::MutexLock lock(&mu_);
    return published_.empty() ? std::make_shared<const model::ClusterKueueObjects>() : published_.back();
  }
  // The nominal GPU quota of ClusterQueue `name` as last published ("" when
  // unknown or inactive).
  std::string Nominal(const std::string& name) {
    auto last = Last();
    auto it = last->objects.cluster_queues.find(name);
    if (it == last->objects.cluster_queues.end() || it->second.resource_groups.empty()) return "";
    return it->second.resource_groups[0].flavors[0].resources[0].nominal.Format();
  }

  std::unique_ptr<KueueObjectWatcher> watcher_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const model::ClusterKueueObjects>> published_ ABSL_GUARDED_BY(mu_);
};

TEST_F(KueueObjectWatcherTest, DiscoveryPrefersV1beta2AndFallsBackToV1beta1) {
  EXPECT_EQ(DiscoverKueue(*client_).value_or(KueueVersion::kV1beta1), KueueVersion::kV1beta2);
  fake_->ServeKueue({"v1beta1"});
  EXPECT_EQ(DiscoverKueue(*client_).value_or(KueueVersion::kV1beta1), KueueVersion::kV1beta2);  // both served: the newer
}

TEST_F(KueueObjectWatcherTest, OnlyV1beta1ServedIsReadAtV1beta1) {
  // A fresh fake with the older CRDs only.
  for (const char* r : {"resourceflavors", "clusterqueues", "cohorts", "workloadpriorityclasses", "localqueues"}) {
    fake_->set_served(std::string("kueue.x-k8s.io/v1beta2/") + r, false);
  }
  fake_->ServeKueue({"v1beta1"});
  ASSERT_THAT(DiscoverKueue(*client_).status(), IsOk());
  EXPECT_EQ(*DiscoverKueue(*client_), KueueVersion::kV1beta1);
}

// A cluster without Kueue's CRDs (the fake serves the group only after
// ServeKueue).
class KueueDiscoveryTest : public FakeClusterTest {};

TEST_F(KueueDiscoveryTest, NoCrdsIsNotFoundWithTheReason) {
  absl::StatusOr<KueueVersion> v = DiscoverKueue(*client_);
  EXPECT_TRUE(absl::IsNotFound(v.status())) << v.status();
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("Kueue's CRDs are not installed"));
}

TEST_F(KueueObjectWatcherTest, FirstListsArePublishedOnceAndChangesFollow) {
  ASSERT_THAT(fake_->Create(kFlavors, Flavor("gpu")), IsOk());
  ASSERT_THAT(fake_->Create(kClusterQueues, ClusterQueue("team-a", "4")), IsOk());
  ASSERT_THAT(fake_->Create(kLocalQueues, LocalQueue("gpu-queue", "team-a")), IsOk());
  StartWatcher();
  ASSERT_TRUE(watcher_->WaitSynced(absl::Seconds(10)));
  ASSERT_TRUE(WaitFor([&] { return Publications() >= 1; }));
  EXPECT_EQ(Publications(), 1u) << "nothing is published before every resource is listed, then once";
  EXPECT_EQ(Nominal("team-a"), "4");
  EXPECT_EQ(Last()->objects.flavors.count("gpu"), 1u);
  EXPECT_EQ(Last()->objects.local_queues.count({"team-a", "gpu-queue"}), 1u);
  EXPECT_EQ(Last()->objects.cluster_queues.at("team-a").meta.source.file, "the cluster (clusterqueues/team-a)");

  // A quota change.
  auto cq = fake_->Get(std::string(kClusterQueues) + "/team-a");
  ASSERT_THAT(cq, IsOk());
  json changed = *cq;
  changed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8";
  ASSERT_THAT(fake_->Replace(std::string(kClusterQueues) + "/team-a", changed), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Nominal("team-a") == "8"; }));

  // A status update (Kueue's controller, or gangkeeper's status writer) is
  // not a change of what scheduling reads: nothing is published.
  const size_t before = Publications();
  auto now = fake_->Get(std::string(kClusterQueues) + "/team-a");
  ASSERT_THAT(now, IsOk());
  json with_status = *now;
  with_status["status"] = {{"pendingWorkloads", 3}};
  ASSERT_THAT(fake_->Replace(std::string(kClusterQueues) + "/team-a", with_status), IsOk());
  // A later real change shows the status update was seen and skipped.
  ASSERT_THAT(fake_->Create(kClusterQueues, ClusterQueue("team-b", "2")), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Nominal("team-b") == "2"; }));
  EXPECT_EQ(Publications(), before + 1);

  // A delete.
  ASSERT_THAT(fake_->Delete(std::string(kClusterQueues) + "/team-b"), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Last()->objects.cluster_queues.count("team-b") == 0; }));
}

TEST_F(KueueObjectWatcherTest, AnExpiredWatchListsAgainAndMissesNothing) {
  ASSERT_THAT(fake_->Create(kFlavors, Flavor("gpu")), IsOk());
  ASSERT_THAT(fake_->Create(kClusterQueues, ClusterQueue("team-a", "4")), IsOk());
  StartWatcher();
  ASSERT_TRUE(watcher_->WaitSynced(absl::Seconds(10)));
  const uint64_t lists = watcher_->stats().lists;
  // While no watch is open, history is compacted and a change is made: the
  // next watch from the old resourceVersion gets 410 and lists again.
  fake_->CompactHistory();
  fake_->CloseWatches();
  auto cq = fake_->Get(std::string(kClusterQueues) + "/team-a");
  ASSERT_THAT(cq, IsOk());
  json changed = *cq;
  changed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "6";
  ASSERT_THAT(fake_->Replace(std::string(kClusterQueues) + "/team-a", changed), IsOk());
  fake_->CompactHistory();
  fake_->CloseWatches();
  ASSERT_TRUE(WaitFor([&] { return Nominal("team-a") == "6"; }));
  EXPECT_GT(watcher_->stats().lists, lists);
}

TEST_F(KueueObjectWatcherTest, AnUndecodableClusterQueueIsInactiveWithTheReasonAndTheRestStays) {
  ASSERT_THAT(fake_->Create(kFlavors, Flavor("gpu")), IsOk());
  ASSERT_THAT(fake_->Create(kClusterQueues, ClusterQueue("good", "4")), IsOk());
  ASSERT_THAT(fake_->Create(kClusterQueues, ClusterQueue("broken", "lots")), IsOk());
  json bad_flavor = Flavor("bad");
  bad_flavor["spec"]["nodeLabels"] = "not-a-map";
  ASSERT_THAT(fake_->Create(kFlavors, bad_flavor), IsOk());
  StartWatcher();
  ASSERT_TRUE(watcher_->WaitSynced(absl::Seconds(10)));
  ASSERT_TRUE(WaitFor([&] { return Publications() >= 1; }));
  auto last = Last();
  EXPECT_EQ(Nominal("good"), "4");
  ASSERT_EQ(last->objects.cluster_queues.count("broken"), 1u);
  const model::ClusterQueue& broken = last->objects.cluster_queues.at("broken");
  EXPECT_TRUE(broken.resource_groups.empty());
  EXPECT_THAT(broken.inactive_reason, HasSubstr("nominalQuota"));
  EXPECT_EQ(last->objects.flavors.count("bad"), 0u) << "an undecodable flavor is left out";
  EXPECT_EQ(last->objects.flavors.count("gpu"), 1u);
  EXPECT_GE(watcher_->stats().refused, 2u);

  // Fixed in the cluster: active again, without a restart.
  auto cq = fake_->Get(std::string(kClusterQueues) + "/broken");
  ASSERT_THAT(cq, IsOk());
  json fixed = *cq;
  fixed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2";
  ASSERT_THAT(fake_->Replace(std::string(kClusterQueues) + "/broken", fixed), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Nominal("broken") == "2"; }));
  EXPECT_TRUE(Last()->objects.cluster_queues.at("broken").inactive_reason.empty());
}

}  // namespace
}  // namespace gangkeeper::kube
