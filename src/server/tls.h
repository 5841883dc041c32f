// gangkeeper: TLS policy and hot certificate reload for the listeners.
//
// CertificateSource owns the serving certificate and key loaded from PEM
// files and hands the current pair to each new handshake through OpenSSL's
// certificate callback, so a reload affects new connections only and open
// keep-alive connections keep their session. Reload() re-reads the files
// and swaps only when the new pair is valid (parses, key matches, not
// expired); otherwise the old pair keeps serving. Thread-safe.
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::server {

// A parsed certificate chain with its key. Immutable once built.
class CertificatePair {
 public:
  ~CertificatePair();
  CertificatePair(const CertificatePair&) = delete;
  CertificatePair& operator=(const CertificatePair&) = delete;

  // Parses PEM text: the leaf first, then any intermediates; the key in any
  // PEM form OpenSSL reads (PKCS#8, SEC1, PKCS#1). InvalidArgument when the
  // text does not parse, the key does not match, or the leaf has expired.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<const CertificatePair>> FromPem(
      const std::string& cert_pem, const std::string& key_pem, absl::Time now);

  X509* leaf() const { return leaf_; }
  EVP_PKEY* key() const { return key_; }
  STACK_OF(X509) * chain() const { return chain_; }
  absl::Time not_after() const { return not_after_; }
  // The leaf's serial number in hex (for logs and tests).
  const std::string& serial() const { return serial_; }

 private:
  CertificatePair() = default;
  X509* leaf_ = nullptr;
  EVP_PKEY* key_ = nullptr;
  STACK_OF(X509)* chain_ = nullptr;
  absl::Time not_after_;
  std::string serial_;
};

class CertificateSource {
 public:
  // Loads the pair once; fails like CertificatePair::FromPem (expiry checked
  // against `clock`, which must outlive the source) or when a file cannot be
  // read.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<CertificateSource>> Create(std::string cert_file,
                                                                                 std::string key_file,
                                                                                 const base::Clock* clock);

  // Re-reads the files if their size, mtime or inode changed since the last
  // look. Returns OK when nothing changed or the new pair was installed, the
  // error (and keeps the old pair) when the new files are broken. Sets
  // *changed when a new pair was installed.
  [[nodiscard]] absl::Status Reload(bool* changed);

  std::shared_ptr<const CertificatePair> current() const;

  // Installs this source's certificate selection into `ctx` (SSL_CTX_set_cert_cb).
  // The source must outlive every SSL made from `ctx`.
  void Attach(SSL_CTX* ctx);

 private:
  CertificateSource(std::string cert_file, std::string key_file, const base::Clock* clock)
      : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), clock_(clock) {}
  [[nodiscard]] absl::Status LoadIfChanged(bool* changed);

  const std::string cert_file_;
  const std::string key_file_;
  const base::Clock* const clock_;
  mutable std::mutex mu_;
  std::shared_ptr<const CertificatePair> current_;  // guarded by mu_
  std::string stamp_;                               // guarded by mu_: file identity at last load
};

// Applies gangkeeper's TLS policy to a server context: TLS 1.2-1.3 only;
// ECDHE with AES-GCM or ChaCha20-Poly1305 only; no compression; no
// renegotiation; server cipher preference; ALPN http/1.1 only. When
// `client_ca_file` is non-empty, clients must present a certificate signed
// by it. Returns InvalidArgument when the CA file does not load.
[[nodiscard]] absl::Status ApplyTlsPolicy(SSL_CTX* ctx, const std::string& client_ca_file);

// The cipher lists the policy installs (exposed for tests).
extern const char kTls12Ciphers[];
extern const char kTls13Ciphersuites[];

// The socket of the TLS connection the calling worker thread serves (-1 if
// none): set at each handshake by the policy's info callback.
int CurrentConnectionFd();

// The last OpenSSL error as text, and clears the queue.
std::string TakeOpenSslError();

}  // namespace gangkeeper::server
