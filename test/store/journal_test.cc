// gangkeeper: tests for durability — the encodings of state_codec.h, the
// Journal in a data directory (on an in-memory file system that can crash
// and fail), and a Broker restored from it.
#include "gangkeeper/store/journal.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/snapshot_file.h"
#include "gangkeeper/store/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/fault_fs.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::store {

// The broker whose state these tests make durable.
using broker::Actuator;
using broker::Assignment;
using broker::Broker;
using broker::BrokerOptions;
using broker::ClusterQueueView;
using broker::DurableBatch;
using broker::DurableKey;
using broker::DurableState;
using broker::InstanceKey;
using broker::Phase;
using broker::PodGroupState;
using broker::PodSetAssignment;
using broker::ReleaseOrder;
using broker::Snapshot;
using broker::StateChange;
using broker::SuspendOrder;
using broker::WorkloadInfo;
using broker::WorkloadKey;

namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::FaultFileSystem;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

constexpr const char* kPolicies = testing::kOneTeamPolicies;

std::shared_ptr<const model::PolicySet> Policies(const std::string& yaml) { return testing::PoliciesFrom(yaml); }

workload::Workload Gang(const std::string& name, int64_t pods, int64_t gpus, int32_t priority = 0) {
  return testing::GpuGang(name, pods, gpus, priority);
}

