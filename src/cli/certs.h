// gangkeeper CLI: certificate generation for `gangkeeper certs` and `--dev`.
//
// Makes (or reuses) a CA and issues an ECDSA P-256 serving certificate for
// the webhook Service, written atomically with 0600 keys:
//   DIR/ca.crt DIR/ca.key   the CA (10 years), reused when present and valid
//   DIR/tls.crt DIR/tls.key the serving certificate (`validity`) + key
// The names match a kubernetes.io/tls Secret with ca.crt, so the same files
// can be mounted as a Secret. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gangkeeper::cli {

struct CertOptions {
  std::string out_dir = "certs/dev";
  std::string service = "gangkeeper";
  std::string namespace_name = "gangkeeper-system";
  absl::Duration validity = absl::Hours(24 * 365);
  // Always make a new CA, even when DIR holds a valid one.
  bool new_ca = false;
};

struct CertResult {
  std::string ca_file, cert_file, key_file;
  std::vector<std::string> sans;  // "DNS:…" / "IP:…"
  bool ca_created = false;
  // Base64 of ca.crt (PEM), for a webhook configuration's caBundle.
  std::string ca_bundle_base64;
};

// The SANs for a Service: NAME, NAME.NS, NAME.NS.svc,
// NAME.NS.svc.cluster.local, localhost, 127.0.0.1.
std::vector<std::string> ServiceSans(const std::string& service, const std::string& namespace_name);

// Creates DIR (0700) if needed, then the CA and serving certificate.
// InvalidArgument for a bad service/namespace name; Internal for OpenSSL or
// file-system failures, naming the file.
[[nodiscard]] absl::StatusOr<CertResult> GenerateCertificates(const CertOptions& options);

// True when DIR/tls.crt and DIR/tls.key exist, match, and stay valid for at
// least `min_remaining`.
bool ServingCertificateUsable(const std::string& dir, absl::Duration min_remaining);

// Writes `data` to `path` atomically (temp file in the same directory,
// fsync, rename, fsync of the directory) with permission `mode`.
[[nodiscard]] absl::Status WriteFileAtomically(const std::string& path, const std::string& data, int mode);

}  // namespace gangkeeper::cli
