// The composition root in-process: the production wiring (node::Node) on
// port 0 over real TLS, talked to with a real client, against the fake
// Kubernetes API; what a start with a bad setting answers; and a restart
// that recovers what was acknowledged.
#include "gangkeeper/node/node.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/wait.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/kubeconfig.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper::node {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr char kToken[] = "node-test-admin-token";

using ::gangkeeper::testing::WaitFor;

class NodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/quota.yaml"))
        << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n---\n"
        << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n"
        << "  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"
        << "    flavors:\n    - name: gpu\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 4}\n---\n"
        << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: team-a}\n"
        << "spec: {clusterQueue: team-a}\n";
    std::ofstream(dir_.File("tokens.yaml")) << "- name: admin\n  sha256: " << testing::Sha256Hex(kToken)
                                            << "\n  role: admin\n";
  }

  Options BaseOptions() const {
    Options o;
    o.server.webhook_addr = "127.0.0.1:0";
    o.server.api_addr = "127.0.0.1:0";
    o.server.tls_cert_file = dir_.File("certs/tls.crt");
    o.server.tls_key_file = dir_.File("certs/tls.key");
    o.policies_dir = dir_.File("policies");
    o.data_dir = dir_.File("data");
    o.tokens_file = dir_.File("tokens.yaml");
    o.kube = "none";
    return o;
  }

  absl::StatusOr<testing::HttpReply> Call(int port, const std::string& method, const std::string& path,
                                          const std::string& body = "", const std::string& headers = "") {
    testing::TlsClientOptions t;
    t.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(port, t);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body, headers);
  }

  // A kubeconfig for `fake` (token fake-token, the test CA).
  void WriteKubeconfig(const testing::FakeKubeApi& fake) const {
    testing::WriteKubeconfigFor(fake, dir_.path(), dir_.File("certs/ca.crt"));
  }

  testing::TempDir dir_;
};

TEST_F(NodeTest, ServesTheProductionWiringInProcessAndARestartKeepsWhatItAcknowledged) {
  {
    auto n = Node::Create(BaseOptions());
    ASSERT_THAT(n, IsOk());
    ASSERT_THAT((*n)->Start(), IsOk());
    ASSERT_GT((*n)->webhook_port(), 0);
    ASSERT_NE((*n)->webhook_port(), (*n)->api_port());
    auto ready = Call((*n)->api_port(), "GET", "/readyz");
    ASSERT_THAT(ready, IsOk());
    EXPECT_EQ(ready->status, 200) << ready->body;

    const json job = testing::Job("team-a", "train", 2, 1);
    auto reply = Call((*n)->webhook_port(), "POST", "/validate",
                      testing::Review("CREATE", "r1", "team-a", "train", job, nullptr).dump(),
                      "Content-Type: application/json\r\n");
    ASSERT_THAT(reply, IsOk());
    ASSERT_EQ(reply->status, 200) << reply->body;
    EXPECT_TRUE(json::parse(reply->body)["response"]["allowed"].get<bool>()) << reply->body;
    // Admitted whole: both pods' GPUs reserved in team-a.
    ASSERT_TRUE(WaitFor([&] {
      auto w = Call((*n)->api_port(), "GET", "/v1/workloads?namespace=team-a", "",
                    absl::StrCat("Authorization: Bearer ", kToken, "\r\n"));
      return w.ok() && w->status == 200 && w->body.find("\"admitted\"") != std::string::npos;
    }));
    auto unauth = Call((*n)->api_port(), "GET", "/v1/workloads");
    ASSERT_THAT(unauth, IsOk());
    EXPECT_EQ(unauth->status, 401);
    EXPECT_THAT((*n)->Shutdown(absl::Seconds(5)), IsOk());
    // Down: nothing answers any more.
    EXPECT_FALSE(Call((*n)->api_port(), "GET", "/healthz").ok());
  }
  // The same data directory: the admitted gang is recovered as it was.
  auto again = Node::Create(BaseOptions());
  ASSERT_THAT(again, IsOk());
  ASSERT_THAT((*again)->Start(), IsOk());
  auto w = Call((*again)->api_port(), "GET", "/v1/workloads?namespace=team-a", "",
                absl::StrCat("Authorization: Bearer ", kToken, "\r\n"));
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->status, 200);
  EXPECT_THAT(w->body, HasSubstr("\"train\""));
  EXPECT_THAT(w->body, HasSubstr("\"admitted\""));
}

