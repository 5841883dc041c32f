// Integration: the real gangkeeper binary with --kube pointing at
// FakeKubeApi (a real HTTPS API-server double on loopback). Objects go
// through /mutate and /validate the way the API server sends them, are then
// stored in the fake, and the test watches what gangkeeper does to them:
// releases, suspensions, preemptions, recovery from API failures, dropped and
// expired watches, and a restart that must converge from the list.
#include <algorithm>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_kube_api.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/integration/kube_fixture.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace ::gangkeeper::kube_it;  // NOLINT: the fixture and its objects

TEST_F(KubeIntegrationTest, SeedJobIsAdmittedAndReleasedWithTheFlavorsPlacement) {
  json stored = SubmitJob(Job("two-gpu-training", 2, 1));
  EXPECT_TRUE(Suspended(stored));  // /mutate suspended it
  ASSERT_TRUE(WaitFor([&] { return Released("two-gpu-training"); })) << server_->Stderr();
  json job = GetJob("two-gpu-training");
  const json& spec = job["spec"]["template"]["spec"];
  EXPECT_EQ(spec["nodeSelector"]["accelerator"], "nvidia");    // the flavor's nodeLabels
  EXPECT_EQ(spec["nodeSelector"]["kubernetes.io/os"], "linux");  // the template's own kept
  ASSERT_TRUE(spec["tolerations"].is_array());
  EXPECT_EQ(spec["tolerations"][0]["key"], "sku");
  json record = json::parse(job["metadata"]["annotations"]["gangkeeper.io/admitted-flavors"].get<std::string>());
  EXPECT_EQ(record["clusterQueue"], "team-a-gpu");
  EXPECT_EQ(record["podSets"][0]["flavors"]["nvidia.com/gpu"], "nvidia-gpu");

  // Every request gangkeeper sent is a well-formed one. (The fake records a
  // call after it has applied it: the release can be seen a moment before
  // its PATCH is in the record, so wait for that too.)
  ASSERT_TRUE(WaitFor([&] { return PatchesUnder(kJobs) >= 1; }));
  int patches = 0;
  for (const testing::RecordedCall& c : fake_->Calls()) {
    EXPECT_EQ(c.authorization, "Bearer fake-token");
    if (c.method == "GET") {
      EXPECT_TRUE(c.body.empty());
      continue;
    }
    if (c.method == "POST") {  // Events about the Job (test/kube/events_test.cc checks them)
      EXPECT_EQ(c.path, "/apis/events.k8s.io/v1/namespaces/team-a/events");
      continue;
    }
    ASSERT_EQ(c.method, "PATCH") << c.path;
    if (absl::StrContains(c.path, "/events/")) continue;  // a repeat counted on an Event
    ++patches;
    EXPECT_EQ(c.path, absl::StrCat(kJobs, "/two-gpu-training"));
    EXPECT_EQ(c.content_type, "application/json-patch+json");
    json ops = json::parse(c.body);
    ASSERT_TRUE(ops.is_array());
    EXPECT_EQ(ops[0], json({{"op", "test"}, {"path", "/metadata/uid"}, {"value", "uid-two-gpu-training"}}));
    EXPECT_EQ(ops.back(), json({{"op", "add"}, {"path", "/spec/suspend"}, {"value", false}}));
  }
  EXPECT_EQ(patches, 1);
  // The lists and watches carry the queue label selector. (The Jobs watch
  // starts after its list, which may come after the release on a busy
  // machine: wait for it.)
  auto jobs_watches = [&] {
    std::vector<testing::RecordedCall> out;
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.path == "/apis/batch/v1/jobs" && c.query.find("watch=true") != std::string::npos) out.push_back(c);
    }
    return out;
  };
  ASSERT_TRUE(WaitFor([&] { return !jobs_watches().empty(); })) << "no watch of Jobs";
  for (const testing::RecordedCall& c : jobs_watches()) {
    EXPECT_THAT(c.query, HasSubstr("labelSelector=kueue.x-k8s.io%2Fqueue-name"));
  }
}

TEST_F(KubeIntegrationTest, AFinishedJobFreesQuotaForTheNextGang) {
  SubmitJob(Job("big", 3, 2));  // 6 GPUs: team-a's 4 plus its borrowing limit of 2
  ASSERT_TRUE(WaitFor([&] { return Released("big"); })) << server_->Stderr();
  Start("big");
  SubmitJob(Job("next", 2, 1));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(Released("next")) << "there is no quota until big ends";
  Complete("big");
  ASSERT_TRUE(WaitFor([&] { return Released("next"); })) << server_->Stderr();
}

