// Tests for EventPublisher: a real broker's decisions become Events in a
// FakeKubeApi (a real HTTPS server on loopback), as `kubectl describe job`
// would show them: one Pending Event with the reason in numbers for a job
// that must wait (and none more while nothing changes), QuotaReserved and
// Admitted, a Preempted Warning naming the preemptor.
#include "gangkeeper/kube/event_publisher.h"

#include <memory>
#include <string>
#include <vector>

#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/kube/fake_cluster.h"
#include "test/testing/gangs.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"
#include "test/testing/wait.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::WaitFor;
using ::testing::HasSubstr;

constexpr char kJobEvents[] = "/apis/events.k8s.io/v1/namespaces/a/events";

class EventPublisherTest : public FakeClusterTest {
 protected:
  void SetUp() override {
    FakeClusterTest::SetUp();
    EventRecorderOptions ro;
    ro.clock = &base::RealClock();
    recorder_ = std::make_unique<EventRecorder>(client_.get(), ro);
    recorder_->Start();
    broker::BrokerOptions bo;
    EventPublisherOptions po;
    po.pending_check = absl::Hours(1);  // the test calls CheckPending itself
    publisher_ = std::make_unique<EventPublisher>(recorder_.get(), &port_, po);
    bo.observers.push_back(publisher_.get());
    auto b = broker::Broker::Create(::gangkeeper::testing::PoliciesFrom(::gangkeeper::testing::kOneTeamPolicies), bo,
                                    nullptr, nullptr, &base::RealClock());
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    port_.broker = broker_.get();
    broker_->Start();
  }
  void TearDown() override {
    if (broker_ != nullptr) broker_->Stop();
    publisher_.reset();
    if (recorder_ != nullptr) recorder_->Stop();
  }

  void Add(workload::Workload w) { ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(std::move(w))), IsOk()); }
  void Settle() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }
  bool Drained() {
    return WaitFor([&] {
      const EventRecorderStats s = recorder_->stats();
      return s.created + s.series_updates + s.failed == s.recorded;
    });
  }
  // The Events about `name`, by reason.
  std::vector<json> EventsAbout(const std::string& name, const std::string& reason) {
    std::vector<json> out;
    for (const json& e : fake_->List(kJobEvents)) {
      if (e["regarding"]["name"] == name && e["reason"] == reason) out.push_back(e);
    }
    return out;
  }

  // The broker as a SnapshotSource for the publisher (it exists after the
  // publisher, which the broker's options must name).
  struct Port : broker::SnapshotSource {
    broker::Broker* broker = nullptr;
    std::shared_ptr<const broker::Snapshot> snapshot() const override { return broker->snapshot(); }
  };

  std::unique_ptr<EventRecorder> recorder_;
  std::unique_ptr<EventPublisher> publisher_;
  Port port_;
  std::unique_ptr<broker::Broker> broker_;
};

TEST_F(EventPublisherTest, AdmittedAndWaitingJobsGetTheirEventsOnce) {
  Add(::gangkeeper::testing::GpuGang("first", 2, 4));  // 8 of team-a's 8
  Add(::gangkeeper::testing::GpuGang("second", 1, 2));  // must wait
  Settle();
  publisher_->CheckPending();
  ASSERT_TRUE(Drained());

  std::vector<json> reserved = EventsAbout("first", "QuotaReserved");
  ASSERT_EQ(reserved.size(), 1u);
  EXPECT_THAT(reserved[0]["note"].get<std::string>(), HasSubstr("ClusterQueue team-a"));
  EXPECT_THAT(reserved[0]["note"].get<std::string>(), HasSubstr("nvidia.com/gpu=a100"));
  EXPECT_EQ(reserved[0]["regarding"]["kind"], "Job");
  EXPECT_EQ(reserved[0]["regarding"]["apiVersion"], "batch/v1");
  EXPECT_EQ(reserved[0]["regarding"]["uid"], "uid-first");
  EXPECT_EQ(EventsAbout("first", "Admitted").size(), 1u);
  EXPECT_TRUE(EventsAbout("first", "Pending").empty());

  std::vector<json> pending = EventsAbout("second", "Pending");
  ASSERT_EQ(pending.size(), 1u);
  const std::string note = pending[0]["note"].get<std::string>();
  EXPECT_THAT(note, HasSubstr("nvidia.com/gpu"));
  EXPECT_THAT(note, ::testing::ContainsRegex("[0-9]"));  // the numbers, not just a word
  EXPECT_EQ(pending[0]["type"], "Normal");

  // Cycles without a change write nothing new.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
    if (i % 100 == 0) publisher_->CheckPending();
  }
  ASSERT_TRUE(Drained());
  EXPECT_EQ(EventsAbout("second", "Pending").size(), 1u);
  EXPECT_FALSE(EventsAbout("second", "Pending")[0].contains("series"));
}

TEST_F(EventPublisherTest, APreemptedJobGetsAWarningNamingThePreemptor) {
  Add(::gangkeeper::testing::GpuGang("low", 2, 4, /*priority=*/0));
  Settle();
  Add(::gangkeeper::testing::GpuGang("urgent", 2, 4, /*priority=*/1000));
  Settle();
  ASSERT_TRUE(Drained());
  std::vector<json> preempted = EventsAbout("low", "Preempted");
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0]["type"], "Warning");
  const std::string note = preempted[0]["note"].get<std::string>();
  EXPECT_THAT(note, HasSubstr("a/urgent"));
  EXPECT_THAT(note, HasSubstr("ClusterQueue team-a"));
}

TEST_F(EventPublisherTest, AFollowerWritesNoPendingEvents) {
  EventPublisherOptions po;
  po.leading = [] { return false; };
  EventPublisher follower(recorder_.get(), &port_, po);
  Add(::gangkeeper::testing::GpuGang("big", 1, 16));  // can never fit
  Settle();
  follower.CheckPending();
  ASSERT_TRUE(Drained());
  EXPECT_TRUE(EventsAbout("big", "Pending").empty());
}

// An API server that refuses every Event (500) costs Events, never a
// decision: the broker admits on, the refusals are counted.
TEST_F(EventPublisherTest, RefusedEventsNeverHoldSchedulingUp) {
  ::gangkeeper::testing::ScriptedFailure f;
  f.method = "POST";
  f.status = 500;
  f.times = -1;
  fake_->Fail(f);
  for (int i = 0; i < 4; ++i) Add(::gangkeeper::testing::GpuGang("g" + std::to_string(i), 1, 2));
  Settle();
  int admitted = 0;
  broker_->snapshot()->ForEachWorkload([&](const broker::WorkloadInfo& w) { admitted += w.admission.has_value(); });
  EXPECT_EQ(admitted, 4);
  ASSERT_TRUE(Drained());
  EXPECT_GT(recorder_->stats().failed, 0u);
  EXPECT_TRUE(fake_->List(kJobEvents).empty());
}

}  // namespace
}  // namespace gangkeeper::kube
