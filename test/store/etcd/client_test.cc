// Tests for the etcd v3 JSON-gateway client against a real etcd (Debian's
// etcd-server, started by test/testing/etcd_process.h on loopback ports).
// Most tests share one etcd and keep to their own key prefix; the outage
// tests own theirs, because they hang, kill and restart it. Every wait is
// bounded; timing checks are generous upper bounds only.
#include "gangkeeper/store/etcd/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A loopback port nobody listens on: connections are refused at once.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

std::unique_ptr<Client> NewClient(std::vector<std::string> endpoints, absl::Duration timeout = absl::Seconds(2),
                                  int max_attempts = 3) {
  ClientOptions o;
  o.endpoints = std::move(endpoints);
  o.timeout = timeout;
  o.max_attempts = max_attempts;
  o.backoff = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(std::move(o));
  EXPECT_THAT(c, IsOk());
  return c.ok() ? std::move(*c) : nullptr;
}

// What a watch delivered, for waiting on from the test thread.
class WatchRecorder {
 public:
  struct Call {
    std::vector<WatchEvent> events;
    int64_t revision = 0;
  };

  std::function<void(const std::vector<WatchEvent>&, int64_t)> OnEvents() {
    return [this](const std::vector<WatchEvent>& events, int64_t revision) {
      absl::MutexLock lock(&mu_);
      calls_.push_back({events, revision});
      if (events.empty()) {
        ++progress_;
      } else {
        event_count_ += events.size();
      }
    };
  }
  std::function<void(const absl::Status&)> OnEnd() {
    return [this](const absl::Status& why) {
      absl::MutexLock lock(&mu_);
      ends_.push_back(why);
    };
  }

