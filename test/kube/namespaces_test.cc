// Tests for NamespaceWatcher against FakeKubeApi (a real HTTPS server on
// loopback): the labels a ClusterQueue's namespaceSelector reads come from
// the cluster, follow relabels and deletes without a restart, and survive an
// expired watch.
#include "gangkeeper/kube/namespaces.h"

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
using ::gangkeeper::testing::ScriptedFailure;
using ::gangkeeper::testing::WaitFor;

constexpr char kNamespaces[] = "/api/v1/namespaces";

json NamespaceObject(const std::string& name, json labels) {
  return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}, {"labels", std::move(labels)}}}};
}

class NamespaceWatcherTest : public FakeClusterTest {
 protected:
  void TearDown() override {
    if (watcher_ != nullptr) watcher_->Stop();
  }

  void StartWatcher() {
    NamespaceWatchOptions o;
    o.error_backoff = absl::Milliseconds(50);
    watcher_ = std::make_unique<NamespaceWatcher>(
        client_.get(),
        [this](std::shared_ptr<const NamespaceLabels> now) {
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
  // The label `key` of namespace `ns` as last published ("<none>" when the
  // namespace or the label is unknown).
  std::string LastLabel(const std::string& ns, const std::string& key) {
    absl::MutexLock lock(&mu_);
    if (published_.empty()) return "<none>";
    auto it = published_.back()->find(ns);
    if (it == published_.back()->end()) return "<none>";
    auto label = it->second.find(key);
    return label != it->second.end() ? label->second : "<none>";
  }
  bool Knows(const std::string& ns) {
    absl::MutexLock lock(&mu_);
    return !published_.empty() && published_.back()->count(ns) == 1;
  }

  std::unique_ptr<NamespaceWatcher> watcher_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const NamespaceLabels>> published_ ABSL_GUARDED_BY(mu_);
};

TEST_F(NamespaceWatcherTest, FirstListIsPublishedAndMarksSynced) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", {{"tier", "gold"}})), IsOk());
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-b", json::object())), IsOk());
  StartWatcher();
  ASSERT_TRUE(WaitFor([&] { return watcher_->synced(); }));
  EXPECT_EQ(LastLabel("team-a", "tier"), "gold");
  EXPECT_TRUE(Knows("team-b"));
  EXPECT_EQ(watcher_->current()->size(), 2u);
}

TEST_F(NamespaceWatcherTest, LabelledAfterStartIsSeenWithoutARestart) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", json::object())), IsOk());
  StartWatcher();
  ASSERT_TRUE(WaitFor([&] { return watcher_->synced(); }));
  EXPECT_EQ(LastLabel("team-a", "tier"), "<none>");

  ASSERT_THAT(fake_->Replace(std::string(kNamespaces) + "/team-a", NamespaceObject("team-a", {{"tier", "gold"}})),
              IsOk());
  EXPECT_TRUE(WaitFor([&] { return LastLabel("team-a", "tier") == "gold"; }));
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-c", {{"tier", "silver"}})), IsOk());
  EXPECT_TRUE(WaitFor([&] { return LastLabel("team-c", "tier") == "silver"; }));
  ASSERT_THAT(fake_->Delete(std::string(kNamespaces) + "/team-c"), IsOk());
  EXPECT_TRUE(WaitFor([&] { return !Knows("team-c"); }));
}

TEST_F(NamespaceWatcherTest, ChangesOtherThanLabelsPublishNothing) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", {{"tier", "gold"}})), IsOk());
  StartWatcher();
  ASSERT_TRUE(WaitFor([&] { return watcher_->synced(); }));
  const size_t before = Publications();
  json annotated = NamespaceObject("team-a", {{"tier", "gold"}});
  annotated["metadata"]["annotations"] = {{"owner", "ml-platform"}};
  ASSERT_THAT(fake_->Replace(std::string(kNamespaces) + "/team-a", annotated), IsOk());
  // A later label change is published; the annotation before it was not.
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-z", json::object())), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Knows("team-z"); }));
  EXPECT_EQ(Publications(), before + 1);
}

TEST_F(NamespaceWatcherTest, ExpiredWatchListsAgainAndCatchesUp) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", json::object())), IsOk());
  StartWatcher();
  ASSERT_TRUE(WaitFor([&] { return watcher_->synced(); }));
  // The watch ends and its history is gone: the next watch gets 410, the
  // watcher lists again and sees the label set meanwhile.
  fake_->CompactHistory();
  ASSERT_THAT(fake_->Replace(std::string(kNamespaces) + "/team-a", NamespaceObject("team-a", {{"tier", "gold"}})),
              IsOk());
  fake_->CompactHistory();
  fake_->CloseWatches();
  EXPECT_TRUE(WaitFor([&] { return LastLabel("team-a", "tier") == "gold"; }));
}

TEST_F(NamespaceWatcherTest, ListFailuresAreRetriedAndNotSyncedMeanwhile) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", {{"tier", "gold"}})), IsOk());
  ScriptedFailure f;
  f.path_contains = kNamespaces;
  f.non_watch_only = true;
  f.status = 403;  // RBAC not yet granted
  f.times = 3;
  fake_->Fail(f);
  StartWatcher();
  EXPECT_FALSE(watcher_->synced());
  ASSERT_TRUE(WaitFor([&] { return watcher_->synced(); }));
  EXPECT_EQ(LastLabel("team-a", "tier"), "gold");
}

}  // namespace
}  // namespace gangkeeper::kube
