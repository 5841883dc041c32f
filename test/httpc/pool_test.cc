// Tests for httpc::Pool and httpc::Connection against cpp-httplib servers on
// 127.0.0.1 (port 0): plain HTTP, and TLS with certificates from
// `gangkeeper certs`. Every wait is bounded in count and time; nothing
// asserts on how long something took.
#include "gangkeeper/httpc/pool.h"

#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gangkeeper/httpc/request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::httpc {
namespace {

using ::gangkeeper::testing::GangkeeperBinary;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A cpp-httplib server on its own thread, stopped and joined on destruction.
class LoopbackServer {
 public:
  explicit LoopbackServer(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 500 && !server_->is_running(); ++i) absl::SleepFor(absl::Milliseconds(10));
  }
  ~LoopbackServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// The routes every test server has.
void AddRoutes(httplib::Server& s) {
  s.Get("/hello", [](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Auth", req.get_header_value("Authorization"));
    res.set_header("X-Peer-Port", absl::StrCat(req.remote_port));
    res.set_content("hello", "text/plain");
  });
  s.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, req.get_header_value("Content-Type"));
  });
  s.Get("/big", [](const httplib::Request&, httplib::Response& res) { res.set_content(std::string(1000, 'x'), "text/plain"); });
  // Three lines, then an open stream until the client goes away (at most
  // 10 s): a watch.
  s.Get("/watch", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t offset, httplib::DataSink& sink) {
      if (offset == 0) {
        const std::string lines = "{\"n\":1}\n{\"n\":2}\n{\"n\":";
        sink.write(lines.data(), lines.size());
        const std::string rest = "3}\n";
        sink.write(rest.data(), rest.size());
        return true;
      }
      for (int i = 0; i < 1000 && sink.is_writable(); ++i) absl::SleepFor(absl::Milliseconds(10));
      sink.done();
      return true;
    });
  });
}

PoolOptions Plain(int port) {
  PoolOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.timeout = absl::Seconds(5);
  return o;
}

std::unique_ptr<Pool> MustCreate(PoolOptions o) {
  absl::StatusOr<std::unique_ptr<Pool>> p = Pool::Create(std::move(o));
  EXPECT_THAT(p, IsOk());
  return p.ok() ? *std::move(p) : nullptr;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = std::make_unique<httplib::Server>();
    AddRoutes(*s);
    server_ = std::make_unique<LoopbackServer>(std::move(s));
  }
  std::unique_ptr<LoopbackServer> server_;
};

TEST_F(PoolTest, SendsHeadersAndBodiesAndReadsTheAnswer) {
  auto pool = MustCreate(Plain(server_->port()));
  ASSERT_NE(pool, nullptr);
  Request get;
  get.path = "/hello";
  get.headers = {{"Authorization", "Bearer t"}};
  Response r = pool->Send(get);
  EXPECT_EQ(r.failure, Failure::kNone) << r.error;
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.Header("x-auth"), "Bearer t");
  EXPECT_EQ(r.Header("X-Missing"), "");

  Request post;
  post.method = "POST";
  post.path = "/echo";
  post.body = "{\"a\":1}";
  post.content_type = "application/json";
  r = pool->Send(post);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"a\":1}");
  EXPECT_EQ(r.Header("Content-Type"), "application/json");

  post.path = "/nowhere";
  r = pool->Send(post);
  EXPECT_EQ(r.failure, Failure::kNone);
  EXPECT_EQ(r.status, 404);
}

TEST_F(PoolTest, AConnectionIsKeptAliveForTheNextCall) {
  auto pool = MustCreate(Plain(server_->port()));
  ASSERT_NE(pool, nullptr);
  Request get;
  get.path = "/hello";
  Response first = pool->Send(get);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(pool->IdleCountForTest(), 1u);
  Response second = pool->Send(get);
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(first.Header("X-Peer-Port"), second.Header("X-Peer-Port"));
  pool->Shutdown();
  EXPECT_EQ(pool->IdleCountForTest(), 0u);
  EXPECT_EQ(pool->Send(get).status, 200);  // still works, keeps nothing
  EXPECT_EQ(pool->IdleCountForTest(), 0u);
}

