#include "gangkeeper/base/field_path.h"

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
