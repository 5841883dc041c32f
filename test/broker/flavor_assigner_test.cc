// gangkeeper: table-driven tests for the flavor assigner
// (src/broker/flavor_assigner.h), with the expected behaviour taken from
// KUEUE-SEMANTICS.md §3.5 (flavor order, fungibility, borrowing, lending,
// pod sets, MIG profiles) and §3.4 (the quota arithmetic behind each
// answer). Each row is a world (policies and admitted gangs, quota_world.h)
// and an incoming gang; it checks what a user would see: the mode, the
// flavor each pod set got, whether it borrows, the pending reason, and the
// victims the preemption oracle found.
#include "src/broker/flavor_assigner.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/broker/quota_world.h"

namespace gangkeeper::broker {
namespace {

using Code = PendingReason::Code;

const std::string kA100 = Flavor("a100");
const std::string kH100 = Flavor("h100");
const std::string kReservedA100 = Flavor("a100", "  nodeTaints: [{key: reserved, value: ml, effect: NoSchedule}]\n");
const std::string kSpot = Flavor("spot", "  nodeLabels: {tier: spot}\n");
constexpr char kLowerPriority[] = "  preemption: {withinClusterQueue: LowerPriority}\n";
constexpr char kTryNextBoth[] = "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}\n";

PodSetSpec Gpus(int64_t pods, int64_t per_pod, const std::string& name = "main") {
  return PodSetSpec{.name = name, .count = pods, .requests = {{kGpu, per_pod}}};
}

// team-a alone, with `flavors` for nvidia.com/gpu.
std::string OneQueue(const std::vector<std::string>& flavors, const std::string& spec = "",
                     const std::vector<std::string>& rfs = {kA100, kH100}) {
  std::vector<std::string> docs = rfs;
  docs.push_back(Cq("team-a", spec, {GpuGroup(flavors)}));
  return Docs(docs);
}

// team-a and team-b in cohort "shared", each with its own flavors.
std::string TwoQueues(const std::vector<std::string>& a, const std::vector<std::string>& b, const std::string& a_spec = "") {
  return Docs({kA100, kH100, Cq("team-a", absl::StrCat("  cohort: shared\n", a_spec), {GpuGroup(a)}),
               Cq("team-b", "  cohort: shared\n", {GpuGroup(b)})});
}

struct Case {
  std::string name;
  std::string policies;
  std::vector<AdmittedSpec> admitted;
  std::vector<PodSetSpec> pod_sets;
  int32_t priority = 0;
  bool fair_sharing = false;
  FitMode want_mode = FitMode::kFit;
  std::string want_flavors;  // FlavorsOf(assignment); checked unless no flavor was found
  bool want_borrowing = false;
  Code want_reason = Code::kQueued;  // checked for kNoFit / kNoCandidates
  int64_t want_available = -1;       // the reason's "available now", when >= 0
  std::string want_usage;            // UsageOf(assignment), when set
  std::vector<std::string> want_victims = {};  // the oracle's, when the result carries them
};

std::string UsageOf(const Assignment& a) {
  std::vector<std::string> out;
  for (const auto& [fr, q] : a.usage) out.push_back(absl::StrCat(fr.ToString(), "=", q.Format()));
  return absl::StrJoin(out, ", ");
}

std::vector<Case> Cases() {
  return {
      // --- Flavor order (§3.5: tried in the order the ClusterQueue lists them).
      {.name = "FirstFlavorThatFitsIsTaken",
       .policies = OneQueue({"a100: 4", "h100: 4"}),
       .pod_sets = {Gpus(2, 1)},
       .want_flavors = "main: nvidia.com/gpu=a100"},
      {.name = "FlavorWithoutRoomIsSkippedForOneThatFits",
       .policies = OneQueue({"a100: 4", "h100: 4"}),
       .admitted = {{.name = "a-1", .cq = "team-a", .holds = {{"a100", kGpu, 4}}}},
       .pod_sets = {Gpus(2, 1)},
       .want_flavors = "main: nvidia.com/gpu=h100"},
      {.name = "UntoleratedTaintSkipsTheFlavor",
       .policies = OneQueue({"a100: 4", "h100: 4"}, "", {kReservedA100, kH100}),
       .pod_sets = {Gpus(1, 1)},
       .want_flavors = "main: nvidia.com/gpu=h100"},
      {.name = "TolerationLetsThePodSetOntoTheTaintedFlavor",
       .policies = OneQueue({"a100: 4", "h100: 4"}, "", {kReservedA100, kH100}),
       .pod_sets = {PodSetSpec{.requests = {{kGpu, 1}}, .tolerations = {{"reserved", "Exists", "", "NoSchedule"}}}},
       .want_flavors = "main: nvidia.com/gpu=a100"},
      {.name = "NodeSelectorContradictingTheFlavorLabelsSkipsIt",
       .policies = OneQueue({"spot: 4", "a100: 4"}, "", {kSpot, kA100}),
       .pod_sets = {PodSetSpec{.requests = {{kGpu, 1}}, .node_selector = {{"tier", "ondemand"}}}},
       .want_flavors = "main: nvidia.com/gpu=a100"},
      {.name = "NoFlavorThatCanHostThePodSetIsNoMatchingFlavor",
       .policies = OneQueue({"a100: 4"}, "", {kReservedA100}),
       .pod_sets = {Gpus(1, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kNoMatchingFlavor},
      // --- Resources covered or not (§3.1).
      {.name = "UncoveredResourceIsNoMatchingFlavor",
       .policies = OneQueue({"a100: 4"}),
       .pod_sets = {PodSetSpec{.requests = {{kGpu, 1}, {"example.com/fpga", 1}}}},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kNoMatchingFlavor},
      {.name = "ZeroRequestOfAnUncoveredResourceIsIgnored",
       .policies = OneQueue({"a100: 4"}),
       .pod_sets = {PodSetSpec{.requests = {{kGpu, 1}, {"example.com/fpga", 0}}}},
       .want_flavors = "main: nvidia.com/gpu=a100"},
      {.name = "MoreThanTheMaximumCapacityIsExceedsMaxQuota",
       .policies = OneQueue({"a100: 4"}),
       .pod_sets = {Gpus(6, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kExceedsMaxQuota},
      // --- Nominal vs borrowing, and fungibility (§2.2 flavorFungibility).
      {.name = "BorrowingStopsTheScanWithMayStopSearch",
       .policies = TwoQueues({"a100: 2", "h100: 4"}, {"a100: 4"}),
       .pod_sets = {Gpus(3, 1)},
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_borrowing = true},
      {.name = "WhenCanBorrowTryNextFlavorPrefersAFlavorWithinNominal",
       .policies = TwoQueues({"a100: 2", "h100: 4"}, {"a100: 4"},
                             "  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n"),
       .pod_sets = {Gpus(3, 1)},
       .want_flavors = "main: nvidia.com/gpu=h100"},
      {.name = "BorrowingLimitCapsWhatTheFlavorCanEverTake",
       .policies = TwoQueues({"a100: 2, borrowingLimit: 1"}, {"a100: 4"}),
       .pod_sets = {Gpus(4, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kExceedsMaxQuota},
      {.name = "BorrowingWithinTheLimitFits",
       .policies = TwoQueues({"a100: 2, borrowingLimit: 1"}, {"a100: 4"}),
       .pod_sets = {Gpus(3, 1)},
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_borrowing = true},
      // --- Lending limits (§3.4: nominal - lendingLimit stays with the lender).
      {.name = "LendingLimitKeepsTheRestOfTheLendersQuota",
       .policies = TwoQueues({"a100: 2"}, {"a100: 4, lendingLimit: 1"}),
       .pod_sets = {Gpus(4, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kExceedsMaxQuota},
      {.name = "WhatTheLenderLendsCanBeBorrowed",
       .policies = TwoQueues({"a100: 2"}, {"a100: 4, lendingLimit: 1"}),
       .pod_sets = {Gpus(3, 1)},
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_borrowing = true},
      {.name = "LendingCohortWorkedExampleWaitsForOneMore",
       .policies = Docs({kA100, Cq("lend-a", "  cohort: lend\n", {GpuGroup({"a100: 3, lendingLimit: 2"})}),
                         Cq("team-a", "  cohort: lend\n", {GpuGroup({"a100: 2, lendingLimit: 2"})})}),
       .admitted = {{.name = "b-1", .cq = "team-a", .holds = {{"a100", kGpu, 2}}}},
       .pod_sets = {Gpus(3, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kWaitingForQuota,
       .want_available = 2},
      // --- Several pod sets (§3.5: usage accumulates across pod sets).
      {.name = "SecondPodSetSeesWhatTheFirstTook",
       .policies = OneQueue({"a100: 4", "h100: 4"}),
       .pod_sets = {Gpus(2, 1, "main"), Gpus(3, 1, "worker")},
       .want_flavors = "main: nvidia.com/gpu=a100; worker: nvidia.com/gpu=h100",
       .want_usage = "a100/nvidia.com/gpu=2, h100/nvidia.com/gpu=3"},
      {.name = "PodSetsThatFitTogetherShareAFlavor",
       .policies = OneQueue({"a100: 4", "h100: 4"}),
       .pod_sets = {Gpus(2, 1, "main"), Gpus(1, 2, "worker")},
       .want_flavors = "main: nvidia.com/gpu=a100; worker: nvidia.com/gpu=a100",
       .want_usage = "a100/nvidia.com/gpu=4"},
      {.name = "PodSetWithoutPodsGetsAFlavorAndHoldsNothing",
       .policies = OneQueue({"a100: 4", "h100: 4"}),
       .pod_sets = {Gpus(2, 1, "main"), Gpus(0, 1, "idle")},
       .want_flavors = "main: nvidia.com/gpu=a100; idle: nvidia.com/gpu=a100",
       .want_usage = "a100/nvidia.com/gpu=2"},
      {.name = "PodsQuotaCountsThePods",
       .policies = Docs({kA100, Cq("team-a", "", {Group({kGpu, "pods"}, {"a100: 4"})})}),
       .pod_sets = {Gpus(3, 1)},
       .want_flavors = "main: nvidia.com/gpu=a100, pods=a100",
       .want_usage = "a100/nvidia.com/gpu=3, a100/pods=3"},
      {.name = "PodsQuotaLimitsTheNumberOfPods",
       .policies = Docs({kA100, Cq("team-a", "",
                                   {"  - coveredResources: [nvidia.com/gpu, pods]\n    flavors:\n"
                                    "    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}, "
                                    "{name: pods, nominalQuota: 2}]}\n"})}),
       .pod_sets = {Gpus(3, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kExceedsMaxQuota},
      // --- MIG profiles: one resource group, one flavor for all of them.
      {.name = "MigProfilesOfOneGroupTakeOneFlavor",
       .policies = Docs({kA100, kH100, Cq("team-a", "", {Group({kMig1g, kMig3g}, {"a100: 4", "h100: 4"})})}),
       .pod_sets = {PodSetSpec{.requests = {{kMig1g, 2}, {kMig3g, 1}}}},
       .want_flavors = "main: nvidia.com/mig-1g.10gb=a100, nvidia.com/mig-3g.40gb=a100"},
      {.name = "MigProfileWithoutRoomMovesTheWholeGroupOn",
       .policies = Docs({kA100, kH100, Cq("team-a", "", {Group({kMig1g, kMig3g}, {"a100: 4", "h100: 4"})})}),
       .admitted = {{.name = "a-1", .cq = "team-a", .holds = {{"a100", kMig3g, 4}}}},
       .pod_sets = {PodSetSpec{.requests = {{kMig1g, 1}, {kMig3g, 1}}}},
       .want_flavors = "main: nvidia.com/mig-1g.10gb=h100, nvidia.com/mig-3g.40gb=h100"},
      // --- The preemption oracle and whenCanPreempt.
      {.name = "WhenCanPreemptTryNextFlavorPrefersAFlavorThatFits",
       .policies = OneQueue({"a100: 4", "h100: 4"}, kLowerPriority),
       .admitted = {{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_flavors = "main: nvidia.com/gpu=h100"},
      {.name = "WhenCanPreemptMayStopSearchPreemptsOnTheFirstFlavor",
       .policies = OneQueue({"a100: 4", "h100: 4"},
                            absl::StrCat(kLowerPriority, "  flavorFungibility: {whenCanPreempt: MayStopSearch}\n")),
       .admitted = {{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 4}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_mode = FitMode::kPreempt,
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_victims = {"low InClusterQueue"}},
      {.name = "PreemptingBeatsNoFlavorAndTiesKeepTheEarlierFlavor",
       .policies = OneQueue({"a100: 4", "h100: 4"}, kLowerPriority),
       .admitted = {{.name = "low-a", .cq = "team-a", .holds = {{"a100", kGpu, 4}}},
                    {.name = "low-h", .cq = "team-a", .holds = {{"h100", kGpu, 4}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_mode = FitMode::kPreempt,
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_victims = {"low-a InClusterQueue"}},
      {.name = "PreemptingOnlyOtherQueuesIsAReclaim",
       .policies = TwoQueues({"a100: 4"}, {"a100: 4"}, "  preemption: {reclaimWithinCohort: Any}\n"),
       .admitted = {{.name = "b-old", .cq = "team-b", .holds = {{"a100", kGpu, 4}}, .admitted_s = 1},
                    {.name = "b-new", .cq = "team-b", .holds = {{"a100", kGpu, 2}}, .admitted_s = 2}},
       .pod_sets = {Gpus(4, 1)},
       .want_mode = FitMode::kReclaim,
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_victims = {"b-new InCohortReclamation"}},
      {.name = "NoCandidatesWhenOnlyAnEqualPriorityCouldMakeRoom",
       .policies = OneQueue({"a100: 4"}, kLowerPriority),
       .admitted = {{.name = "peer", .cq = "team-a", .priority = 10, .holds = {{"a100", kGpu, 4}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_mode = FitMode::kNoCandidates,
       .want_reason = Code::kPreemptionNoCandidates},
      // --- flavorFungibility.preference (both policies TryNextFlavor).
      {.name = "BorrowingOverPreemptionTakesTheFlavorThatBorrows",
       .policies = TwoQueues({"a100: 2", "h100: 0"}, {"h100: 4"}, absl::StrCat(kLowerPriority, kTryNextBoth)),
       .admitted = {{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 2}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_flavors = "main: nvidia.com/gpu=h100",
       .want_borrowing = true},
      {.name = "PreemptionOverBorrowingTakesTheFlavorThatPreempts",
       .policies = TwoQueues({"a100: 2", "h100: 0"}, {"h100: 4"},
                             "  preemption: {withinClusterQueue: LowerPriority}\n"
                             "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, "
                             "preference: PreemptionOverBorrowing}\n"),
       .admitted = {{.name = "low", .cq = "team-a", .holds = {{"a100", kGpu, 2}}}},
       .pod_sets = {Gpus(2, 1)},
       .priority = 10,
       .want_mode = FitMode::kPreempt,
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_victims = {"low InClusterQueue"}},
      // --- Beyond nominal, preemption is considered only with fair sharing
      // (or borrowWithinCohort, or a subtree below the root that fits).
      {.name = "BeyondNominalWithoutFairSharingWaits",
       .policies = TwoQueues({"a100: 2"}, {"a100: 6"}, "  preemption: {reclaimWithinCohort: Any}\n"),
       .admitted = {{.name = "b-1", .cq = "team-b", .holds = {{"a100", kGpu, 4}}, .admitted_s = 1},
                    {.name = "b-2", .cq = "team-b", .holds = {{"a100", kGpu, 4}}, .admitted_s = 2}},
       .pod_sets = {Gpus(3, 1)},
       .want_mode = FitMode::kNoFit,
       .want_reason = Code::kWaitingForQuota,
       .want_available = 0},
      {.name = "BeyondNominalWithFairSharingReclaimsFromTheQueueAboveItsShare",
       .policies = TwoQueues({"a100: 2"}, {"a100: 6"}, "  preemption: {reclaimWithinCohort: Any}\n"),
       .admitted = {{.name = "b-1", .cq = "team-b", .holds = {{"a100", kGpu, 4}}, .admitted_s = 1},
                    {.name = "b-2", .cq = "team-b", .holds = {{"a100", kGpu, 4}}, .admitted_s = 2}},
       .pod_sets = {Gpus(3, 1)},
       .fair_sharing = true,
       .want_mode = FitMode::kReclaim,
       .want_flavors = "main: nvidia.com/gpu=a100",
       .want_borrowing = true,
       .want_victims = {"b-2 InCohortFairSharing"}},
  };
}

// gtest prints a parameter by its name.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class FlavorAssignerTest : public ::testing::TestWithParam<Case> {};

TEST_P(FlavorAssignerTest, Assigns) {
  const Case& c = GetParam();
  QuotaWorld world(c.policies);
  for (const AdmittedSpec& a : c.admitted) world.Admit(a);
  ASSERT_EQ(world.error(), "") << c.policies;
  const Entry& in = world.Pending("incoming", c.priority, PodSets(c.pod_sets));
  const AssignmentResult r = world.Assign(in, "team-a", c.fair_sharing);

  EXPECT_STREQ(FitModeName(r.mode), FitModeName(c.want_mode));
  if (c.want_mode != FitMode::kNoFit && c.want_mode != FitMode::kNoCandidates) {
    EXPECT_EQ(FlavorsOf(r.assignment), c.want_flavors);
    EXPECT_EQ(r.assignment.borrowing_level > 0, c.want_borrowing) << "borrowing level " << r.assignment.borrowing_level;
  } else {
    EXPECT_STREQ(PendingReasonCodeName(r.reason.code), PendingReasonCodeName(c.want_reason)) << r.reason.message;
  }
  if (c.want_available >= 0) {
    EXPECT_EQ(r.reason.available, quantity::Quantity::FromUnits(c.want_available));
  }
  if (!c.want_usage.empty()) {
    EXPECT_EQ(UsageOf(r.assignment), c.want_usage);
  }
  EXPECT_THAT(Victims(r.targets.value_or(std::vector<Target>{})), ::testing::ElementsAreArray(c.want_victims));
  // The oracle searches on the tree and always leaves it as it was.
  EXPECT_TRUE(world.tree().CheckInvariants().ok());
}

INSTANTIATE_TEST_SUITE_P(Kueue, FlavorAssignerTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

}  // namespace
}  // namespace gangkeeper::broker
