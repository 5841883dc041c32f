// gangkeeper CLI: certificate generation with OpenSSL 3 (see certs.h).
#include "src/cli/certs.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::cli {
namespace {

struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioDeleter {
  void operator()(BIO* p) const { BIO_free(p); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

std::string OpenSslError() {
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

absl::Status SslFailure(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslError()));
}

// A DNS-1123 label: lower-case alphanumerics and '-', 1-63 characters.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return SslFailure("generating an ECDSA P-256 key");
  return key;
}

absl::Status SetSerialAndValidity(X509* cert, absl::Duration validity) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return SslFailure("random serial");
  bytes[0] &= 0x7f;  // positive
  bytes[0] |= 0x01;  // never zero, full length
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(bytes, sizeof(bytes), nullptr), BN_free);
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) return SslFailure("serial");
  // Start an hour early to tolerate clock skew between machines.
  const int64_t now = absl::ToUnixSeconds(base::RealClock().Now());
  if (ASN1_TIME_set(X509_getm_notBefore(cert), static_cast<time_t>(now - 3600)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert), static_cast<time_t>(now + absl::ToInt64Seconds(validity))) == nullptr) {
    return SslFailure("validity");
  }
  return absl::OkStatus();
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return SslFailure(absl::StrCat("extension ", OBJ_nid2sn(nid), "=", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return SslFailure("adding an extension");
  return absl::OkStatus();
}

absl::StatusOr<X509Ptr> MakeCaCert(EVP_PKEY* key) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return SslFailure("new CA certificate");
  if (absl::Status s = SetSerialAndValidity(cert.get(), absl::Hours(24 * 3650)); !s.ok()) return s;
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("gangkeeper-ca"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("gangkeeper"), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  for (auto [nid, value] : {std::pair<int, std::string>{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            {NID_key_usage, "critical,keyCertSign,cRLSign"},
                            {NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(cert.get(), cert.get(), nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), key, EVP_sha256()) == 0) return SslFailure("signing the CA certificate");
  return cert;
}

absl::StatusOr<X509Ptr> MakeServingCert(EVP_PKEY* key, X509* ca, EVP_PKEY* ca_key, const std::string& common_name,
                                        const std::vector<std::string>& sans, absl::Duration validity) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return SslFailure("new serving certificate");
  if (absl::Status s = SetSerialAndValidity(cert.get(), validity); !s.ok()) return s;
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca));
  X509_set_pubkey(cert.get(), key);
  for (auto [nid, value] : {std::pair<int, std::string>{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature"},
                            {NID_ext_key_usage, "serverAuth"},
                            {NID_subject_key_identifier, "hash"},
                            {NID_authority_key_identifier, "keyid:always"},
                            {NID_subject_alt_name, absl::StrJoin(sans, ",")}}) {
    if (absl::Status s = AddExtension(cert.get(), ca, nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), ca_key, EVP_sha256()) == 0) return SslFailure("signing the serving certificate");
  return cert;
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

X509Ptr ParseCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

KeyPtr ParseKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return KeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

// True when `cert` stays valid for at least `min_remaining`.
bool ValidFor(X509* cert, absl::Duration min_remaining) {
  const time_t horizon = static_cast<time_t>(absl::ToUnixSeconds(base::RealClock().Now() + min_remaining));
  return X509_cmp_time(X509_get0_notAfter(cert), const_cast<time_t*>(&horizon)) > 0;
}

absl::Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", dir, ": ", std::strerror(errno)));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::InternalError(absl::StrCat("fsync ", dir, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& data, int mode) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::InternalError(absl::StrCat("create ", tmp, ": ", std::strerror(errno)));
  ::fchmod(fd, static_cast<mode_t>(mode));  // umask must not widen or narrow it
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("write ", tmp, ": ", err));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("fsync ", tmp, ": ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("rename ", tmp, " -> ", path, ": ", err));
  }
  return FsyncDir(dir);
}

std::vector<std::string> ServiceSans(const std::string& service, const std::string& ns) {
  return {absl::StrCat("DNS:", service),
          absl::StrCat("DNS:", service, ".", ns),
          absl::StrCat("DNS:", service, ".", ns, ".svc"),
          absl::StrCat("DNS:", service, ".", ns, ".svc.cluster.local"),
          "DNS:localhost",
          "IP:127.0.0.1"};
}

