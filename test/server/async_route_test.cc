// Asynchronous routes (Route::async_handler, #22): the handler starts on
// the event loop and answers later from any thread through its Responder,
// while the loop serves others. What the listener promises stays: order of
// pipelined answers, keep-alive, drain on shutdown; a connection gone
// before the answer, an answer that never comes (the server's deadline),
// and a responder dropped unanswered are all survived. Loopback only;
// every wait is bounded.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/loop_round.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/server/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/testing/wait.h"

namespace gangkeeper::server {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::TempDir;
using ::gangkeeper::testing::TlsClientOptions;
using ::gangkeeper::testing::TlsConnection;
using ::gangkeeper::testing::WaitFor;
using ::testing::HasSubstr;

// A POST route of the webhook listener answered asynchronously by `handler`.
Route AsyncPost(const std::string& path, std::function<void(HttpRequest, Responder)> handler) {
  Route r;
  r.listener = Listener::kWebhook;
  r.method = "POST";
  r.path = path;
  r.async_handler = std::move(handler);
  return r;
}

// The requests an asynchronous route took, with their responders: the
// test answers them when it likes, from its own thread.
class PendingRequests {
 public:
  void Add(HttpRequest req, Responder responder) {
    absl::MutexLock lock(&mu_);
    bodies_.push_back(std::move(req.body));
    responders_.push_back(std::move(responder));
    threads_.push_back(std::this_thread::get_id());
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return responders_.size();
  }
  // Answers request `i` with its body echoed.
  void Answer(size_t i, int status = 200) {
    Responder r = Take(i);
    HttpResponse out;
    out.status = status;
    out.body = "{\"async\":\"" + Body(i) + "\"}";
    r.Respond(std::move(out));
  }
  Responder Take(size_t i) {
    absl::MutexLock lock(&mu_);
    return responders_.at(i);
  }
  std::string Body(size_t i) {
    absl::MutexLock lock(&mu_);
    return bodies_.at(i);
  }
  std::thread::id Thread(size_t i) {
    absl::MutexLock lock(&mu_);
    return threads_.at(i);
  }
  // Lets go of every responder (unanswered ones get the server's 500).
  void Clear() {
    absl::MutexLock lock(&mu_);
    responders_.clear();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> bodies_;
  std::vector<Responder> responders_;
  std::vector<std::thread::id> threads_;
};

class AsyncRouteTest : public ::testing::Test {
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

  Options AsyncOptions() {
    Options o;
    o.webhook_addr = "127.0.0.1:0";
    o.api_addr = "127.0.0.1:0";
    o.tls_cert_file = dir_.File("certs/tls.crt");
    o.tls_key_file = dir_.File("certs/tls.key");
    o.threads = 1;  // one loop: whatever the test sees served, that loop served
    o.clock = &base::RealClock();
    Route later = AsyncPost("/later", [this](HttpRequest req, Responder responder) {
      pending_.Add(std::move(req), std::move(responder));
    });
    o.routes.push_back(later);
    Route now;
    now.listener = Listener::kWebhook;
    now.method = "POST";
    now.path = "/now";
    now.may_block = false;
    now.handler = [](const HttpRequest& req) {
      HttpResponse r;
      r.body = "{\"now\":\"" + req.body + "\"}";
      return r;
    };
    o.routes.push_back(now);
    return o;
  }

  void StartServer(Options o) {
    auto s = Server::Create(std::move(o), registry_);
    ASSERT_THAT(s, IsOk());
    server_ = *std::move(s);
    ASSERT_THAT(server_->Start(), IsOk());
  }

  std::unique_ptr<TlsConnection> Connect() {
    TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    o.io_timeout = absl::Seconds(20);
    auto c = TlsConnection::Connect(server_->webhook_port(), o);
    EXPECT_THAT(c, IsOk());
    return c.ok() ? *std::move(c) : nullptr;
  }

  static std::string Post(const std::string& path, const std::string& body, const std::string& extra = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
           extra + "\r\n" + body;
  }

