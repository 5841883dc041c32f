// gangkeeper: table-driven tests for the preemptor (src/broker/preemption.h),
// with the expected behaviour taken from KUEUE-SEMANTICS.md §3.6 (classical
// preemption: the policies, the candidate sets, their order, the two
// borrowing attempts, fill-back) and §3.7 (fair sharing), plus the
// anti-churn rule of DESIGN §2. Each row is a world (policies and admitted
// gangs, quota_world.h) and an incoming gang in team-a that needs some
// nvidia.com/gpu of flavor a100; it checks the victims, in order, with the
// reason each would be told.
#include "src/broker/preemption.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/broker/quota_world.h"

namespace gangkeeper::broker {
namespace {

const std::string kPreemptA100 = Flavor("a100");

// team-a alone with `nominal` a100 GPUs and `spec` (its preemption policy).
std::string PreemptOneQueue(const std::string& spec, int nominal = 4) {
  return Docs({kPreemptA100, Cq("team-a", spec, {GpuGroup({absl::StrCat("a100: ", nominal)})}),
               Cq("team-z", "", {GpuGroup({"a100: 4"})})});
}

// team-a (with `spec`) and the others in one flat cohort, with their quotas.
std::string Cohort(const std::string& spec, const std::vector<std::pair<std::string, int>>& quotas,
                   const std::string& cohort = "shared") {
  std::vector<std::string> docs = {kPreemptA100};
  for (const auto& [cq, nominal] : quotas) {
    docs.push_back(Cq(cq, absl::StrCat("  cohort: ", cohort, "\n", cq == "team-a" ? spec : ""),
                      {GpuGroup({absl::StrCat("a100: ", nominal)})}));
  }
  return Docs(docs);
}

// Kueue's Configuration with fair sharing on and these strategies.
std::string FairStrategies(const std::string& list) {
  return absl::StrCat("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: true\n",
                      "  preemptionStrategies: ", list, "\n");
}

constexpr char kPreemptLowerPriority[] = "  preemption: {withinClusterQueue: LowerPriority}\n";
constexpr char kReclaimAny[] = "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n";

AdmittedSpec Gang(const std::string& name, const std::string& cq, int32_t priority, int64_t gpus, int admitted_s = 0) {
  return AdmittedSpec{.name = name, .cq = cq, .priority = priority, .holds = {{"a100", kGpu, gpus}},
                      .admitted_s = admitted_s};
}

struct PreemptCase {
  std::string name;
  std::string policies;
  std::vector<AdmittedSpec> admitted;
  int64_t gpus = 4;         // what the incoming gang needs
  int32_t priority = 10;    // the incoming gang's
  int queued_s = 100;       // its queue-order time
  bool can_preempt = true;  // false: preemptionPolicy Never
  bool fair_sharing = false;
  std::function<void(ChurnGuard&)> world_change = nullptr;  // before the search
  std::vector<std::string> want_victims = {};
  int64_t want_guarded = 0;  // candidates spared by the anti-churn rule
};

std::vector<PreemptCase> PreemptCases() {
  return {
      // --- withinClusterQueue (§3.6 policy predicates).
      {.name = "WithinClusterQueueNeverPreemptsNothing",
       .policies = PreemptOneQueue("  preemption: {withinClusterQueue: Never}\n"),
       .admitted = {Gang("low", "team-a", 0, 4)}},
      {.name = "LowerPriorityPreemptsALowerPriorityGang",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("low", "team-a", 0, 4)},
       .want_victims = {"low InClusterQueue"}},
      {.name = "LowerPrioritySparesAnEqualPriorityGang",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("peer", "team-a", 10, 4)}},
      {.name = "LowerOrNewerEqualPriorityPreemptsAnEqualGangQueuedLater",
       .policies = PreemptOneQueue("  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n"),
       .admitted = {AdmittedSpec{.name = "later", .cq = "team-a", .priority = 10, .holds = {{"a100", kGpu, 4}},
                                 .queued_s = 150}},
       .want_victims = {"later InClusterQueue"}},
      {.name = "LowerOrNewerEqualPrioritySparesAnEqualGangQueuedEarlier",
       .policies = PreemptOneQueue("  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n"),
       .admitted = {AdmittedSpec{.name = "earlier", .cq = "team-a", .priority = 10, .holds = {{"a100", kGpu, 4}},
                                 .queued_s = 50}}},
      {.name = "APreemptorWithPreemptionPolicyNeverGetsNoVictims",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("low", "team-a", 0, 4)},
       .can_preempt = false},
      // --- Candidate order (§3.6 CandidatesOrdering) and the minimal set.
      {.name = "LowerPriorityGoesFirst",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("p1", "team-a", 1, 2, 1), Gang("p5", "team-a", 5, 2, 2)},
       .gpus = 2,
       .want_victims = {"p1 InClusterQueue"}},
      {.name = "AmongEqualPrioritiesTheNewestAdmittedGoesFirst",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("old", "team-a", 0, 2, 1), Gang("new", "team-a", 0, 2, 2)},
       .gpus = 2,
       .want_victims = {"new InClusterQueue"}},
      {.name = "AGangAlreadyStoppingGoesFirst",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {AdmittedSpec{.name = "stopping", .cq = "team-a", .priority = 5, .holds = {{"a100", kGpu, 2}},
                                 .admitted_s = 1, .evicting = true},
                    Gang("low", "team-a", 0, 2, 2)},
       .gpus = 2,
       .want_victims = {"stopping InClusterQueue"}},
      {.name = "FillBackKeepsAGangWhoseRemovalWasNotNeeded",
       .policies = PreemptOneQueue(kPreemptLowerPriority, 5),
       .admitted = {Gang("small", "team-a", 1, 1, 1), Gang("big", "team-a", 2, 4, 2)},
       .want_victims = {"big InClusterQueue"}},
      {.name = "SeveralVictimsWhenOneIsNotEnough",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {Gang("w1", "team-a", 0, 1, 1), Gang("w2", "team-a", 0, 1, 2), Gang("w3", "team-a", 0, 2, 3)},
       .gpus = 3,
       .want_victims = {"w3 InClusterQueue", "w2 InClusterQueue"}},
      // --- reclaimWithinCohort: quota lent to other queues comes back.
      {.name = "ReclaimWithinCohortNeverLeavesOtherQueuesAlone",
       .policies = Cohort(kPreemptLowerPriority, {{"team-a", 4}, {"team-b", 4}}),
       .admitted = {Gang("b-1", "team-b", 0, 4, 1), Gang("b-2", "team-b", 0, 2, 2)}},
      {.name = "ReclaimAnyTakesBackLentQuotaWhateverThePriority",
       .policies = Cohort(kReclaimAny, {{"team-a", 4}, {"team-b", 4}}),
       .admitted = {Gang("b-1", "team-b", 100, 4, 1), Gang("b-2", "team-b", 100, 2, 2)},
       .want_victims = {"b-2 InCohortReclamation"}},
      {.name = "ReclaimLowerPrioritySparesBorrowersOfHigherPriority",
       .policies = Cohort("  preemption: {reclaimWithinCohort: LowerPriority}\n", {{"team-a", 4}, {"team-b", 4}}),
       .admitted = {Gang("b-1", "team-b", 100, 4, 1), Gang("b-2", "team-b", 100, 2, 2)}},
      {.name = "QueuesWithinTheirNominalQuotaAreNotReclaimedFrom",
       .policies = Cohort(kReclaimAny, {{"team-a", 4}, {"team-b", 4}, {"team-c", 4}}),
       .admitted = {Gang("b-low", "team-b", -5, 4), Gang("c-1", "team-c", 0, 4, 1), Gang("c-2", "team-c", 0, 4, 2)},
       .want_victims = {"c-2 InCohortReclamation"}},
      {.name = "OtherQueuesGoBeforeThePreemptorsOwn",
       .policies = Cohort(kReclaimAny, {{"team-a", 4}, {"team-b", 4}}),
       .admitted = {Gang("own-low", "team-a", 0, 2), Gang("b-1", "team-b", 50, 4, 1), Gang("b-2", "team-b", 50, 2, 2)},
       .gpus = 2,
       .want_victims = {"b-2 InCohortReclamation"}},
      // --- borrowWithinCohort: reclaiming while the preemptor borrows.
      {.name = "BorrowWithinCohortReclaimsWhileBorrowing",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}}\n",
                          {{"team-a", 2}, {"team-b", 2}, {"team-c", 2}}),
       .admitted = {Gang("b-1", "team-b", 0, 1), Gang("c-1", "team-c", 0, 2, 1), Gang("c-2", "team-c", 0, 3, 2)},
       .gpus = 3,
       .want_victims = {"c-2 InCohortReclaimWhileBorrowing"}},
      {.name = "MaxPriorityThresholdProtectsGangsAboveIt",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: "
                          "{policy: LowerPriority, maxPriorityThreshold: 3}}\n",
                          {{"team-a", 2}, {"team-b", 2}, {"team-c", 2}}),
       .admitted = {Gang("b-1", "team-b", 0, 1), Gang("c-1", "team-c", 5, 2, 1), Gang("c-2", "team-c", 5, 3, 2)},
       .gpus = 3},
      {.name = "WithoutBorrowWithinCohortABorrowingPreemptorReclaimsNothing",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any}\n", {{"team-a", 2}, {"team-b", 2}, {"team-c", 2}}),
       .admitted = {Gang("b-1", "team-b", 0, 1), Gang("c-1", "team-c", 0, 2, 1), Gang("c-2", "team-c", 0, 3, 2)},
       .gpus = 3},
      {.name = "HierarchicalAdvantageReclaimsFromAnotherSubtreeWhileBorrowing",
       .policies = Docs({kPreemptA100, CohortDoc("root"), CohortDoc("left", "root"), CohortDoc("right", "root"),
                         Cq("team-a", "  cohort: left\n  preemption: {reclaimWithinCohort: Any}\n",
                            {GpuGroup({"a100: 0"})}),
                         Cq("team-b", "  cohort: left\n", {GpuGroup({"a100: 4"})}),
                         Cq("team-c", "  cohort: right\n", {GpuGroup({"a100: 4"})})}),
       .admitted = {Gang("c-1", "team-c", 0, 4, 1), Gang("c-2", "team-c", 0, 4, 2)},
       .want_victims = {"c-2 InCohortReclamation"}},
      // --- Fair sharing (§3.7): S2-b, below the target's initial share.
      {.name = "FairSharingReclaimsFromTheQueueAboveItsShare",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any}\n", {{"team-a", 2}, {"team-b", 6}}),
       .admitted = {Gang("b-1", "team-b", 0, 4, 1), Gang("b-2", "team-b", 0, 4, 2)},
       .gpus = 3,
       .fair_sharing = true,
       .want_victims = {"b-2 InCohortFairSharing"}},
      // --- Kueue's Configuration, fairSharing.preemptionStrategies: the same
      // world, where only S2-b (less than the target's initial share)
      // finds the victim.
      {.name = "FairSharingWithOnlyTheFinalShareStrategyReclaimsNothing",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any}\n", {{"team-a", 2}, {"team-b", 6}}) +
                   "---\n" + FairStrategies("[LessThanOrEqualToFinalShare]"),
       .admitted = {Gang("b-1", "team-b", 0, 4, 1), Gang("b-2", "team-b", 0, 4, 2)},
       .gpus = 3,
       .fair_sharing = true},
      {.name = "FairSharingWithOnlyTheInitialShareStrategyReclaimsInTheFirstPass",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any}\n", {{"team-a", 2}, {"team-b", 6}}) +
                   "---\n" + FairStrategies("[LessThanInitialShare]"),
       .admitted = {Gang("b-1", "team-b", 0, 4, 1), Gang("b-2", "team-b", 0, 4, 2)},
       .gpus = 3,
       .fair_sharing = true,
       .want_victims = {"b-2 InCohortFairSharing"}},
      {.name = "FairSharingWithBothStrategiesInKueuesOrder",
       .policies = Cohort("  preemption: {reclaimWithinCohort: Any}\n", {{"team-a", 2}, {"team-b", 6}}) +
                   "---\n" + FairStrategies("[LessThanOrEqualToFinalShare, LessThanInitialShare]"),
       .admitted = {Gang("b-1", "team-b", 0, 4, 1), Gang("b-2", "team-b", 0, 4, 2)},
       .gpus = 3,
       .fair_sharing = true,
       .want_victims = {"b-2 InCohortFairSharing"}},
      // --- The anti-churn rule (DESIGN §2).
      {.name = "AGangPreemptedOnceIsSparedUntilSomethingChanges",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {AdmittedSpec{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}, .preempted_before = true}},
       .want_guarded = 1},
      {.name = "AChangeInItsTreeLiftsTheAntiChurnGuard",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {AdmittedSpec{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}, .preempted_before = true}},
       .world_change = [](ChurnGuard& g) { g.WorldChanged("team-a"); },
       .want_victims = {"low InClusterQueue"}},
      {.name = "AChangeInAnotherTreeKeepsTheAntiChurnGuard",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {AdmittedSpec{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}, .preempted_before = true}},
       .world_change = [](ChurnGuard& g) { g.WorldChanged("team-z"); },
       .want_guarded = 1},
      {.name = "APolicyChangeLiftsTheAntiChurnGuard",
       .policies = PreemptOneQueue(kPreemptLowerPriority),
       .admitted = {AdmittedSpec{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}, .preempted_before = true}},
       .world_change = [](ChurnGuard& g) { g.PoliciesChanged(); },
       .want_victims = {"low InClusterQueue"}},
  };
}

