// gangkeeper: a replica's audit log written from the journal in a real etcd
// (replica/audit_feed.h), across a restart of the replica: one whose audit
// log survives (a StatefulSet's volume, deploy/overlays/ha) goes on after
// its last record and ends with every event once; one whose audit log is
// new (a lost volume) starts at the oldest record etcd still keeps and says
// how many it skipped.
#include "gangkeeper/replica/audit_feed.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_fixture.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::replica {
namespace {

using ::gangkeeper::testing::EtcdFixture;
using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAreArray;

class AuditFeedTest : public EtcdFixture {
 protected:
  void SetUp() override {
    EtcdFixture::SetUp();
    journal_ = std::make_unique<store::EtcdJournal>(client_.get(),
                                                    store::EtcdJournalOptions{.prefix = prefix_, .keep_records = 3},
                                                    1, NewTerm());
  }

  // A leader's record: a quota change by `actor`.
  void QuotaChange(const std::string& actor) {
    broker::DurableBatch batch;
    batch.policies = testing::PoliciesFrom(testing::kOneTeamPolicies);
    broker::StateChange c;
    c.type = broker::StateChange::Type::kPoliciesChanged;
    c.time = clock_.Now();
    c.actor = actor;
    c.message = "PUT ClusterQueue team-a";
    batch.changes.push_back(std::move(c));
    Append(batch);
  }

  // A record of a review some replica denied (the intake brought it to the
  // leader), for object `name`.
  void Denial(const std::string& name) {
    audit::Event e;
    e.time = clock_.Now();
    e.actor = "alice";
    e.action = "review.denied";
    e.kind = "Job";
    e.namespace_name = "a";
    e.name = name;
    e.reason = "ExceedsQuota";
    broker::DurableBatch batch;
    broker::StateChange c;
    c.type = broker::StateChange::Type::kReviewed;
    c.time = e.time;
    c.key = {"a", name};
    c.actor = e.actor;
    c.message = audit::EncodeEvent(e, /*with_seq=*/false);
    batch.changes.push_back(std::move(c));
    Append(batch);
  }

  void Append(const broker::DurableBatch& batch) {
    absl::StatusOr<uint64_t> record = journal_->Append(batch);
    ASSERT_THAT(record.status(), IsOk());
    last_record_ = *record;
  }

  // The replica: its audit log in `dir` (opened as at a start) and its feed.
  struct Replica {
    std::unique_ptr<audit::AuditLog> log;
    std::unique_ptr<AuditFeed> feed;
  };
  Replica Start(const testing::TempDir& dir) {
    Replica r;
    audit::AuditOptions o;
    o.clock = &base::RealClock();
    o.dir = dir.File("audit");
    store::LogRecovery recovery;
    absl::StatusOr<std::unique_ptr<audit::AuditLog>> log = audit::AuditLog::Open(o, &recovery);
    EXPECT_THAT(log.status(), IsOk());
    if (!log.ok()) return r;
    r.log = *std::move(log);
    r.feed = std::make_unique<AuditFeed>(client_.get(), prefix_, r.log.get());
    return r;
  }

  // Waits (up to 10 s) until `r` has written the last record.
  bool CaughtUp(const Replica& r) {
    for (int i = 0; i < 200; ++i) {
      if (r.feed->stats().position >= last_record_) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // "action actor/name" of every event in `r`'s audit log, oldest first.
  static std::vector<std::string> History(const Replica& r) {
    std::vector<std::string> out;
    absl::StatusOr<audit::Page> page = r.log->Find({.limit = 1000});
    EXPECT_THAT(page.status(), IsOk());
    if (!page.ok()) return out;
    for (const audit::Event& e : page->events) out.push_back(absl::StrCat(e.action, " ", e.actor, "/", e.name));
    return out;
  }

  std::unique_ptr<store::EtcdJournal> journal_;
  uint64_t last_record_ = 0;
};

TEST_F(AuditFeedTest, AReplicaBackOnItsOwnAuditLogWritesWhatItMissedAndNothingTwice) {
  testing::TempDir volume;
  Replica replica = Start(volume);
  QuotaChange("platform");
  Denial("first");  // the newest record before the replica stops is a review
  ASSERT_TRUE(CaughtUp(replica));
  replica = {};  // stopped (pod replaced); its volume stays

  // While it is away the others go on.
  Denial("second");
  QuotaChange("ops");

  replica = Start(volume);
  ASSERT_TRUE(CaughtUp(replica));
  EXPECT_THAT(History(replica), ElementsAreArray({"quota.changed platform/", "review.denied alice/first",
                                                  "review.denied alice/second", "quota.changed ops/"}));
  EXPECT_EQ(replica.feed->stats().skipped, 0u);
}

TEST_F(AuditFeedTest, AReplicaOnANewAuditLogStartsAtTheOldestRecordEtcdKeepsAndCountsTheRest) {
  for (int i = 0; i < 6; ++i) QuotaChange(absl::StrCat("change-", i));
  // A snapshot at record 6: etcd keeps the 3 records behind it (4 to 6).
  absl::StatusOr<broker::DurableState> state;
  {
    store::EtcdRecovery recovery;
    state = store::ReadState(client_.get(), prefix_, &recovery);
    ASSERT_THAT(state.status(), IsOk());
  }
  auto b = broker::Broker::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), {}, nullptr, nullptr, &clock_,
                                  &*state);
  ASSERT_THAT(b.status(), IsOk());
  ASSERT_THAT(journal_->WriteSnapshot(*(*b)->snapshot()), IsOk());

  testing::TempDir new_volume;
  Replica replica = Start(new_volume);
  ASSERT_TRUE(CaughtUp(replica));
  EXPECT_THAT(History(replica),
              ElementsAreArray({"quota.changed change-3/", "quota.changed change-4/", "quota.changed change-5/"}));
  EXPECT_EQ(replica.feed->stats().skipped, 3u);
}

}  // namespace
}  // namespace gangkeeper::replica
