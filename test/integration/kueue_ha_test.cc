// Integration (issue #24, acceptance: "survives a leader change without
// duplicate writes"): two `gangkeeper serve --store etcd://...` replicas on
// a real etcd with --kube pointing at FakeKubeApi, Kueue's objects from the
// cluster and their status and Workloads published. Jobs are admitted and
// one is preempted; then the leader is killed with SIGKILL and the other
// replica leads. Each replica talks to the API server with its own token,
// so the fake's record says who wrote what: the follower never writes to
// Kueue's API; the new leader writes nothing for objects that did not
// change, creates no second Workload, and carries on (a finish, a
// re-admission) from where the old leader was; the queues' status matches
// the new leader's /v1/clusterqueues/NAME/status; and an invalid
// ClusterQueue is inactive with its reason on every replica (the reason is
// in the journal's record of the policies).
#include <signal.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/integration/kube_fixture.h"
#include "test/integration/kueue_objects_fixture.h"
#include "test/testing/etcd_process.h"
#include "test/testing/job_review.h"
#include "test/testing/kubeconfig.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/testing/wait.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::kueue_it::ConditionStatus;
using ::gangkeeper::kueue_it::Describe;
using ::gangkeeper::kueue_it::kKueue;
using ::gangkeeper::kueue_it::kKueuePrefix;
using ::gangkeeper::kueue_it::WriteCounts;
using ::gangkeeper::testing::IsOk;
using nlohmann::json;

constexpr int kReplicas = 2;

std::string Token(int i) { return absl::StrCat("replica-token-", i); }
std::string Bearer(int i) { return absl::StrCat("Bearer ", Token(i)); }

bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(30)) {
  return testing::WaitFor(done, limit, absl::Milliseconds(100));
}

class KueueHaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_THAT(etcd, IsOk());
    etcd_ = *std::move(etcd);
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    ASSERT_EQ(certs->exit_code, 0) << certs->err;
    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    auto fake = testing::FakeKubeApi::Start(fo);
    ASSERT_THAT(fake, IsOk());
    fake_ = *std::move(fake);
    ASSERT_NO_FATAL_FAILURE(kueue_it::SeedKueueObjects(*fake_));
    for (int i = 0; i < kReplicas; ++i) {
      fake_->AddToken(Token(i));
      testing::WriteKubeconfigFor(*fake_, dir_.path(), "certs/ca.crt", Token(i), absl::StrCat("kubeconfig", i));
    }
    json tokens = json::array({{{"name", "platform"}, {"sha256", testing::Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    options_.ca_file = dir_.File("certs/ca.crt");
    for (int i = 0; i < kReplicas; ++i) {
      replicas_.emplace_back();
      ASSERT_NO_FATAL_FAILURE(Start(i));
    }
  }

  std::vector<std::string> Args(int i) const {
    return {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
            "--tls-key=" + dir_.File("certs/tls.key"), absl::StrCat("--data-dir=", dir_.File(absl::StrCat("data", i))),
            std::string("--policies=") + GK_SOURCE_DIR + "/policies",
            "--kube=" + dir_.File(absl::StrCat("kubeconfig", i)), "--policy-source=cluster",
            "--publish-kueue-status=true", "--publish-workloads=true", "--tokens=" + dir_.File("tokens.json"),
            "--drain-delay=0s", "--store=etcd://" + etcd_->endpoint(), "--etcd-prefix=/gk/", "--lease-ttl=2s",
            "--lease-renew=500ms", absl::StrCat("--replica-id=replica-", i), "--log-level=debug"};
  }

  void Start(int i) {
    auto p = testing::ServerProcess::Start(Args(i), dir_.path());
    ASSERT_THAT(p, IsOk());
    replicas_[i] = *std::move(p);
  }

  void Kill(int i) {
    replicas_[i]->Signal(SIGKILL);
    (void)replicas_[i]->Wait(absl::Seconds(10));
    replicas_[i].reset();
  }

  absl::StatusOr<testing::HttpReply> Call(int i, const std::string& method, const std::string& path,
                                          const std::string& body = "", bool webhook = false) {
    if (replicas_[i] == nullptr) return absl::UnavailableError("not running");
    auto c = testing::TlsConnection::Connect(webhook ? replicas_[i]->webhook_port() : replicas_[i]->api_port(),
                                             options_);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body, "Authorization: Bearer admin-secret\r\n");
  }

  bool Leads(int i) {
    absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/metrics");
    return r.ok() && absl::StrContains(r->body, absl::StrCat("gangkeeper_replica_leader{replica=\"replica-", i, "\"} 1"));
  }

  // Replica `i`'s warnings and errors (not the access log).
  std::string Problems(int i) {
    if (replicas_[i] == nullptr) return "";
    std::string out = absl::StrCat("--- replica-", i, "\n");
    for (absl::string_view line : absl::StrSplit(replicas_[i]->Stderr(), '\n')) {
      if (!absl::StrContains(line, " access: ")) absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

  std::string Readyz(int i) {
    absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/readyz");
    return r.ok() ? absl::StrCat(r->status, " ", r->body) : std::string(r.status().message());
  }

  bool Ready(int i) {
    absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/readyz");
    return r.ok() && r->status == 200;
  }

  // The replica that leads, waiting up to 30 s; -1 when none does.
  int Leader() {
    int leader = -1;
    WaitFor([&] {
      int count = 0;
      for (int i = 0; i < kReplicas; ++i) {
        if (Leads(i)) {
          leader = i;
          ++count;
        }
      }
      EXPECT_LE(count, 1) << "two replicas lead at once";
      return count == 1;
    });
    return leader;
  }

  // What the API server does on CREATE, through replica `i`'s webhook:
  // /mutate, its patch, /validate, store.
  void SubmitJob(int i, json job, const std::string& collection) {
    static int n = 0;
    const std::string uid = absl::StrCat("ha-review-", ++n);
    auto m = Call(i, "POST", "/mutate", kube_it::Review(job, "batch", "v1", "Job", "jobs", uid).dump(), true);
    ASSERT_THAT(m, IsOk());
    json answer = json::parse(m->body, nullptr, false);
    ASSERT_TRUE(answer["response"]["allowed"].get<bool>()) << m->body;
    if (answer["response"].contains("patch")) {
      std::string patch;
      ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
      job = job.patch(json::parse(patch));
    }
    auto v = Call(i, "POST", "/validate", kube_it::Review(job, "batch", "v1", "Job", "jobs", uid + "v").dump(), true);
    ASSERT_THAT(v, IsOk());
    ASSERT_THAT(v->body, ::testing::HasSubstr(R"("allowed":true)"));
    ASSERT_THAT(fake_->Create(collection, job), IsOk());
  }

  json GetJob(const std::string& ns, const std::string& name) {
    auto j = fake_->Get(absl::StrCat("/apis/batch/v1/namespaces/", ns, "/jobs/", name));
    return j.ok() ? *j : json();
  }
  bool Released(const std::string& ns, const std::string& name) {
    json j = GetJob(ns, name);
    return j.is_object() && !kube_it::Suspended(j);
  }
  void MarkJob(const std::string& ns, const std::string& name, const std::string& field, const json& value) {
    json j = GetJob(ns, name);
    j["status"][field] = value;
    ASSERT_THAT(fake_->Replace(absl::StrCat("/apis/batch/v1/namespaces/", ns, "/jobs/", name), j), IsOk());
  }

  std::map<std::string, std::vector<json>> Workloads(const std::string& ns) { return kueue_it::Workloads(*fake_, ns); }
  json WorkloadOf(const std::string& ns, const std::string& name) { return kueue_it::WorkloadOf(*fake_, ns, name); }
  bool Quiet(absl::Duration quiet) { return kueue_it::Quiet(*fake_, quiet); }

  // Replica `i`'s /v1/clusterqueues/NAME/status.
  json ClusterQueueView(int i, const std::string& name) {
    auto r = Call(i, "GET", "/v1/clusterqueues/" + name + "/status");
    if (!r.ok() || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }
  std::string StatusMismatch(int i, const std::string& cq, const std::string& ns) {
    return kueue_it::StatusMismatch(*fake_, ClusterQueueView(i, cq), cq, ns);
  }

  std::unique_ptr<testing::EtcdProcess> etcd_;
  testing::TempDir dir_;
  std::unique_ptr<testing::FakeKubeApi> fake_;
  std::vector<std::unique_ptr<testing::ServerProcess>> replicas_;
  testing::TlsClientOptions options_;
};

TEST_F(KueueHaTest, ALeaderChangeLosesNoWorkloadAndRewritesNothingThatDidNotChange) {
  const int leader = Leader();
  ASSERT_GE(leader, 0) << "no replica leads";
  const int other = 1 - leader;
  ASSERT_TRUE(WaitFor([&] { return Ready(0) && Ready(1); })) << Readyz(0) << "\n" << Readyz(1) << "\n" << Problems(0) << Problems(1);

  // Admitted, then preempted by a higher priority; team-b's job admitted.
  ASSERT_NO_FATAL_FAILURE(SubmitJob(leader, kube_it::Job("low", 3, 2, "training-batch"), kube_it::kJobs));
  ASSERT_TRUE(WaitFor([&] { return Released("team-a", "low"); })) << replicas_[leader]->Stderr();
  ASSERT_NO_FATAL_FAILURE(MarkJob("team-a", "low", "startTime", "2026-12-06T05:00:00Z"));
  json b = kube_it::Job("b1", 1, 1);
  b["metadata"]["namespace"] = "team-b";
  ASSERT_NO_FATAL_FAILURE(SubmitJob(leader, b, kube_it::kTeamBJobs));
  ASSERT_NO_FATAL_FAILURE(SubmitJob(leader, kube_it::Job("urgent", 2, 1, "inference-critical"), kube_it::kJobs));
  ASSERT_TRUE(WaitFor([&] { return Released("team-a", "urgent") && Released("team-b", "b1"); }))
      << replicas_[leader]->Stderr();
  EXPECT_TRUE(kube_it::Suspended(GetJob("team-a", "low"))) << "preempted";

  // Published: a Workload per job with its conditions; the queues' status.
  ASSERT_TRUE(WaitFor([&] {
    json low = WorkloadOf("team-a", "low");
    json urgent = WorkloadOf("team-a", "urgent");
    json b1 = WorkloadOf("team-b", "b1");
    return ConditionStatus(low, "Preempted") == "True" && ConditionStatus(low, "QuotaReserved") == "False" &&
           ConditionStatus(urgent, "Admitted") == "True" && ConditionStatus(b1, "Admitted") == "True";
  })) << replicas_[leader]->Stderr();
  ASSERT_TRUE(WaitFor([&] {
    return StatusMismatch(leader, "team-a-gpu", "team-a").empty() &&
           StatusMismatch(leader, "team-b-gpu", "team-b").empty();
  })) << StatusMismatch(leader, "team-a-gpu", "team-a") << StatusMismatch(leader, "team-b-gpu", "team-b");
  ASSERT_TRUE(Quiet(absl::Seconds(3)));

  // The invalid ClusterQueue: inactive with its reason, on the leader, in
  // the cluster, and on the follower, which knows it from the journal.
  for (int i : {leader, other}) {
    json view = ClusterQueueView(i, "broken");
    EXPECT_EQ(view.value("active", true), false) << "replica-" << i << ": " << view.dump();
    EXPECT_THAT(view.value("inactiveReason", ""), ::testing::HasSubstr("lots")) << "replica-" << i;
  }
  auto broken = fake_->Get(absl::StrCat(kKueue, "/clusterqueues/broken"));
  ASSERT_THAT(broken, IsOk());
  EXPECT_EQ(ConditionStatus(*broken, "Active"), "False");

  // Only the leader wrote, to Kueue's API or anywhere else.
  EXPECT_THAT(fake_->WritesByPath(kKueuePrefix, Bearer(leader)), ::testing::Not(::testing::IsEmpty()));
  EXPECT_THAT(fake_->WritesByPath("", Bearer(other)), ::testing::IsEmpty())
      << "the follower wrote:\n" << Describe(fake_->WritesByPath("", Bearer(other)));
  {
    // One create per job, none repeated.
    const WriteCounts writes = fake_->WritesByPath(kKueuePrefix);
    auto creates = [&](const std::string& ns) {
      auto it = writes.find(absl::StrCat("POST ", kKueue, "/namespaces/", ns, "/workloads"));
      return it == writes.end() ? 0 : it->second;
    };
    EXPECT_EQ(creates("team-a"), 2) << Describe(writes);
    EXPECT_EQ(creates("team-b"), 1) << Describe(writes);
  }
  const size_t workloads_before = Workloads("team-a").size() + Workloads("team-b").size();
  EXPECT_EQ(workloads_before, 3u);

  // The leader dies; the other takes over.
  fake_->ClearCalls();
  Kill(leader);
  ASSERT_TRUE(WaitFor([&] { return Leads(other); })) << replicas_[other]->Stderr();
  // Its writers list what the cluster holds when they start leading.
  ASSERT_TRUE(WaitFor([&] {
    bool workloads = false, queues = false;
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.method != "GET" || c.authorization != Bearer(other)) continue;
      workloads |= absl::EndsWith(c.path, "/workloads") && !absl::StrContains(c.query, "watch");
      queues |= absl::EndsWith(c.path, "/clusterqueues") && !absl::StrContains(c.query, "watch");
    }
    return workloads && queues;
  })) << replicas_[other]->Stderr();
  ASSERT_TRUE(Quiet(absl::Seconds(3)));
  EXPECT_THAT(fake_->WritesByPath(kKueuePrefix), ::testing::IsEmpty())
      << "the new leader rewrote what did not change:\n" << Describe(fake_->WritesByPath(kKueuePrefix));
  EXPECT_EQ(Workloads("team-a").size() + Workloads("team-b").size(), workloads_before);
  EXPECT_TRUE(StatusMismatch(other, "team-a-gpu", "team-a").empty()) << StatusMismatch(other, "team-a-gpu", "team-a");
  EXPECT_TRUE(StatusMismatch(other, "team-b-gpu", "team-b").empty()) << StatusMismatch(other, "team-b-gpu", "team-b");
  EXPECT_EQ(ConditionStatus(WorkloadOf("team-a", "low"), "Preempted"), "True") << "kept across the change";

  // The new leader carries on: urgent finishes, low is admitted again, and
  // their Workloads follow (the same objects, not new ones).
  const std::string low_uid = WorkloadOf("team-a", "low")["metadata"].value("uid", "");
  ASSERT_NO_FATAL_FAILURE(
      MarkJob("team-a", "urgent", "conditions", json::array({{{"type", "Complete"}, {"status", "True"}}})));
  ASSERT_TRUE(WaitFor([&] { return Released("team-a", "low"); })) << replicas_[other]->Stderr();
  ASSERT_TRUE(WaitFor([&] {
    json low = WorkloadOf("team-a", "low");
    json urgent = WorkloadOf("team-a", "urgent");
    return ConditionStatus(low, "Admitted") == "True" && ConditionStatus(low, "Evicted") == "False" &&
           ConditionStatus(urgent, "Finished") == "True";
  })) << replicas_[other]->Stderr();
  EXPECT_EQ(WorkloadOf("team-a", "low")["metadata"].value("uid", ""), low_uid);
  ASSERT_TRUE(WaitFor([&] { return StatusMismatch(other, "team-a-gpu", "team-a").empty(); }))
      << StatusMismatch(other, "team-a-gpu", "team-a");
  ASSERT_TRUE(Quiet(absl::Seconds(3)));
  for (const auto& [path, n] : fake_->WritesByPath(kKueuePrefix)) {
    EXPECT_FALSE(absl::StartsWith(path, "POST")) << path << ": no Workload is created again";
    EXPECT_FALSE(absl::StartsWith(path, "DELETE")) << path;
    EXPECT_FALSE(absl::StrContains(path, "team-b")) << path << ": team-b did not change";
  }
  for (const std::string ns : {"team-a", "team-b"}) {
    for (const auto& [owner, objects] : Workloads(ns)) EXPECT_EQ(objects.size(), 1u) << ns << "/" << owner;
  }
}

}  // namespace
}  // namespace gangkeeper
