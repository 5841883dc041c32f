// gangkeeper: TLS policy and certificate reload (see tls.h).
#include "src/server/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::server {

const char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
const char kTls13Ciphersuites[] = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

namespace {

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Identity of a file for change detection: device, inode, size, mtime.
std::string FileStamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec);
}

absl::Time Asn1ToTime(const ASN1_TIME* t) {
  struct tm tm;
  std::memset(&tm, 0, sizeof(tm));
  if (ASN1_TIME_to_tm(t, &tm) != 1) return absl::InfinitePast();
  return absl::FromTM(tm, absl::UTCTimeZone());
}

std::string SerialHex(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), nullptr);
  if (bn == nullptr) return "";
  char* hex = BN_bn2hex(bn);
  std::string out = hex != nullptr ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

int SelectCertificate(SSL* ssl, void* arg) {
  auto* source = static_cast<CertificateSource*>(arg);
  std::shared_ptr<const CertificatePair> pair = source->current();
  if (!pair) return 0;
  if (SSL_use_certificate(ssl, pair->leaf()) != 1) return 0;
  if (SSL_use_PrivateKey(ssl, pair->key()) != 1) return 0;
  if (pair->chain() != nullptr && SSL_set1_chain(ssl, pair->chain()) != 1) return 0;
  return 1;
}

int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) ==
      OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  // No common protocol (e.g. h2 only): continue without ALPN.
  return SSL_TLSEXT_ERR_NOACK;
}

// The socket of the connection this worker thread is serving. cpp-httplib
// runs a connection's handshake and all its requests on one pool thread.
thread_local int tls_connection_fd = -1;

void TrackConnection(const SSL* ssl, int where, int) {
  if ((where & SSL_CB_HANDSHAKE_START) != 0) tls_connection_fd = SSL_get_fd(ssl);
}

}  // namespace

int CurrentConnectionFd() { return tls_connection_fd; }

std::string TakeOpenSslError() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

CertificatePair::~CertificatePair() {
  X509_free(leaf_);
  EVP_PKEY_free(key_);
  if (chain_ != nullptr) sk_X509_pop_free(chain_, X509_free);
}

absl::StatusOr<std::shared_ptr<const CertificatePair>> CertificatePair::FromPem(const std::string& cert_pem,
                                                                               const std::string& key_pem,
                                                                               absl::Time now) {
  ERR_clear_error();
  std::shared_ptr<CertificatePair> pair(new CertificatePair());
  BioPtr cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), BIO_free);
  pair->leaf_ = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (pair->leaf_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate: no PEM certificate found (", TakeOpenSslError(), ")"));
  }
  pair->chain_ = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain_, extra);
  }
  ERR_clear_error();  // the loop above ends on an expected "no start line"
  BioPtr key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  pair->key_ = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (pair->key_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("private key: no PEM private key found (", TakeOpenSslError(), ")"));
  }
  if (X509_check_private_key(pair->leaf_, pair->key_) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("private key does not match the certificate's public key");
  }
  pair->not_after_ = Asn1ToTime(X509_get0_notAfter(pair->leaf_));
  if (pair->not_after_ <= now) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate expired at ", absl::FormatTime(pair->not_after_, absl::UTCTimeZone())));
  }
  pair->serial_ = SerialHex(pair->leaf_);
  return std::shared_ptr<const CertificatePair>(std::move(pair));
}

absl::StatusOr<std::unique_ptr<CertificateSource>> CertificateSource::Create(std::string cert_file,
                                                                             std::string key_file,
                                                                             const base::Clock* clock) {
  if (cert_file.empty() || key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key are both required (or use --dev)");
  }
  std::unique_ptr<CertificateSource> source(
      new CertificateSource(std::move(cert_file), std::move(key_file), clock));
  bool changed = false;
  absl::Status s = source->LoadIfChanged(&changed);
  if (!s.ok()) return s;
  return source;
}

absl::Status CertificateSource::LoadIfChanged(bool* changed) {
  *changed = false;
  std::string stamp = absl::StrCat(FileStamp(cert_file_), "|", FileStamp(key_file_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stamp == stamp_ && current_) return absl::OkStatus();
  }
  absl::StatusOr<std::string> cert = ReadFile(cert_file_);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(key_file_);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::shared_ptr<const CertificatePair>> pair =
      CertificatePair::FromPem(*cert, *key, clock_->Now());
  std::lock_guard<std::mutex> lock(mu_);
  stamp_ = stamp;  // do not retry a broken pair until the files change again
  if (!pair.ok()) {
    return absl::Status(pair.status().code(),
                        absl::StrCat(cert_file_, " + ", key_file_, ": ", pair.status().message()));
  }
  current_ = *std::move(pair);
  *changed = true;
  return absl::OkStatus();
}

absl::Status CertificateSource::Reload(bool* changed) { return LoadIfChanged(changed); }

std::shared_ptr<const CertificatePair> CertificateSource::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void CertificateSource::Attach(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &SelectCertificate, this); }

absl::Status ApplyTlsPolicy(SSL_CTX* ctx, const std::string& client_ca_file) {
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1) {
    return absl::InternalError(absl::StrCat("TLS versions: ", TakeOpenSslError()));
  }
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 || SSL_CTX_set_ciphersuites(ctx, kTls13Ciphersuites) != 1) {
    return absl::InternalError(absl::StrCat("TLS ciphers: ", TakeOpenSslError()));
  }
  if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256:P-384") != 1) {
    return absl::InternalError(absl::StrCat("TLS groups: ", TakeOpenSslError()));
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1);
  SSL_CTX_clear_options(ctx, SSL_OP_ALLOW_CLIENT_RENEGOTIATION | SSL_OP_LEGACY_SERVER_CONNECT);
  SSL_CTX_set_alpn_select_cb(ctx, &SelectAlpn, nullptr);
  SSL_CTX_set_info_callback(ctx, &TrackConnection);
  static const unsigned char kSessionContext[] = "gangkeeper";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  if (!client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, client_ca_file.c_str(), nullptr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--client-ca ", client_ca_file, ": cannot load CA certificates (", TakeOpenSslError(), ")"));
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(client_ca_file.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::server
