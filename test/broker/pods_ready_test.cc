// gangkeeper: waitForPodsReady in the Scheduler (src/broker/pods_ready.cc),
// after Kueue's own cases (its podsready scheduler integration tests and
// its workload controller's requeue/deactivation cases), with a test's
// clock: every event carries its time, so nothing here waits.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/configuration.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;

// Two ClusterQueues of 4 GPUs each (no borrowing), a LocalQueue q in each
// of namespaces a and b.
constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: b}
spec: {clusterQueue: team-b}
)";

// `pods` pods of one GPU each, created at second `created`.
workload::Workload Gang(const std::string& ns, const std::string& name, int64_t pods, int created = 0) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "q";
  w.creation_timestamp = absl::FromUnixSeconds(1'700'000'000 + created);
  workload::PodSet ps;
  ps.name = "worker";
  ps.count = pods;
  ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(1);
  w.pod_sets.push_back(ps);
  return w;
}

absl::Time T(int64_t s) { return absl::FromUnixSeconds(1'700'000'000 + s); }

model::WaitForPodsReady Config(int timeout_s, std::optional<int64_t> limit = std::nullopt, bool block = false) {
  model::WaitForPodsReady w;
  w.enabled = true;
  w.timeout = absl::Seconds(timeout_s);
  w.recovery_timeout = absl::Seconds(timeout_s);
  w.block_admission = block;
  w.backoff_base_seconds = 60;
  w.backoff_max_seconds = 3600;
  w.backoff_limit_count = limit;
  return w;
}

class PodsReadyTest : public ::testing::Test {
 protected:
  void Start(const model::WaitForPodsReady& w) {
    SchedulerOptions o;
    o.wait_for_pods_ready = w;
    auto s = Scheduler::Create(testing::PoliciesFrom(kPolicies), o);
    ASSERT_THAT(s.status(), IsOk());
    s_ = *std::move(s);
  }
  const WorkloadInfo& Info(const std::string& ns, const std::string& name) {
    const WorkloadInfo* w = s_->Find({ns, name});
    EXPECT_NE(w, nullptr) << ns << "/" << name;
    static const WorkloadInfo kNone;
    return w == nullptr ? kNone : *w;
  }
  Phase PhaseOf(const std::string& ns, const std::string& name) { return Info(ns, name).phase; }
  // A scheduling pass at second `t`; the actuator's answers follow at
  // once: admitted gangs are released, evicted ones stop.
  void Pass(int64_t t) {
    s_->Schedule(T(t));
    ASSERT_THAT(s_->CheckInvariants(), IsOk());
    for (const StateChange& c : s_->TakeChanges()) {
      changes_.push_back(c);
      if (c.type == StateChange::Type::kAdmitted) {
        ASSERT_THAT(s_->ReleaseSucceeded(c.key, c.uid, T(t)), IsOk());
      }
      if (c.type == StateChange::Type::kEvicted) {
        ASSERT_THAT(s_->Stopped(c.key, c.uid, T(t)), IsOk());
      }
    }
    for (const StateChange& c : s_->TakeChanges()) changes_.push_back(c);
    ASSERT_THAT(s_->CheckInvariants(), IsOk());
  }
  void Ready(const std::string& ns, const std::string& name, int64_t ready, int64_t t) {
    ASSERT_THAT(s_->PodsReady({ns, name}, "uid-" + name, ready, T(t)), IsOk());
    ASSERT_THAT(s_->CheckInvariants(), IsOk());
  }
  std::vector<StateChange> Of(StateChange::Type type, const std::string& name) const {
    std::vector<StateChange> out;
    for (const StateChange& c : changes_) {
      if (c.type == type && c.key.name == name) out.push_back(c);
    }
    return out;
  }
  std::unique_ptr<Scheduler> s_;
  std::vector<StateChange> changes_;
};

TEST_F(PodsReadyTest, OffByDefaultAGangKeepsItsQuotaHoweverLongItsPodsTake) {
  Start(model::WaitForPodsReady{});
  ASSERT_THAT(s_->Add(Gang("a", "slow", 4), T(0)), IsOk());
  Pass(1);
  Pass(100000);
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kRunning);
  EXPECT_TRUE(Of(StateChange::Type::kEvicted, "slow").empty());
}

// Kueue: "Should requeue a workload which exceeded the timeout to reach
// PodsReady=True".
TEST_F(PodsReadyTest, NotReadyWithinTheTimeoutIsEvictedWholeAndRequeuedAfterTheBackoff) {
  Start(Config(300));
  ASSERT_THAT(s_->Add(Gang("a", "slow", 4), T(0)), IsOk());
  Pass(10);
  ASSERT_EQ(PhaseOf("a", "slow"), Phase::kRunning);
  Ready("a", "slow", 3, 100);
  Pass(309);  // 299 s after admission
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kRunning);
  Pass(310);
  std::vector<StateChange> evicted = Of(StateChange::Type::kEvicted, "slow");
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].reason, "PodsReadyTimeout");
  EXPECT_THAT(evicted[0].message, HasSubstr("3 of 4 pods ready 5m after admission (timeout 5m)"));
  EXPECT_THAT(evicted[0].message, HasSubstr("backoff of 1m"));
  // Stopped: quota freed, pending with the backoff as its reason.
  std::vector<StateChange> requeued = Of(StateChange::Type::kRequeued, "slow");
  ASSERT_EQ(requeued.size(), 1u);
  EXPECT_EQ(requeued[0].reason, "RequeueBackoff");
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kPending);
  EXPECT_EQ(Info("a", "slow").reason.code, PendingReason::Code::kRequeueBackoff);
  EXPECT_EQ(Info("a", "slow").requeue_count, 1);
  EXPECT_EQ(s_->ClusterQueue("team-a")->admitted, 0);
  Pass(369);
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kPending);
  Pass(370);  // 60 s later: admitted again, its clock starts over
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kRunning);
  EXPECT_EQ(Info("a", "slow").ready_pods, 0);
  Ready("a", "slow", 4, 400);
  Pass(5000);
  EXPECT_EQ(PhaseOf("a", "slow"), Phase::kRunning);
  EXPECT_EQ(Of(StateChange::Type::kEvicted, "slow").size(), 1u);
}

