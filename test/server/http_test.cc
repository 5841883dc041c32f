#include "gangkeeper/server/http.h"

#include "absl/strings/str_cat.h"
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

TEST(ErrorResponseTest, KubernetesNamesKeepTheStatusOfTheCanonicalCode) {
  struct Case {
    absl::Status status;
    int want_status;
    const char* want_canonical;
    const char* want_kubernetes;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("x"), 400, "InvalidArgument", "BadRequest"},
      {absl::UnauthenticatedError("x"), 401, "Unauthenticated", "Unauthorized"},
      {absl::PermissionDeniedError("x"), 403, "PermissionDenied", "Forbidden"},
      {absl::NotFoundError("x"), 404, "NotFound", "NotFound"},
      {absl::AbortedError("x"), 409, "Aborted", "Conflict"},
      {absl::AlreadyExistsError("x"), 409, "AlreadyExists", "Conflict"},
      {absl::ResourceExhaustedError("x"), 429, "ResourceExhausted", "TooManyRequests"},
      {absl::UnavailableError("x"), 503, "Unavailable", "Unavailable"},
      {absl::InternalError("x"), 500, "Internal", "Internal"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want_canonical);
    EXPECT_EQ(ErrorCodeName(c.status.code()), c.want_canonical);
    HttpResponse r = ErrorResponse(c.status, "f", ErrorNames::kKubernetes);
    EXPECT_EQ(r.status, c.want_status);
    EXPECT_EQ(r.body, absl::StrCat(R"({"error":{"code":")", c.want_kubernetes, R"(","message":"x","field":"f"}})"));
  }
  HttpResponse invalid = ErrorResponse(422, "spec.x: required", "spec.x");
  EXPECT_EQ(invalid.status, 422);
  EXPECT_EQ(invalid.body, R"({"error":{"code":"Invalid","message":"spec.x: required","field":"spec.x"}})");
}

TEST(ErrorResponseTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  // A path or query value quoted in a message must not make the body
  // invalid JSON: stray, truncated, overlong and surrogate sequences each
  // become U+FFFD; well-formed text (2-, 3- and 4-byte) is kept.
  HttpResponse r = ErrorResponse(absl::NotFoundError("/v1/x\xff\xc3 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 "
                                                     "\xc0\xaf \xed\xa0\x80 \xe2\x82"),
                                 "f\x80");
  EXPECT_EQ(r.body, "{\"error\":{\"code\":\"NotFound\",\"message\":\"/v1/x\xef\xbf\xbd\xef\xbf\xbd caf\xc3\xa9 "
                    "\xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                    "\xef\xbf\xbd\xef\xbf\xbd\",\"field\":\"f\xef\xbf\xbd\"}}");
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
