// gangkeeper: tests for src/broker/resource_tree.h — the quota arithmetic of
// KUEUE-SEMANTICS.md §3.4: standalone queues, flat cohorts (checked against
// the closed form), lending and borrowing limits, Cohort quota, hierarchies,
// the worked examples, add/remove symmetry, lowered quota and parent cycles.
#include "src/broker/resource_tree.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::UnorderedElementsAre;

const FlavorResource kGpu{"a100", "nvidia.com/gpu"};
const FlavorResource kCpu{"a100", "cpu"};

Quantity Q(int64_t units) { return Quantity::FromUnits(units); }

// Quota for one resource: Gpu(8), Gpu(8).Borrow(2).Lend(4).
struct QuotaSpec {
  std::string resource;
  int64_t nominal;
  std::optional<int64_t> bl;
  std::optional<int64_t> ll;
  QuotaSpec Borrow(int64_t v) const {
    QuotaSpec q = *this;
    q.bl = v;
    return q;
  }
  QuotaSpec Lend(int64_t v) const {
    QuotaSpec q = *this;
    q.ll = v;
    return q;
  }
};
QuotaSpec Gpu(int64_t nominal) { return QuotaSpec{kGpu.resource, nominal, {}, {}}; }
QuotaSpec Cpu(int64_t nominal) { return QuotaSpec{kCpu.resource, nominal, {}, {}}; }

std::vector<model::ResourceGroup> Groups(const std::vector<QuotaSpec>& quotas) {
  if (quotas.empty()) return {};
  model::ResourceGroup group;
  model::FlavorQuotas flavor;
  flavor.name = kGpu.flavor;
  for (const QuotaSpec& q : quotas) {
    group.covered_resources.push_back(q.resource);
    model::ResourceQuota rq;
    rq.name = q.resource;
    rq.nominal = Q(q.nominal);
    if (q.bl) rq.borrowing_limit = Q(*q.bl);
    if (q.ll) rq.lending_limit = Q(*q.ll);
    flavor.resources.push_back(rq);
  }
  group.flavors.push_back(flavor);
  return {group};
}

class PolicyBuilder {
 public:
  PolicyBuilder& Cq(const std::string& name, const std::string& cohort,
                    const std::vector<QuotaSpec>& quotas) {
    model::ClusterQueue cq;
    cq.meta.name = name;
    cq.cohort = cohort;
    cq.resource_groups = Groups(quotas);
    set_.cluster_queues[name] = cq;
    return *this;
  }
  PolicyBuilder& Cohort(const std::string& name, const std::string& parent,
                        const std::vector<QuotaSpec>& quotas = {}) {
    model::Cohort cohort;
    cohort.meta.name = name;
    cohort.parent = parent;
    cohort.resource_groups = Groups(quotas);
    set_.cohorts[name] = cohort;
    return *this;
  }
  ResourceTree Build() const {
    absl::StatusOr<ResourceTree> tree = ResourceTree::Build(set_);
    EXPECT_THAT(tree, IsOk());
    return std::move(tree).value();
  }
  const model::PolicySet& set() const { return set_; }

 private:
  model::PolicySet set_;
};

ResourceAmounts Gpus(int64_t n) { return {{kGpu, Q(n)}}; }

TEST(ResourceTreeTest, ClusterQueueWithoutCohortHasNominalMinusUsage) {
  ResourceTree tree = PolicyBuilder().Cq("solo", "", {Gpu(8).Borrow(4)}).Build();
  EXPECT_EQ(tree.Available("solo", kGpu), Q(8));
  EXPECT_EQ(tree.PotentialAvailable("solo", kGpu), Q(8));
  ASSERT_THAT(tree.AddUsage("solo", Gpus(3)), IsOk());
  EXPECT_EQ(tree.Available("solo", kGpu), Q(5));
  EXPECT_EQ(tree.Usage("solo", kGpu), Q(3));
  EXPECT_EQ(tree.Nominal("solo", kGpu), Q(8));
  EXPECT_EQ(tree.Borrowing("solo", kGpu), Q(0));
  EXPECT_TRUE(tree.Fits("solo", Gpus(5)));
  EXPECT_FALSE(tree.Fits("solo", Gpus(6)));
  // A resource the queue has no quota for.
  EXPECT_EQ(tree.Available("solo", kCpu), Q(0));
  EXPECT_FALSE(tree.Fits("solo", {{kCpu, Q(1)}}));
}

