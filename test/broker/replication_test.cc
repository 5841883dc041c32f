// gangkeeper: the roles when several replicas share one store (roles.h,
// broker.h). A follower's ReadOnlyView shows what the leader made durable
// and changes nothing; a new term's Broker starts from the durable state,
// sends again what was not confirmed and schedules at once; the front ends
// follow the role through a SwitchingPort; intake events reach the sink
// with the batch that applied them.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/roles.h"
#include "gangkeeper/store/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::testing::GpuGang;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// An event as a replica's intake hands it over: with its place in the store.
Event Intake(Event e, int64_t revision) {
  e.intake_revision = revision;
  return e;
}

// Keeps every batch, encoded as a journal would, and folds them into the
// durable state a replica would read back.
class RecordingSink : public StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    intake_.push_back(batch.intake_revision);
    if (batch.changes.empty() && batch.policies == nullptr) return position_;
    ++position_;
    if (absl::Status s = store::ApplyBatch(store::EncodeBatch(batch), position_, &state_); !s.ok()) return s;
    return position_;
  }
  DurableState state() {
    absl::MutexLock lock(&mu_);
    return state_;
  }
  // The intake revision each batch carried.
  std::vector<int64_t> intake() {
    absl::MutexLock lock(&mu_);
    return intake_;
  }

 private:
  absl::Mutex mu_;
  uint64_t position_ = 0;
  DurableState state_;
  std::vector<int64_t> intake_;
};

// Records what it is asked to do; answers nothing (a release in flight).
class SilentActuator : public Actuator {
 public:
  void Release(const ReleaseOrder& order) override {
    absl::MutexLock lock(&mu_);
    releases_.push_back(order.key.name);
  }
  void Suspend(const SuspendOrder& order) override {
    absl::MutexLock lock(&mu_);
    suspends_.push_back(order.key.name);
  }
  std::vector<std::string> releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> releases_, suspends_;
};

std::map<std::string, std::string> Phases(const Snapshot& snap) {
  std::map<std::string, std::string> out;
  snap.ForEachWorkload([&](const WorkloadInfo& w) { out[w.key.name] = PhaseName(w.phase); });
  return out;
}

class ReplicationTest : public ::testing::Test {
 protected:
  std::unique_ptr<Broker> NewBroker(StateSink* sink, Actuator* actuator) {
    auto b = Broker::Create(policies_, {}, actuator, sink, &clock_);
    EXPECT_THAT(b.status(), IsOk());
    (*b)->Start();
    return *std::move(b);
  }

  std::shared_ptr<const model::PolicySet> policies_ = testing::PoliciesFrom(testing::kOneTeamPolicies);
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
};

TEST_F(ReplicationTest, TheSinkLearnsHowFarTheIntakeIsAppliedWithTheChanges) {
  RecordingSink sink;
  SilentActuator actuator;
  std::unique_ptr<Broker> leader = NewBroker(&sink, &actuator);
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  const size_t start = sink.intake().size();  // the batch that recorded the policies
  leader->Submit(Intake(Event::Add(GpuGang("one", 2, 2)), 11));
  leader->Submit(Intake(Event::Add(GpuGang("two", 2, 1)), 12));
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  ASSERT_GT(sink.intake().size(), start);
  EXPECT_EQ(sink.intake().back(), 12);
  EXPECT_EQ(Phases(*leader->snapshot()), (std::map<std::string, std::string>{{"one", "reserved"}, {"two", "reserved"}}));
  EXPECT_THAT(actuator.releases(), UnorderedElementsAre("one", "two"));

  // The same registration again (another replica's retry) changes nothing,
  // but the sink still hears that the intake moved on.
  const size_t before = sink.intake().size();
  leader->Submit(Intake(Event::Add(GpuGang("one", 2, 2)), 13));
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  ASSERT_EQ(sink.intake().size(), before + 1);
  EXPECT_EQ(sink.intake().back(), 13);

  leader->Submit(Intake(Event::Finish({"a", "one"}, "uid-one"), 14));
  // A removal naming another object of the same name changes nothing.
  leader->Submit(Intake(Event::Remove({"a", "two"}, "uid-older"), 15));
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  EXPECT_EQ(sink.intake().back(), 15);
  EXPECT_EQ(Phases(*leader->snapshot()), (std::map<std::string, std::string>{{"two", "reserved"}}));
}

TEST_F(ReplicationTest, AFollowerShowsTheDurableStateAndRefusesChanges) {
  RecordingSink sink;
  SilentActuator leader_actuator;
  std::unique_ptr<Broker> leader = NewBroker(&sink, &leader_actuator);
  ASSERT_THAT(leader->SubmitAndWait(broker::Event::Add(GpuGang("big", 2, 3))), IsOk());
  ASSERT_THAT(leader->SubmitAndWait(broker::Event::Add(GpuGang("wide", 4, 1))), IsOk());
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));

  // A follower: a read-only view, with no scheduler thread and no actuator.
  auto follower = ReadOnlyView::Create(policies_, {}, &clock_);
  ASSERT_THAT(follower.status(), IsOk());
  ASSERT_THAT((*follower)->Show(sink.state()), IsOk());
  EXPECT_EQ(Phases(*(*follower)->snapshot()), Phases(*leader->snapshot()));
  ASSERT_NE((*follower)->snapshot()->FindClusterQueue("team-a"), nullptr);
  EXPECT_EQ((*follower)->snapshot()->PendingIn("team-a"), 1);

  EXPECT_THAT((*follower)->SubmitAndWait(broker::Event::Add(GpuGang("direct", 1, 1))),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  (*follower)->Submit(Intake(Event::Add(GpuGang("queued", 1, 1)), 1));
  EXPECT_THAT((*follower)->SubmitAndWait(Event::Flush()), IsOk());
  EXPECT_EQ((*follower)->snapshot()->Find({"a", "queued"}), nullptr);

  // Newer states replace the shown one, removals included.
  ASSERT_THAT(leader->SubmitAndWait(broker::Event::Remove({"a", "wide"}, "")), IsOk());
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  ASSERT_THAT((*follower)->Show(sink.state()), IsOk());
  EXPECT_EQ(Phases(*(*follower)->snapshot()), (std::map<std::string, std::string>{{"big", "reserved"}}));
}

