#include "src/admission/review.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/status_matchers.h"

namespace gangkeeper::admission {
namespace {

using ::gangkeeper::testing::StatusIs;

TEST(EncodeResponseTest, AllowedWithPatchAndWarnings) {
  Response r;
  r.uid = "u-1";
  r.patch = R"([{"op":"add","path":"/spec/suspend","value":true}])";
  r.warnings = {"first", "second"};
  nlohmann::json out = nlohmann::json::parse(EncodeResponse(r));
  EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(out["kind"], "AdmissionReview");
  EXPECT_EQ(out["response"]["uid"], "u-1");
  EXPECT_TRUE(out["response"]["allowed"].get<bool>());
  EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(out["response"]["patch"].get<std::string>(), &patch));
  EXPECT_EQ(patch, r.patch);
  EXPECT_EQ(out["response"]["warnings"], nlohmann::json({"first", "second"}));
  EXPECT_FALSE(out["response"].contains("status"));
}

TEST(EncodeResponseTest, DenialCarriesCodeReasonAndMessageButNoPatch) {
  Response r;
  r.uid = "u-2";
  r.allowed = false;
  r.code = 403;
  r.reason = "Forbidden";
  r.message = "gangkeeper: \"quoted\" reason";
  nlohmann::json out = nlohmann::json::parse(EncodeResponse(r));
  EXPECT_FALSE(out["response"]["allowed"].get<bool>());
  EXPECT_EQ(out["response"]["status"]["code"], 403);
  EXPECT_EQ(out["response"]["status"]["reason"], "Forbidden");
  EXPECT_EQ(out["response"]["status"]["message"], r.message);
  EXPECT_FALSE(out["response"].contains("patchType"));
}

TEST(EncodeResponseTest, WarningsAreCappedAt4096CharactersInAll) {
  Response r;
  r.uid = "u";
  r.warnings = {std::string(3000, 'a'), std::string(3000, 'b'), "never"};
  nlohmann::json out = nlohmann::json::parse(EncodeResponse(r));
  size_t total = 0;
  for (const auto& w : out["response"]["warnings"]) total += w.get<std::string>().size();
  EXPECT_EQ(total, 4096u);
  EXPECT_EQ(out["response"]["warnings"].size(), 2u);
}

TEST(DecodeReviewTest, ReadsTheEnvelopeAndNamesWhatIsMissing) {
  auto ok = DecodeReview(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",
    "kind":{"group":"batch","version":"v1","kind":"Job"},"resource":{"group":"batch","version":"v1","resource":"jobs"},
    "subResource":"status","namespace":"ns","name":"n","operation":"UPDATE","userInfo":{"username":"bob"},
    "object":{"a":1},"oldObject":{"a":0},"dryRun":true}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->uid, "x");
  EXPECT_EQ((*ok)->kind, "Job");
  EXPECT_EQ((*ok)->sub_resource, "status");
  EXPECT_EQ((*ok)->username, "bob");
  EXPECT_TRUE((*ok)->dry_run);
  ASSERT_NE((*ok)->old_object, nullptr);
  EXPECT_THAT(DecodeReview(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",
    "kind":{"kind":"Job"},"operation":"CREATE","object":null}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "request.object"));
  EXPECT_THAT(DecodeReview(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",
    "kind":{"kind":"Job"},"operation":"PATCH"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "request.operation"));
  EXPECT_THAT(DecodeReview(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",
    "kind":{"kind":"Job"},"operation":"DELETE","dryRun":"yes"}})"),
              StatusIs(absl::StatusCode::kInvalidArgument, "request.dryRun"));
}

// A review whose object nests `depth` arrays under object.deep, with an
// escaped string at the bottom (in-place parsing rewrites it).
std::string NestedReview(int depth, bool truncated = false) {
  std::string deep = std::string(depth, '[') + R"("a\"b")" + std::string(depth, ']');
  std::string body = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",
    "kind":{"group":"batch","version":"v1","kind":"Job"},"namespace":"ns","name":"n","operation":"CREATE",
    "object":{"deep":)" + deep + R"(,"after":"end"}}})";
  if (truncated) body.resize(body.size() - 3);
  return body;
}

// The review parses recursively up to a depth and iteratively beyond it:
// either way the same document comes out, and a malformed body is refused
// the same way.
TEST(DecodeReviewTest, AReviewDecodesTheSameAtAnyNestingDepth) {
  for (int depth : {1, 100, 254, 255, 256, 257, 300, 5000}) {
    SCOPED_TRACE(depth);
    auto review = DecodeReview(NestedReview(depth));
    ASSERT_TRUE(review.ok()) << review.status();
    ASSERT_NE((*review)->object, nullptr);
    const rapidjson::Value* v = &(*(*review)->object)["deep"];
    int seen = 0;
    while (v->IsArray()) {
      ASSERT_EQ(v->Size(), 1u);
      v = &(*v)[0];
      ++seen;
    }
    EXPECT_EQ(seen, depth);
    ASSERT_TRUE(v->IsString());
    EXPECT_EQ(std::string(v->GetString(), v->GetStringLength()), "a\"b");
    EXPECT_STREQ((*(*review)->object)["after"].GetString(), "end");
    EXPECT_THAT(DecodeReview(NestedReview(depth, /*truncated=*/true)),
                StatusIs(absl::StatusCode::kInvalidArgument, "body is not JSON"));
  }
}

}  // namespace
}  // namespace gangkeeper::admission