TEST(PoolCloseTest, AConnectionTheServerClosedIsNotReused) {
  auto s = std::make_unique<httplib::Server>();
  s->set_keep_alive_max_count(1);  // closes every connection after one answer
  AddRoutes(*s);
  LoopbackServer server(std::move(s));
  auto pool = MustCreate(Plain(server.port()));
  ASSERT_NE(pool, nullptr);
  Request get;
  get.path = "/hello";
  std::set<std::string> ports;
  for (int i = 0; i < 3; ++i) {
    Response r = pool->Send(get, /*resend_if_stale=*/true);
    ASSERT_EQ(r.status, 200) << r.error;
    ports.insert(r.Header("X-Peer-Port"));
  }
  EXPECT_EQ(ports.size(), 3u);
}

TEST_F(PoolTest, AnAnswerOverTheBoundIsTooLargeAndItsConnectionDropped) {
  auto pool = MustCreate(Plain(server_->port()));
  ASSERT_NE(pool, nullptr);
  Request get;
  get.path = "/big";
  get.max_body_bytes = 100;
  Response r = pool->Send(get);
  EXPECT_EQ(r.failure, Failure::kTooLarge);
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(pool->IdleCountForTest(), 0u);
  get.max_body_bytes = 1000;
  EXPECT_EQ(pool->Send(get).body.size(), 1000u);
}

TEST(PoolRefusedTest, ConnectionRefusedIsUnsent) {
  int port = 0;
  {
    LoopbackServer gone(std::make_unique<httplib::Server>());
    port = gone.port();
  }
  auto pool = MustCreate(Plain(port));
  ASSERT_NE(pool, nullptr);
  Request get;
  get.path = "/hello";
  Response r = pool->Send(get);
  EXPECT_EQ(r.failure, Failure::kConnection);
  EXPECT_TRUE(r.unsent);
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.error.empty());
}

