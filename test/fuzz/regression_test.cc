// gangkeeper fuzzing: replays a fuzz target's inputs in the normal test build.
//
// Linked once per target with that target's FuzzOneInput (fuzz_target.h):
// every fixture seed of the target's seed set, and every file under
// test/fuzz/regressions/<target>/ (inputs that once crashed it, kept when
// the bug was fixed), must be handled cleanly. A crash found by fuzzing
// becomes a test by dropping the minimised input into that folder. The
// suite is GK_FUZZ_SUITE, "<Target>FuzzRegressionTest" (CMakeLists.txt).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/fuzz/fuzz_target.h"
#include "test/fuzz/seeds.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::fuzz {
namespace {

using ::gangkeeper::testing::IsOk;
namespace fs = std::filesystem;

TEST(GK_FUZZ_SUITE, FixtureSeedsAreHandledCleanly) {
  absl::StatusOr<std::vector<Seed>> seeds = BuildSeeds(GK_FUZZ_SEEDS, GK_SOURCE_DIR);
  ASSERT_THAT(seeds, IsOk());
  if (std::string(GK_FUZZ_SEEDS) != "none") {
    EXPECT_FALSE(seeds->empty());
  }
  for (const Seed& seed : *seeds) {
    SCOPED_TRACE(seed.name);
    EXPECT_THAT(FuzzOneInput(seed.data), IsOk());
  }
}

TEST(GK_FUZZ_SUITE, RegressionInputsAreHandledCleanly) {
  const fs::path dir = fs::path(GK_SOURCE_DIR) / "test/fuzz/regressions" / GK_FUZZ_TARGET;
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file() && it->path().filename().string()[0] != '.') files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << file;
    std::stringstream data;
    data << in.rdbuf();
    EXPECT_THAT(FuzzOneInput(data.str()), IsOk());
  }
}

// The checks themselves: inputs every target must refuse or accept cleanly.
TEST(GK_FUZZ_SUITE, EmptyAndGarbageInputsAreHandledCleanly) {
  for (const std::string& data :
       {std::string(), std::string("\0", 1), std::string("{"), std::string("[]"), std::string(4096, '['),
        std::string("{\"kind\":\"AdmissionReview\"}"), std::string("\xff\xfe\xfd")}) {
    SCOPED_TRACE(data.substr(0, 40));
    EXPECT_THAT(FuzzOneInput(data), IsOk());
  }
}

TEST(GK_FUZZ_SUITE, Utf8CheckAcceptsWellFormedAndRefusesMalformed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("gpu \xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // cut in two
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

}  // namespace
}  // namespace gangkeeper::fuzz
