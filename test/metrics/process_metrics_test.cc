// gangkeeper tests: /proc parsing and the process metrics exposed at scrape
// time.
#include "src/metrics/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/metrics/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::metrics {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

// A real-shaped stat line whose command name contains spaces and parentheses.
constexpr absl::string_view kStatLine =
    "4242 (gk (worker) 1) S 1 4242 4242 0 -1 4194560 1234 0 0 0 "
    "250 75 0 0 20 0 9 0 987654 123456789 3210 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessMetricsTest, ParsesProcStatCountingFromLastParen) {
  absl::StatusOr<ProcStat> stat = ParseProcStat(kStatLine);
  ASSERT_THAT(stat, IsOk());
  EXPECT_EQ(stat->utime_ticks, 250u);
  EXPECT_EQ(stat->stime_ticks, 75u);
  EXPECT_EQ(stat->start_ticks, 987654u);
  EXPECT_EQ(stat->vsize_bytes, 123456789u);
  EXPECT_EQ(stat->rss_pages, 3210);
}

TEST(ProcessMetricsTest, RejectsMalformedProcStat) {
  EXPECT_THAT(ParseProcStat("4242 no-parens S 1"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseProcStat("4242 (gk) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75"),
              StatusIs(absl::StatusCode::kInvalidArgument, "fields"));
  std::string not_a_number(kStatLine);
  not_a_number.replace(not_a_number.find(" 250 "), 5, " x50 ");
  EXPECT_THAT(ParseProcStat(not_a_number), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ProcessMetricsTest, ParsesBootTime) {
  EXPECT_THAT(ParseBootTime("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"), IsOk());
  EXPECT_EQ(*ParseBootTime("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), 1700000000);
  EXPECT_THAT(ParseBootTime("cpu  1 2 3\nprocesses 9\n"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseBootTime("btime soon\n"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// The value of the unlabeled sample `name` in `text`, if present.
std::optional<double> SampleValue(absl::string_view text, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    double value = 0;
    if (parts.size() == 2 && parts[0] == name && absl::SimpleAtod(parts[1], &value)) return value;
  }
  return std::nullopt;
}

TEST(ProcessMetricsTest, RegistersPlausibleProcessMetrics) {
  Registry registry;
  ASSERT_THAT(RegisterProcessMetrics(registry), IsOk());
  std::string text = registry.ExposePrometheus();
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE process_resident_memory_bytes gauge\n"));

  std::optional<double> rss = SampleValue(text, "process_resident_memory_bytes");
  std::optional<double> vsize = SampleValue(text, "process_virtual_memory_bytes");
  std::optional<double> cpu = SampleValue(text, "process_cpu_seconds_total");
  std::optional<double> fds = SampleValue(text, "process_open_fds");
  std::optional<double> start = SampleValue(text, "process_start_time_seconds");
  ASSERT_TRUE(rss.has_value()) << text;
  ASSERT_TRUE(vsize.has_value()) << text;
  ASSERT_TRUE(cpu.has_value()) << text;
  ASSERT_TRUE(fds.has_value()) << text;
  ASSERT_TRUE(start.has_value()) << text;
  EXPECT_GT(*rss, 1024.0 * 1024.0);  // a gtest binary is well above 1 MiB
  EXPECT_GE(*vsize, *rss);
  EXPECT_GE(*cpu, 0.0);
  EXPECT_GE(*fds, 1.0);
  const double now = absl::ToDoubleSeconds(base::RealClock().Now() - absl::UnixEpoch());
  EXPECT_GT(*start, now - 24 * 3600.0 * 365);  // started within the last year...
  EXPECT_LE(*start, now + 2);                  // ...and not in the future (btime has 1s resolution)
  if (std::optional<double> max_fds = SampleValue(text, "process_max_fds")) {
    EXPECT_GE(*max_fds, *fds);
  }
}

TEST(ProcessMetricsTest, OpenFdsFollowsOpenAndClose) {
  Registry registry;
  ASSERT_THAT(RegisterProcessMetrics(registry), IsOk());
  std::optional<double> before = SampleValue(registry.ExposePrometheus(), "process_open_fds");
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::optional<double> during = SampleValue(registry.ExposePrometheus(), "process_open_fds");
  ::close(fd);
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(during.has_value());
  EXPECT_EQ(*during, *before + 1);
}

TEST(ProcessMetricsTest, RegisteringTwiceFails) {
  Registry registry;
  ASSERT_THAT(RegisterProcessMetrics(registry), IsOk());
  EXPECT_THAT(RegisterProcessMetrics(registry), StatusIs(absl::StatusCode::kAlreadyExists));
}

}  // namespace
}  // namespace gangkeeper::metrics
