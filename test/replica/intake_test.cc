// gangkeeper: the intake in a real etcd (replica/intake.h): registrations
// written by any replica reach the leader's broker in order, a new leader
// applies exactly the events its predecessor had not, and applied events
// are cleaned up.
#include "gangkeeper/replica/intake.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gangkeeper/store/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_fixture.h"
#include "test/testing/etcd_process.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::replica {
namespace {

using ::gangkeeper::testing::EtcdFixture;
using ::gangkeeper::testing::GpuGang;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

TEST(IntakeCodecTest, EveryKindOfEventRoundTrips) {
  IntakeEvent reg{.type = IntakeEvent::Type::kRegister, .workload = GpuGang("train", 4, 2)};
  reg.workload.annotations["gangkeeper.io/note"] = "x";
  absl::StatusOr<IntakeEvent> back = DecodeIntake(EncodeIntake(reg));
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->type, IntakeEvent::Type::kRegister);
  EXPECT_EQ(back->workload.name, "train");
  EXPECT_EQ(back->workload.uid, "uid-train");
  ASSERT_EQ(back->workload.pod_sets.size(), 1u);
  EXPECT_EQ(back->workload.pod_sets[0].count, 4);
  EXPECT_EQ(back->workload.annotations.at("gangkeeper.io/note"), "x");

  IntakeEvent fin{.type = IntakeEvent::Type::kFinish, .key = {"a", "train"}, .uid = "u1"};
  back = DecodeIntake(EncodeIntake(fin));
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->type, IntakeEvent::Type::kFinish);
  EXPECT_EQ(back->key.name, "train");
  EXPECT_EQ(back->uid, "u1");
}

TEST(IntakeCodecTest, AReviewsAuditEventRoundTripsAndPolicyChangesAreNotIntake) {
  IntakeEvent review{.type = IntakeEvent::Type::kReview, .key = {"a", "big"}, .uid = "u9",
                             .actor = "alice", .what = R"({"action":"review.denied"})"};
  absl::StatusOr<IntakeEvent> back = DecodeIntake(EncodeIntake(review));
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->type, IntakeEvent::Type::kReview);
  EXPECT_EQ(back->key.name, "big");
  EXPECT_EQ(back->uid, "u9");
  EXPECT_EQ(back->actor, "alice");
  EXPECT_EQ(back->what, review.what);
  EXPECT_THAT(DecodeIntake(EncodeIntake({.type = IntakeEvent::Type::kPolicies})).status(),
              StatusIs(absl::StatusCode::kDataLoss, "their own key"));
}

TEST(IntakeCodecTest, DamagedEventsAreErrorsNotCrashes) {
  const std::string good = EncodeIntake({.type = IntakeEvent::Type::kRegister, .workload = GpuGang("t", 1, 1)});
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeIntake(good.substr(0, n)).ok()) << "truncated to " << n;
  }
  std::string future = good;
  future[0] = 9;
  EXPECT_THAT(DecodeIntake(future).status(), StatusIs(absl::StatusCode::kDataLoss, "upgrade every replica"));
  EXPECT_THAT(DecodeIntake(good + "x").status(), StatusIs(absl::StatusCode::kDataLoss, "left over"));
}

class IntakeTest : public EtcdFixture {
 protected:
  // A leader: the state from etcd, the term's broker created from it, the feeder.
  struct Leader {
    std::unique_ptr<store::EtcdJournal> journal;
    std::unique_ptr<broker::Broker> broker;
    std::unique_ptr<IntakeFeeder> feeder;
  };
  Leader StartLeader(IntakeFeeder::OnReview on_review = nullptr) {
    Leader l;
    const etcd::Compare term = NewTerm();
    store::EtcdRecovery r;
    absl::StatusOr<broker::DurableState> state = store::ReadState(client_.get(), prefix_, &r);
    EXPECT_THAT(state.status(), IsOk());
    l.journal = std::make_unique<store::EtcdJournal>(client_.get(), store::EtcdJournalOptions{.prefix = prefix_},
                                                     r.next_record, term);
    // The term's broker, from the state, with the term's journal.
    auto b = broker::Broker::Create(policies_, {}, nullptr, l.journal.get(), &clock_, &*state);
    EXPECT_THAT(b.status(), IsOk());
    l.broker = *std::move(b);
    l.broker->Start();
    l.feeder = std::make_unique<IntakeFeeder>(client_.get(), prefix_, r.intake_revision, l.broker.get(),
                                              std::move(on_review));
    return l;
  }

