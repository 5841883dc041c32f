// gangkeeper: the broker's journal and snapshots in a real etcd
// (store/etcd_journal.h): a broker that appends there restores whole in
// another process's broker, a replica whose term ended cannot append, a
// snapshot with the records after it is the same state, and damage in etcd
// is reported, never trusted.
#include "gangkeeper/store/etcd_journal.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/store/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_fixture.h"
#include "test/testing/etcd_process.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::store {
namespace {

using ::gangkeeper::testing::EtcdFixture;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

std::shared_ptr<const model::PolicySet> Policies() { return testing::PoliciesFrom(testing::kOneTeamPolicies); }

workload::Workload Gang(const std::string& name, int64_t pods, int64_t gpus) {
  return testing::GpuGang(name, pods, gpus);
}

// name -> phase, and the admitted ones' flavors: what a user compares.
std::map<std::string, std::string> Phases(const broker::Snapshot& snap) {
  std::map<std::string, std::string> out;
  snap.ForEachWorkload([&](const broker::WorkloadInfo& w) {
    std::string flavors;
    if (w.admission.has_value()) {
      for (const auto& ps : w.admission->pod_sets) {
        for (const auto& [resource, flavor] : ps.flavors) absl::StrAppend(&flavors, " ", resource, "=", flavor);
      }
    }
    out[w.key.name] = absl::StrCat(broker::PhaseName(w.phase), flavors);
  });
  return out;
}

using EtcdJournalTest = EtcdFixture;

TEST_F(EtcdJournalTest, ABrokerOnEtcdRestoresWholeInAnotherBroker) {
  EtcdRecovery first;
  absl::StatusOr<broker::DurableState> empty = ReadState(client_.get(), prefix_, &first);
  ASSERT_THAT(empty.status(), IsOk());
  EXPECT_EQ(first.next_record, 1u);
  EXPECT_TRUE(empty->workloads.empty());

  EtcdJournal journal(client_.get(), {.prefix = prefix_}, first.next_record, NewTerm());
  auto b = broker::Broker::Create(Policies(), {}, nullptr, &journal, &clock_);
  ASSERT_THAT(b.status(), IsOk());
  (*b)->Start();
  ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("big", 2, 3))), IsOk());    // 6 of 8 GPUs: admitted
  ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("wide", 4, 1))), IsOk());   // 4 more: waits
  ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("small", 1, 2))), IsOk());  // 2: fits beside big
  ASSERT_TRUE((*b)->Flush(absl::Seconds(10)));
  const std::map<std::string, std::string> before = Phases(*(*b)->snapshot());
  (*b)->Stop();
  EXPECT_THAT(before.at("big"), HasSubstr("nvidia.com/gpu=a100"));
  EXPECT_THAT(before.at("wide"), HasSubstr("pending"));
  EXPECT_GE(journal.stats().appends, 3u);

  // Records are gapless keys under the prefix.
  etcd::RangeOptions all;
  all.range_end = etcd::PrefixEnd(JournalPrefix(prefix_));
  absl::StatusOr<etcd::RangeResult> keys = client_->Range(JournalPrefix(prefix_), all);
  ASSERT_THAT(keys.status(), IsOk());
  ASSERT_EQ(keys->kvs.size(), journal.stats().next_record - 1);
  for (size_t i = 0; i < keys->kvs.size(); ++i) EXPECT_EQ(RecordOfKey(prefix_, keys->kvs[i].key), i + 1);

  // Another replica reads it and its broker is the same.
  EtcdRecovery again;
  absl::StatusOr<broker::DurableState> state = ReadState(client_.get(), prefix_, &again);
  ASSERT_THAT(state.status(), IsOk());
  EXPECT_EQ(again.next_record, journal.stats().next_record);
  EXPECT_EQ(again.workloads, 3u);
  auto restored = broker::Broker::Create(Policies(), {}, nullptr, nullptr, &clock_, &*state);
  ASSERT_THAT(restored.status(), IsOk());
  EXPECT_EQ(Phases(*(*restored)->snapshot()), before);
}

