// gangkeeper: HTTP values and the status-code table (see http.h).
#include "gangkeeper/server/http.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::server {
namespace {

std::string CodeName(absl::StatusCode code) {
  // "NOT_FOUND" -> "NotFound", like Kubernetes' Status reasons.
  std::string upper = absl::StatusCodeToString(code);
  std::string out;
  bool next_upper = true;
  for (char c : upper) {
    if (c == '_') {
      next_upper = true;
      continue;
    }
    out += next_upper ? c : absl::ascii_tolower(c);
    next_upper = false;
  }
  return out;
}

absl::StatusCode CodeForHttp(int status) {
  switch (status) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 405: return absl::StatusCode::kUnimplemented;
    case 409: return absl::StatusCode::kAborted;
    case 413: return absl::StatusCode::kResourceExhausted;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    default: return status >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kUnknown;
  }
}

HttpResponse MakeError(int http_status, absl::string_view code_name, absl::string_view message,
                       absl::string_view field) {
  HttpResponse r;
  r.status = http_status;
  r.content_type = "application/json";
  r.body = absl::StrCat(R"({"error":{"code":")", code_name, R"(","message":")", base::JsonEscape(message), "\"");
  if (!field.empty()) absl::StrAppend(&r.body, R"(,"field":")", base::JsonEscape(field), "\"");
  r.body += "}}";
  return r;
}

}  // namespace

std::string HttpRequest::QueryParam(absl::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return "";
}

std::string HttpRequest::Header(absl::string_view lower_name) const {
  for (const auto& [k, v] : headers) {
    if (k == lower_name) return v;
  }
  return "";
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument: return 400;
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists: return 409;
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kFailedPrecondition: return 412;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 503;
    default: return 500;
  }
}

HttpResponse ErrorResponse(const absl::Status& status, absl::string_view field) {
  return MakeError(HttpStatusFor(status.code()), CodeName(status.code()), status.message(), field);
}

HttpResponse ErrorResponse(int http_status, absl::string_view message) {
  absl::StatusCode code = CodeForHttp(http_status);
  std::string name = http_status == 413   ? "RequestEntityTooLarge"
                     : http_status == 405 ? "MethodNotAllowed"
                     : http_status == 415 ? "UnsupportedMediaType"
                     : http_status == 431 ? "RequestHeaderFieldsTooLarge"
                                          : CodeName(code);
  return MakeError(http_status, name, message, "");
}

}  // namespace gangkeeper::server