  // Waits (at most 10 s) until `b` tracks every name in `names`.
  static bool Tracks(const broker::Broker& b, const std::vector<std::string>& names) {
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (const std::string& n : names) all = all && b.snapshot()->Find({"a", n}) != nullptr;
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // How many changes of each type the records hold, over every record.
  std::map<broker::StateChange::Type, int> ChangeTypes() {
    std::map<broker::StateChange::Type, int> out;
    etcd::RangeOptions o;
    o.range_end = etcd::PrefixEnd(store::JournalPrefix(prefix_));
    absl::StatusOr<etcd::RangeResult> all = client_->Range(store::JournalPrefix(prefix_), o);
    EXPECT_THAT(all.status(), IsOk());
    if (!all.ok()) return out;
    for (const etcd::KeyValue& kv : all->kvs) {
      broker::DurableState scratch;
      std::vector<broker::StateChange> changes;
      EXPECT_THAT(store::ApplyBatch(kv.value, *store::RecordOfKey(prefix_, kv.key), &scratch, &changes), IsOk());
      for (const broker::StateChange& c : changes) ++out[c.type];
    }
    return out;
  }

  // How many times each workload was registered, over every record.
  std::map<std::string, int> Registrations() {
    std::map<std::string, int> out;
    etcd::RangeOptions o;
    o.range_end = etcd::PrefixEnd(store::JournalPrefix(prefix_));
    absl::StatusOr<etcd::RangeResult> all = client_->Range(store::JournalPrefix(prefix_), o);
    EXPECT_THAT(all.status(), IsOk());
    if (!all.ok()) return out;
    for (const etcd::KeyValue& kv : all->kvs) {
      broker::DurableState scratch;
      std::vector<broker::StateChange> changes;
      EXPECT_THAT(store::ApplyBatch(kv.value, *store::RecordOfKey(prefix_, kv.key), &scratch, &changes), IsOk());
      for (const broker::StateChange& c : changes) {
        if (c.type == broker::StateChange::Type::kRegistered) ++out[c.key.name];
      }
    }
    return out;
  }

  std::shared_ptr<const model::PolicySet> policies_ = testing::PoliciesFrom(testing::kOneTeamPolicies);
};

TEST_F(IntakeTest, RegistrationsFromEveryReplicaReachTheLeaderAndAreCleanedUp) {
  Leader leader = StartLeader();
  IntakeRegistry one(client_.get(), prefix_, "replica-1", leader.broker.get(), &base::RealClock());
  IntakeRegistry two(client_.get(), prefix_, "replica-2", leader.broker.get(), &base::RealClock());
  ASSERT_THAT(one.Register(GpuGang("first", 2, 2), "team-a"), IsOk());
  ASSERT_THAT(two.Register(GpuGang("second", 1, 2), "team-a"), IsOk());
  ASSERT_THAT(one.Register(GpuGang("first", 2, 2), "team-a"), IsOk());  // a retried review
  ASSERT_TRUE(Tracks(*leader.broker, {"first", "second"}));
  // The registry's reads come from the local broker.
  std::optional<broker::WorkloadRecord> first = two.Find({"a", "first"});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->state, broker::WorkloadState::kAdmitted);

