// gangkeeper: EventQueue::SubmitAsync — the broker calls back once the
// batch holding the event is durable, exactly once, with what
// SubmitAndWait would have returned (timeouts and shutdown included), and
// the roles and registries built on it (#22: /validate's registration
// without a thread waiting).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/loop_round.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/roles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/gangs.h"
#include "test/testing/manual_round.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"
#include "test/testing/wait.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::WaitFor;

// One team on 8 GPUs; each job asks for one.
workload::Workload AsyncJob(const std::string& name) { return testing::GpuGang(name, 1, 1); }

// A sink whose Append waits until the test opens its gate (a slow fsync),
// and can fail.
class GatedSink : public StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    ++entered_;
    auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_; };
    mu_.AwaitWithTimeout(absl::Condition(&open), absl::Seconds(30));
    if (fail_) return absl::UnavailableError("disk full");
    int registered = 0;
    for (const StateChange& c : batch.changes) {
      if (c.type == StateChange::Type::kRegistered) {
        registered_.push_back(c.key.name);
        ++registered;
      }
    }
    if (registered > 0) registrations_per_batch_.push_back(registered);
    return ++position_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void Fail() {
    absl::MutexLock lock(&mu_);
    fail_ = true;
  }
  int entered() {
    absl::MutexLock lock(&mu_);
    return entered_;
  }
  std::vector<std::string> registered() {
    absl::MutexLock lock(&mu_);
    return registered_;
  }
  // How many registrations each durable batch that had any held.
  std::vector<int> registrations_per_batch() {
    absl::MutexLock lock(&mu_);
    return registrations_per_batch_;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  bool fail_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> registered_ ABSL_GUARDED_BY(mu_);
  std::vector<int> registrations_per_batch_ ABSL_GUARDED_BY(mu_);
};

// Collects the answers a callback gets.
class Answers {
 public:
  EventQueue::Ack Callback() {
    return [this](absl::Status s) {
      absl::MutexLock lock(&mu_);
      got_.push_back(std::move(s));
    };
  }
  std::vector<absl::Status> got() {
    absl::MutexLock lock(&mu_);
    return got_;
  }
  size_t count() { return got().size(); }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> got_;
};

class SubmitAsyncTest : public ::testing::Test {
 protected:
  std::unique_ptr<Broker> NewBroker(StateSink* sink, absl::Duration ack_timeout = absl::Seconds(30)) {
    BrokerOptions options;
    options.ack_timeout = ack_timeout;
    auto b = Broker::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), options, nullptr, sink, &clock_);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  // A started broker on `sink`, opened (a test's round hand-over).
  std::unique_ptr<Broker> StartedBroker(GatedSink* sink) {
    sink->Open();
    std::unique_ptr<Broker> b = NewBroker(sink);
    if (b != nullptr) b->Start();
    return b;
  }
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
};

