// gangkeeper: basic tests for the Scheduler's event handling and its
// read side (positions, statuses, state changes). The Kueue scenarios are
// in scenario_test.cc, the randomized invariant test in random_test.cc.
#include "gangkeeper/broker/scheduler.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
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
using ::testing::ElementsAre;

constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: shared
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 0}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: shared
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
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

std::shared_ptr<const model::PolicySet> Policies(const char* yaml) { return testing::PoliciesFrom(yaml); }

workload::Workload Gang(const std::string& ns, const std::string& name, int64_t pods, int64_t gpus_per_pod,
                        int32_t priority = 0) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "q";
  w.priority = priority;
  workload::PodSet ps;
  ps.name = "worker";
  ps.count = pods;
  ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(gpus_per_pod);
  w.pod_sets.push_back(ps);
  return w;
}

absl::Time T(int s) { return absl::FromUnixSeconds(1'700'000'000 + s); }

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Scheduler::Create(Policies(kPolicies));
    ASSERT_THAT(s.status(), IsOk());
    s_ = *std::move(s);
  }
  Phase PhaseOf(const std::string& ns, const std::string& name) {
    const WorkloadInfo* w = s_->Find({ns, name});
    return w == nullptr ? Phase::kFinished : w->phase;
  }
  void Schedule(int t) {
    s_->Schedule(T(t));
    ASSERT_THAT(s_->CheckInvariants(), IsOk());
  }
  std::unique_ptr<Scheduler> s_;
};

TEST_F(SchedulerTest, AdmitsWholeGangAndReportsItOnce) {
  ASSERT_THAT(s_->Add(Gang("a", "train", 2, 2), T(1)), IsOk());
  Schedule(2);
  EXPECT_EQ(PhaseOf("a", "train"), Phase::kReserved);
  std::vector<StateChange> changes = s_->TakeChanges();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, StateChange::Type::kRegistered);
  EXPECT_EQ(changes[1].type, StateChange::Type::kAdmitted);
  ASSERT_TRUE(changes[1].assignment.has_value());
  EXPECT_EQ(changes[1].assignment->pod_sets[0].flavors.at("nvidia.com/gpu"), "gpu");
  EXPECT_EQ(changes[1].assignment->usage.at({"gpu", "nvidia.com/gpu"}), Quantity::FromUnits(4));
  ASSERT_THAT(s_->ReleaseSucceeded({"a", "train"}, "uid-train", T(3)), IsOk());
  EXPECT_EQ(PhaseOf("a", "train"), Phase::kRunning);
}

// No churn without a change: quota that a lender frees while it has more
// of its own workloads queued goes to them, not first to a borrower that
// the lender's next head would at once reclaim (reclaimWithinCohort: Any).
// Kueue admits the borrower in one cycle and preempts it in the next; run
// to a fixed point in one pass, that was an admission and an eviction of
// the same gang with nothing changed between them.
TEST_F(SchedulerTest, ABorrowerIsNotAdmittedForTheLenderToReclaimInTheSamePass) {
  ASSERT_THAT(s_->Add(Gang("a", "a-run", 1, 4), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "b-run", 1, 4), T(1)), IsOk());
  Schedule(2);
  ASSERT_EQ(PhaseOf("a", "a-run"), Phase::kReserved);
  ASSERT_EQ(PhaseOf("b", "b-run"), Phase::kReserved);
  ASSERT_THAT(s_->Add(Gang("a", "a1", 1, 2), T(3)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "a2", 1, 2), T(4)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "b1", 1, 2), T(2)), IsOk());  // queued first, and must borrow
  Schedule(5);
  ASSERT_EQ(PhaseOf("b", "b1"), Phase::kPending);
  (void)s_->TakeChanges();
  ASSERT_THAT(s_->Finish({"a", "a-run"}, "uid-a-run", T(6)), IsOk());
  Schedule(7);
  EXPECT_EQ(PhaseOf("a", "a1"), Phase::kReserved);
  EXPECT_EQ(PhaseOf("a", "a2"), Phase::kReserved);
  EXPECT_EQ(PhaseOf("b", "b1"), Phase::kPending);
  for (const StateChange& c : s_->TakeChanges()) {
    EXPECT_NE(c.type, StateChange::Type::kEvicted) << c.key.name << " was preempted";
    if (c.type == StateChange::Type::kAdmitted) {
      EXPECT_NE(c.key.name, "b1") << "b1 was admitted to be reclaimed";
    }
  }
  // Once the lender's own demand is served, the borrower borrows what is
  // left: a1 finishes, and b1 takes its 2 GPUs.
  ASSERT_THAT(s_->Finish({"a", "a1"}, "uid-a1", T(8)), IsOk());
  Schedule(9);
  EXPECT_EQ(PhaseOf("b", "b1"), Phase::kReserved);
}