class RecordingActuator : public Actuator {
 public:
  void Release(const ReleaseOrder& order) override {
    absl::MutexLock lock(&mu_);
    releases_.push_back(order.key.name);
  }
  void Suspend(const SuspendOrder& order) override {
    absl::MutexLock lock(&mu_);
    suspends_.push_back(order.key.name);
  }
  std::vector<std::string> releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  std::vector<std::string> suspends() {
    absl::MutexLock lock(&mu_);
    return suspends_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> releases_;
  std::vector<std::string> suspends_;
};

// What a user would compare before and after a restart.
struct Observed {
  std::map<std::string, std::string> phases;       // name -> phase
  std::map<std::string, std::string> assignments;  // admitted name -> flavors
  std::vector<std::string> queue;                  // pending, in queue order
  std::map<std::string, int32_t> priorities;
  friend bool operator==(const Observed&, const Observed&) = default;
};

Observed Observe(const Broker& broker) {
  Observed o;
  std::shared_ptr<const Snapshot> snap = broker.snapshot();
  snap->ForEachWorkload([&](const WorkloadInfo& w) {
    o.phases[w.key.name] = PhaseName(w.phase);
    o.priorities[w.key.name] = w.priority;
    if (w.admission.has_value()) {
      std::string a = w.admission->cluster_queue;
      for (const auto& [fr, q] : w.admission->usage) absl::StrAppend(&a, " ", fr.ToString(), "=", q.Format());
      o.assignments[w.key.name] = a;
    }
  });
  const ClusterQueueView* cq = snap->FindClusterQueue("team-a");
  if (cq != nullptr) {
    for (const auto& item : cq->pending->items) o.queue.push_back(item.key().name);
  }
  return o;
}

std::string Describe(const Observed& o) {
  std::string s;
  for (const auto& [n, p] : o.phases) absl::StrAppend(&s, n, ":", p, " ");
  absl::StrAppend(&s, "| queue:");
  for (const auto& n : o.queue) absl::StrAppend(&s, " ", n);
  return s;
}

// --- state_codec.h encodings ---

WorkloadInfo FullInfo() {
  WorkloadInfo info;
  info.key = {"ns", "pods"};
  auto w = std::make_shared<workload::Workload>(Gang("pods", 3, 2, 7));
  w->kind = workload::Kind::kPod;
  w->labels = {{"kueue.x-k8s.io/queue-name", "q"}};
  w->annotations = {{"kueue.x-k8s.io/pod-group-total-count", "3"}};
  w->pod_group_name = "group";
  w->pod_group_total_count = 3;
  w->preemption_policy = model::PreemptionPolicy::kNever;
  w->pod_sets[0].limits["memory"] = *quantity::ParseQuantity("8E");  // beyond int64 milli-units
  model::Toleration t;
  t.key = "k";
  t.op = "Exists";
  t.effect = "NoExecute";
  t.toleration_seconds = 30;
  w->pod_sets[0].tolerations.push_back(t);
  w->pod_sets[0].node_selector = {{"zone", "b"}};
  info.workload = w;
  info.cluster_queue = "team-a";
  info.local_queue = "q";
  info.phase = Phase::kEvicting;
  info.priority = -5;
  info.can_preempt = false;
  info.created_at = absl::FromUnixMicros(1'700'000'000'123'456);
  info.queued_at = info.created_at + absl::Seconds(1);
  info.admitted_at = info.created_at + absl::Seconds(2);
  Assignment a;
  a.cluster_queue = "team-a";
  a.borrowing_level = 2;
  PodSetAssignment psa;
  psa.name = "group-0";
  psa.count = 3;
  psa.flavors["nvidia.com/gpu"] = "a100";
  psa.usage["nvidia.com/gpu"] = Quantity::FromUnits(6);
  a.pod_sets.push_back(psa);
  a.usage[{"a100", "nvidia.com/gpu"}] = Quantity::FromMilli(6000);
  info.admission = a;
  info.eviction_reason = "preempted by b/x";
  info.admissions = 2;
  info.evictions = 1;
  info.pod_group_members = 3;
  info.actuation = "suspended";
  auto g = std::make_shared<PodGroupState>();
  g->pods = {"pods-0", "pods-1", "pods-2"};
  g->pod_sets = w->pod_sets;
  info.pod_group = g;
  return info;
}

TEST(DurableTest, AWorkloadImageRoundTripsEveryField) {
  const WorkloadInfo in = FullInfo();
  const std::string bytes = EncodeWorkloadInfo(in);
  absl::StatusOr<WorkloadInfo> out = DecodeWorkloadInfo(bytes);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(EncodeWorkloadInfo(*out), bytes);  // nothing lost, nothing added
  EXPECT_EQ(out->workload->pod_sets[0].limits.at("memory"), in.workload->pod_sets[0].limits.at("memory"));
  EXPECT_EQ(out->workload->pod_sets[0].tolerations[0].toleration_seconds, 30);
  EXPECT_EQ(out->created_at, in.created_at);
  EXPECT_EQ(out->phase, Phase::kEvicting);
  EXPECT_EQ(out->admission->usage.at({"a100", "nvidia.com/gpu"}), Quantity::FromUnits(6));
  EXPECT_EQ(out->pod_group->pods.size(), 3u);
  EXPECT_EQ(out->workload->preemption_policy, model::PreemptionPolicy::kNever);
}

TEST(DurableTest, EveryTruncationAndEveryFlippedByteIsAnErrorNotACrash) {
  const std::string bytes = EncodeWorkloadInfo(FullInfo());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(DecodeWorkloadInfo(bytes.substr(0, n)), StatusIs(absl::StatusCode::kDataLoss)) << "cut at " << n;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(~bad[i]);
    (void)DecodeWorkloadInfo(bad);  // may decode to something else; must not crash
  }
}

TEST(DurableTest, ApplyingABatchTwiceChangesNothing) {
  DurableBatch batch;
  StateChange c;
  c.type = StateChange::Type::kAdmitted;
  c.key = {"ns", "pods"};
  c.uid = "uid-pods";
  batch.changes.push_back(c);
  batch.workloads.emplace_back(WorkloadKey{"ns", "pods"}, std::make_shared<WorkloadInfo>(FullInfo()));
  batch.workloads.emplace_back(WorkloadKey{"ns", "gone"}, nullptr);
  batch.policies = Policies(kPolicies);
  const std::string payload = EncodeBatch(batch);

  DurableState once;
  const std::string gone = DurableKey(InstanceKey{WorkloadKey{"ns", "gone"}, ""});
  once.workloads[gone] = std::make_shared<WorkloadInfo>(FullInfo());
  std::vector<StateChange> changes;
  ASSERT_THAT(ApplyBatch(payload, 5, &once, &changes), IsOk());
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].type, StateChange::Type::kAdmitted);
  EXPECT_EQ(once.position, 5u);
  EXPECT_EQ(once.workloads.count(gone), 0u);
  ASSERT_NE(once.policies, nullptr);
  EXPECT_EQ(once.policies->cluster_queues.count("team-a"), 1u);
  const std::string after_once = EncodeState(once);
  ASSERT_THAT(ApplyBatch(payload, 5, &once), IsOk());
  EXPECT_EQ(EncodeState(once), after_once);

  absl::StatusOr<DurableState> decoded = DecodeState(after_once, 5);
  ASSERT_THAT(decoded, IsOk());
  EXPECT_EQ(EncodeState(*decoded), after_once);
}

