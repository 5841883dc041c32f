// Integration tests of --policy-source cluster (issue #24 item 1): the real
// gangkeeper binary against FakeKubeApi serving Kueue's group. Kueue's
// quota objects are created and changed in the cluster with kubectl-style
// requests (HTTPS, bearer token) and used for admission without a
// restart; an invalid ClusterQueue is inactive with the reason while the
// others keep admitting; the HTTP API's writes land in the cluster; a
// cluster without Kueue's CRDs keeps the policy files, and says so.
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "test/integration/kube_fixture.h"
#include "test/integration/kueue_objects_fixture.h"
#include "test/testing/job_review.h"

namespace gangkeeper::kube_it {
namespace {

using ::testing::HasSubstr;

using kueue_it::kKueue;
// Kueue's objects as kubectl would send them (kueue_objects_fixture.h).
json Flavor() { return kueue_it::FlavorObject(); }
json ClusterQueue(const std::string& name, const std::string& ns, const std::string& gpus) {
  return kueue_it::ClusterQueueObject(name, ns, gpus);
}
json LocalQueue(const std::string& ns, const std::string& cq) { return kueue_it::LocalQueueObject(ns, cq); }

// Kueue's CRDs installed, with the flavor and team-a's LocalQueue in the
// cluster before gangkeeper starts; an admin token for gangkeeper's API.
class KueueSourceTest : public KubeIntegrationTest {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    auto fake = testing::FakeKubeApi::Start(fo);
    ASSERT_THAT(fake, IsOk());
    fake_ = *std::move(fake);
    fake_->ServeKueue();
    ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/resourceflavors"), Flavor()), IsOk());
    ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/namespaces/team-a/localqueues"), LocalQueue("team-a", "team-a-gpu")),
                IsOk());
    testing::WriteKubeconfigFor(*fake_, dir_.path());
    json tokens = json::array({{{"name", "platform"}, {"sha256", testing::Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    extra_flags_ = {"--tokens=" + dir_.File("tokens.json")};
    StartGangkeeper();
  }

  // kubectl: a request to the API server over HTTPS with its token.
  absl::StatusOr<testing::HttpReply> Kubectl(const std::string& method, const std::string& path, const json& body) {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(fake_->port(), o);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body.is_null() ? "" : body.dump(),
                         "Authorization: Bearer fake-token\r\nContent-Type: application/json\r\n");
  }

  // gangkeeper's API with the admin token.
  absl::StatusOr<testing::HttpReply> Api(const std::string& method, const std::string& path,
                                         const std::string& body = "") {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->api_port(), o);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body, "Authorization: Bearer admin-secret\r\n");
  }

  json ClusterQueueStatus(const std::string& name) {
    auto r = Api("GET", "/v1/clusterqueues/" + name + "/status");
    if (!r.ok() || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }

  // Changes team-a-gpu's GPU quota in the cluster (kubectl replace).
  void SetGpus(const std::string& name, const std::string& gpus) {
    auto now = fake_->Get(absl::StrCat(kKueue, "/clusterqueues/", name));
    ASSERT_THAT(now, IsOk());
    json changed = *now;
    changed["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = gpus;
    auto r = Kubectl("PUT", absl::StrCat(kKueue, "/clusterqueues/", name), changed);
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->status, 200) << r->body;
  }
};

TEST_F(KueueSourceTest, TheChoiceIsLoggedAtStart) {
  EXPECT_THAT(server_->Stderr(), HasSubstr("policies: source cluster (the API server serves kueue.x-k8s.io/v1beta2)"));
  // Publishing (on by default with the cluster as the source) takes the
  // version the policy source found: the group is discovered once.
  EXPECT_THAT(server_->Stderr(), HasSubstr("kueue: publishing"));
  int discoveries = 0;
  for (const testing::RecordedCall& c : fake_->Calls()) {
    if (c.method == "GET" && c.path == "/apis/kueue.x-k8s.io") ++discoveries;
  }
  EXPECT_EQ(discoveries, 1);
}

TEST_F(KueueSourceTest, AClusterQueueCreatedWithKubectlIsUsedForAdmissionWithoutARestart) {
  const base::Stopwatch since_create;
  auto created = Kubectl("POST", absl::StrCat(kKueue, "/clusterqueues"), ClusterQueue("team-a-gpu", "team-a", "4"));
  ASSERT_THAT(created, IsOk());
  ASSERT_EQ(created->status, 201) << created->body;
  // Used as soon as the watch brings it (within a second on any machine;
  // the bound only catches a hang).
  ASSERT_TRUE(WaitFor([&] {
    json s = ClusterQueueStatus("team-a-gpu");
    return s.is_object() && s.value("active", false);
  })) << server_->Stderr();
  std::cerr << "ClusterQueue in effect " << absl::FormatDuration(since_create.Elapsed()) << " after its create\n";
  SubmitJob(Job("first", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("first"); })) << server_->Stderr();
  json job = GetJob("first");
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeSelector"]["accelerator"], "nvidia");  // the cluster's flavor
}

TEST_F(KueueSourceTest, AQuotaChangeInTheClusterAdmitsPendingWork) {
  ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/clusterqueues"), ClusterQueue("team-a-gpu", "team-a", "4")),
              IsOk());
  ASSERT_TRUE(WaitFor([&] { return ClusterQueueStatus("team-a-gpu").is_object(); })) << server_->Stderr();
  SubmitJob(Job("big", 2, 2));  // all 4 GPUs
  ASSERT_TRUE(WaitFor([&] { return Released("big"); })) << server_->Stderr();
  Start("big");
  SubmitJob(Job("waiting", 2, 1));
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_FALSE(Released("waiting")) << "no quota left until it is raised";
  SetGpus("team-a-gpu", "6");
  ASSERT_TRUE(WaitFor([&] { return Released("waiting"); })) << server_->Stderr();
  EXPECT_EQ(ClusterQueueStatus("team-a-gpu")["resources"].size(), 3u);
}

