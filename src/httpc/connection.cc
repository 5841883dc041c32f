// gangkeeper httpc: one request on one connection, and the request/response
// values (see pool.h, request.h).
//
// Status, headers and body are taken by handlers, not from httplib's
// Result: a server may end a complete answer in a way cpp-httplib 0.11
// reports as an error (etcd's chunked trailers), and the caller decides
// whether a complete body counts.
#include <openssl/x509.h>
#include <poll.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/httpc/pool.h"
#include "gangkeeper/httpc/request.h"
#include "src/httpc/connection_impl.h"

namespace gangkeeper::httpc {
namespace {

Failure FailureOf(httplib::Error e) {
  switch (e) {
    case httplib::Error::Success: return Failure::kNone;
    case httplib::Error::Connection: return Failure::kConnection;
    case httplib::Error::ConnectionTimeout: return Failure::kConnectionTimeout;
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts: return Failure::kTls;
    case httplib::Error::SSLServerVerification: return Failure::kTlsVerify;
    case httplib::Error::Write: return Failure::kWrite;
    case httplib::Error::Read: return Failure::kRead;
    case httplib::Error::Canceled: return Failure::kCanceled;
    default: return Failure::kOther;
  }
}

// One exchange. With `on_body` the body goes there; otherwise it is kept,
// up to request.max_body_bytes.
Response Exchange(Connection::Impl& c, const Request& request,
                  const std::function<bool(int, const Headers&)>* on_head,
                  const std::function<bool(absl::string_view)>* on_body) {
  Response out;
  bool too_big = false;
  httplib::Request req;
  req.method = request.method;
  req.path = request.path;
  req.body = request.body;
  for (const auto& [name, value] : request.headers) req.headers.emplace(name, value);
  if (!request.content_type.empty()) req.headers.emplace("Content-Type", request.content_type);
  req.response_handler = [&](const httplib::Response& res) {
    out.status = res.status;
    out.headers.assign(res.headers.begin(), res.headers.end());
    return on_head == nullptr || (*on_head)(out.status, out.headers);
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (on_body != nullptr) return (*on_body)(absl::string_view(data, n));
    if (n > request.max_body_bytes - out.body.size()) {
      too_big = true;
      return false;
    }
    out.body.append(data, n);
    return true;
  };
  c.verify_error.store(0);
  httplib::Result r = c.client->send(req);
  if (r) {
    // A 204 answer skips the handlers.
    out.status = r->status;
    if (out.headers.empty()) out.headers.assign(r->headers.begin(), r->headers.end());
  }
  out.failure = FailureOf(r.error());
  out.error = out.failure == Failure::kNone ? "" : httplib::to_string(r.error());
  out.complete = static_cast<bool>(r);
  if (too_big) {
    out.status = 0;
    out.failure = Failure::kTooLarge;
    out.error = absl::StrCat("an answer over ", request.max_body_bytes, " bytes");
    out.body.clear();
    out.complete = false;
  }
  // The handshake failed because OpenSSL refused the certificate (the
  // connection's own verification, set up in pool.cc).
  if (out.failure == Failure::kTls && c.verify_error.load() != 0) {
    out.failure = Failure::kTlsVerify;
    out.error = absl::StrCat("the server's certificate is not trusted: ",
                             X509_verify_cert_error_string(c.verify_error.load()));
    out.verify_result = c.verify_error.load();
  }
  // Connecting, its time-out and TLS failures happen before the request is
  // written; a write that failed left the body incomplete, and a server acts
  // only on a whole one.
  out.unsent = !r && out.status == 0 &&
               (out.failure == Failure::kConnection || out.failure == Failure::kConnectionTimeout ||
                out.failure == Failure::kTls || out.failure == Failure::kTlsVerify || out.failure == Failure::kWrite);
  return out;
}

}  // namespace

std::string Response::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

std::string QueryEscape(absl::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::AsciiStrToUpper(absl::StrCat(absl::Hex(c, absl::kZeroPad2))));
    }
  }
  return out;
}

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::~Connection() = default;

Response Connection::Send(const Request& request) { return Exchange(*impl_, request, nullptr, nullptr); }

Response Connection::Stream(const Request& request,
                            const std::function<bool(int status, const Headers& headers)>& on_head,
                            const std::function<bool(absl::string_view data)>& on_body) {
  return Exchange(*impl_, request, &on_head, &on_body);
}

void Connection::Stop() { impl_->client->stop(); }

bool Connection::IsOpen() const { return impl_->client->is_socket_open() != 0; }

bool Connection::IdleUsable() const {
  const socket_t fd = impl_->client->socket();
  if (fd == INVALID_SOCKET) return true;  // not connected: the next request connects
  struct pollfd p = {fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace gangkeeper::httpc
