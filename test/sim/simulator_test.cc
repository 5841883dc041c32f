// gangkeeper: the simulated cluster on small traces whose outcomes are
// worked out by hand in the comments (simulator.h's cycle model: events at
// an instant, then Schedule(t) to a fixed point; admissions start at once;
// preempted gangs stop at once and restart from zero or a checkpoint).
#include "gangkeeper/sim/simulator.h"

#include <memory>
#include <string>

#include "gangkeeper/sim/report.h"
#include "gangkeeper/sim/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/gangs.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::sim {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::PoliciesFrom;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

// One team, 4 GPUs, lower priorities preempted within the queue.
constexpr char kOneQueue[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 100
)";

// Two teams of 4 GPUs in one cohort; team-a may borrow up to 4.
constexpr char kCohort[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: shared
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: shared
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: b}
spec: {clusterQueue: team-b}
)";

const broker::FlavorResource kGpu{"gpu", "nvidia.com/gpu"};

Report SimulateCsv(const std::string& csv, const char* policies, SimOptions options = {}) {
  absl::StatusOr<Trace> trace = ParseCsvTrace(csv, "trace.csv");
  EXPECT_THAT(trace, IsOk());
  if (!trace.ok()) return Report{};
  absl::StatusOr<Report> r = Simulate(*trace, PoliciesFrom(policies), options);
  EXPECT_THAT(r, IsOk());
  return r.ok() ? *std::move(r) : Report{};
}

// (i) A 2-GPU job holds half the queue from 0 to 10 s. The 4-pod gang that
// arrives at 1 s needs all 4 GPUs at once, so it waits for the job to end
// and is admitted at exactly 10 s (wait 9 s), ending at 15 s. A 1-GPU job
// arriving at 2 s fits beside the running job (BestEffortFIFO does not hold
// it behind the gang) and runs 2-3 s.
// Usage: 2 GPUs [0,2), 3 [2,3), 2 [3,10), 4 [10,15) = 4+3+14+20 = 41 GPU*s
// of 4 GPUs * 15 s = 60: utilization 41/60.
// Bounds: work (20+1+20)/4 = 10.25 s; arrivals max(10, 6, 3) = 10 s.
TEST(SimulatorTest, AGangWaitsForAWholeGangSlot) {
  Report r = SimulateCsv(
      "time,namespace,queue,podsets,runtime,name,class\n"
      "0,a,q,1x[nvidia.com/gpu=2],10,job,job\n"
      "1,a,q,4x[nvidia.com/gpu=1],5,gang,gang\n"
      "2,a,q,1x[nvidia.com/gpu=1],1,tiny,tiny\n",
      kOneQueue);
  ASSERT_TRUE(r.makespan_ms.has_value());
  EXPECT_EQ(*r.makespan_ms, 15000);
  EXPECT_EQ(r.finished, 3);
  EXPECT_EQ(r.classes["gang"].time_to_admission.max_ms, 9000);
  EXPECT_EQ(r.classes["job"].time_to_admission.max_ms, 0);
  EXPECT_EQ(r.classes["tiny"].time_to_admission.max_ms, 0);
  EXPECT_EQ(r.preemptions, 0);
  const ResourceFigures& gpu = r.cluster_queues["team-a"].resources[kGpu];
  ASSERT_TRUE(gpu.utilization.has_value());
  EXPECT_DOUBLE_EQ(*gpu.utilization, 41.0 / 60.0);
  EXPECT_EQ(gpu.peak, quantity::Quantity::FromUnits(4));
  EXPECT_DOUBLE_EQ(r.utilization["nvidia.com/gpu"], 41.0 / 60.0);
  EXPECT_EQ(r.bounds.work_ms, 10250);
  EXPECT_EQ(r.bounds.arrival_ms, 10000);
  EXPECT_EQ(r.bounds.max_ms(), 10250);
}