TEST_F(KubeIntegrationTest, HigherPriorityPreemptsAndTheVictimIsRestoredThenReleasedAgain) {
  SubmitJob(Job("low", 3, 2, "training-batch"));
  ASSERT_TRUE(WaitFor([&] { return Released("low"); })) << server_->Stderr();
  Start("low");
  SubmitJob(Job("urgent", 2, 1, "inference-critical"));
  // The victim is suspended whole, its start time cleared and its template
  // put back as it was; then the preemptor is released.
  ASSERT_TRUE(WaitFor([&] { return Released("urgent"); })) << server_->Stderr();
  json low = GetJob("low");
  EXPECT_TRUE(Suspended(low));
  EXPECT_FALSE(low["status"].contains("startTime"));
  const json& spec = low["spec"]["template"]["spec"];
  EXPECT_EQ(spec["nodeSelector"], json({{"kubernetes.io/os", "linux"}}));
  EXPECT_FALSE(spec.contains("tolerations") && !spec["tolerations"].empty());
  EXPECT_FALSE(low["metadata"].contains("annotations") &&
               low["metadata"]["annotations"].contains("gangkeeper.io/admitted-flavors"));
  // The metrics count it with Kueue's names and labels.
  {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    ASSERT_THAT(api, IsOk());
    auto m = (*api)->Request("GET", "/metrics");
    ASSERT_THAT(m, IsOk());
    EXPECT_THAT(m->body, HasSubstr("kueue_preempted_workloads_total{preempting_cluster_queue=\"team-a-gpu\","
                                   "reason=\"InClusterQueue\",replica_role=\"standalone\"} 1\n"));
    EXPECT_THAT(m->body, HasSubstr("kueue_evicted_workloads_total{cluster_queue=\"team-a-gpu\",reason=\"Preempted\","
                                   "underlying_cause=\"InClusterQueue\",priority_class=\"training-batch\",replica_role=\"standalone\"} 1\n"));
    EXPECT_THAT(m->body, HasSubstr("kueue_admitted_workloads_total{cluster_queue=\"team-a-gpu\","
                                   "priority_class=\"inference-critical\",replica_role=\"standalone\"} 1\n"));
  }
  // The preemptor ends: the victim gets its quota back.
  Complete("urgent");
  ASSERT_TRUE(WaitFor([&] { return Released("low"); })) << server_->Stderr();
  EXPECT_EQ(GetJob("low")["spec"]["template"]["spec"]["nodeSelector"]["accelerator"], "nvidia");
}

TEST_F(KubeIntegrationTest, PodGroupOfFourIsReleasedWhole) {
  for (int i = 0; i < 4; ++i) {
    json stored = Submit(GroupPod("g4", i, 4), "", "v1", "Pod", "pods", kPods);
    EXPECT_TRUE(Gated(stored)) << stored.dump();
  }
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < 4; ++i) {
      auto p = fake_->Get(absl::StrCat(kPods, "/g4-", i));
      if (!p.ok() || Gated(*p)) return false;
    }
    return true;
  })) << server_->Stderr();
  for (int i = 0; i < 4; ++i) {
    json pod = *fake_->Get(absl::StrCat(kPods, "/g4-", i));
    EXPECT_EQ(pod["spec"]["nodeSelector"]["accelerator"], "nvidia");
  }
}

TEST_F(KubeIntegrationTest, AReplacementPodOfARunningGroupIsReleasedToo) {
  for (int i = 0; i < 2; ++i) Submit(GroupPod("pair", i, 2), "", "v1", "Pod", "pods", kPods);
  auto ungated = [&](const std::string& name) {
    auto p = fake_->Get(absl::StrCat(kPods, "/", name));
    return p.ok() && !Gated(*p);
  };
  ASSERT_TRUE(WaitFor([&] { return ungated("pair-0") && ungated("pair-1"); })) << server_->Stderr();
  // pair-1's node fails; its owner makes a new pod, which the webhook gates.
  ASSERT_THAT(fake_->Delete(absl::StrCat(kPods, "/pair-1")), IsOk());
  json stored = Submit(GroupPod("pair", 2, 2), "", "v1", "Pod", "pods", kPods);
  EXPECT_TRUE(Gated(stored));
  ASSERT_TRUE(WaitFor([&] { return ungated("pair-2"); })) << server_->Stderr();
  EXPECT_EQ((*fake_->Get(absl::StrCat(kPods, "/pair-2")))["spec"]["nodeSelector"]["accelerator"], "nvidia");
}