TEST_F(EtcdJournalTest, AReplicaWhoseTermEndedCannotAppendAndTheNewLeaderContinues) {
  const etcd::Compare old_term = NewTerm();
  EtcdJournal old_leader(client_.get(), {.prefix = prefix_}, 1, old_term);
  broker::DurableBatch batch;
  batch.policies = Policies();
  ASSERT_THAT(old_leader.Append(batch).status(), IsOk());

  // Another replica takes over (the leader key is created anew) and reads
  // the state; the old leader's next append is refused and stays refused.
  const etcd::Compare new_term = NewTerm();
  EtcdRecovery r;
  ASSERT_THAT(ReadState(client_.get(), prefix_, &r).status(), IsOk());
  EXPECT_EQ(r.next_record, 2u);
  EtcdJournal new_leader(client_.get(), {.prefix = prefix_}, r.next_record, new_term);
  EXPECT_THAT(old_leader.Append(batch).status(), StatusIs(absl::StatusCode::kFailedPrecondition, "term ended"));
  EXPECT_THAT(old_leader.health(), StatusIs(absl::StatusCode::kFailedPrecondition));
  absl::StatusOr<uint64_t> next = new_leader.Append(batch);
  ASSERT_THAT(next.status(), IsOk());
  EXPECT_EQ(*next, 2u);
  EXPECT_THAT(old_leader.Append(batch).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(ReadState(client_.get(), prefix_, &r).status(), IsOk());
  EXPECT_EQ(r.next_record, 3u);

  // A replica without a term never writes.
  EtcdJournal follower(client_.get(), {.prefix = prefix_}, 3, std::nullopt);
  EXPECT_THAT(follower.Append(batch).status(), StatusIs(absl::StatusCode::kFailedPrecondition, "leader"));
}

TEST_F(EtcdJournalTest, ARecordItsOwnLostAttemptWroteIsSkippedNotOverwritten) {
  const etcd::Compare term = NewTerm();
  EtcdJournal journal(client_.get(), {.prefix = prefix_}, 1, term);
  broker::DurableBatch batch;
  batch.policies = Policies();
  // As if an earlier append of this term reached etcd but its answer was
  // lost: record 1 is there with other content.
  broker::DurableBatch lost;
  lost.policies = std::make_shared<model::PolicySet>();
  ASSERT_THAT(client_->Put(JournalKey(prefix_, 1), EncodeBatch(lost)).status(), IsOk());
  absl::StatusOr<uint64_t> at = journal.Append(batch);
  ASSERT_THAT(at.status(), IsOk());
  EXPECT_EQ(*at, 2u);
  absl::StatusOr<etcd::RangeResult> one = client_->Range(JournalKey(prefix_, 1));
  ASSERT_THAT(one.status(), IsOk());
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, EncodeBatch(lost));
  EtcdRecovery r;
  absl::StatusOr<broker::DurableState> state = ReadState(client_.get(), prefix_, &r);
  ASSERT_THAT(state.status(), IsOk());
  EXPECT_EQ(r.next_record, 3u);
  ASSERT_NE(state->policies, nullptr);
  EXPECT_EQ(state->policies->cluster_queues.size(), 1u);  // the later record wins
}

TEST_F(EtcdJournalTest, ASnapshotInChunksPlusTheRecordsAfterItIsTheSameState) {
  EtcdJournalOptions o{.prefix = prefix_, .snapshot_chunk_bytes = 1024, .keep_records = 2};
  const etcd::Compare term = NewTerm();
  EtcdJournal journal(client_.get(), o, 1, term);
  auto b = broker::Broker::Create(Policies(), {}, nullptr, &journal, &clock_);
  ASSERT_THAT(b.status(), IsOk());
  (*b)->Start();
  for (int i = 0; i < 12; ++i) ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("g", i), 1, 1))), IsOk());
  ASSERT_TRUE((*b)->Flush(absl::Seconds(10)));
  ASSERT_THAT(journal.WriteSnapshot(*(*b)->snapshot()), IsOk());
  const EtcdJournalStats st = journal.stats();
  EXPECT_EQ(st.snapshots, 1u);
  EXPECT_GT(st.last_snapshot_bytes, 1024u) << "the snapshot should need several chunks";
  for (int i = 12; i < 15; ++i) ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("g", i), 1, 1))), IsOk());
  ASSERT_TRUE((*b)->Flush(absl::Seconds(10)));
  const std::map<std::string, std::string> before = Phases(*(*b)->snapshot());
  (*b)->Stop();
  EXPECT_EQ(before.size(), 15u);

  // Records more than keep_records behind the snapshot are gone.
  absl::StatusOr<etcd::RangeResult> first = client_->Range(JournalKey(prefix_, 1));
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_TRUE(first->kvs.empty());

  EtcdRecovery r;
  absl::StatusOr<broker::DurableState> state = ReadState(client_.get(), prefix_, &r);
  ASSERT_THAT(state.status(), IsOk());
  EXPECT_EQ(r.snapshot_position, st.last_snapshot_position);
  EXPECT_EQ(r.replayed_records, 3u);
  auto restored = broker::Broker::Create(Policies(), {}, nullptr, nullptr, &clock_, &*state);
  ASSERT_THAT(restored.status(), IsOk());
  EXPECT_EQ(Phases(*(*restored)->snapshot()), before);

  // The next snapshot (a new leader's, from the restored state) replaces
  // the first one's chunks, and the next start begins from it.
  state = ReadState(client_.get(), prefix_, &r);
  ASSERT_THAT(state.status(), IsOk());
  EtcdJournal next(client_.get(), o, r.next_record, term);
  auto leader = broker::Broker::Create(Policies(), {}, nullptr, &next, &clock_, &*state);
  ASSERT_THAT(leader.status(), IsOk());
  (*leader)->Start();
  ASSERT_THAT((*leader)->SubmitAndWait(broker::Event::Add(Gang("last", 1, 1))), IsOk());
  ASSERT_TRUE((*leader)->Flush(absl::Seconds(10)));
  ASSERT_THAT(next.WriteSnapshot(*(*leader)->snapshot()), IsOk());
  const uint64_t second = next.stats().last_snapshot_position;
  EXPECT_GT(second, st.last_snapshot_position);
  (*leader)->Stop();
  etcd::RangeOptions all;
  all.range_end = etcd::PrefixEnd(prefix_ + "snapshots/");
  all.keys_only = true;
  absl::StatusOr<etcd::RangeResult> chunks = client_->Range(prefix_ + "snapshots/", all);
  ASSERT_THAT(chunks.status(), IsOk());
  ASSERT_FALSE(chunks->kvs.empty());
  for (const etcd::KeyValue& kv : chunks->kvs) {
    EXPECT_THAT(kv.key, HasSubstr(absl::StrFormat("/%020d/", second)));
  }
  ASSERT_THAT(ReadState(client_.get(), prefix_, &r).status(), IsOk());
  EXPECT_EQ(r.snapshot_position, second);
  EXPECT_EQ(r.replayed_records, 0u);
  EXPECT_EQ(r.workloads, 16u);
}

