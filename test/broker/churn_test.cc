// gangkeeper: the preemption livelock found with the repository's own
// policies/ (issue #19), and the preemptor's hold, tested on the Scheduler
// with a simulated actuator that answers every release and suspension.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;

using ::gangkeeper::testing::RepositoryPolicies;

workload::Workload GpuJob(const std::string& ns, const std::string& name, int gpus) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "gpu-queue";
  workload::PodSet ps;
  ps.name = "main";
  ps.count = 1;
  ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(gpus);
  ps.limits = ps.requests;
  w.pod_sets.push_back(ps);
  return w;
}

// A Scheduler and an actuator that confirms every release and stops every
// evicted gang, one scheduling pass later.
class Cluster {
 public:
  explicit Cluster(std::shared_ptr<const model::PolicySet> policies, SchedulerOptions options = {}) {
    auto s = Scheduler::Create(std::move(policies), options);
    EXPECT_THAT(s.status(), IsOk());
    s_ = *std::move(s);
  }
  absl::Time Tick() { return now_ += absl::Milliseconds(10); }
  void Add(const workload::Workload& w) { ASSERT_THAT(s_->Add(w, Tick()), IsOk()); }
  // Passes and answers until nothing changes; the number of rounds.
  int Settle(int max_rounds) {
    for (int round = 1; round <= max_rounds; ++round) {
      s_->Schedule(Tick());
      EXPECT_THAT(s_->CheckInvariants(), IsOk());
      std::vector<StateChange> changes = s_->TakeChanges();
      if (changes.empty()) return round;
      for (const StateChange& c : changes) {
        log_.push_back(c);
        if (c.type == StateChange::Type::kAdmitted) {
          EXPECT_THAT(s_->ReleaseSucceeded(c.key, c.uid, Tick()), IsOk());
        } else if (c.type == StateChange::Type::kEvicted) {
          EXPECT_THAT(s_->Stopped(c.key, c.uid, Tick()), IsOk());
        }
      }
      for (StateChange& c : s_->TakeChanges()) log_.push_back(std::move(c));
    }
    return max_rounds + 1;
  }
  Phase PhaseOf(const std::string& ns, const std::string& name) const {
    const WorkloadInfo* w = s_->Find({ns, name});
    return w == nullptr ? Phase::kFinished : w->phase;
  }
  std::map<std::string, int> Preemptions() const {
    std::map<std::string, int> out;
    for (const StateChange& c : log_) {
      if (c.type == StateChange::Type::kEvicted) ++out[absl::StrCat(c.key.namespace_name, "/", c.key.name)];
    }
    return out;
  }
  Scheduler& s() { return *s_; }

 private:
  std::unique_ptr<Scheduler> s_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::vector<StateChange> log_;
};

// The livelock of issue #19, step by step: team-a (nominal 4) runs three
// 1-GPU jobs, team-b (nominal 2, borrowing limit 2) three, one of them on
// team-a's idle GPU; team-a's 2-GPU job cannot fit (BestEffortFIFO sets it
// aside), and its 1-GPU job P reclaims the borrowed GPU. Before the fix the
// borrower was admitted, preempted and requeued ~1,600 times a second and P
// never ran: the set-aside head came back in front of P and the quota P
// waited for went to the borrower again.
TEST(ChurnTest, TheRepositoryPoliciesLivelockIsGone) {
  for (bool one_head : {false, true}) {
    SCOPED_TRACE(one_head ? "one head per cycle" : "every head that fits");
    Cluster c(RepositoryPolicies(), SchedulerOptions{.one_head_per_cycle = one_head});
    for (const char* n : {"a1", "a2", "a3"}) c.Add(GpuJob("team-a", n, 1));
    for (const char* n : {"b1", "b2", "b3"}) c.Add(GpuJob("team-b", n, 1));
    ASSERT_LE(c.Settle(50), 50);
    for (const char* n : {"a1", "a2", "a3"}) EXPECT_EQ(c.PhaseOf("team-a", n), Phase::kRunning) << n;
    for (const char* n : {"b1", "b2", "b3"}) EXPECT_EQ(c.PhaseOf("team-b", n), Phase::kRunning) << n;
    c.Add(GpuJob("team-a", "big", 2));
    c.Add(GpuJob("team-a", "p", 1));
    // A fixed point in a few rounds, not a loop.
    ASSERT_LE(c.Settle(50), 50) << "no fixed point: the broker churns";
    EXPECT_EQ(c.PhaseOf("team-a", "p"), Phase::kRunning);
    EXPECT_EQ(c.PhaseOf("team-a", "big"), Phase::kPending);
    // Exactly one of team-b's jobs (the borrower) was preempted, once.
    std::map<std::string, int> preempted = c.Preemptions();
    ASSERT_EQ(preempted.size(), 1u);
    EXPECT_EQ(preempted.begin()->second, 1);
    const std::string victim = preempted.begin()->first.substr(std::string("team-b/").size());
    EXPECT_EQ(c.PhaseOf("team-b", victim), Phase::kPending);
    // And it stays that way: more passes change nothing.
    EXPECT_EQ(c.Settle(5), 1);
  }
}

// The hold does not depend on the preemptor's place in its queue: while
// its victim stops, a higher-priority workload that arrives in the same
// queue and cannot fit does not free the held quota for the victim.
TEST(ChurnTest, APreemptorKeepsItsHoldBehindAHigherPriorityArrival) {
  Cluster c(RepositoryPolicies());
  for (const char* n : {"a1", "a2", "a3"}) c.Add(GpuJob("team-a", n, 1));
  for (const char* n : {"b1", "b2", "b3"}) c.Add(GpuJob("team-b", n, 1));
  ASSERT_LE(c.Settle(50), 50);
  c.Add(GpuJob("team-a", "p", 1));
  // One pass: P preempts the borrower; its suspension is not answered yet.
  c.s().Schedule(c.Tick());
  std::vector<StateChange> changes = c.s().TakeChanges();
  const StateChange* evicted = nullptr;
  for (const StateChange& ch : changes) {
    if (ch.type == StateChange::Type::kEvicted) evicted = &ch;
  }
  ASSERT_NE(evicted, nullptr);
  const WorkloadKey victim = evicted->key;
  const std::string victim_uid = evicted->uid;
  workload::Workload urgent = GpuJob("team-a", "urgent", 3);
  urgent.priority = 1000;
  urgent.preemption_policy = model::PreemptionPolicy::kNever;
  c.Add(urgent);
  ASSERT_THAT(c.s().Stopped(victim, victim_uid, c.Tick()), IsOk());
  // The victim is pending again; the quota it gave back is P's.
  ASSERT_LE(c.Settle(50), 50);
  EXPECT_EQ(c.PhaseOf("team-a", "p"), Phase::kRunning);
  EXPECT_EQ(c.PhaseOf(victim.namespace_name, victim.name), Phase::kPending);
  EXPECT_EQ(c.PhaseOf("team-a", "urgent"), Phase::kPending);
}

}  // namespace
}  // namespace gangkeeper::broker
