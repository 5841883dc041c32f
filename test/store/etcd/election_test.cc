// Tests for the lease-based leader election, against a real etcd (Debian's
// etcd-server, started by test/testing/etcd_process.h on loopback ports).
// Most tests share one etcd and use a leader key of their own; the outage
// test owns its etcd because it kills and restarts it. Settings are short
// (ttl 2 s, renew 500 ms, retry 100 ms) to keep the binary quick. Every
// wait is bounded; timing checks are generous upper bounds only. The
// "never two leaders" checks sample Leading() of every elector every few
// milliseconds on a monitor thread for the whole test.
#include "gangkeeper/store/etcd/election.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/etcd/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_process.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::etcd {
namespace {

using ::gangkeeper::testing::EtcdProcess;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kTtl = absl::Seconds(2);
constexpr absl::Duration kRenew = absl::Milliseconds(500);
constexpr absl::Duration kRetry = absl::Milliseconds(100);
// How long an election may take when nothing is in its way.
constexpr absl::Duration kElectBound = absl::Seconds(5);

ElectionOptions Options(const std::string& key, const std::string& identity) {
  ElectionOptions o;
  o.key = key;
  o.identity = identity;
  o.ttl = kTtl;
  o.renew = kRenew;
  o.retry = kRetry;
  return o;
}

std::unique_ptr<Client> NewClient(const std::string& endpoint) {
  ClientOptions o;
  o.endpoints = {endpoint};
  o.timeout = absl::Seconds(1);
  o.max_attempts = 2;
  o.backoff = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(std::move(o));
  EXPECT_THAT(c, IsOk());
  return c.ok() ? std::move(*c) : nullptr;
}

// Polls `cond` every 10 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& cond, absl::Duration timeout) {
  base::Stopwatch waited;
  while (waited.Elapsed() < timeout) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return cond();
}

// Orders callbacks of different electors against each other.
std::atomic<int64_t> g_sequence{0};

// What an elector's callbacks reported, and whether they came in order
// (elected, lost, elected, ...; a loss names the term that was won) and one
// at a time.
class Recorder {
 public:
  struct Event {
    bool elected = false;
    Term term;
    absl::Status why;
    int64_t sequence = 0;
  };
  using LostHook = std::function<void(const Term&, const absl::Status&)>;

  // `on_lost` runs inside the elector's on_lost, before it is recorded.
  explicit Recorder(LostHook on_lost = nullptr) : on_lost_(std::move(on_lost)) {}

  ElectionCallbacks Callbacks() {
    ElectionCallbacks c;
    c.on_elected = [this](const Term& term) { Add(true, term, absl::OkStatus()); };
    c.on_lost = [this](const Term& term, const absl::Status& why) {
      if (on_lost_) on_lost_(term, why);
      Add(false, term, why);
    };
    return c;
  }

  bool WaitForEvents(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }

  std::vector<Event> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  std::vector<std::string> Problems() {
    absl::MutexLock lock(&mu_);
    return problems_;
  }

 private:
  void Add(bool elected, const Term& term, const absl::Status& why) {
    const bool overlapping = in_callback_.exchange(true);
    {
      absl::MutexLock lock(&mu_);
      if (overlapping) problems_.push_back("two callbacks ran at once");
      const bool want_elected = events_.empty() || !events_.back().elected;
      if (elected != want_elected) {
        problems_.push_back(absl::StrCat("got ", elected ? "elected" : "lost", " after ",
                                         events_.empty() ? "nothing" : (events_.back().elected ? "elected" : "lost")));
      }
      if (!elected && !events_.empty() && events_.back().term.revision != term.revision) {
        problems_.push_back(absl::StrCat("lost term ", term.revision, " but won term ", events_.back().term.revision));
      }
      events_.push_back({elected, term, why, ++g_sequence});
    }
    in_callback_.store(false);
  }

  const LostHook on_lost_;
  std::atomic<bool> in_callback_{false};
  absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> problems_ ABSL_GUARDED_BY(mu_);
};

