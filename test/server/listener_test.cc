// The event-driven listeners in process: deadlines, caps and blocking
// handlers (#22). Loopback only; every wait is bounded; deadlines are
// checked generously ("closed within N times the deadline").
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/server/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper::server {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::TempDir;
using ::gangkeeper::testing::TlsClientOptions;
using ::gangkeeper::testing::TlsConnection;
using ::testing::HasSubstr;

// A plain TCP connection to 127.0.0.1:port that sends nothing (or what the
// test writes). Closed on destruction.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // True when the server closes (EOF or reset) within `timeout`.
  bool ClosedWithin(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    for (int i = 0; i < 10'000 && absl::Now() < end; ++i) {
      pollfd p{fd_, POLLIN, 0};
      const int left_ms = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
      if (::poll(&p, 1, std::max(left_ms, 1)) <= 0) continue;
      char buf[256];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
};

class ListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                 absl::Seconds(30));
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  void TearDown() override {
    if (server_ != nullptr) {
      EXPECT_THAT(server_->Shutdown(absl::Seconds(10)), IsOk());
    }
  }

  Options BaseOptions() {
    Options o;
    o.webhook_addr = "127.0.0.1:0";
    o.api_addr = "127.0.0.1:0";
    o.tls_cert_file = dir_.File("certs/tls.crt");
    o.tls_key_file = dir_.File("certs/tls.key");
    o.threads = 1;
    o.clock = &base::RealClock();
    Route validate;
    validate.listener = Listener::kWebhook;
    validate.method = "POST";
    validate.path = "/validate";
    validate.handler = [](const HttpRequest& req) {
      HttpResponse r;
      r.body = "{\"got\":" + std::to_string(req.body.size()) + "}";
      return r;
    };
    o.routes.push_back(validate);
    return o;
  }

  void StartServer(Options o) {
    auto s = Server::Create(std::move(o), registry_);
    ASSERT_THAT(s, IsOk());
    server_ = *std::move(s);
    ASSERT_THAT(server_->Start(), IsOk());
  }

  TlsClientOptions Client() const {
    TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    o.io_timeout = absl::Seconds(10);
    return o;
  }

  // A /validate on a fresh connection succeeds.
  void ExpectValidateServed() {
    auto c = TlsConnection::Connect(server_->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    auto r = (*c)->Request("POST", "/validate", "{}", "Content-Type: application/json\r\n");
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->status, 200);
  }

  TempDir dir_;
  metrics::Registry registry_;
  std::unique_ptr<Server> server_;
};