// (ii) `low` (priority 0) takes all 4 GPUs at 0 s for 10 s. `high`
// (priority 100, from the WorkloadPriorityClass) arrives at 4 s needing all
// 4: it preempts `low`, which stops at once and loses its 4 s of work;
// `high` runs 4-7 s. `low` is admitted again at 7 s and, restarting from
// zero, runs its full 10 s: it finishes at 17 s.
// low: first admission 0 s, last 7 s (time to admission 7 s, as Kueue's
// recorder counts it); usage 4 GPUs over [0,17): utilization 1.
TEST(SimulatorTest, APreemptedGangRestartsFromZero) {
  Report r = SimulateCsv(
      "time,namespace,queue,priority,podsets,runtime,name,class\n"
      "0,a,q,0,1x[nvidia.com/gpu=4],10,low,low\n"
      "4,a,q,urgent,1x[nvidia.com/gpu=4],3,high,high\n",
      kOneQueue);
  ASSERT_TRUE(r.makespan_ms.has_value());
  EXPECT_EQ(*r.makespan_ms, 17000);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.lost_work_ms, 4000);
  EXPECT_EQ(r.admissions, 3);
  EXPECT_EQ(r.classes["low"].preemptions, 1);
  EXPECT_EQ(r.classes["high"].preemptions, 0);
  EXPECT_EQ(r.classes["low"].time_to_admission.max_ms, 7000);
  EXPECT_EQ(r.classes["low"].time_to_first_admission.max_ms, 0);
  EXPECT_EQ(r.classes["high"].time_to_admission.max_ms, 0);
  EXPECT_EQ(r.cluster_queues["team-a"].preemptions, 1);
  EXPECT_EQ(r.cluster_queues["team-a"].preemptions_by_class["low"], 1);
  EXPECT_DOUBLE_EQ(*r.cluster_queues["team-a"].resources[kGpu].utilization, 1.0);
}

// (iii) The same, with a checkpoint every 3 s: at 4 s `low` has done 4 s,
// of which 3 s are checkpointed (1 s lost). It resumes at 7 s with 7 s left
// and finishes at 14 s. Given as JSON Lines.
TEST(SimulatorTest, APreemptedGangResumesFromItsLastCheckpoint) {
  absl::StatusOr<Trace> trace = ParseJsonLinesTrace(
      R"({"time": 0, "namespace": "a", "queue": "q", "priority": 0, "name": "low", "class": "low",)"
      R"( "podsets": [{"count": 1, "requests": {"nvidia.com/gpu": 4}}], "runtime": "10s", "checkpoint": 3})"
      "\n"
      R"({"time": "4s", "namespace": "a", "queue": "q", "priority": 100, "name": "high", "class": "high",)"
      R"( "podsets": "1x[nvidia.com/gpu=4]", "runtime": 3})"
      "\n",
      "trace.jsonl");
  ASSERT_THAT(trace, IsOk());
  absl::StatusOr<Report> r = Simulate(*trace, PoliciesFrom(kOneQueue));
  ASSERT_THAT(r, IsOk());
  ASSERT_TRUE(r->makespan_ms.has_value());
  EXPECT_EQ(*r->makespan_ms, 14000);
  EXPECT_EQ(r->lost_work_ms, 1000);
  EXPECT_EQ(r->classes["low"].time_to_admission.max_ms, 7000);
}