TEST_F(SubmitAsyncTest, CallsBackOnceAfterTheBatchIsDurable) {
  GatedSink sink;
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  broker->Start();
  Answers answers;
  broker->SubmitAsync(Event::Add(AsyncJob("train")), answers.Callback());
  // The batch is in the sink, not yet durable: no answer.
  ASSERT_TRUE(WaitFor([&] { return sink.entered() >= 1; }));
  EXPECT_EQ(answers.count(), 0u);
  sink.Open();
  ASSERT_TRUE(WaitFor([&] { return answers.count() == 1; }));
  EXPECT_TRUE(answers.got()[0].ok()) << answers.got()[0];
  EXPECT_THAT(sink.registered(), ::testing::Contains("train"));
  EXPECT_TRUE(broker->snapshot()->Record({"a", "train"}).has_value());
  ASSERT_TRUE(broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(answers.count(), 1u);
}

TEST_F(SubmitAsyncTest, AnswersTheEventsOwnErrorAndTheStoresFailure) {
  GatedSink sink;
  sink.Open();
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  broker->Start();
  auto bad = std::make_shared<model::PolicySet>(*testing::PoliciesFrom(testing::kOneTeamPolicies));
  bad->cluster_queues["team-a"].resource_groups[0].flavors[0].resources[0].nominal =
      quantity::Quantity::FromUnits(-1);
  Answers invalid;
  broker->SubmitAsync(Event::Policies(bad), invalid.Callback());
  ASSERT_TRUE(WaitFor([&] { return invalid.count() == 1; }));
  EXPECT_THAT(invalid.got()[0], StatusIs(absl::StatusCode::kInvalidArgument));
  sink.Fail();
  Answers failed;
  broker->SubmitAsync(Event::Add(AsyncJob("x")), failed.Callback());
  ASSERT_TRUE(WaitFor([&] { return failed.count() == 1; }));
  EXPECT_THAT(failed.got()[0], StatusIs(absl::StatusCode::kUnavailable, "disk full"));
}

TEST_F(SubmitAsyncTest, ATimeoutAnswersUnavailableAndTheLateAckIsNotDeliveredAgain) {
  GatedSink sink;  // closed: the batch hangs in Append
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  broker->Start();
  Answers answers;
  broker->SubmitAsync(Event::Add(AsyncJob("slow")), answers.Callback(), absl::Milliseconds(200));
  ASSERT_TRUE(WaitFor([&] { return answers.count() == 1; }));
  EXPECT_THAT(answers.got()[0], StatusIs(absl::StatusCode::kUnavailable, "did not confirm within"));
  sink.Open();
  ASSERT_TRUE(broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(answers.count(), 1u);
}

TEST_F(SubmitAsyncTest, StopAppliesWhatIsQueuedAndAnswersEveryCallbackOnce) {
  GatedSink sink;
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  broker->Start();
  Answers answers;
  for (int i = 0; i < 20; ++i) broker->SubmitAsync(Event::Add(AsyncJob("j" + std::to_string(i))), answers.Callback());
  ASSERT_TRUE(WaitFor([&] { return sink.entered() >= 1; }));
  std::thread stopper([&] { broker->Stop(); });
  sink.Open();
  stopper.join();
  ASSERT_EQ(answers.count(), 20u);
  for (const absl::Status& s : answers.got()) EXPECT_TRUE(s.ok()) << s;
  // After Stop: answered at once, on this thread.
  Answers late;
  broker->SubmitAsync(Event::Add(AsyncJob("late")), late.Callback());
  ASSERT_EQ(late.count(), 1u);
  EXPECT_THAT(late.got()[0], StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
}

TEST_F(SubmitAsyncTest, StopAnswersWhatABrokerNeverStartedHolds) {
  GatedSink sink;
  sink.Open();
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  Answers answers;
  broker->SubmitAsync(Event::Add(AsyncJob("never")), answers.Callback());
  EXPECT_EQ(answers.count(), 0u);
  broker->Stop();
  ASSERT_EQ(answers.count(), 1u);
  EXPECT_THAT(answers.got()[0], StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(SubmitAsyncTest, AReadOnlyViewRefusesChangesAndAnswersAFlush) {
  auto view = ReadOnlyView::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), BrokerOptions(), &clock_);
  ASSERT_TRUE(view.ok()) << view.status();
  Answers change;
  (*view)->SubmitAsync(Event::Add(AsyncJob("x")), change.Callback());
  ASSERT_EQ(change.count(), 1u);  // at once
  EXPECT_THAT(change.got()[0], StatusIs(absl::StatusCode::kFailedPrecondition, "follows the leader"));
  Answers flush;
  (*view)->SubmitAsync(Event::Flush(), flush.Callback());
  ASSERT_EQ(flush.count(), 1u);
  EXPECT_TRUE(flush.got()[0].ok());
}

TEST_F(SubmitAsyncTest, ASwitchingPortSendsToTheRoleOfTheMoment) {
  auto view = ReadOnlyView::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), BrokerOptions(), &clock_);
  ASSERT_TRUE(view.ok()) << view.status();
  GatedSink sink;
  sink.Open();
  std::unique_ptr<Broker> owned = NewBroker(&sink);
  ASSERT_NE(owned, nullptr);
  std::shared_ptr<Broker> broker(std::move(owned));
  broker->Start();
  SwitchingPort port(*view);
  Answers following;
  port.SubmitAsync(Event::Add(AsyncJob("a")), following.Callback());
  ASSERT_EQ(following.count(), 1u);
  EXPECT_THAT(following.got()[0], StatusIs(absl::StatusCode::kFailedPrecondition));
  port.Switch(broker);
  Answers leading;
  port.SubmitAsync(Event::Add(AsyncJob("b")), leading.Callback());
  ASSERT_TRUE(WaitFor([&] { return leading.count() == 1; }));
  EXPECT_TRUE(leading.got()[0].ok()) << leading.got()[0];
}

TEST_F(SubmitAsyncTest, TheBrokerRegistryRegistersWithoutABlockingThread) {
  GatedSink sink;
  sink.Open();
  std::unique_ptr<Broker> broker = NewBroker(&sink);
  ASSERT_NE(broker, nullptr);
  broker->Start();
  std::unique_ptr<WorkloadRegistry> registry = NewBrokerRegistry(broker.get(), broker.get());
  std::atomic<int> ran_blocking{0};
  const BlockingRunner blocking = [&](absl::AnyInvocable<void()> work) {
    ++ran_blocking;
    work();
  };
  Answers answers;
  registry->RegisterAsync(AsyncJob("r"), "team-a", blocking, answers.Callback());
  ASSERT_TRUE(WaitFor([&] { return answers.count() == 1; }));
  EXPECT_TRUE(answers.got()[0].ok()) << answers.got()[0];
  EXPECT_EQ(ran_blocking.load(), 0);
  EXPECT_TRUE(registry->Find({"a", "r"}).has_value());
}

TEST_F(SubmitAsyncTest, ABlockingRegistryRunsItsCallThroughTheRunner) {
  std::unique_ptr<WorkloadRegistry> registry = NewInMemoryRegistry();
  std::vector<absl::AnyInvocable<void()>> pool;  // a worker pool the test drains
  const BlockingRunner blocking = [&](absl::AnyInvocable<void()> work) { pool.push_back(std::move(work)); };
  Answers answers;
  registry->RegisterAsync(AsyncJob("m"), "team-a", blocking, answers.Callback());
  EXPECT_EQ(answers.count(), 0u);  // not on the caller's thread
  ASSERT_EQ(pool.size(), 1u);
  pool[0]();
  ASSERT_EQ(answers.count(), 1u);
  EXPECT_TRUE(answers.got()[0].ok()) << answers.got()[0];
  EXPECT_TRUE(registry->Find({"a", "m"}).has_value());
}

using ::gangkeeper::testing::ManualRound;

TEST_F(SubmitAsyncTest, ALoopRoundsEventsReachTheBrokerTogetherWhenTheRoundEnds) {
  GatedSink sink;
  std::unique_ptr<Broker> broker = StartedBroker(&sink);
  ASSERT_NE(broker, nullptr);
  ManualRound round;
  Answers answers;
  {
    const base::ScopedRound on_loop(&round);
    for (int i = 0; i < 5; ++i) broker->SubmitAsync(Event::Add(AsyncJob("r" + std::to_string(i))), answers.Callback());
  }
  EXPECT_EQ(round.pending(), 1u);  // one deferred hand-over for the five
  // The broker has not seen them: a flush from another thread passes them.
  std::thread other([&] { EXPECT_TRUE(broker->Flush(absl::Seconds(10))); });
  other.join();
  EXPECT_EQ(answers.count(), 0u);
  EXPECT_THAT(sink.registered(), ::testing::IsEmpty());
  EXPECT_FALSE(broker->snapshot()->Record({"a", "r0"}).has_value());
  round.End();
  ASSERT_TRUE(WaitFor([&] { return answers.count() == 5; }));
  for (const absl::Status& s : answers.got()) EXPECT_TRUE(s.ok()) << s;
  // All five in one durable batch, in the order they were handed over.
  EXPECT_THAT(sink.registrations_per_batch(), ::testing::ElementsAre(5));
  EXPECT_THAT(sink.registered(), ::testing::ElementsAre("r0", "r1", "r2", "r3", "r4"));
}

TEST_F(SubmitAsyncTest, WhatALoopThreadSubmitsAfterwardsComesAfterItsOpenRound) {
  GatedSink sink;
  std::unique_ptr<Broker> broker = StartedBroker(&sink);
  ASSERT_NE(broker, nullptr);
  ManualRound round;
  Answers answers;
  const base::ScopedRound on_loop(&round);
  broker->SubmitAsync(Event::Add(AsyncJob("first")), answers.Callback());
  // A waiting call from the same thread: the round's event goes before it.
  const absl::Status removed = broker->SubmitAndWait(Event::Remove({"a", "first"}, ""));
  EXPECT_TRUE(removed.ok()) << removed;
  EXPECT_EQ(answers.count(), 1u);
  EXPECT_TRUE(answers.got()[0].ok()) << answers.got()[0];
  EXPECT_FALSE(broker->snapshot()->Record({"a", "first"}).has_value());  // added, then removed
  // The same for Flush.
  broker->SubmitAsync(Event::Add(AsyncJob("second")), answers.Callback());
  ASSERT_TRUE(broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(answers.count(), 2u);
  round.End();  // nothing left to hand over
  ASSERT_TRUE(broker->Flush(absl::Seconds(10)));
  EXPECT_EQ(answers.count(), 2u);
}

TEST_F(SubmitAsyncTest, ARoundThatNeverEndsAndABrokerThatStoppedAnswerUnavailable) {
  GatedSink sink;
  std::unique_ptr<Broker> broker = StartedBroker(&sink);
  ASSERT_NE(broker, nullptr);
  ManualRound round;
  Answers abandoned;
  Answers stopped;
  {
    const base::ScopedRound on_loop(&round);
    broker->SubmitAsync(Event::Add(AsyncJob("lost")), abandoned.Callback());
  }
  round.Abandon();
  ASSERT_EQ(abandoned.count(), 1u);
  EXPECT_THAT(abandoned.got()[0], StatusIs(absl::StatusCode::kUnavailable, "server stopped"));
  {
    const base::ScopedRound on_loop(&round);
    broker->SubmitAsync(Event::Add(AsyncJob("late")), stopped.Callback());
  }
  broker->Stop();
  EXPECT_EQ(stopped.count(), 0u);
  round.End();
  ASSERT_EQ(stopped.count(), 1u);
  EXPECT_THAT(stopped.got()[0], StatusIs(absl::StatusCode::kUnavailable, "shutting down"));
  EXPECT_THAT(sink.registered(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace gangkeeper::broker
