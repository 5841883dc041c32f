// Integration: the real binary serves /mutate and /validate over TLS with the
// example policies, and every path the webhook configurations in webhook/
// name is served with the behaviour they declare.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;

std::string SeedJobReview(const std::string& uid) {
  nlohmann::json job = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata",
       {{"name", "team-a-two-gpu-training"},
        {"namespace", "team-a"},
        {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}}},
      {"spec",
       {{"suspend", false},
        {"completions", 2},
        {"parallelism", 2},
        {"template",
         {{"spec",
           {{"restartPolicy", "Never"},
            {"containers",
             {{{"name", "worker"},
               {"image", "nvcr.io/nvidia/cuda:12.4.1-runtime-ubuntu22.04"},
               {"resources",
                {{"requests", {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}},
                 {"limits", {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}}}}}}}}}}}}}};
  nlohmann::json review = {
      {"apiVersion", "admission.k8s.io/v1"},
      {"kind", "AdmissionReview"},
      {"request",
       {{"uid", uid},
        {"kind", {{"group", "batch"}, {"version", "v1"}, {"kind", "Job"}}},
        {"resource", {{"group", "batch"}, {"version", "v1"}, {"resource", "jobs"}}},
        {"namespace", "team-a"},
        {"name", "team-a-two-gpu-training"},
        {"operation", "CREATE"},
        {"userInfo", {{"username", "alice"}}},
        {"object", job},
        {"oldObject", nullptr},
        {"dryRun", false}}}};
  return review.dump();
}

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    auto p = testing::ServerProcess::Start(
        {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
         "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
         "--policies=" + std::string(GK_SOURCE_DIR) + "/policies", "--metrics-public"},
        dir_.path());
    ASSERT_THAT(p, IsOk());
    server_ = *std::move(p);
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->webhook_port(), o);
    ASSERT_THAT(c, IsOk());
    conn_ = *std::move(c);
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<testing::TlsConnection> conn_;
};

TEST_F(WebhookServerTest, MutateSuspendsAndValidateQueuesTheSeedJob) {
  auto m = conn_->Request("POST", "/mutate?timeout=3s", SeedJobReview("uid-1"));
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->status, 200);
  nlohmann::json answer = nlohmann::json::parse(m->body);
  EXPECT_EQ(answer["response"]["uid"], "uid-1");
  EXPECT_TRUE(answer["response"]["allowed"].get<bool>());
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
  EXPECT_EQ(patch, R"([{"op":"add","path":"/spec/suspend","value":true}])");

  auto v = conn_->Request("POST", "/validate?timeout=3s", SeedJobReview("uid-2"));
  ASSERT_THAT(v, IsOk());
  nlohmann::json verdict = nlohmann::json::parse(v->body);
  EXPECT_TRUE(verdict["response"]["allowed"].get<bool>());
  EXPECT_THAT(verdict["response"]["warnings"][0].get<std::string>(),
              HasSubstr("queued in LocalQueue gpu-queue -> ClusterQueue team-a-gpu"));

  auto bad = conn_->Request("POST", "/validate", "{not json");
  ASSERT_THAT(bad, IsOk());
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("\"error\""));

  testing::TlsClientOptions o;
  o.ca_file = dir_.File("certs/ca.crt");
  auto api = testing::TlsConnection::Connect(server_->api_port(), o);
  ASSERT_THAT(api, IsOk());
  auto metrics = (*api)->Request("GET", "/metrics");
  ASSERT_THAT(metrics, IsOk());
  EXPECT_THAT(metrics->body,
              HasSubstr(R"(gangkeeper_webhook_reviews_total{webhook="mutate",kind="Job",operation="CREATE",decision="patched"} 1)"));
  EXPECT_THAT(metrics->body,
              HasSubstr(R"(gangkeeper_webhook_reviews_total{webhook="validate",kind="Job",operation="CREATE",decision="allowed"} 1)"));
  EXPECT_THAT(metrics->body,
              HasSubstr(R"(gangkeeper_webhook_reviews_total{webhook="validate",kind="other",operation="other",decision="bad_request"} 1)"));
  EXPECT_THAT(metrics->body,
              HasSubstr(R"(gangkeeper_webhook_review_duration_seconds_count{webhook="mutate",kind="Job",operation="CREATE"} 1)"));
}

TEST_F(WebhookServerTest, EveryConfiguredWebhookPathIsServedAsDeclared) {
  for (const char* file : {"webhook/mutating.yaml", "webhook/validating.yaml"}) {
    SCOPED_TRACE(file);
    YAML::Node config = YAML::LoadFile(std::string(GK_SOURCE_DIR) + "/" + file);
    ASSERT_TRUE(config["webhooks"].IsSequence());
    for (const YAML::Node& hook : config["webhooks"]) {
      const std::string path = hook["clientConfig"]["service"]["path"].as<std::string>();
      EXPECT_EQ(hook["admissionReviewVersions"][0].as<std::string>(), "v1");
      // Fail closed where a review can deny; observe.gangkeeper.io only
      // records deletions and completions and fails open (validating.yaml).
      EXPECT_EQ(hook["failurePolicy"].as<std::string>(),
                hook["name"].as<std::string>() == "observe.gangkeeper.io" ? "Ignore" : "Fail");
      EXPECT_LE(hook["timeoutSeconds"].as<int>(), 5);
      const std::string side = hook["sideEffects"].as<std::string>();
      EXPECT_TRUE(side == "None" || side == "NoneOnDryRun");
      // The validating webhook registers workloads: it must declare it.
      if (path == "/validate") {
        EXPECT_EQ(side, "NoneOnDryRun");
      }
      // Never the control plane's namespaces or our own.
      std::string excluded;
      for (const YAML::Node& e : hook["namespaceSelector"]["matchExpressions"]) {
        for (const YAML::Node& v : e["values"]) excluded += v.as<std::string>() + ",";
      }
      EXPECT_THAT(excluded, HasSubstr("kube-system,"));
      EXPECT_THAT(excluded, HasSubstr("gangkeeper-system,"));
      auto r = conn_->Request("POST", path, SeedJobReview("uid-" + path));
      ASSERT_THAT(r, IsOk());
      EXPECT_EQ(r->status, 200) << path << ": " << r->body;
      EXPECT_EQ(nlohmann::json::parse(r->body)["kind"], "AdmissionReview");
    }
  }
}

}  // namespace
}  // namespace gangkeeper
