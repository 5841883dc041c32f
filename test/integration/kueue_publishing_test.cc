// The real binary with Kueue's CRDs served by the fake API server (issue
// #24 items 2-4): the queues' status and a Workload per job are written
// back; with Kueue's own controller running nothing is, and /readyz says
// why without failing.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "test/integration/kube_fixture.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace ::gangkeeper::kube_it;  // NOLINT: the fixture and its objects

constexpr char kClusterQueue[] = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a-gpu";
constexpr char kWorkloads[] = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads";

class KueuePublishingIntegrationTest : public KubeIntegrationTest {
 protected:
  void BeforeGangkeeper() override {
    // The quota stays in the files (the queues in the cluster only receive
    // their status); publishing is asked for explicitly.
    extra_flags_ = {"--policy-source=files", "--publish-kueue-status=true", "--publish-workloads=true"};
    for (const char* r : {"clusterqueues", "localqueues", "workloads", "cohorts"}) {
      fake_->set_served(std::string("kueue.x-k8s.io/v1beta2/") + r, true);
    }
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", {{"metadata", {{"name", "team-a-gpu"}}}})
                    .status(),
                IsOk());
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
                              {{"metadata", {{"name", "gpu-queue"}}}, {"spec", {{"clusterQueue", "team-a-gpu"}}}})
                    .status(),
                IsOk());
    // The repository's policies put both teams in cohort gpu-shared; here
    // it is also a Cohort object, which gets a status.
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/cohorts", {{"metadata", {{"name", "gpu-shared"}}}}).status(),
                IsOk());
    if (kueue_controller_) {
      ASSERT_THAT(fake_->Create("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                                {{"metadata", {{"name", "kueue-validating-webhook-configuration"}}}})
                      .status(),
                  IsOk());
    }
  }
  std::string Readyz() {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    if (!api.ok()) return "";
    auto r = (*api)->Request("GET", "/readyz");
    return r.ok() ? absl::StrCat(r->status, " ", r->body) : "";
  }
  bool kueue_controller_ = false;
};

class WithKueuesControllerTest : public KueuePublishingIntegrationTest {
 protected:
  void SetUp() override {
    kueue_controller_ = true;
    KueuePublishingIntegrationTest::SetUp();
  }
};

TEST_F(KueuePublishingIntegrationTest, AJobsWorkloadAndTheQueuesStatusAreWrittenBack) {
  SubmitJob(Job("trainer", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("trainer"); })) << server_->Stderr();
  ASSERT_TRUE(WaitFor([&] {
    std::vector<json> w = fake_->List(kWorkloads);
    return w.size() == 1 && w[0].value("status", json::object()).contains("admission");
  })) << server_->Stderr();
  const json w = fake_->List(kWorkloads)[0];
  EXPECT_THAT(w["metadata"]["name"].get<std::string>(), ::testing::StartsWith("job-trainer-"));
  EXPECT_EQ(w["spec"]["queueName"], "gpu-queue");
  EXPECT_EQ(w["status"]["admission"]["clusterQueue"], "team-a-gpu");
  ASSERT_TRUE(WaitFor([&] {
    auto cq = fake_->Get(kClusterQueue);
    return cq.ok() && cq->value("status", json::object()).value("admittedWorkloads", 0) == 1;
  })) << server_->Stderr();
  // The Cohort object's status: a root cohort's share is 0.
  ASSERT_TRUE(WaitFor([&] {
    auto co = fake_->Get("/apis/kueue.x-k8s.io/v1beta2/cohorts/gpu-shared");
    return co.ok() && co->value("status", json::object()).contains("fairSharing");
  })) << server_->Stderr();
  EXPECT_EQ((*fake_->Get("/apis/kueue.x-k8s.io/v1beta2/cohorts/gpu-shared"))["status"]["fairSharing"]["weightedShare"],
            0);
  EXPECT_THAT(server_->Stderr(), HasSubstr("kueue: publishing"));
  EXPECT_THAT(Readyz(), ::testing::StartsWith("200"));
  // The job is deleted: so is its Workload.
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/trainer")), IsOk());
  EXPECT_TRUE(WaitFor([&] { return fake_->List(kWorkloads).empty(); }));
}

TEST_F(KueuePublishingIntegrationTest, APodGroupGetsOneWorkloadOwnedByItsPodsAndGoesWithTheLast) {
  for (int i = 0; i < 2; ++i) Submit(GroupPod("pair", i, 2), "", "v1", "Pod", "pods", kPods);
  // One Workload, named after the group, owned by both pods, admitted.
  ASSERT_TRUE(WaitFor([&] {
    auto w = fake_->Get(absl::StrCat(kWorkloads, "/pair"));
    return w.ok() && w->value("status", json::object()).contains("admission") &&
           w->at("metadata").value("ownerReferences", json::array()).size() == 2;
  })) << server_->Stderr();
  const json w = *fake_->Get(absl::StrCat(kWorkloads, "/pair"));
  EXPECT_EQ(fake_->List(kWorkloads).size(), 1u);
  std::vector<std::string> owners;
  for (const json& r : w["metadata"]["ownerReferences"]) {
    EXPECT_EQ(r["kind"], "Pod");
    EXPECT_EQ(r["uid"], "uid-" + r["name"].get<std::string>());
    owners.push_back(r["name"]);
  }
  EXPECT_THAT(owners, ::testing::UnorderedElementsAre("pair-0", "pair-1"));
  EXPECT_EQ(w["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"], "true");
  EXPECT_EQ(w["spec"]["queueName"], "gpu-queue");
  EXPECT_EQ(w["status"]["admission"]["clusterQueue"], "team-a-gpu");
  // The pods go: with the last one, so does the Workload.
  ASSERT_THAT(fake_->Delete(absl::StrCat(kPods, "/pair-0")), IsOk());
  EXPECT_TRUE(fake_->Get(absl::StrCat(kWorkloads, "/pair")).ok()) << "one pod of the group still owns it";
  ASSERT_THAT(fake_->Delete(absl::StrCat(kPods, "/pair-1")), IsOk());
  EXPECT_TRUE(WaitFor([&] { return fake_->List(kWorkloads).empty(); })) << server_->Stderr();
  // And it is not created again.
  EXPECT_FALSE(WaitFor([&] { return !fake_->List(kWorkloads).empty(); }, absl::Seconds(2)));
}

TEST_F(WithKueuesControllerTest, NothingIsPublishedAndReadyzSaysWhy) {
  SubmitJob(Job("trainer", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("trainer"); })) << server_->Stderr();
  const std::string ready = Readyz();
  EXPECT_THAT(ready, ::testing::StartsWith("200"));
  EXPECT_THAT(ready, HasSubstr("kueue-validating-webhook-configuration"));
  EXPECT_THAT(server_->Stderr(), HasSubstr("not publishing status or Workloads"));
  // Given time for a pass or two: nothing was written.
  EXPECT_FALSE(WaitFor([&] { return !fake_->List(kWorkloads).empty(); }, absl::Seconds(3)));
  for (const testing::RecordedCall& c : fake_->Calls()) {
    EXPECT_FALSE(c.method != "GET" && absl::StrContains(c.path, "kueue.x-k8s.io")) << c.method << " " << c.path;
  }
}

}  // namespace
}  // namespace gangkeeper
