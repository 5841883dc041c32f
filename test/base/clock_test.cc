#include "gangkeeper/base/clock.h"

#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// ---- ParseRfc3339 -----------------------------------------------------------

// What absl::ParseTime(RFC3339_full) makes of `text`: the reference.
std::optional<absl::Time> Reference(absl::string_view text) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return std::nullopt;
  return t;
}

std::optional<absl::Time> Parsed(absl::string_view text) {
  absl::Time t = absl::InfinitePast();
  if (!ParseRfc3339(text, &t)) {
    EXPECT_EQ(t, absl::InfinitePast()) << "left untouched on failure";
    return std::nullopt;
  }
  return t;
}

TEST(ParseRfc3339Test, ReadsWhatTheApiServerWrites) {
  EXPECT_EQ(Parsed("2026-12-07T09:45:39Z"), absl::FromUnixSeconds(1796636739));
  EXPECT_EQ(Parsed("2026-12-07T09:45:39.5Z"), absl::FromUnixSeconds(1796636739) + absl::Milliseconds(500));
  EXPECT_EQ(Parsed("2026-12-07T09:45:39.000001Z"), absl::FromUnixSeconds(1796636739) + absl::Microseconds(1));
  EXPECT_EQ(Parsed("2026-12-07T09:45:39.123456789Z"), absl::FromUnixSeconds(1796636739) + absl::Nanoseconds(123456789));
  EXPECT_EQ(Parsed("2026-12-07T10:45:39+01:00"), absl::FromUnixSeconds(1796636739));
  EXPECT_EQ(Parsed("2024-02-29T00:00:00Z"), Reference("2024-02-29T00:00:00Z"));
}

TEST(ParseRfc3339Test, RefusesWhatIsNotATime) {
  for (const char* bad : {"", "2026-12-07", "2026-12-07T09:45:39", "2026-13-07T09:45:39Z", "2026-02-30T00:00:00Z",
                          "2025-02-29T00:00:00Z", "2026-12-07T24:00:00Z", "2026-12-07T09:60:00Z",
                          "2026-12-07T09:45:39.Z", "2026-12-07X09:45:39Z", "2026-12-0aT09:45:39Z", "yesterday"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Parsed(bad), std::nullopt);
    EXPECT_EQ(Reference(bad), std::nullopt) << "the reference agrees";
  }
}

// Generative: times written the ways RFC 3339 allows, and those texts with
// one byte changed, cut or added, parse exactly as absl::ParseTime parses
// them (accepted alike, to the same instant).
TEST(ParseRfc3339Test, AgreesWithAbslOnRandomAndMutatedTexts) {
  std::mt19937_64 rng(20261207);
  std::uniform_int_distribution<int> year(0, 9999), month(0, 13), day(0, 32), hour(0, 25), minute(0, 61),
      second(0, 61), digits(0, 11), percent(0, 99);
  const std::string alphabet = "0123456789-:.TtZz+ x";
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string text = absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d", year(rng), month(rng), day(rng), hour(rng),
                                       minute(rng), second(rng));
    const int frac = digits(rng);
    if (frac > 0) {
      absl::StrAppend(&text, ".");
      for (int d = 1; d < frac; ++d) text.push_back(static_cast<char>('0' + rng() % 10));
    }
    const int zone = percent(rng);
    if (zone < 70) {
      text.push_back('Z');
    } else if (zone < 90) {
      absl::StrAppend(&text, zone % 2 ? "+" : "-", absl::StrFormat("%02d:%02d", rng() % 25, rng() % 61));
    }
    const int mutate = percent(rng);
    if (mutate < 30 && !text.empty()) {
      const size_t at = rng() % text.size();
      if (mutate < 10) {
        text[at] = alphabet[rng() % alphabet.size()];
      } else if (mutate < 20) {
        text.erase(at, 1);
      } else {
        text.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    SCOPED_TRACE(text);
    const std::optional<absl::Time> want = Reference(text);
    ASSERT_EQ(Parsed(text), want);
    accepted += want.has_value();
  }
  EXPECT_GT(accepted, 20000) << "the generator must produce valid times too";
}

}  // namespace
}  // namespace gangkeeper::base
