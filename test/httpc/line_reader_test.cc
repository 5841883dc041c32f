// Tests for httpc::LineReader: watch streams cut into chunks anywhere.
#include "gangkeeper/httpc/line_reader.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gangkeeper::httpc {
namespace {

using ::testing::ElementsAre;

struct Collect {
  std::vector<std::string> lines;
  std::function<bool(absl::string_view)> fn() {
    return [this](absl::string_view line) {
      lines.emplace_back(line);
      return true;
    };
  }
};

TEST(LineReaderTest, PutsLinesSplitAcrossChunksBackTogether) {
  LineReader r(1024);
  Collect c;
  EXPECT_EQ(r.Feed("{\"type\":\"ADD", c.fn()), LineReader::Result::kMore);
  EXPECT_TRUE(c.lines.empty());
  EXPECT_EQ(r.buffered(), 12u);
  EXPECT_EQ(r.Feed("ED\"}\n{\"a\":1}\n{\"b\"", c.fn()), LineReader::Result::kMore);
  EXPECT_EQ(r.Feed(":2}\n", c.fn()), LineReader::Result::kMore);
  EXPECT_THAT(c.lines, ElementsAre("{\"type\":\"ADDED\"}", "{\"a\":1}", "{\"b\":2}"));
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(LineReaderTest, BlankLinesAreSkippedAndWhitespaceStripped) {
  LineReader r(1024);
  Collect c;
  EXPECT_EQ(r.Feed("\n  \r\n one \r\n\ntwo\n", c.fn()), LineReader::Result::kMore);
  EXPECT_THAT(c.lines, ElementsAre("one", "two"));
}

TEST(LineReaderTest, StopsWhenTheHandlerSaysSo) {
  LineReader r(1024);
  std::vector<std::string> seen;
  const auto first_only = [&](absl::string_view line) {
    seen.emplace_back(line);
    return false;
  };
  EXPECT_EQ(r.Feed("a\nb\nc\n", first_only), LineReader::Result::kStopped);
  EXPECT_THAT(seen, ElementsAre("a"));
}

TEST(LineReaderTest, AnUnfinishedLineOverTheBoundIsTooLong) {
  LineReader r(8);
  Collect c;
  EXPECT_EQ(r.Feed("12345678", c.fn()), LineReader::Result::kMore);  // at the bound: kept
  EXPECT_EQ(r.Feed("9", c.fn()), LineReader::Result::kTooLong);
  LineReader whole(8);
  // A long line that ends within the chunk is delivered: the bound is on
  // what is kept waiting.
  EXPECT_EQ(whole.Feed("0123456789abcdef\nxy", c.fn()), LineReader::Result::kMore);
  EXPECT_THAT(c.lines, ElementsAre("0123456789abcdef"));
  EXPECT_EQ(whole.buffered(), 2u);
}

}  // namespace
}  // namespace gangkeeper::httpc
