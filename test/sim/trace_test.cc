// gangkeeper: the trace readers (CSV, JSON Lines, Kueue's generator) and
// their errors, which must name the file, line and field.
#include "gangkeeper/sim/trace.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::sim {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

TEST(TraceDurationTest, SecondsAndUnits) {
  struct Case {
    const char* text;
    int64_t want_ms;
  };
  for (const Case& c : {Case{"0", 0}, Case{"90", 90'000}, Case{"0.25", 250}, Case{"1.5", 1500}, Case{".5", 500},
                        Case{"2.0010", 2001}, Case{"250ms", 250}, Case{"90s", 90'000}, Case{"1h30m", 5'400'000},
                        Case{" 2m ", 120'000}}) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<int64_t> d = ParseTraceDuration(c.text);
    ASSERT_THAT(d, IsOk());
    EXPECT_EQ(*d, c.want_ms);
  }
  for (const char* bad : {"", "abc", "-5s", "0.0005", "1.2345", "10us", "inf", "1.2.3", "9999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParseTraceDuration(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

TEST(PodSetsTest, CountsRequestsAndNames) {
  absl::StatusOr<std::vector<workload::PodSet>> one = ParsePodSets("4x[nvidia.com/gpu=1;cpu=500m]");
  ASSERT_THAT(one, IsOk());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "main");
  EXPECT_EQ((*one)[0].count, 4);
  EXPECT_EQ((*one)[0].requests.at("nvidia.com/gpu"), Quantity::FromUnits(1));
  EXPECT_EQ((*one)[0].requests.at("cpu"), Quantity::FromMilli(500));

  absl::StatusOr<std::vector<workload::PodSet>> two =
      ParsePodSets("launcher:1x[cpu=2] + worker:8x[nvidia.com/mig-1g.5gb=2]");
  ASSERT_THAT(two, IsOk());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].name, "launcher");
  EXPECT_EQ((*two)[1].name, "worker");
  EXPECT_EQ((*two)[1].count, 8);
  EXPECT_EQ((*two)[1].requests.at("nvidia.com/mig-1g.5gb"), Quantity::FromUnits(2));

  absl::StatusOr<std::vector<workload::PodSet>> unnamed = ParsePodSets("1x[cpu=1]+2x[cpu=2]");
  ASSERT_THAT(unnamed, IsOk());
  EXPECT_EQ((*unnamed)[0].name, "podset-0");
  EXPECT_EQ((*unnamed)[1].name, "podset-1");

  for (const char* bad : {"", "4", "4x", "x[cpu=1]", "0x[cpu=1]", "4x[cpu]", "4x[cpu=four]", "4x[cpu=-1]",
                          "4x[]", "4x[cpu=1;cpu=2]", "a:1x[cpu=1]+a:1x[cpu=1]", "4y[cpu=1]"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ParsePodSets(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  }
}

TEST(CsvTraceTest, ReadsColumnsInAnyOrderWithDefaults) {
  absl::StatusOr<Trace> t = ParseCsvTrace(
      "# a comment\n"
      "\n"
      "runtime,podsets,queue,namespace,time,priority,checkpoint,name,class\r\n"
      "2h,4x[nvidia.com/gpu=1;cpu=8],gpu-queue,team-a,0,10000,30m,train-1,train\r\n"
      "15m,\"1x[nvidia.com/mig-1g.10gb=1]\",gpu-queue,team-b,90s,,,,\n"
      "1,1x[cpu=1],q,team-b,1.5,high-prio,,,\n",
      "t.csv");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->format, TraceFormat::kCsv);
  ASSERT_EQ(t->workloads.size(), 3u);
  const TraceWorkload& a = t->workloads[0];
  EXPECT_EQ(a.namespace_name, "team-a");
  EXPECT_EQ(a.name, "train-1");
  EXPECT_EQ(a.queue, "gpu-queue");
  EXPECT_EQ(a.priority, 10000);
  EXPECT_EQ(a.class_name, "train");
  EXPECT_EQ(a.arrival_ms, 0);
  EXPECT_EQ(a.runtime_ms, 2 * 3'600'000);
  EXPECT_EQ(a.checkpoint_ms, 30 * 60'000);
  EXPECT_EQ(a.pod_sets[0].count, 4);
  EXPECT_EQ(a.source, "t.csv:4");
  const TraceWorkload& b = t->workloads[1];
  EXPECT_EQ(b.name, "wl-2");  // its position among the workloads
  EXPECT_EQ(b.arrival_ms, 90'000);
  EXPECT_EQ(b.priority, 0);
  EXPECT_EQ(b.class_name, "0");
  EXPECT_EQ(b.checkpoint_ms, 0);
  const TraceWorkload& c = t->workloads[2];
  EXPECT_EQ(c.priority_class, "high-prio");
  EXPECT_EQ(c.class_name, "high-prio");
  EXPECT_EQ(c.arrival_ms, 1500);
}

// (vii) Every error names file:line and the field, and says what to write.
TEST(CsvTraceTest, ErrorsNameLineAndField) {
  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"bad runtime", "time,namespace,queue,podsets,runtime\n0,a,q,1x[cpu=1],10\n0,a,q,1x[cpu=1],abc\n",
       "t.csv:3: field runtime: \"abc\" is not a duration: write seconds (90, 0.25) or a duration with units"},
      {"zero runtime", "time,namespace,queue,podsets,runtime\n0,a,q,1x[cpu=1],0\n",
       "t.csv:2: field runtime: must be more than 0"},
      {"bad pod sets", "time,namespace,queue,podsets,runtime\n0,a,q,4[cpu=1],10\n",
       "t.csv:2: field podsets: \"4[cpu=1]\" is not a pod set: write COUNTx[RESOURCE=QUANTITY;...]"},
      {"bad quantity", "time,namespace,queue,podsets,runtime\n0,a,q,4x[nvidia.com/gpu=one],10\n",
       "t.csv:2: field podsets: \"4x[nvidia.com/gpu=one]\": nvidia.com/gpu=one: not a non-negative quantity"},
      {"missing field", "time,namespace,queue,podsets,runtime\n0,a,,1x[cpu=1],10\n",
       "t.csv:2: field queue: required, but empty or missing"},
      {"bad priority", "time,namespace,queue,podsets,runtime,priority\n0,a,q,1x[cpu=1],10,99999999999\n",
       "t.csv:2: field priority: \"99999999999\" is not a 32-bit integer"},
      {"unknown column", "time,namespace,queue,podsets,runtime,gpus\n",
       "t.csv:1: column 6 \"gpus\" is not a trace column; columns are time, namespace, queue, podsets, runtime"},
      {"missing column", "time,namespace,podsets,runtime\n",
       "t.csv:1: the header has no \"queue\" column"},
      {"field count", "time,namespace,queue,podsets,runtime\n\n# c\n0,a,q,1x[cpu=1]\n",
       "t.csv:4: 4 fields, but the header names 5 columns"},
      {"duplicate name", "time,namespace,queue,podsets,runtime,name\n0,a,q,1x[cpu=1],1,x\n0,a,q,1x[cpu=1],1,x\n",
       "t.csv:3: field name: workload a/x is already named on line 2"},
      {"no workloads", "time,namespace,queue,podsets,runtime\n", "t.csv: the trace has no workloads"},
      {"unclosed quote", "time,namespace,queue,podsets,runtime\n0,\"a,q,1x[cpu=1],1\n",
       "t.csv:2: a quote is not closed"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(ParseCsvTrace(c.text, "t.csv"), StatusIs(absl::StatusCode::kInvalidArgument, c.want));
  }
}

TEST(JsonLinesTraceTest, ReadsObjectsAndNamesErrors) {
  absl::StatusOr<Trace> t = ParseJsonLinesTrace(
      R"({"time": 0.5, "namespace": "a", "queue": "q", "podsets": "2x[nvidia.com/gpu=1]", "runtime": 60})"
      "\n# comment\n"
      R"({"time": "1m", "namespace": "a", "queue": "q", "runtime": "1h", "priority": -5, "class": "c",)"
      R"( "podsets": [{"name": "w", "count": 3, "requests": {"nvidia.com/mig-1g.5gb": "1", "cpu": 0.5}}]})"
      "\n",
      "t.jsonl");
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->workloads.size(), 2u);
  EXPECT_EQ(t->workloads[0].arrival_ms, 500);
  EXPECT_EQ(t->workloads[0].runtime_ms, 60'000);
  EXPECT_EQ(t->workloads[1].name, "wl-2");
  EXPECT_EQ(t->workloads[1].source, "t.jsonl:3");
  EXPECT_EQ(t->workloads[1].priority, -5);
  EXPECT_EQ(t->workloads[1].pod_sets[0].name, "w");
  EXPECT_EQ(t->workloads[1].pod_sets[0].requests.at("cpu"), Quantity::FromMilli(500));

  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"not json", "{\"time\": 0,\n", "t.jsonl:1: not a JSON object"},
      {"unknown key",
       R"({"time": 0, "namespace": "a", "queue": "q", "podsets": "1x[cpu=1]", "runtime": 1, "gpu": 1})",
       "t.jsonl:1: field gpu: unknown key"},
      {"bad count",
       R"({"time": 0, "namespace": "a", "queue": "q", "podsets": [{"count": 0, "requests": {"cpu": 1}}],)"
       R"( "runtime": 1})",
       "t.jsonl:1: field podsets[0].count: must be a whole number of pods"},
      {"bad request",
       R"({"time": 0, "namespace": "a", "queue": "q", "podsets": [{"count": 1, "requests": {"cpu": "x"}}],)"
       R"( "runtime": 1})",
       "t.jsonl:1: field podsets[0].requests[cpu]"},
      {"object time", R"({"time": {}, "namespace": "a", "queue": "q", "podsets": "1x[cpu=1]", "runtime": 1})",
       "t.jsonl:1: field time: {} must be a string or a number"},
      {"bad runtime", R"({"time": 0, "namespace": "a", "queue": "q", "podsets": "1x[cpu=1]", "runtime": "soon"})",
       "t.jsonl:1: field runtime: \"soon\" is not a duration"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(ParseJsonLinesTrace(c.text, "t.jsonl"), StatusIs(absl::StatusCode::kInvalidArgument, c.want));
  }
}

// (vi) 2 cohorts x 2 ClusterQueues. Queue set 0's first workloads set makes
// 3 rounds of two templates every 100 ms: the k-th creation at k * 100 ms,
// alternating a and b: a@100 b@200 a@300 b@400 a@500 b@600. The second set
// starts at 0 too: c@250, c@500. Names: <class>-<set>-<round>-<template>.
TEST(KueueGeneratorTest, PoliciesNamesAndArrivalTimes) {
  absl::StatusOr<Trace> t = ParseKueueGenerator(R"(
cohorts:
- className: team
  count: 2
  queuesSets:
  - className: cq
    count: 2
    nominalQuota: 10
    borrowingLimit: 5
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
    - count: 3
      creationIntervalMs: 100
      workloads:
      - {className: a, runtimeMs: 50, priority: 1, request: 1}
      - {className: b, runtimeMs: 70, priority: 2, request: "500m", podCount: 2}
    - count: 2
      creationIntervalMs: 250
      workloads:
      - {className: c, runtimeMs: 10, priority: 3, request: 2}
)",
                                                "gen.yaml");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->format, TraceFormat::kKueueGenerator);
  ASSERT_NE(t->policies, nullptr);
  const model::PolicySet& p = *t->policies;
  ASSERT_EQ(p.cluster_queues.size(), 4u);
  ASSERT_EQ(p.flavors.count("rf"), 1u);
  for (const char* name : {"cq-0-0-team-0", "cq-0-1-team-0", "cq-0-0-team-1", "cq-0-1-team-1"}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(p.cluster_queues.count(name), 1u);
    const model::ClusterQueue& cq = p.cluster_queues.at(name);
    EXPECT_EQ(cq.cohort, std::string(name).substr(7));
    ASSERT_EQ(cq.resource_groups.size(), 1u);
    const model::ResourceQuota& rq = cq.resource_groups[0].flavors[0].resources[0];
    EXPECT_EQ(rq.name, "cpu");
    EXPECT_EQ(rq.nominal, Quantity::FromUnits(10));
    EXPECT_EQ(rq.borrowing_limit, Quantity::FromUnits(5));
    EXPECT_EQ(cq.preemption.reclaim_within_cohort, model::ReclaimWithinCohortPolicy::kAny);
    EXPECT_EQ(cq.preemption.within_cluster_queue, model::WithinClusterQueuePolicy::kLowerPriority);
    EXPECT_TRUE(cq.namespace_selector.has_value());
    EXPECT_EQ(p.local_queues.count({name, name}), 1u);
    EXPECT_EQ(p.namespaces.count(name), 1u);
    EXPECT_EQ(t->cluster_queue_classes.at(name), "cq");
  }
  ASSERT_EQ(t->workloads.size(), 4u * 8u);
  struct Want {
    const char* name;
    const char* class_name;
    int64_t arrival_ms;
  };
  const Want want[] = {{"a-0-0-0", "a", 100}, {"b-0-0-1", "b", 200}, {"a-0-1-0", "a", 300}, {"b-0-1-1", "b", 400},
                       {"a-0-2-0", "a", 500}, {"b-0-2-1", "b", 600}, {"c-1-0-0", "c", 250}, {"c-1-1-0", "c", 500}};
  for (size_t i = 0; i < 8; ++i) {
    const TraceWorkload& w = t->workloads[i];
    SCOPED_TRACE(w.name);
    EXPECT_EQ(w.namespace_name, "cq-0-0-team-0");
    EXPECT_EQ(w.queue, "cq-0-0-team-0");
    EXPECT_EQ(w.name, want[i].name);
    EXPECT_EQ(w.class_name, want[i].class_name);
    EXPECT_EQ(w.arrival_ms, want[i].arrival_ms);
  }
  const TraceWorkload& b = t->workloads[1];
  EXPECT_EQ(b.priority, 2);
  EXPECT_EQ(b.runtime_ms, 70);
  ASSERT_EQ(b.pod_sets.size(), 1u);
  EXPECT_EQ(b.pod_sets[0].name, "main");
  EXPECT_EQ(b.pod_sets[0].count, 2);
  EXPECT_EQ(b.pod_sets[0].requests.at("cpu"), Quantity::FromMilli(500));
  // The next ClusterQueue's workloads follow, with the same times.
  EXPECT_EQ(t->workloads[8].namespace_name, "cq-0-1-team-0");
  EXPECT_EQ(t->workloads[8].arrival_ms, 100);
}

TEST(KueueGeneratorTest, ErrorsNameLineAndPath) {
  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"bad quota",
       "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 1\n"
       "    nominalQuota: lots\n    workloadsSets: []\n",
       "gen.yaml:7: cohorts[0].queuesSets[0].nominalQuota: \"lots\" is not a non-negative quantity"},
      {"bad count",
       "cohorts:\n- className: c\n  count: -1\n  queuesSets: []\n",
       "gen.yaml:3: cohorts[0].count: \"-1\" must be a whole number from 1"},
      {"unknown key",
       "cohorts:\n- className: c\n  count: 1\n  queueSets: []\n",
       "gen.yaml:4: cohorts[0].queueSets: unknown key; known: className, count, queuesSets"},
      {"bad policy",
       "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 1\n"
       "    nominalQuota: 1\n    reclaimWithinCohort: Sometimes\n",
       "gen.yaml:8: cohorts[0].queuesSets[0].reclaimWithinCohort: \"Sometimes\" is not one of Any, LowerPriority, "
       "Never"},
      {"tas", "topology: {name: t}\ncohorts: []\n", "gen.yaml:1: topology: topology-aware scheduling (TAS) is not"},
      {"missing runtime",
       "cohorts:\n- className: c\n  count: 1\n  queuesSets:\n  - className: q\n    count: 1\n    nominalQuota: 1\n"
       "    workloadsSets:\n    - count: 1\n      creationIntervalMs: 10\n      workloads:\n"
       "      - {className: w, priority: 1, request: 1}\n",
       "gen.yaml:12: cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].runtimeMs: required"},
      {"not yaml", "cohorts: [\n", "gen.yaml:2:1: not valid YAML"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(ParseKueueGenerator(c.text, "gen.yaml"), StatusIs(absl::StatusCode::kInvalidArgument, c.want));
  }
}

TEST(KueueGeneratorTest, TheBaselineConfigurationMakesKueuesFifteenThousandWorkloads) {
  absl::StatusOr<Trace> t =
      ReadTraceFile(std::string(GK_SOURCE_DIR) + "/test/bench/kueue/baseline/generator.yaml");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ(t->workloads.size(), 15000u);
  EXPECT_EQ(t->policies->cluster_queues.size(), 30u);
  // The last large workload of a queue is created at 50 * 1200 ms.
  int64_t last = 0;
  for (const TraceWorkload& w : t->workloads) last = std::max(last, w.arrival_ms);
  EXPECT_EQ(last, 60'000);
}

TEST(ReadTraceFileTest, PicksTheFormatByExtensionOrContent) {
  testing::TempDir dir;
  { std::ofstream(dir.File("a.txt")) << "# hi\n{\"time\": 0, \"namespace\": \"a\", \"queue\": \"q\", "
                                        "\"podsets\": \"1x[cpu=1]\", \"runtime\": 1}\n"; }
  { std::ofstream(dir.File("b.trace")) << "time,namespace,queue,podsets,runtime\n0,a,q,1x[cpu=1],1\n"; }
  absl::StatusOr<Trace> a = ReadTraceFile(dir.File("a.txt"));
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->format, TraceFormat::kJsonLines);
  absl::StatusOr<Trace> b = ReadTraceFile(dir.File("b.trace"));
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(b->format, TraceFormat::kCsv);
  EXPECT_THAT(ReadTraceFile(dir.File("missing.csv")), StatusIs(absl::StatusCode::kNotFound, "missing.csv"));
}

}  // namespace
}  // namespace gangkeeper::sim
