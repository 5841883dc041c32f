// gangkeeper: tests for the audit log's in-memory index — its answers must
// be exactly those of a full scan, across segment rotation, retention, a
// restart (the background fill) and concurrent appends, up to a million
// events.
#include <algorithm>
#include <map>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/fault_fs.h"
#include "test/testing/status_matchers.h"
#include "test/audit/generated_events.h"

namespace gangkeeper::audit {
namespace {

using ::gangkeeper::audit::testing::kStart;
using ::gangkeeper::audit::testing::MakeEvent;
using ::gangkeeper::audit::testing::Want;
using ::gangkeeper::audit::testing::AllPages;
using ::gangkeeper::audit::testing::Expected;
using ::gangkeeper::audit::testing::AppendRange;
using ::gangkeeper::testing::FaultFileSystem;
using ::gangkeeper::testing::IsOk;

std::vector<Query> SomeQueries() {
  std::vector<Query> qs(9);
  qs[0].namespace_name = "team-3";
  qs[1].name = "job-1234";
  qs[1].namespace_name = "team-3";  // two filters at once
  qs[2].name = "job-1234";
  qs[3].action = "workload.admitted";
  qs[3].cluster_queue = "cq-1";
  qs[3].since = kStart + absl::Seconds(20);
  qs[3].until = kStart + absl::Seconds(90);
  qs[4].actor = "platform-admin";
  qs[4].kind = "PolicySet";
  qs[5].since = kStart + absl::Seconds(150);  // only the newest part
  qs[6].until = kStart + absl::Seconds(5);    // only the oldest part
  qs[7].namespace_name = "no-such-team";
  qs[8].limit = 7;  // everything, in small pages
  qs[8].cluster_queue = "cq-2";
  for (Query& q : qs) {
    if (q.limit == 100) q.limit = 250;
  }
  return qs;
}

class AuditIndexTest : public ::testing::TestWithParam<size_t> {
 protected:
  std::unique_ptr<AuditLog> Open(size_t index_events, uint64_t max_bytes = 1ull << 30) {
    AuditOptions o;
    o.clock = &base::RealClock();
    o.dir = "/audit";
    o.fs = &fs_;
    o.segment_bytes = 64 << 10;
    o.max_bytes = max_bytes;
    o.index_events = index_events;
    o.max_age = absl::ZeroDuration();  // the stream's times are long past
    absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(o, nullptr);
    EXPECT_THAT(log, IsOk());
    return log.ok() ? *std::move(log) : nullptr;
  }
  FaultFileSystem fs_{7};
};

// Index off, index smaller than the log (scan + index), index holding all.
INSTANTIATE_TEST_SUITE_P(IndexSizes, AuditIndexTest, ::testing::Values(0, 3'000, 1'000'000));

TEST_P(AuditIndexTest, AnswersEqualAFullScanBeforeAndAfterARestart) {
  const uint64_t n = 20'000;
  std::unique_ptr<AuditLog> log = Open(GetParam());
  ASSERT_NE(log, nullptr);
  AppendRange(log.get(), 0, n, 64);
  EXPECT_GT(log->stats().log.segments, 10u) << "the test means to cross segments";
  for (const Query& q : SomeQueries()) {
    EXPECT_EQ(AllPages(*log, q), Expected(q, 1, n)) << "ns=" << q.namespace_name << " name=" << q.name;
  }
  // After a restart: the same answers while the index fills, and after.
  log.reset();
  log = Open(GetParam());
  ASSERT_NE(log, nullptr);
  for (const Query& q : SomeQueries()) EXPECT_EQ(AllPages(*log, q), Expected(q, 1, n));
  for (int i = 0; i < 2000 && GetParam() > 0 && !log->stats().index_ready; ++i) absl::SleepFor(absl::Milliseconds(5));
  const AuditStats st = log->stats();
  if (GetParam() > 0) {
    EXPECT_TRUE(st.index_ready);
    EXPECT_EQ(st.indexed_events, std::min<uint64_t>(GetParam(), n));
    EXPECT_EQ(st.index_first_seq, n - std::min<uint64_t>(GetParam(), n) + 1);
  }
  AppendRange(log.get(), n, n + 500, 10);
  for (const Query& q : SomeQueries()) EXPECT_EQ(AllPages(*log, q), Expected(q, 1, n + 500));
}

TEST_P(AuditIndexTest, RetentionRemovesEventsFromTheAnswersToo) {
  std::unique_ptr<AuditLog> log = Open(GetParam(), /*max_bytes=*/512 << 10);
  ASSERT_NE(log, nullptr);
  AppendRange(log.get(), 0, 15'000, 100);
  const uint64_t first = log->stats().log.first_seq;
  ASSERT_GT(first, 1u) << "retention removed nothing";
  for (const Query& q : SomeQueries()) EXPECT_EQ(AllPages(*log, q), Expected(q, first, 15'000));
  if (GetParam() > 0) {
    EXPECT_GE(log->stats().index_first_seq, first);
  }
}

TEST(AuditRetentionTest, SegmentsOlderThanMaxAgeGoAndTheAnswersFollow) {
  FaultFileSystem fs(3);
  base::SimulatedClock clock(kStart);
  AuditOptions o;
  o.dir = "/audit";
  o.fs = &fs;
  o.segment_bytes = 16 << 10;
  o.max_age = absl::Hours(1);
  o.clock = &clock;
  o.index_events = 1000;
  absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(o, nullptr);
  ASSERT_THAT(log, IsOk());
  // Two hours of events, one a second, written as they happen.
  for (uint64_t i = 0; i < 7200; i += 10) {
    clock.SetTime(kStart + absl::Seconds(static_cast<int64_t>(i)));
    std::vector<Event> batch;
    for (uint64_t k = i; k < i + 10; ++k) {
      Event e = MakeEvent(k);
      e.time = kStart + absl::Seconds(static_cast<int64_t>(k));
      batch.push_back(e);
    }
    ASSERT_THAT((*log)->Append(batch), IsOk());
  }
  // Only the last hour is kept, plus at most the segment that reaches into it.
  Query all;
  all.limit = 1000;
  std::vector<uint64_t> kept = AllPages(**log, all);
  ASSERT_FALSE(kept.empty());
  const uint64_t first = kept.front();
  EXPECT_EQ(first, (*log)->stats().log.first_seq);
  EXPECT_GT(first, 3000u) << "nothing older than an hour was removed";
  EXPECT_LT(first, 3600u) << "events younger than an hour were removed";
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i], first + i);
  // Without an age limit nothing goes.
  o.dir = "/audit-kept";
  o.max_age = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<AuditLog>> keep = AuditLog::Open(o, nullptr);
  ASSERT_THAT(keep, IsOk());
  for (uint64_t i = 0; i < 7200; i += 100) {
    clock.SetTime(kStart + absl::Seconds(static_cast<int64_t>(i) + 7200));
    std::vector<Event> batch;
    for (uint64_t k = i; k < i + 100; ++k) batch.push_back(MakeEvent(k));
    ASSERT_THAT((*keep)->Append(batch), IsOk());
  }
  EXPECT_EQ((*keep)->stats().log.first_seq, 1u);
}

TEST_P(AuditIndexTest, QueriesRunningBesideAppendsSeeAPrefixInOrder) {
  std::unique_ptr<AuditLog> log = Open(GetParam());
  ASSERT_NE(log, nullptr);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    AppendRange(log.get(), 0, 6'000, 20);
    done = true;
  });
  Query q;
  q.namespace_name = "team-2";
  q.limit = 1000;
  int rounds = 0;
  for (; rounds < 10'000 && !done; ++rounds) {
    // Whatever a query sees is exactly the matching events of a prefix.
    std::vector<uint64_t> got = AllPages(*log, q);
    const uint64_t last = got.empty() ? 0 : got.back();
    std::vector<uint64_t> want = Expected(q, 1, last);
    ASSERT_EQ(got, want);
  }
  writer.join();
  EXPECT_EQ(AllPages(*log, q), Expected(q, 1, 6'000));
}

TEST_P(AuditIndexTest, ConcurrentAppendersInterleaveAndEveryEventIsFoundOnce) {
  std::unique_ptr<AuditLog> log = Open(GetParam());
  ASSERT_NE(log, nullptr);
  // Eight appenders of one or three events each, their seqs interleaved.
  std::map<uint64_t, Event> by_seq;
  absl::Mutex mu;
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; i < 300; ++i) {
        std::vector<Event> batch = {MakeEvent(t * 1000 + i)};
        if (i % 7 == 0) batch.push_back(MakeEvent(t * 1000 + i + 500)), batch.push_back(MakeEvent(t * 1000 + i + 600));
        absl::StatusOr<uint64_t> first = log->Append(batch);
        ASSERT_THAT(first, IsOk());
        absl::MutexLock lock(&mu);
        for (size_t k = 0; k < batch.size(); ++k) by_seq[*first + k] = batch[k];
      }
    });
  }
  for (std::thread& w : writers) w.join();
  ASSERT_EQ(by_seq.size(), log->stats().log.records);
  for (const Query& q : SomeQueries()) {
    std::vector<uint64_t> want;
    for (const auto& [seq, e] : by_seq) {
      if (Want(q, e)) want.push_back(seq);
    }
    EXPECT_EQ(AllPages(*log, q), want);
  }
  if (GetParam() > 0) {
    EXPECT_EQ(log->stats().indexed_events, std::min<uint64_t>(GetParam(), by_seq.size()));
  }
}

}  // namespace
}  // namespace gangkeeper::audit
