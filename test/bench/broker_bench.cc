// Benchmarks of the broker (DESIGN §10, issue #5):
//   BM_Drain10k          10,000 pending gangs (1-64 pods; a100 and h100 GPUs
//                        and two MIG profiles) over 100 ClusterQueues in 10
//                        cohorts, scheduled to a fixed point.
//   BM_KueueLargeScale   Kueue's test/performance/scheduler large-scale shape
//                        (1,000 ClusterQueues in 10 cohorts, 50,000
//                        workloads, arrivals and runtimes in simulated time).
//   BM_Decision          one scheduling decision (a new gang arrives and is
//                        admitted or queued) on the drained 10k state;
//                        counters p50_us / p99_us.
//   BM_CompletionChurn   one completion and one arrival in full cohorts with
//                        10,000 same-shaped workloads pending; p50_us / p99_us.
//   BM_Memory100k        resident memory of a Broker tracking 100,000
//                        workloads, snapshots included; counter rss_mb.
// Run: build/dev/test/bench/gangkeeper_broker_bench (built with
// -DGK_BUILD_BENCH=ON).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/scheduler.h"
#include "test/bench/shapes.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

std::unique_ptr<Scheduler> Drained(uint64_t seed, int workloads, ScheduleStats* stats_out = nullptr) {
  auto s = Scheduler::Create(GpuShape(10, 10));
  GK_CHECK(s.ok());
  std::mt19937_64 rng(seed);
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  for (int i = 0; i < workloads; ++i) {
    const std::string ns = absl::StrCat("cq-", rng() % 10, "-", rng() % 10);
    GK_CHECK_OK((*s)->Add(RandomGang(rng, ns, i), t0 + absl::Milliseconds(i)));
  }
  ScheduleStats st = (*s)->Schedule(t0 + absl::Seconds(100));
  if (stats_out != nullptr) *stats_out = st;
  // Let the preempted gangs stop (as the actuator would) until quiet.
  for (int round = 0; round < 1000; ++round) {
    bool evicted = false;
    for (const StateChange& c : (*s)->TakeChanges()) {
      if (c.type != StateChange::Type::kEvicted) continue;
      GK_CHECK_OK((*s)->Stopped(c.key, c.uid, t0 + absl::Seconds(101)));
      evicted = true;
    }
    if (!evicted) break;
    (void)(*s)->Schedule(t0 + absl::Seconds(101));
  }
  return *std::move(s);
}