  bool WaitForEvents(size_t n, absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n] {
      mu_.AssertReaderHeld();
      return event_count_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  bool WaitForProgress(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto seen = [this] {
      mu_.AssertReaderHeld();
      return progress_ > 0;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto ended = [this] {
      mu_.AssertReaderHeld();
      return !ends_.empty();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  }

  // The calls that carried events (progress notifications left out).
  std::vector<Call> EventCalls() {
    absl::MutexLock lock(&mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (!c.events.empty()) out.push_back(c);
    }
    return out;
  }
  std::vector<WatchEvent> Events() {
    std::vector<WatchEvent> out;
    for (const Call& c : EventCalls()) out.insert(out.end(), c.events.begin(), c.events.end());
    return out;
  }
  std::vector<Call> ProgressCalls() {
    absl::MutexLock lock(&mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (c.events.empty()) out.push_back(c);
    }
    return out;
  }
  size_t EventCount() {
    absl::MutexLock lock(&mu_);
    return event_count_;
  }
  std::vector<absl::Status> Ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  size_t event_count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t progress_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Status> ends_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// Pure functions and option checks.

TEST(ParseEndpointsTest, AcceptsOneOrMoreHostPorts) {
  struct Case {
    const char* name;
    const char* url;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"one endpoint", "etcd://127.0.0.1:2379", {"127.0.0.1:2379"}},
      {"several endpoints keep their order", "etcd://b.example:2379,a:1,10.0.0.1:65535",
       {"b.example:2379", "a:1", "10.0.0.1:65535"}},
      {"a service name", "etcd://etcd.gangkeeper-system.svc:2379", {"etcd.gangkeeper-system.svc:2379"}},
      {"an IPv6 address in brackets", "etcd://[::1]:2379", {"[::1]:2379"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<std::string>> got = ParseEndpoints(c.url);
    ASSERT_THAT(got, IsOk());
    EXPECT_EQ(*got, c.want);
  }
}

TEST(ParseEndpointsTest, RejectsBadUrlsNamingTheBadPart) {
  struct Case {
    const char* name;
    const char* url;
    const char* want_in_message;
  };
  const Case cases[] = {
      {"another scheme", "http://127.0.0.1:2379", "scheme"},
      {"no scheme", "127.0.0.1:2379", "scheme"},
      {"nothing after the scheme", "etcd://", "no endpoint"},
      {"no port", "etcd://127.0.0.1", "port"},
      {"an empty port", "etcd://127.0.0.1:", "port"},
      {"a port that is not a number", "etcd://127.0.0.1:http", "port"},
      {"port zero", "etcd://127.0.0.1:0", "port"},
      {"a port over 65535", "etcd://127.0.0.1:65536", "port"},
      {"a signed port", "etcd://127.0.0.1:+80", "port"},
      {"no host", "etcd://:2379", "host"},
      {"a path", "etcd://a/b:2379", "host"},
      {"an IPv6 address without brackets", "etcd://::1:2379", "host"},
      {"an empty second endpoint", "etcd://a:1,,b:2", "endpoint 2"},
      {"a trailing comma", "etcd://a:1,", "endpoint 2"},
      {"the bad endpoint is named", "etcd://a:1,b:x", "endpoint 2 \"b:x\""},
      {"a duplicate endpoint", "etcd://a:1,a:1", "twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<std::string>> got = ParseEndpoints(c.url);
    EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument, c.want_in_message));
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.url));
  }
}

TEST(PrefixEndTest, IncrementsTheLastByteThatCanBe) {
  EXPECT_EQ(PrefixEnd("a/"), "a0");
  EXPECT_EQ(PrefixEnd("gangkeeper/journal/"), "gangkeeper/journal0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(std::string("a\x00", 2)), std::string("a\x01", 2));
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(CreateTest, RejectsBadOptionsNamingTheField) {
  struct Case {
    const char* name;
    ClientOptions options;
    const char* want_in_message;
  };
  auto with = [](auto change) {
    ClientOptions o;
    o.endpoints = {"127.0.0.1:2379"};
    change(o);
    return o;
  };
  const Case cases[] = {
      {"no endpoints", with([](ClientOptions& o) { o.endpoints.clear(); }), "endpoints"},
      {"an endpoint without port", with([](ClientOptions& o) { o.endpoints = {"a:1", "b"}; }), "endpoints[1]"},
      {"a URL instead of host:port", with([](ClientOptions& o) { o.endpoints = {"http://a:1"}; }), "endpoints[0]"},
      {"a zero timeout", with([](ClientOptions& o) { o.timeout = absl::ZeroDuration(); }), "timeout"},
      {"no attempts", with([](ClientOptions& o) { o.max_attempts = 0; }), "max_attempts"},
      {"a negative backoff", with([](ClientOptions& o) { o.backoff = absl::Milliseconds(-1); }), "backoff"},
      {"a certificate without key", with([](ClientOptions& o) { o.cert_file = "/nonexistent/c.pem"; }), "key_file"},
      {"a missing CA file", with([](ClientOptions& o) { o.ca_file = "/nonexistent/ca.pem"; }), "ca_file"},
      {"a CA file that is not PEM", with([](ClientOptions& o) { o.ca_file = "/etc/hostname"; }), "ca_file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(Client::Create(c.options), StatusIs(absl::StatusCode::kInvalidArgument, c.want_in_message));
  }
}

// ---------------------------------------------------------------------------
// Against one shared etcd.

class EtcdClientTest : public testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient({etcd_->endpoint()});
    ASSERT_NE(client_, nullptr);
    prefix_ = absl::StrCat("test/", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  }

  std::string Key(absl::string_view name) const { return absl::StrCat(prefix_, name); }

  int64_t MustPut(const std::string& key, const std::string& value, int64_t lease = 0) {
    absl::StatusOr<int64_t> rev = client_->Put(key, value, lease);
    EXPECT_THAT(rev, IsOk());
    return rev.ok() ? *rev : 0;
  }

  std::unique_ptr<Client> client_;
  std::string prefix_;
};


TEST_F(EtcdClientTest, PutThenRangeReturnsTheKeyWithItsRevisions) {
  const int64_t first = MustPut(Key("a"), "one");
  const int64_t second = MustPut(Key("a"), "two");
  EXPECT_GT(first, 0);
  EXPECT_EQ(second, first + 1);

  absl::StatusOr<RangeResult> r = client_->Range(Key("a"));
  ASSERT_THAT(r, IsOk());
  EXPECT_GE(r->revision, second);
  EXPECT_EQ(r->count, 1);
  EXPECT_FALSE(r->more);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, Key("a"));
  EXPECT_EQ(r->kvs[0].value, "two");
  EXPECT_EQ(r->kvs[0].create_revision, first);
  EXPECT_EQ(r->kvs[0].mod_revision, second);
  EXPECT_EQ(r->kvs[0].version, 2);
  EXPECT_EQ(r->kvs[0].lease, 0);
}

TEST_F(EtcdClientTest, RangeOfAMissingKeyIsEmptyNotAnError) {
  absl::StatusOr<RangeResult> r = client_->Range(Key("missing"));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty());
  EXPECT_EQ(r->count, 0);
  EXPECT_GT(r->revision, 0);
}

TEST_F(EtcdClientTest, RangeOverAPrefixIsSortedAndStaysInsideIt) {
  MustPut(Key("p/b"), "2");
  MustPut(Key("p/a"), "1");
  MustPut(Key("p/c"), "3");
  MustPut(Key("p0"), "outside");  // the byte after '/'
  MustPut(Key("p"), "outside");

  RangeOptions o;
  o.range_end = PrefixEnd(Key("p/"));
  absl::StatusOr<RangeResult> r = client_->Range(Key("p/"), o);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 3u);
  EXPECT_EQ(r->kvs[0].key, Key("p/a"));
  EXPECT_EQ(r->kvs[1].key, Key("p/b"));
  EXPECT_EQ(r->kvs[2].key, Key("p/c"));
  EXPECT_EQ(r->count, 3);
  EXPECT_FALSE(r->more);
}

TEST_F(EtcdClientTest, RangeWithLimitSaysThereIsMore) {
  for (const char* k : {"a", "b", "c", "d"}) MustPut(Key(k), k);
  RangeOptions o;
  o.range_end = PrefixEnd(prefix_);
  o.limit = 2;
  absl::StatusOr<RangeResult> r = client_->Range(prefix_, o);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0].key, Key("a"));
  EXPECT_EQ(r->kvs[1].key, Key("b"));
  EXPECT_TRUE(r->more);
  EXPECT_EQ(r->count, 4);

  // The next page starts after the last key seen.
  RangeOptions next = o;
  absl::StatusOr<RangeResult> r2 = client_->Range(r->kvs.back().key + std::string(1, '\0'), next);
  ASSERT_THAT(r2, IsOk());
  ASSERT_EQ(r2->kvs.size(), 2u);
  EXPECT_EQ(r2->kvs[0].key, Key("c"));
  EXPECT_FALSE(r2->more);
}

