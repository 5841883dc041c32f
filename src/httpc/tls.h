// gangkeeper httpc: PEM on OpenSSL for the pool (pool.cc, connection.cc):
// trust anchors from memory, a client certificate parsed once, and the
// checks Pool::Create makes. Thread-compatible.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <string>

#include "absl/status/status.h"
#include "gangkeeper/httpc/pool.h"  // CheckPemFile

namespace gangkeeper::httpc {

// Every certificate of a PEM bundle in a new X509_STORE (nullptr if none);
// the caller owns it.
X509_STORE* NewCaStore(const std::string& pem);

// InvalidArgument unless `pem` starts with a certificate and `NewCaStore`
// finds one; `what` names it in the message.
absl::Status CheckCaPem(const std::string& pem, const std::string& what);

}  // namespace gangkeeper::httpc
