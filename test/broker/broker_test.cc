// gangkeeper: tests for the Broker service — events through the writer
// thread, durability before acknowledgement, actuation of whole gangs,
// snapshots that readers use without locks.
#include "gangkeeper/broker/broker.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/model/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

constexpr char kBrokerPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
  nodeTaints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
)";

std::shared_ptr<const model::PolicySet> BrokerPolicies(const std::string& yaml) { return testing::PoliciesFrom(yaml); }

workload::Workload BrokerGang(const std::string& name, int64_t pods, int64_t gpus, int32_t priority = 0) {
  workload::Workload w;
  w.namespace_name = "a";
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "q";
  w.priority = priority;
  for (const char* set : {"launcher", "worker"}) {
    workload::PodSet ps;
    ps.name = set;
    ps.count = std::string(set) == "launcher" ? 1 : pods;
    ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(std::string(set) == "launcher" ? 0 : gpus);
    w.pod_sets.push_back(ps);
  }
  return w;
}

class FakeActuator : public Actuator {
 public:
  void Release(const ReleaseOrder& order) override {
    absl::MutexLock lock(&mu_);
    releases_.push_back(order);
  }
  void Suspend(const SuspendOrder& order) override {
    absl::MutexLock lock(&mu_);
    suspends_.push_back(order);
  }
  std::vector<ReleaseOrder> releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  std::vector<SuspendOrder> suspends() {
    absl::MutexLock lock(&mu_);
    return suspends_;
  }

 private:
  absl::Mutex mu_;
  std::vector<ReleaseOrder> releases_;
  std::vector<SuspendOrder> suspends_;
};

class FakeSink : public StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    if (fail_) return absl::UnavailableError("disk full");
    for (const StateChange& c : batch.changes) types_.push_back(c.type);
    return ++position_;
  }
  void set_fail(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_ = fail;
  }
  std::vector<StateChange::Type> types() {
    absl::MutexLock lock(&mu_);
    return types_;
  }

 private:
  absl::Mutex mu_;
  bool fail_ = false;
  uint64_t position_ = 0;
  std::vector<StateChange::Type> types_;
};

class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = Broker::Create(BrokerPolicies(kBrokerPolicies), options, &actuator_, &sink_, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
  }
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  FakeActuator actuator_;
  FakeSink sink_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(BrokerTest, RegisterAdmitsAndReleasesTheWholeGangWithFlavorPlacement) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("train", 4, 2))), IsOk());
  // Acknowledged only after the sink has the changes.
  EXPECT_THAT(sink_.types(), ::testing::ElementsAre(StateChange::Type::kPoliciesChanged, StateChange::Type::kRegistered,
                                                 StateChange::Type::kAdmitted));
  std::vector<ReleaseOrder> releases = actuator_.releases();
  ASSERT_EQ(releases.size(), 1u);
  EXPECT_EQ(releases[0].key.name, "train");
  ASSERT_EQ(releases[0].placements.size(), 2u);
  EXPECT_EQ(releases[0].placements[1].node_selector.at("gpu"), "a100");
  ASSERT_EQ(releases[0].placements[1].tolerations.size(), 1u);
  EXPECT_EQ(releases[0].placements[1].tolerations[0].key, "nvidia.com/gpu");
  // The launcher asks for no GPU: it has no flavor and no placement.
  EXPECT_TRUE(releases[0].placements[0].node_selector.empty());
  std::optional<WorkloadRecord> r = broker_->snapshot()->Record({"a", "train"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->state, WorkloadState::kAdmitted);
  EXPECT_EQ(broker_->snapshot()->AdmittedUsage("team-a").at("nvidia.com/gpu"), Quantity::FromUnits(8));
  broker_->Submit(broker::Event::ReleaseResult({"a", "train"}, "uid-train", absl::OkStatus()));
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  EXPECT_EQ(broker_->snapshot()->Find({"a", "train"})->phase, Phase::kRunning);
}

TEST_F(BrokerTest, SnapshotShowsPositionsAndReasons) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("big", 4, 2))), IsOk());
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("next", 1, 4))), IsOk());
  clock_.AdvanceTime(absl::Seconds(1));  // queue order: creation time, then uid
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("last", 1, 1))), IsOk());
  std::shared_ptr<const Snapshot> snap = broker_->snapshot();
  EXPECT_EQ(broker_->snapshot()->PendingIn("team-a"), 2);
  std::optional<QueuePosition> next = snap->Position({"a", "next"});
  std::optional<QueuePosition> last = snap->Position({"a", "last"});
  ASSERT_TRUE(next.has_value() && last.has_value());
  EXPECT_EQ(next->cluster_queue, 1);
  EXPECT_EQ(last->cluster_queue, 2);
  EXPECT_EQ(last->local_queue, 2);
  const WorkloadInfo* v = snap->Find({"a", "next"});
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->reason.code, PendingReason::Code::kWaitingForQuota);
  EXPECT_THAT(v->reason.message, ::testing::HasSubstr("waiting for 4 nvidia.com/gpu in team-a/a100"));
  // The old snapshot stays valid and unchanged while the broker moves on.
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "big"}, "")), IsOk());
  EXPECT_EQ(snap->Find({"a", "next"})->phase, Phase::kPending);
  EXPECT_EQ(broker_->snapshot()->Find({"a", "next"})->phase, Phase::kReserved);
  EXPECT_EQ(broker_->snapshot()->Find({"a", "big"}), nullptr);
}