TEST(DurableTest, ABadBatchLeavesTheStateAlone) {
  DurableBatch batch;
  batch.workloads.emplace_back(WorkloadKey{"ns", "pods"}, std::make_shared<WorkloadInfo>(FullInfo()));
  const std::string payload = EncodeBatch(batch);
  DurableState state;
  absl::Status s = ApplyBatch(payload.substr(0, payload.size() - 4), 9, &state);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(s.message()), HasSubstr("journal record 9"));
  EXPECT_TRUE(state.workloads.empty());
  EXPECT_EQ(state.position, 0u);
}

// --- The journal and a restored broker ---

class JournalTest : public ::testing::Test {
 protected:
  JournalOptions Options() {
    JournalOptions o;
    o.data_dir = "/var/lib/gangkeeper";
    o.fs = &fs_;
    o.segment_bytes = 4096;
    return o;
  }

  // Opens the journal and a broker on it (restored from what it holds).
  void Start(std::shared_ptr<const model::PolicySet> policies = nullptr, JournalRecovery* rec = nullptr) {
    absl::StatusOr<std::unique_ptr<Journal>> j = Journal::Open(Options(), rec);
    ASSERT_THAT(j, IsOk());
    journal_ = *std::move(j);
    DurableState recovered = journal_->TakeRecovered();
    actuator_ = std::make_unique<RecordingActuator>();
    BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = Broker::Create(policies != nullptr ? policies : Policies(kPolicies), options, actuator_.get(),
                            journal_.get(), &clock_, &recovered);
    ASSERT_THAT(b, IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }

  // A power cut: the process is gone, then the machine is back.
  void Crash(FaultFileSystem::Tear tear = FaultFileSystem::Tear::kPrefix) {
    fs_.Crash(tear);
    broker_.reset();
    journal_.reset();
    fs_.Restart();
  }

  // Lets the broker release everything it reserved.
  void ConfirmReleases() {
    for (const std::string& name : actuator_->releases()) broker_->Submit(broker::Event::ReleaseResult({"a", name}, "uid-" + name, absl::OkStatus()));
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  FaultFileSystem fs_{42};
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<RecordingActuator> actuator_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(JournalTest, AdmittedAndPendingGangsAreTheSameAfterACrash) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("first", 2, 2))), IsOk());  // 4 of 8
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("second", 1, 4))), IsOk());  // 8 of 8
  ConfirmReleases();
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceTime(absl::Seconds(1));
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("waiting-", i), 1, 2, i % 2))), IsOk());
  }
  const Observed before = Observe(*broker_);
  ASSERT_EQ(before.phases.at("first"), "running");
  ASSERT_EQ(before.queue.size(), 5u);
  Crash();
  JournalRecovery rec;
  Start(nullptr, &rec);
  const Observed after = Observe(*broker_);
  EXPECT_EQ(after, before) << "before: " << Describe(before) << "\nafter:  " << Describe(after);
  EXPECT_EQ(rec.workloads, 7u);
  EXPECT_GT(rec.replayed_records, 0u);
  // Running gangs are not released again; nothing was in flight.
  EXPECT_TRUE(actuator_->releases().empty());
  // The restored broker goes on: finishing one admits the head of the queue.
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "second"}, "")), IsOk());
  EXPECT_EQ(broker_->snapshot()->Find({"a", after.queue[0]})->phase, Phase::kReserved);
}

TEST_F(JournalTest, AReleaseSentButNotConfirmedIsSentAgainNeverDoubled) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("in-flight", 2, 2))), IsOk());
  ASSERT_EQ(actuator_->releases(), std::vector<std::string>{"in-flight"});
  Crash();  // before the actuator's answer
  Start();
  // Reserved again (its quota held, not admitted twice) and released again.
  EXPECT_EQ(broker_->snapshot()->Find({"a", "in-flight"})->phase, Phase::kReserved);
  EXPECT_EQ(broker_->snapshot()->FindClusterQueue("team-a")->status.admitted, 1);
  EXPECT_EQ(broker_->snapshot()->AdmittedUsage("team-a").at("nvidia.com/gpu"), Quantity::FromUnits(4));
  EXPECT_EQ(actuator_->releases(), std::vector<std::string>{"in-flight"});
}