bool ServingCertificateUsable(const std::string& dir, absl::Duration min_remaining) {
  absl::StatusOr<std::string> cert_pem = ReadFile(absl::StrCat(dir, "/tls.crt"));
  absl::StatusOr<std::string> key_pem = ReadFile(absl::StrCat(dir, "/tls.key"));
  if (!cert_pem.ok() || !key_pem.ok()) return false;
  X509Ptr cert = ParseCert(*cert_pem);
  KeyPtr key = ParseKey(*key_pem);
  bool ok = cert && key && X509_check_private_key(cert.get(), key.get()) == 1 && ValidFor(cert.get(), min_remaining);
  ERR_clear_error();
  return ok;
}

absl::StatusOr<CertResult> GenerateCertificates(const CertOptions& options) {
  if (!IsDnsLabel(options.service)) {
    return absl::InvalidArgumentError(absl::StrCat("--service \"", options.service,
                                                   "\": must be a DNS label (lower-case letters, digits, '-')"));
  }
  if (!IsDnsLabel(options.namespace_name)) {
    return absl::InvalidArgumentError(absl::StrCat("--namespace \"", options.namespace_name,
                                                   "\": must be a DNS label (lower-case letters, digits, '-')"));
  }
  if (options.validity < absl::Hours(1)) {
    return absl::InvalidArgumentError("--validity must be at least 1h");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("--out ", options.out_dir, ": ", ec.message()));
  ::chmod(options.out_dir.c_str(), 0700);

  CertResult result;
  result.ca_file = absl::StrCat(options.out_dir, "/ca.crt");
  result.cert_file = absl::StrCat(options.out_dir, "/tls.crt");
  result.key_file = absl::StrCat(options.out_dir, "/tls.key");
  const std::string ca_key_file = absl::StrCat(options.out_dir, "/ca.key");

  // Reuse a CA that stays valid for longer than the new serving certificate
  // (rotation under an unchanged CA keeps every caBundle valid).
  X509Ptr ca;
  KeyPtr ca_key;
  if (!options.new_ca) {
    absl::StatusOr<std::string> ca_pem = ReadFile(result.ca_file);
    absl::StatusOr<std::string> ca_key_pem = ReadFile(ca_key_file);
    if (ca_pem.ok() && ca_key_pem.ok()) {
      ca = ParseCert(*ca_pem);
      ca_key = ParseKey(*ca_key_pem);
      if (!ca || !ca_key || X509_check_private_key(ca.get(), ca_key.get()) != 1 ||
          !ValidFor(ca.get(), options.validity)) {
        ca.reset();
        ca_key.reset();
      }
      ERR_clear_error();
    }
  }
  if (!ca) {
    absl::StatusOr<KeyPtr> key = NewKey();
    if (!key.ok()) return key.status();
    absl::StatusOr<X509Ptr> cert = MakeCaCert(key->get());
    if (!cert.ok()) return cert.status();
    ca = *std::move(cert);
    ca_key = *std::move(key);
    result.ca_created = true;
    if (absl::Status s = WriteFileAtomically(ca_key_file, KeyPem(ca_key.get()), 0600); !s.ok()) return s;
    if (absl::Status s = WriteFileAtomically(result.ca_file, CertPem(ca.get()), 0644); !s.ok()) return s;
  }

  result.sans = ServiceSans(options.service, options.namespace_name);
  absl::StatusOr<KeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> cert =
      MakeServingCert(key->get(), ca.get(), ca_key.get(),
                      absl::StrCat(options.service, ".", options.namespace_name, ".svc"), result.sans,
                      options.validity);
  if (!cert.ok()) return cert.status();
  // Key first: a reader that sees the new certificate must find its key.
  if (absl::Status s = WriteFileAtomically(result.key_file, KeyPem(key->get()), 0600); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(result.cert_file, CertPem(cert->get()), 0644); !s.ok()) return s;
  result.ca_bundle_base64 = absl::Base64Escape(CertPem(ca.get()));
  return result;
}

}  // namespace gangkeeper::cli
