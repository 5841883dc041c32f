// Tests for httpc's backoff policy, retry budget and sleeper: delays are
// computed, not waited for; the budget runs on a SimulatedClock.
#include "gangkeeper/httpc/backoff.h"

#include <thread>

#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gtest/gtest.h"

namespace gangkeeper::httpc {
namespace {

BackoffPolicy Exact(absl::Duration initial, absl::Duration max) {
  BackoffPolicy p;
  p.initial = initial;
  p.max = max;
  p.full_jitter = false;
  return p;
}

TEST(BackoffTest, WithoutJitterTheDelayDoublesUpToTheCap) {
  Backoff b(Exact(absl::Milliseconds(100), absl::Seconds(1)));
  EXPECT_EQ(b.Delay(0), absl::Milliseconds(100));
  EXPECT_EQ(b.Delay(1), absl::Milliseconds(200));
  EXPECT_EQ(b.Delay(2), absl::Milliseconds(400));
  EXPECT_EQ(b.Delay(3), absl::Milliseconds(800));
  EXPECT_EQ(b.Delay(4), absl::Seconds(1));
  EXPECT_EQ(b.Delay(1000), absl::Seconds(1));
  EXPECT_EQ(b.Delay(-3), absl::Milliseconds(100));
}

TEST(BackoffTest, MaxDoublingsStopsTheGrowth) {
  BackoffPolicy p = Exact(absl::Milliseconds(1), absl::Hours(1));
  p.max_doublings = 2;
  Backoff b(p);
  EXPECT_EQ(b.Delay(2), absl::Milliseconds(4));
  EXPECT_EQ(b.Delay(9), absl::Milliseconds(4));
}

TEST(BackoffTest, FullJitterStaysBetweenZeroAndTheCap) {
  BackoffPolicy p;
  p.initial = absl::Milliseconds(10);
  p.max = absl::Milliseconds(50);
  Backoff b(p, /*seed=*/42);
  bool below_cap = false;
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration d = b.Delay(i % 8);
    const absl::Duration cap = std::min(absl::Milliseconds(10) * (int64_t{1} << (i % 8)), absl::Milliseconds(50));
    ASSERT_GE(d, absl::ZeroDuration());
    ASSERT_LE(d, cap);
    below_cap = below_cap || d < cap;
  }
  EXPECT_TRUE(below_cap);
}

TEST(BackoffTest, RetryAfterIsAFloorWithinItsOwnCap) {
  Backoff b(Exact(absl::Milliseconds(10), absl::Milliseconds(50)));
  EXPECT_EQ(b.Delay(0, "3"), absl::Seconds(3));
  EXPECT_EQ(b.Delay(0, "0"), absl::Milliseconds(10));
  EXPECT_EQ(b.Delay(0, "99999"), absl::Hours(1));
  // Not whole seconds (an HTTP date, garbage, negative): ignored.
  EXPECT_EQ(b.Delay(0, "Wed, 21 Oct 2015 07:28:00 GMT"), absl::Milliseconds(10));
  EXPECT_EQ(b.Delay(0, "-5"), absl::Milliseconds(10));
}

TEST(RetryBudgetTest, AllowsAWaitOnlyWhileItEndsWithinTheTotal) {
  base::SimulatedClock clock(absl::FromUnixSeconds(1000));
  RetryBudget budget(clock, absl::Seconds(10));
  EXPECT_TRUE(budget.Allows(absl::Seconds(10)));
  EXPECT_FALSE(budget.Allows(absl::Seconds(11)));
  clock.AdvanceTime(absl::Seconds(6));
  EXPECT_EQ(budget.Elapsed(), absl::Seconds(6));
  EXPECT_TRUE(budget.Allows(absl::Seconds(4)));
  EXPECT_FALSE(budget.Allows(absl::Seconds(5)));
}

TEST(SleeperTest, CancelWakesASleeperAndEveryLaterSleep) {
  Sleeper s;
  EXPECT_TRUE(s.Sleep(absl::ZeroDuration()));
  bool woke_cancelled = false;
  std::thread sleeping([&] { woke_cancelled = !s.Sleep(absl::Hours(1)); });
  s.Cancel();
  sleeping.join();
  EXPECT_TRUE(woke_cancelled);
  EXPECT_TRUE(s.cancelled());
  EXPECT_FALSE(s.Sleep(absl::Hours(1)));
}

}  // namespace
}  // namespace gangkeeper::httpc
