// gangkeeper: the HTTP request/response values handlers see.
//
// httplib types never leave src/server (STYLE §6.3): the server adapts each
// request into an HttpRequest, calls the route's handler, and writes the
// HttpResponse back. Value types; thread-compatible.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  // Query parameters in arrival order, decoded.
  std::vector<std::pair<std::string, std::string>> query;
  // Header names lower-cased.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_addr;
  // Subject of the verified client certificate, when one was presented.
  std::string client_subject;

  // The first query parameter / header named `name` ("" when absent).
  std::string QueryParam(absl::string_view name) const;
  std::string Header(absl::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using Handler = std::function<HttpResponse(const HttpRequest&)>;

// The HTTP status for an absl status code (STYLE §6.5): InvalidArgument 400,
// Unauthenticated 401, PermissionDenied 403, NotFound 404, AlreadyExists and
// Aborted 409, FailedPrecondition 412, OutOfRange 400, ResourceExhausted
// 429, Unimplemented 501, Unavailable and DeadlineExceeded 503, else 500.
int HttpStatusFor(absl::StatusCode code);

// A JSON error response: {"error":{"code":"NotFound","message":"...",
// "field":"..."}} with the status from HttpStatusFor ("field" only when set).
HttpResponse ErrorResponse(const absl::Status& status, absl::string_view field = "");
// The same shape for a bare HTTP status (404 for an unknown path, 413, ...).
HttpResponse ErrorResponse(int http_status, absl::string_view message);

}  // namespace gangkeeper::server
