// Partial admission through the real binary (issue #25 item 1's
// acceptance): Kueue's documented sample Job `job-min-parallelism` (20 pods
// of 1 cpu, kueue.x-k8s.io/job-min-parallelism) against a ClusterQueue
// whose quota fits 12 of them, over TLS, with the fake API server.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "test/integration/kube_fixture.h"

namespace gangkeeper::kube_it {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultJobs[] = "/apis/batch/v1/namespaces/default/jobs";

// Kueue's single-ClusterQueue setup (site/static/examples/admin/
// single-clusterqueue-setup.yaml) with a cpu quota of 12.
constexpr char kPolicies[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 12
      - name: memory
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  namespace: default
  name: user-queue
spec:
  clusterQueue: cluster-queue
)";

// Kueue's sample (site/static/examples/jobs/sample-job-partial-admission.yaml,
// test/fixtures/kueue/jobs-sample-job-partial-admission.yaml) with the
// minimum of issue #25: at least 10 of its 20 pods.
json SampleJob() {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata",
           {{"name", "sample-job-partial-admission"},
            {"namespace", "default"},
            {"uid", "uid-sample-job-partial-admission"},
            {"labels", {{"kueue.x-k8s.io/queue-name", "user-queue"}}},
            {"annotations", {{"kueue.x-k8s.io/job-min-parallelism", "10"}}}}},
          {"spec",
           {{"parallelism", 20},
            {"completions", 20},
            {"template",
             {{"spec",
               {{"containers", json::array({{{"name", "dummy-job"},
                                             {"image", "registry.k8s.io/e2e-test-images/agnhost:2.53"},
                                             {"args", {"entrypoint-tester", "hello", "world"}},
                                             {"resources", {{"requests", {{"cpu", 1}, {"memory", "200Mi"}}}}}}})},
                {"restartPolicy", "Never"}}}}}}}};
}

class PartialAdmissionTest : public KubeIntegrationTest {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/queues.yaml")) << kPolicies;
    policies_dir_ = dir_.File("policies");
    KubeIntegrationTest::SetUp();
  }

  // The API listener's /metrics (--metrics-public) line for the cpu usage.
  std::string CpuUsageLine() {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    if (!api.ok()) return "";
    auto r = (*api)->Request("GET", "/metrics");
    if (!r.ok() || r->status != 200) return "";
    for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
      if (absl::StartsWith(line, "kueue_cluster_queue_resource_usage{") &&
          absl::StrContains(line, "cluster_queue=\"cluster-queue\"") && absl::StrContains(line, "resource=\"cpu\"")) {
        return std::string(line);
      }
    }
    return "";
  }
};

TEST_F(PartialAdmissionTest, TheSampleJobIsAdmittedWith12Of20PodsAndAdoptedAsSuch) {
  json job = SampleJob();
  // /mutate suspends it.
  auto m = conn_->Request("POST", "/mutate", Review(job, "batch", "v1", "Job", "jobs", "pa-1").dump());
  ASSERT_THAT(m, IsOk());
  json mutated = json::parse(m->body);
  ASSERT_TRUE(mutated["response"]["allowed"].get<bool>()) << m->body;
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(mutated["response"]["patch"].get<std::string>(), &patch));
  job = job.patch(json::parse(patch));
  EXPECT_TRUE(Suspended(job));
  // /validate allows it (its minimum fits) and says it may start partially.
  auto v = conn_->Request("POST", "/validate", Review(job, "batch", "v1", "Job", "jobs", "pa-2").dump());
  ASSERT_THAT(v, IsOk());
  json verdict = json::parse(v->body);
  ASSERT_TRUE(verdict["response"]["allowed"].get<bool>()) << v->body;
  EXPECT_THAT(verdict["response"]["warnings"].dump(),
              HasSubstr("it starts with as many of its pods as fit, at least 10 (partial admission)"));
  ASSERT_THAT(fake_->Create(kDefaultJobs, job), IsOk());

  // Released with the 12 pods that fit; the count it asked for is kept.
  ASSERT_TRUE(WaitFor([&] { return Released("sample-job-partial-admission", kDefaultJobs); })) << server_->Stderr();
  json released = GetJob("sample-job-partial-admission", kDefaultJobs);
  EXPECT_EQ(released["spec"]["parallelism"], 12);
  EXPECT_EQ(released["spec"]["completions"], 20);
  EXPECT_EQ(released["metadata"]["annotations"]["gangkeeper.io/full-parallelism"], "20");
  // What a user reads: the Job's Event (kubectl describe job) and the
  // server's log say how many of its pods it was admitted with.
  auto event_says = [&] {
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.method == "POST" && c.path == "/apis/events.k8s.io/v1/namespaces/default/events" &&
          absl::StrContains(c.body, "admitted with 12 of 20 pods")) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(WaitFor(event_says)) << "no Event says \"admitted with 12 of 20 pods\"";
  ASSERT_TRUE(WaitFor([&] { return absl::EndsWith(CpuUsageLine(), "} 12"); })) << CpuUsageLine();

  // The Job runs with 12 pods; gangkeeper restarts with nothing recorded
  // and adopts it from the list: it is charged for the 12 pods that run,
  // not for 20.
  Start("sample-job-partial-admission", kDefaultJobs);
  StopGangkeeper();
  StartGangkeeper("fresh-data");
  ASSERT_TRUE(WaitFor([&] { return !CpuUsageLine().empty(); })) << server_->Stderr();
  ASSERT_TRUE(WaitFor([&] { return absl::EndsWith(CpuUsageLine(), "} 12"); }))
      << CpuUsageLine() << "\n" << server_->Stderr();
  EXPECT_FALSE(Suspended(GetJob("sample-job-partial-admission", kDefaultJobs)));
  EXPECT_EQ(GetJob("sample-job-partial-admission", kDefaultJobs)["spec"]["parallelism"], 12);
}

}  // namespace
}  // namespace gangkeeper::kube_it