// (iv) team-a's 6-GPU job borrows 2 of team-b's idle GPUs at 0 s. At 2 s
// team-b's 4-GPU job reclaims its quota (reclaimWithinCohort: Any): the
// borrower is preempted and team-b runs 2-7 s. team-a's job cannot come
// back before then (the cohort has 8 GPUs, team-b holds 4 within its own
// quota, which team-a may not reclaim), so it is admitted again at 7 s,
// borrowing again, and ends at 17 s.
// team-a: 6 GPUs [0,2) and [7,17) = 72 GPU*s / (4 * 17): utilization 72/68.
// team-b: 4 GPUs [2,7) = 20 / (4 * 17) = 20/68.
// Bounds: work (60 + 20) / 8 = 10 s in the cohort; team-a alone 60 / 8 =
// 7.5 s; arrivals max(10, 7) = 10 s.
TEST(SimulatorTest, BorrowingInACohortAndReclaim) {
  Report r = SimulateCsv(
      "time,namespace,queue,podsets,runtime,name\n"
      "0,a,q,1x[nvidia.com/gpu=6],10,big\n"
      "2,b,q,4x[nvidia.com/gpu=1],5,mine\n",
      kCohort);
  ASSERT_TRUE(r.makespan_ms.has_value());
  EXPECT_EQ(*r.makespan_ms, 17000);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.cluster_queues["team-a"].preemptions, 1);
  EXPECT_EQ(r.cluster_queues["team-b"].preemptions, 0);
  const ResourceFigures& a = r.cluster_queues["team-a"].resources[kGpu];
  const ResourceFigures& b = r.cluster_queues["team-b"].resources[kGpu];
  EXPECT_EQ(a.peak, quantity::Quantity::FromUnits(6));
  EXPECT_DOUBLE_EQ(*a.utilization, 72.0 / 68.0);
  EXPECT_DOUBLE_EQ(*b.utilization, 20.0 / 68.0);
  EXPECT_DOUBLE_EQ(r.utilization["nvidia.com/gpu"], 92.0 / 136.0);
  EXPECT_EQ(r.cluster_queues["team-a"].cohort, "shared");
  EXPECT_EQ(r.bounds.work_ms, 10000);
  EXPECT_EQ(r.bounds.work_bound_by, "cohort shared, nvidia.com/gpu");
  // Class defaults to the priority as written ("" -> "0").
  EXPECT_EQ(r.classes.count("0"), 1u);
}

// With a 1 s stop delay the victim holds its quota until it has stopped:
// `high` is admitted at 5 s (not 4), ends at 8 s; `low` restarts at 8 s and
// ends at 18 s.
TEST(SimulatorTest, AStopDelayHoldsTheQuotaUntilTheVictimStops) {
  SimOptions options;
  options.stop_delay_ms = 1000;
  Report r = SimulateCsv(
      "time,namespace,queue,priority,podsets,runtime,name,class\n"
      "0,a,q,0,1x[nvidia.com/gpu=4],10,low,low\n"
      "4,a,q,100,1x[nvidia.com/gpu=4],3,high,high\n",
      kOneQueue, options);
  ASSERT_TRUE(r.makespan_ms.has_value());
  EXPECT_EQ(*r.makespan_ms, 18000);
  EXPECT_EQ(r.classes["high"].time_to_admission.max_ms, 1000);
  EXPECT_EQ(r.classes["low"].time_to_admission.max_ms, 8000);
}

// --until stops the clock: at 12 s of (ii), `high` is done, `low` runs again
// (since 7 s) and has not finished; no makespan.
TEST(SimulatorTest, UntilStopsTheClock) {
  SimOptions options;
  options.until_ms = 12000;
  Report r = SimulateCsv(
      "time,namespace,queue,priority,podsets,runtime,name,class\n"
      "0,a,q,0,1x[nvidia.com/gpu=4],10,low,low\n"
      "4,a,q,100,1x[nvidia.com/gpu=4],3,high,high\n",
      kOneQueue, options);
  EXPECT_FALSE(r.makespan_ms.has_value());
  EXPECT_EQ(r.end_ms, 12000);
  EXPECT_EQ(r.finished, 1);
  EXPECT_DOUBLE_EQ(*r.cluster_queues["team-a"].resources[kGpu].utilization, 1.0);
}