TEST_F(NodeTest, ASecondNodeOnTheSameDataDirectoryIsRefusedAndTheFirstServesOn) {
  auto first = Node::Create(BaseOptions());
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT((*first)->Start(), IsOk());
  auto second = Node::Create(BaseOptions());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("--data-dir"));
  auto health = Call((*first)->api_port(), "GET", "/healthz");
  ASSERT_THAT(health, IsOk());
  EXPECT_EQ(health->status, 200);
}

TEST_F(NodeTest, ABadSettingIsInvalidArgumentNamingItsFlagAndNothingIsLeftRunning) {
  struct Case {
    std::string flag;
    std::function<void(Options&)> set;
  };
  const Case cases[] = {
      {"--store", [](Options& o) { o.store = "s3://bucket"; }},
      {"--recover", [](Options& o) { o.recover = "maybe"; }},
      {"--confirm-grace", [](Options& o) { o.confirm_grace = absl::Milliseconds(1); }},
      {"--audit-denials-per-second", [](Options& o) { o.audit_denials_per_second = 0; }},
      {"--audit-hmac-key", [&](Options& o) { o.audit_hmac_key = dir_.File("no-such-key"); }},
      {"--tokens", [&](Options& o) { o.tokens_file = dir_.File("no-such-tokens.yaml"); }},
      {"--kube", [&](Options& o) { o.kube = dir_.File("no-such-kubeconfig"); }},
      {"--tls-cert", [&](Options& o) { o.server.tls_cert_file = dir_.File("no-such.crt"); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag);
    Options o = BaseOptions();
    c.set(o);
    auto n = Node::Create(o);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << n.status();
    EXPECT_THAT(n.status().message(), HasSubstr(c.flag));
  }
  // Every failed start let go of the data directory: a good one starts.
  auto n = Node::Create(BaseOptions());
  ASSERT_THAT(n, IsOk());
  ASSERT_THAT((*n)->Start(), IsOk());
}

TEST_F(NodeTest, PolicyFilesWithErrorsStopTheStartNamingTheDirectory) {
  std::ofstream(dir_.File("policies/broken.yaml"))
      << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-b}\nspec:\n"
      << "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"
      << "    flavors:\n    - name: gpu\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: 1.5}\n";
  auto n = Node::Create(BaseOptions());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(n.status().message(), HasSubstr(dir_.File("policies")));
  EXPECT_THAT(n.status().message(), HasSubstr("check-policies"));
}

// With a cluster, /readyz waits for the reconciler's first full list; the
// condition is evaluated when asked (no polling thread).
TEST_F(NodeTest, WithAClusterItIsReadyOnceTheFirstListIsDoneAndReleasesThroughTheApi) {
  testing::FakeKubeOptions fo;
  fo.cert_file = dir_.File("certs/tls.crt");
  fo.key_file = dir_.File("certs/tls.key");
  auto fake = testing::FakeKubeApi::Start(fo);
  ASSERT_THAT(fake, IsOk());
  WriteKubeconfig(**fake);
  Options o = BaseOptions();
  o.kube = dir_.File("kubeconfig");
  auto n = Node::Create(o);
  ASSERT_THAT(n, IsOk());
  std::string why;
  ASSERT_THAT((*n)->Start(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return (*n)->Ready(&why); })) << why;
  // A Job the API server stored, then reviewed: confirmed from the watch,
  // admitted, and released with one PATCH that unsuspends it.
  json job = testing::Job("team-a", "train", 2, 1);
  ASSERT_THAT((*fake)->Create("/apis/batch/v1/namespaces/team-a/jobs", job), IsOk());
  auto reply = Call((*n)->webhook_port(), "POST", "/validate",
                    testing::Review("CREATE", "r1", "team-a", "train", job, nullptr).dump(),
                    "Content-Type: application/json\r\n");
  ASSERT_THAT(reply, IsOk());
  ASSERT_EQ(reply->status, 200);
  ASSERT_TRUE(WaitFor([&] {
    auto stored = (*fake)->Get("/apis/batch/v1/namespaces/team-a/jobs/train");
    return stored.ok() && !(*stored)["spec"].value("suspend", true);
  }));
  EXPECT_THAT((*n)->Shutdown(absl::Seconds(5)), IsOk());
}

