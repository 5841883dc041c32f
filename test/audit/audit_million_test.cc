// gangkeeper: the audit index at scale — a million events on disk in
// rotating segments, a filtered time-range query answered exactly, before
// and after a restart. Minutes under AddressSanitizer, so the release
// build runs it (label "scale").
#include <memory>
#include <vector>

#include "gangkeeper/audit/audit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/audit/generated_events.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::audit {
namespace {

using ::gangkeeper::audit::testing::kStart;
using ::gangkeeper::audit::testing::AllPages;
using ::gangkeeper::audit::testing::Expected;
using ::gangkeeper::audit::testing::AppendRange;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::TempDir;

// The acceptance test of the audit index: a million events, on disk, in
// rotating segments, the index holding the newest quarter; a filtered
// time-range query across both halves is answered exactly.
TEST(AuditMillionTest, AMillionEventsRotateAndAFilteredTimeRangeIsExact) {
  TempDir dir;
  constexpr uint64_t kEvents = 1'000'000;
  AuditOptions o;
  o.clock = &base::RealClock();
  o.dir = dir.File("audit");
  o.segment_bytes = 8 << 20;
  o.index_events = 250'000;
  o.max_age = absl::ZeroDuration();  // the stream's times are long past
  std::unique_ptr<AuditLog> log;
  {
    absl::StatusOr<std::unique_ptr<AuditLog>> opened = AuditLog::Open(o, nullptr);
    ASSERT_THAT(opened, IsOk());
    log = *std::move(opened);
  }
  AppendRange(log.get(), 0, kEvents, 5'000);
  const AuditStats st = log->stats();
  EXPECT_EQ(st.log.next_seq, kEvents + 1);
  EXPECT_GT(st.log.segments, 10u);
  EXPECT_EQ(st.indexed_events, 250'000u);
  // Admissions in cq-1 of team-4 between minute 60 and minute 150: from
  // the scanned part into the indexed one (events 750,001.. are indexed,
  // from about minute 125).
  Query q;
  q.namespace_name = "team-4";
  q.action = "workload.admitted";
  q.cluster_queue = "cq-1";
  q.since = kStart + absl::Minutes(60);
  q.until = kStart + absl::Minutes(150);
  q.limit = 1000;
  size_t pages = 0;
  const std::vector<uint64_t> want = Expected(q, 1, kEvents);
  ASSERT_GT(want.size(), 1000u);
  EXPECT_EQ(AllPages(*log, q, &pages), want);
  EXPECT_EQ(pages, (want.size() + 999) / 1000);
  // One workload's history, all of it indexed.
  Query history;
  history.name = "job-190000";
  EXPECT_EQ(AllPages(*log, history), Expected(history, 1, kEvents));
  // The same after a restart, before and after the index is filled again.
  log.reset();
  {
    absl::StatusOr<std::unique_ptr<AuditLog>> opened = AuditLog::Open(o, nullptr);
    ASSERT_THAT(opened, IsOk());
    log = *std::move(opened);
  }
  EXPECT_EQ(AllPages(*log, q), want);
  for (int i = 0; i < 6000 && !log->stats().index_ready; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(log->stats().index_ready);
  EXPECT_EQ(log->stats().indexed_events, 250'000u);
  EXPECT_EQ(AllPages(*log, q), want);
  EXPECT_EQ(AllPages(*log, history), Expected(history, 1, kEvents));
}

}  // namespace
}  // namespace gangkeeper::audit
