// gangkeeper httpc: the connection pool (see pool.h).
//
// The server's certificate is checked by OpenSSL during the handshake,
// against the given CA only, and for the server's name: the connection's
// SSL_CTX gets the trust store, SSL_VERIFY_PEER and the name to match.
// cpp-httplib's own check is off: given a CA in memory (a trust store, no
// path) it also loads the system's default trust anchors into that store
// (SSL_CTX_set_default_verify_paths), so any public CA's certificate for
// the name would pass, and every new connection parsed those ~150
// certificates. The CA given in memory is parsed once, here, and shared
// by the connections' contexts; a CA file is read per connection (it may
// be rotated). A client certificate given in memory is parsed once here;
// files are handed to cpp-httplib, which reads them per connection.
#include "gangkeeper/httpc/pool.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"
#include "src/httpc/connection_impl.h"
#include "src/httpc/tls.h"

namespace gangkeeper::httpc {

struct Pool::Tls {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  X509_STORE* ca = nullptr;  // the CA given in memory, parsed; null for a CA file
  ~Tls() {
    if (cert != nullptr) X509_free(cert);
    if (key != nullptr) EVP_PKEY_free(key);
    if (ca != nullptr) X509_STORE_free(ca);
  }
};

namespace {

// The SSL_CTX slot holding the connection's Connection::Impl::verify_error.
int VerifyErrorSlot() {
  static const int slot = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return slot;
}

// OpenSSL's verify callback: its verdict stands; a refusal is noted for
// the connection (Exchange reports it as Failure::kTlsVerify).
int NoteVerifyError(int ok, X509_STORE_CTX* store) {
  if (ok == 1) return ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (ssl == nullptr) return ok;
  auto* slot = static_cast<std::atomic<long>*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), VerifyErrorSlot()));
  if (slot != nullptr) slot->store(X509_STORE_CTX_get_error(store));
  return ok;
}

// Sets up `ctx` to accept only a certificate chaining to the CA (`ca`, or
// the file `ca_file`) and naming `name` (a DNS name, or an IP address in
// its subjectAltName). Fails closed: a CA file that cannot be read, or a
// name OpenSSL cannot take, leaves the context with no trust anchor, so
// every handshake fails as unverified.
void VerifyServer(SSL_CTX* ctx, X509_STORE* ca, const std::string& ca_file, const std::string& name,
                  std::atomic<long>* verify_error) {
  SSL_CTX_set_ex_data(ctx, VerifyErrorSlot(), verify_error);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NoteVerifyError);
  bool ok = true;
  if (ca != nullptr) {
    X509_STORE_up_ref(ca);
    SSL_CTX_set_cert_store(ctx, ca);  // takes the reference
  } else {
    ok = SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) == 1;
  }
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  unsigned char ip[16];
  if (inet_pton(AF_INET, name.c_str(), ip) == 1 || inet_pton(AF_INET6, name.c_str(), ip) == 1) {
    ok = ok && X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) == 1;
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = ok && X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size()) == 1;
  }
  if (!ok) {
    ERR_clear_error();
    SSL_CTX_set_cert_store(ctx, X509_STORE_new());  // trusts nothing
  }
}

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
    if (!options.tls->ca_pem.empty()) {
      tls->ca = NewCaStore(options.tls->ca_pem);
      if (tls->ca == nullptr) return absl::InvalidArgumentError("TLS: the CA holds no PEM certificate");
    }
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
    // OpenSSL checks the certificate in the handshake (see the top of this
    // file).
    c->enable_server_certificate_verification(false);
    VerifyServer(c->ssl_context(), tls_->ca, t.ca_file, name, &impl->verify_error);
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
