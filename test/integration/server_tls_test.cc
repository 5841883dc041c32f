// Integration tests: the real gangkeeper binary on loopback, spoken to over
// real TLS with certificate verification.
#include <openssl/ssl.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::ServerProcess;
using ::gangkeeper::testing::TempDir;
using ::gangkeeper::testing::TlsClientOptions;
using ::gangkeeper::testing::TlsConnection;
using ::testing::HasSubstr;
using ::testing::Not;

// Makes a CA + serving certificate with `gangkeeper certs` into `dir`.
void MakeCerts(const std::string& dir, bool new_ca = false) {
  std::vector<std::string> args = {testing::GangkeeperBinary(), "certs", "--out", dir};
  if (new_ca) args.push_back("--new-ca");
  auto r = RunCommand(args, absl::Seconds(30));
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
}

class ServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeCerts(certs_dir()); }

  std::string certs_dir() const { return dir_.File("certs"); }
  std::string ca() const { return dir_.File("certs/ca.crt"); }

  std::vector<std::string> BaseArgs() const {
    return {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
            "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data")};
  }

  std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = BaseArgs();
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = ServerProcess::Start(args, dir_.path());
    EXPECT_THAT(p, IsOk());
    return p.ok() ? *std::move(p) : nullptr;
  }

  TlsClientOptions Client() const {
    TlsClientOptions o;
    o.ca_file = ca();
    return o;
  }

  TempDir dir_;
};

TEST_F(ServerTlsTest, HealthReadinessAndUnknownPathsOnBothListeners) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (int port : {server->webhook_port(), server->api_port()}) {
    auto c = TlsConnection::Connect(port, Client());
    ASSERT_THAT(c, IsOk());
    auto health = (*c)->Request("GET", "/healthz");
    ASSERT_THAT(health, IsOk());
    EXPECT_EQ(health->status, 200);
    EXPECT_THAT(health->body, HasSubstr("\"ok\""));
    auto ready = (*c)->Request("GET", "/readyz");
    ASSERT_THAT(ready, IsOk());
    EXPECT_EQ(ready->status, 200);
    auto missing = (*c)->Request("GET", "/no/such/thing");
    ASSERT_THAT(missing, IsOk());
    EXPECT_EQ(missing->status, 404);
    EXPECT_THAT(missing->headers, HasSubstr("application/json"));
    EXPECT_THAT(missing->body, HasSubstr(R"("code":"NotFound")"));
    EXPECT_THAT(missing->body, HasSubstr("/no/such/thing"));
  }
}

TEST_F(ServerTlsTest, NegotiatesModernTlsAndHttp11Alpn) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  TlsClientOptions o = Client();
  o.alpn = {"h2", "http/1.1"};
  auto c = TlsConnection::Connect(server->webhook_port(), o);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ((*c)->Protocol(), "TLSv1.3");
  EXPECT_EQ((*c)->AlpnSelected(), "http/1.1");

  TlsClientOptions tls12 = Client();
  tls12.max_version = TLS1_2_VERSION;
  auto c12 = TlsConnection::Connect(server->webhook_port(), tls12);
  ASSERT_THAT(c12, IsOk());
  EXPECT_EQ((*c12)->Protocol(), "TLSv1.2");
  EXPECT_THAT((*c12)->Cipher(), HasSubstr("ECDHE-ECDSA"));
  EXPECT_THAT((*c12)->Cipher(), HasSubstr("GCM"));
}