TEST_F(PodsReadyTest, AReadyGangKeepsRunningPastTheTimeout) {
  Start(Config(60));
  ASSERT_THAT(s_->Add(Gang("a", "fast", 2), T(0)), IsOk());
  Pass(1);
  Ready("a", "fast", 1, 20);
  Ready("a", "fast", 2, 30);
  EXPECT_TRUE(Info("a", "fast").pods_ready);
  Pass(1000);
  EXPECT_EQ(PhaseOf("a", "fast"), Phase::kRunning);
  EXPECT_TRUE(Of(StateChange::Type::kEvicted, "fast").empty());
}

// Kueue's requeue backoff: base * 2^(n-1), capped at max (no jitter here).
TEST(PodsReadyBackoffTest, DoublesFromTheBaseUpToTheMax) {
  struct Case {
    int64_t base, max, count, want_seconds;
  };
  const Case cases[] = {
      {60, 3600, 1, 60},   {60, 3600, 2, 120},  {60, 3600, 3, 240},  {60, 3600, 6, 1920},
      {60, 3600, 7, 3600}, {60, 3600, 40, 3600}, {10, 15, 2, 15},     {1, 3600, 1, 1},
      {0, 3600, 5, 0},     {60, 30, 1, 30},
  };
  for (const Case& c : cases) {
    model::WaitForPodsReady w;
    w.backoff_base_seconds = c.base;
    w.backoff_max_seconds = c.max;
    EXPECT_EQ(model::PodsReadyBackoff(w, c.count), absl::Seconds(c.want_seconds))
        << "base " << c.base << " max " << c.max << " requeue " << c.count;
  }
}