// A gang bigger than anything the queue can ever hold is reported, with the
// scheduler's reason, instead of being waited for.
TEST(SimulatorTest, NeverAdmittedWorkloadsAreListedWithTheirReason) {
  Report r = SimulateCsv(
      "time,namespace,queue,podsets,runtime,name\n"
      "0,a,q,8x[nvidia.com/gpu=1],10,huge\n"
      "0,a,q,1x[nvidia.com/gpu=1],10,ok\n",
      kOneQueue);
  EXPECT_FALSE(r.makespan_ms.has_value());
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(r.unadmitted_count, 1);
  ASSERT_EQ(r.unadmitted.size(), 1u);
  EXPECT_EQ(r.unadmitted[0].workload, "a/huge");
  EXPECT_THAT(r.unadmitted[0].reason, HasSubstr("8"));
  EXPECT_EQ(r.end_ms, 10000);
}

// Time series: the bucket width is a 1-2-5 number of milliseconds near
// the lower bound / 100: here 10 s / 100 = 100 ms. The run lasts 15 s: 150
// buckets (the width doubles only past 200).
TEST(SimulatorTest, TimeSeriesBucketsAverageTheUsage) {
  Report r = SimulateCsv(
      "time,namespace,queue,podsets,runtime,name\n"
      "0,a,q,1x[nvidia.com/gpu=2],10,job\n"
      "1,a,q,4x[nvidia.com/gpu=1],5,gang\n",
      kOneQueue);
  EXPECT_EQ(r.interval_ms, 100);
  EXPECT_EQ(r.buckets, 150);
  const ResourceFigures& gpu = r.cluster_queues["team-a"].resources[kGpu];
  ASSERT_EQ(gpu.series.size(), 150u);
  EXPECT_DOUBLE_EQ(gpu.series[0], 0.5);    // 2 of 4
  EXPECT_DOUBLE_EQ(gpu.series[99], 0.5);   // [9.9, 10)
  EXPECT_DOUBLE_EQ(gpu.series[100], 1.0);  // [10, 10.1): the gang
  EXPECT_DOUBLE_EQ(gpu.series[149], 1.0);
  ASSERT_EQ(r.cluster_queues["team-a"].weighted_share.size(), 150u);
}

// A run that outlasts its estimate widens the buckets instead of growing
// without bound. (ii) with a 100 s stop delay and 10 buckets wanted: the
// bound is 13 s ((40 + 12) GPU*s / 4), so buckets start at 2 s; `high` is
// admitted at 104 s, `low` restarts at 107 s and ends at 117 s. Past 20
// samples the width doubles: 4 s at 40 s, 8 s at 80 s: 15 buckets of 8 s.
TEST(SimulatorTest, TimeSeriesWidensWhenTheRunOutlastsTheEstimate) {
  SimOptions options;
  options.target_buckets = 10;
  options.stop_delay_ms = 100'000;
  Report r = SimulateCsv(
      "time,namespace,queue,priority,podsets,runtime,name\n"
      "0,a,q,0,1x[nvidia.com/gpu=4],10,low\n"
      "4,a,q,100,1x[nvidia.com/gpu=4],3,high\n",
      kOneQueue, options);
  ASSERT_TRUE(r.makespan_ms.has_value());
  EXPECT_EQ(*r.makespan_ms, 117000);
  EXPECT_EQ(r.interval_ms, 8000);
  EXPECT_EQ(r.buckets, 15);
  const ResourceFigures& gpu = r.cluster_queues["team-a"].resources[kGpu];
  ASSERT_EQ(gpu.series.size(), 15u);
  for (double v : gpu.series) EXPECT_DOUBLE_EQ(v, 1.0);  // the victim holds its quota while stopping
  EXPECT_EQ(r.cluster_queues["team-a"].weighted_share.size(), 15u);
}

