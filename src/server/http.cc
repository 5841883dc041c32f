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

// The one table from canonical codes to HTTP (STYLE §6.5). `kubernetes` is
// the Kubernetes API's StatusReason where it differs from the canonical
// name; codes not listed answer 500.
struct ErrorRow {
  absl::StatusCode code;
  int http_status;
  const char* kubernetes;  // nullptr: the canonical name
};
constexpr ErrorRow kErrorTable[] = {
    {absl::StatusCode::kOk, 200, nullptr},
    {absl::StatusCode::kInvalidArgument, 400, "BadRequest"},
    {absl::StatusCode::kOutOfRange, 400, "BadRequest"},
    {absl::StatusCode::kUnauthenticated, 401, "Unauthorized"},
    {absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
    {absl::StatusCode::kNotFound, 404, nullptr},
    {absl::StatusCode::kAlreadyExists, 409, "Conflict"},
    {absl::StatusCode::kAborted, 409, "Conflict"},
    {absl::StatusCode::kFailedPrecondition, 412, nullptr},
    {absl::StatusCode::kResourceExhausted, 429, "TooManyRequests"},
    {absl::StatusCode::kUnimplemented, 501, nullptr},
    {absl::StatusCode::kUnavailable, 503, nullptr},
    {absl::StatusCode::kDeadlineExceeded, 503, nullptr},
};

const ErrorRow* RowFor(absl::StatusCode code) {
  for (const ErrorRow& row : kErrorTable) {
    if (row.code == code) return &row;
  }
  return nullptr;
}

// HTTP statuses no canonical code maps to, and how their errors are named.
const char* HttpOnlyName(int http_status) {
  switch (http_status) {
    case 405:
      return "MethodNotAllowed";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";  // an object that fails validation (Kubernetes' 422)
    case 431:
      return "RequestHeaderFieldsTooLarge";
    default:
      return nullptr;
  }
}

// The code named by a bare HTTP status from httplib or a route.
absl::StatusCode CodeForHttp(int status) {
  switch (status) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return absl::StatusCode::kAborted;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    default: return status >= 500 ? absl::StatusCode::kInternal : absl::StatusCode::kUnknown;
  }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (RFC
// 3629: no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

// `text` as a JSON string's contents: escaped, and each byte that is not
// part of well-formed UTF-8 replaced by U+FFFD, so that a path or query
// value in a message never makes the body invalid JSON.
std::string JsonText(absl::string_view text) {
  std::string valid;
  valid.reserve(text.size());
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text);
    if (n == 0) {
      valid += "\xEF\xBF\xBD";
      text.remove_prefix(1);
      continue;
    }
    valid.append(text.data(), n);
    text.remove_prefix(n);
  }
  return base::JsonEscape(valid);
}

HttpResponse MakeError(int http_status, absl::string_view code_name, absl::string_view message,
                       absl::string_view field) {
  HttpResponse r;
  r.status = http_status;
  r.content_type = "application/json";
  r.body = absl::StrCat(R"({"error":{"code":")", code_name, R"(","message":")", JsonText(message), "\"");
  if (!field.empty()) absl::StrAppend(&r.body, R"(,"field":")", JsonText(field), "\"");
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
  const ErrorRow* row = RowFor(code);
  return row != nullptr ? row->http_status : 500;
}

std::string ErrorCodeName(absl::StatusCode code, ErrorNames names) {
  const ErrorRow* row = RowFor(code);
  if (names == ErrorNames::kKubernetes && row != nullptr && row->kubernetes != nullptr) return row->kubernetes;
  return CodeName(code);
}

HttpResponse ErrorResponse(const absl::Status& status, absl::string_view field, ErrorNames names) {
  return MakeError(HttpStatusFor(status.code()), ErrorCodeName(status.code(), names), status.message(), field);
}

HttpResponse ErrorResponse(int http_status, absl::string_view message, absl::string_view field) {
  const char* name = HttpOnlyName(http_status);
  return MakeError(http_status, name != nullptr ? name : CodeName(CodeForHttp(http_status)), message, field);
}

}  // namespace gangkeeper::server