TEST_F(SchedulerTest, PendingReasonHasTheNumbers) {
  ASSERT_THAT(s_->Add(Gang("a", "one", 1, 4), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "two", 1, 2), T(2)), IsOk());
  Schedule(3);
  const WorkloadInfo* two = s_->Find({"a", "two"});
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->phase, Phase::kPending);
  EXPECT_EQ(two->reason.code, PendingReason::Code::kWaitingForQuota);
  EXPECT_EQ(two->reason.resource, "nvidia.com/gpu");
  EXPECT_EQ(two->reason.requested, Quantity::FromUnits(2));
  EXPECT_EQ(two->reason.available, Quantity());
  EXPECT_EQ(two->reason.message,
            "waiting for 2 nvidia.com/gpu in team-a/gpu: 4 of 4 used by 1 workload; borrowing limit 0");
  EXPECT_THAT(s_->PendingInQueueOrder("team-a"), ElementsAre(two));
}

// defer_reason_numbers (the Broker's setting): a pending head tried again
// after a change in usage whose reason differs only in its numbers keeps
// the one it has (not copied, not dirty) until RefreshReasons brings the
// newer numbers in; a change of kind is immediate and drops them.
TEST(SchedulerDeferredReasonsTest, NumbersWaitForRefreshAndAKindChangeDoesNot) {
  auto created = Scheduler::Create(Policies(kPolicies), SchedulerOptions{.defer_reason_numbers = true});
  ASSERT_THAT(created.status(), IsOk());
  Scheduler& s = **created;
  std::vector<WorkloadKey> dirty;
  std::vector<model::ClusterQueueName> queues;
  bool all = false;
  ASSERT_THAT(s.Add(Gang("a", "one", 1, 2), T(1)), IsOk());
  ASSERT_THAT(s.Add(Gang("a", "two", 1, 2), T(2)), IsOk());
  ASSERT_THAT(s.Add(Gang("a", "wait", 1, 4), T(3)), IsOk());
  s.Schedule(T(4));
  ASSERT_THAT(s.CheckInvariants(), IsOk());
  const WorkloadInfo* wait = s.Find({"a", "wait"});
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->reason.message,
            "waiting for 4 nvidia.com/gpu in team-a/gpu: 4 of 4 used by 2 workloads; borrowing limit 0");
  s.TakeDirty(&dirty, &queues, &all);
  std::shared_ptr<const WorkloadInfo> published = s.ShareInstance({{"a", "wait"}, "uid-wait"});

  // One finishes: 2 of 4 used, still no room for 4. Only the numbers changed.
  ASSERT_THAT(s.Finish({"a", "one"}, "uid-one", T(5)), IsOk());
  s.Schedule(T(6));
  ASSERT_THAT(s.CheckInvariants(), IsOk());
  s.TakeDirty(&dirty, &queues, &all);
  for (const WorkloadKey& k : dirty) EXPECT_NE(k.name, "wait");
  EXPECT_EQ(s.ShareInstance({{"a", "wait"}, "uid-wait"}), published);  // not copied
  EXPECT_EQ(s.stale_reasons(), 1u);
  EXPECT_EQ(s.RefreshReasons(), 1u);
  EXPECT_EQ(s.stale_reasons(), 0u);
  wait = s.Find({"a", "wait"});
  EXPECT_EQ(wait->reason.used, Quantity::FromUnits(2));
  EXPECT_EQ(wait->reason.used_by, 1);
  EXPECT_EQ(wait->reason.message,
            "waiting for 2 nvidia.com/gpu in team-a/gpu: 2 of 4 used by 1 workload; borrowing limit 0");
  s.TakeDirty(&dirty, &queues, &all);
  EXPECT_EQ(std::count_if(dirty.begin(), dirty.end(), [](const WorkloadKey& k) { return k.name == "wait"; }), 1);
  EXPECT_EQ(s.RefreshReasons(), 0u);  // nothing newer since

  // Numbers deferred again, then the other finishes: it is admitted, and
  // the deferred numbers do not bring back a pending reason.
  ASSERT_THAT(s.Add(Gang("a", "three", 1, 1), T(7)), IsOk());
  ASSERT_THAT(s.Add(Gang("a", "four", 1, 1), T(7)), IsOk());
  s.Schedule(T(8));
  ASSERT_EQ(s.Find({"a", "three"})->phase, Phase::kReserved);
  ASSERT_EQ(s.Find({"a", "four"})->phase, Phase::kReserved);
  ASSERT_THAT(s.Finish({"a", "four"}, "uid-four", T(8)), IsOk());
  s.Schedule(T(8));  // 3 of 4 used
  EXPECT_EQ(s.stale_reasons(), 1u);
  ASSERT_THAT(s.Finish({"a", "two"}, "uid-two", T(9)), IsOk());
  ASSERT_THAT(s.Finish({"a", "three"}, "uid-three", T(9)), IsOk());
  s.Schedule(T(10));
  ASSERT_THAT(s.CheckInvariants(), IsOk());
  EXPECT_EQ(s.Find({"a", "wait"})->phase, Phase::kReserved);
  EXPECT_EQ(s.RefreshReasons(), 0u);
  EXPECT_EQ(s.Find({"a", "wait"})->reason.code, PendingReason::Code::kQueued);
}