TEST_F(ListenerTest, HalfOpenHandshakeIsCutAtTheHandshakeDeadline) {
  Options o = BaseOptions();
  o.handshake_timeout = absl::Milliseconds(300);
  StartServer(std::move(o));
  RawSocket silent(server_->webhook_port());  // TCP connected, no ClientHello
  ASSERT_TRUE(silent.ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(silent.ClosedWithin(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // 30 x the deadline
  ExpectValidateServed();
  EXPECT_THAT(registry_.ExposePrometheus(),
              HasSubstr(R"(gangkeeper_http_connection_limits_total{listener="webhook",limit="handshake_deadline"} 1)"));
}

TEST_F(ListenerTest, SlowlorisHeaderIsCutAtTheHeaderDeadlineThoughBytesKeepComing) {
  Options o = BaseOptions();
  o.read_timeout = absl::Milliseconds(500);
  StartServer(std::move(o));
  auto c = TlsConnection::Connect(server_->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Write("POST /validate HTTP/1.1\r\nHost: localhost\r\n"), IsOk());
  // One more header byte every 100 ms: each read makes progress, only the
  // deadline for the whole header can end it.
  const absl::Time start = absl::Now();
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = !(*c)->Write("X").ok() || (*c)->PeerClosesWithin(absl::Milliseconds(100));
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));  // 16 x the deadline
  ExpectValidateServed();
}

TEST_F(ListenerTest, ConnectionCapClosesTheOldestIdleConnectionFirst) {
  Options o = BaseOptions();
  o.max_connections = 3;
  StartServer(std::move(o));
  std::vector<std::unique_ptr<TlsConnection>> conns;
  for (int i = 0; i < 3; ++i) {
    auto c = TlsConnection::Connect(server_->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    auto r = (*c)->Request("GET", "/healthz");
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->status, 200);
    conns.push_back(*std::move(c));
    absl::SleepFor(absl::Milliseconds(20));  // distinct idle times
  }
  // The oldest (conns[0]) is idle the longest: it makes room for the new one.
  ExpectValidateServed();
  EXPECT_TRUE(conns[0]->PeerClosesWithin(absl::Seconds(5)));
  for (int i = 1; i < 3; ++i) {
    auto r = conns[i]->Request("GET", "/healthz");
    ASSERT_THAT(r, IsOk()) << i;
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_THAT(registry_.ExposePrometheus(),
              HasSubstr(R"(gangkeeper_http_connection_limits_total{listener="webhook",limit="max_connections"})"));
}

TEST_F(ListenerTest, PerSourceCapClosesThatSourcesOldestIdleConnection) {
  Options o = BaseOptions();
  o.max_connections_per_source = 2;
  StartServer(std::move(o));
  auto first = TlsConnection::Connect(server_->api_port(), Client());
  ASSERT_THAT(first, IsOk());
  absl::SleepFor(absl::Milliseconds(20));
  auto second = TlsConnection::Connect(server_->api_port(), Client());
  ASSERT_THAT(second, IsOk());
  auto third = TlsConnection::Connect(server_->api_port(), Client());
  ASSERT_THAT(third, IsOk());
  auto r = (*third)->Request("GET", "/healthz");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE((*first)->PeerClosesWithin(absl::Seconds(5)));
  auto still = (*second)->Request("GET", "/healthz");
  ASSERT_THAT(still, IsOk());
  EXPECT_EQ(still->status, 200);
}

TEST_F(ListenerTest, IdleAndBlockedConnectionsDoNotDelayAWellBehavedValidate) {
  Options o = BaseOptions();
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  Route slow;
  slow.listener = Listener::kWebhook;
  slow.method = "POST";
  slow.path = "/slow";
  slow.handler = [&](const HttpRequest&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return release; });
    return HttpResponse();
  };
  o.routes.push_back(slow);
  StartServer(std::move(o));  // one event-loop thread
  // Idle TLS connections (handshake, then silence), silent TCP connections,
  // and a half-sent header.
  std::vector<std::unique_ptr<TlsConnection>> idle;
  for (int i = 0; i < 100; ++i) {
    auto c = TlsConnection::Connect(server_->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    idle.push_back(*std::move(c));
  }
  std::vector<std::unique_ptr<RawSocket>> silent;
  for (int i = 0; i < 50; ++i) silent.push_back(std::make_unique<RawSocket>(server_->webhook_port()));
  ASSERT_THAT(idle[0]->Write("POST /validate HTTP/1.1\r\nHost: x\r\nContent-Le"), IsOk());
  // A handler that blocks holds a worker, not the loop.
  auto blocked = TlsConnection::Connect(server_->webhook_port(), Client());
  ASSERT_THAT(blocked, IsOk());
  ASSERT_THAT((*blocked)->Write("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), IsOk());
  absl::SleepFor(absl::Milliseconds(100));
  for (int i = 0; i < 5; ++i) ExpectValidateServed();
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  auto r = (*blocked)->ReadResponse();
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ListenerTest, PipelinedRequestsAndConnectionCloseAreHonoured) {
  StartServer(BaseOptions());
  auto c = TlsConnection::Connect(server_->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                          "POST /validate?x=%41+b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                          "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
              IsOk());
  auto a = (*c)->ReadResponse();
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->status, 200);
  auto b = (*c)->ReadResponse();
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->body, "{\"got\":3}");
  auto last = (*c)->ReadResponse();
  ASSERT_THAT(last, IsOk());
  EXPECT_THAT(last->headers, HasSubstr("Connection: close"));
  EXPECT_TRUE((*c)->PeerClosesWithin(absl::Seconds(5)));
}

// A connection answers "Connection: close" after its own share of
// --keep-alive-max-requests: never more than the limit, at least nine tenths
// of it, and not the same count on every connection (connections opened
// together must not all reconnect at once).
TEST_F(ListenerTest, EachConnectionClosesAfterItsOwnShareOfTheRequestLimit) {
  Options o = BaseOptions();
  o.keep_alive_max_requests = 40;
  StartServer(std::move(o));
  std::set<int> counts;
  for (int conn = 0; conn < 16; ++conn) {
    auto c = TlsConnection::Connect(server_->webhook_port(), Client());
    ASSERT_THAT(c, IsOk());
    int served = 0;
    bool closed = false;
    for (int i = 0; i < 41 && !closed; ++i) {
      auto r = (*c)->Request("POST", "/validate", "{}", "Content-Type: application/json\r\n");
      ASSERT_THAT(r, IsOk()) << "connection " << conn << ", request " << i + 1;
      ASSERT_EQ(r->status, 200);
      ++served;
      closed = absl::StrContains(r->headers, "Connection: close");
    }
    ASSERT_TRUE(closed) << "connection " << conn << " still open after " << served << " requests (limit 40)";
    EXPECT_TRUE((*c)->PeerClosesWithin(absl::Seconds(5)));
    EXPECT_GE(served, 36) << "connection " << conn;
    EXPECT_LE(served, 40) << "connection " << conn;
    counts.insert(served);
  }
  // Five possible counts for 16 connections: all alike once in 5^15.
  EXPECT_GT(counts.size(), 1u);
}

// The answer on the wire: a status line with its reason, one field per
// line, a Content-Length that is the body's, and nothing after the body
// (the next answer on the connection starts right after it).
TEST_F(ListenerTest, AnswersAreWellFormedHttp11OnTheWire) {
  StartServer(BaseOptions());
  auto c = TlsConnection::Connect(server_->webhook_port(), Client());
  ASSERT_THAT(c, IsOk());
  ASSERT_THAT((*c)->Write("POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                          "GET /no-such-path HTTP/1.1\r\nHost: x\r\n\r\n"),
              IsOk());
  auto ok = (*c)->ReadResponse();
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(ok->headers, ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok->headers, HasSubstr("\r\nContent-Type: application/json\r\n"));
  EXPECT_THAT(ok->headers, HasSubstr(absl::StrCat("\r\nContent-Length: ", ok->body.size())));
  EXPECT_THAT(ok->headers, ::testing::Not(HasSubstr("Connection: close")));
  EXPECT_EQ(ok->body, "{\"got\":5}");
  auto missing = (*c)->ReadResponse();
  ASSERT_THAT(missing, IsOk());
  EXPECT_THAT(missing->headers, ::testing::StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(missing->headers, HasSubstr(absl::StrCat("\r\nContent-Length: ", missing->body.size())));
  EXPECT_THAT(missing->body, HasSubstr("no such path"));
}

}  // namespace
}  // namespace gangkeeper::server
