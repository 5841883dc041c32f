// gangkeeper: tests for the audit log — its events, queries, retention, and
// completeness after a crash between the journal write and the audit write.
#include "gangkeeper/audit/audit.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/node/audit_events.h"
#include "gangkeeper/store/journal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fault_fs.h"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::audit {
namespace {

// The broker's side of the audit log lives in the node (audit knows no
// broker types); these tests drive it with a real broker and journal.
using ::gangkeeper::node::AuditedJournal;
using ::gangkeeper::node::CatchUp;
using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::FaultFileSystem;
using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::shared_ptr<const model::PolicySet> Policies() { return testing::PoliciesFrom(testing::kOneTeamPolicies); }

// One pod of `gpus` GPUs, sent by alice.
workload::Workload Gang(const std::string& name, int64_t gpus, int32_t priority = 0) {
  workload::Workload w = testing::GpuGang(name, 1, gpus, priority);
  w.submitted_by = "alice";
  return w;
}

TEST(AuditEventTest, EncodesDesignFieldsInOrderAndDecodesBack) {
  Event e;
  e.seq = 42;
  e.time = absl::FromUnixMicros(1'700'000'000'123'456);
  e.actor = "alice";
  e.action = "workload.admitted";
  e.kind = "Workload";
  e.namespace_name = "a";
  e.name = "train";
  e.uid = "u1";
  e.cluster_queue = "team-a";
  e.details = R"({"assignment":{"usage":{"a100":{"nvidia.com/gpu":"4"}}}})";
  e.journal_record = 7;
  const std::string line = EncodeEvent(e);
  EXPECT_EQ(line.rfind(R"({"seq":42,"time":"2023-11-14T22:13:20.123456Z","actor":"alice")", 0), 0u) << line;
  absl::StatusOr<Event> back = DecodeEvent(line, 42);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(back->time, e.time);
  EXPECT_EQ(back->name, "train");
  EXPECT_EQ(back->journal_record, 7u);
  EXPECT_EQ(EncodeEvent(*back), line);
  EXPECT_FALSE(DecodeEvent("not json", 1).ok());
}

TEST(AuditOpenTest, AClockIsRequired) {
  AuditOptions ao;
  ao.dir = "/audit";
  EXPECT_THAT(AuditLog::Open(ao, nullptr),
              ::gangkeeper::testing::StatusIs(absl::StatusCode::kInvalidArgument, "clock"));
}

class AuditTest : public ::testing::Test {
 protected:
  void Open() {
    store::JournalOptions jo;
    jo.data_dir = "/data";
    jo.fs = &fs_;
    auto j = store::Journal::Open(jo, nullptr);
    ASSERT_THAT(j, IsOk());
    journal_ = *std::move(j);
    AuditOptions ao;
    ao.dir = "/data/audit";
    ao.fs = &fs_;
    ao.segment_bytes = segment_bytes_;
    ao.max_bytes = max_bytes_;
    ao.clock = &clock_;
    auto a = AuditLog::Open(ao, nullptr);
    ASSERT_THAT(a, IsOk());
    audit_ = *std::move(a);
    uint64_t caught_up = 0;
    ASSERT_THAT(CatchUp(*journal_, audit_.get(), &caught_up), IsOk());
    caught_up_ = caught_up;
    sink_ = std::make_unique<AuditedJournal>(journal_.get(), audit_.get());
    broker::DurableState recovered = journal_->TakeRecovered();
    broker::BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = broker::Broker::Create(Policies(), options, actuator_, sink_.get(), &clock_, &recovered);
    ASSERT_THAT(b, IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }
  void Crash() {
    fs_.Crash(FaultFileSystem::Tear::kPrefix);
    broker_.reset();
    sink_.reset();
    audit_.reset();
    journal_.reset();
    fs_.Restart();
  }
  std::vector<Event> All() {
    std::vector<Event> out;
    Query q;
    q.limit = 1000;
    while (true) {
      absl::StatusOr<Page> p = audit_->Find(q);
      EXPECT_THAT(p, IsOk());
      if (!p.ok()) break;
      out.insert(out.end(), p->events.begin(), p->events.end());
      if (p->next == 0) break;
      q.after = p->next;
    }
    return out;
  }
  std::vector<std::string> Actions() {
    std::vector<std::string> out;
    for (const Event& e : All()) out.push_back(absl::StrCat(e.action, " ", e.name));
    return out;
  }

  FaultFileSystem fs_{5};
  uint64_t segment_bytes_ = 16 << 20;
  uint64_t max_bytes_ = 1ull << 30;
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  std::unique_ptr<store::Journal> journal_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<AuditedJournal> sink_;
  std::unique_ptr<broker::Broker> broker_;
  broker::Actuator* actuator_ = nullptr;  // none: the broker answers its orders itself
  uint64_t caught_up_ = 0;
};

// When a release is given (on the broker's thread): the journal record the
// audit log has reached, and, from a reader started then (an auditor who
// saw the release), the actions of the workload it finds.
class AuditAtRelease : public broker::Actuator {
 public:
  explicit AuditAtRelease(std::unique_ptr<AuditLog>* audit) : audit_(audit) {}
  ~AuditAtRelease() override {
    if (reader_.joinable()) reader_.join();
  }
  void Release(const broker::ReleaseOrder& order) override {
    audited_at_release = (*audit_)->last_journal_record();
    reader_ = std::thread([this, name = order.key.name] {
      Query q;
      q.name = name;
      absl::StatusOr<Page> page = (*audit_)->Find(q);
      if (!page.ok()) return;
      for (const Event& e : page->events) reader_saw.push_back(e.action);
    });
  }
  void Suspend(const broker::SuspendOrder&) override {}
  void Join() { reader_.join(); }
  uint64_t audited_at_release = 0;
  std::vector<std::string> reader_saw;

 private:
  std::unique_ptr<AuditLog>* audit_;
  std::thread reader_;
};

TEST_F(AuditTest, EveryDecisionIsAnEventWithItsActorAndNumbers) {
  Open();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("low", 8, 0))), IsOk());
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("high", 4, 100))), IsOk());
  // Without an actuator the broker answers itself, one batch later each.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "high"}, "")), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  EXPECT_THAT(Actions(), ElementsAre("quota.changed ", "workload.pending low", "workload.admitted low",
                                     "workload.released low", "workload.pending high", "workload.preempted low",
                                     "workload.requeued low", "workload.admitted high", "workload.released high",
                                     "workload.finished high", "workload.admitted low", "workload.released low"));
  const std::vector<Event> all = All();
  // Gapless from 1.
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].seq, i + 1);
  EXPECT_EQ(all[1].actor, "alice");
  EXPECT_EQ(all[2].actor, "gangkeeper");
  nlohmann::json admitted = nlohmann::json::parse(all[2].details);
  EXPECT_EQ(admitted["assignment"]["usage"]["a100"]["nvidia.com/gpu"], "8");
  nlohmann::json preempted = nlohmann::json::parse(all[5].details);
  EXPECT_EQ(preempted["preemptor"], "job.batch/a/high");
  nlohmann::json freed = nlohmann::json::parse(all[9].details);
  EXPECT_EQ(freed["freed"]["usage"]["a100"]["nvidia.com/gpu"], "4");
}