// Without it (the default) the numbers are current after every Schedule.
TEST_F(SchedulerTest, PendingReasonNumbersAreCurrentAfterEachSchedule) {
  ASSERT_THAT(s_->Add(Gang("a", "one", 1, 2), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "two", 1, 2), T(2)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "wait", 1, 4), T(3)), IsOk());
  Schedule(4);
  ASSERT_THAT(s_->Finish({"a", "one"}, "uid-one", T(5)), IsOk());
  Schedule(6);
  EXPECT_EQ(s_->stale_reasons(), 0u);
  EXPECT_EQ(s_->Find({"a", "wait"})->reason.message,
            "waiting for 2 nvidia.com/gpu in team-a/gpu: 2 of 4 used by 1 workload; borrowing limit 0");
}

// A head shaped like one that found no room is set aside without trying;
// the shape it is compared by follows an update of its pod sets.
TEST_F(SchedulerTest, AnUpdatedHeadIsComparedByItsNewShape) {
  ASSERT_THAT(s_->Add(Gang("a", "three", 1, 3), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "one", 1, 1), T(2)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "first", 1, 2), T(3)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "second", 1, 2), T(4)), IsOk());
  Schedule(5);  // 4 of 4 used: both wait, with the same shape
  ASSERT_EQ(PhaseOf("a", "second"), Phase::kPending);
  ASSERT_THAT(s_->Update(Gang("a", "second", 1, 1), T(6)), IsOk());
  ASSERT_THAT(s_->Finish({"a", "one"}, "uid-one", T(6)), IsOk());
  Schedule(7);  // "first" finds no room in 1; "second" now fits in it
  EXPECT_EQ(PhaseOf("a", "first"), Phase::kPending);
  EXPECT_EQ(PhaseOf("a", "second"), Phase::kReserved);
}

TEST_F(SchedulerTest, PreemptsLowerPriorityGangAndAdmitsAfterItStops) {
  ASSERT_THAT(s_->Add(Gang("a", "low", 2, 2, 10), T(1)), IsOk());
  Schedule(2);
  ASSERT_THAT(s_->ReleaseSucceeded({"a", "low"}, "uid-low", T(2)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "high", 1, 4, 100), T(3)), IsOk());
  (void)s_->TakeChanges();
  Schedule(4);
  EXPECT_EQ(PhaseOf("a", "low"), Phase::kEvicting);
  EXPECT_EQ(PhaseOf("a", "high"), Phase::kPending);
  std::vector<StateChange> changes = s_->TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].type, StateChange::Type::kEvicted);
  EXPECT_EQ(changes[0].reason, "InClusterQueue");
  EXPECT_EQ(changes[0].preemptor.name, "high");
  ASSERT_THAT(s_->Stopped({"a", "low"}, "uid-low", T(5)), IsOk());
  Schedule(6);
  EXPECT_EQ(PhaseOf("a", "high"), Phase::kReserved);
  EXPECT_EQ(PhaseOf("a", "low"), Phase::kPending);
}

// KUEUE-SEMANTICS §3.3: a preemptor's usage is added to the cycle's
// snapshot. team-a needs its 4 GPUs back: 3 are free, 1 is borrowed by
// team-b's `borrow` (priority 0, so it is the victim rather than team-b's
// `big`, priority 10). While `borrow` stops, the 3 free GPUs are held for
// team-a, so team-b's `next` may not borrow one of them (which would force
// a second preemption once `borrow` is gone: `gangkeeper simulate` found
// that loop with one head per cycle).
TEST_F(SchedulerTest, APreemptorHoldsTheFreeQuotaItCountsOnWhileItsVictimsStop) {
  ASSERT_THAT(s_->Add(Gang("b", "big", 1, 4, 10), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "borrow", 1, 1), T(1)), IsOk());
  Schedule(2);
  ASSERT_EQ(PhaseOf("b", "borrow"), Phase::kReserved);
  ASSERT_THAT(s_->Add(Gang("a", "mine", 1, 4), T(3)), IsOk());
  ASSERT_THAT(s_->Add(Gang("b", "next", 1, 1), T(3)), IsOk());
  (void)s_->TakeChanges();
  Schedule(4);
  EXPECT_EQ(PhaseOf("b", "borrow"), Phase::kEvicting);
  EXPECT_EQ(PhaseOf("a", "mine"), Phase::kPending);
  EXPECT_EQ(PhaseOf("b", "next"), Phase::kPending);
  Schedule(5);  // a later cycle while the victim still stops: still held
  EXPECT_EQ(PhaseOf("b", "next"), Phase::kPending);
  ASSERT_THAT(s_->Stopped({"b", "borrow"}, "uid-borrow", T(6)), IsOk());
  Schedule(7);
  EXPECT_EQ(PhaseOf("a", "mine"), Phase::kReserved);
  EXPECT_EQ(PhaseOf("b", "next"), Phase::kPending);
  int evictions = 0;
  for (const StateChange& c : s_->TakeChanges()) evictions += c.type == StateChange::Type::kEvicted ? 1 : 0;
  EXPECT_EQ(evictions, 1);
}

