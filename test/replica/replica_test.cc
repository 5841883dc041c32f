// gangkeeper: three replicas on one real etcd, in one process
// (replica/replica.h): one leads and admits what every replica registers,
// the followers show the same state, a partitioned leader stops actuating
// before its lease can expire, and another takes over losing nothing.
#include "gangkeeper/replica/replica.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/etcd/client.h"
#include "gangkeeper/replica/audit_feed.h"
#include "gangkeeper/replica/intake.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_process.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::replica {
namespace {

using ::gangkeeper::testing::GpuGang;
using ::gangkeeper::testing::IsOk;

// Records each release and whether the replica was allowed to send it then.
class GatedActuator : public broker::Actuator {
 public:
  void Release(const broker::ReleaseOrder& order) override {
    absl::MutexLock lock(&mu_);
    (gate_ && gate_() ? releases_ : refused_).push_back(order.key.name);
  }
  void Suspend(const broker::SuspendOrder&) override {}
  void set_gate(std::function<bool()> gate) {
    absl::MutexLock lock(&mu_);
    gate_ = std::move(gate);
  }
  std::vector<std::string> releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  std::vector<std::string> refused() {
    absl::MutexLock lock(&mu_);
    return refused_;
  }

 private:
  absl::Mutex mu_;
  std::function<bool()> gate_;
  std::vector<std::string> releases_, refused_;
};

struct Node {
  std::unique_ptr<etcd::Client> client;
  std::unique_ptr<broker::Broker> broker;
  GatedActuator actuator;
  std::unique_ptr<IntakeRegistry> registry;
  std::unique_ptr<Replica> replica;
  testing::TempDir dir;
  std::unique_ptr<audit::AuditLog> audit;
  std::unique_ptr<AuditFeed> audit_feed;