TEST_F(AuditTest, FiltersAndCursorPages) {
  Open();
  for (int i = 0; i < 12; ++i) {
    clock_.AdvanceTime(absl::Seconds(10));
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("w", i), 1))), IsOk());
  }
  Query q;
  q.action = "workload.admitted";
  q.limit = 5;
  absl::StatusOr<Page> first = audit_->Find(q);
  ASSERT_THAT(first, IsOk());
  ASSERT_EQ(first->events.size(), 5u);
  EXPECT_NE(first->next, 0u);
  q.after = first->next;
  absl::StatusOr<Page> second = audit_->Find(q);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->events.size(), 3u);  // 8 GPUs: w0..w7 admitted
  EXPECT_EQ(second->next, 0u);
  EXPECT_GT(second->events[0].seq, first->events.back().seq);
  Query by_name;
  by_name.name = "w3";
  absl::StatusOr<Page> w3 = audit_->Find(by_name);
  ASSERT_THAT(w3, IsOk());
  EXPECT_EQ(w3->events.size(), 3u);  // pending, admitted, released
  Query window;
  window.since = absl::FromUnixSeconds(1'700'000'000 + 55);
  window.until = absl::FromUnixSeconds(1'700'000'000 + 75);
  window.action = "workload.pending";
  absl::StatusOr<Page> in_window = audit_->Find(window);
  ASSERT_THAT(in_window, IsOk());
  ASSERT_EQ(in_window->events.size(), 2u);  // registered at +60 and +70
  EXPECT_EQ(in_window->events[0].name, "w5");
}

// A release goes out once the journal has its admission, without waiting
// for the audit log's write (the next start rebuilds that from the
// journal); a reader who saw the release finds the events all the same, and
// the submission is answered only once they are in the audit log.
TEST_F(AuditTest, AReleaseWaitsForTheJournalAndReadersAndTheAnswerForTheAuditLog) {
  AuditAtRelease actuator(&audit_);
  actuator_ = &actuator;
  Open();
  const uint64_t before = audit_->last_journal_record();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("one", 2))), IsOk());
  EXPECT_EQ(actuator.audited_at_release, before) << "released before the audit log had the batch";
  actuator.Join();
  EXPECT_THAT(actuator.reader_saw, ElementsAre("workload.pending", "workload.admitted"))
      << "a reader who saw the release waits for its events";
  Query q;
  q.name = "one";
  absl::StatusOr<Page> page = audit_->Find(q);
  ASSERT_THAT(page, IsOk());
  std::vector<std::string> actions;
  for (const Event& e : page->events) actions.push_back(e.action);
  EXPECT_THAT(actions, ElementsAre("workload.pending", "workload.admitted")) << "in the log when answered";
  EXPECT_EQ(journal_->stats().log.next_seq, page->events.back().journal_record + 1) << "from the journal's record";
}