  TempDir dir_;
  metrics::Registry registry_;
  PendingRequests pending_;
  std::unique_ptr<Server> server_;
};

TEST_F(AsyncRouteTest, AnsweredLaterFromAnotherThreadWhileTheLoopServesOthers) {
  StartServer(AsyncOptions());
  std::unique_ptr<TlsConnection> waiting = Connect();
  ASSERT_NE(waiting, nullptr);
  ASSERT_THAT(waiting->Write(Post("/later", "one")), IsOk());
  ASSERT_TRUE(WaitFor([&] { return pending_.size() == 1; }));
  // The only loop thread is free: another connection is served meanwhile.
  std::unique_ptr<TlsConnection> other = Connect();
  ASSERT_NE(other, nullptr);
  auto served = other->Request("POST", "/now", "two");
  ASSERT_THAT(served, IsOk());
  EXPECT_EQ(served->body, "{\"now\":\"two\"}");
  std::thread answerer([&] { pending_.Answer(0); });
  answerer.join();
  auto r = waiting->ReadResponse();
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"async\":\"one\"}");
  // Keep-alive: the same connection goes on.
  auto again = waiting->Request("POST", "/now", "three");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->body, "{\"now\":\"three\"}");
  // Counted and timed like any route.
  const std::string exposed = registry_.ExposePrometheus();
  EXPECT_THAT(exposed, HasSubstr(R"(gangkeeper_http_requests_total{listener="webhook",path="/later",code="200"} 1)"));
  EXPECT_THAT(exposed, HasSubstr(R"(gangkeeper_http_request_duration_seconds_count{listener="webhook",path="/later"} 1)"));
}

TEST_F(AsyncRouteTest, RunBlockingRunsOffTheLoopThread) {
  Options o = AsyncOptions();
  Route blocking = AsyncPost("/blocking", [](HttpRequest, Responder responder) {
    const std::thread::id loop = std::this_thread::get_id();
    responder.RunBlocking([responder, loop] {
      HttpResponse r;
      r.body = std::this_thread::get_id() != loop ? "{\"off_loop\":true}" : "{\"off_loop\":false}";
      responder.Respond(std::move(r));
    });
  });
  o.routes.push_back(blocking);
  StartServer(std::move(o));
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Request("POST", "/blocking", "x");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->body, "{\"off_loop\":true}");
}

// A handler on the loop finds the loop's round (base::LoopRound): what it
// defers runs on the same thread once the handler has returned (the broker
// hands a round's registrations over this way). Off the loop there is none.
TEST_F(AsyncRouteTest, AHandlerOnTheLoopCanDeferWorkToTheEndOfTheLoopsRound) {
  Options o = AsyncOptions();
  Route deferring = AsyncPost("/deferring", [](HttpRequest, Responder responder) {
    base::LoopRound* round = base::LoopRound::Current();
    if (round == nullptr) {
      HttpResponse r;
      r.body = "{\"round\":false}";
      responder.Respond(std::move(r));
      return;
    }
    const std::thread::id loop = std::this_thread::get_id();
    auto handler_returned = std::make_shared<bool>(false);
    round->AtEnd([responder, loop, handler_returned]() mutable {
      HttpResponse r;
      r.body = absl::StrCat("{\"round\":true,\"same_thread\":", std::this_thread::get_id() == loop ? "true" : "false",
                            ",\"after_handler\":", *handler_returned ? "true" : "false", "}");
      responder.Respond(std::move(r));
    });
    *handler_returned = true;
  });
  o.routes.push_back(deferring);
  Route off_loop = deferring;
  off_loop.path = "/off-loop";
  off_loop.async_handler = [](HttpRequest, Responder responder) {
    responder.RunBlocking([responder] {
      HttpResponse r;
      r.body = base::LoopRound::Current() == nullptr ? "{\"round\":false}" : "{\"round\":true}";
      responder.Respond(std::move(r));
    });
  };
  o.routes.push_back(off_loop);
  StartServer(std::move(o));
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 3; ++i) {  // every request of a keep-alive connection
    auto r = c->Request("POST", "/deferring", "x");
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->body, "{\"round\":true,\"same_thread\":true,\"after_handler\":true}");
  }
  auto r = c->Request("POST", "/off-loop", "x");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->body, "{\"round\":false}");
}

