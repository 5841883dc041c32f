// gangkeeper: the Scheduler's invariants over random worlds and event
// streams (invariant_run.h), with fixed seeds. The long run is
// test/bench/invariants_bench.cc.
#include <cstdint>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test/broker/invariant_run.h"

namespace gangkeeper::broker::invariants {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define GK_INVARIANTS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GK_INVARIANTS_SANITIZED 1
#endif
#endif
#ifdef GK_INVARIANTS_SANITIZED
constexpr uint64_t kSeeds = 40;
#else
constexpr uint64_t kSeeds = 300;
#endif
constexpr int kOps = 300;

void RunSeeds(bool guard) {
  Figures all;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const World world = MakeWorld(seed);
    const std::vector<Op> ops = MakeOps(seed, kOps);
    const Result r = invariants::Run(world, ops, guard);
    all.Add(r.figures);
    if (!r.ok) {
      ADD_FAILURE() << "seed " << seed << ": " << r.failure << "\n"
                    << Reproduce(world, ops, guard, absl::Seconds(30));
      return;
    }
  }
  std::cout << kSeeds << " seeds: " << all.ToString() << "\n";
  // The streams must have reached the paths the invariants are about.
  EXPECT_GT(all.preempted, static_cast<int64_t>(kSeeds));
  EXPECT_GT(all.restarts, static_cast<int64_t>(kSeeds));
  EXPECT_GT(all.quiet_periods, static_cast<int64_t>(kSeeds) * 10);
}

TEST(InvariantTest, RandomWorldsKeepEveryInvariant) { RunSeeds(/*guard=*/true); }

// The quota a preemptor holds while its victims stop is what keeps them
// from coming back in its way (the livelock of issue #19): even without the
// anti-churn rule behind it, a preemptor whose victims all stopped is
// admitted by the next pass, unless the world changed. (Longer cascades,
// where the preemptor is itself preempted by a third workload after its
// admission, are what the rule is for.)
TEST(InvariantTest, PreemptorHoldsAloneKeepVictimsFromChurning) { RunSeeds(/*guard=*/false); }

TEST(InvariantTest, ReproductionsNameTheOperations) {
  // A world that cannot load fails at once; the reproduction says so.
  World broken = MakeWorld(1);
  broken.yaml_template += "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: bad}\nspec: 7\n";
  const Result r = invariants::Run(broken, MakeOps(1, 5), true);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("the world does not load"), std::string::npos) << r.failure;
  const std::string repro = Reproduce(broken, MakeOps(1, 5), true, absl::Seconds(5));
  EXPECT_NE(repro.find("operations (0)"), std::string::npos) << repro;
}

}  // namespace
}  // namespace gangkeeper::broker::invariants
