// Tests for ListThenWatch, the loop NamespaceWatcher and KueueObjectWatcher
// share, against FakeKubeApi (a real HTTPS server on loopback): a list
// first, then the watch's objects; an expired watch (410) lists again and
// the list brings what the lost history held; a healthy watch is listed
// again every `resync`; failed lists are retried; a collection not served
// (404) is listed as empty when the caller asks for that (absent_retry) and
// is a failed list otherwise; Stop ends an open watch without waiting for
// the server's timeout, and StopLoops does so for loops sharing a client.
#include "gangkeeper/kube/list_then_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
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

json NamespaceObject(const std::string& name, const std::string& tier) {
  return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}, {"labels", {{"tier", tier}}}}}};
}

std::string Name(const json& object) { return object["metadata"].value("name", ""); }

class ListThenWatchTest : public FakeClusterTest {
 protected:
  void TearDown() override {
    if (loop_ != nullptr) loop_->Stop();
  }

  void StartLoop(ListThenWatchOptions o) {
    loop_ = std::make_unique<ListThenWatch>(
        client_.get(), kNamespaces,
        [this](const ListResult& list) {
          absl::MutexLock lock(&mu_);
          std::vector<std::string> names;
          for (const json& item : list.items) names.push_back(Name(item));
          lists_.push_back(std::move(names));
        },
        [this](const json& object, bool deleted) {
          absl::MutexLock lock(&mu_);
          events_.push_back((deleted ? "-" : "+") + Name(object));
        },
        std::move(o));
    loop_->Start();
  }
  size_t Lists() {
    absl::MutexLock lock(&mu_);
    return lists_.size();
  }
  // GETs of the collection answered 404 so far (lists and watches).
  size_t NotServedCalls() {
    size_t n = 0;
    for (const ::gangkeeper::testing::RecordedCall& c : fake_->Calls()) {
      if (c.path == kNamespaces && c.status == 404) ++n;
    }
    return n;
  }
  std::vector<std::string> LastList() {
    absl::MutexLock lock(&mu_);
    return lists_.empty() ? std::vector<std::string>() : lists_.back();
  }
  bool SawEvent(const std::string& e) {
    absl::MutexLock lock(&mu_);
    return std::find(events_.begin(), events_.end(), e) != events_.end();
  }

  std::unique_ptr<ListThenWatch> loop_;
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> lists_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ListThenWatchTest, ListsFirstThenHandsOverTheWatchedObjects) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", "gold")), IsOk());
  ListThenWatchOptions o;
  o.error_backoff = absl::Milliseconds(50);
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return Lists() == 1; }));
  EXPECT_THAT(LastList(), ::testing::ElementsAre("team-a"));
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-b", "silver")), IsOk());
  EXPECT_TRUE(WaitFor([&] { return SawEvent("+team-b"); }));
  ASSERT_THAT(fake_->Delete(std::string(kNamespaces) + "/team-a"), IsOk());
  EXPECT_TRUE(WaitFor([&] { return SawEvent("-team-a"); }));
  EXPECT_FALSE(SawEvent("+team-a")) << "what the list brought is not handed over again by the watch";
  EXPECT_EQ(Lists(), 1u) << "a healthy watch is not listed again before resync";
}

TEST_F(ListThenWatchTest, AnExpiredWatchListsAgainAndTheListHoldsWhatTheHistoryLost) {
  ListThenWatchOptions o;
  o.error_backoff = absl::Milliseconds(50);
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return Lists() == 1; }));
  // The open watch ends and the history it would resume from is gone: the
  // next watch is answered 410 and the loop lists again. (Paused, the watch
  // cannot take team-c before the second compaction: otherwise it could,
  // and would resume from where the history starts, without a 410.)
  fake_->PauseWatches(true);
  fake_->CompactHistory();
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-c", "gold")), IsOk());
  fake_->CompactHistory();
  fake_->CloseWatches();
  fake_->PauseWatches(false);
  ASSERT_TRUE(WaitFor([&] { return Lists() >= 2; }));
  EXPECT_TRUE(WaitFor([&] {
    std::vector<std::string> last = LastList();
    return std::find(last.begin(), last.end(), "team-c") != last.end() || SawEvent("+team-c");
  }));
  EXPECT_EQ(loop_->lists(), Lists());
}

TEST_F(ListThenWatchTest, AHealthyWatchIsListedAgainEveryResync) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", "gold")), IsOk());
  ListThenWatchOptions o;
  o.error_backoff = absl::Milliseconds(50);
  o.resync = absl::Milliseconds(200);
  o.watch_timeout_seconds = 1;  // the resync is checked between watches
  StartLoop(o);
  EXPECT_TRUE(WaitFor([&] { return Lists() >= 3; }));
  EXPECT_THAT(LastList(), ::testing::ElementsAre("team-a"));
}