  ASSERT_THAT(two.Finish({"a", "first"}, ""), IsOk());
  for (int i = 0; i < 200 && leader.broker->snapshot()->Find({"a", "first"}) != nullptr; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(leader.broker->snapshot()->Find({"a", "first"}), nullptr);

  // Applied events go; how far is recorded with the journal.
  etcd::RangeOptions o;
  o.range_end = etcd::PrefixEnd(IntakePrefix(prefix_));
  o.count_only = true;
  int64_t left = -1;
  for (int i = 0; i < 100 && left != 0; ++i) {
    absl::StatusOr<etcd::RangeResult> r = client_->Range(IntakePrefix(prefix_), o);
    ASSERT_THAT(r.status(), IsOk());
    left = r->count;
    if (left != 0) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(left, 0);
  store::EtcdRecovery r;
  ASSERT_THAT(store::ReadState(client_.get(), prefix_, &r).status(), IsOk());
  EXPECT_GT(r.intake_revision, 0);
  EXPECT_GE(leader.feeder->stats().submitted, 4u);
  EXPECT_EQ(Registrations(), (std::map<std::string, int>{{"first", 1}, {"second", 1}}));
}

TEST_F(IntakeTest, ANewLeaderAppliesExactlyWhatItsPredecessorHadNot) {
  {
    Leader old = StartLeader();
    IntakeRegistry r(client_.get(), prefix_, "replica-1", old.broker.get(), &base::RealClock());
    for (int i = 0; i < 5; ++i) ASSERT_THAT(r.Register(GpuGang(absl::StrCat("early", i), 1, 1), ""), IsOk());
    ASSERT_TRUE(Tracks(*old.broker, {"early0", "early1", "early2", "early3", "early4"}));
    // The old leader dies: its feeder and broker stop where they are.
    old.feeder->Stop();
    old.broker->Stop();
  }
  // Replicas keep taking registrations while nobody leads.
  auto view = broker::Broker::Create(policies_, {}, nullptr, nullptr, &clock_);
  ASSERT_THAT(view.status(), IsOk());
  IntakeRegistry r(client_.get(), prefix_, "replica-2", view->get(), &base::RealClock());
  for (int i = 0; i < 5; ++i) ASSERT_THAT(r.Register(GpuGang(absl::StrCat("late", i), 1, 1), ""), IsOk());

  Leader next = StartLeader();
  ASSERT_TRUE(Tracks(*next.broker, {"early0", "early4", "late0", "late4"}));
  ASSERT_TRUE(next.broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(next.feeder->stats().submitted, 5u) << "only the events the old leader had not applied";
  std::map<std::string, int> regs = Registrations();
  EXPECT_EQ(regs.size(), 10u);
  for (const auto& [name, times] : regs) EXPECT_EQ(times, 1) << name;
}

TEST_F(IntakeTest, ABacklogOfMoreThanOnePageIsAppliedWhole) {
  // 1,200 registrations while nobody leads: more than one page of the
  // feeder's range (1,000 keys).
  auto view = broker::Broker::Create(policies_, {}, nullptr, nullptr, &clock_);
  ASSERT_THAT(view.status(), IsOk());
  IntakeRegistry r(client_.get(), prefix_, "replica-1", view->get(), &base::RealClock());
  constexpr int kBacklog = 1200;
  for (int i = 0; i < kBacklog; ++i) {
    ASSERT_THAT(r.Register(GpuGang(absl::StrCat("w", i), 1, 1), ""), IsOk());
  }
  Leader leader = StartLeader();
  ASSERT_TRUE(Tracks(*leader.broker, {"w0", "w999", "w1000", absl::StrCat("w", kBacklog - 1)}));
  ASSERT_TRUE(leader.broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(leader.broker->snapshot()->workload_count(), static_cast<size_t>(kBacklog));
  EXPECT_EQ(leader.feeder->stats().submitted, static_cast<uint64_t>(kBacklog));
}

TEST(IntakeCodecTest, APutsEventsRoundTripInOrderAndASingleEventStillReads) {
  std::vector<std::string> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(EncodeIntake({.type = IntakeEvent::Type::kRegister,
                                   .workload = GpuGang(absl::StrCat("w", i), 1, 1)}));
  }
  events.push_back(EncodeIntake({.type = IntakeEvent::Type::kRemove, .key = {"a", "w0"}}));
  const std::string value = EncodeIntakeBatch(events);
  absl::StatusOr<std::vector<IntakeEvent>> back = DecodeIntakeValue(value);
  ASSERT_THAT(back.status(), IsOk());
  ASSERT_EQ(back->size(), 4u);
  EXPECT_EQ((*back)[0].workload.name, "w0");
  EXPECT_EQ((*back)[2].workload.name, "w2");
  EXPECT_EQ((*back)[3].type, IntakeEvent::Type::kRemove);
  // A value written before puts carried batches: one event.
  back = DecodeIntakeValue(events[1]);
  ASSERT_THAT(back.status(), IsOk());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].workload.name, "w1");
  for (size_t n = 0; n < value.size(); ++n) {
    EXPECT_FALSE(DecodeIntakeValue(value.substr(0, n)).ok()) << "truncated to " << n;
  }
  EXPECT_THAT(DecodeIntakeValue(value + "x").status(), StatusIs(absl::StatusCode::kDataLoss, "left over"));
  EXPECT_THAT(DecodeIntakeValue(EncodeIntakeBatch({})).status(), StatusIs(absl::StatusCode::kDataLoss, "no events"));
}

TEST_F(IntakeTest, ConcurrentChangesOnOneReplicaShareItsPutsAndEveryOneArrivesOnce) {
  Leader leader = StartLeader();
  IntakeRegistry r(client_.get(), prefix_, "replica-1", leader.broker.get(), &base::RealClock());
  constexpr int kThreads = 16, kEach = 20;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        if (!r.Register(GpuGang(absl::StrCat("t", t, "-", i), 1, 1), "").ok()) ++failed;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(r.events(), static_cast<uint64_t>(kThreads * kEach));
  EXPECT_LT(r.written(), r.events()) << "sixteen writers at once never shared a put";
  std::vector<std::string> names;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) names.push_back(absl::StrCat("t", t, "-", i));
  }
  ASSERT_TRUE(Tracks(*leader.broker, names));
  ASSERT_TRUE(leader.broker->Flush(absl::Seconds(10)));
  std::map<std::string, int> regs = Registrations();
  EXPECT_EQ(regs.size(), names.size());
  for (const auto& [name, times] : regs) EXPECT_EQ(times, 1) << name;
}