TEST_F(EtcdJournalTest, DamageInEtcdIsReportedNotTrusted) {
  EtcdJournal journal(client_.get(), {.prefix = prefix_}, 1, NewTerm());
  broker::DurableBatch batch;
  batch.policies = Policies();
  for (int i = 0; i < 3; ++i) ASSERT_THAT(journal.Append(batch).status(), IsOk());

  // A record that does not decode.
  ASSERT_THAT(client_->Put(JournalKey(prefix_, 2), "not a batch").status(), IsOk());
  EXPECT_THAT(ReadState(client_.get(), prefix_, nullptr).status(),
              StatusIs(absl::StatusCode::kDataLoss, JournalKey(prefix_, 2)));
  // A gap.
  ASSERT_THAT(client_->Delete(JournalKey(prefix_, 2)).status(), IsOk());
  EXPECT_THAT(ReadState(client_.get(), prefix_, nullptr).status(),
              StatusIs(absl::StatusCode::kDataLoss, "record 2 is missing"));
  // A manifest that is not one, and a snapshot that does not match its manifest.
  ASSERT_THAT(client_->Put(prefix_ + "snapshot", "{}").status(), IsOk());
  EXPECT_THAT(ReadState(client_.get(), prefix_, nullptr).status(),
              StatusIs(absl::StatusCode::kDataLoss, "manifest"));
  ASSERT_THAT(client_->Put(prefix_ + "snapshot", R"({"position":3,"chunks":1,"bytes":5,"crc32c":0})").status(), IsOk());
  ASSERT_THAT(client_->Put(prefix_ + "snapshots/00000000000000000003/000000", "12345").status(), IsOk());
  EXPECT_THAT(ReadState(client_.get(), prefix_, nullptr).status(),
              StatusIs(absl::StatusCode::kDataLoss, "does not match"));
}

TEST_F(EtcdJournalTest, ARecordOverTheLimitIsRefusedWithTheFlagToRaise) {
  EtcdJournal journal(client_.get(), {.prefix = prefix_, .max_record_bytes = 16}, 1, NewTerm());
  broker::DurableBatch batch;
  batch.policies = Policies();
  EXPECT_THAT(journal.Append(batch).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "--max-request-bytes"));
}

TEST_F(EtcdJournalTest, EtcdDownIsUnavailableAndTheBrokerKeepsTheChangesUntilItIsBack) {
  EtcdJournal journal(client_.get(), {.prefix = prefix_}, 1, NewTerm());
  auto b = broker::Broker::Create(Policies(), {}, nullptr, &journal, &clock_);
  ASSERT_THAT(b.status(), IsOk());
  (*b)->Start();
  ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("before", 1, 1))), IsOk());
  etcd_->Kill();
  EXPECT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("during", 1, 1))), StatusIs(absl::StatusCode::kUnavailable));
  ASSERT_THAT(etcd_->Restart(), IsOk());
  // The broker retries what it kept on its next batch.
  ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(Gang("after", 1, 1))), IsOk());
  ASSERT_TRUE((*b)->Flush(absl::Seconds(10)));
  (*b)->Stop();
  EXPECT_THAT(journal.health(), IsOk());
  absl::StatusOr<broker::DurableState> state = ReadState(client_.get(), prefix_, nullptr);
  ASSERT_THAT(state.status(), IsOk());
  EXPECT_TRUE(state->workloads.contains(broker::DurableKey(broker::InstanceKey{{"a", "before"}, "uid-before"})));
  EXPECT_TRUE(state->workloads.contains(broker::DurableKey(broker::InstanceKey{{"a", "after"}, "uid-after"})));
}

}  // namespace
}  // namespace gangkeeper::store