TEST_F(JournalTest, AnEvictionInFlightIsSentAgain) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("low", 4, 2, 0))), IsOk());
  ConfirmReleases();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("high", 4, 2, 100))), IsOk());
  ASSERT_EQ(actuator_->suspends(), std::vector<std::string>{"low"});
  Crash();
  Start();
  EXPECT_EQ(broker_->snapshot()->Find({"a", "low"})->phase, Phase::kEvicting);
  EXPECT_EQ(actuator_->suspends(), std::vector<std::string>{"low"});
  broker_->Submit(broker::Event::Stopped({"a", "low"}, "uid-low"));
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  EXPECT_EQ(broker_->snapshot()->Find({"a", "high"})->phase, Phase::kReserved);
}

TEST_F(JournalTest, SnapshotsCompactTheJournalAndRecoveryUsesThem) {
  Start();
  for (int i = 0; i < 40; ++i) {
    clock_.AdvanceTime(absl::Milliseconds(10));
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("w", i), 1, 1))), IsOk());
    if (i == 20) {
      ASSERT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), IsOk());
    }
  }
  ConfirmReleases();
  ASSERT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), IsOk());
  const JournalStats stats = journal_->stats();
  EXPECT_EQ(stats.snapshots, 2u);
  EXPECT_GT(stats.log.first_seq, 1u) << "segments covered by both snapshots were not removed";
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("after", 1, 1))), IsOk());
  const Observed before = Observe(*broker_);
  Crash();
  JournalRecovery rec;
  Start(nullptr, &rec);
  EXPECT_EQ(rec.snapshot_position, stats.last_snapshot_position);
  EXPECT_LE(rec.replayed_records, 3u);
  EXPECT_EQ(Observe(*broker_), before);
}

TEST_F(JournalTest, ACorruptNewestSnapshotFallsBackToTheOlderOne) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a1", 1, 1))), IsOk());
  ASSERT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), IsOk());
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a2", 1, 1))), IsOk());
  ConfirmReleases();
  ASSERT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), IsOk());
  const uint64_t newest = journal_->stats().last_snapshot_position;
  const Observed before = Observe(*broker_);
  Crash();
  fs_.FlipByte(absl::StrCat("/var/lib/gangkeeper/snapshots/", store::SnapshotFileName(newest)), 60);
  JournalRecovery rec;
  Start(nullptr, &rec);
  EXPECT_LT(rec.snapshot_position, newest);
  EXPECT_THAT(absl::StrJoin(rec.notes, "\n"), HasSubstr("skipped a bad snapshot"));
  EXPECT_EQ(Observe(*broker_), before);
}

TEST_F(JournalTest, ACorruptRecordInTheMiddleStopsStartUpUnlessTruncating) {
  Start();
  for (int i = 0; i < 30; ++i) ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("w", i), 1, 0))), IsOk());
  Crash();
  // Damage a record early in the first segment.
  const std::string segment = absl::StrCat("/var/lib/gangkeeper/journal/", store::SegmentFileName(1));
  fs_.FlipByte(segment, store::kSegmentHeaderSize + store::kRecordHeaderSize + 3);
  absl::StatusOr<std::unique_ptr<Journal>> refused = Journal::Open(Options(), nullptr);
  ASSERT_THAT(refused, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--recover=truncate"));
  JournalOptions repair = Options();
  repair.truncate_corruption = true;
  JournalRecovery rec;
  absl::StatusOr<std::unique_ptr<Journal>> repaired = Journal::Open(repair, &rec);
  ASSERT_THAT(repaired, IsOk());
  EXPECT_FALSE(rec.notes.empty());
  EXPECT_EQ((*repaired)->TakeRecovered().workloads.size(), 0u);  // record 1 onwards is gone
}

TEST_F(JournalTest, ADiskErrorIsNeverAcknowledgedAndLatches) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("kept", 1, 1))), IsOk());
  fs_.FailWrites(1, /*disk_full=*/true);
  absl::Status refused = broker_->SubmitAndWait(broker::Event::Add(Gang("refused", 1, 1)));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("No space left"));
  // The disk is fine again but the journal stays failed: nothing more is acknowledged.
  EXPECT_FALSE(journal_->health().ok());
  EXPECT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("later", 1, 1))), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE(broker_->snapshot()->durable());
  EXPECT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), StatusIs(absl::StatusCode::kFailedPrecondition));
  // "refused" was admitted in memory but never released: no in-memory-only acknowledgement.
  EXPECT_EQ(actuator_->releases(), std::vector<std::string>{"kept"});
  Crash(FaultFileSystem::Tear::kNone);
  Start();
  EXPECT_NE(broker_->snapshot()->Find({"a", "kept"}), nullptr);
  EXPECT_EQ(broker_->snapshot()->Find({"a", "refused"}), nullptr);
  EXPECT_EQ(broker_->snapshot()->Find({"a", "later"}), nullptr);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("again", 1, 1))), IsOk());
}