TEST_F(AsyncRouteTest, PipelinedAnswersKeepTheirOrderAroundAnAsynchronousOne) {
  StartServer(AsyncOptions());
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_THAT(c->Write(Post("/now", "first") + Post("/later", "second") + Post("/now", "third")), IsOk());
  auto first = c->ReadResponse();
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->body, "{\"now\":\"first\"}");
  ASSERT_TRUE(WaitFor([&] { return pending_.size() == 1; }));
  // The third request is read only once the second is answered: nothing
  // overtakes it (the next answer read is the second's).
  absl::SleepFor(absl::Milliseconds(100));
  pending_.Answer(0);
  auto second = c->ReadResponse();
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->body, "{\"async\":\"second\"}");
  auto third = c->ReadResponse();
  ASSERT_THAT(third, IsOk());
  EXPECT_EQ(third->body, "{\"now\":\"third\"}");
}

TEST_F(AsyncRouteTest, AClientGoneBeforeTheAnswerIsSurvived) {
  StartServer(AsyncOptions());
  {
    std::unique_ptr<TlsConnection> c = Connect();
    ASSERT_NE(c, nullptr);
    ASSERT_THAT(c->Write(Post("/later", "gone")), IsOk());
    ASSERT_TRUE(WaitFor([&] { return pending_.size() == 1; }));
  }  // the client closes
  absl::SleepFor(absl::Milliseconds(100));
  pending_.Answer(0);  // written to a closed connection, or dropped: no crash
  pending_.Answer(0);  // a second answer: ignored
  pending_.Clear();
  std::unique_ptr<TlsConnection> next = Connect();
  ASSERT_NE(next, nullptr);
  auto r = next->Request("POST", "/now", "still");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
}

TEST_F(AsyncRouteTest, ShutdownWaitsForAnAsynchronousRequestInFlight) {
  StartServer(AsyncOptions());
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_THAT(c->Write(Post("/later", "inflight")), IsOk());
  ASSERT_TRUE(WaitFor([&] { return pending_.size() == 1; }));
  std::atomic<bool> shut{false};
  absl::Status shutdown;
  std::thread stopper([&] {
    shutdown = server_->Shutdown(absl::Seconds(20));
    shut = true;
  });
  // Draining: the request in flight holds the shutdown.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(shut.load());
  pending_.Answer(0);
  auto r = c->ReadResponse();
  stopper.join();
  EXPECT_THAT(shutdown, IsOk());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "{\"async\":\"inflight\"}");
  EXPECT_THAT(r->headers, HasSubstr("Connection: close"));
  server_.reset();  // shut down already
}

TEST_F(AsyncRouteTest, AnAnswerThatNeverComesGets503AtTheDeadlineAndTheLateOneIsDropped) {
  Options o = AsyncOptions();
  o.async_timeout = absl::Milliseconds(300);
  StartServer(std::move(o));
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Request("POST", "/later", "never");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 503);
  EXPECT_THAT(r->body, HasSubstr("DeadlineExceeded"));
  EXPECT_THAT(r->body, HasSubstr("no answer within"));
  ASSERT_EQ(pending_.size(), 1u);
  pending_.Answer(0);  // late: dropped
  // The connection goes on, and the late answer is not taken for the next.
  auto next = c->Request("POST", "/now", "after");
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(next->body, "{\"now\":\"after\"}");
}

TEST_F(AsyncRouteTest, AResponderDroppedUnansweredGets500) {
  Options o = AsyncOptions();
  o.routes.push_back(AsyncPost("/forgetful", [](HttpRequest, Responder) {}));  // a bug: no answer, ever
  StartServer(std::move(o));
  std::unique_ptr<TlsConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Request("POST", "/forgetful", "x");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 500);
}

TEST_F(AsyncRouteTest, ARouteNeedsExactlyOneKindOfHandler) {
  Options o = AsyncOptions();
  o.routes[0].handler = [](const HttpRequest&) { return HttpResponse(); };
  EXPECT_FALSE(Server::Create(std::move(o), registry_).ok());
}

}  // namespace
}  // namespace gangkeeper::server