// Pending heads tried again after a change in usage are not re-published
// for their reason's numbers alone (that cost grew with the number of
// pending workloads); the numbers a reader sees are current after a Flush
// (and within about a second without one).
TEST_F(BrokerTest, PendingReasonNumbersAreCurrentAfterAFlushWithoutRepublishingEveryHead) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("base", 2, 2))), IsOk());  // 4 of 8 GPUs
  constexpr int kWaiting = 20;
  for (int i = 0; i < kWaiting; ++i) {
    clock_.AdvanceTime(absl::Seconds(1));
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang(absl::StrCat("wait-", i), 1, 8))), IsOk());
  }
  for (const char* name : {"s0", "s1", "s2"}) {
    clock_.AdvanceTime(absl::Seconds(1));
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang(name, 1, 1))), IsOk());
    ASSERT_EQ(broker_->snapshot()->Find({"a", name})->phase, Phase::kReserved);
  }
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  const BrokerStats before = broker_->snapshot()->stats();
  // Each finish frees quota: every waiting head is tried again (none fits).
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "s0"}, "")), IsOk());
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "s1"}, "")), IsOk());
  const BrokerStats after = broker_->snapshot()->stats();
  // The finished ones, plus any reasons a periodic refresh brought in; not
  // every waiting head per event.
  EXPECT_LE((after.workloads_published - before.workloads_published) -
                (after.reasons_refreshed - before.reasons_refreshed),
            4u);
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  std::shared_ptr<const Snapshot> snap = broker_->snapshot();
  for (int i = 0; i < kWaiting; ++i) {
    const WorkloadInfo* w = snap->Find({"a", absl::StrCat("wait-", i)});
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->phase, Phase::kPending);
    EXPECT_EQ(w->reason.used, Quantity::FromUnits(5)) << w->reason.message;
    EXPECT_THAT(w->reason.message, ::testing::HasSubstr("5 of 8 used by 2 workloads"));
  }
}

// A ClusterQueue's pending order shares the snapshot's workloads (no copy
// of their keys per pending workload each time it is rebuilt).
TEST_F(BrokerTest, PendingOrderSharesTheSnapshotsWorkloads) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("big", 4, 2))), IsOk());
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("next", 1, 4))), IsOk());
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("last", 1, 1))), IsOk());
  std::shared_ptr<const Snapshot> snap = broker_->snapshot();
  const ClusterQueueView* view = snap->FindClusterQueue("team-a");
  ASSERT_NE(view, nullptr);
  ASSERT_EQ(view->pending->items.size(), 2u);
  EXPECT_EQ(view->pending->items[0].key().name, "next");
  EXPECT_EQ(view->pending->items[0].local_queue(), "q");
  EXPECT_EQ(view->pending->items[0].info.get(), snap->Find({"a", "next"}));
  EXPECT_EQ(view->pending->items[1].info.get(), snap->Find({"a", "last"}));
}

TEST_F(BrokerTest, SinkFailureIsNotAcknowledgedAndNothingIsReleased) {
  sink_.set_fail(true);
  EXPECT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("x", 1, 1))), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(actuator_.releases().empty());
  sink_.set_fail(false);
  // The retried registration is idempotent; the kept changes are written first.
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("x", 1, 1))), IsOk());
  EXPECT_THAT(sink_.types(), ::testing::ElementsAre(StateChange::Type::kPoliciesChanged, StateChange::Type::kRegistered,
                                                 StateChange::Type::kAdmitted));
  EXPECT_EQ(actuator_.releases().size(), 1u);
  EXPECT_EQ(broker_->snapshot()->stats().sink_failures, 1u);
}

TEST_F(BrokerTest, ReleaseFailureRequeuesAndFreesQuota) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("x", 4, 2))), IsOk());
  broker_->Submit(broker::Event::ReleaseResult({"a", "x"}, "uid-x", absl::UnavailableError("apiserver down")));
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  // Pending again, quota freed, and not retried before its backoff (1 s).
  EXPECT_EQ(actuator_.releases().size(), 1u);
  const WorkloadInfo* info = broker_->snapshot()->Find({"a", "x"});
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->phase, Phase::kPending);
  EXPECT_EQ(info->reason.code, PendingReason::Code::kReleaseFailed);
  EXPECT_THAT(info->reason.message, ::testing::HasSubstr("apiserver down"));
  for (const auto& [res, q] : broker_->snapshot()->AdmittedUsage("team-a")) EXPECT_TRUE(q.IsZero()) << res;
  std::vector<StateChange::Type> types = sink_.types();
  EXPECT_NE(std::find(types.begin(), types.end(), StateChange::Type::kReleaseFailed), types.end());
  // After the backoff a later pass admits it again.
  clock_.AdvanceTime(absl::Seconds(2));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("y", 1, 1))), IsOk());  // any event makes a pass
  ASSERT_EQ(actuator_.releases().size(), 2u);  // x again (older than y, which no longer fits)
  EXPECT_EQ(actuator_.releases().back().key.name, "x");
  EXPECT_EQ(broker_->snapshot()->Find({"a", "x"})->phase, Phase::kReserved);
}

