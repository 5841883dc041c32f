// gangkeeper httpc: one HTTP exchange as values: the Request a client sends
// and the Response (or the failure) one attempt got. No library type
// appears here; src/httpc/ translates to and from cpp-httplib.
//
// Plain values; thread-compatible.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace gangkeeper::httpc {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method = "GET";  // GET, POST, PATCH, PUT, DELETE
  std::string path;            // with the query, already escaped
  Headers headers;
  std::string body;
  std::string content_type;  // sent when not empty
  // The longest answer read; a longer one fails with kTooLarge. Not
  // applied to a streamed answer (its reader bounds what it keeps).
  size_t max_body_bytes = std::numeric_limits<size_t>::max();
};

// Why an attempt got no (whole) answer.
enum class Failure {
  kNone,
  kConnection,         // could not connect (refused, unreachable, DNS)
  kConnectionTimeout,  // connecting took longer than the timeout
  kTls,                // the TLS handshake or the client certificate failed
  kTlsVerify,          // the server's certificate is not trusted for the name
  kWrite,              // writing the request failed
  kRead,               // reading the answer failed or timed out
  kCanceled,           // a handler returned false, or Connection::Stop()
  kTooLarge,           // the answer is over Request::max_body_bytes
  kOther,
};

struct Response {
  int status = 0;  // the HTTP status; 0 when no answer began
  Headers headers;
  std::string body;  // empty for a streamed answer
  Failure failure = Failure::kNone;
  std::string error;  // the failure in words ("" when kNone)
  // The whole answer arrived (failure kNone). An answer can be complete in
  // its body and still fail afterwards (etcd's chunked trailers): status
  // and body are kept either way.
  bool complete = false;
  // The request surely did not reach the server: the connection, TLS or
  // the write of the request failed (a server acts only on a whole body).
  bool unsent = false;
  // OpenSSL's verification result (X509_V_OK = 0) for kTlsVerify.
  long verify_result = 0;
  // Pool::Send sent the request a second time on a new connection (the
  // pooled one had been closed by the server).
  bool resent = false;

  // The first header named `name` (case-insensitive), "" when absent.
  std::string Header(absl::string_view name) const;
};

// `value` escaped for a URL query or path segment (RFC 3986 unreserved
// characters kept).
std::string QueryEscape(absl::string_view value);

}  // namespace gangkeeper::httpc