TEST_F(ReplicationTest, ANewLeaderResendsWhatWasNotConfirmedAndSchedulesAtOnce) {
  RecordingSink sink;
  SilentActuator old_actuator;
  std::shared_ptr<Broker> old_leader = NewBroker(&sink, &old_actuator);
  SwitchingPort front(old_leader);
  ASSERT_THAT(old_leader->SubmitAndWait(broker::Event::Add(GpuGang("big", 2, 3))), IsOk());  // released, never confirmed
  ASSERT_THAT(old_leader->SubmitAndWait(broker::Event::Add(GpuGang("next", 1, 4))), IsOk());  // waits for big
  ASSERT_TRUE(old_leader->Flush(absl::Seconds(10)));
  EXPECT_THAT(old_actuator.releases(), ElementsAre("big"));

  // The old leader's term ends: its broker stops, and the front ends switch
  // to a follower's view of the store. Late answers to the old term are
  // refused there.
  auto view = ReadOnlyView::Create(policies_, {}, &clock_);
  ASSERT_THAT(view.status(), IsOk());
  old_leader->Stop();
  (*view)->Show(old_leader->snapshot());
  front.Switch(*view);
  old_leader.reset();
  EXPECT_EQ(Phases(*front.snapshot()), (std::map<std::string, std::string>{{"big", "reserved"}, {"next", "pending"}}));
  front.Submit(broker::Event::ReleaseResult({"a", "big"}, "uid-big", absl::OkStatus()));
  EXPECT_THAT(front.SubmitAndWait(broker::Event::Finish({"a", "big"}, "")),
              StatusIs(absl::StatusCode::kFailedPrecondition));

  // Another replica takes over with a broker of its own for the new term,
  // from the store.
  RecordingSink new_sink;
  SilentActuator new_actuator;
  DurableState state = sink.state();
  auto created = Broker::Create(policies_, {}, &new_actuator, &new_sink, &clock_, &state);
  ASSERT_THAT(created.status(), IsOk());
  std::shared_ptr<Broker> replica = *std::move(created);
  replica->Start();
  front.Switch(replica);
  ASSERT_TRUE(replica->Flush(absl::Seconds(10)));
  EXPECT_THAT(new_actuator.releases(), ElementsAre("big"));

  // It schedules: big finishes, next is admitted and released by the new
  // leader; the old one sent nothing more.
  ASSERT_THAT(front.SubmitAndWait(broker::Event::Finish({"a", "big"}, "")), IsOk());
  ASSERT_TRUE(replica->Flush(absl::Seconds(10)));
  EXPECT_THAT(new_actuator.releases(), ElementsAre("big", "next"));
  EXPECT_THAT(old_actuator.releases(), ElementsAre("big"));
  EXPECT_EQ(Phases(*front.snapshot()), (std::map<std::string, std::string>{{"next", "reserved"}}));
  replica->Stop();
}

TEST_F(ReplicationTest, ALeaderOfAnEmptyStoreRecordsThePoliciesItRunsWith) {
  RecordingSink sink;
  DurableState empty;
  auto created = Broker::Create(policies_, {}, nullptr, &sink, &clock_, &empty);
  ASSERT_THAT(created.status(), IsOk());
  std::unique_ptr<Broker> replica = *std::move(created);
  replica->Start();
  ASSERT_TRUE(replica->Flush(absl::Seconds(10)));
  ASSERT_NE(sink.state().policies, nullptr);
  EXPECT_EQ(sink.state().policies->cluster_queues.size(), 1u);
  ASSERT_THAT(replica->SubmitAndWait(broker::Event::Add(GpuGang("one", 1, 1))), IsOk());
  ASSERT_TRUE(replica->Flush(absl::Seconds(10)));
  EXPECT_TRUE(sink.state().workloads.contains(DurableKey(InstanceKey{WorkloadKey{"a", "one"}, "uid-one"})));
}

TEST_F(ReplicationTest, AFollowersTotalsGoOnFromTheLastTerm) {
  RecordingSink sink;
  SilentActuator actuator;
  std::unique_ptr<Broker> leader = NewBroker(&sink, &actuator);
  ASSERT_THAT(leader->SubmitAndWait(broker::Event::Add(GpuGang("big", 2, 3))), IsOk());
  ASSERT_TRUE(leader->Flush(absl::Seconds(10)));
  leader->Stop();
  const uint64_t admitted = leader->snapshot()->stats().admitted;
  ASSERT_GT(admitted, 0u);
  auto view = ReadOnlyView::Create(policies_, {}, &clock_);
  ASSERT_THAT(view.status(), IsOk());
  (*view)->Show(leader->snapshot());
  ASSERT_THAT((*view)->Show(sink.state()), IsOk());
  EXPECT_EQ((*view)->snapshot()->stats().admitted, admitted);
  EXPECT_EQ(Phases(*(*view)->snapshot()), (std::map<std::string, std::string>{{"big", "reserved"}}));
}

}  // namespace
}  // namespace gangkeeper::broker