TEST_F(EtcdClientTest, RangeAtARevisionReadsThePast) {
  const int64_t old_rev = MustPut(Key("k"), "old");
  MustPut(Key("k"), "new");
  RangeOptions o;
  o.revision = old_rev;
  absl::StatusOr<RangeResult> r = client_->Range(Key("k"), o);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "old");
  EXPECT_EQ(r->kvs[0].mod_revision, old_rev);

  o.revision = r->revision + 1000000;
  EXPECT_THAT(client_->Range(Key("k"), o), StatusIs(absl::StatusCode::kOutOfRange, "future revision"));
}

TEST_F(EtcdClientTest, KeysOnlyAndCountOnly) {
  MustPut(Key("x/1"), "value-1");
  MustPut(Key("x/2"), "value-2");
  RangeOptions o;
  o.range_end = PrefixEnd(Key("x/"));
  o.keys_only = true;
  absl::StatusOr<RangeResult> keys = client_->Range(Key("x/"), o);
  ASSERT_THAT(keys, IsOk());
  ASSERT_EQ(keys->kvs.size(), 2u);
  EXPECT_EQ(keys->kvs[0].key, Key("x/1"));
  EXPECT_EQ(keys->kvs[0].value, "");
  EXPECT_GT(keys->kvs[0].mod_revision, 0);

  o.keys_only = false;
  o.count_only = true;
  absl::StatusOr<RangeResult> count = client_->Range(Key("x/"), o);
  ASSERT_THAT(count, IsOk());
  EXPECT_THAT(count->kvs, IsEmpty());
  EXPECT_EQ(count->count, 2);
}

TEST_F(EtcdClientTest, BinaryKeysAndValuesRoundTrip) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const std::string key = Key(std::string("bin\0\xff\xfe/\x80", 8));
  const std::string not_utf8 = std::string("\xc3\x28 \xa0\xa1 \0 end", 11);
  MustPut(key, every_byte);
  MustPut(Key("not-utf8"), not_utf8);
  MustPut(Key("empty"), "");

  absl::StatusOr<RangeResult> r = client_->Range(key);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, key);
  EXPECT_EQ(r->kvs[0].value, every_byte);

  r = client_->Range(Key("not-utf8"));
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, not_utf8);

  r = client_->Range(Key("empty"));
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);  // present, with the empty value etcd leaves out
  EXPECT_EQ(r->kvs[0].value, "");
}