TEST_F(KueueSourceTest, AnInvalidClusterQueueIsInactiveWithTheReasonAndTheOthersKeepAdmitting) {
  json broken = ClusterQueue("team-b-gpu", "team-b", "2");
  broken["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "no-such-flavor";
  ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/clusterqueues"), broken), IsOk());
  json unreadable = ClusterQueue("team-c-gpu", "team-c", "lots");
  ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/clusterqueues"), unreadable), IsOk());
  ASSERT_THAT(fake_->Create(absl::StrCat(kKueue, "/clusterqueues"), ClusterQueue("team-a-gpu", "team-a", "4")),
              IsOk());
  ASSERT_TRUE(WaitFor([&] {
    json a = ClusterQueueStatus("team-a-gpu");  // null until the watch has brought it
    return ClusterQueueStatus("team-b-gpu").is_object() && ClusterQueueStatus("team-c-gpu").is_object() &&
           a.is_object() && a.value("active", false);
  })) << server_->Stderr();
  json b = ClusterQueueStatus("team-b-gpu");
  EXPECT_FALSE(b.value("active", true));
  EXPECT_THAT(b.value("inactiveReason", ""), HasSubstr("no-such-flavor")) << b.dump();
  json c = ClusterQueueStatus("team-c-gpu");
  EXPECT_FALSE(c.value("active", true));
  EXPECT_THAT(c.value("inactiveReason", ""), HasSubstr("nominalQuota")) << c.dump();
  // Everything else keeps admitting.
  SubmitJob(Job("unaffected", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("unaffected"); })) << server_->Stderr();
  EXPECT_THAT(server_->Stderr(), HasSubstr("team-c-gpu"));  // logged as refused
}

TEST_F(KueueSourceTest, AnApiPutLandsInTheClusterAndComesBack) {
  json cq = ClusterQueue("team-a-gpu", "team-a", "4");
  cq["apiVersion"] = "kueue.x-k8s.io/v1beta1";  // the API's own version; written at the cluster's
  auto put = Api("PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu", cq.dump());
  ASSERT_THAT(put, IsOk());
  ASSERT_EQ(put->status, 201) << put->body;
  auto in_cluster = fake_->Get(absl::StrCat(kKueue, "/clusterqueues/team-a-gpu"));
  ASSERT_THAT(in_cluster, IsOk());
  EXPECT_EQ((*in_cluster)["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"], "4");
  // The answer came after the watch brought it back: a GET shows it now.
  auto got = Api("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu");
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(got->status, 200) << got->body;
  // A change through the API is a replace in the cluster.
  cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "7";
  auto replaced = Api("PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu", cq.dump());
  ASSERT_THAT(replaced, IsOk());
  ASSERT_EQ(replaced->status, 200) << replaced->body;
  in_cluster = fake_->Get(absl::StrCat(kKueue, "/clusterqueues/team-a-gpu"));
  ASSERT_THAT(in_cluster, IsOk());
  EXPECT_EQ((*in_cluster)["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"], "7");
  // An invalid change is refused before anything is written.
  json invalid = cq;
  invalid["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "no-such-flavor";
  auto refused = Api("PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu", invalid.dump());
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->status, 422) << refused->body;
  // DELETE removes it from the cluster.
  auto deleted = Api("DELETE", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/gpu-queue");
  ASSERT_THAT(deleted, IsOk());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
  EXPECT_FALSE(fake_->Get(absl::StrCat(kKueue, "/namespaces/team-a/localqueues/gpu-queue")).ok());
}

// A cluster without Kueue's CRDs: the policy files, and the log says why.
TEST_F(KubeIntegrationTest, WithoutKueueCrdsThePolicyFilesAreUsedAndTheLogSaysWhy) {
  EXPECT_THAT(server_->Stderr(),
              HasSubstr("policies: source files (the API server does not serve kueue.x-k8s.io (Kueue's CRDs are "
                        "not installed))"));
  SubmitJob(Job("from-files", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("from-files"); })) << server_->Stderr();
}

}  // namespace
}  // namespace gangkeeper::kube_it