TEST_F(KubeIntegrationTest, PodGroupWithOnePodThatCannotBePatchedStaysGatedWhole) {
  testing::ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = "/pods/bad-2";
  f.status = 403;
  f.times = -1;
  fake_->Fail(f);
  for (int i = 0; i < 4; ++i) Submit(GroupPod("bad", i, 4), "", "v1", "Pod", "pods", kPods);
  // gangkeeper tries (and retries after its backoff); no pod may run.
  ASSERT_TRUE(WaitFor([&] {
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.method == "PATCH" && c.path == absl::StrCat(kPods, "/bad-2")) return true;
    }
    return false;
  })) << server_->Stderr();
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 4; ++i) {
      auto p = fake_->Get(absl::StrCat(kPods, "/bad-", i));
      ASSERT_THAT(p, IsOk());
      ASSERT_TRUE(Gated(*p)) << "pod bad-" << i << " was ungated while bad-2 could not be released";
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

TEST_F(KubeIntegrationTest, ApiErrorsDelayTheReleaseButLoseNothing) {
  testing::ScriptedFailure f;
  f.method = "PATCH";
  f.status = 500;
  f.times = 3;
  fake_->Fail(f);
  // A release is sent without a read (the reconciler kept the object):
  // the API server's "come back later" answers its PATCH.
  testing::ScriptedFailure busy;
  busy.method = "PATCH";
  busy.path_contains = "/jobs/patient";
  busy.status = 429;
  busy.retry_after = "1";
  busy.times = 2;
  fake_->Fail(busy);
  SubmitJob(Job("patient", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("patient"); }, absl::Seconds(30))) << server_->Stderr();
  int failures = 0;
  for (const testing::RecordedCall& c : fake_->Calls()) failures += c.status == 500 || c.status == 429;
  EXPECT_EQ(failures, 5);
}