// Kueue: "Should re-admit a timed out workload and deactivate a workload
// exceeded the re-queue count limit. After that re-activating a workload".
TEST_F(PodsReadyTest, DeactivatedAfterBackoffLimitCountUntilItsObjectChanges) {
  Start(Config(100, /*limit=*/1));
  ASSERT_THAT(s_->Add(Gang("a", "stuck", 2), T(0)), IsOk());
  Pass(0);
  Pass(100);  // 1st timeout: requeued after 60 s
  EXPECT_EQ(Info("a", "stuck").reason.code, PendingReason::Code::kRequeueBackoff);
  Pass(160);
  ASSERT_EQ(PhaseOf("a", "stuck"), Phase::kRunning);
  Pass(260);  // 2nd timeout: over the limit of 1 requeue
  std::vector<StateChange> evicted = Of(StateChange::Type::kEvicted, "stuck");
  ASSERT_EQ(evicted.size(), 2u);
  EXPECT_THAT(evicted[1].message, HasSubstr("deactivated once stopped: requeued 1 time(s) already, backoffLimitCount 1"));
  std::vector<StateChange> requeued = Of(StateChange::Type::kRequeued, "stuck");
  ASSERT_EQ(requeued.size(), 2u);
  EXPECT_EQ(requeued[1].reason, "Deactivated");
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kPending);
  EXPECT_FALSE(Info("a", "stuck").active);
  EXPECT_EQ(Info("a", "stuck").reason.code, PendingReason::Code::kDeactivated);
  EXPECT_THAT(Info("a", "stuck").reason.message, HasSubstr("change or re-create the object"));
  Pass(1'000'000);
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kPending);
  // Reactivated by a change to its object: queued, its count reset.
  workload::Workload changed = Gang("a", "stuck", 2);
  changed.priority = 5;
  ASSERT_THAT(s_->Update(changed, T(1'000'001)), IsOk());
  EXPECT_TRUE(Info("a", "stuck").active);
  EXPECT_EQ(Info("a", "stuck").requeue_count, 0);
  Pass(1'000'002);
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kRunning);
}

TEST_F(PodsReadyTest, BackoffLimitCountZeroDeactivatesAtTheFirstTimeout) {
  Start(Config(30, /*limit=*/0));
  ASSERT_THAT(s_->Add(Gang("a", "once", 1), T(0)), IsOk());
  Pass(0);
  Pass(30);
  EXPECT_FALSE(Info("a", "once").active);
  EXPECT_EQ(Info("a", "once").requeue_count, 0);
  // Re-created (a new uid under the name): a new workload, queued.
  workload::Workload again = Gang("a", "once", 1, 40);
  again.uid = "uid-once-2";
  ASSERT_THAT(s_->Add(again, T(40)), IsOk());
  Pass(41);
  EXPECT_EQ(PhaseOf("a", "once"), Phase::kRunning);
  EXPECT_TRUE(Info("a", "once").active);
}

// Kueue: "Should block admission of one new workload if two are considered
// in the same scheduling cycle" and "Should unblock admission of new
// workloads in other ClusterQueues once the admitted workload exceeds
// timeout".
TEST_F(PodsReadyTest, BlockAdmissionAdmitsNothingWhileAnAdmittedGangIsNotReady) {
  Start(Config(300, std::nullopt, /*block=*/true));
  ASSERT_THAT(s_->Add(Gang("a", "first", 2, 0), T(0)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "second", 2, 1), T(1)), IsOk());
  Pass(2);
  EXPECT_EQ(PhaseOf("a", "first"), Phase::kRunning);
  EXPECT_EQ(PhaseOf("b", "second"), Phase::kPending);  // another ClusterQueue with room: blocked all the same
  Pass(100);
  EXPECT_EQ(PhaseOf("b", "second"), Phase::kPending);
  Ready("a", "first", 2, 150);
  Pass(151);
  EXPECT_EQ(PhaseOf("b", "second"), Phase::kRunning);
}

TEST_F(PodsReadyTest, BlockAdmissionEndsWhenTheBlockingGangTimesOut) {
  Start(Config(300, std::nullopt, /*block=*/true));
  ASSERT_THAT(s_->Add(Gang("a", "first", 2, 0), T(0)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "second", 2, 1), T(1)), IsOk());
  Pass(2);
  Pass(302);  // first evicted and stopped in this pass; second admitted in the next
  Pass(303);
  EXPECT_EQ(PhaseOf("a", "first"), Phase::kPending);
  EXPECT_EQ(PhaseOf("b", "second"), Phase::kRunning);
}

// Kueue's SchedulerWithWaitForPodsReadyNonblockingMode: "Should not block
// admission of one new workload if two are considered in the same
// scheduling cycle".
TEST_F(PodsReadyTest, WithoutBlockAdmissionOthersAreAdmittedMeanwhile) {
  Start(Config(300));
  ASSERT_THAT(s_->Add(Gang("a", "first", 2, 0), T(0)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "second", 2, 1), T(1)), IsOk());
  Pass(2);
  EXPECT_EQ(PhaseOf("a", "first"), Phase::kRunning);
  EXPECT_EQ(PhaseOf("b", "second"), Phase::kRunning);
}