TEST_F(EtcdClientTest, DeleteReturnsHowManyKeysWent) {
  MustPut(Key("one"), "1");
  for (const char* k : {"d/a", "d/b", "d/c"}) MustPut(Key(k), "v");

  absl::StatusOr<std::pair<int64_t, int64_t>> d = client_->Delete(Key("one"));
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->second, 1);
  const int64_t rev = d->first;

  d = client_->Delete(Key("one"));
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->second, 0);
  EXPECT_EQ(d->first, rev);  // nothing deleted: the revision stays

  d = client_->Delete(Key("d/"), PrefixEnd(Key("d/")));
  ASSERT_THAT(d, IsOk());
  EXPECT_EQ(d->second, 3);
  EXPECT_EQ(d->first, rev + 1);  // one revision for the whole range
  absl::StatusOr<RangeResult> r = client_->Range(Key("d/a"));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty());
}

TEST_F(EtcdClientTest, RefusedRequestIsInvalidArgumentWithEtcdsMessage) {
  EXPECT_THAT(client_->Range(""), StatusIs(absl::StatusCode::kInvalidArgument, "key is not provided"));
  EXPECT_THAT(client_->Put("", "v"), StatusIs(absl::StatusCode::kInvalidArgument, "key is not provided"));
}

TEST_F(EtcdClientTest, TxnCreateIfAbsentRunsOnceOnly) {
  const std::string k = Key("lock");
  absl::StatusOr<TxnResult> t = client_->Txn({Compare::Absent(k)}, {Op::Put(k, "mine")}, {Op::Get(k)});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
  ASSERT_EQ(t->responses.size(), 1u);
  EXPECT_THAT(t->responses[0], IsEmpty());  // a put has no kvs
  const int64_t created = t->revision;

  t = client_->Txn({Compare::Absent(k)}, {Op::Put(k, "theirs")}, {Op::Get(k)});
  ASSERT_THAT(t, IsOk());
  EXPECT_FALSE(t->succeeded);
  EXPECT_EQ(t->revision, created);  // nothing written
  ASSERT_EQ(t->responses.size(), 1u);
  ASSERT_EQ(t->responses[0].size(), 1u);
  EXPECT_EQ(t->responses[0][0].value, "mine");
  EXPECT_EQ(t->responses[0][0].create_revision, created);
}

TEST_F(EtcdClientTest, TxnOnModRevisionIsACompareAndSwap) {
  const std::string k = Key("cas");
  const int64_t rev = MustPut(k, "v1");
  absl::StatusOr<TxnResult> t = client_->Txn({Compare::ModRevision(k, rev)}, {Op::Put(k, "v2")});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
  EXPECT_EQ(t->revision, rev + 1);

  // The same compare again is stale now: the failure branch runs.
  t = client_->Txn({Compare::ModRevision(k, rev)}, {Op::Put(k, "v3")},
                   {Op::Get(k), Op::Get(Key("c"), PrefixEnd(Key("c")))});
  ASSERT_THAT(t, IsOk());
  EXPECT_FALSE(t->succeeded);
  ASSERT_EQ(t->responses.size(), 2u);
  ASSERT_EQ(t->responses[0].size(), 1u);
  EXPECT_EQ(t->responses[0][0].value, "v2");
  EXPECT_EQ(t->responses[0][0].mod_revision, rev + 1);
  ASSERT_EQ(t->responses[1].size(), 1u);  // the prefix "c" holds only "cas"
  EXPECT_EQ(t->responses[1][0].key, k);
}

