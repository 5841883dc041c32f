// gangkeeper tests: raw OpenSSL client (see tls_client.h).
#include "test/testing/tls_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gangkeeper::testing {
namespace {

std::string SslErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

int ConnectTcp(int port, absl::Duration timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv;
  tv.tv_sec = absl::ToInt64Seconds(timeout);
  tv.tv_usec = absl::ToInt64Microseconds(timeout) % 1000000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsConnection>> TlsConnection::Connect(int port, const TlsClientOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);  // a server that hangs up must fail a write, not kill the test
  std::unique_ptr<TlsConnection> c(new TlsConnection());
  ERR_clear_error();
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  if (o.security_level >= 0) SSL_CTX_set_security_level(c->ctx_, o.security_level);
  if (o.min_version != 0) SSL_CTX_set_min_proto_version(c->ctx_, o.min_version);
  if (o.max_version != 0) SSL_CTX_set_max_proto_version(c->ctx_, o.max_version);
  if (!o.cipher_list.empty() && SSL_CTX_set_cipher_list(c->ctx_, o.cipher_list.c_str()) != 1) {
    return absl::InvalidArgumentError("client cipher list rejected by OpenSSL: " + SslErrors());
  }
  if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(c->ctx_, o.ciphersuites.c_str()) != 1) {
    return absl::InvalidArgumentError("client ciphersuites rejected by OpenSSL: " + SslErrors());
  }
  if (o.verify) {
    if (SSL_CTX_load_verify_locations(c->ctx_, o.ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError("cannot load CA " + o.ca_file + ": " + SslErrors());
    }
    SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c->ctx_, o.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(c->ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return absl::InvalidArgumentError("cannot load client certificate: " + SslErrors());
    }
  }
  if (!o.alpn.empty()) {
    std::string wire;
    for (const std::string& p : o.alpn) {
      wire += static_cast<char>(p.size());
      wire += p;
    }
    SSL_CTX_set_alpn_protos(c->ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                            static_cast<unsigned>(wire.size()));
  }
  c->fd_ = ConnectTcp(port, o.io_timeout);
  if (c->fd_ < 0) return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ", std::strerror(errno)));
  c->ssl_ = SSL_new(c->ctx_);
  SSL_set_fd(c->ssl_, c->fd_);
  SSL_set_tlsext_host_name(c->ssl_, o.server_name.c_str());
  if (o.verify) SSL_set1_host(c->ssl_, o.server_name.c_str());
  if (SSL_connect(c->ssl_) != 1) {
    return absl::UnavailableError("TLS handshake failed: " + SslErrors());
  }
  return c;
}

TlsConnection::~TlsConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

absl::Status TlsConnection::Write(const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
    if (n <= 0) return absl::UnavailableError("write failed: " + SslErrors());
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<HttpReply> TlsConnection::ReadResponse() {
  char buf[16384];
  size_t header_end;
  while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return absl::UnavailableError("connection closed before a response: " + SslErrors());
    buffer_.append(buf, static_cast<size_t>(n));
  }
  HttpReply reply;
  reply.headers = buffer_.substr(0, header_end);
  if (reply.headers.size() < 12 || !absl::SimpleAtoi(reply.headers.substr(9, 3), &reply.status)) {
    return absl::DataLossError("bad status line: " + reply.headers.substr(0, 40));
  }
  size_t length = 0;
  std::string lower = absl::AsciiStrToLower(reply.headers);
  size_t cl = lower.find("content-length:");
  if (cl != std::string::npos) {
    size_t eol = lower.find("\r\n", cl);
    std::string value(absl::StripAsciiWhitespace(lower.substr(cl + 15, eol - cl - 15)));
    if (!absl::SimpleAtoi(value, &length)) return absl::DataLossError("bad content-length");
  }
  while (buffer_.size() < header_end + 4 + length) {
    int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return absl::UnavailableError("connection closed inside a body");
    buffer_.append(buf, static_cast<size_t>(n));
  }
  reply.body = buffer_.substr(header_end + 4, length);
  buffer_.erase(0, header_end + 4 + length);
  return reply;
}

absl::StatusOr<HttpReply> TlsConnection::Request(const std::string& method, const std::string& path,
                                                 const std::string& body, const std::string& extra_headers) {
  std::string req = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: localhost\r\n", extra_headers);
  if (!body.empty() || method == "POST" || method == "PUT") {
    absl::StrAppend(&req, "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&req, "\r\n", body);
  absl::Status w = Write(req);
  if (!w.ok()) return w;
  return ReadResponse();
}

bool TlsConnection::PeerClosesWithin(absl::Duration timeout) {
  struct timeval tv;
  tv.tv_sec = absl::ToInt64Seconds(timeout);
  tv.tv_usec = absl::ToInt64Microseconds(timeout) % 1000000;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  while (true) {
    int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n > 0) continue;  // drain anything the server still sends
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_ZERO_RETURN) return true;
    if (err == SSL_ERROR_SYSCALL) return errno != EAGAIN && errno != EWOULDBLOCK;
    if (err == SSL_ERROR_WANT_READ) return false;
    return true;  // SSL_ERROR_SSL etc.: the connection is gone
  }
}

std::string TlsConnection::PeerSerial() const {
  X509* peer = SSL_get1_peer_certificate(ssl_);
  if (peer == nullptr) return "";
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(peer), nullptr);
  char* hex = BN_bn2hex(bn);
  std::string out = hex;
  OPENSSL_free(hex);
  BN_free(bn);
  X509_free(peer);
  return out;
}

std::string TlsConnection::Protocol() const { return SSL_get_version(ssl_); }
std::string TlsConnection::Cipher() const { return SSL_get_cipher_name(ssl_); }
std::string TlsConnection::AlpnSelected() const {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl_, &data, &len);
  return std::string(reinterpret_cast<const char*>(data), len);
}

absl::StatusOr<std::string> PlainExchange(int port, const std::string& data, absl::Duration timeout) {
  int fd = ConnectTcp(port, timeout);
  if (fd < 0) return absl::UnavailableError("connect failed");
  ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
  std::string got;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ::close(fd);
      return absl::DeadlineExceededError("server kept the plain connection open");
    }
    break;  // closed (0) or reset
  }
  ::close(fd);
  return got;
}

}  // namespace gangkeeper::testing