TEST_F(PoolTest, AStreamDeliversItsBodyPieceByPieceUntilStopped) {
  auto pool = MustCreate(Plain(server_->port()));
  ASSERT_NE(pool, nullptr);
  std::unique_ptr<Connection> c = pool->Open(absl::Seconds(30));
  std::string got;
  int status = 0;
  absl::Notification three_lines;
  Response r;
  std::thread streaming([&] {
    r = c->Stream(
        Request{.path = "/watch"},
        [&](int code, const Headers&) {
          status = code;
          return true;
        },
        [&](absl::string_view data) {
          got.append(data.data(), data.size());
          if (got.size() >= 24 && !three_lines.HasBeenNotified()) three_lines.Notify();
          return true;
        });
  });
  EXPECT_TRUE(three_lines.WaitForNotificationWithTimeout(absl::Seconds(10)));
  c->Stop();
  streaming.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(got, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
  EXPECT_TRUE(r.body.empty());
  EXPECT_NE(r.failure, Failure::kNone);
}

TEST_F(PoolTest, AHeadHandlerThatSaysNoCancels) {
  auto pool = MustCreate(Plain(server_->port()));
  ASSERT_NE(pool, nullptr);
  std::unique_ptr<Connection> c = pool->Open(absl::Seconds(30));
  bool body_seen = false;
  Response r = c->Stream(
      Request{.path = "/watch"}, [](int, const Headers&) { return false; },
      [&](absl::string_view) {
        body_seen = true;
        return true;
      });
  EXPECT_EQ(r.failure, Failure::kCanceled);
  EXPECT_FALSE(body_seen);
}

TEST(PoolCreateTest, RefusesOptionsThatCannotWork) {
  TempDir dir;
  const std::string not_pem = dir.path() + "/not.pem";
  std::ofstream(not_pem) << "hello";
  struct Case {
    const char* name;
    std::function<void(PoolOptions&)> change;
    const char* want_in_message;
  };
  const Case cases[] = {
      {"no host", [](PoolOptions& o) { o.host = ""; }, "host"},
      {"port zero", [](PoolOptions& o) { o.port = 0; }, "port"},
      {"no timeout", [](PoolOptions& o) { o.timeout = absl::ZeroDuration(); }, "timeout"},
      {"TLS without a CA", [](PoolOptions& o) { o.tls.emplace(); }, "CA"},
      {"a CA that is not PEM", [](PoolOptions& o) { o.tls.emplace().ca_pem = "hello"; }, "not a PEM certificate"},
      {"a CA file that is not PEM", [&](PoolOptions& o) { o.tls.emplace().ca_file = not_pem; }, "not a PEM certificate"},
      {"a missing CA file", [](PoolOptions& o) { o.tls.emplace().ca_file = "/nonexistent/ca.pem"; }, "cannot open"},
      {"a certificate file without key",
       [&](PoolOptions& o) {
         o.tls.emplace().ca_file = not_pem;
         o.tls->cert_file = not_pem;
       },
       "key file"},
      {"a certificate as text and as a file",
       [&](PoolOptions& o) {
         o.tls.emplace().ca_file = not_pem;
         o.tls->cert_pem = "x";
         o.tls->cert_file = not_pem;
       },
       "not both"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PoolOptions o = Plain(443);
    c.change(o);
    EXPECT_THAT(Pool::Create(o), StatusIs(absl::StatusCode::kInvalidArgument, c.want_in_message));
  }
}

// ---------------------------------------------------------------- TLS

class TlsPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    other_ = new TempDir();
    for (TempDir* d : {certs_, other_}) {
      auto r = RunCommand({GangkeeperBinary(), "certs", "--out", d->path()}, absl::Seconds(60));
      ASSERT_THAT(r, IsOk());
      ASSERT_EQ(r->exit_code, 0) << r->err;
    }
  }
  static void TearDownTestSuite() {
    delete certs_;
    delete other_;
    certs_ = other_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(certs_, nullptr);
    auto s = std::make_unique<httplib::SSLServer>(certs_->File("tls.crt").c_str(), certs_->File("tls.key").c_str());
    ASSERT_TRUE(s->is_valid());
    AddRoutes(*s);
    server_ = std::make_unique<LoopbackServer>(std::move(s));
  }
  PoolOptions Tls(const std::string& ca_pem) const {
    PoolOptions o = Plain(server_->port());
    o.tls.emplace().ca_pem = ca_pem;
    return o;
  }

  static TempDir* certs_;
  static TempDir* other_;
  std::unique_ptr<LoopbackServer> server_;
};

TempDir* TlsPoolTest::certs_ = nullptr;
TempDir* TlsPoolTest::other_ = nullptr;

TEST_F(TlsPoolTest, VerifiesTheServerAgainstTheGivenCaOnly) {
  Request get;
  get.path = "/hello";
  auto good = MustCreate(Tls(ReadFile(certs_->File("ca.crt"))));
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->Send(get).status, 200);

  PoolOptions from_file = Plain(server_->port());
  from_file.tls.emplace().ca_file = certs_->File("ca.crt");
  auto by_file = MustCreate(from_file);
  ASSERT_NE(by_file, nullptr);
  EXPECT_EQ(by_file->Send(get).status, 200);

  auto wrong = MustCreate(Tls(ReadFile(other_->File("ca.crt"))));
  ASSERT_NE(wrong, nullptr);
  Response r = wrong->Send(get);
  EXPECT_EQ(r.failure, Failure::kTlsVerify);
  EXPECT_TRUE(r.unsent);
  EXPECT_NE(r.verify_result, 0);
}