// gtest prints a parameter by its name.
void PrintTo(const PreemptCase& c, std::ostream* os) { *os << c.name; }

class PreemptorTest : public ::testing::TestWithParam<PreemptCase> {};

TEST_P(PreemptorTest, ChoosesVictims) {
  const PreemptCase& c = GetParam();
  QuotaWorld world(c.policies);
  for (const AdmittedSpec& a : c.admitted) world.Admit(a);
  ASSERT_EQ(world.error(), "") << c.policies;
  const Entry& in = world.Pending("incoming", c.priority, {}, c.queued_s, c.can_preempt);
  if (c.world_change) c.world_change(world.guard());
  const std::vector<Target> targets =
      world.FindTargets(in, "team-a", FlavorResource{"a100", kGpu}, c.gpus, c.fair_sharing);
  EXPECT_THAT(Victims(targets), ::testing::ElementsAreArray(c.want_victims));
  EXPECT_EQ(world.guard().guarded(), c.want_guarded);
  // The search always leaves the tree as it found it.
  EXPECT_TRUE(world.tree().CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Kueue, PreemptorTest, ::testing::ValuesIn(PreemptCases()),
                         [](const ::testing::TestParamInfo<PreemptCase>& p) { return p.param.name; });

// The index the searches read: per FlavorResource, the admitted gangs that
// hold a non-zero amount of it, kept as gangs come and go.
TEST(AdmittedSetTest, IndexesGangsByFlavorResourceTheyHold) {
  const FlavorResource a100{"a100", kGpu};
  const FlavorResource h100{"h100", kGpu};
  const FlavorResource cpu{"a100", "cpu"};
  auto admitted = [](ResourceAmounts usage) {
    auto e = std::make_unique<Entry>();
    Assignment a;
    a.cluster_queue = "team-a";
    a.usage = std::move(usage);
    e->info().admission = std::move(a);
    return e;
  };
  auto both = admitted({{a100, quantity::Quantity::FromUnits(2)}, {h100, quantity::Quantity::FromUnits(1)}});
  auto only_a100 = admitted({{a100, quantity::Quantity::FromUnits(4)}, {cpu, quantity::Quantity()}});
  AdmittedSet set;
  set.insert(both.get());
  set.insert(only_a100.get());
  set.insert(only_a100.get());  // again: no change
  EXPECT_EQ(set.size(), 2u);
  EXPECT_THAT(set.Using(a100), ::testing::UnorderedElementsAre(both.get(), only_a100.get()));
  EXPECT_THAT(set.Using(h100), ::testing::ElementsAre(both.get()));
  EXPECT_TRUE(set.Using(cpu).empty());  // a zero amount is not holding it
  set.erase(both.get());
  EXPECT_THAT(set.Using(a100), ::testing::ElementsAre(only_a100.get()));
  EXPECT_TRUE(set.Using(h100).empty());
  EXPECT_EQ(set.by_flavor_resource().size(), 1u);  // no empty lists left behind
  set.erase(only_a100.get());
  set.erase(only_a100.get());  // not listed: no change
  EXPECT_TRUE(set.empty());
  EXPECT_TRUE(set.by_flavor_resource().empty());
}

}  // namespace
}  // namespace gangkeeper::broker
