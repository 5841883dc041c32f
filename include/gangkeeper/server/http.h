// gangkeeper: the HTTP request/response values handlers see.
//
// httplib types never leave src/server (STYLE §6.3): the server adapts each
// request into an HttpRequest, calls the route's handler, and writes the
// HttpResponse back (an asynchronous handler through a Responder). Value
// types; thread-compatible, except Responder (thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
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

// How an asynchronous handler answers (server.h, Route::async_handler).
// A copyable handle on one request; thread-safe: Respond() may be called
// from any thread, later. The first answer goes out on the connection's
// own loop (after the answers of the requests before it on the same
// connection, in order); later ones, and answers to a connection that is
// gone or a request already answered by the server's deadline, are
// dropped. When the last copy goes without an answer, the request is
// answered 500 (a handler's bug, logged).
class Responder {
 public:
  struct State;  // the server's
  explicit Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Sends `response`. Only the first call counts.
  void Respond(HttpResponse response) const;
  // Runs `work` on the server's worker pool: a handler that must block
  // (an fsync, a network call) does it there, never on the loop.
  void RunBlocking(absl::AnyInvocable<void()> work) const;

 private:
  std::shared_ptr<State> state_;
};

// Called on an event-loop thread; must return at once (no blocking, no
// heavy CPU), answering later through `responder` from any thread.
using AsyncHandler = std::function<void(HttpRequest request, Responder responder)>;

// Errors answer through one table (http.cc), owned here for every
// listener and the API: a canonical code gives the HTTP status and the
// "code" of the body {"error":{"code","message","field"}}.
//
// The HTTP status for an absl status code (STYLE §6.5): InvalidArgument 400,
// Unauthenticated 401, PermissionDenied 403, NotFound 404, AlreadyExists and
// Aborted 409, FailedPrecondition 412, OutOfRange 400, ResourceExhausted
// 429, Unimplemented 501, Unavailable and DeadlineExceeded 503, else 500.
int HttpStatusFor(absl::StatusCode code);

// How the body's "code" is spelled. kCanonical: abseil's name
// ("InvalidArgument", "PermissionDenied"), as the listeners and the webhook
// answer. kKubernetes: the Kubernetes API's StatusReason where one differs
// (InvalidArgument and OutOfRange "BadRequest", Unauthenticated
// "Unauthorized", PermissionDenied "Forbidden", AlreadyExists and Aborted
// "Conflict", ResourceExhausted "TooManyRequests"), as the API answers
// (api.h). The status is the same either way.
enum class ErrorNames { kCanonical, kKubernetes };
std::string ErrorCodeName(absl::StatusCode code, ErrorNames names = ErrorNames::kCanonical);

// A JSON error response: {"error":{"code":"NotFound","message":"...",
// "field":"..."}} with the status from HttpStatusFor ("field" only when set).
// The body is always valid JSON: bytes of the message or field that are not
// well-formed UTF-8 become U+FFFD.
HttpResponse ErrorResponse(const absl::Status& status, absl::string_view field = "",
                           ErrorNames names = ErrorNames::kCanonical);
// The same shape for a bare HTTP status: one no canonical code maps to
// (405 MethodNotAllowed, 413 RequestEntityTooLarge, 415
// UnsupportedMediaType, 422 Invalid, 431 RequestHeaderFieldsTooLarge), or
// one httplib answered on its own (400, 404, ...: the canonical name).
HttpResponse ErrorResponse(int http_status, absl::string_view message, absl::string_view field = "");

}  // namespace gangkeeper::server
