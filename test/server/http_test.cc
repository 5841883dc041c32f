#include "gangkeeper/server/http.h"

#include "gangkeeper/server/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::server {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

TEST(HttpStatusTest, CanonicalCodesMapToHttp) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kAborted), 409);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kDeadlineExceeded), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
}

TEST(ErrorResponseTest, HasTheDesignShapeWithEscapedMessage) {
  HttpResponse r = ErrorResponse(absl::InvalidArgumentError("bad \"quota\"\n"), "spec.resourceGroups[0]");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body,
            R"({"error":{"code":"InvalidArgument","message":"bad \"quota\"\n","field":"spec.resourceGroups[0]"}})");
  HttpResponse nf = ErrorResponse(404, "no such path");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.body, R"({"error":{"code":"NotFound","message":"no such path"}})");
  EXPECT_THAT(ErrorResponse(413, "too big").body, HasSubstr("RequestEntityTooLarge"));
}

TEST(HttpRequestTest, FindsQueryParamsAndHeaders) {
  HttpRequest req;
  req.query = {{"namespace", "team-a"}, {"state", "pending"}};
  req.headers = {{"content-type", "application/json"}};
  EXPECT_EQ(req.QueryParam("state"), "pending");
  EXPECT_EQ(req.QueryParam("missing"), "");
  EXPECT_EQ(req.Header("content-type"), "application/json");
}

TEST(ParseListenAddressTest, AcceptsHostPortForms) {
  std::string host;
  int port = -1;
  EXPECT_THAT(ParseListenAddress("0.0.0.0:9443", &host, &port), IsOk());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 9443);
  EXPECT_THAT(ParseListenAddress(":8443", &host, &port), IsOk());
  EXPECT_EQ(host, "0.0.0.0");
  EXPECT_EQ(port, 8443);
  EXPECT_THAT(ParseListenAddress("[::1]:0", &host, &port), IsOk());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 0);
}

TEST(ParseListenAddressTest, RejectsBadAddresses) {
  std::string host;
  int port = 0;
  for (const char* bad : {"9443", "localhost:", "localhost:http", "127.0.0.1:70000", "127.0.0.1:-1"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseListenAddress(bad, &host, &port), StatusIs(absl::StatusCode::kInvalidArgument, "port"));
  }
}

}  // namespace
}  // namespace gangkeeper::server