// Kueue: "Should move the evicted workload at the end of the queue"
// (timestamp Eviction) and "Should keep the evicted workload at the front
// of the queue" (timestamp Creation).
class RequeuingTimestampTest : public PodsReadyTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RequeuingTimestampTest, OrdersTheRequeuedGang) {
  const bool creation = GetParam();
  model::WaitForPodsReady w = Config(100);
  w.backoff_base_seconds = 0;  // queued again at once
  if (creation) w.timestamp = model::RequeuingTimestamp::kCreation;
  Start(w);
  // Each takes the whole ClusterQueue: one at a time.
  ASSERT_THAT(s_->Add(Gang("a", "prod1", 4, 0), T(0)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "prod2", 4, 1), T(1)), IsOk());
  Pass(2);
  ASSERT_EQ(PhaseOf("a", "prod1"), Phase::kRunning);
  Pass(102);  // prod1 times out, stops, and is queued again at once
  Pass(103);
  if (creation) {
    EXPECT_EQ(PhaseOf("a", "prod1"), Phase::kRunning);  // still first by its creation
    EXPECT_EQ(PhaseOf("a", "prod2"), Phase::kPending);
  } else {
    EXPECT_EQ(PhaseOf("a", "prod1"), Phase::kPending);  // behind prod2, queued before its eviction
    EXPECT_EQ(PhaseOf("a", "prod2"), Phase::kRunning);
  }
}

INSTANTIATE_TEST_SUITE_P(Timestamps, RequeuingTimestampTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Creation" : "Eviction"; });

TEST_F(PodsReadyTest, ARunningGangThatDropsBelowReadyIsEvictedAfterTheRecoveryTimeout) {
  model::WaitForPodsReady w = Config(300);
  w.recovery_timeout = absl::Seconds(120);
  Start(w);
  ASSERT_THAT(s_->Add(Gang("a", "flaky", 3), T(0)), IsOk());
  Pass(0);
  Ready("a", "flaky", 3, 50);
  Ready("a", "flaky", 2, 1000);  // a pod failed; its replacement is awaited
  Pass(1119);
  EXPECT_EQ(PhaseOf("a", "flaky"), Phase::kRunning);
  Ready("a", "flaky", 3, 1110);  // recovered in time
  Pass(2000);
  EXPECT_EQ(PhaseOf("a", "flaky"), Phase::kRunning);
  Ready("a", "flaky", 1, 3000);
  Pass(3120);
  std::vector<StateChange> evicted = Of(StateChange::Type::kEvicted, "flaky");
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_THAT(evicted[0].message, HasSubstr("1 of 3 pods ready 2m after they dropped below ready (recoveryTimeout 2m)"));
}

TEST_F(PodsReadyTest, RecoveryTimeoutZeroNeverEvictsARunningGang) {
  model::WaitForPodsReady w = Config(300);
  w.recovery_timeout = absl::ZeroDuration();
  Start(w);
  ASSERT_THAT(s_->Add(Gang("a", "flaky", 3), T(0)), IsOk());
  Pass(0);
  Ready("a", "flaky", 3, 50);
  Ready("a", "flaky", 0, 60);
  Pass(100000);
  EXPECT_EQ(PhaseOf("a", "flaky"), Phase::kRunning);
}

TEST_F(PodsReadyTest, TheConfigurationsWaitForPodsReadyWinsOverTheFlag) {
  SchedulerOptions o;
  o.wait_for_pods_ready = Config(1000);
  auto s = Scheduler::Create(testing::PoliciesFrom(absl::StrCat(kPolicies, R"(
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 2m
)")),
                             o);
  ASSERT_THAT(s.status(), IsOk());
  s_ = *std::move(s);
  EXPECT_EQ(s_->wait_for_pods_ready().timeout, absl::Minutes(2));
  ASSERT_THAT(s_->Add(Gang("a", "slow", 1), T(0)), IsOk());
  Pass(0);
  Pass(120);
  EXPECT_EQ(Of(StateChange::Type::kEvicted, "slow").size(), 1u);
}

TEST_F(PodsReadyTest, ReadinessOfAStaleOrPendingInstanceIsIgnored) {
  Start(Config(60));
  ASSERT_THAT(s_->Add(Gang("a", "big", 8), T(0)), IsOk());  // never fits
  Pass(0);
  ASSERT_THAT(s_->PodsReady({"a", "big"}, "uid-big", 8, T(1)), IsOk());
  ASSERT_THAT(s_->PodsReady({"a", "nobody"}, "uid-nobody", 1, T(1)), IsOk());
  EXPECT_EQ(Info("a", "big").ready_pods, 0);
  EXPECT_FALSE(Info("a", "big").pods_ready);
}

}  // namespace
}  // namespace gangkeeper::broker