void BM_Drain10k(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ScheduleStats last;
  for (auto _ : state) {
    state.PauseTiming();
    auto s = Scheduler::Create(GpuShape(10, 10));
    std::mt19937_64 rng(42);
    std::vector<workload::Workload> ws;
    for (int i = 0; i < n; ++i) ws.push_back(RandomGang(rng, absl::StrCat("cq-", rng() % 10, "-", rng() % 10), i));
    const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
    state.ResumeTiming();
    for (int i = 0; i < n; ++i) GK_CHECK_OK((*s)->Add(ws[i], t0 + absl::Milliseconds(i)));
    last = (*s)->Schedule(t0 + absl::Seconds(100));
    state.PauseTiming();
    GK_CHECK_OK((*s)->CheckInvariants());
    s->reset();
    state.ResumeTiming();
  }
  state.counters["admitted"] = static_cast<double>(last.admitted);
  state.counters["preempted"] = static_cast<double>(last.preempted);
  state.counters["decisions"] = static_cast<double>(last.nominated);
  state.counters["cycles"] = static_cast<double>(last.cycles);
}
BENCHMARK(BM_Drain10k)->Arg(10'000)->Unit(benchmark::kMillisecond)->Iterations(5);

// This thread's CPU time in microseconds.
double ThreadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void BM_Decision(benchmark::State& state) {
  std::unique_ptr<Scheduler> s = Drained(7, 10'000);
  std::mt19937_64 rng(99);
  const absl::Time t = absl::FromUnixSeconds(1'700'100'000);
  std::vector<double> micros;
  // The same calls' CPU time on this thread: on a shared machine the wall
  // time includes the slices other processes take, CPU time does not.
  std::vector<double> cpu_micros;
  int64_t decisions = 0;
  int n = 1'000'000;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string ns = absl::StrCat("cq-", rng() % 10, "-", rng() % 10);
    workload::Workload w = RandomGang(rng, ns, n++);
    w.pod_sets[0].count = 1 + static_cast<int64_t>(rng() % 4);
    GK_CHECK_OK(s->Add(w, t));
    state.ResumeTiming();
    const double cpu_start = ThreadCpuMicros();
    auto start = std::chrono::steady_clock::now();
    ScheduleStats st = s->Schedule(t);
    auto end = std::chrono::steady_clock::now();
    const double cpu_end = ThreadCpuMicros();
    state.PauseTiming();
    benchmark::DoNotOptimize(st);
    decisions += st.nominated;
    // Only calls that decided something count (a probe queued behind a
    // preemptor that waits for its victims decides nothing).
    const bool timed = st.nominated > 0;
    if (timed) micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    if (timed) cpu_micros.push_back(cpu_end - cpu_start);
    // Undo without disturbing the rest: a pending probe just leaves; an
    // admitted one gives its quota back, and the queues it woke settle.
    GK_CHECK_OK(s->Remove(KeyOf(w), w.uid, t));
    (void)s->Schedule(t);
    (void)s->TakeChanges();
    state.ResumeTiming();
  }
  std::sort(micros.begin(), micros.end());
  std::sort(cpu_micros.begin(), cpu_micros.end());
  auto pct_of = [](const std::vector<double>& v, double p) {
    return v.empty() ? 0.0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
  };
  auto pct = [&](double p) { return pct_of(micros, p); };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["cpu_p50_us"] = pct_of(cpu_micros, 0.50);
  state.counters["cpu_p99_us"] = pct_of(cpu_micros, 0.99);
  state.counters["max_us"] = micros.empty() ? 0.0 : micros.back();
  state.counters["timed_calls"] = static_cast<double>(micros.size());
  state.counters["decisions_per_call"] = micros.empty() ? 0.0 : static_cast<double>(decisions) / micros.size();
}
BENCHMARK(BM_Decision)->Unit(benchmark::kMicrosecond)->Iterations(20'000);

// Kueue's performance shapes: `cohorts` x `per_cohort` ClusterQueues
// (AddCohortQueue) with one cpu flavor "rf" holding `cpu`, preemption
// within the queue by priority, reclaim Any.
std::shared_ptr<model::PolicySet> CpuCohorts(int cohorts, int per_cohort, const model::ResourceQuota& cpu) {
  auto p = std::make_shared<model::PolicySet>();
  p->flavors["rf"].meta.name = "rf";
  for (int c = 0; c < cohorts; ++c) {
    for (int i = 0; i < per_cohort; ++i) {
      model::ClusterQueue& cq = AddCohortQueue(*p, c, i);
      cq.preemption.within_cluster_queue = model::WithinClusterQueuePolicy::kLowerPriority;
      cq.preemption.reclaim_within_cohort = model::ReclaimWithinCohortPolicy::kAny;
      model::ResourceGroup rg;
      rg.covered_resources = {"cpu"};
      rg.flavors.push_back({"rf", {cpu}});
      cq.resource_groups = {rg};
    }
  }
  return p;
}

// The end of Kueue's baseline trace as the e2e run meets it: 5 cohorts of 6
// ClusterQueues (BestEffortFIFO, 50 cpu each, borrowing), full, with
// `range(0)` pending 1-cpu workloads of three priorities spread over them.
// Each iteration one admitted workload completes (Remove) and a new one
// arrives, and the timed Schedule admits into the freed room; the rest of
// the cohort's pending workloads, all of the same shape, are set aside
// again (SchedulingEquivalenceHashing). Counters: p50_us / p99_us of the
// timed call.
void BM_CompletionChurn(benchmark::State& state) {
  const int pending = static_cast<int>(state.range(0));
  std::shared_ptr<model::PolicySet> p = CpuCohorts(5, 6, RQ("cpu", 50));
  std::vector<std::string> queues;
  for (const auto& [name, cq] : p->cluster_queues) queues.push_back(name);
  auto sched = Scheduler::Create(p);
  GK_CHECK(sched.ok());
  Scheduler& s = **sched;
  std::mt19937_64 rng(5);
  int n = 0;
  auto make = [&] {
    workload::Workload w;
    w.namespace_name = queues[rng() % queues.size()];
    w.name = absl::StrCat("w-", n++);
    w.uid = w.name;
    w.queue_name = "q";
    w.priority = static_cast<int32_t>(50 * (1 + rng() % 3));
    workload::PodSet ps;
    ps.name = "main";
    ps.count = 1;
    ps.requests["cpu"] = Quantity::FromUnits(1);
    w.pod_sets.push_back(ps);
    return w;
  };
  absl::Time t = absl::FromUnixSeconds(1'700'000'000);
  std::vector<workload::Workload> admitted;
  std::map<std::string, workload::Workload> by_uid;
  auto settle = [&] {
    for (const StateChange& c : s.TakeChanges()) {
      if (c.type == StateChange::Type::kAdmitted) {
        admitted.push_back(by_uid.at(c.uid));
      } else if (c.type == StateChange::Type::kEvicted) {
        GK_CHECK_OK(s.Stopped(c.key, c.uid, t));
        admitted.erase(std::remove_if(admitted.begin(), admitted.end(),
                                      [&](const workload::Workload& a) { return a.uid == c.uid; }),
                       admitted.end());
      }
    }
  };
  for (int i = 0; i < 1500 + pending; ++i) {
    workload::Workload w = make();
    GK_CHECK_OK(s.Add(w, t));
    by_uid[w.uid] = std::move(w);
  }
  for (int round = 0; round < 100; ++round) {
    (void)s.Schedule(t);
    settle();
  }
  std::vector<double> micros;
  for (auto _ : state) {
    state.PauseTiming();
    t += absl::Milliseconds(10);
    if (!admitted.empty()) {
      const size_t i = rng() % admitted.size();
      GK_CHECK_OK(s.Remove(KeyOf(admitted[i]), admitted[i].uid, t));
      by_uid.erase(admitted[i].uid);
      admitted[i] = std::move(admitted.back());
      admitted.pop_back();
    }
    workload::Workload w = make();
    GK_CHECK_OK(s.Add(w, t));
    by_uid[w.uid] = std::move(w);
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    ScheduleStats st = s.Schedule(t);
    const auto end = std::chrono::steady_clock::now();
    state.PauseTiming();
    benchmark::DoNotOptimize(st);
    micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    settle();
    state.ResumeTiming();
  }
  GK_CHECK_OK(s.CheckInvariants());
  std::sort(micros.begin(), micros.end());
  auto pct = [&](double q) { return micros.empty() ? 0.0 : micros[static_cast<size_t>(q * (micros.size() - 1))]; };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  state.counters["admitted"] = static_cast<double>(admitted.size());
}
BENCHMARK(BM_CompletionChurn)->Arg(10'000)->Unit(benchmark::kMicrosecond)->Iterations(2'000);

// Kueue's large-scale generator: per ClusterQueue 35 small (1 cpu, prio 50,
// every 60 ms, 150 ms), 11 medium (5, 100, 300 ms, 350 ms), 4 large (20,
// 200, 700 ms, 700 ms); ClusterQueues of 20 cpu with borrowingLimit 100,
// reclaimWithinCohort Any, withinClusterQueue LowerPriority.
void BM_KueueLargeScale(benchmark::State& state) {
  const int cohorts = 10;
  const int per_cohort = static_cast<int>(state.range(0));
  struct Class {
    const char* name;
    int count;
    int interval_ms;
    int runtime_ms;
    int32_t priority;
    int64_t cpu;
  };
  const Class classes[] = {{"small", 35, 60, 150, 50, 1}, {"medium", 11, 300, 350, 100, 5}, {"large", 4, 700, 700, 200, 20}};
  double makespan_s = 0;
  std::map<std::string, double> wait_ms;
  std::map<std::string, int64_t> admitted_count;
  int64_t preempted = 0;
  double usage_pct = 0;
  for (auto _ : state) {
    std::shared_ptr<model::PolicySet> p = CpuCohorts(cohorts, per_cohort, RQ("cpu", 20, 100));
    auto sched = Scheduler::Create(p);
    GK_CHECK(sched.ok());
    Scheduler& s = **sched;
    // Events in simulated time (ms): arrivals and completions.
    struct Ev {
      int64_t at_ms;
      int kind;  // 0 completion, 1 arrival
      int64_t id;
      bool operator>(const Ev& o) const { return at_ms != o.at_ms ? at_ms > o.at_ms : kind > o.kind; }
    };
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> events;
    std::vector<workload::Workload> ws;
    std::vector<int> cls;
    std::vector<int64_t> arrival;
    std::vector<int64_t> generation;  // admissions seen, to drop stale completions
    for (int c = 0; c < cohorts; ++c) {
      for (int i = 0; i < per_cohort; ++i) {
        for (int k = 0; k < 3; ++k) {
          for (int j = 0; j < classes[k].count; ++j) {
            workload::Workload w;
            w.namespace_name = absl::StrCat("cq-", c, "-", i);
            w.name = absl::StrCat(classes[k].name, "-", j);
            w.uid = absl::StrCat(w.namespace_name, "-", w.name);
            w.queue_name = "q";
            w.priority = classes[k].priority;
            workload::PodSet ps;
            ps.name = "main";
            ps.count = 1;
            ps.requests["cpu"] = Quantity::FromUnits(classes[k].cpu);
            w.pod_sets.push_back(ps);
            const int64_t id = static_cast<int64_t>(ws.size());
            ws.push_back(std::move(w));
            cls.push_back(k);
            arrival.push_back(static_cast<int64_t>(j) * classes[k].interval_ms);
            generation.push_back(0);
            events.push({arrival.back(), 1, id});
          }
        }
      }
    }
    std::map<WorkloadKey, int64_t> ids;
    for (size_t i = 0; i < ws.size(); ++i) ids[KeyOf(ws[i])] = static_cast<int64_t>(i);
    const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
    std::map<std::string, double> wait_sum;
    admitted_count.clear();
    preempted = 0;
    double cpu_ms_used = 0;
    int64_t now_ms = 0;
    while (!events.empty()) {
      now_ms = events.top().at_ms;
      const absl::Time now = t0 + absl::Milliseconds(now_ms);
      while (!events.empty() && events.top().at_ms == now_ms) {
        Ev e = events.top();
        events.pop();
        if (e.kind == 1) {
          GK_CHECK_OK(s.Add(ws[e.id], now));
        } else if (e.kind == 0 && e.id >= 0) {
          const int64_t id = e.id / 1'000'000;
          if (generation[id] == e.id % 1'000'000) GK_CHECK_OK(s.Finish(KeyOf(ws[id]), ws[id].uid, now));
        }
      }
      (void)s.Schedule(now);
      for (const StateChange& c : s.TakeChanges()) {
        const int64_t id = ids.at(c.key);
        if (c.type == StateChange::Type::kAdmitted) {
          GK_CHECK_OK(s.ReleaseSucceeded(c.key, c.uid, now));
          ++generation[id];
          const Class& k = classes[cls[id]];
          if (generation[id] == 1) {
            wait_sum[k.name] += static_cast<double>(now_ms - arrival[id]);
            ++admitted_count[k.name];
          }
          cpu_ms_used += static_cast<double>(k.cpu * k.runtime_ms);
          events.push({now_ms + k.runtime_ms, 0, id * 1'000'000 + generation[id]});
        } else if (c.type == StateChange::Type::kEvicted) {
          ++preempted;
          ++generation[id];  // its completion is void; it runs again later
          GK_CHECK_OK(s.Stopped(c.key, c.uid, now));
          events.push({now_ms, 2, -1});  // schedule again at once
        }
      }
    }
    GK_CHECK(s.size() == 0);
    makespan_s = static_cast<double>(now_ms) / 1000.0;
    for (const auto& [k, sum] : wait_sum) wait_ms[k] = sum / static_cast<double>(std::max<int64_t>(1, admitted_count[k]));
    usage_pct = 100.0 * cpu_ms_used / (20.0 * cohorts * per_cohort * static_cast<double>(std::max<int64_t>(1, now_ms)));
  }
  state.counters["workloads"] = 50.0 * cohorts * per_cohort;
  state.counters["sim_makespan_s"] = makespan_s;
  state.counters["wait_small_ms"] = wait_ms["small"];
  state.counters["wait_medium_ms"] = wait_ms["medium"];
  state.counters["wait_large_ms"] = wait_ms["large"];
  state.counters["preemptions"] = static_cast<double>(preempted);
  state.counters["cq_usage_pct"] = usage_pct;
}
BENCHMARK(BM_KueueLargeScale)->Arg(100)->Unit(benchmark::kSecond)->Iterations(1);

int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

void BM_Memory100k(benchmark::State& state) {
  mallopt(M_TRIM_THRESHOLD, 4 << 20);  // as `gangkeeper serve` sets it (src/cli/serve.cc)
  for (auto _ : state) {
    const int64_t before = RssBytes();
    base::SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
    BrokerOptions options;
    // No preemption: this measures memory, not preemption storms (every
    // stopped victim wakes its whole cohort's queue, as in Kueue).
    auto broker = Broker::Create(GpuShape(10, 10, false), options, nullptr, nullptr, &clock);
    GK_CHECK(broker.ok());
    (*broker)->Start();
    base::Stopwatch watch;
    std::vector<std::thread> writers;
    for (int t = 0; t < 8; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937_64 local(static_cast<uint64_t>(t));
        for (int i = t; i < 100'000; i += 8) {
          workload::Workload w = RandomGang(local, absl::StrCat("cq-", i % 10, "-", (i / 10) % 10), i);
          w.labels["app"] = "trainer";
          w.labels["team"] = absl::StrCat("team-", i % 10);
          w.annotations["kubectl.kubernetes.io/last-applied-configuration"] = std::string(600, 'x');
          GK_CHECK_OK((*broker)->SubmitAndWait(broker::Event::Add(w)));
          if (t == 0 && i % 8000 == 0) {
            std::fprintf(stderr, "registered %d: %.1f s, rss %.0f MB, batches %llu\n", i,
                         absl::ToDoubleSeconds(watch.Elapsed()), static_cast<double>(RssBytes()) / (1 << 20),
                         static_cast<unsigned long long>((*broker)->snapshot()->stats().batches));
          }
        }
      });
    }
    for (auto& w : writers) w.join();
    GK_CHECK((*broker)->Flush(absl::Seconds(60)));
    const int64_t after = RssBytes();
    state.counters["tracked"] = static_cast<double>((*broker)->snapshot()->workload_count());
    state.counters["rss_mb"] = static_cast<double>(after) / (1 << 20);
    state.counters["rss_growth_mb"] = static_cast<double>(after - before) / (1 << 20);
    state.counters["batches"] = static_cast<double>((*broker)->snapshot()->stats().batches);
    malloc_trim(0);
    state.counters["rss_after_trim_mb"] = static_cast<double>(RssBytes()) / (1 << 20);
  }
}
BENCHMARK(BM_Memory100k)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace gangkeeper::broker

BENCHMARK_MAIN();
