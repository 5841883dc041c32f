// gangkeeper: the API with Kubernetes identities (--api-auth kubernetes),
// end to end: the real binary over TLS, its TokenReviews and
// SubjectAccessReviews answered by FakeKubeApi, and the CLI sending the
// token of the current kubeconfig context.
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/integration/kube_fixture.h"

namespace gangkeeper::kube_it {
namespace {

using ::testing::HasSubstr;

class KubeAuthIntegrationTest : public KubeIntegrationTest {
 protected:
  KubeAuthIntegrationTest() { extra_flags_ = {"--api-auth=kubernetes"}; }

  void SetUp() override {
    KubeIntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    // dana may read everything cluster-wide; eve nothing.
    fake_->SetTokenUser("dana-token", {"dana", "uid-dana", {"system:authenticated", "viewers"}, {}});
    fake_->SetTokenUser("eve-token", {"eve", "uid-eve", {"system:authenticated"}, {}});
    fake_->SetAccessRule([](const json& spec) {
      bool viewer = false;
      for (const json& g : spec.value("groups", json::array())) viewer = viewer || g == "viewers";
      return viewer && spec.contains("resourceAttributes") && spec["resourceAttributes"].value("verb", "") == "list";
    });
  }

  testing::HttpReply Get(const std::string& path, const std::string& token) {
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    EXPECT_THAT(api, IsOk());
    if (!api.ok()) return {};
    auto r = (*api)->Request("GET", path, "", token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::HttpReply{};
  }
};

TEST_F(KubeAuthIntegrationTest, TokenReviewAndAccessReviewDecide) {
  testing::HttpReply r = Get("/v1/clusterqueues", "dana-token");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("team-a-gpu"));
  r = Get("/v1/clusterqueues", "eve-token");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, ::testing::Not(HasSubstr("team-a-gpu")));
  EXPECT_EQ(Get("/v1/clusterqueues", "no-such-token").status, 401);
  EXPECT_EQ(Get("/v1/clusterqueues", "").status, 401);
  // The reviews went to the API server as gangkeeper's own identity.
  bool token_review = false, access_review = false;
  for (const testing::RecordedCall& c : fake_->Calls()) {
    token_review |= c.path == "/apis/authentication.k8s.io/v1/tokenreviews" && c.authorization == "Bearer fake-token";
    access_review |= c.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" && c.status == 201;
  }
  EXPECT_TRUE(token_review);
  EXPECT_TRUE(access_review);
  EXPECT_THAT(server_->Stderr(), HasSubstr("API authentication: kubernetes"));
}

TEST_F(KubeAuthIntegrationTest, ApiServerFailingIs503) {
  testing::ScriptedFailure f;
  f.path_contains = "tokenreviews";
  f.status = 500;
  f.times = -1;
  fake_->Fail(f);
  testing::HttpReply r = Get("/v1/clusterqueues", "dana-token");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_THAT(r.body, HasSubstr("could not check the bearer token"));
  fake_->ClearFailures();
  EXPECT_EQ(Get("/v1/clusterqueues", "dana-token").status, 200);
}

TEST_F(KubeAuthIntegrationTest, TheCliSendsTheKubeconfigToken) {
  std::ofstream(dir_.File("user-kubeconfig"))
      << "apiVersion: v1\nkind: Config\ncurrent-context: dana\n"
      << "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:" << fake_->port()
      << "\n    certificate-authority: certs/ca.crt\n"
      << "users:\n- name: dana\n  user:\n    token: dana-token\n"
      << "contexts:\n- name: dana\n  context:\n    cluster: c\n    user: dana\n";
  auto r = testing::RunCommand({"/usr/bin/env", "-u", "GANGKEEPER_TOKEN", "KUBECONFIG=" + dir_.File("user-kubeconfig"),
                                testing::GangkeeperBinary(), "get", "clusterqueues",
                                absl::StrCat("--server=https://127.0.0.1:", server_->api_port()),
                                "--ca=" + dir_.File("certs/ca.crt")},
                               absl::Seconds(30), dir_.path());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_THAT(r->out, HasSubstr("team-a-gpu"));
}

}  // namespace
}  // namespace gangkeeper::kube_it