TEST_F(SchedulerTest, ReleaseFailureFreesQuotaAndRequeues) {
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 4), T(1)), IsOk());
  Schedule(2);
  ASSERT_THAT(s_->ReleaseFailed({"a", "x"}, "uid-x", "409 Conflict", T(3)), IsOk());
  EXPECT_EQ(PhaseOf("a", "x"), Phase::kPending);
  std::optional<ClusterQueueStatus> st = s_->ClusterQueue("team-a");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->resources.at({"gpu", "nvidia.com/gpu"}).usage, Quantity());
  EXPECT_THAT(s_->CheckInvariants(), IsOk());
  Schedule(4);
  EXPECT_EQ(PhaseOf("a", "x"), Phase::kReserved);
}

TEST_F(SchedulerTest, BorrowsFromCohortAndIsReclaimed) {
  ASSERT_THAT(s_->Add(Gang("b", "big", 2, 3, 0), T(1)), IsOk());  // 6 of team-b's 4: borrows 2
  Schedule(2);
  EXPECT_EQ(PhaseOf("b", "big"), Phase::kReserved);
  EXPECT_EQ(s_->ClusterQueue("team-b")->resources.at({"gpu", "nvidia.com/gpu"}).borrowed, Quantity::FromUnits(2));
  EXPECT_EQ(s_->ClusterQueue("team-a")->resources.at({"gpu", "nvidia.com/gpu"}).lent, Quantity::FromUnits(2));
  ASSERT_THAT(s_->Add(Gang("a", "mine", 1, 4, 0), T(3)), IsOk());
  Schedule(4);
  EXPECT_EQ(PhaseOf("b", "big"), Phase::kEvicting);
  ASSERT_THAT(s_->Stopped({"b", "big"}, "uid-big", T(5)), IsOk());
  Schedule(6);
  EXPECT_EQ(PhaseOf("a", "mine"), Phase::kReserved);
  EXPECT_EQ(PhaseOf("b", "big"), Phase::kPending);
}

