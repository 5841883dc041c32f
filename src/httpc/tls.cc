// gangkeeper httpc: PEM helpers (see tls.h).
#include "src/httpc/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace gangkeeper::httpc {

X509_STORE* NewCaStore(const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  for (int i = 0; i < 1000; ++i) {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  ERR_clear_error();  // the end of the bundle reads as an error
  BIO_free(bio);
  if (added == 0) {
    X509_STORE_free(store);
    return nullptr;
  }
  return store;
}

absl::Status CheckCaPem(const std::string& pem, const std::string& what) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (ca == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " is not a PEM certificate"));
  X509_free(ca);
  X509_STORE* store = NewCaStore(pem);
  if (store == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " holds no PEM certificate"));
  X509_STORE_free(store);
  return absl::OkStatus();
}

absl::Status CheckPemFile(const std::string& path, absl::string_view what, bool key) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, " \"", path, "\": cannot open it"));
  bool ok = false;
  if (key) {
    EVP_PKEY* k = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
    ok = k != nullptr;
    EVP_PKEY_free(k);
  } else {
    X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
    ok = x != nullptr;
    X509_free(x);
  }
  std::fclose(f);
  ERR_clear_error();
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\": not a PEM ", key ? "private key" : "certificate"));
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::httpc
