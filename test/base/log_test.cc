#include "gangkeeper/base/log.h"

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace gangkeeper::base
