// gangkeeper benchmarks: the durable store (issue #8, DESIGN §10), on the
// real disk, in a directory under $TMPDIR (or /tmp):
//   BM_GroupCommit/W     acknowledged appends per second with W concurrent
//                        writers, each append durable (fsynced) on return;
//                        counters appends_per_s, fsyncs_per_s,
//                        appends_per_fsync. Payloads are ~400 bytes, the size
//                        of a journal record for one registration.
//   BM_Snapshot100k      writing a snapshot of a broker tracking 100,000
//                        workloads; counters snapshot_mb, snapshot_ms.
//   BM_Restart100k/S     recovering 100,000 workloads and starting the
//                        broker on them: S=1 from a snapshot (plus the
//                        journal after it), S=0 from the journal alone;
//                        counters restart_ms (open + replay + restore +
//                        first published snapshot), replayed records.
// Run: build/dev/test/bench/gangkeeper_store_bench (built with
// -DGK_BUILD_BENCH=ON).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "test/bench/bench_dir.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/store/journal.h"
#include "gangkeeper/store/log.h"
#include "test/bench/shapes.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::bench::BenchDir;
// The journal moved from broker to store (91c1f08); this bench kept the old names.
using ::gangkeeper::store::Journal;
using ::gangkeeper::store::JournalOptions;
using ::gangkeeper::store::JournalRecovery;

void BM_GroupCommit(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  constexpr int kAppends = 20'000;
  const std::string payload(400, 'j');
  for (auto _ : state) {
    BenchDir dir;
    store::LogOptions options;
    options.kind = "journal";
    auto log = store::SegmentedLog::Open(store::DefaultFileSystem(), dir.path() + "/journal", options, nullptr);
    GK_CHECK(log.ok());
    std::atomic<int> next{0};
    const base::Stopwatch watch;
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&] {
        while (next.fetch_add(1) < kAppends) GK_CHECK((*log)->Append(payload).ok());
      });
    }
    for (std::thread& t : threads) t.join();
    const double seconds = absl::ToDoubleSeconds(watch.Elapsed());
    const store::LogStats stats = (*log)->stats();
    state.SetIterationTime(seconds);
    state.counters["appends_per_s"] = static_cast<double>(stats.appends) / seconds;
    state.counters["fsyncs_per_s"] = static_cast<double>(stats.groups) / seconds;
    state.counters["appends_per_fsync"] = static_cast<double>(stats.appends) / static_cast<double>(stats.groups);
  }
}
BENCHMARK(BM_GroupCommit)->Arg(1)->Arg(8)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

// Fills `data_dir` through a Broker whose sink is the journal: 100,000
// workloads registered by 8 threads (most stay pending, about a thousand
// are admitted), then a snapshot when `snapshot`, then 500 more.
void Populate(const std::string& data_dir, bool snapshot, double* snapshot_ms, double* snapshot_mb) {
  JournalOptions jo;
  jo.data_dir = data_dir;
  auto journal = Journal::Open(jo, nullptr);
  GK_CHECK(journal.ok());
  base::SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
  BrokerOptions options;
  auto broker = Broker::Create(GpuShape(10, 10, false), options, nullptr, journal->get(), &clock);
  GK_CHECK(broker.ok());
  (*broker)->Start();
  auto fill = [&](int from, int to) {
    std::vector<std::thread> writers;
    for (int t = 0; t < 8; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937_64 local(static_cast<uint64_t>(t));
        for (int i = from + t; i < to; i += 8) {
          workload::Workload w = RandomGang(local, absl::StrCat("cq-", i % 10, "-", (i / 10) % 10), i);
          w.labels["app"] = "trainer";
          GK_CHECK_OK((*broker)->SubmitAndWait(broker::Event::Add(w)));
        }
      });
    }
    for (auto& w : writers) w.join();
    GK_CHECK((*broker)->Flush(absl::Seconds(60)));
  };
  fill(0, 100'000);
  if (snapshot) {
    const base::Stopwatch watch;
    GK_CHECK_OK((*journal)->WriteSnapshot(*(*broker)->snapshot()));
    *snapshot_ms = absl::ToDoubleMilliseconds(watch.Elapsed());
    *snapshot_mb = static_cast<double>((*journal)->stats().last_snapshot_bytes) / (1 << 20);
  }
  fill(100'000, 100'500);
  (*broker)->Stop();
}

void BM_Snapshot100k(benchmark::State& state) {
  for (auto _ : state) {
    BenchDir dir;
    double ms = 0;
    double mb = 0;
    Populate(dir.path() + "/data", true, &ms, &mb);
    state.SetIterationTime(ms / 1000);
    state.counters["snapshot_ms"] = ms;
    state.counters["snapshot_mb"] = mb;
  }
}
BENCHMARK(BM_Snapshot100k)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_Restart100k(benchmark::State& state) {
  const bool snapshot = state.range(0) == 1;
  for (auto _ : state) {
    BenchDir dir;
    double ms = 0;
    double mb = 0;
    Populate(dir.path() + "/data", snapshot, &ms, &mb);
    malloc_trim(0);
    const base::Stopwatch watch;
    JournalOptions jo;
    jo.data_dir = dir.path() + "/data";
    JournalRecovery rec;
    auto journal = Journal::Open(jo, &rec);
    GK_CHECK(journal.ok());
    const double open_ms = absl::ToDoubleMilliseconds(watch.Elapsed());
    DurableState recovered = (*journal)->TakeRecovered();
    base::SimulatedClock clock(absl::FromUnixSeconds(1'700'000'100));
    auto broker = Broker::Create(GpuShape(10, 10, false), BrokerOptions{}, nullptr, journal->get(), &clock,
                                 &recovered);
    GK_CHECK(broker.ok());
    const double total_ms = absl::ToDoubleMilliseconds(watch.Elapsed());
    GK_CHECK((*broker)->snapshot()->workload_count() == rec.workloads);
    state.SetIterationTime(total_ms / 1000);
    state.counters["restart_ms"] = total_ms;
    state.counters["open_replay_ms"] = open_ms;
    state.counters["workloads"] = static_cast<double>(rec.workloads);
    state.counters["replayed_records"] = static_cast<double>(rec.replayed_records);
  }
}
BENCHMARK(BM_Restart100k)->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace gangkeeper::broker

BENCHMARK_MAIN();