// DESIGN §4 / issue #23: namespaceSelectors read the cluster's namespace
// labels. A Job in a namespace team-a's ClusterQueue does not select waits
// (and says why in a Pending Event on the Job); labelling the namespace in
// the cluster admits it, without a restart, and says so in Events.
TEST_F(NodeTest, ANamespaceLabelledAfterStartIsSelectedWithoutARestartAndEventsSayWhy) {
  std::ofstream(dir_.File("policies/quota.yaml"), std::ios::trunc)
      << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: gpu}\n---\n"
      << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n"
      << "  namespaceSelector: {matchLabels: {tier: gold}}\n  resourceGroups:\n"
      << "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: gpu\n      resources:\n"
      << "      - {name: nvidia.com/gpu, nominalQuota: 4}\n---\n"
      << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: team-a}\n"
      << "spec: {clusterQueue: team-a}\n";
  testing::FakeKubeOptions fo;
  fo.cert_file = dir_.File("certs/tls.crt");
  fo.key_file = dir_.File("certs/tls.key");
  auto fake = testing::FakeKubeApi::Start(fo);
  ASSERT_THAT(fake, IsOk());
  ASSERT_THAT((*fake)->Create("/api/v1/namespaces", {{"metadata", {{"name", "team-a"}, {"labels", {{"tier", "bronze"}}}}}}),
              IsOk());
  WriteKubeconfig(**fake);
  Options o = BaseOptions();
  o.kube = dir_.File("kubeconfig");
  auto n = Node::Create(o);
  ASSERT_THAT(n, IsOk());
  ASSERT_THAT((*n)->Start(), IsOk());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return (*n)->Ready(&why); })) << why;

  const std::string job_path = "/apis/batch/v1/namespaces/team-a/jobs/train";
  ASSERT_THAT((*fake)->Create("/apis/batch/v1/namespaces/team-a/jobs", testing::Job("team-a", "train", 2, 1)), IsOk());
  auto events_about = [&](const std::string& reason) {
    std::vector<json> out;
    for (const json& e : (*fake)->List("/apis/events.k8s.io/v1/namespaces/team-a/events")) {
      if (e["regarding"]["name"] == "train" && e["reason"] == reason) out.push_back(e);
    }
    return out;
  };
  // Waiting, and the Job's Events say why (the comparison runs every 5 s).
  ASSERT_TRUE(WaitFor([&] { return !events_about("Pending").empty(); }, absl::Seconds(30)));
  EXPECT_THAT(events_about("Pending")[0]["note"].get<std::string>(), HasSubstr("does not select namespace team-a"));
  auto stored = (*fake)->Get(job_path);
  ASSERT_THAT(stored, IsOk());
  EXPECT_TRUE((*stored)["spec"].value("suspend", false));

  // Labelled in the cluster: admitted and released, no restart.
  ASSERT_THAT((*fake)->Replace("/api/v1/namespaces/team-a",
                               {{"metadata", {{"name", "team-a"}, {"labels", {{"tier", "gold"}}}}}}),
              IsOk());
  EXPECT_TRUE(WaitFor([&] {
    auto now = (*fake)->Get(job_path);
    return now.ok() && !(*now)["spec"].value("suspend", true);
  }));
  EXPECT_TRUE(WaitFor([&] { return !events_about("Admitted").empty(); }));
  EXPECT_EQ(events_about("Pending").size(), 1u);
  // What became of the Events is a metric.
  auto metrics = Call((*n)->api_port(), "GET", "/metrics", "", absl::StrCat("Authorization: Bearer ", kToken, "\r\n"));
  ASSERT_THAT(metrics, IsOk());
  EXPECT_THAT(metrics->body, ::testing::ContainsRegex("gangkeeper_events_total\\{outcome=\"created\"\\} [1-9]"));
  EXPECT_THAT((*n)->Shutdown(absl::Seconds(5)), IsOk());
}

}  // namespace
}  // namespace gangkeeper::node