TEST_F(KubeIntegrationTest, DroppedAndExpiredWatchesRecover) {
  // Objects created behind the webhook's back (as while it was down) are
  // found by the watch; the watch survives being cut and expiring.
  fake_->CloseWatches();
  json j = Job("unseen-1", 1, 1);
  j["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, j), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Released("unseen-1"); })) << server_->Stderr();
  fake_->CompactHistory();
  fake_->CloseWatches();
  json k = Job("unseen-2", 1, 1);
  k["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, k), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Released("unseen-2"); })) << server_->Stderr();
}

TEST_F(KubeIntegrationTest, AnApiServerWithoutTheExistenceSelectorIsListedWhole) {
  StopGangkeeper();
  testing::ScriptedFailure refused;
  refused.method = "GET";
  refused.path_contains = "/apis/batch/v1/jobs";
  refused.non_watch_only = true;
  refused.status = 400;
  refused.times = 1;
  fake_->Fail(refused);
  json unlabelled = Job("not-ours", 1, 1);
  unlabelled["metadata"]["labels"] = json::object();
  unlabelled["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, unlabelled), IsOk());
  json queued = Job("queued", 1, 1);
  queued["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, queued), IsOk());
  StartGangkeeper();
  ASSERT_TRUE(WaitFor([&] { return Released("queued"); })) << server_->Stderr();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(Suspended(GetJob("not-ours"))) << "objects without the queue label are not gangkeeper's";
  bool refused_seen = false, whole_list = false;
  for (const testing::RecordedCall& c : fake_->Calls()) {
    if (c.path != "/apis/batch/v1/jobs") continue;
    if (c.status == 400) refused_seen = true;
    if (refused_seen && c.status == 200 && c.query.find("labelSelector") == std::string::npos) whole_list = true;
  }
  EXPECT_TRUE(refused_seen);
  EXPECT_TRUE(whole_list);
}

TEST_F(KubeIntegrationTest, RestartConvergesFromTheList) {
  SubmitJob(Job("running", 3, 2));  // holds all of team-a's reach
  ASSERT_TRUE(WaitFor([&] { return Released("running"); })) << server_->Stderr();
  Start("running");
  SubmitJob(Job("waiting", 2, 1));
  StopGangkeeper();
  // While gangkeeper is down: a Job is created, the running one finishes,
  // and the waiting one is deleted.
  json fresh = Job("created-while-down", 2, 1);
  fresh["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, fresh), IsOk());
  Complete("running");
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/waiting")), IsOk());
  StartGangkeeper();
  ASSERT_TRUE(WaitFor([&] { return Released("created-while-down"); })) << server_->Stderr();
  // A running Job found at start holds its quota: a second big one waits.
  SubmitJob(Job("second-big", 3, 2));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(Released("second-big")) << "created-while-down holds 2 of the 6 GPUs team-a can reach";
}

// Issue #19: a Job and a PyTorchJob named alike are two workloads, running
// or pending, and stay two across a restart. Before, a running Job made the
// PyTorchJob's create fail (503), and a pending pair flapped until only the
// Job was ever released: an acknowledged workload lost.
class SameNameTest : public KubeIntegrationTest {
 protected:
  void Run(bool restart) {
    SubmitJob(Job("train", 1, 1));
    ASSERT_TRUE(WaitFor([&] { return Released("train"); })) << server_->Stderr();
    Start("train");
    // The running Job does not stand in the way of the PyTorchJob.
    SubmitPyTorchJob(PyTorchJob("train", 1));
    ASSERT_TRUE(WaitFor([&] { return PyTorchJobReleased("train"); })) << server_->Stderr();
    SubmitJob(Job("hog", 2, 2));  // 1 + 1 + 4: all six GPUs team-a can reach
    ASSERT_TRUE(WaitFor([&] { return Released("hog"); })) << server_->Stderr();
    Start("hog");
    // Two pending workloads of one name.
    SubmitJob(Job("eval", 1, 1));
    SubmitPyTorchJob(PyTorchJob("eval", 1));
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_FALSE(Released("eval"));
    EXPECT_FALSE(PyTorchJobReleased("eval"));
    if (restart) {
      StopGangkeeper();
      StartGangkeeper();
    }
    Complete("hog");
    ASSERT_TRUE(WaitFor([&] { return Released("eval") && PyTorchJobReleased("eval"); })) << server_->Stderr();
    EXPECT_TRUE(Released("train"));
    EXPECT_TRUE(PyTorchJobReleased("train"));
  }
};

TEST_F(SameNameTest, TwoKindsUnderOneNameAreTwoWorkloads) { Run(/*restart=*/false); }
TEST_F(SameNameTest, TwoKindsUnderOneNameStayTwoAcrossARestart) { Run(/*restart=*/true); }

// Issue #19: a name deleted and recreated (a new uid) while gangkeeper was
// down: the list shows only the new object, so the old one's quota goes and
// the new one is admitted. Before, the old uid kept its quota forever.
TEST_F(KubeIntegrationTest, ANameReusedWhileDownIsANewWorkloadAndFreesTheOld) {
  SubmitJob(Job("x2", 3, 2));  // all six GPUs
  ASSERT_TRUE(WaitFor([&] { return Released("x2"); })) << server_->Stderr();
  Start("x2");
  StopGangkeeper();
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/x2")), IsOk());
  json again = Job("x2", 3, 2);
  again["metadata"]["uid"] = "uid-x2-again";
  again["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, again), IsOk());
  StartGangkeeper();
  ASSERT_TRUE(WaitFor([&] { return Released("x2"); })) << server_->Stderr();
  EXPECT_EQ(GetJob("x2")["metadata"]["uid"], "uid-x2-again");
}

// The same while gangkeeper runs but its watches fail and the history is
// compacted: the next list is authoritative.
TEST_F(KubeIntegrationTest, ANameReusedBehindFailedWatchesIsANewWorkloadAndFreesTheOld) {
  SubmitJob(Job("x2", 3, 2));
  ASSERT_TRUE(WaitFor([&] { return Released("x2"); })) << server_->Stderr();
  Start("x2");
  testing::ScriptedFailure watches;
  watches.path_contains = "/apis/batch/v1/jobs";
  watches.watch_only = true;
  watches.status = 500;
  watches.times = -1;
  fake_->Fail(watches);
  fake_->CloseWatches();
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/x2")), IsOk());
  json again = Job("x2", 3, 2);
  again["metadata"]["uid"] = "uid-x2-again";
  again["spec"]["suspend"] = true;
  ASSERT_THAT(fake_->Create(kJobs, again), IsOk());
  fake_->CompactHistory();
  absl::SleepFor(absl::Seconds(1));
  fake_->ClearFailures();
  ASSERT_TRUE(WaitFor([&] { return Released("x2"); }, absl::Seconds(40))) << server_->Stderr();
  EXPECT_EQ(GetJob("x2")["metadata"]["uid"], "uid-x2-again");
}

// Issue #19: adopted workloads keep their admission time (it is on the
// object), so a restart that lost the state preempts the same victim as
// before it: the newest admitted. (The list, sorted by name, adopts
// a-second before z-first: stamped with the adoption moment, z-first would
// look newer and be preempted.)
TEST_F(KubeIntegrationTest, AnAdoptionKeepsTheAdmissionTimeAndSoThePreemptionOrder) {
  SubmitJob(Job("z-first", 1, 2, "training-batch"));
  ASSERT_TRUE(WaitFor([&] { return Released("z-first"); })) << server_->Stderr();
  Start("z-first");
  absl::SleepFor(absl::Milliseconds(20));
  SubmitJob(Job("a-second", 1, 2, "training-batch"));
  ASSERT_TRUE(WaitFor([&] { return Released("a-second"); })) << server_->Stderr();
  Start("a-second");
  StopGangkeeper();
  StartGangkeeper("fresh-data");  // nothing recorded: both are adopted
  SubmitJob(Job("urgent", 2, 2, "inference-critical"));  // 4 + 4 > 6: one must go
  ASSERT_TRUE(WaitFor([&] { return Released("urgent"); })) << server_->Stderr();
  EXPECT_TRUE(Suspended(GetJob("a-second"))) << "the newest admitted is preempted";
  EXPECT_FALSE(Suspended(GetJob("z-first")));
}

// Issue #19's livelock, through the real binary with the repository's
// policies against a cluster: team-b's borrower is suspended once, team-a's
// P is released, and nothing churns afterwards (every round trip would be a
// suspend and an unsuspend PATCH of a real Job).
TEST_F(KubeIntegrationTest, ThePoliciesLivelockIsGoneAgainstACluster) {
  for (const char* n : {"a1", "a2", "a3"}) {
    SubmitJob(Job(n, 1, 1));
    ASSERT_TRUE(WaitFor([&] { return Released(n); })) << server_->Stderr();
    Start(n);
  }
  for (const char* n : {"b1", "b2", "b3"}) {
    SubmitTeamBJob(Job(n, 1, 1));
    ASSERT_TRUE(WaitFor([&] { return Released(n, kTeamBJobs); })) << server_->Stderr();
    Start(n, kTeamBJobs);
  }
  SubmitJob(Job("big", 1, 2));  // cannot fit: set aside
  SubmitJob(Job("p", 1, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("p"); })) << server_->Stderr();
  int suspended = 0;
  for (const char* n : {"b1", "b2", "b3"}) suspended += Suspended(GetJob(n, kTeamBJobs));
  EXPECT_EQ(suspended, 1);
  const int patches = PatchesUnder(kTeamBJobs);
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(PatchesUnder(kTeamBJobs), patches) << "team-b's jobs are patched again and again: the broker churns";
  EXPECT_FALSE(Released("big"));
}

}  // namespace
}  // namespace gangkeeper

namespace gangkeeper {
namespace {

TEST(KubeFlagTest, ABadKubeconfigStopsTheStartWithTheReason) {
  testing::TempDir dir;
  auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir.File("certs")},
                                   absl::Seconds(30));
  ASSERT_THAT(certs, IsOk());
  std::ofstream(dir.File("kubeconfig")) << "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                        << "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\n"
                                        << "    insecure-skip-tls-verify: true\n"
                                        << "contexts:\n- name: c\n  context:\n    cluster: k\n";
  for (const std::string& kube : {dir.File("missing-kubeconfig"), dir.File("kubeconfig")}) {
    auto p = testing::ServerProcess::Start(
        {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir.File("certs/tls.crt"),
         "--tls-key=" + dir.File("certs/tls.key"), "--data-dir=" + dir.File("data"), "--kube=" + kube},
        dir.path());
    ASSERT_FALSE(p.ok()) << kube;
    EXPECT_THAT(std::string(p.status().message()), HasSubstr("--kube")) << p.status();
  }
}

}  // namespace
}  // namespace gangkeeper