TEST_F(SchedulerTest, RejectsBadInputAndKeepsState) {
  workload::Workload w = Gang("", "x", 1, 1);
  EXPECT_THAT(s_->Add(w, T(1)), StatusIs(absl::StatusCode::kInvalidArgument, "namespace"));
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 1), T(1)), IsOk());
  Schedule(2);
  EXPECT_THAT(s_->Update(Gang("a", "x", 2, 1), T(3)), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(s_->Update(Gang("a", "nope", 2, 1), T(3)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(s_->CheckInvariants(), IsOk());
}

// A ClusterQueue deleted while it holds quota stays (terminating) through
// any number of later policy changes, until its gangs are gone.
TEST_F(SchedulerTest, ADeletedClusterQueueKeepsItsQuotaAcrossSeveralPolicyChanges) {
  ASSERT_THAT(s_->Add(Gang("b", "running", 2, 2), T(1)), IsOk());
  Schedule(2);
  ASSERT_EQ(PhaseOf("b", "running"), Phase::kReserved);
  std::string without_b = kPolicies;
  without_b = without_b.substr(0, without_b.find("---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-b}"));
  ASSERT_THAT(s_->SetPolicies(Policies(without_b.c_str()), T(3)), IsOk());
  ASSERT_EQ(s_->Terminating().size(), 1u);
  EXPECT_EQ(s_->Terminating()[0].meta.name, "team-b");
  // A second, unrelated change: team-b is neither in the old nor the new set.
  ASSERT_THAT(s_->SetPolicies(Policies(without_b.c_str()), T(4)), IsOk());
  ASSERT_THAT(s_->CheckInvariants(), IsOk());
  EXPECT_EQ(PhaseOf("b", "running"), Phase::kReserved);
  ASSERT_EQ(s_->Terminating().size(), 1u);
  std::optional<ClusterQueueStatus> b = s_->ClusterQueue("team-b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->admitted, 1);
  // Once its gang finishes, the queue is gone for good.
  ASSERT_THAT(s_->Finish({"b", "running"}, "", T(5)), IsOk());
  EXPECT_TRUE(s_->Terminating().empty());
}

}  // namespace
}  // namespace gangkeeper::broker

namespace gangkeeper::broker {
namespace {

// --- Identity (issue #19): kind + namespace + name, and the object's uid.

class IdentityTest : public SchedulerTest {
 protected:
  static workload::Workload PyTorch(const std::string& ns, const std::string& name, int64_t gpus) {
    workload::Workload w = Gang(ns, name, 1, gpus);
    w.kind = workload::Kind::kPyTorchJob;
    w.uid = "uid-pytorch-" + name;
    return w;
  }
  static WorkloadKey PyTorchKey(const std::string& ns, const std::string& name) {
    return {ns, name, workload::Kind::kPyTorchJob, false};
  }
};

TEST_F(IdentityTest, AJobAndAPyTorchJobOfOneNameAreTwoWorkloads) {
  ASSERT_THAT(s_->Add(Gang("a", "train", 1, 2), T(1)), IsOk());
  ASSERT_THAT(s_->Add(PyTorch("a", "train", 2), T(2)), IsOk());
  Schedule(3);
  ASSERT_NE(s_->Find({"a", "train"}), nullptr);
  ASSERT_NE(s_->Find(PyTorchKey("a", "train")), nullptr);
  EXPECT_EQ(s_->Find({"a", "train"})->phase, Phase::kReserved);
  EXPECT_EQ(s_->Find(PyTorchKey("a", "train"))->phase, Phase::kReserved);
  EXPECT_EQ(s_->ClusterQueue("team-a")->resources.at({"gpu", "nvidia.com/gpu"}).usage, Quantity::FromUnits(4));
  // Ending one leaves the other.
  ASSERT_THAT(s_->Finish({"a", "train"}, "uid-train", T(4)), IsOk());
  EXPECT_EQ(s_->Find({"a", "train"}), nullptr);
  ASSERT_NE(s_->Find(PyTorchKey("a", "train")), nullptr);
  EXPECT_EQ(s_->ClusterQueue("team-a")->resources.at({"gpu", "nvidia.com/gpu"}).usage, Quantity::FromUnits(2));
  EXPECT_EQ(KeyString(PyTorchKey("a", "train")), "pytorchjob.kubeflow.org/a/train");
}

TEST_F(IdentityTest, APodGroupAndASinglePodOfOneNameAreTwoWorkloads) {
  workload::Workload pod = Gang("a", "g", 1, 1);
  pod.kind = workload::Kind::kPod;
  workload::Workload member = pod;
  member.name = "g-0";
  member.uid = "uid-g-0";
  member.pod_group_name = "g";
  member.pod_group_total_count = 1;
  ASSERT_THAT(s_->Add(pod, T(1)), IsOk());
  ASSERT_THAT(s_->Add(member, T(2)), IsOk());
  EXPECT_EQ(s_->size(), 2u);
  EXPECT_NE(s_->Find({"a", "g", workload::Kind::kPod, false}), nullptr);
  EXPECT_NE(s_->Find({"a", "g", workload::Kind::kPod, true}), nullptr);
}

// A new object under a name whose old object still holds quota is queued
// at once; the old one keeps its quota until its own end is seen, and a
// deletion naming one uid touches that object only.
TEST_F(IdentityTest, ANewUidUnderAHoldingNameIsQueuedBesideIt) {
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 3), T(1)), IsOk());
  Schedule(2);
  workload::Workload again = Gang("a", "x", 1, 3);
  again.uid = "uid-x-again";
  ASSERT_THAT(s_->Add(again, T(3)), IsOk());
  Schedule(4);
  ASSERT_EQ(s_->Instances({"a", "x"}).size(), 2u);
  EXPECT_EQ(s_->Find({"a", "x"})->workload->uid, "uid-x-again");
  EXPECT_EQ(s_->Find({"a", "x"})->phase, Phase::kPending);  // 3 + 3 > 4
  EXPECT_EQ(s_->FindInstance({{"a", "x"}, "uid-x"})->phase, Phase::kReserved);
  ASSERT_THAT(s_->Remove({"a", "x"}, "uid-x-again-not", T(5)), IsOk());  // another uid: nothing
  EXPECT_EQ(s_->Instances({"a", "x"}).size(), 2u);
  ASSERT_THAT(s_->Remove({"a", "x"}, "uid-x", T(6)), IsOk());  // the old one is gone
  Schedule(7);
  ASSERT_EQ(s_->Instances({"a", "x"}).size(), 1u);
  EXPECT_EQ(s_->Find({"a", "x"})->phase, Phase::kReserved);
}

