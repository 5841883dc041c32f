// (viii) `gangkeeper simulate` as a user runs it: the built binary, a policy
// directory and a trace on disk, the JSON and HTML reports, the summary,
// and exit code 2 with file, line and field for bad input.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPolicies[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
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
)";

// Case (ii) of simulator_test.cc: makespan 17 s.
constexpr char kTrace[] =
    "time,namespace,queue,priority,podsets,runtime,name,class\n"
    "0,a,q,0,1x[nvidia.com/gpu=4],10,low,low\n"
    "4,a,q,100,1x[nvidia.com/gpu=4],3,high,high\n";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class SimulateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/queues.yaml")) << kPolicies;
    std::ofstream(dir_.File("trace.csv")) << kTrace;
  }
  absl::StatusOr<testing::CommandResult> Simulate(std::vector<std::string> args) {
    args.insert(args.begin(), {testing::GangkeeperBinary(), "simulate"});
    return RunCommand(args, absl::Seconds(60), dir_.path());
  }
  TempDir dir_;
};

TEST_F(SimulateCliTest, WritesTheJsonAndHtmlReports) {
  auto r = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("trace.csv"), "-o",
                     dir_.File("report.json"), "--html", dir_.File("report.html")});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  nlohmann::json report = nlohmann::json::parse(Slurp(dir_.File("report.json")), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["format"], "gangkeeper-simulate/v1");
  EXPECT_EQ(report["summary"]["makespan_s"], 17.0);
  EXPECT_EQ(report["summary"]["preemptions"], 1);
  EXPECT_EQ(report["classes"]["low"]["time_to_admission_s"]["mean"], 7.0);
  EXPECT_EQ(report["cluster_queues"]["team-a"]["resources"]["gpu/nvidia.com/gpu"]["utilization"], 1.0);
  EXPECT_EQ(report["lower_bounds"]["max_s"], 13.0);
  const std::string html = Slurp(dir_.File("report.html"));
  EXPECT_THAT(html, HasSubstr("<svg"));
  EXPECT_THAT(html, HasSubstr("team-a"));
  EXPECT_THAT(html, HasSubstr("time to admission, cumulative"));
  // Self-contained: no scripts, nothing to fetch.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  // Without -o the summary goes to stdout.
  auto s = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("trace.csv")});
  ASSERT_THAT(s, IsOk());
  EXPECT_EQ(s->exit_code, 0) << s->err;
  EXPECT_THAT(s->out, HasSubstr("makespan        17 s"));
  EXPECT_THAT(s->out, HasSubstr("low"));
}

TEST_F(SimulateCliTest, RunsAKueueGeneratorWithoutPolicies) {
  std::ofstream(dir_.File("gen.yaml")) << R"(cohorts:
- className: co
  count: 1
  queuesSets:
  - className: cq
    count: 2
    nominalQuota: 2
    workloadsSets:
    - count: 3
      creationIntervalMs: 1000
      workloads:
      - {className: w, runtimeMs: 500, priority: 1, request: 1}
)";
  // Each queue: arrivals at 1, 2, 3 s, 0.5 s each, never waiting: the last
  // ends at 3.5 s.
  auto r = Simulate({"--workload", dir_.File("gen.yaml"), "-o", dir_.File("gen.json")});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  nlohmann::json report = nlohmann::json::parse(Slurp(dir_.File("gen.json")), nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  EXPECT_EQ(report["summary"]["makespan_s"], 3.5);
  EXPECT_EQ(report["classes"]["w"]["time_to_admission_s"]["max"], 0.0);
  EXPECT_EQ(report["input"]["cluster_queues"], 2);
}

TEST_F(SimulateCliTest, BadInputExitsTwoNamingFileLineAndField) {
  std::ofstream(dir_.File("bad.csv")) << "time,namespace,queue,podsets,runtime\n0,a,q,1x[nvidia.com/gpu=1],10\n"
                                         "5,a,q,1x[nvidia.com/gpu=1],ten\n";
  auto r = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("bad.csv")});
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_THAT(r->err, HasSubstr(dir_.File("bad.csv") + ":3: field runtime: \"ten\" is not a duration"));

  std::ofstream(dir_.File("wrong-queue.csv")) << "time,namespace,queue,podsets,runtime\n0,a,gpu,1x[cpu=1],10\n";
  auto q = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("wrong-queue.csv")});
  ASSERT_THAT(q, IsOk());
  EXPECT_EQ(q->exit_code, 2);
  EXPECT_THAT(q->err, HasSubstr(dir_.File("wrong-queue.csv") +
                                ":2: field queue: LocalQueue a/gpu does not exist in the policies; "
                                "LocalQueues in a: q"));

  auto no_policies = Simulate({"--workload", dir_.File("trace.csv")});
  ASSERT_THAT(no_policies, IsOk());
  EXPECT_EQ(no_policies->exit_code, 2);
  EXPECT_THAT(no_policies->err, HasSubstr("--policies"));

  auto missing = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("nope.csv")});
  ASSERT_THAT(missing, IsOk());
  EXPECT_EQ(missing->exit_code, 2);
  EXPECT_THAT(missing->err, HasSubstr("nope.csv"));

  auto no_trace = Simulate({"--policies", dir_.File("policies")});
  ASSERT_THAT(no_trace, IsOk());
  EXPECT_EQ(no_trace->exit_code, 2);
  EXPECT_THAT(no_trace->err, HasSubstr("--workload"));
}

