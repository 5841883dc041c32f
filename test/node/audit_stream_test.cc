// gangkeeper: the replicated audit stream in a real etcd
// (node/audit_stream.h): a leader's records carry their audit events in
// the same transaction (none from a deposed leader), denied reviews go to
// the stream from the replica that answered them, and every replica's feed
// writes each event once, also across a restart; an upgraded replica reads
// the records written before the stream (old kReviewed ones too), then the
// stream, without a duplicate or a gap.
#include "gangkeeper/node/audit_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/node/audit_events.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_fixture.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::node {
namespace {

using ::gangkeeper::testing::EtcdFixture;
using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAreArray;

class AuditStreamTest : public EtcdFixture {
 protected:
  void SetUp() override {
    EtcdFixture::SetUp();
    Upgrade();
  }

  // The leader from now on writes the audit stream (a new version's term).
  void Upgrade() {
    store::EtcdJournalOptions o{.prefix = prefix_, .keep_records = 3};
    AddAuditStream(&o, &clock_);
    journal_ = std::make_unique<store::EtcdJournal>(client_.get(), o, last_record_ + 1, NewTerm());
  }
  // The leader from now on is an older version: records without audit keys.
  void Downgrade() {
    journal_ = std::make_unique<store::EtcdJournal>(
        client_.get(), store::EtcdJournalOptions{.prefix = prefix_, .keep_records = 3}, last_record_ + 1, NewTerm());
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

  static audit::Event DenialOf(const std::string& name, absl::Time time) {
    audit::Event e;
    e.time = time;
    e.actor = "alice";
    e.action = "review.denied";
    e.kind = "Job";
    e.namespace_name = "a";
    e.name = name;
    e.reason = "ExceedsQuota";
    return e;
  }

  // A review some replica denied, as an older version recorded it: a
  // kReviewed change in the leader's journal (the intake brought it).
  void LegacyDenial(const std::string& name) {
    const audit::Event e = DenialOf(name, clock_.Now());
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

  // A review denied by replica `replica`, written to the stream.
  void Denial(const std::string& name, const std::string& replica = "replica-1") {
    ReviewWriter writer(client_.get(), prefix_, replica, &clock_);
    ASSERT_THAT(writer.Write(DenialOf(name, clock_.Now())), IsOk());
    ++reviews_;
  }

  void Append(const broker::DurableBatch& batch) {
    absl::StatusOr<uint64_t> record = journal_->Append(batch);
    ASSERT_THAT(record.status(), IsOk());
    last_record_ = *record;
  }

  // The replica: its audit log in `dir` (opened as at a start) and its feed.
  struct Replica {
    std::unique_ptr<audit::AuditLog> log;
    std::unique_ptr<AuditStreamFeed> feed;
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
    r.feed = std::make_unique<AuditStreamFeed>(client_.get(), prefix_, r.log.get());
    return r;
  }

  // Waits (up to 10 s) until `r` has `events` events.
  static bool Has(const Replica& r, size_t events) {
    for (int i = 0; i < 200; ++i) {
      if (History(r).size() >= events) return true;
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
  int reviews_ = 0;
};

TEST_F(AuditStreamTest, ARecordsEventsAreWrittenInItsTransactionAndReadBack) {
  QuotaChange("platform");
  absl::StatusOr<etcd::RangeResult> key = client_->Range(AuditRecordKey(prefix_, last_record_));
  ASSERT_THAT(key.status(), IsOk());
  ASSERT_EQ(key->kvs.size(), 1u);
  absl::StatusOr<etcd::RangeResult> record = client_->Range(store::JournalKey(prefix_, last_record_));
  ASSERT_THAT(record.status(), IsOk());
  ASSERT_EQ(record->kvs.size(), 1u);
  EXPECT_EQ(key->kvs[0].mod_revision, record->kvs[0].mod_revision);  // one transaction
  absl::StatusOr<std::vector<audit::Event>> events = DecodeStreamEvents(key->kvs[0].value);
  ASSERT_THAT(events.status(), IsOk());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].action, "quota.changed");
  EXPECT_EQ((*events)[0].actor, "platform");
}

TEST_F(AuditStreamTest, ADeposedLeadersBatchWritesNoAuditKeys) {
  store::EtcdJournalOptions o{.prefix = prefix_};
  AddAuditStream(&o, &clock_);
  store::EtcdJournal deposed(client_.get(), o, 1, NewTerm());
  NewTerm();  // another replica's term began
  broker::DurableBatch batch;
  broker::StateChange c;
  c.type = broker::StateChange::Type::kPoliciesChanged;
  c.time = clock_.Now();
  batch.changes.push_back(c);
  EXPECT_TRUE(absl::IsFailedPrecondition(deposed.Append(batch).status()));
  etcd::RangeOptions all;
  all.range_end = etcd::PrefixEnd(AuditStreamPrefix(prefix_));
  absl::StatusOr<etcd::RangeResult> keys = client_->Range(AuditStreamPrefix(prefix_), all);
  ASSERT_THAT(keys.status(), IsOk());
  EXPECT_TRUE(keys->kvs.empty());
}

TEST_F(AuditStreamTest, EveryReplicaWritesEachEventOnceAndAReplicaBackOnItsLogResumes) {
  testing::TempDir volume_a, volume_b;
  Replica a = Start(volume_a);
  Replica b = Start(volume_b);
  QuotaChange("platform");
  Denial("first", "replica-2");  // the newest key before `a` stops is a review
  ASSERT_TRUE(Has(a, 2));
  ASSERT_TRUE(Has(b, 2));
  a = {};  // stopped (pod replaced); its volume stays

  // While it is away the others go on.
  Denial("second", "replica-0");
  QuotaChange("ops");

  a = Start(volume_a);
  const std::vector<std::string> want = {"quota.changed platform/", "review.denied alice/first",
                                         "review.denied alice/second", "quota.changed ops/"};
  ASSERT_TRUE(Has(a, 4));
  ASSERT_TRUE(Has(b, 4));
  absl::SleepFor(absl::Milliseconds(300));  // time for a duplicate to show
  EXPECT_THAT(History(a), ElementsAreArray(want));
  EXPECT_THAT(History(b), ElementsAreArray(want));
  EXPECT_EQ(a.feed->stats().skipped, 0u);
  EXPECT_EQ(a.feed->stats().legacy_records, 0u);
}

TEST_F(AuditStreamTest, AnUpgradedReplicaReadsTheOldRecordsThenTheStreamEachOnce) {
  // Before the upgrade: an older leader's records, a review among them.
  Downgrade();
  QuotaChange("before");
  LegacyDenial("old-review");
  testing::TempDir volume_a;
  Replica a = Start(volume_a);  // upgraded first, while the old leader leads
  ASSERT_TRUE(Has(a, 2));

  // A new leader writes the stream; reviews go to it directly.
  Upgrade();
  QuotaChange("after");
  Denial("new-review");
  // An older replica leads once more (a rolling upgrade going back and
  // forth), then a new one again.
  Downgrade();
  QuotaChange("between");
  Upgrade();
  QuotaChange("last");

  const std::vector<std::string> want = {"quota.changed before/", "review.denied alice/old-review",
                                         "quota.changed after/",  "review.denied alice/new-review",
                                         "quota.changed between/", "quota.changed last/"};
  ASSERT_TRUE(Has(a, want.size()));
  // A replica on a new volume reads it all at once.
  testing::TempDir volume_b;
  Replica b = Start(volume_b);
  ASSERT_TRUE(Has(b, want.size()));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_THAT(History(a), ElementsAreArray(want));
  EXPECT_THAT(History(b), ElementsAreArray(want));
  EXPECT_EQ(b.feed->stats().skipped, 0u);
  EXPECT_EQ(b.feed->stats().legacy_records, 3u);

  // Restarted on its log: nothing twice.
  a = {};
  a = Start(volume_a);
  Denial("after-restart");
  ASSERT_TRUE(Has(a, want.size() + 1));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(History(a).size(), want.size() + 1);
}

TEST_F(AuditStreamTest, AReplicaOnANewAuditLogStartsAtTheOldestRecordEtcdKeepsAndCountsTheRest) {
  for (int i = 0; i < 6; ++i) QuotaChange(absl::StrCat("change-", i));
  // A snapshot at record 6: etcd keeps the 3 records behind it (4 to 6),
  // and their audit keys.
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
  absl::StatusOr<etcd::RangeResult> gone = client_->Range(AuditRecordKey(prefix_, 3));
  ASSERT_THAT(gone.status(), IsOk());
  EXPECT_TRUE(gone->kvs.empty());

  testing::TempDir new_volume;
  Replica replica = Start(new_volume);
  ASSERT_TRUE(Has(replica, 3));
  EXPECT_THAT(History(replica),
              ElementsAreArray({"quota.changed change-3/", "quota.changed change-4/", "quota.changed change-5/"}));
  EXPECT_EQ(replica.feed->stats().skipped, 3u);
}

TEST(AuditStreamCodecTest, EventsRoundTripWithoutTheWritersPositions) {
  audit::Event e;
  e.time = absl::FromUnixSeconds(1'800'000'000);
  e.actor = "alice";
  e.action = "review.denied";
  e.journal_record = 7;
  e.stream_revision = 9;
  absl::StatusOr<std::vector<audit::Event>> back = DecodeStreamEvents(EncodeStreamEvents({e, e}));
  ASSERT_THAT(back.status(), IsOk());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].actor, "alice");
  EXPECT_EQ((*back)[1].journal_record, 0u);
  EXPECT_EQ((*back)[1].stream_revision, 0u);
  EXPECT_FALSE(DecodeStreamEvents("not json\n").ok());
  EXPECT_EQ(RecordOfAuditKey("/p/", AuditRecordKey("/p/", 42)), 42u);
  EXPECT_EQ(RecordOfAuditKey("/p/", "/p/audit/v1/review/1-x-2"), std::nullopt);
}

}  // namespace
}  // namespace gangkeeper::node