// The old object of a replaced name was deleted: once its pods stopped it
// is not queued again (it would take quota, and preempt, for an object
// that no longer exists). Found by the long invariant run (seed 744).
TEST_F(IdentityTest, AReplacedObjectIsNotQueuedAgainWhenItsPodsStop) {
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 3), T(1)), IsOk());
  Schedule(2);
  ASSERT_THAT(s_->ReleaseSucceeded({"a", "x"}, "uid-x", T(3)), IsOk());
  workload::Workload again = Gang("a", "x", 1, 3);
  again.uid = "uid-x-again";
  ASSERT_THAT(s_->Add(again, T(4)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "urgent", 1, 2, 10), T(5)), IsOk());
  Schedule(6);
  ASSERT_EQ(s_->FindInstance({{"a", "x"}, "uid-x"})->phase, Phase::kEvicting);
  (void)s_->TakeChanges();
  ASSERT_THAT(s_->Stopped({"a", "x"}, "uid-x", T(7)), IsOk());
  std::vector<StateChange> changes = s_->TakeChanges();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, StateChange::Type::kRequeued);  // its quota is freed
  EXPECT_EQ(changes[1].type, StateChange::Type::kRemoved);   // and it is gone
  EXPECT_EQ(changes[1].uid, "uid-x");
  EXPECT_EQ(s_->FindInstance({{"a", "x"}, "uid-x"}), nullptr);
  Schedule(8);
  EXPECT_EQ(PhaseOf("a", "urgent"), Phase::kReserved);
  ASSERT_EQ(s_->Instances({"a", "x"}).size(), 1u);
  EXPECT_EQ(s_->Find({"a", "x"})->workload->uid, "uid-x-again");
  EXPECT_EQ(s_->Find({"a", "x"})->phase, Phase::kPending);  // 2 + 3 > 4
  // Its deletion, seen late, is a stale answer.
  EXPECT_THAT(s_->Remove({"a", "x"}, "uid-x", T(9)), IsOk());
  EXPECT_EQ(s_->Instances({"a", "x"}).size(), 1u);
  EXPECT_THAT(s_->CheckInvariants(), IsOk());
}

TEST_F(IdentityTest, AReplacedObjectWhoseReleaseFailedIsGone) {
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 3), T(1)), IsOk());
  Schedule(2);
  ASSERT_EQ(PhaseOf("a", "x"), Phase::kReserved);
  workload::Workload again = Gang("a", "x", 1, 3);
  again.uid = "uid-x-again";
  ASSERT_THAT(s_->Add(again, T(3)), IsOk());
  ASSERT_THAT(s_->ReleaseFailed({"a", "x"}, "uid-x", "jobs.batch \"x\" not found", T(4)), IsOk());
  EXPECT_EQ(s_->FindInstance({{"a", "x"}, "uid-x"}), nullptr);
  Schedule(5);
  ASSERT_EQ(s_->Instances({"a", "x"}).size(), 1u);
  EXPECT_EQ(s_->Find({"a", "x"})->phase, Phase::kReserved);  // the new one gets the quota
}

TEST_F(IdentityTest, ANewUidUnderAPendingNameReplacesIt) {
  ASSERT_THAT(s_->Add(Gang("a", "big", 1, 4), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "x", 1, 3), T(2)), IsOk());
  Schedule(3);
  ASSERT_EQ(PhaseOf("a", "x"), Phase::kPending);
  workload::Workload again = Gang("a", "x", 1, 3);
  again.uid = "uid-x-again";
  ASSERT_THAT(s_->Add(again, T(4)), IsOk());
  ASSERT_EQ(s_->Instances({"a", "x"}).size(), 1u);
  EXPECT_EQ(s_->Find({"a", "x"})->workload->uid, "uid-x-again");
  EXPECT_THAT(s_->CheckInvariants(), IsOk());
}

// Kueue orders a queue by creationTimestamp: objects found at start (or
// registered late) keep their place.
TEST_F(SchedulerTest, QueueOrderFollowsTheCreationTimestamp) {
  ASSERT_THAT(s_->Add(Gang("a", "hog", 1, 4), T(1)), IsOk());
  workload::Workload late = Gang("a", "created-last", 1, 1);
  late.creation_timestamp = T(30);
  workload::Workload early = Gang("a", "created-first", 1, 1);
  early.creation_timestamp = T(10);
  workload::Workload unknown = Gang("a", "no-timestamp", 1, 1);
  ASSERT_THAT(s_->Add(late, T(40)), IsOk());
  ASSERT_THAT(s_->Add(early, T(41)), IsOk());
  ASSERT_THAT(s_->Add(unknown, T(42)), IsOk());  // ordered by its arrival
  Schedule(43);
  std::vector<std::string> order;
  for (const WorkloadInfo* w : s_->PendingInQueueOrder("team-a")) order.push_back(w->key.name);
  EXPECT_THAT(order, ElementsAre("created-first", "created-last", "no-timestamp"));
  // A timestamp from a clock ahead of ours counts as now.
  workload::Workload future = Gang("a", "future", 1, 1);
  future.creation_timestamp = T(1000);
  ASSERT_THAT(s_->Add(future, T(44)), IsOk());
  EXPECT_EQ(s_->Find({"a", "future"})->queued_at, T(44));
}

