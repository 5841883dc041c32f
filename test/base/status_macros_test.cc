#include "gangkeeper/base/status_macros.h"

#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::base {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  GK_ASSIGN_OR_RETURN(int h, Half(x));
  GK_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  GK_RETURN_IF_ERROR(Half(x));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPassesValuesAndErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, "odd"));
}

TEST(StatusMacrosTest, ReturnIfErrorStopsOnError) {
  EXPECT_THAT(CheckEven(4), IsOk());
  EXPECT_THAT(CheckEven(3), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AnnotateTest, PrefixesTheMessageAndKeepsTheCode) {
  absl::Status s = Annotate(absl::NotFoundError("no such file"), "loading policies/a.yaml");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, "loading policies/a.yaml: no such file"));
  EXPECT_THAT(Annotate(absl::OkStatus(), "ctx"), IsOk());
}

}  // namespace
}  // namespace gangkeeper::base