  ~Node() {
    // Stop everything that calls into the others before any goes.
    audit_feed.reset();
    if (replica != nullptr) replica->Shutdown();
    if (broker != nullptr) broker->Stop();
  }
};

std::map<std::string, std::string> Phases(const broker::Broker& b) {
  std::map<std::string, std::string> out;
  b.snapshot()->ForEachWorkload(
      [&](const broker::WorkloadInfo& w) { out[w.key.name] = broker::PhaseName(w.phase); });
  return out;
}

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_THAT(etcd.status(), IsOk());
    etcd_ = *std::move(etcd);
    for (int i = 0; i < 3; ++i) nodes_.push_back(StartNode(i));
  }

  std::unique_ptr<Node> StartNode(int i) {
    auto n = std::make_unique<Node>();
    etcd::ClientOptions o;
    o.endpoints = {etcd_->endpoint()};
    o.timeout = absl::Seconds(2);
    auto c = etcd::Client::Create(o);
    EXPECT_THAT(c.status(), IsOk());
    n->client = *std::move(c);
    auto b = broker::Broker::Create(policies_, {}, nullptr, nullptr, &base::RealClock());
    EXPECT_THAT(b.status(), IsOk());
    n->broker = *std::move(b);
    n->broker->Start();
    const std::string id = absl::StrCat("replica-", i);
    n->registry = std::make_unique<IntakeRegistry>(n->client.get(), prefix_, id, n->broker.get());
    audit::AuditOptions ao;
    ao.dir = n->dir.File("audit");
    store::LogRecovery recovery;
    auto a = audit::AuditLog::Open(ao, &recovery);
    EXPECT_THAT(a.status(), IsOk());
    n->audit = *std::move(a);
    n->audit_feed = std::make_unique<AuditFeed>(n->client.get(), prefix_, n->audit.get());
    ReplicaOptions ro;
    ro.prefix = prefix_;
    ro.election.identity = id;
    ro.election.ttl = absl::Seconds(2);
    ro.election.renew = absl::Milliseconds(500);
    ro.election.retry = absl::Milliseconds(100);
    ro.follow_interval = absl::Milliseconds(50);
    ro.policies = [p = policies_](const broker::DurableState&) { return p; };
    auto r = Replica::Start(n->client.get(), n->broker.get(), &n->actuator, ro);
    EXPECT_THAT(r.status(), IsOk());
    n->replica = *std::move(r);
    Replica* gate = n->replica.get();
    n->actuator.set_gate([gate] { return gate->MaySend(); });
    return n;
  }

  // The index of the one node that leads, waiting up to `wait`; -1 if none.
  int Leader(absl::Duration wait = absl::Seconds(10)) {
    for (int i = 0; i < absl::ToInt64Milliseconds(wait) / 50; ++i) {
      int leader = -1, count = 0;
      for (size_t n = 0; n < nodes_.size(); ++n) {
        if (nodes_[n] != nullptr && nodes_[n]->replica->MaySend() &&
            nodes_[n]->broker->role() == broker::Role::kLeader) {
          leader = static_cast<int>(n);
          ++count;
        }
      }
      EXPECT_LE(count, 1) << "two replicas lead at once";
      if (count == 1) return leader;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return -1;
  }

  // Waits (up to 10 s) until every running node shows `want`.
  bool AllShow(const std::map<std::string, std::string>& want) {
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (const auto& n : nodes_) all = all && (n == nullptr || Phases(*n->broker) == want);
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  const std::string prefix_ = "/gk/";
  std::shared_ptr<const model::PolicySet> policies_ = testing::PoliciesFrom(testing::kOneTeamPolicies);
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(ReplicaTest, OneLeaderAdmitsWhatEveryReplicaRegistersAndEveryReplicaShowsIt) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  // 8 GPUs: a (4) and b (2) fit, c (4) waits; registered on different replicas.
  ASSERT_THAT(nodes_[0]->registry->Register(GpuGang("a", 2, 2), ""), IsOk());
  ASSERT_THAT(nodes_[1]->registry->Register(GpuGang("b", 1, 2), ""), IsOk());
  ASSERT_THAT(nodes_[2]->registry->Register(GpuGang("c", 4, 1), ""), IsOk());
  EXPECT_TRUE(AllShow({{"a", "reserved"}, {"b", "reserved"}, {"c", "pending"}}));
  EXPECT_THAT(nodes_[leader]->actuator.releases(), ::testing::UnorderedElementsAre("a", "b"));
  // Every replica's audit log has the leader's decisions.
  for (const auto& n : nodes_) {
    std::vector<std::string> admitted;
    for (int i = 0; i < 100 && admitted.size() < 2; ++i) {
      absl::StatusOr<audit::Page> page = n->audit->Find({.action = "workload.admitted"});
      ASSERT_THAT(page.status(), IsOk());
      admitted.clear();
      for (const audit::Event& e : page->events) admitted.push_back(e.name);
      if (admitted.size() < 2) absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_THAT(admitted, ::testing::UnorderedElementsAre("a", "b"));
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (static_cast<int>(n) == leader) continue;
    EXPECT_THAT(nodes_[n]->actuator.releases(), ::testing::IsEmpty()) << "a follower released";
    EXPECT_EQ(nodes_[n]->broker->PendingIn("team-a"), 1);
  }
}

TEST_F(ReplicaTest, APartitionedLeaderStopsActuatingAndAnotherTakesOverLosingNothing) {
  const int old = Leader();
  ASSERT_GE(old, 0);
  ASSERT_THAT(nodes_[(old + 1) % 3]->registry->Register(GpuGang("before", 2, 2), ""), IsOk());
  ASSERT_TRUE(AllShow({{"before", "reserved"}}));

  // The leader can no longer renew its lease: it stops sending at once,
  // before etcd lets the lease go; then another replica leads.
  nodes_[old]->replica->PauseKeepAlives(true);
  int next = -1;
  for (int i = 0; i < 200 && next < 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    for (int n = 0; n < 3; ++n) {
      if (n != old && nodes_[n]->replica->MaySend()) next = n;
    }
    if (next >= 0) {
      EXPECT_FALSE(nodes_[old]->replica->MaySend()) << "two replicas may send at once";
    }
  }
  ASSERT_GE(next, 0) << "no replica took over";
  EXPECT_FALSE(nodes_[old]->replica->MaySend());
  // Registrations go on through every replica, the old leader's too.
  for (int n = 0; n < 3; ++n) {
    ASSERT_THAT(nodes_[n]->registry->Register(GpuGang(absl::StrCat("after", n), 1, 1), ""), IsOk());
  }
  ASSERT_TRUE(AllShow({{"before", "reserved"}, {"after0", "reserved"}, {"after1", "reserved"}, {"after2", "reserved"}}))
      << "old leader: " << old << ", new: " << next;
  // The new leader sent again the release nobody confirmed, and the new ones.
  EXPECT_THAT(nodes_[next]->actuator.releases(),
              ::testing::UnorderedElementsAre("before", "after0", "after1", "after2"));
  EXPECT_THAT(nodes_[old]->actuator.releases(), ::testing::ElementsAre("before"));
  EXPECT_EQ(nodes_[old]->broker->role(), broker::Role::kFollower);
}

TEST_F(ReplicaTest, ALeaderThatShutsDownHandsOverAtOnce) {
  const int old = Leader();
  ASSERT_GE(old, 0);
  ASSERT_THAT(nodes_[old]->registry->Register(GpuGang("one", 1, 1), ""), IsOk());
  ASSERT_TRUE(AllShow({{"one", "reserved"}}));
  nodes_[old]->replica->Shutdown();
  nodes_[old]->broker->Stop();
  nodes_[old].reset();
  const int next = Leader(absl::Seconds(15));
  ASSERT_GE(next, 0);
  ASSERT_THAT(nodes_[next]->registry->Register(GpuGang("two", 1, 1), ""), IsOk());
  EXPECT_TRUE(AllShow({{"one", "reserved"}, {"two", "reserved"}}));
}

}  // namespace
}  // namespace gangkeeper::replica