TEST_F(EtcdClientTest, TxnOnValueAndOtherTargets) {
  const std::string k = Key("v");
  MustPut(k, "expected");
  absl::StatusOr<TxnResult> t =
      client_->Txn({Compare::ValueIs(k, "expected")}, {Op::Put(k, "next"), Op::Put(Key("other"), "x"), Op::Get(k)});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
  ASSERT_EQ(t->responses.size(), 3u);
  ASSERT_EQ(t->responses[2].size(), 1u);
  EXPECT_EQ(t->responses[2][0].value, "next");  // ops of one txn see the earlier ones

  t = client_->Txn({Compare::ValueIs(k, "expected")}, {Op::Put(k, "never")});
  ASSERT_THAT(t, IsOk());
  EXPECT_FALSE(t->succeeded);
  EXPECT_THAT(t->responses, IsEmpty());

  Compare version_over_one{k, Compare::Target::kVersion, Compare::Result::kGreater, 1, "", ""};
  Compare no_lease{k, Compare::Target::kLease, Compare::Result::kEqual, 0, "", ""};
  Compare not_value{k, Compare::Target::kValue, Compare::Result::kNotEqual, 0, "expected", ""};
  t = client_->Txn({version_over_one, no_lease, not_value}, {Op::Delete(k)});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
  absl::StatusOr<RangeResult> r = client_->Range(k);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty());

  // A compare over a range: every key under the prefix has version < 5.
  Compare all_young{Key("o"), Compare::Target::kVersion, Compare::Result::kLess, 5, "", PrefixEnd(Key("o"))};
  t = client_->Txn({all_young}, {Op::Delete(Key("o"), PrefixEnd(Key("o")))});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);
}

TEST_F(EtcdClientTest, TxnThatEtcdRefusesIsInvalidArgument) {
  // etcd refuses two writes of one key in one transaction.
  EXPECT_THAT(client_->Txn({}, {Op::Put(Key("dup"), "1"), Op::Put(Key("dup"), "2")}),
              StatusIs(absl::StatusCode::kInvalidArgument, "duplicate key"));
}

