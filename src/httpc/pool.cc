// gangkeeper httpc: the connection pool (see pool.h).
//
// The CA bundle given in memory goes to every new connection as its own
// X509_STORE (the connection's SSL_CTX takes it over; cpp-httplib 0.11
// would otherwise load trust anchors only from a path, and the root file
// system may be read-only). A client certificate given in memory is parsed
// once here; files are handed to cpp-httplib, which reads them per
// connection.
#include "gangkeeper/httpc/pool.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"
#include "src/httpc/connection_impl.h"
#include "src/httpc/tls.h"

namespace gangkeeper::httpc {

struct Pool::Tls {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  ~Tls() {
    if (cert != nullptr) X509_free(cert);
    if (key != nullptr) EVP_PKEY_free(key);
  }
};

namespace {

void SetTimeouts(httplib::ClientImpl& c, absl::Duration timeout, absl::Duration read_timeout) {
  const int64_t us = absl::ToInt64Microseconds(timeout);
  c.set_connection_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  c.set_write_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  const int64_t rus = absl::ToInt64Microseconds(read_timeout);
  c.set_read_timeout(static_cast<time_t>(rus / 1000000), static_cast<time_t>(rus % 1000000));
}

absl::Status CheckTls(const TlsOptions& tls) {
  if (tls.ca_pem.empty() == tls.ca_file.empty()) {
    return absl::InvalidArgumentError("TLS: give the CA as PEM text or as a file (one of the two)");
  }
  if (!tls.cert_pem.empty() && !tls.cert_file.empty()) {
    return absl::InvalidArgumentError("TLS: give the client certificate as PEM text or as files, not both");
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("TLS: give the client certificate file and its key file, or neither");
  }
  if (!tls.ca_pem.empty()) GK_RETURN_IF_ERROR(CheckCaPem(tls.ca_pem, "the CA"));
  if (!tls.ca_file.empty()) GK_RETURN_IF_ERROR(CheckPemFile(tls.ca_file, "the CA file", false));
  if (!tls.cert_file.empty()) {
    GK_RETURN_IF_ERROR(CheckPemFile(tls.cert_file, "the client certificate file", false));
    GK_RETURN_IF_ERROR(CheckPemFile(tls.key_file, "the client key file", true));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pool>> Pool::Create(PoolOptions options) {
  if (options.host.empty()) return absl::InvalidArgumentError("the host is empty");
  if (options.port < 1 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is not in 1..65535"));
  }
  if (options.timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("the timeout is not positive");
  std::unique_ptr<Tls> tls;
  if (options.tls.has_value()) {
    GK_RETURN_IF_ERROR(CheckTls(*options.tls));
    tls = std::make_unique<Tls>();
    if (!options.tls->cert_pem.empty() || !options.tls->key_pem.empty()) {
      const std::string& cert = options.tls->cert_pem;
      const std::string& key = options.tls->key_pem;
      BIO* cb = BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size()));
      tls->cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
      BIO_free(cb);
      BIO* kb = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
      tls->key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
      BIO_free(kb);
      ERR_clear_error();
      if (tls->cert == nullptr || tls->key == nullptr) {
        return absl::InvalidArgumentError("the client certificate or key is not PEM");
      }
    }
  }
  return std::unique_ptr<Pool>(new Pool(std::move(options), std::move(tls)));
}

Pool::Pool(PoolOptions options, std::unique_ptr<Tls> tls) : options_(std::move(options)), tls_(std::move(tls)) {}

Pool::~Pool() = default;

std::unique_ptr<Connection> Pool::NewConnection(absl::Duration read_timeout) {
  auto impl = std::make_unique<Connection::Impl>();
  if (options_.tls.has_value()) {
    const TlsOptions& t = *options_.tls;
    const std::string& name = t.server_name.empty() ? options_.host : t.server_name;
    std::unique_ptr<httplib::SSLClient> c;
    if (tls_->cert != nullptr) {
      c = std::make_unique<httplib::SSLClient>(name, options_.port, tls_->cert, tls_->key);
    } else if (!t.cert_file.empty()) {
      c = std::make_unique<httplib::SSLClient>(name, options_.port, t.cert_file, t.key_file);
    } else {
      c = std::make_unique<httplib::SSLClient>(name, options_.port);
    }
    if (name != options_.host) c->set_hostname_addr_map({{name, options_.host}});
    if (!t.ca_pem.empty()) {
      c->set_ca_cert_store(NewCaStore(t.ca_pem));
    } else {
      c->set_ca_cert_path(t.ca_file.c_str());
    }
    c->enable_server_certificate_verification(true);
    impl->tls = c.get();
    impl->client = std::move(c);
  } else {
    impl->client = std::make_unique<httplib::ClientImpl>(options_.host, options_.port);
  }
  SetTimeouts(*impl->client, options_.timeout, read_timeout);
  impl->client->set_keep_alive(true);
  // The request line, headers and body go out in separate writes (TLS
  // records): without TCP_NODELAY, Nagle's algorithm and the server's
  // delayed ACK add ~40 ms to every call.
  impl->client->set_tcp_nodelay(true);
  return std::make_unique<Connection>(std::move(impl));
}

std::unique_ptr<Connection> Pool::Open(absl::Duration read_timeout) { return NewConnection(read_timeout); }

std::unique_ptr<Connection> Pool::Borrow(bool* reused) {
  {
    absl::MutexLock lock(&mu_);
    while (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      if (c->IdleUsable()) {
        if (reused != nullptr) *reused = true;
        return c;
      }
    }
  }
  if (reused != nullptr) *reused = false;
  return NewConnection(options_.timeout);
}

void Pool::Return(std::unique_ptr<Connection> c) {
  if (c == nullptr || !c->IsOpen()) return;
  absl::MutexLock lock(&mu_);
  if (!shut_down_ && idle_.size() < options_.max_idle) idle_.push_back(std::move(c));
}

Response Pool::Send(const Request& request, bool resend_if_stale) {
  bool reused = false;
  std::unique_ptr<Connection> c = Borrow(&reused);
  const base::Clock& clock = options_.clock != nullptr ? *options_.clock : base::RealClock();
  const absl::Time sent = clock.Now();
  Response r = c->Send(request);
  // A pooled connection the server closed just as it was taken fails at
  // once; a timeout (as slow as options.timeout) is not this.
  if (resend_if_stale && reused && r.failure != Failure::kNone && r.status == 0 &&
      clock.Now() - sent < options_.timeout) {
    c = NewConnection(options_.timeout);
    r = c->Send(request);
    r.resent = true;
  }
  if (r.complete) Return(std::move(c));
  return r;
}

void Pool::Shutdown() {
  std::vector<std::unique_ptr<Connection>> closing;
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  closing.swap(idle_);
}

size_t Pool::IdleCountForTest() {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace gangkeeper::httpc
