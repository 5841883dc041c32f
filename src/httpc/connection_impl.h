// gangkeeper httpc: what a Connection is made of (pool.cc builds it,
// connection.cc uses it). Private to src/httpc/.
#pragma once

#include <httplib.h>

#include <memory>

#include "gangkeeper/httpc/pool.h"

namespace gangkeeper::httpc {

struct Connection::Impl {
  // The plain client, or the TLS one (SSLClient derives from ClientImpl).
  std::unique_ptr<httplib::ClientImpl> client;
  httplib::SSLClient* tls = nullptr;  // `client` when it is TLS
};

}  // namespace gangkeeper::httpc