TEST_F(JournalTest, ReplayingTheSameJournalTwiceGivesTheSameState) {
  Start();
  for (int i = 0; i < 10; ++i) ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("w", i), 1, 2))), IsOk());
  ConfirmReleases();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "w0"}, "")), IsOk());
  broker_.reset();
  journal_.reset();
  std::string first;
  for (int round = 0; round < 2; ++round) {
    auto j = Journal::Open(Options(), nullptr);
    ASSERT_THAT(j, IsOk());
    const std::string encoded = EncodeState((*j)->TakeRecovered());
    if (round == 0) first = encoded;
    EXPECT_EQ(encoded, first);
  }
}

TEST_F(JournalTest, AnotherProcessCannotOpenTheSameDataDirectory) {
  Start();
  absl::StatusOr<std::unique_ptr<Journal>> second = Journal::Open(Options(), nullptr);
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(JournalTest, QuotaFilesEditedWhileDownApplyAndADeletedQueueKeepsItsGangs) {
  Start();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("running", 2, 2))), IsOk());
  ConfirmReleases();
  Crash();
  // team-a is gone from the files; its running gang keeps its quota (terminating).
  Start(Policies(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
)"));
  EXPECT_EQ(broker_->snapshot()->Find({"a", "running"})->phase, Phase::kRunning);
  ASSERT_EQ(broker_->snapshot()->terminating().size(), 1u);
  // And across one more restart (the terminating definition is recorded).
  Crash();
  Start(Policies(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
)"));
  EXPECT_EQ(broker_->snapshot()->Find({"a", "running"})->phase, Phase::kRunning);
  EXPECT_EQ(broker_->snapshot()->AdmittedUsage("team-a").at("nvidia.com/gpu"), Quantity::FromUnits(4));
}

}  // namespace
}  // namespace gangkeeper::store

namespace gangkeeper::store {
namespace {

TEST_F(JournalTest, QuotaChangesThroughTheApiSurviveARestartOverTheSameFiles) {
  Start();
  // The API doubles team-a's GPUs (an overlay over the files).
  auto overlay = std::make_shared<model::PolicyOverlay>();
  overlay->generation = 1;
  model::ClusterQueue bigger = Policies(kPolicies)->cluster_queues.at("team-a");
  bigger.resource_groups[0].flavors[0].resources[0].nominal = Quantity::FromUnits(16);
  bigger.meta.resource_version = "1";
  overlay->put.cluster_queues["team-a"] = bigger;
  auto effective = std::make_shared<const model::PolicySet>(model::ApplyOverlay(*Policies(kPolicies), *overlay));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Policies(effective, overlay, "platform", "PUT ClusterQueue team-a")), IsOk());
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("big", 4, 4))), IsOk());  // 16 GPUs
  EXPECT_EQ(broker_->snapshot()->Find({"a", "big"})->phase, Phase::kReserved);
  for (bool snapshot : {false, true}) {
    if (snapshot) {
      ASSERT_THAT(journal_->WriteSnapshot(*broker_->snapshot()), IsOk());
    }
    Crash();
    JournalRecovery rec;
    absl::StatusOr<std::unique_ptr<Journal>> j = Journal::Open(Options(), &rec);
    ASSERT_THAT(j, IsOk());
    DurableState recovered = (*j)->TakeRecovered();
    ASSERT_NE(recovered.overlay, nullptr);
    EXPECT_EQ(recovered.overlay->generation, 1u);
    const model::PolicySet again = model::ApplyOverlay(*Policies(kPolicies), *recovered.overlay);
    EXPECT_EQ(again.cluster_queues.at("team-a").resource_groups[0].flavors[0].resources[0].nominal,
              Quantity::FromUnits(16));
    j->reset();
    Start(std::make_shared<const model::PolicySet>(again));
    EXPECT_EQ(broker_->snapshot()->Find({"a", "big"})->phase, Phase::kReserved);
    ASSERT_NE(broker_->snapshot()->overlay(), nullptr);
  }
}

