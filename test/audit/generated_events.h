// gangkeeper tests: a deterministic stream of audit events and the exact
// answers a query over it must give (for the audit index tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::audit::testing {

using ::gangkeeper::testing::IsOk;

inline const absl::Time kStart = absl::FromUnixSeconds(1'760'000'000);
inline constexpr const char* kActions[] = {"workload.pending", "workload.admitted", "workload.released",
                                           "workload.finished", "quota.changed"};


// Event i of a deterministic stream: 10 ms apart, every 97th one 3 s early
// (clocks step; the index must not assume sorted times).
inline Event MakeEvent(uint64_t i) {
  Event e;
  e.time = kStart + absl::Milliseconds(10 * static_cast<int64_t>(i));
  if (i % 97 == 13) e.time -= absl::Seconds(3);
  e.action = kActions[i % 5];
  e.kind = e.action == std::string("quota.changed") ? "PolicySet" : "Workload";
  e.actor = i % 11 == 0 ? "platform-admin" : "gangkeeper";
  if (e.kind == "Workload") {
    e.namespace_name = absl::StrCat("team-", i % 7);
    e.name = absl::StrCat("job-", i / 5);
    e.uid = absl::StrCat("uid-", i / 5);
    e.cluster_queue = absl::StrCat("cq-", i % 3);
  }
  e.reason = "r";
  e.details = absl::StrCat(R"({"n":)", i, "}");
  return e;
}

inline bool Want(const Query& q, const Event& e) {
  if (q.since.has_value() && e.time < *q.since) return false;
  if (q.until.has_value() && e.time > *q.until) return false;
  return (q.namespace_name.empty() || q.namespace_name == e.namespace_name) && (q.name.empty() || q.name == e.name) &&
         (q.kind.empty() || q.kind == e.kind) && (q.action.empty() || q.action == e.action) &&
         (q.actor.empty() || q.actor == e.actor) && (q.cluster_queue.empty() || q.cluster_queue == e.cluster_queue);
}

// Every page of `q` from the start; the seqs in order.
inline std::vector<uint64_t> AllPages(const AuditLog& log, Query q, size_t* pages = nullptr) {
  std::vector<uint64_t> out;
  q.after = 0;
  for (int page = 0; page < 100'000; ++page) {
    absl::StatusOr<Page> p = log.Find(q);
    EXPECT_THAT(p, IsOk());
    if (!p.ok()) break;
    for (const Event& e : p->events) out.push_back(e.seq);
    if (pages != nullptr) ++*pages;
    if (p->next == 0) break;
    EXPECT_GT(p->next, q.after);
    EXPECT_EQ(p->next, p->events.back().seq);
    q.after = p->next;
  }
  return out;
}

// The seqs (1-based) of events [first, last] matching `q`.
inline std::vector<uint64_t> Expected(const Query& q, uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t seq = first; seq <= last; ++seq) {
    if (Want(q, MakeEvent(seq - 1))) out.push_back(seq);
  }
  return out;
}

inline void AppendRange(AuditLog* log, uint64_t from, uint64_t to, size_t batch) {
  std::vector<Event> events;
  for (uint64_t i = from; i < to; ++i) {
    events.push_back(MakeEvent(i));
    if (events.size() == batch || i + 1 == to) {
      ASSERT_THAT(log->Append(events), IsOk());
      events.clear();
    }
  }
}

}  // namespace gangkeeper::audit::testing