namespace gangkeeper::broker {
namespace {

// A scheduler restored from its workloads' images (what the durable state
// holds: store/FORMAT.md §4) parks a deactivated gang and a backing-off one
// as they were; the store's tests run the same through the encoding.
class PodsReadyRestoreTest : public PodsReadyTest {
 protected:
  void Restart(const model::WaitForPodsReady& w) {
    std::vector<std::shared_ptr<const WorkloadInfo>> images;
    for (const WorkloadInfo* info : s_->Workloads()) images.push_back(std::make_shared<const WorkloadInfo>(*info));
    SchedulerOptions o;
    o.wait_for_pods_ready = w;
    auto s = Scheduler::Restore(testing::PoliciesFrom(kPolicies), {}, std::move(images), o);
    ASSERT_THAT(s.status(), IsOk());
    s_ = *std::move(s);
    ASSERT_THAT(s_->CheckInvariants(), IsOk());
  }
};

TEST_F(PodsReadyRestoreTest, ADeactivatedGangIsRestoredDeactivatedAndABackingOffOneKeepsItsCount) {
  const model::WaitForPodsReady w = Config(100, /*limit=*/1);
  Start(w);
  ASSERT_THAT(s_->Add(Gang("a", "stuck", 2), T(0)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "slow", 2), T(0)), IsOk());
  Pass(0);
  Pass(100);  // both: 1st timeout, requeued at 160
  Pass(160);
  Ready("b", "slow", 2, 170);  // slow gets ready
  Pass(260);                   // stuck: 2nd timeout, deactivated
  ASSERT_FALSE(Info("a", "stuck").active);
  Ready("b", "slow", 1, 300);  // slow drops below ready: recoveryTimeout
  Pass(400);                   // slow: 2nd timeout (recoveryTimeout), deactivated as well
  ASSERT_FALSE(Info("b", "slow").active);

  Restart(w);
  EXPECT_FALSE(Info("a", "stuck").active);
  EXPECT_EQ(Info("a", "stuck").reason.code, PendingReason::Code::kDeactivated);
  Pass(100'000);
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kPending);
  EXPECT_EQ(PhaseOf("b", "slow"), Phase::kPending);
}

TEST_F(PodsReadyRestoreTest, ARestoredBackoffEndsWhenItWouldHaveAndTheNextTimeoutCountsOn) {
  const model::WaitForPodsReady w = Config(100, /*limit=*/2);
  Start(w);
  ASSERT_THAT(s_->Add(Gang("a", "stuck", 2), T(0)), IsOk());
  Pass(0);
  Pass(100);  // 1st timeout: requeued at 160
  Restart(w);
  EXPECT_EQ(Info("a", "stuck").reason.code, PendingReason::Code::kRequeueBackoff);
  EXPECT_EQ(Info("a", "stuck").requeue_count, 1);
  Pass(159);
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kPending);
  Pass(160);
  ASSERT_EQ(PhaseOf("a", "stuck"), Phase::kRunning);
  Pass(260);  // 2nd timeout: the 2nd requeue (120 s)
  EXPECT_EQ(Info("a", "stuck").requeue_count, 2);
  Restart(w);
  Pass(379);
  EXPECT_EQ(PhaseOf("a", "stuck"), Phase::kPending);
  Pass(380);
  ASSERT_EQ(PhaseOf("a", "stuck"), Phase::kRunning);
  Pass(480);  // 3rd timeout: past the limit of 2
  EXPECT_FALSE(Info("a", "stuck").active);
  EXPECT_EQ(Info("a", "stuck").reason.code, PendingReason::Code::kDeactivated);
}

}  // namespace
}  // namespace gangkeeper::broker