TEST(ResourceTreeTest, FlatCohortWithoutLendingLimits) {
  ResourceTree tree = PolicyBuilder()
                          .Cq("a", "pool", {Gpu(10).Borrow(5)})
                          .Cq("b", "pool", {Gpu(6)})
                          .Cq("c", "pool", {Gpu(4).Borrow(0)})
                          .Build();
  // min(Σnominal − Σusage, nominal + BL − usage).
  EXPECT_EQ(tree.Available("a", kGpu), Q(15));
  EXPECT_EQ(tree.Available("b", kGpu), Q(20));
  EXPECT_EQ(tree.Available("c", kGpu), Q(4));
  ASSERT_THAT(tree.AddUsage("b", Gpus(12)), IsOk());
  EXPECT_EQ(tree.Available("a", kGpu), Q(8));
  EXPECT_EQ(tree.Available("b", kGpu), Q(8));
  EXPECT_EQ(tree.Available("c", kGpu), Q(4));
  EXPECT_EQ(tree.Borrowing("b", kGpu), Q(6));
  EXPECT_EQ(tree.CohortUsage("pool", kGpu), Q(12));
  ASSERT_THAT(tree.AddUsage("a", Gpus(7)), IsOk());
  EXPECT_EQ(tree.Available("a", kGpu), Q(1));
  EXPECT_EQ(tree.Available("c", kGpu), Q(1));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

// Random flat cohorts against the closed form of §3.4.
TEST(ResourceTreeTest, FlatCohortMatchesClosedForm) {
  std::mt19937 rng(20261202);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    struct Cq {
      std::string name;
      int64_t nominal;
      std::optional<int64_t> bl, ll;
      int64_t usage;
    };
    std::vector<Cq> cqs;
    PolicyBuilder builder;
    int n = uniform(1, 4);
    for (int i = 0; i < n; ++i) {
      Cq cq{absl::StrCat("cq", i), uniform(0, 10), {}, {}, 0};
      if (uniform(0, 1)) cq.bl = uniform(0, 8);
      if (uniform(0, 1)) cq.ll = uniform(0, static_cast<int>(cq.nominal));
      QuotaSpec spec = Gpu(cq.nominal);
      if (cq.bl) spec = spec.Borrow(*cq.bl);
      if (cq.ll) spec = spec.Lend(*cq.ll);
      builder.Cq(cq.name, "pool", {spec});
      cqs.push_back(cq);
    }
    ResourceTree tree = builder.Build();
    for (Cq& cq : cqs) {
      cq.usage = uniform(0, 14);
      ASSERT_THAT(tree.AddUsage(cq.name, Gpus(cq.usage)), IsOk());
    }
    int64_t cap = 0, used = 0;
    for (const Cq& cq : cqs) {
      int64_t lendable = cq.ll ? *cq.ll : cq.nominal;
      cap += lendable;
      used += std::max<int64_t>(0, cq.usage - (cq.nominal - lendable));
    }
    for (const Cq& cq : cqs) {
      int64_t lendable = cq.ll ? *cq.ll : cq.nominal;
      int64_t lq = cq.nominal - lendable;
      int64_t from_cohort = cap - used;
      if (cq.bl) {
        from_cohort =
            std::min(from_cohort, lendable - std::max<int64_t>(0, cq.usage - lq) + *cq.bl);
      }
      int64_t want = std::max<int64_t>(0, std::max<int64_t>(0, lq - cq.usage) + from_cohort);
      EXPECT_EQ(tree.Available(cq.name, kGpu), Q(want)) << cq.name;
      int64_t max_cap = lq + cap;
      if (cq.bl) max_cap = std::min(max_cap, cq.nominal + *cq.bl);
      EXPECT_EQ(tree.PotentialAvailable(cq.name, kGpu), Q(max_cap)) << cq.name;
    }
    EXPECT_THAT(tree.CheckInvariants(), IsOk());
  }
}

