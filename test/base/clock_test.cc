#include "gangkeeper/base/clock.h"

#include "gtest/gtest.h"

namespace gangkeeper::base {
namespace {

TEST(SimulatedClockTest, MovesOnlyWhenAdvanced) {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.AdvanceTime(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1005));
}

TEST(SimulatedClockTest, NeverRunsBackwards) {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  clock.AdvanceTime(absl::Seconds(-5));
  clock.SetTime(absl::FromUnixSeconds(10));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.SetTime(absl::FromUnixSeconds(2000));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(2000));
}

TEST(RealClockTest, IsCloseToTheSystemTime) {
  absl::Time now = RealClock().Now();
  EXPECT_GT(now, absl::FromUnixSeconds(1700000000));  // after 2023
  EXPECT_EQ(&RealClock(), &RealClock());
}

TEST(StopwatchTest, ElapsedIsMonotonic) {
  Stopwatch w;
  absl::Duration a = w.Elapsed();
  absl::Duration b = w.Elapsed();
  EXPECT_GE(a, absl::ZeroDuration());
  EXPECT_GE(b, a);
}

}  // namespace
}  // namespace gangkeeper::base