TEST_F(BrokerTest, PreemptionSuspendsTheVictimAndWaitsForItToStop) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("low", 4, 2, 1))), IsOk());
  broker_->Submit(broker::Event::ReleaseResult({"a", "low"}, "uid-low", absl::OkStatus()));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("high", 2, 2, 100))), IsOk());
  std::vector<SuspendOrder> suspends = actuator_.suspends();
  ASSERT_EQ(suspends.size(), 1u);
  EXPECT_EQ(suspends[0].key.name, "low");
  EXPECT_EQ(suspends[0].preemptor.name, "high");
  EXPECT_EQ(broker_->snapshot()->Find({"a", "high"})->phase, Phase::kPending);
  broker_->Submit(broker::Event::Stopped({"a", "low"}, "uid-low"));
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  EXPECT_EQ(broker_->snapshot()->Find({"a", "high"})->phase, Phase::kReserved);
  EXPECT_EQ(broker_->snapshot()->Find({"a", "low"})->phase, Phase::kPending);
}

TEST_F(BrokerTest, BadPoliciesAreRefusedAndTheOldOnesStay) {
  auto bad = std::make_shared<model::PolicySet>(*BrokerPolicies(kBrokerPolicies));
  bad->cluster_queues["team-a"].resource_groups[0].flavors[0].resources[0].nominal = Quantity::FromUnits(-1);
  EXPECT_THAT(broker_->SubmitAndWait(broker::Event::Policies(bad)), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("x", 1, 1))), IsOk());
  EXPECT_EQ(broker_->snapshot()->Record({"a", "x"})->state, WorkloadState::kAdmitted);
}

// Two writers of one PolicyStore (the namespace watch, the overlay feed)
// can publish in one order and submit in the other: the older set, which
// lacks the newer one's change, must not undo it.
TEST_F(BrokerTest, AnOlderPublicationOfTheStoreNeverUndoesANewerOne) {
  auto with_quota = [](int64_t gpus) {
    auto p = std::make_shared<model::PolicySet>(*BrokerPolicies(kBrokerPolicies));
    p->cluster_queues["team-a"].resource_groups[0].flavors[0].resources[0].nominal = Quantity::FromUnits(gpus);
    return std::shared_ptr<const model::PolicySet>(std::move(p));
  };
  auto nominal = [&] {
    return broker_->snapshot()->policies().cluster_queues.at("team-a").resource_groups[0].flavors[0].resources[0]
        .nominal;
  };
  auto published = [](std::shared_ptr<const model::PolicySet> p, uint64_t version) {
    broker::Event e = broker::Event::Policies(std::move(p), nullptr, "test", "version " + std::to_string(version));
    e.policies_version = version;
    return e;
  };
  ASSERT_THAT(broker_->SubmitAndWait(published(with_quota(12), 7)), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(12));
  // Version 6 came late: acknowledged, not applied.
  ASSERT_THAT(broker_->SubmitAndWait(published(with_quota(4), 6)), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(12));
  // The same version again (one publication submitted twice) and a newer
  // one apply; a set no store published (version 0) always does.
  ASSERT_THAT(broker_->SubmitAndWait(published(with_quota(10), 7)), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(10));
  ASSERT_THAT(broker_->SubmitAndWait(published(with_quota(16), 9)), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(16));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Policies(with_quota(2))), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(2));
  ASSERT_THAT(broker_->SubmitAndWait(published(with_quota(6), 8)), IsOk());
  EXPECT_EQ(nominal(), Quantity::FromUnits(2));
}

TEST_F(BrokerTest, ManyConcurrentWritersAndReaders) {
  std::atomic<bool> done{false};
  std::thread reader([&] {
    for (int i = 0; i < 100000 && !done.load(); ++i) {
      std::shared_ptr<const Snapshot> s = broker_->snapshot();
      int64_t n = 0;
      s->ForEachWorkload([&](const WorkloadInfo&) { ++n; });
      ASSERT_EQ(static_cast<size_t>(n), s->workload_count());
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(BrokerGang("w" + std::to_string(t) + "-" + std::to_string(i), 1, 1))),
                    IsOk());
      }
    });
  }
  for (std::thread& w : writers) w.join();
  done = true;
  reader.join();
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  std::shared_ptr<const Snapshot> s = broker_->snapshot();
  EXPECT_EQ(s->workload_count(), 200u);
  EXPECT_EQ(s->FindClusterQueue("team-a")->status.admitted, 8);
  EXPECT_EQ(s->FindClusterQueue("team-a")->status.pending, 192);
}

}  // namespace
}  // namespace gangkeeper::broker