TEST_F(EtcdClientTest, LeaseLifecycle) {
  absl::StatusOr<LeaseGrant> g = client_->Grant(absl::Seconds(30));
  ASSERT_THAT(g, IsOk());
  EXPECT_NE(g->id, 0);
  EXPECT_EQ(g->ttl_seconds, 30);

  const std::string k = Key("owned");
  MustPut(k, "while alive", g->id);
  absl::StatusOr<RangeResult> r = client_->Range(k);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].lease, g->id);

  absl::StatusOr<int64_t> ttl = client_->TimeToLive(g->id);
  ASSERT_THAT(ttl, IsOk());
  EXPECT_GT(*ttl, 0);
  EXPECT_LE(*ttl, 30);
  absl::StatusOr<int64_t> renewed = client_->KeepAlive(g->id);
  ASSERT_THAT(renewed, IsOk());
  EXPECT_EQ(*renewed, 30);

  // Compare on the lease a key is attached to.
  const Compare on_lease{k, Compare::Target::kLease, Compare::Result::kEqual, g->id, "", ""};
  absl::StatusOr<TxnResult> t = client_->Txn({on_lease}, {});
  ASSERT_THAT(t, IsOk());
  EXPECT_TRUE(t->succeeded);

  ASSERT_THAT(client_->Revoke(g->id), IsOk());
  r = client_->Range(k);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty()) << "the key attached to the lease goes with it";

  EXPECT_THAT(client_->KeepAlive(g->id), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(client_->TimeToLive(g->id), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(client_->Revoke(g->id), StatusIs(absl::StatusCode::kNotFound, "lease not found"));
  EXPECT_THAT(client_->Put(Key("late"), "v", g->id), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(EtcdClientTest, ExpiredLeaseIsNotFoundAndTakesItsKeys) {
  // The harness's etcd has a 1 s minimum TTL (1.5 election timeouts).
  absl::StatusOr<LeaseGrant> g = client_->Grant(absl::Seconds(1));
  ASSERT_THAT(g, IsOk());
  ASSERT_EQ(g->ttl_seconds, 1);
  MustPut(Key("ephemeral"), "v", g->id);
  base::Stopwatch waited;
  absl::StatusOr<int64_t> ttl = client_->TimeToLive(g->id);
  while (ttl.ok() && waited.Elapsed() < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(100));
    ttl = client_->TimeToLive(g->id);
  }
  EXPECT_THAT(ttl, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(client_->KeepAlive(g->id), StatusIs(absl::StatusCode::kNotFound, "expired"));
  absl::StatusOr<RangeResult> r = client_->Range(Key("ephemeral"));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty());
}

TEST_F(EtcdClientTest, GrantRoundsUpToWholeSecondsAndRefusesLess) {
  absl::StatusOr<LeaseGrant> g = client_->Grant(absl::Milliseconds(10500));
  ASSERT_THAT(g, IsOk());
  EXPECT_EQ(g->ttl_seconds, 11);
  EXPECT_THAT(client_->Revoke(g->id), IsOk());
  EXPECT_THAT(client_->Grant(absl::Milliseconds(500)), StatusIs(absl::StatusCode::kInvalidArgument, "ttl"));
}

TEST_F(EtcdClientTest, WatchDeliversPutsAndDeletesInOrder) {
  WatchRecorder rec;
  WatchOptions o;
  o.range_end = PrefixEnd(prefix_);
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(prefix_, o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());

  const int64_t r1 = MustPut(Key("a"), "1");
  const int64_t r2 = MustPut(Key("a"), "2");
  absl::StatusOr<std::pair<int64_t, int64_t>> d = client_->Delete(Key("a"));
  ASSERT_THAT(d, IsOk());
  absl::StatusOr<TxnResult> t = client_->Txn({}, {Op::Put(Key("b"), "b"), Op::Put(Key("c"), "c")});
  ASSERT_THAT(t, IsOk());

  ASSERT_TRUE(rec.WaitForEvents(5)) << "got " << rec.EventCount() << " events";
  std::vector<WatchEvent> ev = rec.Events();
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(ev[0].kv.key, Key("a"));
  EXPECT_EQ(ev[0].kv.value, "1");
  EXPECT_EQ(ev[0].kv.mod_revision, r1);
  EXPECT_EQ(ev[0].kv.version, 1);
  EXPECT_EQ(ev[1].kv.value, "2");
  EXPECT_EQ(ev[1].kv.mod_revision, r2);
  EXPECT_EQ(ev[1].kv.create_revision, r1);
  EXPECT_EQ(ev[2].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(ev[2].kv.key, Key("a"));
  EXPECT_EQ(ev[2].kv.mod_revision, d->first);
  EXPECT_EQ(ev[3].kv.key, Key("b"));
  EXPECT_EQ(ev[4].kv.key, Key("c"));
  EXPECT_EQ(ev[3].kv.mod_revision, t->revision);
  EXPECT_EQ(ev[4].kv.mod_revision, t->revision);

  // One call per etcd response: both events of the txn's revision together,
  // each call's revision at least its events' revision.
  std::vector<WatchRecorder::Call> calls = rec.EventCalls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].events.size(), 2u);
  int64_t last = 0;
  for (const WatchRecorder::Call& c : calls) {
    EXPECT_GE(c.revision, c.events.back().kv.mod_revision);
    EXPECT_GT(c.events.front().kv.mod_revision, last);
    last = c.events.back().kv.mod_revision;
  }
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, WatchFromAStartRevisionReplaysHistory) {
  const int64_t r1 = MustPut(Key("h"), "1");
  MustPut(Key("h"), "2");
  const int64_t r3 = MustPut(Key("h"), "3");

  WatchRecorder rec;
  WatchOptions o;
  o.start_revision = r1;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("h"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForEvents(3));
  std::vector<WatchEvent> ev = rec.Events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kv.value, "1");
  EXPECT_EQ(ev[1].kv.value, "2");
  EXPECT_EQ(ev[2].kv.value, "3");
  EXPECT_EQ(ev[2].kv.mod_revision, r3);

  // And then the live changes.
  MustPut(Key("h"), "4");
  ASSERT_TRUE(rec.WaitForEvents(4));
  EXPECT_EQ(rec.Events().back().kv.value, "4");
}

TEST_F(EtcdClientTest, WatchOfAKeyOrPrefixSeesNothingElse) {
  WatchRecorder key_rec, prefix_rec;
  absl::StatusOr<std::unique_ptr<Watch>> key_watch =
      client_->StartWatch(Key("w/x"), {}, key_rec.OnEvents(), key_rec.OnEnd());
  ASSERT_THAT(key_watch, IsOk());
  WatchOptions o;
  o.range_end = PrefixEnd(Key("w/"));
  absl::StatusOr<std::unique_ptr<Watch>> prefix_watch =
      client_->StartWatch(Key("w/"), o, prefix_rec.OnEvents(), prefix_rec.OnEnd());
  ASSERT_THAT(prefix_watch, IsOk());

  MustPut(Key("w0"), "outside");
  MustPut(Key("w"), "outside");
  MustPut(Key("w/y"), "inside");
  MustPut(Key("w/x"), "inside");
  ASSERT_TRUE(prefix_rec.WaitForEvents(2));
  ASSERT_TRUE(key_rec.WaitForEvents(1));
  std::vector<WatchEvent> ev = prefix_rec.Events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kv.key, Key("w/y"));
  EXPECT_EQ(ev[1].kv.key, Key("w/x"));
  ev = key_rec.Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv.key, Key("w/x"));
}