TEST(ResourceTreeTest, WorkedExampleLendingLimits) {
  ResourceTree tree = PolicyBuilder()
                          .Cq("lend-a", "lend", {Gpu(3).Lend(2)})
                          .Cq("lend-b", "lend", {Gpu(2).Lend(2)})
                          .Build();
  EXPECT_EQ(tree.PotentialAvailable("lend-b", kGpu), Q(4));
  ASSERT_THAT(tree.AddUsage("lend-b", Gpus(2)), IsOk());
  EXPECT_EQ(tree.Available("lend-b", kGpu), Q(2));
  EXPECT_FALSE(tree.Fits("lend-b", Gpus(3)));
  EXPECT_TRUE(tree.Fits("lend-b", Gpus(2)));
  // lend-a keeps 1 for itself plus the cohort's remaining 2.
  EXPECT_EQ(tree.Available("lend-a", kGpu), Q(3));
}

TEST(ResourceTreeTest, WorkedExampleHierarchy) {
  // Lender in the root, borrower in the child cohort.
  ResourceTree tree = PolicyBuilder()
                          .Cohort("root", "")
                          .Cohort("child", "root")
                          .Cq("lender", "root", {Gpu(10).Lend(3)})
                          .Cq("borrower", "child", {Gpu(5).Borrow(10)})
                          .Build();
  ASSERT_THAT(tree.AddUsage("borrower", Gpus(5)), IsOk());
  EXPECT_EQ(tree.Available("borrower", kGpu), Q(3));
  EXPECT_EQ(tree.Available("lender", kGpu), Q(10));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());

  // Both under the child.
  ResourceTree both = PolicyBuilder()
                          .Cohort("root", "")
                          .Cohort("child", "root")
                          .Cq("lender", "child", {Gpu(10).Lend(3)})
                          .Cq("borrower", "child", {Gpu(5).Borrow(10)})
                          .Build();
  ASSERT_THAT(both.AddUsage("borrower", Gpus(5)), IsOk());
  EXPECT_EQ(both.Available("borrower", kGpu), Q(3));
}

TEST(ResourceTreeTest, BorrowingStopsAtBorrowingLimit) {
  ResourceTree tree = PolicyBuilder()
                          .Cq("small", "pool", {Gpu(2).Borrow(1)})
                          .Cq("big", "pool", {Gpu(10)})
                          .Build();
  EXPECT_EQ(tree.Available("small", kGpu), Q(3));
  EXPECT_EQ(tree.PotentialAvailable("small", kGpu), Q(3));
  ASSERT_THAT(tree.AddUsage("small", Gpus(3)), IsOk());
  EXPECT_EQ(tree.Available("small", kGpu), Q(0));
  EXPECT_EQ(tree.Borrowing("small", kGpu), Q(1));
  EXPECT_EQ(tree.Available("big", kGpu), Q(9));
}

