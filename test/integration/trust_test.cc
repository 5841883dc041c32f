// Integration: the trust model (DESIGN §2, issue #20) through the real
// binary against FakeKubeApi. With a Kubernetes API the stored objects are
// the truth and an AdmissionReview is a hint: anything that can reach the
// webhook port can send one (managed clusters cannot give the API server a
// client certificate). So forged reviews, sent straight to /validate as an
// attacker would, must change no quota, admit nothing and free nothing;
// workloads only a review spoke of hold nothing and are gone after the
// grace period.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/integration/kube_fixture.h"
#include "test/testing/job_review.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::Sha256Hex;
using namespace ::gangkeeper::kube_it;  // NOLINT: the fixture and its objects
using nlohmann::json;

class ForgedReviewTest : public KubeIntegrationTest {
 protected:
  ForgedReviewTest() {
    std::ofstream(dir_.File("tokens.json"))
        << json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}}}).dump();
    extra_flags_ = {"--tokens=" + dir_.File("tokens.json"), "--confirm-grace=1s"};
  }

  // A review sent straight to /validate: no API server behind it.
  json Forge(json review, const std::string& operation, const std::string& sub_resource = "") {
    static int n = 0;
    review["request"]["uid"] = absl::StrCat("forged-", ++n);
    review["request"]["operation"] = operation;
    review["request"]["userInfo"]["username"] = "system:serviceaccount:kube-system:job-controller";
    if (!sub_resource.empty()) review["request"]["subResource"] = sub_resource;
    auto r = conn_->Request("POST", "/validate", review.dump());
    EXPECT_THAT(r, IsOk());
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false);
  }
  static json JobReview(const json& object) { return Review(object, "batch", "v1", "Job", "jobs", ""); }

  json Api(const std::string& path) {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->api_port(), o);
    EXPECT_THAT(c, IsOk());
    if (!c.ok()) return json();
    auto r = (*c)->Request("GET", path, "", "Authorization: Bearer admin-secret\r\n");
    EXPECT_THAT(r, IsOk());
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  // GPUs a ClusterQueue uses, as its status says.
  std::string GpusUsed(const std::string& cluster_queue) {
    json q = Api(absl::StrCat("/v1/clusterqueues/", cluster_queue, "/status"));
    if (!q.contains("resources")) return "?";
    for (const json& r : q["resources"]) {
      if (r["resource"] == "nvidia.com/gpu") return r["usage"].get<std::string>();
    }
    return "0";
  }

  // The names of the workloads the API lists in `ns`.
  std::vector<std::string> WorkloadNames(const std::string& ns) {
    std::vector<std::string> out;
    json all = Api(absl::StrCat("/v1/workloads?state=all&namespace=", ns));
    for (const json& w : all["items"]) out.push_back(w["name"].get<std::string>());
    return out;
  }

  // Nothing happens for a while: no release of `name` (a bounded wait;
  // what it checks is the absence of an effect).
  bool StaysSuspended(const std::string& name, absl::Duration d = absl::Seconds(2)) {
    return !WaitFor([&] { return Released(name); }, d);
  }
};