TEST(PolicyOverlayTest, PutsReplaceAndDeletionsRemoveOverTheFiles) {
  const std::shared_ptr<const model::PolicySet> files = Policies(kPolicies);
  model::PolicyOverlay overlay;
  overlay.deleted.insert(model::ObjectId("LocalQueue", "a", "q"));
  model::ResourceFlavor h100;
  h100.meta.name = "h100";
  overlay.put.flavors["h100"] = h100;
  const model::PolicySet out = model::ApplyOverlay(*files, overlay);
  EXPECT_EQ(out.local_queues.size(), 0u);
  EXPECT_EQ(out.flavors.size(), 2u);
  EXPECT_EQ(out.cluster_queues.size(), 1u);  // untouched objects come from the files
}

}  // namespace
}  // namespace gangkeeper::store

namespace gangkeeper::store {
namespace {

// --- Version 1 records (before workloads had kinds), written byte by byte
// as FORMAT.md §4 specified them: a PyTorchJob registered, then gone.
std::string V1Batch(bool present) {
  std::string out;
  store::Encoder e(&out);
  auto key = [&] {
    e.PutString("ns");
    e.PutString("train");
  };
  e.PutU8(1);        // batch version 1
  e.PutVarint(1);    // one change
  e.PutU8(present ? 0 : 2);  // registered / removed
  e.PutSigned(1'700'000'000'000'000);
  key();
  e.PutString("uid-train");
  e.PutString("team-a");
  e.PutBool(false);  // no assignment
  e.PutString("");
  e.PutString("");
  e.PutString("");  // preemptor: empty key
  e.PutString("");
  e.PutString("alice");
  e.PutVarint(1);  // one image
  key();
  e.PutBool(present);
  if (present) {
    e.PutU8(1);  // info version 1
    key();
    e.PutU8(1);  // kind: PyTorchJob
    e.PutString("kubeflow.org/v1");
    e.PutString("ns");
    e.PutString("train");
    e.PutString("");
    e.PutString("uid-train");
    e.PutVarint(0);  // labels
    e.PutVarint(0);  // annotations
    e.PutString("q");
    e.PutSigned(0);
    e.PutString("");
    e.PutString("");
    e.PutU8(0);
    e.PutString("");
    e.PutVarint(1);  // one pod set
    e.PutString("master");
    e.PutSigned(1);
    e.PutVarint(1);
    e.PutString("nvidia.com/gpu");
    e.PutU8(0);
    e.PutSigned(2000);
    e.PutVarint(0);  // limits
    e.PutString("");
    e.PutVarint(0);  // nodeSelector
    e.PutVarint(0);  // tolerations
    e.PutBool(false);
    e.PutString("/spec/pytorchReplicaSpecs/Master/template");
    e.PutBool(true);  // suspended
    e.PutString("");
    e.PutSigned(0);
    e.PutBool(false);
    e.PutString("alice");
    e.PutString("team-a");  // clusterQueue
    e.PutString("q");
    e.PutU8(0);  // pending
    e.PutSigned(0);
    e.PutBool(true);
    e.PutSigned(1'700'000'000'000'000);
    e.PutSigned(1'700'000'000'000'000);
    e.PutSigned(0);
    e.PutBool(false);  // no admission
    e.PutString("");
    e.PutSigned(0);
    e.PutSigned(0);
    e.PutSigned(0);
    e.PutString("");
    e.PutBool(false);  // no pod group
  }
  e.PutBool(false);  // no policies
  return out;
}

TEST(DurableTest, VersionOneRecordsAreReadAndTheirKeysGetTheirKind) {
  DurableState state;
  std::vector<StateChange> changes;
  ASSERT_THAT(ApplyBatch(V1Batch(true), 1, &state, &changes), IsOk());
  const WorkloadKey key{"ns", "train", workload::Kind::kPyTorchJob, false};
  const std::string id = DurableKey(InstanceKey{key, "uid-train"});
  EXPECT_EQ(id, "pytorchjob.kubeflow.org/ns/train#uid-train");
  ASSERT_EQ(state.workloads.count(id), 1u);
  EXPECT_EQ(state.workloads.at(id)->key, key);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, key);  // the change's key migrated from the image
  // A version 1 "gone" names namespace/name: the PyTorchJob goes.
  ASSERT_THAT(ApplyBatch(V1Batch(false), 2, &state, &changes), IsOk());
  EXPECT_TRUE(state.workloads.empty());
  EXPECT_EQ(changes[1].key, key);  // migrated from what the state tracked
  // A version this gangkeeper does not know is refused, naming it.
  std::string v9 = V1Batch(true);
  v9[0] = 9;
  EXPECT_THAT(ApplyBatch(v9, 3, &state), StatusIs(absl::StatusCode::kDataLoss, "version 9"));
}

}  // namespace
}  // namespace gangkeeper::store