// Kueue assigns a flavor to a pod set without pods whose pods would
// request something; it holds nothing.
TEST_F(SchedulerTest, APodSetWithoutPodsGetsAFlavorAndHoldsNothing) {
  workload::Workload w = Gang("a", "zero", 1, 1);
  workload::PodSet none = w.pod_sets[0];
  none.name = "standby";
  none.count = 0;
  w.pod_sets.push_back(none);
  ASSERT_THAT(s_->Add(w, T(1)), IsOk());
  Schedule(2);
  const WorkloadInfo* info = s_->Find({"a", "zero"});
  ASSERT_EQ(info->phase, Phase::kReserved);
  ASSERT_EQ(info->admission->pod_sets.size(), 2u);
  EXPECT_EQ(info->admission->pod_sets[1].flavors.at("nvidia.com/gpu"), "gpu");
  EXPECT_EQ(info->admission->pod_sets[1].count, 0);
  EXPECT_EQ(s_->ClusterQueue("team-a")->resources.at({"gpu", "nvidia.com/gpu"}).usage, Quantity::FromUnits(1));
}

// Each flavor tried says why it could not take the pod set (Kueue lists
// them), including an untolerated taint.
TEST(SchedulerReasonTest, APendingMessageGivesEveryFlavorsReason) {
  auto s = Scheduler::Create(Policies(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - {name: on-demand, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
    - {name: spot, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: cq}
)"));
  ASSERT_THAT(s.status(), IsOk());
  ASSERT_THAT((*s)->Add(Gang("a", "wide", 1, 4), T(1)), IsOk());
  (*s)->Schedule(T(2));
  const WorkloadInfo* w = (*s)->Find({"a", "wide"});
  ASSERT_EQ(w->phase, Phase::kPending);
  EXPECT_THAT(w->reason.message,
              ::testing::HasSubstr("; flavors tried: flavor on-demand: 4 nvidia.com/gpu exceeds what it can ever "
                                   "provide (2); flavor spot has taint spot=true:NoSchedule that pod set worker does "
                                   "not tolerate"));
}

// Parked workloads are Kueue's inadmissible ones; finished ones are kept
// for the API.
TEST_F(SchedulerTest, ParkedWorkloadsAreCountedApartAndFinishedOnesAreKept) {
  ASSERT_THAT(s_->Add(Gang("a", "hog", 1, 4), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "parked", 1, 2), T(2)), IsOk());
  Schedule(3);
  std::optional<ClusterQueueStatus> st = s_->ClusterQueue("team-a");
  EXPECT_EQ(st->pending, 1);
  EXPECT_EQ(st->pending_inadmissible, 1);
  ASSERT_THAT(s_->Finish({"a", "hog"}, "uid-hog", T(4)), IsOk());
  std::vector<std::shared_ptr<const WorkloadInfo>> finished = s_->TakeFinished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0]->key.name, "hog");
  EXPECT_EQ(finished[0]->phase, Phase::kFinished);
  EXPECT_EQ(finished[0]->finished_at, T(4));
  EXPECT_TRUE(s_->TakeFinished().empty());
}

// --- The trust model (DESIGN §2, issue #20): with a Kubernetes API a
// review is a hint. A workload known only from a review is tracked but
// neither queued nor admitted; the stored object confirms it.

workload::Workload FromReview(workload::Workload w, const std::string& uid = "") {
  w.unconfirmed = true;
  w.submitted_by = "mallory";
  w.submitter_claimed = true;
  if (!uid.empty()) w.uid = uid;
  return w;
}

TEST_F(SchedulerTest, AWorkloadKnownOnlyFromAReviewIsNeverAdmitted) {
  ASSERT_THAT(s_->Add(FromReview(Gang("a", "phantom", 1, 1)), T(1)), IsOk());
  Schedule(2);
  Schedule(3);
  const WorkloadInfo* w = s_->Find({"a", "phantom"});
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->phase, Phase::kPending);
  EXPECT_EQ(w->reason.code, PendingReason::Code::kUnconfirmed);
  EXPECT_THAT(w->reason.message, ::testing::HasSubstr("waiting for the API server to store a/phantom"));
  EXPECT_THAT(s_->PendingInQueueOrder("team-a"), ::testing::IsEmpty());
  EXPECT_EQ(s_->unconfirmed(), 1u);
  EXPECT_EQ(s_->ClusterQueue("team-a")->pending, 0);
  std::vector<StateChange> changes = s_->TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].type, StateChange::Type::kRegistered);
  EXPECT_TRUE(changes[0].unconfirmed);  // not audited: nothing was decided
  EXPECT_TRUE(changes[0].actor_claimed);
  // Gone without ever being stored: removed, holding nothing.
  ASSERT_THAT(s_->Remove({"a", "phantom"}, "uid-phantom", T(4)), IsOk());
  EXPECT_EQ(s_->size(), 0u);
  EXPECT_EQ(s_->unconfirmed(), 0u);
  ASSERT_THAT(s_->CheckInvariants(), IsOk());
}