// Samples Leading() of every elector every 2 ms and keeps the largest
// number of simultaneous leaders seen. Remove() an elector before
// destroying it.
class LeaderMonitor {
 public:
  explicit LeaderMonitor(std::vector<Elector*> electors) : electors_(std::move(electors)), thread_([this] { Run(); }) {}
  ~LeaderMonitor() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  void Remove(Elector* e) {
    absl::MutexLock lock(&mu_);
    electors_.erase(std::remove(electors_.begin(), electors_.end(), e), electors_.end());
  }

  int max_leaders() {
    absl::MutexLock lock(&mu_);
    return max_leaders_;
  }
  int64_t samples() {
    absl::MutexLock lock(&mu_);
    return samples_;
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      int n = 0;
      for (Elector* e : electors_) n += e->Leading().has_value() ? 1 : 0;
      max_leaders_ = std::max(max_leaders_, n);
      ++samples_;
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(2));
    }
  }

  absl::Mutex mu_;
  std::vector<Elector*> electors_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int max_leaders_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// The indexes of the electors that lead now.
std::vector<size_t> Leaders(const std::vector<Elector*>& electors) {
  std::vector<size_t> out;
  for (size_t i = 0; i < electors.size(); ++i) {
    if (electors[i]->Leading().has_value()) out.push_back(i);
  }
  return out;
}

// Waits until exactly one elector leads; its index.
std::optional<size_t> WaitForOneLeader(const std::vector<Elector*>& electors, absl::Duration timeout) {
  std::optional<size_t> leader;
  Eventually(
      [&] {
        const std::vector<size_t> leaders = Leaders(electors);
        if (leaders.size() == 1) leader = leaders[0];
        return leaders.size() == 1;
      },
      timeout);
  return leader;
}

std::unique_ptr<Elector> MustStart(Client* client, const ElectionOptions& options, Recorder* rec) {
  absl::StatusOr<std::unique_ptr<Elector>> e = Elector::Start(client, options, rec->Callbacks(), &base::RealClock());
  EXPECT_THAT(e, IsOk());
  return e.ok() ? std::move(*e) : nullptr;
}

// ---------------------------------------------------------------------------

TEST(ElectionOptionsTest, BadOptionsAreRefusedNamingTheField) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create({.endpoints = {"127.0.0.1:1"}});
  ASSERT_THAT(client, IsOk());
  struct Case {
    std::string name;
    std::function<void(ElectionOptions&)> change;
    std::string want_field;
  };
  const std::vector<Case> cases = {
      {"a ttl under two seconds", [](ElectionOptions& o) { o.ttl = absl::Milliseconds(1500); }, "election.ttl"},
      {"a renew of half the ttl", [](ElectionOptions& o) { o.renew = o.ttl / 2; }, "election.renew"},
      {"a renew of zero", [](ElectionOptions& o) { o.renew = absl::ZeroDuration(); }, "election.renew"},
      {"a retry of zero", [](ElectionOptions& o) { o.retry = absl::ZeroDuration(); }, "election.retry"},
      {"an empty key", [](ElectionOptions& o) { o.key.clear(); }, "election.key"},
      {"an empty identity", [](ElectionOptions& o) { o.identity.clear(); }, "election.identity"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ElectionOptions o = Options("/test/options/leader", "a");
    c.change(o);
    Recorder rec;
    EXPECT_THAT(Elector::Start(client->get(), o, rec.Callbacks(), &base::RealClock()),
                StatusIs(absl::StatusCode::kInvalidArgument, c.want_field));
  }
  Recorder rec;
  EXPECT_THAT(Elector::Start(nullptr, Options("/test/options/leader", "a"), rec.Callbacks(), &base::RealClock()),
              StatusIs(absl::StatusCode::kInvalidArgument, "election.client"));
  EXPECT_THAT(Elector::Start(client->get(), Options("/test/options/leader", "a"), rec.Callbacks(), nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "election.clock"));
  // The defaults are valid once an identity is set.
  ElectionOptions defaults;
  defaults.identity = "a";
  defaults.key = "/test/options/defaults";
  absl::StatusOr<std::unique_ptr<Elector>> e =
      Elector::Start(client->get(), defaults, rec.Callbacks(), &base::RealClock());
  EXPECT_THAT(e, IsOk());
}

// ---------------------------------------------------------------------------
// Against one shared etcd.