TEST_F(ListThenWatchTest, FailedListsAreRetried) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", "gold")), IsOk());
  ScriptedFailure f;
  f.path_contains = kNamespaces;
  f.non_watch_only = true;
  f.status = 403;
  f.times = 3;
  fake_->Fail(f);
  ListThenWatchOptions o;
  o.error_backoff = absl::Milliseconds(20);
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return Lists() == 1; }));
  EXPECT_THAT(LastList(), ::testing::ElementsAre("team-a"));
}

// With absent_retry, a collection the API does not serve (its CRD not
// installed) counts as listed and empty, is asked for again, and is listed
// and watched once it is served.
TEST_F(ListThenWatchTest, ACollectionNotServedIsListedAsEmptyAndAskedForAgain) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", "gold")), IsOk());
  fake_->set_served("v1/namespaces", false);
  ListThenWatchOptions o;
  o.error_backoff = absl::Hours(1);  // a 404 is not a failed list here
  o.absent_retry = absl::Milliseconds(50);
  o.absent_note = "not installed";
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return Lists() >= 2; })) << "asked for again every absent_retry";
  EXPECT_TRUE(LastList().empty());
  EXPECT_FALSE(SawEvent("+team-a"));
  fake_->set_served("v1/namespaces", true);
  ASSERT_TRUE(WaitFor([&] { return LastList() == std::vector<std::string>{"team-a"}; }));
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-b", "silver")), IsOk());
  EXPECT_TRUE(WaitFor([&] { return SawEvent("+team-b"); })) << "once served, the collection is watched";
}

// Without absent_retry (KueueObjectWatcher, NamespaceWatcher) a 404 is a
// failed list: nothing is handed over until a list succeeds.
TEST_F(ListThenWatchTest, WithoutAbsentRetryANotServedCollectionIsAFailedList) {
  ASSERT_THAT(fake_->Create(kNamespaces, NamespaceObject("team-a", "gold")), IsOk());
  fake_->set_served("v1/namespaces", false);
  ListThenWatchOptions o;
  o.error_backoff = absl::Milliseconds(20);
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return NotServedCalls() >= 3; }));
  EXPECT_EQ(Lists(), 0u) << "a 404 handed on_list an empty list";
  fake_->set_served("v1/namespaces", true);
  ASSERT_TRUE(WaitFor([&] { return Lists() == 1; }));
  EXPECT_THAT(LastList(), ::testing::ElementsAre("team-a"));
}

TEST_F(ListThenWatchTest, StopEndsAnOpenWatchWithoutWaitingForItsTimeout) {
  ListThenWatchOptions o;
  o.watch_timeout_seconds = 300;
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return Lists() == 1; }));
  // The loop is inside a watch the server would hold for 300 s.
  std::future<void> stopped = std::async(std::launch::async, [this] { loop_->Stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "Stop waited for the watch's server-side timeout";
  stopped.wait();
}

TEST_F(ListThenWatchTest, StopDuringTheBackoffOfAFailingListEndsTheLoop) {
  ScriptedFailure f;
  f.path_contains = kNamespaces;
  f.non_watch_only = true;
  f.status = 403;
  f.times = -1;
  fake_->Fail(f);
  ListThenWatchOptions o;
  o.error_backoff = absl::Hours(1);
  StartLoop(o);
  ASSERT_TRUE(WaitFor([&] { return !fake_->Calls().empty(); }));
  std::future<void> stopped = std::async(std::launch::async, [this] { loop_->Stop(); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "Stop waited for the backoff";
  stopped.wait();
  EXPECT_EQ(Lists(), 0u);
}


// Loops of one watcher share a client: StopLoops ends all their open
// watches through it, and leaves it alone when none was started.
TEST_F(FakeClusterTest, StopLoopsEndsEveryOpenWatchOfLoopsSharingOneClient) {
  std::vector<std::unique_ptr<ListThenWatch>> idle;
  idle.push_back(std::make_unique<ListThenWatch>(
      client_.get(), "/api/v1/namespaces", [](const ListResult&) {}, [](const nlohmann::json&, bool) {}));
  StopLoops(client_.get(), idle);
  ASSERT_THAT(client_->List("/api/v1/namespaces").status(), IsOk()) << "no loop ran: the client was not shut down";

  std::atomic<int> lists{0};
  std::vector<std::unique_ptr<ListThenWatch>> loops;
  for (const char* path : {"/api/v1/namespaces", "/api/v1/pods"}) {
    ListThenWatchOptions o;
    o.watch_timeout_seconds = 300;
    loops.push_back(std::make_unique<ListThenWatch>(
        client_.get(), path, [&lists](const ListResult&) { lists.fetch_add(1); },
        [](const nlohmann::json&, bool) {}, o));
  }
  StartLoops(loops);
  ASSERT_TRUE(WaitFor([&] { return lists.load() == 2; }));
  std::future<void> stopped = std::async(std::launch::async, [&] { StopLoops(client_.get(), loops); });
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "StopLoops waited for the watches' server-side timeout";
  stopped.wait();
  for (const std::unique_ptr<ListThenWatch>& loop : loops) EXPECT_FALSE(loop->running());
}

}  // namespace
}  // namespace gangkeeper::kube