TEST_F(EtcdClientTest, WatchProgressNotificationsAreEmptyLists) {
  // The harness sets etcd's progress interval to 1 s.
  const int64_t rev = MustPut(Key("p"), "v");
  WatchRecorder rec;
  WatchOptions o;
  o.progress_notify = true;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("p"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForProgress(absl::Seconds(5)));
  std::vector<WatchRecorder::Call> progress = rec.ProgressCalls();
  ASSERT_FALSE(progress.empty());
  EXPECT_GE(progress[0].revision, rev);
}

TEST_F(EtcdClientTest, CancelStopsTheWatchPromptlyAndForGood) {
  WatchRecorder rec, witness;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("c"), {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<std::unique_ptr<Watch>> other =
      client_->StartWatch(Key("c"), {}, witness.OnEvents(), witness.OnEnd());
  ASSERT_THAT(other, IsOk());
  MustPut(Key("c"), "1");
  ASSERT_TRUE(rec.WaitForEvents(1));

  base::Stopwatch took;
  (*w)->Cancel();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  MustPut(Key("c"), "2");
  ASSERT_TRUE(witness.WaitForEvents(2));  // etcd sent the change out
  EXPECT_EQ(rec.EventCount(), 1u);
  w->reset();  // joins the thread
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(rec.Ends(), IsEmpty()) << "Cancel() is not an end";

  // Destroying a watch without Cancel() is as quick.
  took.Reset();
  other->reset();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(witness.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, CancelFromInsideTheCallbackEndsTheWatch) {
  WatchRecorder rec;
  std::unique_ptr<Watch> w;
  absl::Mutex mu;
  absl::StatusOr<std::unique_ptr<Watch>> started = client_->StartWatch(
      Key("self"), {},
      [&](const std::vector<WatchEvent>& events, int64_t revision) {
        {
          absl::MutexLock lock(&mu);
          if (!events.empty()) w->Cancel();
        }
        rec.OnEvents()(events, revision);  // after Cancel(): the test waits for this
      },
      rec.OnEnd());
  ASSERT_THAT(started, IsOk());
  {
    absl::MutexLock lock(&mu);
    w = std::move(*started);
  }
  MustPut(Key("self"), "1");
  ASSERT_TRUE(rec.WaitForEvents(1));
  std::unique_ptr<Watch> doomed;
  {
    absl::MutexLock lock(&mu);
    doomed = std::move(w);
  }
  base::Stopwatch took;
  doomed.reset();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionEndsWithOutOfRange) {
  const int64_t r1 = MustPut(Key("old"), "1");
  const int64_t r2 = MustPut(Key("old"), "2");
  ASSERT_THAT(client_->Compact(r2), IsOk());
  // Compacted history cannot be read either.
  RangeOptions ro;
  ro.revision = r1;
  EXPECT_THAT(client_->Range(Key("old"), ro), StatusIs(absl::StatusCode::kOutOfRange, "compacted"));
  EXPECT_THAT(client_->Compact(r1), StatusIs(absl::StatusCode::kOutOfRange));

  WatchRecorder rec;
  WatchOptions o;
  o.start_revision = r1;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("old"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForEnd());
  std::vector<absl::Status> ends = rec.Ends();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_THAT(ends[0], StatusIs(absl::StatusCode::kOutOfRange, "compacted"));
  EXPECT_EQ(rec.EventCount(), 0u);
}

TEST_F(EtcdClientTest, WatchOfAnEmptyRangeIsRefused) {
  WatchRecorder rec;
  WatchOptions o;
  o.range_end = Key("a");  // before the key itself
  EXPECT_THAT(client_->StartWatch(Key("z"), o, rec.OnEvents(), rec.OnEnd()),
              StatusIs(absl::StatusCode::kInvalidArgument, "range is empty"));
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

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
       certs.File("client.key"), absl::StatusCode::kUnavailable, "SSLServerVerification"},
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