class ElectionTest : public testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient(etcd_->endpoint());
    ASSERT_NE(client_, nullptr);
    key_ = absl::StrCat("/test/", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/leader");
  }

  std::unique_ptr<Client> client_;
  std::string key_;
};


TEST_F(ElectionTest, SingleElectorLeadsKeepsItsLeaseAndResignsOnDestruction) {
  Recorder rec;
  std::unique_ptr<Elector> e = MustStart(client_.get(), Options(key_, "a"), &rec);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(rec.WaitForEvents(1, kElectBound));
  const Term term = rec.Events()[0].term;
  ASSERT_TRUE(rec.Events()[0].elected);
  EXPECT_EQ(term.identity, "a");
  EXPECT_NE(term.lease, 0);
  EXPECT_GT(term.revision, 0);
  std::optional<Term> leading = e->Leading();
  ASSERT_TRUE(leading.has_value());
  EXPECT_EQ(leading->lease, term.lease);
  EXPECT_EQ(leading->revision, term.revision);
  EXPECT_EQ(leading->identity, "a");
  EXPECT_EQ(e->LeaderIdentity(), "a");

  // The key holds the identity under the term's lease, created at the
  // term's revision.
  absl::StatusOr<RangeResult> r = client_->Range(key_);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "a");
  EXPECT_EQ(r->kvs[0].lease, term.lease);
  EXPECT_EQ(r->kvs[0].create_revision, term.revision);
  absl::StatusOr<int64_t> ttl = client_->TimeToLive(term.lease);
  ASSERT_THAT(ttl, IsOk());
  EXPECT_GE(*ttl, 1);

  // Keep-alives carry the term past several TTLs.
  for (int i = 0; i < 45; ++i) {
    leading = e->Leading();
    ASSERT_TRUE(leading.has_value()) << "after " << i * 100 << " ms";
    ASSERT_EQ(leading->revision, term.revision);
    absl::SleepFor(absl::Milliseconds(100));
  }
  r = client_->Range(key_);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].create_revision, term.revision);
  EXPECT_EQ(rec.Events().size(), 1u);

  // Destroying the elector resigns: the lease is revoked and the key gone
  // at once.
  e.reset();
  std::vector<Recorder::Event> events = rec.Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[1].elected);
  EXPECT_THAT(events[1].why, StatusIs(absl::StatusCode::kCancelled, "resigned"));
  r = client_->Range(key_);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->kvs, IsEmpty());
  EXPECT_THAT(client_->TimeToLive(term.lease), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(rec.Problems(), IsEmpty());
}

