#include "gangkeeper/base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/temp_dir.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::base {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

TEST(LogTest, JsonEscapeHandlesQuotesControlAndBackslash) {
  EXPECT_EQ(JsonEscape("a\"b\\c\nd\te\x01"), "a\\\"b\\\\c\\nd\\te\\u0001");
  EXPECT_EQ(JsonEscape("plain"), "plain");
}

TEST(LogTest, ParseLogFormatAcceptsTextAndJsonOnly) {
  LogFormat f = LogFormat::kText;
  EXPECT_THAT(ParseLogFormat("json", &f), IsOk());
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_THAT(ParseLogFormat("text", &f), IsOk());
  EXPECT_EQ(f, LogFormat::kText);
  EXPECT_THAT(ParseLogFormat("xml", &f), StatusIs(absl::StatusCode::kInvalidArgument, "--log-format"));
}

TEST(LogTest, ConfigureRejectsUnknownLevels) {
  LogOptions o;
  o.level = "loud";
  EXPECT_THAT(ConfigureLogging(o), StatusIs(absl::StatusCode::kInvalidArgument, "--log-level"));
  o.level = "warn";
  EXPECT_THAT(ConfigureLogging(o), IsOk());
  EXPECT_EQ(GetLogger("test")->level(), spdlog::level::warn);
  EXPECT_EQ(GetLogger("test"), GetLogger("test"));
  o.level = "info";
  EXPECT_THAT(ConfigureLogging(o), IsOk());
  EXPECT_EQ(GetLogger("test")->level(), spdlog::level::info);
}

// Sends fd 2 to a file for the life of the object.
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = dup(2);
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
  }
  std::string Read() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST(LogTest, BatchingLoggerWritesItsLinesInOrderAtFlush) {
  testing::TempDir dir;
  StderrToFile err(dir.path() + "/stderr");
  auto log = GetBatchingLogger("batch-order");
  EXPECT_EQ(GetBatchingLogger("batch-order"), log);
  for (int i = 0; i < 100; ++i) log->info("request {}", i);
  FlushLogs();
  std::string out = err.Read();
  size_t at = 0;
  for (int i = 0; i < 100; ++i) {
    size_t next = out.find("batch-order: request " + std::to_string(i) + "\n", at);
    ASSERT_NE(next, std::string::npos) << "line " << i << " missing or out of order in:\n" << out;
    at = next;
  }
}

TEST(LogTest, BatchingLoggerLinesArriveWithoutAFlush) {
  testing::TempDir dir;
  StderrToFile err(dir.path() + "/stderr");
  auto log = GetBatchingLogger("batch-late");
  log->info("a line nobody flushes");
  std::string out;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    out = err.Read();
    if (out.find("a line nobody flushes") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(out, ::testing::HasSubstr("batch-late: a line nobody flushes"));
}

TEST(LogTest, BatchingLoggerWritesAtOnceFromAWarning) {
  testing::TempDir dir;
  StderrToFile err(dir.path() + "/stderr");
  auto log = GetBatchingLogger("batch-warn");
  log->info("before the warning");
  log->warn("the warning");
  std::string out = err.Read();
  EXPECT_THAT(out, ::testing::HasSubstr("batch-warn: before the warning"));
  EXPECT_THAT(out, ::testing::HasSubstr("batch-warn: the warning"));
}

}  // namespace
}  // namespace gangkeeper::base
