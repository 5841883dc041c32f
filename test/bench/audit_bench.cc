// gangkeeper benchmarks: the audit log (issue #7), on the real disk under
// $TMPDIR (or /tmp):
//   BM_AuditAppend/W     durable audit events per second with W concurrent
//                        appenders of one event each (group commit: they
//                        share fsyncs); counters events_per_s, fsyncs_per_s.
//   BM_AuditAppendBatch/N/K one appender of N events per Append: the CPU
//                        cost of an event (encoding, checksums, the hash
//                        chain, HEAD) with the fsync shared by N; K=1 with
//                        an HMAC key; counter us_per_event.
//   BM_AuditQuery/Q/I    latency of one query page (limit 100) over a log
//                        of 1,000,000 events in 16 MiB segments, with an
//                        index of I events (I=0: every query scans). Q:
//                        0 one workload's history, 1 one team's admissions
//                        in the newest hour, 2 the same in the oldest hour
//                        (outside a 250k index: scanned), 3 the newest
//                        page after a cursor, 4 an action with no match.
// Run: build/dev/test/bench/gangkeeper_audit_bench (built with
// -DGK_BUILD_BENCH=ON).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/check.h"
#include "test/bench/bench_dir.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::audit {
namespace {

using ::gangkeeper::bench::BenchDir;

const absl::Time kStart = absl::FromUnixSeconds(1'760'000'000);
constexpr uint64_t kEvents = 1'000'000;

// Event i: 10 ms apart (a million events cover ~2.8 hours), 40 teams,
// about five events per workload.
Event MakeEvent(uint64_t i) {
  static const char* kActions[] = {"workload.pending", "workload.admitted", "workload.released", "workload.finished",
                                   "workload.preempted"};
  Event e;
  e.time = kStart + absl::Milliseconds(10 * static_cast<int64_t>(i));
  e.actor = "gangkeeper";
  e.action = kActions[i % 5];
  e.kind = "Workload";
  e.namespace_name = absl::StrCat("team-", (i / 5) % 40);
  e.name = absl::StrCat("train-", i / 5);
  e.uid = absl::StrCat("8d3c0f5e-4b1a-4c7e-9f00-", i / 5);
  e.cluster_queue = absl::StrCat("team-", (i / 5) % 40, "-gpu");
  e.reason = "Admitted";
  e.details = R"({"objectKind":"PyTorchJob","pods":9,"localQueue":"gpu","priority":100,)"
              R"("assignment":{"clusterQueue":"team-7-gpu","usage":{"a100":{"nvidia.com/gpu":"8"}}}})";
  e.journal_record = i + 1;
  return e;
}

// A log in `dir` for generated events (their times are long past: no age
// limit).
std::unique_ptr<AuditLog> OpenLog(const std::string& dir, size_t index_events, const std::string& hmac_key = "") {
  AuditOptions o;
  o.clock = &base::RealClock();
  o.max_age = absl::ZeroDuration();
  o.dir = dir;
  o.index_events = index_events;
  o.hmac_key = hmac_key;
  absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(o, nullptr);
  GK_CHECK(log.ok());
  return *std::move(log);
}

void BM_AuditAppend(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  constexpr int kAppends = 20'000;
  for (auto _ : state) {
    BenchDir dir;
    std::unique_ptr<AuditLog> log = OpenLog(dir.path() + "/audit", AuditOptions().index_events);
    std::atomic<int> next{0};
    const base::Stopwatch watch;
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&] {
        for (int i = next.fetch_add(1); i < kAppends; i = next.fetch_add(1)) {
          GK_CHECK(log->Append({MakeEvent(static_cast<uint64_t>(i))}).ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds = absl::ToDoubleSeconds(watch.Elapsed());
    const AuditStats st = log->stats();
    state.SetIterationTime(seconds);
    state.counters["events_per_s"] = static_cast<double>(st.log.records) / seconds;
    state.counters["fsyncs_per_s"] = static_cast<double>(st.log.groups) / seconds;
  }
}
BENCHMARK(BM_AuditAppend)->Arg(1)->Arg(8)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_AuditAppendBatch(benchmark::State& state) {
  const auto per_append = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kTotal = 200'000;
  for (auto _ : state) {
    BenchDir dir;
    std::unique_ptr<AuditLog> log =
        OpenLog(dir.path() + "/audit", 0, state.range(1) != 0 ? "bench key, 32 bytes long, really" : "");
    std::vector<Event> batch;
    for (uint64_t i = 0; i < per_append; ++i) batch.push_back(MakeEvent(i));
    const base::Stopwatch watch;
    for (uint64_t done = 0; done < kTotal; done += per_append) GK_CHECK(log->Append(batch).ok());
    const double seconds = absl::ToDoubleSeconds(watch.Elapsed());
    state.SetIterationTime(seconds);
    state.counters["us_per_event"] = seconds * 1e6 / static_cast<double>(log->stats().log.records);
  }
}
BENCHMARK(BM_AuditAppendBatch)
    ->ArgsProduct({{100, 1000}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// One log of a million events, written once, opened per index size.
const std::string& MillionEventLog() {
  static BenchDir* dir = new BenchDir();
  static bool written = [] {
    std::unique_ptr<AuditLog> log = OpenLog(dir->path() + "/audit", 0);
    std::vector<Event> batch;
    for (uint64_t i = 0; i < kEvents; ++i) {
      batch.push_back(MakeEvent(i));
      if (batch.size() == 10'000) {
        GK_CHECK(log->Append(batch).ok());
        batch.clear();
      }
    }
    return true;
  }();
  (void)written;
  static const std::string path = dir->path() + "/audit";
  return path;
}

AuditLog* Opened(size_t index_events) {
  static std::map<size_t, std::unique_ptr<AuditLog>>* logs = new std::map<size_t, std::unique_ptr<AuditLog>>();
  auto it = logs->find(index_events);
  if (it != logs->end()) return it->second.get();
  std::unique_ptr<AuditLog> log = OpenLog(MillionEventLog(), index_events);
  // Wait (bounded) for the background fill.
  for (int i = 0; i < 6000 && !log->stats().index_ready && index_events > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  return (*logs)[index_events] = std::move(log), (*logs)[index_events].get();
}

void BM_AuditQuery(benchmark::State& state) {
  AuditLog* log = Opened(static_cast<size_t>(state.range(1)));
  Query q;
  switch (state.range(0)) {
    case 0:
      q.namespace_name = "team-18";
      q.name = "train-199978";
      break;
    case 1:
      q.namespace_name = "team-7";
      q.action = "workload.admitted";
      q.since = kStart + absl::Milliseconds(10 * static_cast<int64_t>(kEvents)) - absl::Hours(1);
      break;
    case 2:
      q.namespace_name = "team-7";
      q.action = "workload.admitted";
      q.until = kStart + absl::Hours(1);
      break;
    case 3:
      q.after = kEvents - 100;
      break;
    default:
      q.action = "workload.no-such-action";
      break;
  }
  size_t found = 0;
  for (auto _ : state) {
    absl::StatusOr<Page> page = log->Find(q);
    GK_CHECK(page.ok());
    found = page->events.size();
    benchmark::DoNotOptimize(found);
  }
  state.counters["events"] = static_cast<double>(found);
  state.counters["indexed"] = static_cast<double>(log->stats().indexed_events);
}
BENCHMARK(BM_AuditQuery)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1'000'000, 250'000, 0}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace gangkeeper::audit

BENCHMARK_MAIN();
