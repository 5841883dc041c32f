#include "gangkeeper/base/field_path.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::base {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

TEST(FieldPathTest, BuildsKubernetesStylePaths) {
  FieldPath p = FieldPath().Child("spec").Child("resourceGroups").Index(0).Child("flavors").Index(2);
  EXPECT_EQ(p.str(), "spec.resourceGroups[0].flavors[2]");
  EXPECT_EQ(FieldPath("metadata").Child("labels").Key("kueue.x-k8s.io/queue-name").str(),
            "metadata.labels[kueue.x-k8s.io/queue-name]");
  EXPECT_TRUE(FieldPath().empty());
}

// Paths are rendered lazily (short names inline, deep paths folded into a
// shared head): whatever the mix of segments, depths and name lengths, a
// path renders as the eagerly built string would, and paths derived from a
// common parent do not disturb each other.
TEST(FieldPathTest, RendersAsEagerConcatenationForAnyMixOfSegments) {
  std::mt19937 rng(20261206);
  const std::string alphabet = "abcdefghij./-_[]0123456789";
  std::vector<std::string> borrowed;  // keeps ChildRef/KeyRef names alive
  borrowed.reserve(100000);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::pair<FieldPath, std::string>> paths = {{FieldPath(), ""}};
    for (int step = 0; step < 40; ++step) {
      const auto& [parent, want] = paths[rng() % paths.size()];
      std::string name;
      const size_t len = rng() % 4 == 0 ? 20 + rng() % 40 : rng() % 20;
      for (size_t i = 0; i < len; ++i) name.push_back(alphabet[rng() % alphabet.size()]);
      FieldPath next;
      std::string next_want;
      switch (rng() % 5) {
        case 0:
          next = parent.Child(name);
          next_want = want.empty() ? name : absl::StrCat(want, ".", name);
          break;
        case 1:
          borrowed.push_back(name);
          next = parent.ChildRef(borrowed.back());
          next_want = want.empty() ? name : absl::StrCat(want, ".", name);
          break;
        case 2: {
          const size_t i = rng() % 3 == 0 ? rng() : rng() % 12;
          next = parent.Index(i);
          next_want = absl::StrCat(want, "[", i, "]");
          break;
        }
        case 3:
          next = parent.Key(name);
          next_want = absl::StrCat(want, "[", name, "]");
          break;
        default:
          borrowed.push_back(name);
          next = parent.KeyRef(borrowed.back());
          next_want = absl::StrCat(want, "[", name, "]");
          break;
      }
      ASSERT_EQ(next.str(), next_want) << "round " << round << " step " << step;
      ASSERT_EQ(next.empty(), next_want.empty());
      paths.emplace_back(std::move(next), std::move(next_want));
    }
    for (const auto& [path, want] : paths) {
      const FieldPath copy = path;
      ASSERT_EQ(copy.str(), want);
    }
  }
  EXPECT_EQ(FieldPath("").str(), "");
  EXPECT_TRUE(FieldPath("").empty());
  EXPECT_EQ(FieldPath().Child("").Child("a").str(), "a");
  EXPECT_EQ(FieldPath("a").Child("").Child("b").str(), "a..b");
  EXPECT_EQ(FieldPath().Index(3).Child("x").str(), "[3].x");
}

TEST(FieldErrorsTest, EmptyListIsOk) { EXPECT_THAT(ToStatus(FieldErrors()), IsOk()); }

TEST(FieldErrorsTest, EveryErrorIsReportedWithItsPath) {
  FieldErrors errs;
  errs.Add(FieldPath("spec").Child("cohort"), FieldErrorType::kInvalid, "must be a DNS label");
  errs.Add(FieldPath("metadata").Child("name"), FieldErrorType::kRequired, "set a name");
  FieldErrors more;
  more.Add(FieldPath("spec").Child("x"), FieldErrorType::kNotSupported, "remove it");
  errs.Append(more);
  ASSERT_EQ(errs.size(), 3u);
  absl::Status s = ToStatus(errs);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "spec.cohort: Invalid value: must be a DNS label"));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "metadata.name: Required value: set a name"));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, "spec.x: Unsupported value: remove it"));
}

}  // namespace
}  // namespace gangkeeper::base
