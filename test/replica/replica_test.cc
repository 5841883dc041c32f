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
#include "gangkeeper/broker/roles.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/node/audit_stream.h"
#include "gangkeeper/replica/intake.h"
#include "gangkeeper/replica/overlay.h"
#include "gangkeeper/store/etcd/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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
  std::unique_ptr<model::PolicyStore> policies;  // this replica's files + overlay
  std::unique_ptr<etcd::Client> client;
  // What the webhook and the API would read and write through: the role
  // the replica plays (a read-only view, or the term's broker).
  std::unique_ptr<broker::SwitchingPort> front;
  GatedActuator actuator;
  std::unique_ptr<IntakeRegistry> registry;
  std::unique_ptr<Replica> replica;
  testing::TempDir dir;
  std::unique_ptr<audit::AuditLog> audit;
  // The audit stream as the node wires it (node/audit_stream.h).
  std::unique_ptr<node::ReviewWriter> reviews;
  std::unique_ptr<node::AuditStreamFeed> audit_feed;
  std::unique_ptr<EtcdPolicyEditor> editor;  // this replica's API

  ~Node() {
    // Stop everything that calls into the others before any goes.
    audit_feed.reset();
    if (replica != nullptr) replica->Shutdown();
  }
};

std::map<std::string, std::string> Phases(const broker::SnapshotSource& b) {
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
    n->policies = std::make_unique<model::PolicyStore>(policies_);
    auto view = broker::ReadOnlyView::Create(policies_, {}, &base::RealClock());
    EXPECT_THAT(view.status(), IsOk());
    n->front = std::make_unique<broker::SwitchingPort>(*std::move(view));
    const std::string id = absl::StrCat("replica-", i);
    n->registry = std::make_unique<IntakeRegistry>(n->client.get(), prefix_, id, n->front.get(), &base::RealClock());
    audit::AuditOptions ao;
    ao.clock = &base::RealClock();
    ao.dir = n->dir.File("audit");
    store::LogRecovery recovery;
    auto a = audit::AuditLog::Open(ao, &recovery);
    EXPECT_THAT(a.status(), IsOk());
    n->audit = *std::move(a);
    n->audit_feed = std::make_unique<node::AuditStreamFeed>(n->client.get(), prefix_, n->audit.get());
    n->reviews = std::make_unique<node::ReviewWriter>(n->client.get(), prefix_, id, &base::RealClock());
    ReplicaOptions ro;
    ro.prefix = prefix_;
    ro.journal.prefix = prefix_;
    node::AddAuditStream(&ro.journal, &base::RealClock());
    ro.election.identity = id;
    ro.election.ttl = absl::Seconds(2);
    ro.election.renew = absl::Milliseconds(500);
    ro.election.retry = absl::Milliseconds(100);
    ro.follow_interval = absl::Milliseconds(50);
    ro.policies = PolicyStoreFeed(n->policies.get());
    auto r = Replica::Start(n->client.get(), n->front.get(), &n->actuator, ro, &base::RealClock());
    EXPECT_THAT(r.status(), IsOk());
    n->replica = *std::move(r);
    Replica* gate = n->replica.get();
    n->actuator.set_gate([gate] { return gate->MaySend(); });
    EtcdPolicyEditorOptions eo;
    eo.prefix = prefix_;
    n->editor = std::make_unique<EtcdPolicyEditor>(n->client.get(), n->front.get(), n->policies.get(), eo);
    return n;
  }

  // The index of the one node that leads, waiting up to `wait`; -1 if none.
  int Leader(absl::Duration wait = absl::Seconds(10)) {
    for (int i = 0; i < absl::ToInt64Milliseconds(wait) / 50; ++i) {
      int leader = -1, count = 0;
      for (size_t n = 0; n < nodes_.size(); ++n) {
        if (nodes_[n] != nullptr && nodes_[n]->replica->MaySend()) {
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
      for (const auto& n : nodes_) all = all && (n == nullptr || Phases(*n->front) == want);
      if (all) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // What the API does for "PUT ClusterQueue team-a with nominalQuota
  // `gpus`", through node `n`'s editor, from `base`.
  absl::Status SetNominal(int n, const model::PolicyEditor::Current& base, int64_t gpus) {
    auto overlay = std::make_shared<model::PolicyOverlay>(base.overlay != nullptr ? *base.overlay
                                                                                   : model::PolicyOverlay{});
    ++overlay->generation;
    model::ClusterQueue cq = base.policies->cluster_queues.at("team-a");
    cq.resource_groups.at(0).flavors.at(0).resources.at(0).nominal = quantity::Quantity::FromUnits(gpus);
    overlay->put.cluster_queues["team-a"] = cq;
    auto effective = std::make_shared<const model::PolicySet>(model::ApplyOverlay(*policies_, *overlay));
    return nodes_[n]->editor->Write(base, overlay, effective, "platform", absl::StrCat("PUT team-a ", gpus));
  }

  // team-a's nominal GPU quota as node `n` shows it.
  int64_t Nominal(int n) const {
    std::shared_ptr<const model::PolicySet> p = nodes_[n]->front->snapshot()->shared_policies();
    return p->cluster_queues.at("team-a").resource_groups.at(0).flavors.at(0).resources.at(0).nominal.CeilUnits();
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
  // Each once: read again after the feeds had time to write a duplicate.
  absl::SleepFor(absl::Milliseconds(300));
  for (const auto& n : nodes_) {
    absl::StatusOr<audit::Page> page = n->audit->Find({.action = "workload.admitted"});
    ASSERT_THAT(page.status(), IsOk());
    EXPECT_EQ(page->events.size(), 2u);
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (static_cast<int>(n) == leader) continue;
    EXPECT_THAT(nodes_[n]->actuator.releases(), ::testing::IsEmpty()) << "a follower released";
    EXPECT_EQ(nodes_[n]->front->snapshot()->PendingIn("team-a"), 1);
    // Its stats say it shows the state from etcd (what its /readyz waits for).
    ReplicaStats st = nodes_[n]->replica->stats();
    for (int i = 0; i < 100 && !(st.follower.synced && st.follower.position > 0); ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      st = nodes_[n]->replica->stats();
    }
    EXPECT_TRUE(st.follower.synced) << "replica " << n;
    EXPECT_GT(st.follower.position, 0u) << "replica " << n;
    EXPECT_FALSE(st.leading);
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
  // The old one follows: its front ends refuse changes.
  EXPECT_THAT(nodes_[old]->front->SubmitAndWait(broker::Event::Add(GpuGang("direct", 1, 1))),
              ::gangkeeper::testing::StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(ReplicaTest, ALeaderThatShutsDownHandsOverAtOnce) {
  const int old = Leader();
  ASSERT_GE(old, 0);
  ASSERT_THAT(nodes_[old]->registry->Register(GpuGang("one", 1, 1), ""), IsOk());
  ASSERT_TRUE(AllShow({{"one", "reserved"}}));
  nodes_[old]->replica->Shutdown();
  nodes_[old].reset();
  const int next = Leader(absl::Seconds(15));
  ASSERT_GE(next, 0);
  ASSERT_THAT(nodes_[next]->registry->Register(GpuGang("two", 1, 1), ""), IsOk());
  EXPECT_TRUE(AllShow({{"one", "reserved"}, {"two", "reserved"}}));
}

TEST_F(ReplicaTest, AQuotaChangeThroughAFollowerIsAppliedByTheLeaderAndShownByEveryReplica) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % 3;
  // 8 GPUs: the 12-GPU gang waits until team-a has 12.
  ASSERT_THAT(nodes_[follower]->registry->Register(GpuGang("big", 3, 4), ""), IsOk());
  ASSERT_TRUE(AllShow({{"big", "pending"}}));

  absl::StatusOr<model::PolicyEditor::Current> base = nodes_[follower]->editor->Read();
  ASSERT_THAT(base.status(), IsOk());
  EXPECT_EQ(base->version, 0) << "the overlay key exists before any change";
  ASSERT_THAT(SetNominal(follower, *base, 12), IsOk());
  // Read your writes: the answering replica shows the change when Write returns.
  EXPECT_EQ(Nominal(follower), 12);
  ASSERT_NE(nodes_[follower]->front->snapshot()->overlay(), nullptr);
  EXPECT_EQ(nodes_[follower]->front->snapshot()->overlay()->generation, 1u);
  // The leader admits with the new quota, and every replica shows both.
  EXPECT_TRUE(AllShow({{"big", "reserved"}}));
  for (int n = 0; n < 3; ++n) EXPECT_EQ(Nominal(n), 12) << "replica " << n;
  EXPECT_THAT(nodes_[leader]->actuator.releases(), ::testing::ElementsAre("big"));
}

TEST_F(ReplicaTest, TwoReplicasChangingQuotaAtOnceNeverOverwriteEachOther) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  const int a = (leader + 1) % 3, b = (leader + 2) % 3;
  // Both read the same state; a writes first; b's write from the old state
  // is refused, and b's change made again on a's lands after it.
  absl::StatusOr<model::PolicyEditor::Current> read_a = nodes_[a]->editor->Read();
  absl::StatusOr<model::PolicyEditor::Current> read_b = nodes_[b]->editor->Read();
  ASSERT_THAT(read_a.status(), IsOk());
  ASSERT_THAT(read_b.status(), IsOk());
  ASSERT_THAT(SetNominal(a, *read_a, 10), IsOk());
  EXPECT_TRUE(absl::IsAborted(SetNominal(b, *read_b, 6)));
  absl::StatusOr<model::PolicyEditor::Current> again = nodes_[b]->editor->Read();
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->policies->cluster_queues.at("team-a").resource_groups[0].flavors[0].resources[0].nominal.CeilUnits(),
            10);
  ASSERT_THAT(SetNominal(b, *again, 6), IsOk());
  for (int i = 0; i < 200 && (Nominal(0) != 6 || Nominal(1) != 6 || Nominal(2) != 6); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  for (int n = 0; n < 3; ++n) {
    EXPECT_EQ(Nominal(n), 6) << "replica " << n;
    ASSERT_NE(nodes_[n]->front->snapshot()->overlay(), nullptr);
    EXPECT_EQ(nodes_[n]->front->snapshot()->overlay()->generation, 2u) << "replica " << n;
  }
}

TEST_F(ReplicaTest, ANewLeaderAppliesAQuotaChangeTheOldOneNeverApplied) {
  const int old = Leader();
  ASSERT_GE(old, 0);
  ASSERT_THAT(nodes_[old]->registry->Register(GpuGang("big", 3, 4), ""), IsOk());
  ASSERT_TRUE(AllShow({{"big", "pending"}}));
  // The leader is gone (its lease lapses) when the change lands in etcd.
  nodes_[old]->replica->PauseKeepAlives(true);
  for (int i = 0; i < 100 && nodes_[old]->replica->MaySend(); ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_FALSE(nodes_[old]->replica->MaySend());
  const int other = (old + 1) % 3;
  absl::StatusOr<model::PolicyEditor::Current> base = nodes_[other]->editor->Read();
  ASSERT_THAT(base.status(), IsOk());
  ASSERT_THAT(SetNominal(other, *base, 12), IsOk());
  const int next = Leader(absl::Seconds(15));
  ASSERT_GE(next, 0);
  EXPECT_NE(next, old);
  EXPECT_TRUE(AllShow({{"big", "reserved"}}));
  EXPECT_EQ(Nominal(next), 12);
  EXPECT_THAT(nodes_[next]->actuator.releases(), ::testing::ElementsAre("big"));
}

TEST_F(ReplicaTest, ADenialAnsweredByAnyReplicaIsInEveryReplicasAuditLog) {
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % 3;
  audit::Event denial;
  denial.time = absl::FromUnixSeconds(1'800'000'000);
  denial.actor = "alice";
  denial.action = "review.denied";
  denial.kind = "Job";
  denial.namespace_name = "a";
  denial.name = "too-big";
  denial.uid = "uid-too-big";
  denial.reason = "ExceedsQuota";
  denial.details = R"({"operation":"CREATE","code":403})";
  ASSERT_THAT(nodes_[follower]->reviews->Write(denial), IsOk());
  for (const auto& n : nodes_) {
    std::vector<audit::Event> found;
    for (int i = 0; i < 200 && found.empty(); ++i) {
      absl::StatusOr<audit::Page> page = n->audit->Find({.action = "review.denied"});
      ASSERT_THAT(page.status(), IsOk());
      found = page->events;
      if (found.empty()) absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].name, "too-big");
    EXPECT_EQ(found[0].actor, "alice");
    EXPECT_EQ(found[0].kind, "Job");
    EXPECT_EQ(found[0].reason, "ExceedsQuota");
    EXPECT_EQ(found[0].time, denial.time);
    EXPECT_EQ(nlohmann::json::parse(found[0].details), nlohmann::json::parse(denial.details));
  }
  // Nothing else changed: no workload is tracked.
  for (const auto& n : nodes_) EXPECT_TRUE(Phases(*n->front).empty());
}

TEST(OverlayCodecTest, RoundTripsAndRefusesWhatDoesNotDecode) {
  model::PolicyOverlay o;
  o.generation = 7;
  o.put = *testing::PoliciesFrom(testing::kOneTeamPolicies);
  o.deleted = {"ClusterQueue//old", "LocalQueue/a/gone"};
  absl::StatusOr<OverlayRecord> r = DecodeOverlay(EncodeOverlay(o, "alice", "PUT ClusterQueue team-a"));
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->overlay->generation, 7u);
  EXPECT_EQ(r->overlay->deleted, o.deleted);
  EXPECT_EQ(r->actor, "alice");
  EXPECT_EQ(r->what, "PUT ClusterQueue team-a");
  EXPECT_EQ(model::EncodeManifests(r->overlay->put), model::EncodeManifests(o.put));
  EXPECT_TRUE(absl::IsDataLoss(DecodeOverlay("not json").status()));
  EXPECT_THAT(DecodeOverlay(R"({"generation": 1, "put": ""})").status(),
              testing::StatusIs(absl::StatusCode::kDataLoss, "deleted (a list) are required"));
}

}  // namespace
}  // namespace gangkeeper::replica
