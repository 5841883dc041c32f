// gangkeeper tests: a raw OpenSSL client for the TLS listeners.
//
// Gives tests full control: protocol versions, cipher lists, client
// certificates, partial writes (slow clients), and the server certificate's
// serial. Blocking sockets with receive/send timeouts; loopback only.
// Thread-compatible (one connection per thread).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gangkeeper::testing {

struct TlsClientOptions {
  std::string ca_file;  // verify the server against this CA (required unless verify=false)
  bool verify = true;
  std::string server_name = "localhost";
  int min_version = 0;  // TLS1_2_VERSION, ...; 0 = library default
  int max_version = 0;
  std::string cipher_list;   // TLS <= 1.2
  std::string ciphersuites;  // TLS 1.3
  int security_level = -1;   // OpenSSL security level (0 allows TLS 1.1 to be offered)
  std::string cert_file, key_file;  // client certificate
  std::vector<std::string> alpn;    // e.g. {"h2"}
  absl::Duration io_timeout = absl::Seconds(10);
};

struct HttpReply {
  int status = 0;
  std::string headers;  // raw header block
  std::string body;
};

class TlsConnection {
 public:
  // TCP connect to 127.0.0.1:port and TLS handshake. Unavailable with the
  // OpenSSL error when the handshake fails.
  static absl::StatusOr<std::unique_ptr<TlsConnection>> Connect(int port, const TlsClientOptions& options);
  ~TlsConnection();

  absl::Status Write(const std::string& data);
  // Reads one HTTP/1.1 response with a Content-Length body.
  absl::StatusOr<HttpReply> ReadResponse();
  // Write a request and read the answer on this (keep-alive) connection.
  absl::StatusOr<HttpReply> Request(const std::string& method, const std::string& path, const std::string& body = "",
                                    const std::string& extra_headers = "");
  // True when the server closes the connection (or fails it) within `timeout`.
  bool PeerClosesWithin(absl::Duration timeout);

  // The socket and the TLS session, for a client that drives many
  // connections from one event loop (test/bench/paced_load.cc makes them
  // non-blocking after the handshake).
  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }

  std::string PeerSerial() const;
  std::string Protocol() const;
  std::string Cipher() const;
  std::string AlpnSelected() const;

 private:
  TlsConnection() = default;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buffer_;
};

// Opens a plain TCP connection, writes `data`, and returns what the server
// sent back before closing (bounded by `timeout`).
absl::StatusOr<std::string> PlainExchange(int port, const std::string& data, absl::Duration timeout);

}  // namespace gangkeeper::testing