TEST_F(ServerTlsTest, RefusesTls11AndWeakCiphers) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  TlsClientOptions tls11 = Client();
  tls11.min_version = TLS1_VERSION;
  tls11.max_version = TLS1_1_VERSION;
  tls11.security_level = 0;
  tls11.cipher_list = "ALL:@SECLEVEL=0";
  EXPECT_THAT(TlsConnection::Connect(server->webhook_port(), tls11), Not(IsOk()));

  TlsClientOptions cbc = Client();
  cbc.max_version = TLS1_2_VERSION;
  cbc.cipher_list = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA384:AES128-SHA";
  EXPECT_THAT(TlsConnection::Connect(server->webhook_port(), cbc), Not(IsOk()));

  // The same client with an AEAD suite gets through, so the refusal above is
  // about the cipher, not the client.
  cbc.cipher_list = "ECDHE-ECDSA-CHACHA20-POLY1305";
  auto ok = TlsConnection::Connect(server->webhook_port(), cbc);
  ASSERT_THAT(ok, IsOk());
  EXPECT_EQ((*ok)->Cipher(), "ECDHE-ECDSA-CHACHA20-POLY1305");
}

TEST_F(ServerTlsTest, BodyOver4MiBGets413AndServerKeepsServing) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  std::string big((4 << 20) + 1, 'x');
  auto r = (*c)->Request("POST", "/mutate", big);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 413);
  EXPECT_THAT(r->body, HasSubstr("too large"));
  auto c2 = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c2, IsOk());
  auto health = (*c2)->Request("GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

// Resident memory of a process, in KiB (0 when unknown).
int64_t RssKib(int pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// #20: a compressed body is refused without being inflated (httplib, built
// with zlib and brotli, would inflate it past every limit), on both
// listeners and before authentication; its bytes are read as they came and
// dropped, so the client gets the answer and the connection serves on.
TEST_F(ServerTlsTest, CompressedBodiesAreRefusedWithoutInflatingOnBothListeners) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  // 1 GiB of zeros, about 1 MB on the wire.
  const std::string bomb_file = dir_.File("bomb.gz");
  auto made =
      RunCommand({"/bin/sh", "-c", "head -c 1073741824 /dev/zero | gzip -c > " + bomb_file}, absl::Seconds(120));
  ASSERT_THAT(made, IsOk());
  ASSERT_EQ(made->exit_code, 0) << made->err;
  std::ifstream in(bomb_file, std::ios::binary);
  const std::string bomb((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bomb.size(), 100'000u);
  ASSERT_LT(bomb.size(), 2'000'000u);
  const int64_t rss_before = RssKib(server->pid());
  struct Case {
    int port;
    const char* method;
    const char* path;
    const char* encoding;
  };
  for (const Case& k : {Case{server->webhook_port(), "POST", "/mutate", "gzip"},
                        Case{server->webhook_port(), "POST", "/validate", "br"},
                        Case{server->api_port(), "PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a", "gzip"},
                        Case{server->api_port(), "POST", "/v1/apply", "deflate"}}) {
    auto c = TlsConnection::Connect(k.port, Client());
    ASSERT_THAT(c, IsOk());
    auto r = (*c)->Request(k.method, k.path, bomb,
                           absl::StrCat("Content-Type: application/json\r\nContent-Encoding: ", k.encoding, "\r\n"));
    ASSERT_THAT(r, IsOk()) << k.path;
    EXPECT_EQ(r->status, 415) << k.path;
    EXPECT_THAT(r->body, HasSubstr("Content-Encoding"));
    EXPECT_THAT(r->body, HasSubstr("uncompressed"));
    auto next = (*c)->Request("GET", "/healthz");
    ASSERT_THAT(next, IsOk()) << k.path;
    EXPECT_EQ(next->status, 200) << k.path;
  }
  // A body over the limit on the wire is 413, compressed or not.
  {
    auto c = TlsConnection::Connect(server->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    auto r = (*c)->Request("POST", "/validate", std::string(5 << 20, 'x'), "Content-Encoding: gzip\r\n");
    if (r.ok()) {
      EXPECT_EQ(r->status, 413);  // or the connection is cut: both refuse it
    }
  }
  // Nothing was inflated (a gigabyte each time otherwise).
  const int64_t rss_after = RssKib(server->pid());
  ASSERT_GT(rss_before, 0);
  ASSERT_GT(rss_after, 0);
  EXPECT_LT(rss_after - rss_before, 20 * 1024) << "KiB";
  // "identity" is no compression, and the server keeps serving.
  auto c = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  auto health = (*c)->Request("GET", "/healthz", "", "Content-Encoding: identity\r\n");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

// #20: a request with more headers (or header bytes) than any API server
// or client sends is refused with 431 on both listeners, before routing and
// authentication; the server keeps serving.
TEST_F(ServerTlsTest, HundredThousandHeadersGet431OnBothListeners) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::string many;
  many.reserve(100'000 * 16);
  for (int i = 0; i < 100'000; ++i) absl::StrAppend(&many, "X-H", i, ": v\r\n");
  std::string big_ones;  // few headers, 50 KB in all
  for (int i = 0; i < 10; ++i) absl::StrAppend(&big_ones, "X-Big", i, ": ", std::string(5'000, 'a'), "\r\n");
  for (int port : {server->webhook_port(), server->api_port()}) {
    for (const std::string* headers : {&std::as_const(many), &std::as_const(big_ones)}) {
      auto c = TlsConnection::Connect(port, Client());
      ASSERT_THAT(c, IsOk());
      auto r = (*c)->Request("POST", "/validate", "{}", "Content-Type: application/json\r\n" + *headers);
      ASSERT_THAT(r, IsOk()) << port;
      EXPECT_EQ(r->status, 431) << port << ": " << r->body;
      EXPECT_THAT(r->body, HasSubstr("request headers too large"));
      EXPECT_THAT(r->body, HasSubstr("RequestHeaderFieldsTooLarge"));
    }
  }
  auto c = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  auto health = (*c)->Request("GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServerTlsTest, PlainHttpOnTlsPortIsDroppedWithoutHarm) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto got = testing::PlainExchange(server->webhook_port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                    absl::Seconds(15));
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(*got, Not(HasSubstr("HTTP/1.1 200")));
  auto c = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  auto health = (*c)->Request("GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServerTlsTest, SlowClientIsCutByTheReadTimeout) {
  auto server = StartServer({"--read-timeout=1s"});
  ASSERT_NE(server, nullptr);
  auto c = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Write("POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Len"), IsOk());
  // The server gives up on the half-sent headers after the read timeout:
  // it answers 400 and closes, instead of waiting for the rest.
  absl::Time start = absl::Now();
  auto reply = (*c)->ReadResponse();
  if (reply.ok()) {
    EXPECT_EQ(reply->status, 400);
  }
  EXPECT_TRUE((*c)->PeerClosesWithin(absl::Seconds(8)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
}

TEST_F(ServerTlsTest, ClientCertificateRequiredWhenClientCaIsSet) {
  std::string client_dir = dir_.File("client");
  MakeCerts(client_dir, /*new_ca=*/true);
  auto server = StartServer({"--client-ca=" + client_dir + "/ca.crt"});
  ASSERT_NE(server, nullptr);

  // Without a certificate: the handshake (TLS 1.2) or the first exchange
  // (TLS 1.3, where the alert follows the handshake) fails.
  auto bare = TlsConnection::Connect(server->webhook_port(), Client());
  if (bare.ok()) {
    EXPECT_THAT((*bare)->Request("GET", "/healthz"), Not(IsOk()));
  }
  TlsClientOptions tls12 = Client();
  tls12.max_version = TLS1_2_VERSION;
  EXPECT_THAT(TlsConnection::Connect(server->webhook_port(), tls12), Not(IsOk()));

  // With a client certificate (EKU clientAuth) signed by the client CA.
  auto key = RunCommand({"/usr/bin/openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                         "-nodes", "-keyout", client_dir + "/client.key", "-out", client_dir + "/client.csr", "-subj",
                         "/CN=kube-apiserver"},
                        absl::Seconds(30));
  ASSERT_THAT(key, IsOk());
  ASSERT_EQ(key->exit_code, 0) << key->err;
  { std::ofstream(client_dir + "/ext") << "extendedKeyUsage=clientAuth\n"; }
  auto sign = RunCommand({"/usr/bin/openssl", "x509", "-req", "-in", client_dir + "/client.csr", "-CA",
                          client_dir + "/ca.crt", "-CAkey", client_dir + "/ca.key", "-CAcreateserial", "-days", "2",
                          "-extfile", client_dir + "/ext", "-out", client_dir + "/client.crt"},
                         absl::Seconds(30));
  ASSERT_THAT(sign, IsOk());
  ASSERT_EQ(sign->exit_code, 0) << sign->err;
  TlsClientOptions with_cert = Client();
  with_cert.cert_file = client_dir + "/client.crt";
  with_cert.key_file = client_dir + "/client.key";
  auto c = TlsConnection::Connect(server->webhook_port(), with_cert);
  ASSERT_THAT(c, IsOk());
  auto health = (*c)->Request("GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);

  // The API listener does not ask for client certificates.
  auto api = TlsConnection::Connect(server->api_port(), Client());
  ASSERT_THAT(api, IsOk());
  auto api_health = (*api)->Request("GET", "/healthz");
  ASSERT_THAT(api_health, IsOk());
  EXPECT_EQ(api_health->status, 200);
}

TEST_F(ServerTlsTest, ReloadsRotatedCertificateForNewConnectionsOnly) {
  auto server = StartServer({"--tls-reload-interval=100ms"});
  ASSERT_NE(server, nullptr);
  auto old_conn = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(old_conn, IsOk());
  const std::string old_serial = (*old_conn)->PeerSerial();
  ASSERT_FALSE(old_serial.empty());

  MakeCerts(certs_dir());  // new serving certificate under the same CA
  std::string new_serial;
  for (int i = 0; i < 100 && (new_serial.empty() || new_serial == old_serial); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    auto c = TlsConnection::Connect(server->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    new_serial = (*c)->PeerSerial();
  }
  EXPECT_NE(new_serial, old_serial);
  // The connection opened before the rotation still works.
  auto still = (*old_conn)->Request("GET", "/healthz");
  ASSERT_THAT(still, IsOk());
  EXPECT_EQ(still->status, 200);

  // A broken pair is refused and the last good one keeps serving.
  { std::ofstream(dir_.File("certs/tls.crt")) << "not a certificate\n"; }
  EXPECT_TRUE(server->WaitForStderr("reload refused", absl::Seconds(10)));
  auto after = TlsConnection::Connect(server->webhook_port(), Client());
  ASSERT_THAT(after, IsOk());
  EXPECT_EQ((*after)->PeerSerial(), new_serial);
}

TEST_F(ServerTlsTest, RsaCertificatesWorkToo) {
  const std::string d = dir_.File("rsa");
  std::filesystem::create_directories(d);
  auto r = RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/tls.key",
                       "-out", d + "/tls.crt", "-days", "2", "-subj", "/CN=localhost", "-addext",
                       "subjectAltName=DNS:localhost,IP:127.0.0.1"},
                      absl::Seconds(60));
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  auto server = ServerProcess::Start({"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0",
                                      "--tls-cert=" + d + "/tls.crt", "--tls-key=" + d + "/tls.key",
                                      "--data-dir=" + dir_.File("data")},
                                     dir_.path());
  ASSERT_THAT(server, IsOk());
  TlsClientOptions o;
  o.ca_file = d + "/tls.crt";
  o.max_version = TLS1_2_VERSION;
  auto c = TlsConnection::Connect((*server)->webhook_port(), o);
  ASSERT_THAT(c, IsOk());
  EXPECT_THAT((*c)->Cipher(), HasSubstr("ECDHE-RSA"));
  auto health = (*c)->Request("GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

TEST_F(ServerTlsTest, SigtermLetsASlowRequestFinishThenExitsZero) {
  auto server = StartServer({"--shutdown-grace=10s"});
  ASSERT_NE(server, nullptr);
  auto c = TlsConnection::Connect(server->api_port(), Client());
  ASSERT_THAT(c, IsOk());
  // Headers and half the body now, SIGTERM, the rest of the body later.
  const std::string body = R"({"slow":"request","padding":"0123456789"})";
  ASSERT_THAT((*c)->Write(absl::StrCat("POST /v1/slow HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                       "Content-Length: ",
                                       body.size(), "\r\n\r\n", body.substr(0, 10))),
              IsOk());
  absl::SleepFor(absl::Milliseconds(200));
  server->Signal(SIGTERM);
  ASSERT_TRUE(server->WaitForStderr("draining", absl::Seconds(5)));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_THAT((*c)->Write(body.substr(10)), IsOk());
  auto reply = (*c)->ReadResponse();
  ASSERT_THAT(reply, IsOk());
  EXPECT_EQ(reply->status, 404);  // answered, not cut
  auto code = server->Wait(absl::Seconds(15));
  ASSERT_THAT(code, IsOk());
  EXPECT_EQ(*code, 0) << server->Stderr();
  EXPECT_THAT(server->Stderr(), HasSubstr("stopped cleanly"));
  // New connections are refused once it is gone.
  EXPECT_THAT(TlsConnection::Connect(server->api_port(), Client()), Not(IsOk()));
}

// The API server keeps keep-alive connections to the webhook open all the
// time; they must not hold a SIGTERM for the whole grace period.
TEST_F(ServerTlsTest, SigtermEndsIdleKeepAliveConnectionsAndExitsAtOnce) {
  auto server = StartServer({"--shutdown-grace=20s"});
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<TlsConnection>> idle;
  for (int port : {server->webhook_port(), server->api_port(), server->webhook_port()}) {
    auto c = TlsConnection::Connect(port, Client());
    ASSERT_THAT(c, IsOk());
    auto r = (*c)->Request("GET", "/healthz");
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->status, 200);
    idle.push_back(*std::move(c));  // kept open, idle
  }
  const absl::Time start = absl::Now();
  server->Signal(SIGTERM);
  auto code = server->Wait(absl::Seconds(10));  // half the grace
  ASSERT_THAT(code, IsOk()) << "still running 10 s after SIGTERM: idle connections hold it";
  EXPECT_EQ(*code, 0) << server->Stderr();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(server->Stderr(), HasSubstr("ended 3 idle keep-alive connection(s)"));
  EXPECT_THAT(server->Stderr(), HasSubstr("stopped cleanly"));
}

TEST_F(ServerTlsTest, SixtyFourKeepAliveClientsAreAllServedByFourThreads) {
  auto server = StartServer({"--threads=4"});
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 64;
  constexpr int kRequestsEach = 20;
  std::vector<std::unique_ptr<TlsConnection>> conns;
  for (int i = 0; i < kClients; ++i) {
    auto c = TlsConnection::Connect(server->webhook_port(), Client());
    ASSERT_THAT(c, IsOk()) << "client " << i;
    conns.push_back(*std::move(c));
  }
  // Every connection is open (and idle) at once; each must get its answers.
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kRequestsEach; ++j) {
        auto r = conns[i]->Request("GET", "/healthz");
        if (r.ok() && r->status == 200) ok.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequestsEach);
  // Keep-alive really was kept: every request reused its connection.
  for (auto& c : conns) {
    auto r = c->Request("GET", "/readyz");
    ASSERT_THAT(r, IsOk());
    EXPECT_THAT(r->headers, Not(HasSubstr("Connection: close")));
  }
}

TEST_F(ServerTlsTest, MetricsCountRequestsAndAccessLogHasOneLinePerRequest) {
  auto server = StartServer({"--metrics-public"});
  ASSERT_NE(server, nullptr);
  auto c = TlsConnection::Connect(server->api_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Request("GET", "/healthz"), IsOk());
  ASSERT_THAT((*c)->Request("GET", "/nothing-here?token=secret"), IsOk());
  auto m = (*c)->Request("GET", "/metrics");
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->status, 200);
  EXPECT_THAT(m->headers, HasSubstr("text/plain; version=0.0.4"));
  EXPECT_THAT(m->body, HasSubstr(R"(gangkeeper_http_requests_total{listener="api",path="/healthz",code="200"} 1)"));
  EXPECT_THAT(m->body, HasSubstr(R"(gangkeeper_http_requests_total{listener="api",path="other",code="404"} 1)"));
  EXPECT_THAT(m->body, HasSubstr("gangkeeper_http_request_duration_seconds_bucket"));
  EXPECT_THAT(m->body, HasSubstr("gangkeeper_tls_certificate_expiry_timestamp_seconds"));
  EXPECT_TRUE(server->WaitForStderr("method=GET path=/healthz status=200", absl::Seconds(5)));
  std::string log = server->Stderr();
  EXPECT_THAT(log, HasSubstr("path=/nothing-here status=404"));
  EXPECT_THAT(log, Not(HasSubstr("secret")));
  EXPECT_THAT(log, HasSubstr(" us="));
}

TEST_F(ServerTlsTest, JsonLogsAreOneObjectPerLine) {
  auto server = StartServer({"--log-format=json"});
  ASSERT_NE(server, nullptr);
  auto c = TlsConnection::Connect(server->api_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Request("GET", "/healthz"), IsOk());
  ASSERT_TRUE(server->WaitForStderr("path=/healthz", absl::Seconds(5)));
  std::istringstream lines(server->Stderr());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++count;
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    EXPECT_THAT(line, HasSubstr(R"("level":")"));
  }
  EXPECT_GT(count, 1);
}

TEST_F(ServerTlsTest, SecondInstanceOnTheSamePortFailsToStart) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  std::vector<std::string> args = BaseArgs();
  args[0] = absl::StrCat("--webhook-addr=127.0.0.1:", first->webhook_port());
  args.push_back("--data-dir=" + dir_.File("second-data"));  // the data directory has its own lock
  auto second = ServerProcess::Start(args, dir_.path());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("cannot bind"));
}

TEST_F(ServerTlsTest, SecondInstanceOnTheSameDataDirectoryFailsToStart) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  std::vector<std::string> args = {testing::GangkeeperBinary(), "serve"};
  for (const std::string& a : BaseArgs()) args.push_back(a);
  auto second = RunCommand(args, absl::Seconds(30), dir_.path());
  ASSERT_THAT(second, IsOk());
  EXPECT_NE(second->exit_code, 0);
  // The message names the flag, the holder and the fix.
  EXPECT_THAT(second->err, HasSubstr("--data-dir " + dir_.File("data")));
  EXPECT_THAT(second->err, HasSubstr("another gangkeeper process uses this data directory"));
  EXPECT_THAT(second->err, HasSubstr(absl::StrCat("pid ", first->pid(), " on ")));
  EXPECT_THAT(second->err, HasSubstr("its own --data-dir"));
  // The first one serves on.
  auto c = TlsConnection::Connect(first->api_port(), Client());
  ASSERT_THAT(c, IsOk());
  auto ready = (*c)->Request("GET", "/healthz");
  ASSERT_THAT(ready, IsOk());
  EXPECT_EQ(ready->status, 200);
}

TEST_F(ServerTlsTest, BadFlagsAreNamed) {
  auto r = RunCommand({testing::GangkeeperBinary(), "serve", "--threads=many"}, absl::Seconds(10));
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_THAT(r->err, HasSubstr("--threads"));
  auto missing = RunCommand({testing::GangkeeperBinary(), "serve", "--webhook-addr=127.0.0.1:0",
                             "--api-addr=127.0.0.1:0", "--data-dir=" + dir_.File("d")},
                            absl::Seconds(10));
  ASSERT_THAT(missing, IsOk());
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_THAT(missing->err, HasSubstr("--tls-cert"));
}

}  // namespace
}  // namespace gangkeeper
