// gangkeeper httpc: what a Connection is made of (pool.cc builds it,
// connection.cc uses it). Private to src/httpc/.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>

#include "gangkeeper/httpc/pool.h"

namespace gangkeeper::httpc {

struct Connection::Impl {
  // Why OpenSSL refused the server's certificate in the last handshake
  // (X509_V_ERR_*), 0 when it did not; set by pool.cc's verify callback,
  // which finds it through the SSL_CTX. Declared before `client`, whose
  // SSL_CTX points at it, so that it outlives the context.
  std::atomic<long> verify_error{0};
  // The plain client, or the TLS one (SSLClient derives from ClientImpl).
  std::unique_ptr<httplib::ClientImpl> client;
};

}  // namespace gangkeeper::httpc
