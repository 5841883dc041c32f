// gangkeeper: tests for the review denials' rate limit and aggregation
// (audit/denials.h), on a simulated clock: what is written at once, what
// is folded into one event per window, what is only counted, and that a
// flood of forged denials cannot rotate a workload's history away.
#include "gangkeeper/audit/denials.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/verify.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fault_fs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::audit {
namespace {

using ::gangkeeper::testing::IsOk;
using nlohmann::json;

const absl::Time kDenialsNow = absl::FromUnixSeconds(1'800'000'000);

Event Denial(const std::string& name, const std::string& reason = "QueueNotFound") {
  Event e;
  e.time = kDenialsNow;
  e.actor = "system:serviceaccount:kube-system:forged";
  e.actor_claimed = true;
  e.action = kReviewDenied;
  e.kind = "Job";
  e.namespace_name = "team-a";
  e.name = name;
  e.uid = "uid-" + name;
  e.reason = reason;
  e.details = R"({"operation":"CREATE","code":403,"message":"no such LocalQueue","dryRun":false})";
  return e;
}

class DenialAggregatorTest : public ::testing::Test {
 protected:
  DenialAggregatorTest() {
    limits_.window = absl::Seconds(60);
    limits_.per_second = 1;
    limits_.burst = 3;
    limits_.summary_every = absl::Seconds(30);
    limits_.summary_sources = 2;
  }
  std::unique_ptr<DenialAggregator> Make() {
    return std::make_unique<DenialAggregator>(limits_, &clock_, [this](const Event& e) {
      absl::MutexLock lock(&mu_);
      written_.push_back(e);
      return absl::OkStatus();
    });
  }
  std::vector<Event> Written() {
    absl::MutexLock lock(&mu_);
    return written_;
  }

  DenialLimits limits_;
  base::SimulatedClock clock_{kDenialsNow};
  absl::Mutex mu_;
  std::vector<Event> written_ ABSL_GUARDED_BY(mu_);
};

TEST_F(DenialAggregatorTest, TheFirstDenialIsWrittenAtOnceAndRepeatsMakeOneEventWhenTheWindowEnds) {
  auto agg = Make();
  ASSERT_THAT(agg->Record(Denial("llm"), "10.0.0.7"), IsOk());
  std::vector<Event> w = Written();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(w[0].actor_claimed);
  EXPECT_EQ(json::parse(w[0].details)["source"], "10.0.0.7");
  EXPECT_EQ(json::parse(w[0].details)["operation"], "CREATE");
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceTime(absl::Seconds(10));
    ASSERT_THAT(agg->Record(Denial("llm"), "10.0.0.7"), IsOk());
  }
  agg->Poll();
  EXPECT_EQ(Written().size(), 1u) << "the window is still open";
  clock_.AdvanceTime(absl::Seconds(15));  // 65 s after the first
  agg->Poll();
  w = Written();
  ASSERT_EQ(w.size(), 2u);
  const json d = json::parse(w[1].details);
  EXPECT_EQ(w[1].action, kReviewDenied);
  EXPECT_EQ(w[1].name, "llm");
  EXPECT_TRUE(w[1].actor_claimed);
  EXPECT_EQ(d["count"], 5);
  EXPECT_EQ(d["first"], "2027-01-15T08:00:10.000000Z");
  EXPECT_EQ(d["last"], "2027-01-15T08:00:50.000000Z");
  EXPECT_EQ(d["source"], "10.0.0.7");
  EXPECT_EQ(d["message"], "no such LocalQueue");
  // The next denial opens a new window and is written at once.
  ASSERT_THAT(agg->Record(Denial("llm"), "10.0.0.7"), IsOk());
  EXPECT_EQ(Written().size(), 3u);
  const DenialStats st = agg->stats();
  EXPECT_EQ(st.denials, 7u);
  EXPECT_EQ(st.written, 2u);
  EXPECT_EQ(st.aggregated, 5u);
  EXPECT_EQ(st.aggregated_events, 1u);
  EXPECT_EQ(st.suppressed, 0u);
}

TEST_F(DenialAggregatorTest, EachSourceObjectAndReasonIsAKeyOfItsOwn) {
  limits_.burst = 10;
  auto agg = Make();
  ASSERT_THAT(agg->Record(Denial("a"), "10.0.0.1"), IsOk());
  ASSERT_THAT(agg->Record(Denial("a"), "10.0.0.2"), IsOk());
  ASSERT_THAT(agg->Record(Denial("b"), "10.0.0.1"), IsOk());
  ASSERT_THAT(agg->Record(Denial("a", "QuotaExceeded"), "10.0.0.1"), IsOk());
  ASSERT_THAT(agg->Record(Denial("a"), "10.0.0.1"), IsOk());  // a repeat
  EXPECT_EQ(Written().size(), 4u);
  EXPECT_EQ(agg->stats().aggregated, 1u);
}

TEST_F(DenialAggregatorTest, PastTheBudgetDenialsAreOnlyCountedAndSummarisedBySource) {
  auto agg = Make();
  // A burst of 3, then one new window a second.
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(agg->Record(Denial(absl::StrCat("forged-", i)), absl::StrCat("10.0.0.", i % 4)), IsOk());
  }
  EXPECT_EQ(Written().size(), 3u);
  EXPECT_EQ(agg->stats().suppressed, 7u);
  clock_.AdvanceTime(absl::Seconds(1));
  ASSERT_THAT(agg->Record(Denial("next"), "10.0.0.9"), IsOk());
  EXPECT_EQ(Written().size(), 4u);
  clock_.AdvanceTime(absl::Seconds(30));
  agg->Poll();
  std::vector<Event> w = Written();
  ASSERT_EQ(w.size(), 5u);
  const Event& summary = w.back();
  EXPECT_EQ(summary.action, kDenialsSuppressed);
  EXPECT_EQ(summary.actor, "gangkeeper");
  EXPECT_FALSE(summary.actor_claimed);
  const json d = json::parse(summary.details);
  EXPECT_EQ(d["count"], 7);
  // Two sources by name (summary_sources), the rest as "other".
  EXPECT_EQ(d["sources"].size(), 3u);
  EXPECT_EQ(d["sources"]["other"].get<int>() + d["sources"]["10.0.0.3"].get<int>() +
                d["sources"]["10.0.0.0"].get<int>(),
            7);
  // Nothing more to say until more are suppressed.
  clock_.AdvanceTime(absl::Seconds(60));
  agg->Poll();
  EXPECT_EQ(Written().size(), 5u);
  EXPECT_EQ(agg->stats().summaries, 1u);
}