TEST_F(SchedulerTest, TheStoredObjectConfirmsAReviewsWorkloadWithItsOwnPodSets) {
  // The review says one pod; the API server stored three.
  ASSERT_THAT(s_->Add(FromReview(Gang("a", "train", 1, 1)), T(1)), IsOk());
  Schedule(2);
  (void)s_->TakeChanges();
  workload::Workload stored = Gang("a", "train", 3, 1);
  ASSERT_THAT(s_->Update(stored, T(3)), IsOk());
  Schedule(4);
  const WorkloadInfo* w = s_->Find({"a", "train"});
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->phase, Phase::kReserved);
  EXPECT_FALSE(w->workload->unconfirmed);
  EXPECT_EQ(w->admission->usage.at({"gpu", "nvidia.com/gpu"}), Quantity::FromUnits(3));
  EXPECT_EQ(s_->unconfirmed(), 0u);
  std::vector<StateChange> changes = s_->TakeChanges();
  ASSERT_EQ(changes.size(), 2u);
  // The registration the audit log sees, by the user the review named.
  EXPECT_EQ(changes[0].type, StateChange::Type::kRegistered);
  EXPECT_FALSE(changes[0].unconfirmed);
  EXPECT_EQ(changes[0].reason, "Confirmed");
  EXPECT_EQ(changes[0].actor, "mallory");
  EXPECT_TRUE(changes[0].actor_claimed);
  EXPECT_EQ(changes[1].type, StateChange::Type::kAdmitted);
}

TEST_F(SchedulerTest, AReviewCannotReplaceShrinkOrOutrankAStoredWorkload) {
  ASSERT_THAT(s_->Add(Gang("a", "hog", 1, 4), T(1)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "train", 3, 1), T(2)), IsOk());
  Schedule(3);
  ASSERT_EQ(PhaseOf("a", "train"), Phase::kPending);
  // A review of another object under the name, and one shrinking the gang
  // to fit: neither replaces nor changes what the API server stored.
  ASSERT_THAT(s_->Add(FromReview(Gang("a", "train", 1, 1), "uid-forged"), T(4)), IsOk());
  ASSERT_THAT(s_->Update(FromReview(Gang("a", "train", 1, 0)), T(4)), IsOk());
  Schedule(5);
  const WorkloadInfo* w = s_->Find({"a", "train"});
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->workload->uid, "uid-train");
  EXPECT_EQ(w->workload->pod_sets[0].count, 3);
  EXPECT_EQ(w->workload->pod_sets[0].requests.at("nvidia.com/gpu"), Quantity::FromUnits(1));
  EXPECT_EQ(s_->Instances({"a", "train"}).size(), 2u);
  ASSERT_THAT(s_->Finish({"a", "hog"}, "uid-hog", T(6)), IsOk());
  Schedule(7);
  w = s_->FindInstance(InstanceOf(WorkloadKey{"a", "train"}, "uid-train"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->phase, Phase::kReserved);
  EXPECT_EQ(w->admission->usage.at({"gpu", "nvidia.com/gpu"}), Quantity::FromUnits(3));
  const WorkloadInfo* forged = s_->FindInstance(InstanceOf(WorkloadKey{"a", "train"}, "uid-forged"));
  ASSERT_NE(forged, nullptr);
  EXPECT_EQ(forged->phase, Phase::kPending);
  EXPECT_FALSE(forged->admission.has_value());
}

// A preempted workload whose pods stopped is requeued, not taken for
// replaced, when only a review speaks of another object under its name.
TEST_F(SchedulerTest, APreemptedWorkloadIsRequeuedDespiteAReviewUnderItsName) {
  ASSERT_THAT(s_->Add(Gang("a", "low", 1, 4, 10), T(1)), IsOk());
  Schedule(2);
  ASSERT_THAT(s_->ReleaseSucceeded({"a", "low"}, "uid-low", T(2)), IsOk());
  ASSERT_THAT(s_->Add(FromReview(Gang("a", "low", 1, 1), "uid-forged"), T(3)), IsOk());
  ASSERT_THAT(s_->Add(Gang("a", "high", 1, 4, 100), T(3)), IsOk());
  Schedule(4);
  ASSERT_EQ(s_->FindInstance(InstanceOf(WorkloadKey{"a", "low"}, "uid-low"))->phase, Phase::kEvicting);
  ASSERT_THAT(s_->Stopped({"a", "low"}, "uid-low", T(5)), IsOk());
  Schedule(6);
  const WorkloadInfo* low = s_->FindInstance(InstanceOf(WorkloadKey{"a", "low"}, "uid-low"));
  ASSERT_NE(low, nullptr) << "the preempted workload was dropped";
  EXPECT_EQ(low->phase, Phase::kPending);
  EXPECT_EQ(PhaseOf("a", "high"), Phase::kReserved);
}

}  // namespace
}  // namespace gangkeeper::broker