TEST_F(TlsPoolTest, TheServerNameIsTheNameVerified) {
  Request get;
  get.path = "/hello";
  PoolOptions named = Tls(ReadFile(certs_->File("ca.crt")));
  named.tls->server_name = "localhost";  // in the certificate; the connection goes to 127.0.0.1
  auto good = MustCreate(named);
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->Send(get).status, 200);
  named.tls->server_name = "kubernetes.example.com";
  auto bad = MustCreate(named);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->Send(get).failure, Failure::kTlsVerify);
}

// Only the CA given is trusted, never the system's trust anchors too: here
// OpenSSL's default bundle (SSL_CERT_FILE) holds the CA that signed the
// server, and a pool given another CA (in memory or as a file) refuses the
// server all the same. cpp-httplib's own check added the default bundle to
// a store given in memory, so this server passed.
TEST_F(TlsPoolTest, TheSystemsTrustAnchorsAreNotTrusted) {
  ASSERT_EQ(::setenv("SSL_CERT_FILE", certs_->File("ca.crt").c_str(), 1), 0);
  ASSERT_EQ(::setenv("SSL_CERT_DIR", other_->path().c_str(), 1), 0);
  Request get;
  get.path = "/hello";
  auto in_memory = MustCreate(Tls(ReadFile(other_->File("ca.crt"))));
  ASSERT_NE(in_memory, nullptr);
  Response r = in_memory->Send(get);
  PoolOptions from_file = Plain(server_->port());
  from_file.tls.emplace().ca_file = other_->File("ca.crt");
  auto by_file = MustCreate(from_file);
  ASSERT_NE(by_file, nullptr);
  Response f = by_file->Send(get);
  ::unsetenv("SSL_CERT_FILE");
  ::unsetenv("SSL_CERT_DIR");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.failure, Failure::kTlsVerify) << r.error;
  EXPECT_NE(r.verify_result, 0);
  EXPECT_THAT(r.error, ::testing::HasSubstr("not trusted"));
  EXPECT_EQ(f.failure, Failure::kTlsVerify) << f.error;
  // The right CA still works, and its parsed store serves every connection.
  auto good = MustCreate(Tls(ReadFile(certs_->File("ca.crt"))));
  ASSERT_NE(good, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(good->Send(get).status, 200);
}

// A server certificate is checked for the name by OpenSSL: an IP address
// the certificate lists passes, one it does not list fails.
TEST_F(TlsPoolTest, AnIpAddressIsCheckedAgainstTheCertificatesAddresses) {
  Request get;
  get.path = "/hello";
  PoolOptions by_ip = Tls(ReadFile(certs_->File("ca.crt")));
  by_ip.tls->server_name = "127.0.0.1";
  auto good = MustCreate(by_ip);
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->Send(get).status, 200);
  by_ip.tls->server_name = "127.0.0.2";
  auto bad = MustCreate(by_ip);
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->Send(get).failure, Failure::kTlsVerify);
}

TEST_F(TlsPoolTest, AClientCertificateFromMemoryOrFilesIsAccepted) {
  Request get;
  get.path = "/hello";
  PoolOptions o = Tls(ReadFile(certs_->File("ca.crt")));
  o.tls->cert_pem = ReadFile(certs_->File("tls.crt"));
  o.tls->key_pem = "not a key";
  EXPECT_THAT(Pool::Create(o), StatusIs(absl::StatusCode::kInvalidArgument, "not PEM"));
  o.tls->key_pem = ReadFile(certs_->File("tls.key"));
  auto in_memory = MustCreate(o);
  ASSERT_NE(in_memory, nullptr);
  EXPECT_EQ(in_memory->Send(get).status, 200);
  o.tls->cert_pem.clear();
  o.tls->key_pem.clear();
  o.tls->cert_file = certs_->File("tls.crt");
  o.tls->key_file = certs_->File("tls.key");
  auto from_files = MustCreate(o);
  ASSERT_NE(from_files, nullptr);
  EXPECT_EQ(from_files->Send(get).status, 200);
}

}  // namespace
}  // namespace gangkeeper::httpc