// Bad input that only the policies reveal names the trace line and field.
TEST(SimulatorTest, UnknownQueuesAndPriorityClassesNameTheLineAndField) {
  absl::StatusOr<Trace> trace = ParseCsvTrace(
      "time,namespace,queue,priority,podsets,runtime\n"
      "0,a,q,0,1x[nvidia.com/gpu=1],10\n"
      "0,a,nope,0,1x[nvidia.com/gpu=1],10\n"
      "0,a,q,missing-class,1x[nvidia.com/gpu=1],10\n",
      "trace.csv");
  ASSERT_THAT(trace, IsOk());
  absl::StatusOr<Report> r = Simulate(*trace, PoliciesFrom(kOneQueue));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "trace.csv:3: field queue: LocalQueue a/nope does not exist in the policies; "
                          "LocalQueues in a: q"));
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "trace.csv:4: field priority: no WorkloadPriorityClass or PriorityClass named "
                          "\"missing-class\""));
  EXPECT_THAT(Simulate(*trace, nullptr), StatusIs(absl::StatusCode::kInvalidArgument, "--policies"));
}

// Kueue's own cycle (one head per ClusterQueue per cycle) on two queues of
// Kueue's baseline shape. The larges arriving at 1.2 s must reclaim their
// quota; with their victims stopping, the other queue's pending workloads
// must not borrow the quota they wait for (that used to loop forever at
// 1.2 s: preempt, borrow, preempt again). Every workload finishes.
TEST(SimulatorTest, OneHeadPerCycleSettlesWhenPreemptorsReclaim) {
  absl::StatusOr<Trace> trace = ParseKueueGenerator(R"(
cohorts:
- className: cohort
  count: 1
  queuesSets:
  - className: cq
    count: 2
    nominalQuota: 20
    borrowingLimit: 100
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - count: 30
      creationIntervalMs: 100
      workloads:
      - {className: small, runtimeMs: 200, priority: 50, request: 1}
    - count: 6
      creationIntervalMs: 500
      workloads:
      - {className: medium, runtimeMs: 500, priority: 100, request: 5}
    - count: 2
      creationIntervalMs: 1200
      workloads:
      - {className: large, runtimeMs: 1000, priority: 200, request: 20}
)",
                                                    "gen.yaml");
  ASSERT_THAT(trace, IsOk());
  SimOptions options;
  options.scheduler.one_head_per_cycle = true;
  absl::StatusOr<Report> r = Simulate(*trace, nullptr, options);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->finished, 2 * (30 + 6 + 2));
  EXPECT_EQ(r->classes["large"].time_to_admission.max_ms, 0);
}

// (v) The same inputs give the same bytes, JSON and HTML, run after run.
TEST(SimulatorTest, ReportsAreByteForByteDeterministic) {
  constexpr char kGenerator[] = R"(
cohorts:
- className: co
  count: 2
  queuesSets:
  - className: cq
    count: 3
    nominalQuota: 4
    borrowingLimit: 8
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - count: 40
      creationIntervalMs: 70
      workloads:
      - {className: small, runtimeMs: 300, priority: 10, request: 1}
      - {className: mid, runtimeMs: 450, priority: 20, request: 2}
    - count: 10
      creationIntervalMs: 400
      workloads:
      - {className: big, runtimeMs: 700, priority: 30, request: 4}
)";
  std::string json[2], html[2], summary[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Trace> trace = ParseKueueGenerator(kGenerator, "gen.yaml");
    ASSERT_THAT(trace, IsOk());
    absl::StatusOr<Report> r = Simulate(*trace, nullptr);
    ASSERT_THAT(r, IsOk());
    EXPECT_GT(r->preemptions, 0);  // the case is not trivial
    json[i] = ReportJson(*r);
    html[i] = ReportHtml(*r);
    summary[i] = ReportSummary(*r);
  }
  EXPECT_EQ(json[0], json[1]);
  EXPECT_EQ(html[0], html[1]);
  EXPECT_EQ(summary[0], summary[1]);
  nlohmann::json parsed = nlohmann::json::parse(json[0], nullptr, false);
  ASSERT_FALSE(parsed.is_discarded());
  EXPECT_EQ(parsed["input"]["workloads"], 2 * 3 * (80 + 10));
  EXPECT_EQ(parsed["summary"]["finished"], 2 * 3 * (80 + 10));
}

}  // namespace
}  // namespace gangkeeper::sim