TEST_F(SimulateCliTest, IsListedInTheHelp) {
  auto r = RunCommand({testing::GangkeeperBinary(), "help"}, absl::Seconds(30));
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->out, HasSubstr("simulate"));
  auto h = Simulate({"--help"});
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->exit_code, 0);
  EXPECT_THAT(h->out, HasSubstr("--workload"));
  EXPECT_THAT(h->out, HasSubstr("--html"));
  EXPECT_THAT(h->out, HasSubstr("--compare"));
  EXPECT_THAT(h->out, HasSubstr("-o, --json"));
}

// The README's example, before and after in one run: what if team-b lends 2 GPUs.
TEST_F(SimulateCliTest, ComparesTheReadmeExampleBeforeAndAfter) {
  const std::string ex = std::string(GK_SOURCE_DIR) + "/test/bench/traces/lend-gpus";
  auto r = Simulate({"--policies", ex + "/before", "--workload", ex + "/trace.csv", "--compare", ex + "/after",
                     "--json", dir_.File("compare.json"), "--html", dir_.File("compare.html")});
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, "");  // with a JSON file, nothing on stdout
  nlohmann::json j = nlohmann::json::parse(Slurp(dir_.File("compare.json")), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["format"], "gangkeeper-simulate-compare/v1");
  EXPECT_EQ(j["before"]["input"]["policies"], ex + "/before");
  EXPECT_EQ(j["after"]["input"]["policies"], ex + "/after");
  // The figures the README quotes.
  EXPECT_EQ(j["before"]["summary"]["makespan_s"], 32100.0);
  EXPECT_EQ(j["after"]["summary"]["makespan_s"], 30000.0);
  EXPECT_EQ(j["changes"]["makespan_s"]["change"], -2100.0);
  EXPECT_EQ(j["changes"]["preemptions"]["after"], 2);
  ASSERT_TRUE(j["verdict"].is_array());
  EXPECT_THAT(j["verdict"][0].get<std::string>(),
              HasSubstr("team-a/eval's mean wait drops from 18 min to 2.9 min; team-a/finetune's drops from 20 min "
                        "to 1.2 min; team-b/batch's stays at 7.5 min"));
  EXPECT_EQ(j["verdict"][1], "The last workload finishes 35 min earlier (8 h 20 min instead of 8 h 55 min).");
  const std::string html = Slurp(dir_.File("compare.html"));
  EXPECT_THAT(html, HasSubstr("before: team-b-gpu"));
  EXPECT_THAT(html, HasSubstr("after: team-b-gpu"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));

  // Without a JSON file: the comparison on stdout, -o still a file.
  auto s = Simulate({"--policies", ex + "/before", "--workload", ex + "/trace.csv", "--compare", ex + "/after"});
  ASSERT_THAT(s, IsOk());
  ASSERT_EQ(s->exit_code, 0) << s->err;
  EXPECT_THAT(s->out, HasSubstr("makespan                          8 h 55 min        8 h 20 min\n"));
  EXPECT_THAT(s->out, HasSubstr("verdict\n  team-a/eval's mean wait drops"));
  auto o = Simulate({"--policies", ex + "/before", "--workload", ex + "/trace.csv", "--compare", ex + "/after", "-o",
                     dir_.File("o.json")});
  ASSERT_THAT(o, IsOk());
  ASSERT_EQ(o->exit_code, 0) << o->err;
  EXPECT_EQ(Slurp(dir_.File("o.json")), Slurp(dir_.File("compare.json")));
}

TEST_F(SimulateCliTest, CompareWithBadPoliciesExitsTwoNamingTheFlag) {
  auto missing = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("trace.csv"), "--compare",
                           dir_.File("nope")});
  ASSERT_THAT(missing, IsOk());
  EXPECT_EQ(missing->exit_code, 2);
  EXPECT_THAT(missing->err, HasSubstr("--compare"));
  EXPECT_THAT(missing->err, HasSubstr("nope"));

  std::filesystem::create_directories(dir_.File("bad"));
  std::ofstream(dir_.File("bad/q.yaml")) << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\n"
                                            "metadata: {name: team-a}\nspec:\n  resourceGroups:\n"
                                            "  - coveredResources: [cpu]\n    flavors:\n    - name: f\n"
                                            "      resources: [{name: cpu, nominalQuota: four}]\n";
  auto bad = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("trace.csv"), "--compare",
                       dir_.File("bad")});
  ASSERT_THAT(bad, IsOk());
  EXPECT_EQ(bad->exit_code, 2);
  EXPECT_THAT(bad->err, HasSubstr("(--compare) have errors"));

  // The after run's own failure names --compare: here its LocalQueue is missing.
  std::filesystem::create_directories(dir_.File("other"));
  std::ofstream(dir_.File("other/q.yaml")) << std::string(kPolicies).substr(0, std::string(kPolicies).find("---\n"
                                                                              "apiVersion: kueue.x-k8s.io/v1beta1\n"
                                                                              "kind: LocalQueue"));
  auto other = Simulate({"--policies", dir_.File("policies"), "--workload", dir_.File("trace.csv"), "--compare",
                         dir_.File("other")});
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->exit_code, 2) << other->out;
  EXPECT_THAT(other->err, HasSubstr("--compare"));
}

}  // namespace
}  // namespace gangkeeper
