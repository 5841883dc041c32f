// Tests for the etcd v3 JSON-gateway client against a real etcd (Debian's
// etcd-server, started by test/testing/etcd_process.h on loopback ports):
// the pure functions and option checks, then ranges, puts, deletes,
// transactions and leases. Watches are in watch_test.cc, failover, outages
// and TLS in transport_test.cc. Every wait is bounded; timing checks are
// generous upper bounds only.
#include "gangkeeper/store/etcd/client.h"

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
#include "test/testing/status_matchers.h"

namespace gangkeeper::etcd {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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
// Against one shared etcd (EtcdClientTest, client_fixture.h).

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

}  // namespace
}  // namespace gangkeeper::etcd
