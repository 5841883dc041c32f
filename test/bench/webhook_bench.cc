// Benchmarks of the admission hot path on a 5 KB Job review (the bench
// harness's review-job.json): decode + mutate, decode + validate, and
// /validate's production path (ValidateAsync against a running broker, the
// way the event-loop listener calls it). Each reports ns per request and
// "allocs/req": heap allocations per request on every thread (the broker's
// included), counted by the malloc interposed below, and "cpu_ns/req". Run with
// `cmake -DGK_BUILD_BENCH=ON` and `build/…/test/bench/gangkeeper_webhook_bench`.
#include <benchmark/benchmark.h>

#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_digest.h"

// Allocation counting: every malloc in the process (all threads; operator
// new, RapidJSON's CrtAllocator and the C libraries all end there), by
// interposing glibc's allocator entry points.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
std::atomic<uint64_t> bench_allocs{0};
std::atomic<uint64_t> bench_alloc_bytes{0};
inline void BenchCount(size_t n) {
  bench_allocs.fetch_add(1, std::memory_order_relaxed);
  bench_alloc_bytes.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  BenchCount(n);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  BenchCount(n * m);
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  BenchCount(n);
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t a, size_t n) {
  BenchCount(n);
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  BenchCount(n);
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  BenchCount(n);
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace gangkeeper::admission {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The example policies plus a LocalQueue for the review's namespace, sealed
// as the policy store seals what the webhook reads.
std::shared_ptr<const model::PolicySet> BenchPolicies() {
  auto loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
  model::PolicySet p = loaded.ok() ? loaded->policies : model::PolicySet{};
  model::LocalQueue lq;
  lq.meta.name = "gpu-queue";
  lq.meta.namespace_name = "team-ml";
  lq.cluster_queue = "team-a-gpu";
  p.local_queues[{"team-ml", "gpu-queue"}] = lq;
  p.cluster_queues["team-a-gpu"].namespace_selector = model::LabelSelector{};
  return model::Seal(std::move(p));
}

const std::string& Review() {
  static const std::string* body =
      new std::string(ReadFile(std::string(GK_SOURCE_DIR) + "/test/fixtures/admission/review-job.json"));
  return *body;
}

// Heap allocations (and bytes) per iteration between construction and
// Report(), on every thread.
int64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class AllocCount {
 public:
  AllocCount()
      : allocs_(bench_allocs.load(std::memory_order_relaxed)),
        bytes_(bench_alloc_bytes.load(std::memory_order_relaxed)),
        cpu_ns_(ProcessCpuNs()) {}
  void Report(benchmark::State& state, int64_t requests) const {
    const double n = static_cast<double>(requests > 0 ? requests : 1);
    state.counters["allocs/req"] =
        static_cast<double>(bench_allocs.load(std::memory_order_relaxed) - allocs_) / n;
    state.counters["alloc_bytes/req"] =
        static_cast<double>(bench_alloc_bytes.load(std::memory_order_relaxed) - bytes_) / n;
    // CPU of every thread (the broker's too): steadier than wall time on a
    // shared machine.
    state.counters["cpu_ns/req"] = static_cast<double>(ProcessCpuNs() - cpu_ns_) / n;
  }

 private:
  uint64_t allocs_;
  uint64_t bytes_;
  int64_t cpu_ns_;
};

void BM_DecodeAndMutate(benchmark::State& state) {
  auto policies = BenchPolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  const AllocCount count;
  for (auto _ : state) {
    WebhookResult r = hook.Mutate(Review());
    benchmark::DoNotOptimize(r.body.data());
  }
  count.Report(state, static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Review().size()));
}
BENCHMARK(BM_DecodeAndMutate);

void BM_DecodeAndValidate(benchmark::State& state) {
  auto policies = BenchPolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  const AllocCount count;
  for (auto _ : state) {
    WebhookResult r = hook.Validate(Review());
    benchmark::DoNotOptimize(r.body.data());
  }
  count.Report(state, static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Review().size()));
}
BENCHMARK(BM_DecodeAndValidate);

// /validate as `gangkeeper serve` runs it: ValidateAsync against a running
// broker through its registry (the idempotent re-registration of the same
// review, as in run.sh's load), range(0) reviews in flight at once (the
// connections of a load client). No state sink: a repeat journals nothing.
void BM_ValidateAsyncBroker(benchmark::State& state) {
  auto policies = BenchPolicies();
  auto created = broker::Broker::Create(policies, broker::BrokerOptions{}, nullptr, nullptr, &base::RealClock());
  if (!created.ok()) {
    state.SkipWithError(std::string(created.status().message()).c_str());
    return;
  }
  std::unique_ptr<broker::Broker> b = *std::move(created);
  b->Start();
  auto registry = broker::NewBrokerRegistry(b.get(), b.get());
  Webhook hook([policies] { return policies; }, *registry, {});
  const broker::BlockingRunner inline_runner = [](absl::AnyInvocable<void()> work) { work(); };
  const int64_t in_flight = state.range(0);
  absl::Mutex mu;
  int64_t answered = 0;
  int64_t allowed = 0;
  auto one_round = [&] {
    {
      absl::MutexLock lock(&mu);
      answered = 0;
    }
    for (int64_t i = 0; i < in_flight; ++i) {
      hook.ValidateAsync(Review(), inline_runner, [&](WebhookResult r) {
        const bool ok = r.error.ok() && r.body.find("\"allowed\":true") != std::string::npos;
        absl::MutexLock lock(&mu);
        ++answered;
        if (ok) ++allowed;
      });
    }
    absl::MutexLock lock(&mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return answered == in_flight; };
    mu.Await(absl::Condition(&all));
  };
  one_round();  // the first registration (the only one that changes the broker)
  allowed = 0;
  const AllocCount count;
  for (auto _ : state) one_round();
  count.Report(state, static_cast<int64_t>(state.iterations()) * in_flight);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * in_flight);
  if (allowed != static_cast<int64_t>(state.iterations()) * in_flight) state.SkipWithError("a review was not allowed");
  b->Stop();
}
BENCHMARK(BM_ValidateAsyncBroker)->Arg(1)->Arg(32)->UseRealTime();

}  // namespace
}  // namespace gangkeeper::admission

BENCHMARK_MAIN();