TEST(ResourceTreeTest, LendingLimitReservesTheRest) {
  ResourceTree tree = PolicyBuilder()
                          .Cq("owner", "pool", {Gpu(10).Lend(4)})
                          .Cq("guest", "pool", {Gpu(0)})
                          .Build();
  EXPECT_EQ(tree.Available("guest", kGpu), Q(4));
  EXPECT_EQ(tree.PotentialAvailable("guest", kGpu), Q(4));
  ASSERT_THAT(tree.AddUsage("guest", Gpus(4)), IsOk());
  EXPECT_EQ(tree.Available("guest", kGpu), Q(0));
  EXPECT_EQ(tree.Available("owner", kGpu), Q(6));
  // The owner's own usage fills its reserved part first.
  ASSERT_THAT(tree.AddUsage("owner", Gpus(6)), IsOk());
  EXPECT_EQ(tree.CohortUsage("pool", kGpu), Q(4));
  EXPECT_EQ(tree.Available("owner", kGpu), Q(0));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

TEST(ResourceTreeTest, CohortQuotaAddsCapacity) {
  ResourceTree tree = PolicyBuilder()
                          .Cohort("pool", "", {Gpu(5)})
                          .Cq("a", "pool", {Gpu(2)})
                          .Cq("b", "pool", {Gpu(1).Borrow(2)})
                          .Build();
  EXPECT_EQ(tree.Available("a", kGpu), Q(8));
  EXPECT_EQ(tree.PotentialAvailable("a", kGpu), Q(8));
  EXPECT_EQ(tree.Available("b", kGpu), Q(3));
  ASSERT_THAT(tree.AddUsage("a", Gpus(6)), IsOk());
  EXPECT_EQ(tree.Available("a", kGpu), Q(2));
  EXPECT_EQ(tree.Available("b", kGpu), Q(2));
}

// org (own 4) ⊃ dept ⊃ team; t1 in team, t2 in dept (lends 1), o1 in org.
PolicyBuilder ThreeLevels() {
  PolicyBuilder b;
  b.Cohort("org", "", {Gpu(4), Cpu(8)})
      .Cohort("dept", "org")
      .Cohort("team", "dept", {Cpu(2).Lend(1)})
      .Cq("t1", "team", {Gpu(3).Borrow(6), Cpu(4)})
      .Cq("t2", "dept", {Gpu(5).Lend(1), Cpu(2).Borrow(1)})
      .Cq("o1", "org", {Gpu(2), Cpu(0).Lend(0)});
  return b;
}

TEST(ResourceTreeTest, ThreeLevelHierarchy) {
  ResourceTree tree = ThreeLevels().Build();
  EXPECT_EQ(tree.Available("t1", kGpu), Q(9));   // 3 + BL 6 < org 10
  EXPECT_EQ(tree.Available("t2", kGpu), Q(14));  // local 4 + org 10
  EXPECT_EQ(tree.Available("o1", kGpu), Q(10));
  ASSERT_THAT(tree.AddUsage("t1", Gpus(9)), IsOk());
  EXPECT_EQ(tree.CohortUsage("team", kGpu), Q(9));
  EXPECT_EQ(tree.CohortUsage("dept", kGpu), Q(9));
  EXPECT_EQ(tree.CohortUsage("org", kGpu), Q(9));
  EXPECT_EQ(tree.Available("t1", kGpu), Q(0));
  EXPECT_EQ(tree.Available("t2", kGpu), Q(5));
  EXPECT_EQ(tree.Available("o1", kGpu), Q(1));
  EXPECT_EQ(tree.Borrowing("t1", kGpu), Q(6));
  ASSERT_THAT(tree.AddUsage("t2", Gpus(5)), IsOk());
  EXPECT_EQ(tree.CohortUsage("dept", kGpu), Q(10));
  EXPECT_EQ(tree.Available("o1", kGpu), Q(0));
  EXPECT_EQ(tree.Available("t2", kGpu), Q(0));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

TEST(ResourceTreeTest, PotentialAvailableIgnoresUsage) {
  ResourceTree tree = ThreeLevels().Build();
  EXPECT_EQ(tree.PotentialAvailable("t1", kGpu), Q(9));
  EXPECT_EQ(tree.PotentialAvailable("t2", kGpu), Q(14));
  EXPECT_EQ(tree.PotentialAvailable("o1", kGpu), Q(10));
  // cpu: team lends 1 of its 2 own + t1's 4: team SQ 6, local 5.
  EXPECT_EQ(tree.PotentialAvailable("t1", kCpu), Q(5 + 1 + 2 + 8));
  EXPECT_EQ(tree.PotentialAvailable("t2", kCpu), Q(3));
  ASSERT_THAT(tree.AddUsage("o1", Gpus(10)), IsOk());
  EXPECT_EQ(tree.Available("t1", kGpu), Q(0));
  EXPECT_EQ(tree.PotentialAvailable("t1", kGpu), Q(9));
}

// Every observable number, for comparing trees.
std::map<std::string, Quantity> Observe(const ResourceTree& tree) {
  std::map<std::string, Quantity> out;
  for (const FlavorResource& fr : {kGpu, kCpu}) {
    for (const char* cq : {"t1", "t2", "o1", "s1"}) {
      out[absl::StrCat(cq, " usage ", fr.resource)] = tree.Usage(cq, fr);
      out[absl::StrCat(cq, " available ", fr.resource)] = tree.Available(cq, fr);
    }
    for (const char* cohort : {"org", "dept", "team"}) {
      out[absl::StrCat(cohort, " usage ", fr.resource)] = tree.CohortUsage(cohort, fr);
    }
  }
  return out;
}

TEST(ResourceTreeTest, RemoveUndoesAddInAnyOrder) {
  PolicyBuilder builder = ThreeLevels();
  builder.Cq("s1", "team", {Gpu(2).Lend(1).Borrow(3), Cpu(1).Lend(1)});
  ResourceTree tree = builder.Build();
  const std::map<std::string, Quantity> empty = Observe(tree);
  const std::vector<std::string> cqs = {"t1", "t2", "o1", "s1"};
  std::mt19937 rng(42);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::pair<std::string, ResourceAmounts>> charged;
  for (int step = 0; step < 2000; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    if (charged.empty() || uniform(0, 2) != 0) {
      std::string cq = cqs[uniform(0, 3)];
      ResourceAmounts amounts = {{kGpu, Quantity::FromMilli(uniform(0, 4000))},
                                 {kCpu, Q(uniform(0, 3))}};
      ASSERT_THAT(tree.AddUsage(cq, amounts), IsOk());
      charged.emplace_back(cq, amounts);
    } else {
      size_t i = uniform(0, static_cast<int>(charged.size()) - 1);
      ASSERT_THAT(tree.RemoveUsage(charged[i].first, charged[i].second), IsOk());
      charged.erase(charged.begin() + i);
    }
    ASSERT_THAT(tree.CheckInvariants(), IsOk());
    if (step % 100 == 0) {
      // The state depends only on the net usage per queue.
      ResourceTree fresh = builder.Build();
      for (const auto& [cq, amounts] : charged) ASSERT_THAT(fresh.AddUsage(cq, amounts), IsOk());
      ASSERT_EQ(Observe(fresh), Observe(tree));
    }
  }
  while (!charged.empty()) {
    ASSERT_THAT(tree.RemoveUsage(charged.back().first, charged.back().second), IsOk());
    charged.pop_back();
    ASSERT_THAT(tree.CheckInvariants(), IsOk());
  }
  EXPECT_EQ(Observe(tree), empty);
}

TEST(ResourceTreeTest, QuotaLoweredBelowUsageReportsZero) {
  ResourceTree tree = PolicyBuilder()
                          .Cq("a", "pool", {Gpu(4).Borrow(1)})
                          .Cq("b", "pool", {Gpu(2)})
                          .Build();
  // Usage charged under an older, larger quota.
  ASSERT_THAT(tree.AddUsage("a", Gpus(12)), IsOk());
  EXPECT_EQ(tree.Available("a", kGpu), Q(0));
  EXPECT_EQ(tree.Available("b", kGpu), Q(0));
  EXPECT_EQ(tree.Borrowing("a", kGpu), Q(8));
  EXPECT_FALSE(tree.Fits("b", Gpus(1)));
  EXPECT_TRUE(tree.Fits("b", {}));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
  ASSERT_THAT(tree.RemoveUsage("a", Gpus(10)), IsOk());
  EXPECT_EQ(tree.Available("a", kGpu), Q(3));  // min(6 - 2, 4 + 1 - 2)
  EXPECT_EQ(tree.Available("b", kGpu), Q(4));
}

TEST(ResourceTreeTest, CohortCycleDisablesItsMembers) {
  ResourceTree tree = PolicyBuilder()
                          .Cohort("x", "y", {Gpu(5)})
                          .Cohort("y", "x")
                          .Cohort("below", "x")
                          .Cohort("self", "self")
                          .Cohort("fine", "")
                          .Cq("in-x", "x", {Gpu(3)})
                          .Cq("in-below", "below", {Gpu(3)})
                          .Cq("in-fine", "fine", {Gpu(3)})
                          .Build();
  EXPECT_THAT(tree.disabled(), UnorderedElementsAre("x", "y", "below", "self"));
  EXPECT_TRUE(tree.ClusterQueueDisabled("in-x"));
  EXPECT_TRUE(tree.ClusterQueueDisabled("in-below"));
  EXPECT_FALSE(tree.ClusterQueueDisabled("in-fine"));
  EXPECT_EQ(tree.Available("in-x", kGpu), Q(0));
  EXPECT_EQ(tree.PotentialAvailable("in-x", kGpu), Q(0));
  EXPECT_EQ(tree.Available("in-below", kGpu), Q(0));
  EXPECT_FALSE(tree.Fits("in-x", Gpus(1)));
  EXPECT_EQ(tree.Available("in-fine", kGpu), Q(3));
  // Accounting still works and stays consistent.
  ASSERT_THAT(tree.AddUsage("in-below", Gpus(4)), IsOk());
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
  ASSERT_THAT(tree.RemoveUsage("in-below", Gpus(4)), IsOk());
}

TEST(ResourceTreeTest, MissingParentIsAnImplicitRoot) {
  ResourceTree tree = PolicyBuilder()
                          .Cohort("child", "ghost", {Gpu(2)})
                          .Cq("a", "child", {Gpu(3)})
                          .Cq("b", "ghost", {Gpu(1)})
                          .Build();
  EXPECT_TRUE(tree.disabled().empty());
  EXPECT_EQ(tree.Available("a", kGpu), Q(6));
  EXPECT_EQ(tree.Available("b", kGpu), Q(6));
}

TEST(ResourceTreeTest, ErrorsChangeNothing) {
  ResourceTree tree = PolicyBuilder().Cq("a", "pool", {Gpu(4)}).Build();
  EXPECT_THAT(tree.AddUsage("nope", Gpus(1)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(tree.AddUsage("a", {{kGpu, Q(-1)}}), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(tree.AddUsage("a", Gpus(2)), IsOk());
  EXPECT_THAT(tree.RemoveUsage("a", {{kCpu, Q(0)}, {kGpu, Q(3)}}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(tree.AddUsage("a", {{kCpu, Q(1)}, {kGpu, Quantity::Max()}}),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(tree.Usage("a", kGpu), Q(2));
  EXPECT_EQ(tree.Usage("a", kCpu), Q(0));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

// Usage of a FlavorResource no node declares (an admission under older
// policies) is accounted like any other, up the cohort chain, and listed.
TEST(ResourceTreeTest, UndeclaredFlavorResourceIsAccounted) {
  ResourceTree tree = PolicyBuilder().Cq("a", "pool", {Gpu(4)}).Cq("b", "pool", {Gpu(4)}).Build();
  const FlavorResource other{"h100", "nvidia.com/gpu"};
  EXPECT_EQ(tree.Available("a", other), Q(0));
  ASSERT_THAT(tree.AddUsage("a", {{other, Q(3)}, {kGpu, Q(1)}}), IsOk());
  EXPECT_EQ(tree.Usage("a", other), Q(3));
  EXPECT_EQ(tree.CohortUsage("pool", other), Q(3));
  EXPECT_EQ(tree.Available("b", kGpu), Q(7));
  const int a = tree.ClusterQueueNode("a");
  EXPECT_THAT(tree.FlavorResources(a), ::testing::ElementsAre(kGpu, other));
  EXPECT_EQ(tree.UsageAt(a, tree.FrId(other)), Q(3));
  EXPECT_EQ(tree.FrId(FlavorResource{"nope", "cpu"}), -1);
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
  ASSERT_THAT(tree.RemoveUsage("a", {{other, Q(3)}, {kGpu, Q(1)}}), IsOk());
  EXPECT_EQ(tree.CohortUsage("pool", other), Q(0));
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

// Many FlavorResources (past the linear lookup) read as few do.
TEST(ResourceTreeTest, ManyFlavorResources) {
  std::vector<QuotaSpec> quotas;
  for (int i = 0; i < 40; ++i) quotas.push_back(QuotaSpec{absl::StrCat("r", i), i + 1, {}, {}});
  ResourceTree tree = PolicyBuilder().Cq("a", "pool", quotas).Cq("b", "pool", {}).Build();
  for (int i = 0; i < 40; ++i) {
    const FlavorResource fr{kGpu.flavor, absl::StrCat("r", i)};
    ASSERT_THAT(tree.AddUsage("b", {{fr, Q(1)}}), IsOk());
    EXPECT_EQ(tree.Available("a", fr), Q(i)) << fr.ToString();
    EXPECT_EQ(tree.Nominal("a", fr), Q(i + 1));
  }
  EXPECT_THAT(tree.CheckInvariants(), IsOk());
}

TEST(ResourceTreeTest, BuildRejectsBadQuota) {
  PolicyBuilder duplicate;
  duplicate.Cq("a", "", {Gpu(1), Gpu(2)});
  EXPECT_THAT(ResourceTree::Build(duplicate.set()),
              StatusIs(absl::StatusCode::kInvalidArgument, "more than once"));
  PolicyBuilder negative;
  negative.Cohort("c", "", {Gpu(1).Lend(-1)});
  EXPECT_THAT(ResourceTree::Build(negative.set()),
              StatusIs(absl::StatusCode::kInvalidArgument, "negative"));
}

}  // namespace
}  // namespace gangkeeper::broker