// A forged DELETE of an admitted Job and a forged completion free nothing:
// the Job keeps running and keeps its quota, so nothing else is admitted in
// its place (over-admission). Its real end frees it.
TEST_F(ForgedReviewTest, AForgedDeleteOrCompletionFreesNoQuota) {
  json running = SubmitJob(Job("x", 3, 2));  // all 6 GPUs team-a can hold (4 + borrowing 2)
  ASSERT_TRUE(WaitFor([&] { return Released("x"); })) << server_->Stderr();
  Start("x");
  json stored = GetJob("x");
  json del = JobReview(stored);
  del["request"]["oldObject"] = stored;
  del["request"]["object"] = nullptr;
  EXPECT_TRUE(Forge(del, "DELETE")["response"]["allowed"].get<bool>());
  json done = stored;
  done["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
  json status = JobReview(done);
  status["request"]["oldObject"] = stored;
  EXPECT_TRUE(Forge(status, "UPDATE", "status")["response"]["allowed"].get<bool>());

  SubmitJob(Job("y", 1, 2));
  EXPECT_TRUE(StaysSuspended("y")) << "a forged review freed x's quota while x runs";
  EXPECT_EQ(GpusUsed("team-a-gpu"), "6");
  EXPECT_FALSE(Suspended(GetJob("x")));
  Complete("x");  // the API server's word
  ASSERT_TRUE(WaitFor([&] { return Released("y"); })) << server_->Stderr();
}

// Creates of Jobs the API server never stored (sent to /validate alone)
// take no quota from anyone: a real Job behind them is released at once,
// and they are gone after the grace period without an audit trail, since
// nothing was decided on them.
TEST_F(ForgedReviewTest, PhantomCreatesHoldNothingAndAreDroppedAfterTheGrace) {
  for (int i = 0; i < 8; ++i) {
    json phantom = Job(absl::StrCat("phantom-", i), 1, 1);
    phantom["metadata"]["namespace"] = "team-b";
    phantom["spec"]["suspend"] = true;
    json review = JobReview(phantom);
    review["request"]["namespace"] = "team-b";
    EXPECT_TRUE(Forge(review, "CREATE")["response"]["allowed"].get<bool>());
  }
  SubmitTeamBJob(Job("real", 1, 2));  // team-b's whole nominal quota
  ASSERT_TRUE(WaitFor([&] { return Released("real", kTeamBJobs); })) << server_->Stderr();
  EXPECT_EQ(GpusUsed("team-b-gpu"), "2");
  ASSERT_TRUE(WaitFor([&] { return WorkloadNames("team-b") == std::vector<std::string>{"real"}; },
                      absl::Seconds(20)))
      << Api("/v1/workloads?state=all&namespace=team-b").dump();
  json audit = Api("/v1/audit?namespace=team-b&name=phantom-0");
  EXPECT_TRUE(audit["items"].empty()) << audit.dump();
  EXPECT_EQ(GpusUsed("team-b-gpu"), "2");
}

// A forged UPDATE cannot shrink a pending gang to fit: the gang waits for
// its whole size, and is admitted with three pods' quota when it fits.
TEST_F(ForgedReviewTest, AForgedUpdateCannotShrinkAPendingGang) {
  SubmitJob(Job("hog", 2, 2));  // 4 of team-a's 6
  ASSERT_TRUE(WaitFor([&] { return Released("hog"); })) << server_->Stderr();
  Start("hog");
  json gang = SubmitJob(Job("gang", 3, 1));  // 4 + 3 > 6: waits
  EXPECT_TRUE(StaysSuspended("gang", absl::Seconds(1)));
  json shrunk = gang;
  shrunk["spec"]["parallelism"] = 1;
  shrunk["spec"]["completions"] = 1;
  json update = JobReview(shrunk);
  update["request"]["oldObject"] = gang;
  EXPECT_TRUE(Forge(update, "UPDATE")["response"]["allowed"].get<bool>());
  EXPECT_TRUE(StaysSuspended("gang")) << "a forged UPDATE made the gang fit with one pod";
  EXPECT_EQ(GpusUsed("team-a-gpu"), "4");
  Complete("hog");
  ASSERT_TRUE(WaitFor([&] { return Released("gang"); })) << server_->Stderr();
  EXPECT_EQ(GpusUsed("team-a-gpu"), "3");
}

// The user an AdmissionReview names is only what the caller wrote: the
// audit log says so (no --client-ca here, so the API server is not
// authenticated either). gangkeeper's own decisions are not claimed.
TEST_F(ForgedReviewTest, TheAuditMarksTheUserAReviewNamesAsClaimed) {
  SubmitJob(Job("audited", 1, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("audited"); })) << server_->Stderr();
  json pending;
  ASSERT_TRUE(WaitFor([&] {
    pending = Api("/v1/audit?namespace=team-a&name=audited&action=workload.pending");
    return pending.contains("items") && !pending["items"].empty();
  }));
  const json& e = pending["items"][0];
  EXPECT_EQ(e["actor"], "alice");
  EXPECT_EQ(e.value("actorClaimed", false), true) << e.dump();
  EXPECT_EQ(e["object"]["kind"], "Job");
  json admitted = Api("/v1/audit?namespace=team-a&name=audited&action=workload.admitted");
  ASSERT_FALSE(admitted["items"].empty()) << admitted.dump();
  EXPECT_EQ(admitted["items"][0]["actor"], "gangkeeper");
  EXPECT_FALSE(admitted["items"][0].contains("actorClaimed")) << admitted.dump();
}

}  // namespace
}  // namespace gangkeeper