TEST_F(ElectionTest, ThreeElectorsNeverLeadTogetherAndResignHandsOverAtOnce) {
  Recorder recs[3];
  std::vector<std::unique_ptr<Elector>> owned;
  std::vector<Elector*> electors;
  for (int i = 0; i < 3; ++i) {
    owned.push_back(MustStart(client_.get(), Options(key_, absl::StrCat("r", i)), &recs[i]));
    ASSERT_NE(owned.back(), nullptr);
    electors.push_back(owned.back().get());
  }
  LeaderMonitor monitor(electors);
  const std::optional<size_t> leader = WaitForOneLeader(electors, kElectBound);
  ASSERT_TRUE(leader.has_value());
  const size_t first = *leader;
  const std::string first_id = absl::StrCat("r", first);

  // A couple of seconds (more than a TTL): one leader, always the same.
  for (int i = 0; i < 40; ++i) {
    const std::vector<size_t> leaders = Leaders(electors);
    ASSERT_LE(leaders.size(), 1u);
    ASSERT_EQ(leaders.size(), 1u) << "the leader stopped leading after " << i * 50 << " ms";
    ASSERT_EQ(leaders[0], first);
    absl::SleepFor(absl::Milliseconds(50));
  }
  int elections = 0;
  for (Recorder& rec : recs) elections += static_cast<int>(rec.Events().size());
  EXPECT_EQ(elections, 1);
  // The followers read who leads from the key.
  for (Elector* e : electors) {
    EXPECT_TRUE(Eventually([&] { return e->LeaderIdentity() == first_id; }, absl::Seconds(2)))
        << "sees " << e->LeaderIdentity();
  }

  // Resign revokes the lease: the key goes at once and another takes over
  // well within a TTL.
  const Term old_term = recs[first].Events()[0].term;
  base::Stopwatch handover;
  electors[first]->Resign();
  EXPECT_FALSE(electors[first]->Leading().has_value());
  ASSERT_EQ(recs[first].Events().size(), 2u);
  EXPECT_THAT(recs[first].Events()[1].why, StatusIs(absl::StatusCode::kCancelled, "resigned"));
  EXPECT_THAT(client_->TimeToLive(old_term.lease), StatusIs(absl::StatusCode::kNotFound));
  const std::optional<size_t> second = WaitForOneLeader(electors, kElectBound);
  ASSERT_TRUE(second.has_value());
  // Without waiting for the old lease to expire (generous: a loaded machine is slow).
  EXPECT_LT(handover.Elapsed(), absl::Seconds(5));
  EXPECT_NE(*second, first);

  // The resigned one stays out.
  for (int i = 0; i < 10; ++i) {
    ASSERT_FALSE(electors[first]->Leading().has_value());
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(recs[first].Events().size(), 2u);
  monitor.Stop();
  EXPECT_EQ(monitor.max_leaders(), 1);
  EXPECT_GT(monitor.samples(), 100);
  for (Recorder& rec : recs) EXPECT_THAT(rec.Problems(), IsEmpty());
}

TEST_F(ElectionTest, DestroyedLeaderHandsOverAtOnce) {
  Recorder rec_a, rec_b;
  std::unique_ptr<Elector> a = MustStart(client_.get(), Options(key_, "a"), &rec_a);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(rec_a.WaitForEvents(1, kElectBound));
  std::unique_ptr<Elector> b = MustStart(client_.get(), Options(key_, "b"), &rec_b);
  ASSERT_NE(b, nullptr);
  LeaderMonitor monitor({a.get(), b.get()});
  ASSERT_TRUE(Eventually([&] { return b->LeaderIdentity() == "a"; }, absl::Seconds(2)));
  EXPECT_FALSE(b->Leading().has_value());

  monitor.Remove(a.get());
  base::Stopwatch handover;
  a.reset();
  ASSERT_EQ(rec_a.Events().size(), 2u);
  EXPECT_THAT(rec_a.Events()[1].why, StatusIs(absl::StatusCode::kCancelled, "resigned"));
  ASSERT_TRUE(rec_b.WaitForEvents(1, kElectBound));
  // Without waiting for the old lease to expire (generous: a loaded machine is slow).
  EXPECT_LT(handover.Elapsed(), absl::Seconds(5));
  EXPECT_TRUE(b->Leading().has_value());
  EXPECT_EQ(b->LeaderIdentity(), "b");
  absl::StatusOr<RangeResult> r = client_->Range(key_);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "b");
  monitor.Stop();
  EXPECT_EQ(monitor.max_leaders(), 1);
  EXPECT_THAT(rec_a.Problems(), IsEmpty());
  EXPECT_THAT(rec_b.Problems(), IsEmpty());
}

