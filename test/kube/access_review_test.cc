// gangkeeper: tests for TokenReview and SubjectAccessReview against the
// fake API server (a real HTTPS server on loopback).
#include "gangkeeper/kube/access_review.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/kube/fake_cluster.h"

namespace gangkeeper::kube {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AccessReviewTest : public FakeClusterTest {};

TEST_F(AccessReviewTest, KnownTokenNamesItsUser) {
  fake_->SetTokenUser("bob-token", {"bob", "uid-1", {"team-b-admins", "system:authenticated"}, {{"scopes", {"x"}}}});
  AccessReviewClient reviews(client_.get());
  absl::StatusOr<TokenReviewResult> r = reviews.ReviewToken("bob-token");
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->authenticated);
  EXPECT_EQ(r->user.username, "bob");
  EXPECT_EQ(r->user.uid, "uid-1");
  EXPECT_THAT(r->user.groups, ElementsAre("team-b-admins", "system:authenticated"));
  EXPECT_THAT(r->user.extra["scopes"], ElementsAre("x"));
  // Sent as gangkeeper's own identity, the token in the review's spec.
  std::vector<::gangkeeper::testing::RecordedCall> calls = fake_->Calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().method, "POST");
  EXPECT_EQ(calls.back().path, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(calls.back().authorization, "Bearer fake-token");
  nlohmann::json sent = nlohmann::json::parse(calls.back().body, nullptr, false);
  EXPECT_EQ(sent.value("kind", ""), "TokenReview");
  EXPECT_EQ(sent["spec"].value("token", ""), "bob-token");
}

TEST_F(AccessReviewTest, UnknownTokenIsNotAnError) {
  AccessReviewClient reviews(client_.get());
  absl::StatusOr<TokenReviewResult> r = reviews.ReviewToken("nobody");
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->authenticated);
  EXPECT_THAT(r->error, HasSubstr("token lookup failed"));
}

TEST_F(AccessReviewTest, AccessReviewCarriesUserAndAttributes) {
  nlohmann::json seen;
  absl::Mutex mu;
  fake_->SetAccessRule([&](const nlohmann::json& spec) {
    absl::MutexLock lock(&mu);
    seen = spec;
    return spec.contains("resourceAttributes") && spec["resourceAttributes"].value("namespace", "") == "team-b";
  });
  AccessReviewClient reviews(client_.get());
  const ReviewedUser bob{"bob", "uid-1", {"team-b-admins"}, {{"scopes", {"x"}}}};
  absl::StatusOr<AccessDecision> d =
      reviews.ReviewAccess(bob, {"update", "kueue.x-k8s.io", "localqueues", "team-b", "gpu", ""});
  ASSERT_THAT(d, IsOk());
  EXPECT_TRUE(d->allowed);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(seen.value("user", ""), "bob");
    EXPECT_EQ(seen.value("uid", ""), "uid-1");
    EXPECT_EQ(seen["groups"], nlohmann::json::array({"team-b-admins"}));
    EXPECT_EQ(seen["extra"]["scopes"], nlohmann::json::array({"x"}));
    EXPECT_EQ(seen["resourceAttributes"],
              nlohmann::json({{"verb", "update"}, {"group", "kueue.x-k8s.io"}, {"resource", "localqueues"},
                              {"namespace", "team-b"}, {"name", "gpu"}}));
  }
  d = reviews.ReviewAccess(bob, {"update", "kueue.x-k8s.io", "localqueues", "team-a", "gpu", ""});
  ASSERT_THAT(d, IsOk());
  EXPECT_FALSE(d->allowed);
  d = reviews.ReviewAccess(bob, {"get", "", "", "", "", "/v1/audit"});
  ASSERT_THAT(d, IsOk());
  EXPECT_FALSE(d->allowed);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(seen["nonResourceAttributes"], nlohmann::json({{"path", "/v1/audit"}, {"verb", "get"}}));
}

TEST_F(AccessReviewTest, ServerErrorsAreUnavailable) {
  ::gangkeeper::testing::ScriptedFailure f;
  f.path_contains = "tokenreviews";
  f.status = 500;
  f.times = -1;
  fake_->Fail(f);
  AccessReviewClient reviews(client_.get());
  absl::StatusOr<TokenReviewResult> r = reviews.ReviewToken("bob-token");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("TokenReview"));
  fake_->ClearFailures();
  f.path_contains = "subjectaccessreviews";
  f.status = 403;
  fake_->Fail(f);
  absl::StatusOr<AccessDecision> d = reviews.ReviewAccess({"bob", "", {}, {}}, {"get", "", "", "", "", "/metrics"});
  EXPECT_EQ(d.status().code(), absl::StatusCode::kPermissionDenied) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("may not create"));
}

TEST_F(AccessReviewTest, ServerDownIsAnError) {
  AccessReviewClient reviews(client_.get());
  fake_.reset();  // nothing listens on the port any more
  absl::StatusOr<TokenReviewResult> r = reviews.ReviewToken("bob-token");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status()) || absl::IsDeadlineExceeded(r.status())) << r.status();
}

}  // namespace
}  // namespace gangkeeper::kube