TEST_F(AuditTest, ACrashBetweenJournalAndAuditIsCaughtUpWithoutGapsOrDuplicates) {
  Open();
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("one", 2))), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));  // its release too
  // A journal record whose events never reach the audit log.
  const uint64_t audited = audit_->stats().log.next_seq;
  broker::DurableBatch batch;
  broker::StateChange c;
  c.type = broker::StateChange::Type::kRegistered;
  c.key = {"a", "manual"};
  c.uid = "uid-manual";
  batch.changes.push_back(c);
  absl::StatusOr<uint64_t> record = journal_->Append(batch);  // journal only: as if killed right after
  ASSERT_THAT(record, IsOk());
  Crash();
  Open();
  EXPECT_EQ(caught_up_, 1u);
  const std::vector<Event> all = All();
  ASSERT_EQ(all.size(), audited);  // the events before, plus the one caught up
  EXPECT_EQ(all.back().name, "manual");
  EXPECT_EQ(all.back().journal_record, *record);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].seq, i + 1);
  // A second start has nothing to catch up.
  broker_.reset();
  sink_.reset();
  audit_.reset();
  journal_.reset();
  Open();
  EXPECT_EQ(caught_up_, 0u);
  EXPECT_EQ(All().size(), audited);
}

TEST_F(AuditTest, RetentionDropsTheOldestSegmentsAndKeepsNumbering) {
  segment_bytes_ = 2048;
  max_bytes_ = 8192;
  Open();
  for (int i = 0; i < 60; ++i) ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang(absl::StrCat("w", i), 0))), IsOk());
  // The admissions and releases come batches later: let them be written, so
  // that retention does not remove events between two pages of All().
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  const std::vector<Event> all = All();
  ASSERT_FALSE(all.empty());
  EXPECT_GT(all.front().seq, 1u) << "nothing was dropped";
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].seq, all[i - 1].seq + 1);
  EXPECT_LE(audit_->stats().log.segments, 5u);
}

}  // namespace
}  // namespace gangkeeper::audit
