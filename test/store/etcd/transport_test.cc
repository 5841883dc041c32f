// Tests for the etcd client's transport against a real etcd (see
// client_test.cc): failover between endpoints, outages (each test owns its
// etcd, because it hangs, kills and restarts it) and TLS.
#include <signal.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/store/etcd/client_fixture.h"
#include "test/testing/etcd_process.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::etcd {
namespace {

using ::gangkeeper::testing::EtcdProcess;
using ::gangkeeper::testing::EtcdTls;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::MakeEtcdCerts;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(EtcdClientTest, FailsOverFromADeadFirstEndpoint) {
  // A transaction first: a refused connection surely did not reach etcd,
  // so even a transaction moves on to the next endpoint.
  std::unique_ptr<Client> c = NewClient({absl::StrCat("127.0.0.1:", ClosedPort()), etcd_->endpoint()},
                                        absl::Seconds(2), /*max_attempts=*/2);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<TxnResult> t = c->Txn({Compare::Absent(Key("f"))}, {Op::Put(Key("f"), "v")});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
  absl::StatusOr<int64_t> rev = c->Put(Key("f"), "w");
  ASSERT_THAT(rev, IsOk());
  EXPECT_GT(*rev, t->revision);

  WatchRecorder rec;
  std::unique_ptr<Client> fresh = NewClient({absl::StrCat("127.0.0.1:", ClosedPort()), etcd_->endpoint()},
                                            absl::Seconds(2), /*max_attempts=*/2);
  ASSERT_NE(fresh, nullptr);
  absl::StatusOr<std::unique_ptr<Watch>> w = fresh->StartWatch(Key("f"), {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  MustPut(Key("f"), "x");
  ASSERT_TRUE(rec.WaitForEvents(1));

  // One attempt only: the dead endpoint is all it gets.
  std::unique_ptr<Client> once = NewClient({absl::StrCat("127.0.0.1:", ClosedPort()), etcd_->endpoint()},
                                           absl::Seconds(2), /*max_attempts=*/1);
  ASSERT_NE(once, nullptr);
  EXPECT_THAT(once->Range(Key("f")), StatusIs(absl::StatusCode::kUnavailable, "no etcd endpoint answered"));
}

// ---------------------------------------------------------------------------
// Outages: each test owns its etcd.

TEST(EtcdOutageTest, KilledEtcdIsUnavailableQuicklyAndRestartRecovers) {
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_THAT(etcd, IsOk());
  const absl::Duration timeout = absl::Seconds(1);
  const int attempts = 3;
  std::unique_ptr<Client> c = NewClient({(*etcd)->endpoint()}, timeout, attempts);
  ASSERT_NE(c, nullptr);
  ASSERT_THAT(c->Put("k", "before"), IsOk());

  WatchRecorder rec;
  absl::StatusOr<std::unique_ptr<Watch>> w = c->StartWatch("k", {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());

  (*etcd)->Kill();
  // The running watch ends, with a reason to start again.
  ASSERT_TRUE(rec.WaitForEnd());
  EXPECT_THAT(rec.Ends()[0], StatusIs(absl::StatusCode::kUnavailable));

  // Bounded by the attempts' timeouts and backoffs; a refused connection
  // is much quicker.
  const absl::Duration bound = timeout * attempts + absl::Milliseconds(50 + 100) + absl::Seconds(4);
  base::Stopwatch took;
  EXPECT_THAT(c->Put("k", "during"), StatusIs(absl::StatusCode::kUnavailable, "no etcd endpoint answered"));
  EXPECT_LT(took.Elapsed(), bound);
  took.Reset();
  absl::StatusOr<TxnResult> t = c->Txn({}, {Op::Put("k", "during")});
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(t.status().message()), ::testing::Not(HasSubstr("outcome unknown")))
      << "a refused connection is not an unknown outcome";
  EXPECT_LT(took.Elapsed(), bound);
  WatchRecorder rec2;
  took.Reset();
  EXPECT_THAT(c->StartWatch("k", {}, rec2.OnEvents(), rec2.OnEnd()), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(took.Elapsed(), bound);

  ASSERT_THAT((*etcd)->Restart(), IsOk());
  // The same client works again; what was written before the kill is there.
  absl::StatusOr<RangeResult> r = c->Range("k");
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "before");
  WatchRecorder rec3;
  WatchOptions o;
  o.start_revision = r->kvs[0].mod_revision + 1;  // resume after the last revision seen
  absl::StatusOr<std::unique_ptr<Watch>> w3 = c->StartWatch("k", o, rec3.OnEvents(), rec3.OnEnd());
  ASSERT_THAT(w3, IsOk());
  ASSERT_THAT(c->Put("k", "after"), IsOk());
  ASSERT_TRUE(rec3.WaitForEvents(1));
  EXPECT_EQ(rec3.Events()[0].kv.value, "after");
}

TEST(EtcdOutageTest, PooledConnectionsSurviveAGracefulRestart) {
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_THAT(etcd, IsOk());
  std::unique_ptr<Client> c = NewClient({(*etcd)->endpoint()}, absl::Seconds(2), /*max_attempts=*/1);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<int64_t> rev = c->Put("k", "v1");  // leaves a keep-alive connection in the pool
  ASSERT_THAT(rev, IsOk());

  WatchRecorder rec;
  absl::StatusOr<std::unique_ptr<Watch>> w = c->StartWatch("k", {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT((*etcd)->Restart(), IsOk());  // SIGTERM: etcd closes its connections
  ASSERT_TRUE(rec.WaitForEnd());
  EXPECT_THAT(rec.Ends()[0], StatusIs(absl::StatusCode::kUnavailable));

  // With a single attempt, the stale pooled connection must not be used: a
  // transaction on it would fail after being sent, with an unknown outcome.
  absl::StatusOr<TxnResult> t = c->Txn({Compare::ModRevision("k", *rev)}, {Op::Put("k", "v2")});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
}

TEST(EtcdOutageTest, HungEtcdTimesOutAndCancelStillReturnsPromptly) {
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_THAT(etcd, IsOk());
  const absl::Duration timeout = absl::Milliseconds(500);
  std::unique_ptr<Client> c = NewClient({(*etcd)->endpoint()}, timeout, /*max_attempts=*/2);
  ASSERT_NE(c, nullptr);
  ASSERT_THAT(c->Put("k", "v"), IsOk());
  WatchRecorder rec;
  absl::StatusOr<std::unique_ptr<Watch>> w = c->StartWatch("k", {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());

  // Stopped: connections are accepted by the kernel and never answered.
  ASSERT_THAT((*etcd)->Freeze(), IsOk());
  const absl::Duration bound = timeout * 2 + absl::Milliseconds(50) + absl::Seconds(4);
  base::Stopwatch took;
  EXPECT_THAT(c->Range("k"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(took.Elapsed(), bound);
  took.Reset();
  absl::StatusOr<TxnResult> t = c->Txn({}, {Op::Put("k", "w")});
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kUnavailable, "outcome unknown"));
  EXPECT_LT(took.Elapsed(), bound);
  took.Reset();
  WatchRecorder rec2;
  EXPECT_THAT(c->StartWatch("k", {}, rec2.OnEvents(), rec2.OnEnd()), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(took.Elapsed(), bound);

  // The watch's read has no data coming; Cancel() cuts it anyway.
  took.Reset();
  (*w)->Cancel();
  w->reset();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(rec.Ends(), IsEmpty());
  (*etcd)->Thaw();
}

// ---------------------------------------------------------------------------
// TLS: a CA, etcd's certificate for 127.0.0.1 and a client certificate
// (testing::MakeEtcdCerts).

TEST(EtcdTlsTest, VerifiesEtcdAndPresentsAClientCertificate) {
  TempDir certs, other_ca;
  absl::StatusOr<EtcdTls> tls = MakeEtcdCerts(certs.path());
  ASSERT_THAT(tls, IsOk());
  ASSERT_THAT(MakeEtcdCerts(other_ca.path()), IsOk());
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::StartTls(*tls);
  ASSERT_THAT(etcd, IsOk());

  ClientOptions o;
  o.endpoints = {(*etcd)->endpoint()};
  o.ca_file = certs.File("ca.crt");
  o.cert_file = certs.File("client.crt");
  o.key_file = certs.File("client.key");
  o.timeout = absl::Seconds(2);
  o.max_attempts = 1;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(o);
  ASSERT_THAT(c, IsOk());
  absl::StatusOr<int64_t> rev = (*c)->Put("k", "v1");
  ASSERT_THAT(rev, IsOk());
  WatchRecorder rec;
  absl::StatusOr<std::unique_ptr<Watch>> w = (*c)->StartWatch("k", {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_THAT((*c)->Put("k", "v2"), IsOk());
  ASSERT_TRUE(rec.WaitForEvents(1));
  w->reset();

  // A graceful restart closes the pooled connection with a TLS close_notify,
  // which leaves the idle socket readable rather than at EOF. A transaction
  // with one attempt must not go out on it (it would fail after being sent,
  // with an unknown outcome).
  absl::StatusOr<int64_t> rev2 = (*c)->Put("k", "v3");
  ASSERT_THAT(rev2, IsOk());
  ASSERT_THAT((*etcd)->Restart(), IsOk());
  absl::StatusOr<TxnResult> t = (*c)->Txn({Compare::ModRevision("k", *rev2)}, {Op::Put("k", "v4")});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);

  struct Case {
    const char* name;
    std::string ca, cert, key;
    absl::StatusCode want_code;
    const char* want_in_message;
  };
  const Case cases[] = {
      {"etcd's certificate is not from the configured CA", other_ca.File("ca.crt"), certs.File("client.crt"),
       certs.File("client.key"), absl::StatusCode::kUnavailable, "certificate is not trusted"},
      {"no client certificate", certs.File("ca.crt"), "", "", absl::StatusCode::kUnavailable, ""},
      {"a client certificate from another CA", certs.File("ca.crt"), other_ca.File("client.crt"),
       other_ca.File("client.key"), absl::StatusCode::kUnavailable, ""},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    ClientOptions bad = o;
    bad.ca_file = tc.ca;
    bad.cert_file = tc.cert;
    bad.key_file = tc.key;
    absl::StatusOr<std::unique_ptr<Client>> bc = Client::Create(bad);
    ASSERT_THAT(bc, IsOk());
    EXPECT_THAT((*bc)->Range("k"), StatusIs(tc.want_code, tc.want_in_message));
  }
}

}  // namespace
}  // namespace gangkeeper::etcd
