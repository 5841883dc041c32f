// Tests for EventRecorder against FakeKubeApi (a real HTTPS server on
// loopback): Events land where `kubectl describe` finds them, repeats
// become a series count instead of new objects, a cluster without
// events.k8s.io gets core/v1 Events, API-server failures drop Events without
// blocking the caller, and a full queue drops instead of growing.
#include "gangkeeper/kube/events.h"

#include <memory>
#include <string>
#include <vector>

#include "gangkeeper/base/clock.h"
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
using ::testing::HasSubstr;

constexpr char kNewEvents[] = "/apis/events.k8s.io/v1/namespaces/team-a/events";
constexpr char kCoreEvents[] = "/api/v1/namespaces/team-a/events";

ClusterEvent JobEvent(const std::string& name, const std::string& reason, const std::string& note,
                      bool warning = false) {
  ClusterEvent e;
  e.regarding = {"batch/v1", "Job", "team-a", name, "uid-" + name};
  e.reason = reason;
  e.action = "Admit";
  e.note = note;
  e.warning = warning;
  return e;
}

class EventRecorderTest : public FakeClusterTest {
 protected:
  void TearDown() override {
    if (recorder_ != nullptr) recorder_->Stop();
  }

  void StartRecorder(EventRecorderOptions o = {}) {
    if (o.clock == nullptr) o.clock = &base::RealClock();
    o.instance = "gangkeeper-0";
    recorder_ = std::make_unique<EventRecorder>(client_.get(), o);
    recorder_->Start();
  }
  // Waits until every recorded event was written, counted or dropped.
  bool Drained() {
    return WaitFor([&] {
      const EventRecorderStats s = recorder_->stats();
      return s.created + s.series_updates + s.failed == s.recorded;
    });
  }

  std::unique_ptr<EventRecorder> recorder_;
};

TEST_F(EventRecorderTest, WritesAnEventsK8sIoEventAboutTheObject) {
  StartRecorder();
  recorder_->Record(JobEvent("train", "Preempted", "preempted by team-b/serve (ClusterQueue team-b)", true));
  ASSERT_TRUE(Drained());
  std::vector<json> events = fake_->List(kNewEvents);
  ASSERT_EQ(events.size(), 1u);
  const json& e = events[0];
  EXPECT_EQ(e["reason"], "Preempted");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["action"], "Admit");
  EXPECT_EQ(e["reportingController"], "gangkeeper.io/gangkeeper");
  EXPECT_EQ(e["reportingInstance"], "gangkeeper-0");
  EXPECT_THAT(e["note"].get<std::string>(), HasSubstr("team-b/serve"));
  EXPECT_EQ(e["regarding"]["kind"], "Job");
  EXPECT_EQ(e["regarding"]["name"], "train");
  EXPECT_EQ(e["regarding"]["uid"], "uid-train");
  EXPECT_THAT(e["eventTime"].get<std::string>(), ::testing::MatchesRegex(
                                                   "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z"));
  EXPECT_TRUE(fake_->List(kCoreEvents).empty());
}

TEST_F(EventRecorderTest, RepeatsBecomeASeriesCountNotNewEvents) {
  StartRecorder();
  for (int i = 0; i < 50; ++i) recorder_->Record(JobEvent("train", "Pending", "waiting for 2 nvidia.com/gpu"));
  recorder_->Record(JobEvent("train", "Pending", "waiting for 4 nvidia.com/gpu"));  // a new reason: a new Event
  ASSERT_TRUE(Drained());
  std::vector<json> events = fake_->List(kNewEvents);
  ASSERT_EQ(events.size(), 2u);
  int64_t counted = 0;
  for (const json& e : events) {
    if (e["note"] == "waiting for 2 nvidia.com/gpu") counted = e["series"]["count"].get<int64_t>();
  }
  EXPECT_EQ(counted, 50);
  EXPECT_EQ(recorder_->stats().created, 2u);
  EXPECT_EQ(recorder_->stats().series_updates, 49u);
}

TEST_F(EventRecorderTest, FallsBackToCoreV1WhenEventsK8sIoIsNotServed) {
  fake_->set_served("events.k8s.io/v1/events", false);
  StartRecorder();
  recorder_->Record(JobEvent("train", "QuotaReserved", "quota reserved in ClusterQueue team-a"));
  recorder_->Record(JobEvent("train", "QuotaReserved", "quota reserved in ClusterQueue team-a"));
  ASSERT_TRUE(Drained());
  std::vector<json> events = fake_->List(kCoreEvents);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["involvedObject"]["name"], "train");
  EXPECT_EQ(events[0]["message"], "quota reserved in ClusterQueue team-a");
  EXPECT_EQ(events[0]["count"], 2);
  EXPECT_TRUE(recorder_->stats().core_v1);
}

TEST_F(EventRecorderTest, RefusedWritesAreDroppedAndCountedWithoutBlockingTheCaller) {
  ScriptedFailure f;
  f.method = "POST";
  f.status = 429;
  f.retry_after = "0";
  f.times = -1;
  fake_->Fail(f);
  StartRecorder();
  for (int i = 0; i < 5; ++i) recorder_->Record(JobEvent("j" + std::to_string(i), "Pending", "waiting"));
  ASSERT_TRUE(Drained());
  EXPECT_EQ(recorder_->stats().failed, 5u);
  fake_->ClearFailures();
  recorder_->Record(JobEvent("later", "Admitted", "admitted"));
  ASSERT_TRUE(Drained());
  EXPECT_EQ(fake_->List(kNewEvents).size(), 1u);
}

TEST_F(EventRecorderTest, AFullQueueDropsInsteadOfGrowing) {
  ScriptedFailure slow;
  slow.method = "POST";
  slow.status = 0;  // answer normally, late
  slow.delay = absl::Milliseconds(200);
  slow.times = -1;
  fake_->Fail(slow);
  EventRecorderOptions o;
  o.queue_limit = 4;
  StartRecorder(o);
  for (int i = 0; i < 100; ++i) recorder_->Record(JobEvent("j" + std::to_string(i), "Pending", "waiting"));
  const EventRecorderStats s = recorder_->stats();
  EXPECT_LE(s.recorded, 5u);  // the queue, and at most one taken by the writer
  EXPECT_GE(s.dropped_full, 95u);
  EXPECT_EQ(s.recorded + s.dropped_full, 100u);
}

// The limiter counts time on the injected clock: with time standing still
// only the burst is written; as time moves on, the rest follows.
TEST_F(EventRecorderTest, TheRateLimitHoldsABurstBeyondItsAllowance) {
  base::SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  EventRecorderOptions o;
  o.clock = &clock;
  o.writes_per_second = 1;
  o.burst = 5;
  StartRecorder(o);
  for (int i = 0; i < 15; ++i) recorder_->Record(JobEvent("j" + std::to_string(i), "Pending", "waiting"));
  ASSERT_TRUE(WaitFor([&] { return recorder_->stats().created == 5; }));
  absl::SleepFor(absl::Milliseconds(300));  // time stands still: nothing more may be written
  EXPECT_EQ(fake_->List(kNewEvents).size(), 5u);
  // Each 5 s refill the bucket (it holds at most the burst of 5).
  clock.AdvanceTime(absl::Seconds(10));
  ASSERT_TRUE(WaitFor([&] { return recorder_->stats().created == 10; }));
  clock.AdvanceTime(absl::Seconds(10));
  ASSERT_TRUE(Drained());
  EXPECT_EQ(fake_->List(kNewEvents).size(), 15u);
}

}  // namespace
}  // namespace gangkeeper::kube