TEST_F(ElectionTest, PausedLeaderStepsDownBeforeItsLeaseExpiresAndIsFencedOff) {
  // A longer TTL than elsewhere: a whole second between the step-down and
  // etcd's expiry, to look at etcd in between.
  ElectionOptions options_a = Options(key_, "a");
  options_a.ttl = absl::Seconds(3);
  options_a.renew = absl::Seconds(1);
  ElectionOptions options_b = options_a;
  options_b.identity = "b";

  // What etcd and the other replica showed at the moment `a` stepped down.
  struct AtStepDown {
    absl::Mutex mu;
    bool seen = false;
    absl::StatusOr<RangeResult> key;
    absl::StatusOr<int64_t> ttl;
    bool b_leading = true;
  } at;
  std::atomic<Elector*> b_ptr{nullptr};
  Recorder rec_a([&](const Term& term, const absl::Status&) {
    absl::StatusOr<RangeResult> key = client_->Range(key_);
    absl::StatusOr<int64_t> ttl = client_->TimeToLive(term.lease);
    Elector* b = b_ptr.load();
    absl::MutexLock lock(&at.mu);
    if (at.seen) return;
    at.seen = true;
    at.key = std::move(key);
    at.ttl = std::move(ttl);
    at.b_leading = b != nullptr && b->Leading().has_value();
  });
  Recorder rec_b;
  std::unique_ptr<Elector> a = MustStart(client_.get(), options_a, &rec_a);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(rec_a.WaitForEvents(1, kElectBound));
  const Term term_a = rec_a.Events()[0].term;
  std::unique_ptr<Elector> b = MustStart(client_.get(), options_b, &rec_b);
  ASSERT_NE(b, nullptr);
  b_ptr.store(b.get());
  LeaderMonitor monitor({a.get(), b.get()});
  ASSERT_TRUE(Eventually([&] { return b->LeaderIdentity() == "a"; }, absl::Seconds(2)));

  // The partition: `a` sends nothing more and must stop leading on its own.
  a->PauseKeepAlives(true);
  ASSERT_TRUE(rec_a.WaitForEvents(2, options_a.ttl + absl::Seconds(2)));
  EXPECT_FALSE(a->Leading().has_value());
  EXPECT_THAT(rec_a.Events()[1].why, StatusIs(absl::StatusCode::kUnavailable, "keep-alives paused"));
  {
    absl::MutexLock lock(&at.mu);
    ASSERT_TRUE(at.seen);
    // etcd still held a's key and lease when `a` stepped down, and `b` did
    // not lead yet.
    ASSERT_THAT(at.key, IsOk());
    ASSERT_EQ(at.key->kvs.size(), 1u);
    EXPECT_EQ(at.key->kvs[0].value, "a");
    EXPECT_EQ(at.key->kvs[0].lease, term_a.lease);
    EXPECT_EQ(at.key->kvs[0].create_revision, term_a.revision);
    ASSERT_THAT(at.ttl, IsOk());
    EXPECT_GE(*at.ttl, 0);
    EXPECT_FALSE(at.b_leading);
  }

  // `b` takes over only once etcd expired a's lease (nobody revoked it).
  ASSERT_TRUE(rec_b.WaitForEvents(1, absl::Seconds(10)));
  const Term term_b = rec_b.Events()[0].term;
  EXPECT_EQ(term_b.identity, "b");
  EXPECT_GT(term_b.revision, term_a.revision);
  EXPECT_GT(rec_b.Events()[0].sequence, rec_a.Events()[1].sequence);
  EXPECT_THAT(client_->TimeToLive(term_a.lease), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(b->Leading().has_value());

  // Fencing by the store: a write of the old term fails, one of the new
  // term succeeds.
  const std::string data = key_ + "/data";
  absl::StatusOr<TxnResult> old_write = client_->Txn({a->Fence(term_a)}, {Op::Put(data, "from a")});
  ASSERT_THAT(old_write, IsOk());
  EXPECT_FALSE(old_write->succeeded);
  absl::StatusOr<TxnResult> new_write = client_->Txn({b->Fence(term_b)}, {Op::Put(data, "from b")});
  ASSERT_THAT(new_write, IsOk());
  EXPECT_TRUE(new_write->succeeded);
  absl::StatusOr<RangeResult> r = client_->Range(data);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "from b");

  // Back from the partition, `a` follows.
  a->PauseKeepAlives(false);
  EXPECT_TRUE(Eventually([&] { return a->LeaderIdentity() == "b"; }, absl::Seconds(3)));
  for (int i = 0; i < 10; ++i) {
    ASSERT_FALSE(a->Leading().has_value());
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(rec_a.Events().size(), 2u);
  EXPECT_EQ(rec_b.Events().size(), 1u);

  monitor.Stop();
  EXPECT_EQ(monitor.max_leaders(), 1);
  b_ptr.store(nullptr);
  b.reset();
  a.reset();
  EXPECT_THAT(rec_a.Problems(), IsEmpty());
  EXPECT_THAT(rec_b.Problems(), IsEmpty());
}

// ---------------------------------------------------------------------------
// An outage: this test owns its etcd.

TEST(ElectionOutageTest, KilledEtcdMakesTheLeaderStepDownAndRestartElectsAgain) {
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_THAT(etcd, IsOk());
  std::unique_ptr<Client> client = NewClient((*etcd)->endpoint());
  ASSERT_NE(client, nullptr);
  const std::string key = "/test/outage/leader";
  Recorder recs[2];
  std::unique_ptr<Elector> a = MustStart(client.get(), Options(key, "a"), &recs[0]);
  std::unique_ptr<Elector> b = MustStart(client.get(), Options(key, "b"), &recs[1]);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<Elector*> electors = {a.get(), b.get()};
  LeaderMonitor monitor(electors);
  const std::optional<size_t> first = WaitForOneLeader(electors, kElectBound);
  ASSERT_TRUE(first.has_value());
  const size_t leader = *first;
  // Leading() turns true just before on_elected runs.
  ASSERT_TRUE(recs[leader].WaitForEvents(1, absl::Seconds(2)));

  (*etcd)->Kill();
  base::Stopwatch since_kill;
  // Its last keep-alive went out before the kill: it stops leading within
  // ttl - renew of that, and so within a TTL of the kill.
  ASSERT_TRUE(recs[leader].WaitForEvents(2, kTtl + absl::Seconds(3)));
  // Leading() is worked out when asked, so at the TTL after the kill it is
  // false whatever the thread scheduling (the callback itself may be late).
  if (since_kill.Elapsed() < kTtl) absl::SleepFor(kTtl - since_kill.Elapsed());
  EXPECT_FALSE(electors[leader]->Leading().has_value());
  EXPECT_THAT(recs[leader].Events()[1].why, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(Leaders(electors), IsEmpty());

  ASSERT_THAT((*etcd)->Restart(), IsOk());
  // etcd keeps the old key and lease over a restart; the old leader revokes
  // it, or it expires, and someone leads again.
  const std::optional<size_t> again = WaitForOneLeader(electors, absl::Seconds(15));
  ASSERT_TRUE(again.has_value());
  const size_t next = *again;
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<Recorder::Event> events = recs[next].Events();
        return !events.empty() && events.back().elected;
      },
      absl::Seconds(2)));
  const Term term = recs[next].Events().back().term;
  absl::StatusOr<RangeResult> r = client->Range(key);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, term.identity);
  EXPECT_EQ(r->kvs[0].create_revision, term.revision);

  monitor.Stop();
  EXPECT_EQ(monitor.max_leaders(), 1);
  a.reset();
  b.reset();
  for (Recorder& rec : recs) EXPECT_THAT(rec.Problems(), IsEmpty());
}