TEST_F(IntakeTest, ALeaderThatStoppedInsideAPutsEventsIsFollowedByOneThatAppliesTheRest) {
  // One put of four events; the journal says the first two were applied.
  std::vector<std::string> events;
  for (const char* name : {"a0", "a1", "a2", "a3"}) {
    events.push_back(EncodeIntake({.type = IntakeEvent::Type::kRegister, .workload = GpuGang(name, 1, 1)}));
  }
  absl::StatusOr<int64_t> put = client_->Put(IntakePrefix(prefix_) + "replica-1/1-00000000000000000001.4",
                                             EncodeIntakeBatch(events));
  ASSERT_THAT(put.status(), IsOk());
  ASSERT_THAT(client_->Put(store::IntakeAppliedKey(prefix_), absl::StrCat(IntakePosition(*put, 1))).status(), IsOk());
  Leader leader = StartLeader();
  ASSERT_TRUE(Tracks(*leader.broker, {"a2", "a3"}));
  ASSERT_TRUE(leader.broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(leader.broker->snapshot()->Find({"a", "a0"}), nullptr);
  EXPECT_EQ(leader.broker->snapshot()->Find({"a", "a1"}), nullptr);
  EXPECT_EQ(leader.feeder->stats().submitted, 2u);
  EXPECT_EQ(leader.feeder->stats().last_position, IntakePosition(*put, 3));
}

TEST_F(IntakeTest, AWriteWithoutEtcdIsUnavailableAndNotAcknowledged) {
  auto view = broker::Broker::Create(policies_, {}, nullptr, nullptr, &clock_);
  ASSERT_THAT(view.status(), IsOk());
  IntakeRegistry r(client_.get(), prefix_, "replica-1", view->get(), &base::RealClock());
  etcd_->Kill();
  EXPECT_THAT(r.Register(GpuGang("lost", 1, 1), ""), StatusIs(absl::StatusCode::kUnavailable, "etcd"));
}

// A replica older than the audit stream sends its denied reviews' audit
// events through the intake (kReview): the leader hands them to on_review
// (the node writes them to the audit stream) and records nothing in the
// state log; the intake moves on.
TEST_F(IntakeTest, AnOlderReplicasReviewGoesToOnReviewNotToTheStateLog) {
  absl::Mutex mu;
  std::vector<std::string> reviews;
  Leader leader = StartLeader([&](const std::string& what) {
    absl::MutexLock lock(&mu);
    reviews.push_back(what);
  });
  IntakeEvent review{.type = IntakeEvent::Type::kReview, .key = {"a", "too-big"}, .uid = "u1",
                     .actor = "alice", .what = R"({"action":"review.denied"})"};
  ASSERT_THAT(client_->Put(IntakePrefix(prefix_) + "old-replica/1-00000000000000000001",
                           EncodeIntakeBatch({EncodeIntake(review)}))
                  .status(),
              IsOk());
  IntakeRegistry one(client_.get(), prefix_, "replica-1", leader.broker.get(), &base::RealClock());
  ASSERT_THAT(one.Register(GpuGang("after", 1, 1), "team-a"), IsOk());
  ASSERT_TRUE(Tracks(*leader.broker, {"after"}));
  {
    absl::MutexLock lock(&mu);
    EXPECT_THAT(reviews, ::testing::ElementsAre(R"({"action":"review.denied"})"));
  }
  EXPECT_EQ(ChangeTypes().count(broker::StateChange::Type::kReviewed), 0u);
}

}  // namespace
}  // namespace gangkeeper::replica