TEST_F(DenialAggregatorTest, StopWritesThePendingAggregatesAndTheSummary) {
  auto agg = Make();
  for (int i = 0; i < 3; ++i) ASSERT_THAT(agg->Record(Denial("llm"), "10.0.0.7"), IsOk());
  for (int i = 0; i < 5; ++i) ASSERT_THAT(agg->Record(Denial(absl::StrCat("x", i)), "10.0.0.8"), IsOk());
  EXPECT_EQ(Written().size(), 3u);  // llm, x0, x1; x2..x4 suppressed
  agg->Start();
  agg->Stop();
  std::vector<Event> w = Written();
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(json::parse(w[3].details)["count"], 2);
  EXPECT_EQ(w[4].action, kDenialsSuppressed);
  agg->Stop();
  EXPECT_EQ(Written().size(), 5u);
}

// DESIGN §8 / issue #20: 100,000 forged denials, each for a new object,
// from 50 addresses, over 100 simulated seconds, into a log whose size cap
// would hold only a fraction of them one by one.
TEST(DenialFloodTest, AHundredThousandForgedDenialsLeaveALegitimateWorkloadsEventsQueryable) {
  ::gangkeeper::testing::FaultFileSystem fs(23);
  base::SimulatedClock clock(kDenialsNow);
  AuditOptions o;
  o.dir = "/data/audit";
  o.fs = &fs;
  o.clock = &clock;
  o.segment_bytes = 256 << 10;
  o.max_bytes = 4 << 20;
  o.index_events = 100'000;
  auto log = AuditLog::Open(o, nullptr);
  ASSERT_THAT(log, IsOk());
  constexpr int kFlood = 100'000;
  ASSERT_GT(static_cast<uint64_t>(kFlood) * EncodeEvent(Denial("forged-99999"), false).size(), 4 * o.max_bytes)
      << "the flood would not outrun the size cap one by one";
  // The legitimate workload's history.
  for (const char* action : {"workload.pending", "workload.admitted", "workload.released"}) {
    Event e;
    e.time = clock.Now();
    e.actor = "gangkeeper";
    e.action = action;
    e.kind = "Job";
    e.namespace_name = "team-b";
    e.name = "pretrain";
    ASSERT_THAT((*log)->Append({e}), IsOk());
  }
  DenialAggregator agg(DenialLimits{}, &clock, [&](const Event& e) { return (*log)->Append({e}).status(); });
  for (int i = 0; i < kFlood; ++i) {
    ASSERT_THAT(agg.Record(Denial(absl::StrCat("forged-", i)), absl::StrCat("10.1.0.", i % 50)), IsOk());
    clock.AdvanceTime(absl::Milliseconds(1));
    if (i % 1000 == 999) agg.Poll();
  }
  agg.Stop();
  const DenialStats st = agg.stats();
  EXPECT_EQ(st.denials, static_cast<uint64_t>(kFlood));
  // burst + per_second × 100 s opened windows; the rest only counted.
  EXPECT_LE(st.written, 100u + 10 * 100 + 1);
  EXPECT_EQ(st.written + st.suppressed, static_cast<uint64_t>(kFlood));
  const AuditStats as = (*log)->stats();
  EXPECT_EQ(as.log.first_seq, 1u) << "the flood rotated history away";
  EXPECT_EQ(as.retention_forced, 0u);
  Query q;
  q.namespace_name = "team-b";
  q.name = "pretrain";
  absl::StatusOr<Page> page = (*log)->Find(q);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->events.size(), 3u);
  EXPECT_EQ(page->events[1].action, "workload.admitted");
  // The suppressed ones are told, in summaries.
  Query summaries;
  summaries.action = kDenialsSuppressed;
  absl::StatusOr<Page> told = (*log)->Find(summaries);
  ASSERT_THAT(told, IsOk());
  uint64_t counted = 0;
  for (const Event& e : told->events) counted += json::parse(e.details)["count"].get<uint64_t>();
  EXPECT_EQ(counted, st.suppressed);
  log->reset();
  VerifyOptions vo;
  vo.dir = o.dir;
  vo.fs = &fs;
  absl::StatusOr<VerifyReport> r = VerifyAuditLog(vo);
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->error.has_value());
}

}  // namespace
}  // namespace gangkeeper::audit
