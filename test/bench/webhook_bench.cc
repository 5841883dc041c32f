// Benchmarks of the admission hot path on a 5 KB Job review (the bench
// harness's review-job.json): decode + mutate, decode + validate. Run with
// `cmake -DGK_BUILD_BENCH=ON` and `build/…/test/bench/gangkeeper_webhook_bench`.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/model/manifest.h"

namespace gangkeeper::admission {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The example policies plus a LocalQueue for the review's namespace.
std::shared_ptr<const model::PolicySet> BenchPolicies() {
  auto loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
  auto p = std::make_shared<model::PolicySet>(loaded.ok() ? loaded->policies : model::PolicySet{});
  model::LocalQueue lq;
  lq.meta.name = "gpu-queue";
  lq.meta.namespace_name = "team-ml";
  lq.cluster_queue = "team-a-gpu";
  p->local_queues[{"team-ml", "gpu-queue"}] = lq;
  p->cluster_queues["team-a-gpu"].namespace_selector = model::LabelSelector{};
  return p;
}

const std::string& Review() {
  static const std::string* body =
      new std::string(ReadFile(std::string(GK_SOURCE_DIR) + "/test/fixtures/admission/review-job.json"));
  return *body;
}

void BM_DecodeAndMutate(benchmark::State& state) {
  auto policies = BenchPolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  for (auto _ : state) {
    WebhookResult r = hook.Mutate(Review());
    benchmark::DoNotOptimize(r.body.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Review().size()));
}
BENCHMARK(BM_DecodeAndMutate);

void BM_DecodeAndValidate(benchmark::State& state) {
  auto policies = BenchPolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  for (auto _ : state) {
    WebhookResult r = hook.Validate(Review());
    benchmark::DoNotOptimize(r.body.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Review().size()));
}
BENCHMARK(BM_DecodeAndValidate);

}  // namespace
}  // namespace gangkeeper::admission

BENCHMARK_MAIN();