TEST(ElectionOutageTest, HungEtcdMakesTheLeaderStepDownOnTimeWhileItsCallHangs) {
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
  ASSERT_THAT(etcd, IsOk());
  // Each call to a hung etcd takes ~10 s (two attempts of 5 s), far longer
  // than the TTL: the step-down must not wait for it.
  ClientOptions client_options;
  client_options.endpoints = {(*etcd)->endpoint()};
  client_options.timeout = absl::Seconds(5);
  client_options.max_attempts = 2;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(client_options);
  ASSERT_THAT(client, IsOk());
  Recorder rec;
  std::unique_ptr<Elector> e = MustStart(client->get(), Options("/test/hung/leader", "a"), &rec);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(rec.WaitForEvents(1, kElectBound));

  // Stopped: connections are accepted by the kernel and never answered.
  ASSERT_THAT((*etcd)->Freeze(), IsOk());
  const bool lost = rec.WaitForEvents(2, kTtl + absl::Seconds(3));
  EXPECT_FALSE(e->Leading().has_value());
  (*etcd)->Thaw();
  ASSERT_TRUE(lost);
  EXPECT_THAT(rec.Events()[1].why, StatusIs(absl::StatusCode::kUnavailable, "no keep-alive succeeded"));

  // etcd answers again: the replica leads again (a new term).
  ASSERT_TRUE(rec.WaitForEvents(3, absl::Seconds(20)));
  EXPECT_TRUE(rec.Events()[2].elected);
  EXPECT_GT(rec.Events()[2].term.revision, rec.Events()[0].term.revision);
  EXPECT_TRUE(Eventually([&] { return e->Leading().has_value(); }, absl::Seconds(2)));
  e.reset();
  EXPECT_THAT(rec.Problems(), IsEmpty());
}

}  // namespace
}  // namespace gangkeeper::etcd
