// WorkloadCounters (broker/counters.h) observing a real Broker: Kueue's
// workload counters by ClusterQueue and priority class, the evictions with
// their reason and cause, the preemptions by the preemptor's ClusterQueue,
// and each admission's wait (since creation, or since its last requeue).
#include "gangkeeper/broker/counters.h"

#include <string>
#include <tuple>
#include <vector>

#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::testing::GpuGang;
using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::Pair;

using Wait = std::tuple<std::string, std::string, absl::Duration>;

workload::Workload Classed(workload::Workload w, const std::string& priority_class) {
  w.priority_class = priority_class;
  return w;
}

class WorkloadCountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BrokerOptions o;
    o.observers.push_back(&counters_);
    auto b = Broker::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), o, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
  }
  void TearDown() override { broker_->Stop(); }

  // Waits for the broker's own answers (no actuator: released and stopped
  // at once) to be applied.
  void Settle() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::vector<Wait> waits_;
  std::vector<AdmittedGang> gangs_;
  WorkloadCounters counters_{[this](const AdmittedGang& g) {
    waits_.emplace_back(g.cluster_queue, g.priority_class, g.waited);
    gangs_.push_back(g);
  }};
  std::unique_ptr<Broker> broker_;
};

TEST_F(WorkloadCountersTest, AdmissionsAndFinishesCountByQueueAndPriorityClass) {
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("big", 1, 8), "training"))), IsOk());
  clock_.AdvanceTime(absl::Seconds(5));
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("next", 1, 8), "training"))), IsOk());  // waits
  clock_.AdvanceTime(absl::Seconds(7));
  ASSERT_THAT(broker_->SubmitAndWait(Event::Finish({"a", "big"}, "uid-big")), IsOk());
  Settle();
  const BrokerCounters c = counters_.counters();
  EXPECT_THAT(c.admitted, ElementsAre(Pair(Pair("team-a", "training"), 2u)));
  EXPECT_THAT(c.finished, ElementsAre(Pair(Pair("team-a", "training"), 1u)));
  EXPECT_TRUE(c.evicted.empty());
  EXPECT_TRUE(c.preempted.empty());
  // big was admitted as it arrived; next waited from its creation to big's end.
  EXPECT_THAT(waits_, ElementsAre(Wait{"team-a", "training", absl::ZeroDuration()},
                                  Wait{"team-a", "training", absl::Seconds(7)}));
  EXPECT_EQ(broker_->snapshot()->stats().admitted, 2u);
  // The same per LocalQueue (name, namespace, priority class).
  const std::vector<std::string> lq = {broker_->snapshot()->Find({"a", "next"})->local_queue, "a", "training"};
  EXPECT_THAT(c.local_admitted, ElementsAre(Pair(lq, 2u)));
  EXPECT_THAT(c.local_finished, ElementsAre(Pair(lq, 1u)));
  ASSERT_EQ(gangs_.size(), 2u);
  EXPECT_EQ(gangs_[1].namespace_name, "a");
  EXPECT_EQ(gangs_[1].local_queue, lq[0]);
}

TEST_F(WorkloadCountersTest, APreemptionCountsTheVictimsEvictionAndThePreemptorsQueue) {
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("low", 2, 4, 0), "batch"))), IsOk());
  clock_.AdvanceTime(absl::Seconds(3));
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("high", 1, 8, 100), "inference"))), IsOk());
  Settle();
  const BrokerCounters c = counters_.counters();
  EXPECT_THAT(c.evicted, ElementsAre(Pair(std::vector<std::string>{"team-a", "Preempted", "InClusterQueue", "batch"},
                                          1u)));
  EXPECT_THAT(c.preempted, ElementsAre(Pair(Pair("team-a", "InClusterQueue"), 1u)));
  EXPECT_THAT(c.admitted, ElementsAre(Pair(Pair("team-a", "batch"), 1u), Pair(Pair("team-a", "inference"), 1u)));
  // The preemptor waited from its creation until its victim was stopped.
  ASSERT_EQ(waits_.size(), 2u);
  EXPECT_EQ(std::get<1>(waits_[1]), "inference");
  EXPECT_EQ(std::get<2>(waits_[1]), absl::ZeroDuration());
}

TEST_F(WorkloadCountersTest, AReadmittedGangWaitedSinceItsRequeueNotSinceItsCreation) {
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("low", 2, 4, 0), "batch"))), IsOk());
  clock_.AdvanceTime(absl::Seconds(60));
  ASSERT_THAT(broker_->SubmitAndWait(Event::Add(Classed(GpuGang("high", 1, 8, 100), "inference"))), IsOk());
  Settle();  // low is preempted and requeued now (t = 60 s)
  clock_.AdvanceTime(absl::Seconds(4));
  ASSERT_THAT(broker_->SubmitAndWait(Event::Finish({"a", "high"}, "uid-high")), IsOk());
  Settle();
  ASSERT_EQ(waits_.size(), 3u);
  EXPECT_EQ(std::get<1>(waits_[2]), "batch");
  EXPECT_EQ(std::get<2>(waits_[2]), absl::Seconds(4));  // not 64 s
  EXPECT_THAT(counters_.counters().admitted,
              ElementsAre(Pair(Pair("team-a", "batch"), 2u), Pair(Pair("team-a", "inference"), 1u)));
}

}  // namespace
}  // namespace gangkeeper::broker
