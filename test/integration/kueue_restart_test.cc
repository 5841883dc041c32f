// Integration (issue #24, acceptance: "a restart without losing or
// duplicating a Workload"): one gangkeeper with its journal in --data-dir,
// Kueue's objects from the fake API server's cluster, status and Workloads
// published. Jobs are admitted and one is preempted; gangkeeper is killed
// with SIGKILL and started again on the same data directory: no Workload is
// lost or created twice, nothing unchanged is written again, the work goes
// on from where it was, and an invalid ClusterQueue is still inactive with
// its reason.
#include <signal.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "test/integration/kube_fixture.h"
#include "test/integration/kueue_objects_fixture.h"
#include "test/testing/job_review.h"

namespace gangkeeper::kube_it {
namespace {

using ::gangkeeper::kueue_it::ConditionStatus;
using ::gangkeeper::kueue_it::Describe;
using ::gangkeeper::kueue_it::kKueue;
using ::gangkeeper::kueue_it::kKueuePrefix;
using ::testing::HasSubstr;

class KueueRestartTest : public KubeIntegrationTest {
 protected:
  void BeforeGangkeeper() override {
    ASSERT_NO_FATAL_FAILURE(kueue_it::SeedKueueObjects(*fake_));
    json tokens = json::array({{{"name", "platform"}, {"sha256", testing::Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    extra_flags_ = {"--policy-source=cluster", "--publish-kueue-status=true", "--publish-workloads=true",
                    "--tokens=" + dir_.File("tokens.json")};
  }

  json ClusterQueueView(const std::string& name) {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->api_port(), o);
    if (!c.ok()) return json();
    auto r = (*c)->Request("GET", "/v1/clusterqueues/" + name + "/status", "", "Authorization: Bearer admin-secret\r\n");
    if (!r.ok() || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }
  std::string StatusMismatch(const std::string& cq, const std::string& ns) {
    return kueue_it::StatusMismatch(*fake_, ClusterQueueView(cq), cq, ns);
  }
  json WorkloadOf(const std::string& ns, const std::string& name) { return kueue_it::WorkloadOf(*fake_, ns, name); }
  size_t WorkloadCount() {
    size_t n = 0;
    for (const std::string ns : {"team-a", "team-b", "team-c"}) {
      for (const auto& [owner, objects] : kueue_it::Workloads(*fake_, ns)) {
        EXPECT_EQ(objects.size(), 1u) << ns << "/" << owner << " has more than one Workload";
        n += objects.size();
      }
    }
    return n;
  }

  void KillAndRestart() {
    conn_.reset();
    server_->Signal(SIGKILL);
    (void)server_->Wait(absl::Seconds(10));
    server_.reset();
    fake_->ClearCalls();
    StartGangkeeper();  // the same data directory
  }
};

TEST_F(KueueRestartTest, AKilledBrokerComesBackWithEveryWorkloadOnceAndRewritesNothingUnchanged) {
  SubmitJob(Job("low", 3, 2, "training-batch"));
  ASSERT_TRUE(WaitFor([&] { return Released("low"); })) << server_->Stderr();
  Start("low");
  SubmitTeamBJob(Job("b1", 1, 1));
  SubmitJob(Job("urgent", 2, 1, "inference-critical"));
  ASSERT_TRUE(WaitFor([&] { return Released("urgent") && Released("b1", kTeamBJobs); })) << server_->Stderr();
  EXPECT_TRUE(Suspended(GetJob("low"))) << "preempted";
  ASSERT_TRUE(WaitFor([&] {
    return ConditionStatus(WorkloadOf("team-a", "low"), "Preempted") == "True" &&
           ConditionStatus(WorkloadOf("team-a", "low"), "QuotaReserved") == "False" &&
           ConditionStatus(WorkloadOf("team-a", "urgent"), "Admitted") == "True" &&
           ConditionStatus(WorkloadOf("team-b", "b1"), "Admitted") == "True";
  })) << server_->Stderr();
  ASSERT_TRUE(WaitFor([&] { return StatusMismatch("team-a-gpu", "team-a").empty(); }))
      << StatusMismatch("team-a-gpu", "team-a");
  ASSERT_TRUE(kueue_it::Quiet(*fake_, absl::Seconds(3)));
  EXPECT_EQ(WorkloadCount(), 3u);
  EXPECT_THAT(ClusterQueueView("broken").value("inactiveReason", ""), HasSubstr("lots"));

  KillAndRestart();
  // The refused ClusterQueue is still refused, and says why.
  const json broken = ClusterQueueView("broken");
  EXPECT_EQ(broken.value("active", true), false) << broken.dump();
  EXPECT_THAT(broken.value("inactiveReason", ""), HasSubstr("lots"));
  // Its writers list what the cluster holds, then write nothing unchanged.
  ASSERT_TRUE(WaitFor([&] {
    bool workloads = false, queues = false;
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.method != "GET" || absl::StrContains(c.query, "watch")) continue;
      workloads |= absl::EndsWith(c.path, "/workloads");
      queues |= absl::EndsWith(c.path, "/clusterqueues");
    }
    return workloads && queues;
  })) << server_->Stderr();
  ASSERT_TRUE(kueue_it::Quiet(*fake_, absl::Seconds(3)));
  EXPECT_THAT(fake_->WritesByPath(kKueuePrefix), ::testing::IsEmpty())
      << "rewritten after the restart:\n" << Describe(fake_->WritesByPath(kKueuePrefix));
  EXPECT_EQ(WorkloadCount(), 3u);
  EXPECT_TRUE(StatusMismatch("team-a-gpu", "team-a").empty()) << StatusMismatch("team-a-gpu", "team-a");
  EXPECT_TRUE(StatusMismatch("team-b-gpu", "team-b").empty()) << StatusMismatch("team-b-gpu", "team-b");

  // It goes on: urgent finishes, low is admitted again, in the same objects.
  const std::string low_uid = WorkloadOf("team-a", "low")["metadata"].value("uid", "");
  Complete("urgent");
  ASSERT_TRUE(WaitFor([&] { return Released("low"); })) << server_->Stderr();
  ASSERT_TRUE(WaitFor([&] {
    return ConditionStatus(WorkloadOf("team-a", "low"), "Admitted") == "True" &&
           ConditionStatus(WorkloadOf("team-a", "low"), "Evicted") == "False" &&
           ConditionStatus(WorkloadOf("team-a", "urgent"), "Finished") == "True";
  })) << server_->Stderr();
  EXPECT_EQ(WorkloadOf("team-a", "low")["metadata"].value("uid", ""), low_uid);
  ASSERT_TRUE(WaitFor([&] { return StatusMismatch("team-a-gpu", "team-a").empty(); }))
      << StatusMismatch("team-a-gpu", "team-a");
  ASSERT_TRUE(kueue_it::Quiet(*fake_, absl::Seconds(3)));
  for (const auto& [path, n] : fake_->WritesByPath(kKueuePrefix)) {
    EXPECT_FALSE(absl::StartsWith(path, "POST")) << path << ": no Workload is created again";
    EXPECT_FALSE(absl::StrContains(path, "team-b")) << path << ": team-b did not change";
  }
  EXPECT_EQ(WorkloadCount(), 3u);
}

// Kueue's objects cannot be listed when gangkeeper comes back (the API
// server answers 500): until they can, the ClusterQueues the journal last
// recorded stand for the cluster's. The quota stays the cluster's (team-a-gpu
// 6 GPUs and no cohort, not the files' 4 in gpu-shared), the refused queue
// stays refused, and what was admitted stays admitted. Once the lists
// answer, the cluster's objects take over with nothing changed.
TEST_F(KueueRestartTest, ARestartWhileKueuesObjectsCannotBeListedKeepsTheClusterQuota) {
  SubmitJob(Job("six", 3, 2, "training-batch"));  // all 6 of the cluster's GPUs
  ASSERT_TRUE(WaitFor([&] { return Released("six"); })) << server_->Stderr();
  conn_.reset();
  server_->Signal(SIGKILL);
  (void)server_->Wait(absl::Seconds(10));
  server_.reset();
  testing::ScriptedFailure down;
  down.path_contains = "/apis/kueue.x-k8s.io/";
  down.non_watch_only = true;
  down.times = -1;
  fake_->Fail(down);
  std::vector<std::string> args = {
      "--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
      "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
      "--policies=" + policies_dir_, "--kube=" + dir_.File("kubeconfig"), "--log-level=debug"};
  args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
  auto p = testing::ServerProcess::Start(args, dir_.path());
  ASSERT_THAT(p, IsOk());
  server_ = *std::move(p);
  ASSERT_TRUE(WaitFor([&] { return ClusterQueueView("team-a-gpu").is_object(); }, absl::Seconds(30)))
      << server_->Stderr();
  EXPECT_THAT(server_->Stderr(), HasSubstr("last recorded stand for them"));
  const json a = ClusterQueueView("team-a-gpu");
  EXPECT_EQ(a.value("cohort", "?"), "") << a.dump();
  bool six = false;
  for (const json& r : a.value("resources", json::array())) {
    if (r.value("resource", "") == "nvidia.com/gpu") six = r.value("nominal", "") == "6";
  }
  EXPECT_TRUE(six) << "the cluster's quota, not the files': " << a.dump();
  const json broken = ClusterQueueView("broken");
  EXPECT_TRUE(broken.is_object() && !broken.value("active", true)) << "still refused: " << broken.dump();
  EXPECT_EQ(a.value("admitted", 0), 1) << a.dump();
  // The lists answer again: ready on the cluster's own objects, the same quota.
  fake_->ClearFailures();
  testing::TlsClientOptions o;
  o.ca_file = dir_.File("certs/ca.crt");
  ASSERT_TRUE(WaitFor([&] {
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    if (!api.ok()) return false;
    auto r = (*api)->Request("GET", "/readyz");
    return r.ok() && r->status == 200;
  }, absl::Seconds(60))) << server_->Stderr();
  EXPECT_EQ(ClusterQueueView("team-a-gpu").value("admitted", 0), 1);
  EXPECT_FALSE(Suspended(GetJob("six"))) << "never preempted";
}

}  // namespace
}  // namespace gangkeeper::kube_it
