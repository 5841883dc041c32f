// Integration: the API listener of the real binary over TLS with real
// tokens: visibility reads per role, after workloads went through the
// webhook (with --kube none, so releases are recorded, not sent).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <fstream>
#include <thread>
#include <sstream>
#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "absl/strings/numbers.h"
#include "test/metrics/prom_text.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/testing/wait.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::Sha256Hex;
using nlohmann::json;
using ::testing::HasSubstr;


json JobReview(const std::string& name, int pods, int gpus) {
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}}},
              {"spec",
               {{"parallelism", pods},
                {"completions", pods},
                {"suspend", true},
                {"template",
                 {{"spec",
                   {{"restartPolicy", "Never"},
                    {"containers",
                     {{{"name", "w"},
                       {"image", "img"},
                       {"resources",
                        {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}}}}}};
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "review-" + name},
            {"kind", {{"group", "batch"}, {"version", "v1"}, {"kind", "Job"}}},
            {"resource", {{"group", "batch"}, {"version", "v1"}, {"resource", "jobs"}}},
            {"namespace", "team-a"},
            {"name", name},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "alice"}}},
            {"object", job},
            {"oldObject", nullptr},
            {"dryRun", false}}}};
}

class ApiIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    json tokens = json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}},
                               {{"name", "team-b-lead"},
                                {"sha256", Sha256Hex("team-b-secret")},
                                {"role", "team-admin"},
                                {"namespaces", {"team-b"}}},
                               {{"name", "audit"}, {"sha256", Sha256Hex("audit-secret")}, {"role", "auditor"}},
                               {{"name", "dashboards"}, {"sha256", Sha256Hex("viewer-secret")}, {"role", "viewer"}},
                               {{"name", "team-a-lead"},
                                {"sha256", Sha256Hex("team-a-secret")},
                                {"role", "team-admin"},
                                {"namespaces", {"team-a"}}},
                               {{"name", "prometheus"}, {"sha256", Sha256Hex("metrics-secret")}, {"role", "metrics"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    StartServer();
    options_.ca_file = dir_.File("certs/ca.crt");
    auto w = testing::TlsConnection::Connect(server_->webhook_port(), options_);
    ASSERT_THAT(w, IsOk());
    // Two gangs: 4 GPUs admitted, then one that waits for quota.
    for (const auto& [name, pods] : std::vector<std::pair<std::string, int>>{{"first", 2}, {"second", 2}}) {
      auto r = (*w)->Request("POST", "/validate", JobReview(name, pods, 2).dump());
      ASSERT_THAT(r, IsOk());
      ASSERT_THAT(r->body, HasSubstr(R"("allowed":true)")) << r->body;
    }
  }

  void StartServer() {
    auto p = Serve("data");
    ASSERT_THAT(p, IsOk());
    server_ = *std::move(p);
  }

  // `gangkeeper serve` on `data_dir` (under the test's directory) with `extra` flags.
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> Serve(const std::string& data_dir,
                                                                const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0",
                                     "--tls-cert=" + dir_.File("certs/tls.crt"),
                                     "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File(data_dir),
                                     "--policies=" + std::string(GK_SOURCE_DIR) + "/policies", "--kube=none",
                                     "--tokens=" + dir_.File("tokens.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::ServerProcess::Start(args, dir_.path());
  }

  // `method` `path` with a body on the API listener.
  std::pair<int, json> Send(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& token) {
    auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
    EXPECT_THAT(c, IsOk());
    if (!c.ok()) return {0, json()};
    auto r = (*c)->Request(method, path, body, absl::StrCat("Authorization: Bearer ", token, "\r\n"));
    EXPECT_THAT(r, IsOk());
    if (!r.ok()) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  // GET `path` on the API listener with `token` ("" = none).
  std::pair<int, json> Get(const std::string& path, const std::string& token) {
    auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
    EXPECT_THAT(c, IsOk());
    if (!c.ok()) return {0, json()};
    auto r = (*c)->Request("GET", path, "", token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"));
    EXPECT_THAT(r, IsOk());
    if (!r.ok()) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  testing::TempDir dir_;
  testing::TlsClientOptions options_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(ApiIntegrationTest, WorkloadsAndQueuesAreVisiblePerRole) {
  auto [status, none] = Get("/v1/workloads", "");
  EXPECT_EQ(status, 401);
  EXPECT_THAT(none["error"]["message"].get<std::string>(), HasSubstr("bearer token"));
  EXPECT_EQ(Get("/v1/workloads", "not-a-token").first, 401);

  auto [ok, all] = Get("/v1/workloads?namespace=team-a", "admin-secret");
  ASSERT_EQ(ok, 200) << all.dump();
  ASSERT_EQ(all["items"].size(), 2u) << all.dump();
  const json& first = all["items"][0];
  EXPECT_EQ(first["name"], "first");
  EXPECT_EQ(first["state"], "admitted");
  EXPECT_EQ(first["assignment"]["podSets"][0]["flavors"]["nvidia.com/gpu"], "nvidia-gpu");
  EXPECT_THAT(first["actuation"].get<std::string>(), HasSubstr("not sent (--kube none)"));
  const json& second = all["items"][1];
  EXPECT_EQ(second["state"], "pending");
  EXPECT_EQ(second["position"]["clusterQueue"], 1);
  EXPECT_EQ(second["reason"]["resource"], "nvidia.com/gpu");
  EXPECT_THAT(second["reason"]["message"].get<std::string>(), HasSubstr("nvidia.com/gpu"));

  auto [one_status, one] = Get("/v1/workloads/team-a/second", "admin-secret");
  EXPECT_EQ(one_status, 200);
  EXPECT_EQ(one["position"]["localQueue"], 1);

  auto [q_status, q] = Get("/v1/clusterqueues/team-a-gpu/status", "admin-secret");
  ASSERT_EQ(q_status, 200) << q.dump();
  EXPECT_EQ(q["pending"], 1);
  EXPECT_EQ(q["admitted"], 1);
  bool gpu = false;
  for (const json& r : q["resources"]) {
    if (r["resource"] == "nvidia.com/gpu") {
      gpu = true;
      EXPECT_EQ(r["nominal"], "4");
      EXPECT_EQ(r["usage"], "4");
    }
  }
  EXPECT_TRUE(gpu);

  // team-b's admin sees nothing of team-a.
  auto [tb_status, tb] = Get("/v1/workloads", "team-b-secret");
  EXPECT_EQ(tb_status, 200);
  EXPECT_TRUE(tb["items"].empty()) << tb.dump();
  EXPECT_EQ(Get("/v1/workloads?namespace=team-a", "team-b-secret").first, 403);
  EXPECT_EQ(Get("/v1/clusterqueues/team-a-gpu/status", "team-b-secret").first, 403);
  EXPECT_EQ(Get("/v1/clusterqueues/team-b-gpu/status", "team-b-secret").first, 200);
  // /metrics says the same, with Kueue's names.
  {
    auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
    ASSERT_THAT(c, IsOk());
    auto m = (*c)->Request("GET", "/metrics", "", "Authorization: Bearer metrics-secret\r\n");
    ASSERT_THAT(m, IsOk());
    EXPECT_THAT(m->body, HasSubstr("kueue_admitted_active_workloads{cluster_queue=\"team-a-gpu\",replica_role=\"standalone\"} 1\n"));
    // "second" waits until the cohort changes: Kueue's inadmissible.
    EXPECT_THAT(m->body, HasSubstr("kueue_pending_workloads{cluster_queue=\"team-a-gpu\",status=\"active\",replica_role=\"standalone\"} 0\n"));
    EXPECT_THAT(m->body,
                HasSubstr("kueue_pending_workloads{cluster_queue=\"team-a-gpu\",status=\"inadmissible\",replica_role=\"standalone\"} 1\n"));
    EXPECT_THAT(m->body, HasSubstr("kueue_cluster_queue_resource_pending{cluster_queue=\"team-a-gpu\","
                                   "resource=\"nvidia.com/gpu\",replica_role=\"standalone\"} 4\n"));
    EXPECT_THAT(m->body, HasSubstr("kueue_cluster_queue_resource_usage{cohort=\"gpu-shared\",cluster_queue=\"team-a-gpu\","
                                   "flavor=\"nvidia-gpu\",resource=\"nvidia.com/gpu\",replica_role=\"standalone\"} 4\n"));
    EXPECT_THAT(m->body, HasSubstr("kueue_cluster_queue_nominal_quota{cohort=\"gpu-shared\",cluster_queue=\"team-a-gpu\","
                                   "flavor=\"nvidia-gpu\",resource=\"nvidia.com/gpu\",replica_role=\"standalone\"} 4\n"));
  }
  // Auditors read the audit log, not workloads.
  auto [a_status, a] = Get("/v1/workloads", "audit-secret");
  EXPECT_EQ(a_status, 403);
  EXPECT_THAT(a["error"]["message"].get<std::string>(), HasSubstr("auditor"));
}

TEST_F(ApiIntegrationTest, DecisionsAndDenialsAreInTheAuditLog) {
  // 8 GPUs can never fit team-a-gpu (nominal 4 + borrowing limit 2): denied.
  auto w = testing::TlsConnection::Connect(server_->webhook_port(), options_);
  ASSERT_THAT(w, IsOk());
  auto r = (*w)->Request("POST", "/validate", JobReview("too-big", 4, 2).dump());
  ASSERT_THAT(r, IsOk());
  ASSERT_THAT(r->body, HasSubstr(R"("allowed":false)")) << r->body;

  auto [denied_status, denied] = Get("/v1/audit?action=review.denied", "audit-secret");
  ASSERT_EQ(denied_status, 200) << denied.dump();
  ASSERT_EQ(denied["items"].size(), 1u) << denied.dump();
  const json& d = denied["items"][0];
  EXPECT_EQ(d["actor"], "alice");
  EXPECT_EQ(d["object"]["name"], "too-big");
  EXPECT_EQ(d["object"]["kind"], "Job");
  EXPECT_THAT(d["details"]["message"].get<std::string>(), HasSubstr("at most 6"));

  // The two registrations and the admission of the first, in order, numbered from 1.
  // The release is recorded a batch after the admission (its answer comes
  // back through the broker's queue): waited for, not raced.
  std::vector<std::string> seen;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto [all_status, all] = Get("/v1/audit?namespace=team-a&limit=1000", "audit-secret");
        if (all_status != 200) return false;
        seen.clear();
        for (const json& e : all["items"]) {
          seen.push_back(e["action"].get<std::string>() + " " + e["object"]["name"].get<std::string>());
        }
        return std::find(seen.begin(), seen.end(), "workload.released first") != seen.end();
      },
      absl::Seconds(20), absl::Milliseconds(20)))
      << ::testing::PrintToString(seen);
  EXPECT_THAT(seen, ::testing::IsSupersetOf({"workload.pending first", "workload.admitted first",
                                             "workload.released first", "workload.pending second",
                                             "review.denied too-big"}));
  auto [first_status, first] = Get("/v1/audit?limit=1", "admin-secret");
  ASSERT_EQ(first_status, 200);
  EXPECT_EQ(first["items"][0]["seq"], 1);
  EXPECT_EQ(first["next"], "1");
  // A workload's answer carries its history; the export is the same events as JSON lines.
  auto [wl_status, first_wl] = Get("/v1/workloads/team-a/first", "admin-secret");
  ASSERT_EQ(wl_status, 200);
  ASSERT_GE(first_wl["history"].size(), 3u) << first_wl.dump();
  EXPECT_EQ(first_wl["history"][0]["action"], "workload.pending");
  EXPECT_EQ(first_wl["history"][0]["actor"], "alice");
  {
    auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
    ASSERT_THAT(c, IsOk());
    auto exported = (*c)->Request("GET", "/v1/audit/export?namespace=team-a", "",
                                  "Authorization: Bearer audit-secret\r\n");
    ASSERT_THAT(exported, IsOk());
    EXPECT_EQ(exported->status, 200);
    size_t lines = 0;
    std::istringstream in(exported->body);
    for (std::string line; std::getline(in, line);) {
      EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded()) << line;
      ++lines;
    }
    auto [all_status2, all2] = Get("/v1/audit?namespace=team-a&limit=1000", "audit-secret");
    EXPECT_EQ(lines, all2["items"].size());
  }
  // The journal and the audit log report themselves.
  auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
  ASSERT_THAT(c, IsOk());
  auto metrics = (*c)->Request("GET", "/metrics", "", "Authorization: Bearer viewer-secret\r\n");
  ASSERT_THAT(metrics, IsOk());
  EXPECT_THAT(metrics->body, HasSubstr("gangkeeper_store_journal_healthy 1"));
  EXPECT_THAT(metrics->body, HasSubstr("gangkeeper_audit_healthy 1"));
  EXPECT_THAT(metrics->body, ::testing::ContainsRegex("gangkeeper_store_journal_appends_total [1-9]"));
  EXPECT_THAT(metrics->body, ::testing::ContainsRegex("gangkeeper_audit_events_total [1-9]"));
  // Bad parameters name the field; a team-admin sees only its namespaces.
  auto [bad_status, bad] = Get("/v1/audit?since=yesterday", "audit-secret");
  EXPECT_EQ(bad_status, 400);
  EXPECT_EQ(bad["error"]["field"], "since");
  EXPECT_EQ(Get("/v1/audit?namespace=team-a", "team-b-secret").first, 403);
  EXPECT_EQ(Get("/v1/audit?namespace=team-b", "team-b-secret").first, 200);
}

TEST_F(ApiIntegrationTest, QuotaChangesAreValidatedDurableAndAudited) {
  const std::string cq_path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu";
  auto [list_status, list] = Get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "team-b-secret");
  ASSERT_EQ(list_status, 200) << list.dump();
  EXPECT_EQ(list["kind"], "ClusterQueueList");
  auto [get_status, cq] = Get(cq_path, "admin-secret");
  ASSERT_EQ(get_status, 200) << cq.dump();
  // Double team-a's GPUs: "second" (waiting for 4 GPUs) is admitted.
  for (json& flavor : cq["spec"]["resourceGroups"][0]["flavors"]) {
    for (json& r : flavor["resources"]) {
      if (r["name"] == "nvidia.com/gpu") r["nominalQuota"] = "8";
    }
  }
  EXPECT_EQ(Send("PUT", cq_path, cq.dump(), "team-b-secret").first, 403);
  auto [put_status, put] = Send("PUT", cq_path, cq.dump(), "admin-secret");
  ASSERT_EQ(put_status, 200) << put.dump();
  const std::string version = put["metadata"]["resourceVersion"].get<std::string>();
  EXPECT_FALSE(version.empty());
  auto [wl_status, second] = Get("/v1/workloads/team-a/second", "admin-secret");
  EXPECT_EQ(second["state"], "admitted") << second.dump();
  // A stale resourceVersion is a conflict; a missing flavor is invalid, with the field.
  json stale = put;
  stale["metadata"]["resourceVersion"] = "0";
  auto [conflict_status, conflict] = Send("PUT", cq_path, stale.dump(), "admin-secret");
  EXPECT_EQ(conflict_status, 409) << conflict.dump();
  json bad = put;
  bad["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "no-such-flavor";
  auto [bad_status, invalid] = Send("PUT", cq_path, bad.dump(), "admin-secret");
  EXPECT_EQ(bad_status, 422) << invalid.dump();
  EXPECT_THAT(invalid["error"]["message"].get<std::string>(), HasSubstr("no-such-flavor"));
  EXPECT_THAT(invalid["error"].value("field", ""), HasSubstr("flavors")) << invalid.dump();
  // A team-admin may add a LocalQueue in its own namespace (YAML body).
  const std::string lq_path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/extra";
  auto [lq_status, lq] = Send("PUT", lq_path,
                              "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                              "metadata: {name: extra, namespace: team-b}\nspec: {clusterQueue: team-b-gpu}\n",
                              "team-b-secret");
  EXPECT_EQ(lq_status, 201) << lq.dump();
  // The change is in the audit log, by the token's name.
  auto [audit_status, changes] = Get("/v1/audit?action=quota.changed&actor=platform", "audit-secret");
  ASSERT_EQ(changes["items"].size(), 1u) << changes.dump();
  EXPECT_THAT(changes["items"][0]["details"].dump(), HasSubstr("PUT ClusterQueue team-a-gpu"));

  // Killed and started again on the same files: the API's changes are still there.
  server_->Signal(SIGKILL);
  ASSERT_THAT(server_->Wait(absl::Seconds(20)), IsOk());
  StartServer();
  auto [after_status, after] = Get(cq_path, "admin-secret");
  ASSERT_EQ(after_status, 200);
  EXPECT_EQ(after["metadata"]["resourceVersion"], version);
  EXPECT_EQ(Get(lq_path, "admin-secret").first, 200);
  EXPECT_EQ(Get("/v1/workloads/team-a/second", "admin-secret").second["state"], "admitted");

  // DELETE, and a bundle applied all or nothing.
  EXPECT_EQ(Send("DELETE", lq_path, "", "team-b-secret").first, 200);
  EXPECT_EQ(Get(lq_path, "admin-secret").first, 404);
  const std::string bundle =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: one, namespace: team-b}\n"
      "spec: {clusterQueue: team-b-gpu}\n---\n"
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: two, namespace: team-b}\n"
      "spec: {clusterQueue: no-such-queue}\n";
  auto [refused_status, refused] = Send("POST", "/v1/apply", bundle, "admin-secret");
  EXPECT_EQ(refused_status, 422) << refused.dump();
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/one", "admin-secret").first, 404);
  std::string fixed = bundle;
  fixed.replace(fixed.find("no-such-queue"), 13, "team-b-gpu");
  auto [applied_status, applied] = Send("POST", "/v1/apply", fixed, "admin-secret");
  ASSERT_EQ(applied_status, 200) << applied.dump();
  EXPECT_EQ(applied["applied"].size(), 2u);
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/two", "admin-secret").first, 200);
}

// Issue #20 over the real binary: bodies with a key written twice are 422
// naming both places (PUT and apply, JSON and YAML); a Namespace in a bundle
// is applied and its labels decide which ClusterQueue admits the namespace.
TEST_F(ApiIntegrationTest, DuplicateKeysAreRefusedAndNamespacesAreApplied) {
  const std::string cq_path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu";
  auto [put_status, put] = Send("PUT", cq_path,
                                "{\"apiVersion\": \"kueue.x-k8s.io/v1beta1\", \"kind\": \"ClusterQueue\",\n"
                                " \"metadata\": {\"name\": \"team-a-gpu\", \"name\": \"team-a-gpu\"}}",
                                "admin-secret");
  EXPECT_EQ(put_status, 422) << put.dump();
  EXPECT_THAT(put["error"].value("message", ""), HasSubstr("first at line 2, column 15, again at line 2, column 37"));
  EXPECT_EQ(put["error"].value("field", ""), "metadata.name");

  const std::string gold =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: gold}\n"
      "spec:\n  namespaceSelector: {matchLabels: {tier: gold}}\n  resourceGroups:\n"
      "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
      "    - {name: nvidia-gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}\n---\n"
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: gold, namespace: team-a}\n"
      "spec: {clusterQueue: gold}\n";
  auto [twice_status, twice] =
      Send("POST", "/v1/apply", gold + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"
                                       "metadata: {name: team-a, labels: {tier: gold}}\n",
           "admin-secret");
  EXPECT_EQ(twice_status, 422) << twice.dump();
  EXPECT_THAT(twice["error"].value("message", ""),
              HasSubstr("request body#3: error: Namespace team-a: metadata: key \"metadata\" is written twice in the "
                        "same map: first at line 18, column 1, again at line 19, column 1"));
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/gold", "admin-secret").first, 404);

  // Without the Namespace, team-a's labels do not select "gold"; with it they do.
  auto w = testing::TlsConnection::Connect(server_->webhook_port(), options_);
  ASSERT_THAT(w, IsOk());
  auto review = [&](const std::string& name) {
    json r = JobReview(name, 1, 1);
    r["request"]["object"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gold";
    auto answer = (*w)->Request("POST", "/validate", r.dump());
    EXPECT_THAT(answer, IsOk());
    return answer.ok() ? answer->body : std::string();
  };
  auto [first_status, first] = Send("POST", "/v1/apply", gold, "admin-secret");
  ASSERT_EQ(first_status, 200) << first.dump();
  EXPECT_THAT(review("not-selected"), HasSubstr(R"("allowed":false)"));
  auto [ns_status, ns] = Send(
      "POST", "/v1/apply", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {tier: gold}}\n",
      "admin-secret");
  ASSERT_EQ(ns_status, 200) << ns.dump();
  ASSERT_EQ(ns["applied"].size(), 1u) << ns.dump();
  EXPECT_EQ(ns["applied"][0]["kind"], "Namespace");
  EXPECT_EQ(ns["applied"][0]["action"], "configured");  // policies/namespaces.yaml defines team-a
  EXPECT_THAT(review("selected"), HasSubstr(R"("allowed":true)"));
}

// Every role against every kind of call, over TLS with real tokens: what
// each may do, what each list holds, and 401 / 403 with the JSON error
// shape otherwise (test/api/api_test.cc has every route; this is a slice
// through the real binary).
TEST_F(ApiIntegrationTest, EachRoleMayDoExactlyWhatItsRoleAllows) {
  const std::string kueue = "/apis/kueue.x-k8s.io/v1beta1";
  const std::string lq_b = kueue + "/namespaces/team-b/localqueues/role-check";
  const std::string lq_a = kueue + "/namespaces/team-a/localqueues/role-check";
  auto lq = [](const std::string& ns, const std::string& cq) {
    return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: role-check, namespace: ",
                        ns, "}\nspec: {clusterQueue: ", cq, "}\n");
  };
  // admin, team-b's admin (its namespace), team-a's admin (another one), viewer, auditor, metrics.
  const std::vector<std::string> tokens = {"admin-secret", "team-b-secret", "team-a-secret",
                                           "viewer-secret", "audit-secret",  "metrics-secret"};
  struct Call {
    std::string method, path, body;
    std::vector<int> want;  // per token above; no token and a bad one: 401
    std::map<std::string, std::vector<std::string>> items;  // token -> what a list holds
  };
  const std::vector<Call> calls = {
      {"GET", "/v1/workloads", "", {200, 200, 200, 200, 403, 403},
       {{"team-b-secret", {}}, {"team-a-secret", {"team-a/first", "team-a/second"}}}},
      {"GET", "/v1/workloads?namespace=team-a", "", {200, 403, 200, 200, 403, 403}, {}},
      {"GET", "/v1/workloads/team-a/first", "", {200, 403, 200, 200, 403, 403}, {}},
      {"GET", "/v1/clusterqueues", "", {200, 200, 200, 200, 403, 403},
       {{"admin-secret", {"team-a-gpu", "team-b-gpu"}}, {"team-b-secret", {"team-b-gpu"}},
        {"team-a-secret", {"team-a-gpu"}}}},
      {"GET", "/v1/clusterqueues/team-a-gpu/status", "", {200, 403, 200, 200, 403, 403}, {}},
      {"GET", "/v1/audit", "", {200, 403, 403, 403, 200, 403}, {}},
      {"GET", "/v1/audit?namespace=team-a", "", {200, 403, 200, 403, 200, 403}, {}},
      {"GET", kueue + "/clusterqueues", "", {200, 200, 200, 200, 403, 403},
       {{"viewer-secret", {"team-a-gpu", "team-b-gpu"}}, {"team-b-secret", {"team-b-gpu"}}}},
      {"GET", kueue + "/clusterqueues/team-a-gpu", "", {200, 403, 200, 200, 403, 403}, {}},
      {"GET", kueue + "/localqueues", "", {200, 200, 200, 200, 403, 403},
       {{"admin-secret", {"team-a/gpu-queue", "team-b/gpu-queue"}}, {"team-b-secret", {"team-b/gpu-queue"}}}},
      {"GET", kueue + "/namespaces/team-a/localqueues", "", {200, 403, 200, 200, 403, 403}, {}},
      {"GET", kueue + "/resourceflavors", "", {200, 200, 200, 200, 403, 403},
       {{"team-b-secret", {"a100-mig-mixed", "nvidia-gpu"}}}},
      {"GET", kueue + "/workloadpriorityclasses", "", {200, 200, 200, 200, 403, 403}, {}},
      {"GET", "/apis/scheduling.k8s.io/v1/priorityclasses", "", {200, 200, 200, 200, 403, 403}, {}},
      {"GET", "/apis/gangkeeper.io/v1alpha1/gpunodepools", "", {200, 200, 200, 200, 403, 403}, {}},
      {"GET", "/metrics", "", {200, 403, 403, 200, 403, 200}, {}},
      {"PUT", lq_b, lq("team-b", "team-b-gpu"), {201, 201, 403, 403, 403, 403}, {}},
      {"DELETE", lq_b, "", {200, 200, 403, 403, 403, 403}, {}},
      {"PUT", lq_a, lq("team-a", "team-a-gpu"), {201, 403, 201, 403, 403, 403}, {}},
      {"DELETE", lq_a, "", {200, 403, 200, 403, 403, 403}, {}},
      {"POST", "/v1/apply", lq("team-b", "team-b-gpu"), {200, 200, 403, 403, 403, 403}, {}},
      {"DELETE", lq_b, "", {200, 200, 403, 403, 403, 403}, {}},
      // A write is refused for the role before the object is looked up.
      {"DELETE", kueue + "/resourceflavors/no-such", "", {404, 403, 403, 403, 403, 403}, {}},
  };
  // The names in a list: quota objects by metadata, the rest by their own fields.
  auto names = [](const json& body) {
    std::vector<std::string> out;
    for (const json& i : body["items"]) {
      const json& m = i.contains("metadata") ? i["metadata"] : i;
      const std::string ns = m.value("namespace", "");
      out.push_back(ns.empty() ? m.value("name", "") : absl::StrCat(ns, "/", m.value("name", "")));
    }
    return out;
  };
  // Token by token, so that each write (put back by the next call) meets the same state.
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (const Call& c : calls) {
      auto [status, body] = Send(c.method, c.path, c.body, tokens[t]);
      EXPECT_EQ(status, c.want[t]) << c.method << " " << c.path << " as " << tokens[t] << ": " << body.dump();
      if (status == 401 || status == 403) {
        EXPECT_TRUE(body["error"].contains("code") && body["error"].contains("message")) << body.dump();
      }
      auto items = c.items.find(tokens[t]);
      if (status == 200 && items != c.items.end()) {
        EXPECT_THAT(names(body), ::testing::UnorderedElementsAreArray(items->second)) << c.path << " as " << tokens[t];
      }
    }
  }
  // Without a token, or with a bad one: 401 (few enough calls to stay below the limiter).
  int failures = 0;
  for (const Call& c : calls) {
    if (c.method != "GET") continue;
    const std::string token = failures % 2 == 0 ? "" : "not-a-token";
    auto [status, body] = Get(c.path, token);
    EXPECT_EQ(status, 401) << c.path << " with token '" << token << "': " << body.dump();
    ++failures;
  }
  ASSERT_LT(failures, 20);
}

// /metrics needs a token of role admin, viewer or metrics, unless the
// server runs with --metrics-public.
TEST_F(ApiIntegrationTest, MetricsNeedATokenUnlessPublic) {
  auto scrape = [&](int port, const std::string& token) {
    auto c = testing::TlsConnection::Connect(port, options_);
    EXPECT_THAT(c, IsOk());
    if (!c.ok()) return testing::HttpReply{};
    const std::string header = token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n");
    auto r = (*c)->Request("GET", "/metrics", "", header);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::HttpReply{};
  };
  testing::HttpReply none = scrape(server_->api_port(), "");
  EXPECT_EQ(none.status, 401);
  EXPECT_THAT(none.body, HasSubstr("bearer token"));
  EXPECT_EQ(scrape(server_->api_port(), "team-b-secret").status, 403);
  EXPECT_EQ(scrape(server_->api_port(), "audit-secret").status, 403);
  for (const char* token : {"viewer-secret", "metrics-secret", "admin-secret"}) {
    testing::HttpReply ok = scrape(server_->api_port(), token);
    EXPECT_EQ(ok.status, 200) << token;
    EXPECT_THAT(ok.body, HasSubstr("kueue_pending_workloads")) << token;
  }
  // The metrics token reads nothing else.
  EXPECT_EQ(Get("/v1/workloads", "metrics-secret").first, 403);
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues", "metrics-secret").first, 403);
  // --metrics-public: open to anyone (the rest of the API still is not).
  auto open = Serve("public-data", {"--metrics-public"});
  ASSERT_THAT(open, IsOk());
  testing::HttpReply anyone = scrape((*open)->api_port(), "");
  EXPECT_EQ(anyone.status, 200);
  EXPECT_THAT(anyone.body, HasSubstr("kueue_pending_workloads"));
  auto c = testing::TlsConnection::Connect((*open)->api_port(), options_);
  ASSERT_THAT(c, IsOk());
  auto api = (*c)->Request("GET", "/v1/workloads");
  ASSERT_THAT(api, IsOk());
  EXPECT_EQ(api->status, 401);
}

// Behind an ingress every caller shares one address: a flood of bad tokens
// from it gets 429, and valid tokens from it are still served.
TEST_F(ApiIntegrationTest, FailuresFromOneAddressNeverLockOutAValidToken) {
  for (int i = 0; i < 25; ++i) {
    const int status = Get("/v1/workloads", absl::StrCat("guess-", i)).first;
    ASSERT_EQ(status, i < 20 ? 401 : 429) << i;
  }
  auto [ok_status, ok] = Get("/v1/workloads?namespace=team-a", "admin-secret");
  EXPECT_EQ(ok_status, 200) << ok.dump();
  EXPECT_EQ(Get("/v1/workloads", "team-b-secret").first, 200);
  auto [limited_status, limited] = Get("/v1/workloads", "guess-again");
  EXPECT_EQ(limited_status, 429);
  EXPECT_THAT(limited["error"]["message"].get<std::string>(), HasSubstr("too many failed authentications"));
  EXPECT_EQ(Get("/v1/audit", "audit-secret").first, 200);
}

// POST /v1/apply checks metadata.resourceVersion like PUT; bad input names
// its field; the server goes on serving.
TEST_F(ApiIntegrationTest, StaleApplyIsAConflictAndBadInputNamesItsField) {
  const std::string path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/gpu-queue";
  json lq = Get(path, "admin-secret").second;
  auto [put_status, put] = Send("PUT", path, lq.dump(), "admin-secret");
  ASSERT_EQ(put_status, 200) << put.dump();
  json stale = put;
  stale["metadata"]["resourceVersion"] = "0";
  const std::string bundle = absl::StrCat(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: new-one, namespace: team-b}\n"
      "spec: {clusterQueue: team-b-gpu}\n---\n",
      stale.dump(), "\n");
  auto [conflict_status, conflict] = Send("POST", "/v1/apply", bundle, "admin-secret");
  EXPECT_EQ(conflict_status, 409) << conflict.dump();
  EXPECT_EQ(conflict["error"]["field"], "metadata.resourceVersion");
  EXPECT_THAT(conflict["error"]["message"].get<std::string>(), HasSubstr("team-b/gpu-queue"));
  EXPECT_THAT(conflict["error"]["message"].get<std::string>(),
              HasSubstr(put["metadata"]["resourceVersion"].get<std::string>()));
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/new-one", "admin-secret").first, 404);
  EXPECT_EQ(Get(path, "admin-secret").second, put);
  struct Bad {
    std::string method, path, body, field;
  };
  for (const Bad& b : std::vector<Bad>{{"POST", "/v1/apply", "{not: [yaml", "body"},
                                       {"POST", "/v1/apply", "", "items"},
                                       {"PUT", path + "-other", lq.dump(), "metadata.name"},
                                       {"GET", "/v1/workloads?state=running", "", "state"},
                                       {"GET", "/v1/audit?limit=5000", "", "limit"}}) {
    auto [status, error] = Send(b.method, b.path, b.body, "admin-secret");
    EXPECT_GE(status, 400) << b.method << " " << b.path << ": " << error.dump();
    EXPECT_EQ(error["error"].value("field", ""), b.field) << b.method << " " << b.path << ": " << error.dump();
  }
  EXPECT_EQ(Get("/readyz", "").first, 200);
  EXPECT_EQ(Get("/v1/workloads/team-a/first", "admin-secret").first, 200);
}

// /metrics is valid Prometheus text (a strict parser) and says what the
// API's status says.
TEST_F(ApiIntegrationTest, MetricsParseStrictlyAndAgreeWithTheStatus) {
  auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
  ASSERT_THAT(c, IsOk());
  // The releases are recorded a batch after the admissions.
  json status;
  for (int i = 0; i < 100; ++i) {
    status = Get("/v1/workloads/team-a/first", "admin-secret").second;
    if (status.contains("actuation")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto m = (*c)->Request("GET", "/metrics", "", "Authorization: Bearer metrics-secret\r\n");
  ASSERT_THAT(m, IsOk());
  absl::StatusOr<std::vector<testing::PromFamily>> fams = testing::ParsePromText(m->body);
  ASSERT_THAT(fams, IsOk()) << m->body;
  // Kueue's families carry replica_role: "standalone" without replicas.
  auto value = [&](const std::string& name, std::map<std::string, std::string> labels) {
    if (absl::StartsWith(name, "kueue_") && name != "kueue_build_info") labels["replica_role"] = "standalone";
    absl::StatusOr<double> v = testing::PromValue(*fams, name, labels);
    EXPECT_THAT(v, IsOk()) << name;
    return v.ok() ? *v : -1;
  };
  for (const char* cq : {"team-a-gpu", "team-b-gpu"}) {
    const json st = Get(absl::StrCat("/v1/clusterqueues/", cq, "/status"), "admin-secret").second;
    EXPECT_EQ(value("kueue_pending_workloads", {{"cluster_queue", cq}, {"status", "active"}}) +
                  value("kueue_pending_workloads", {{"cluster_queue", cq}, {"status", "inadmissible"}}),
              st["pending"]);
    EXPECT_EQ(value("kueue_admitted_active_workloads", {{"cluster_queue", cq}}), st["admitted"]);
    for (const json& r : st["resources"]) {
      const std::map<std::string, std::string> labels = {{"cohort", st["cohort"].get<std::string>()},
                                                         {"cluster_queue", cq},
                                                         {"flavor", r["flavor"].get<std::string>()},
                                                         {"resource", r["resource"].get<std::string>()}};
      double nominal = 0, usage = 0;
      ASSERT_TRUE(absl::SimpleAtod(r["nominal"].get<std::string>(), &nominal) || r["resource"] == "memory");
      ASSERT_TRUE(absl::SimpleAtod(r["usage"].get<std::string>(), &usage) || r["resource"] == "memory");
      if (r["resource"] == "memory") continue;  // "256Gi": quantities, not plain numbers
      EXPECT_EQ(value("kueue_cluster_queue_nominal_quota", labels), nominal) << r.dump();
      EXPECT_EQ(value("kueue_cluster_queue_resource_usage", labels), usage) << r.dump();
    }
  }
  // The two reviews, the one admission and its (recorded) release.
  EXPECT_EQ(value("gangkeeper_webhook_reviews_total",
                  {{"webhook", "validate"}, {"kind", "Job"}, {"operation", "CREATE"}, {"decision", "allowed"}}),
            2);
  EXPECT_EQ(value("gangkeeper_webhook_review_duration_seconds_count",
                  {{"webhook", "validate"}, {"kind", "Job"}, {"operation", "CREATE"}}),
            2);
  EXPECT_EQ(value("kueue_admission_wait_time_seconds_count", {{"cluster_queue", "team-a-gpu"}, {"priority_class", ""}}),
            1);
  EXPECT_EQ(value("gangkeeper_release_actuations_total", {{"action", "release"}, {"kind", "Job"}}), 1);
  EXPECT_EQ(value("gangkeeper_audit_healthy", {}), 1);
  // The pass that admitted "first" is an admission attempt that succeeded.
  EXPECT_GE(value("kueue_admission_attempts_total", {{"result", "success"}}), 1);
  EXPECT_GE(value("kueue_admission_attempt_duration_seconds_count", {{"result", "success"}}), 1);
  // The binary says what it is.
  bool build_info = false;
  for (const testing::PromFamily& f : *fams) {
    if (f.name != "kueue_build_info" || f.samples.size() != 1) continue;
    const auto& labels = f.samples[0].labels;
    build_info = f.samples[0].value == 1 && labels.count("git_version") == 1 && !labels.at("git_version").empty() &&
                 labels.count("git_commit") == 1 && !labels.at("git_commit").empty();
  }
  EXPECT_TRUE(build_info) << m->body;
}

// The issue's end-to-end story: the platform admin moves GPUs from team-b
// to team-a; team-a's waiting gangs are admitted; what people see (get,
// describe, the audit log) matches the broker, before and after a restart.
TEST_F(ApiIntegrationTest, AdminMovesQuotaAndEveryoneSeesTheSameStory) {
  auto w = testing::TlsConnection::Connect(server_->webhook_port(), options_);
  ASSERT_THAT(w, IsOk());
  auto third = (*w)->Request("POST", "/validate", JobReview("third", 2, 2).dump());
  ASSERT_THAT(third, IsOk());
  ASSERT_THAT(third->body, HasSubstr(R"("allowed":true)"));
  const std::string server = absl::StrCat("--server=https://127.0.0.1:", server_->api_port());
  const std::string ca = "--ca=" + dir_.File("certs/ca.crt");
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::GangkeeperBinary());
    args.insert(args.end(), {server, ca, "--token=admin-secret"});
    auto r = testing::RunCommand(args, absl::Seconds(30));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::CommandResult{};
  };

  // Before: "second" and "third" wait, first and second in line; the
  // command line says what the API says.
  auto [status, api_list] = Get("/v1/workloads?namespace=team-a&state=pending", "admin-secret");
  ASSERT_EQ(status, 200);
  auto listed = cli({"get", "workloads", "-n", "team-a", "--state", "pending", "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  json cli_list = json::parse(listed.out, nullptr, false);
  ASSERT_EQ(cli_list["items"].size(), 2u) << listed.out;
  std::map<std::string, json> position;
  for (const json& x : cli_list["items"]) position[x["name"].get<std::string>()] = x["position"];
  EXPECT_EQ(position["second"]["clusterQueue"], 1);
  EXPECT_EQ(position["third"]["clusterQueue"], 2);
  for (const json& x : api_list["items"]) EXPECT_EQ(x["position"], position[x["name"].get<std::string>()]);
  auto described = cli({"describe", "workload", "team-a/second"});
  ASSERT_EQ(described.exit_code, 0) << described.err;
  const json second = Get("/v1/workloads/team-a/second", "admin-secret").second;
  EXPECT_THAT(described.out, HasSubstr(second["reason"]["message"].get<std::string>()));
  EXPECT_THAT(described.out, HasSubstr("team-a-gpu"));
  auto wide = cli({"get", "workloads", "-n", "team-a", "-o", "wide"});
  EXPECT_THAT(wide.out, HasSubstr("LOCALQUEUE"));
  EXPECT_THAT(wide.out, HasSubstr("gpu-queue"));
  const uint64_t before = Get("/v1/audit?limit=1000", "audit-secret").second["items"].back()["seq"].get<uint64_t>();

  // The platform admin lowers team-b's GPUs to 0 and raises team-a's to 12.
  auto set_gpus = [&](const std::string& cq, const std::string& gpus) {
    const std::string path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/" + cq;
    json obj = Get(path, "admin-secret").second;
    for (json& flavor : obj["spec"]["resourceGroups"]) {
      for (json& f : flavor["flavors"]) {
        for (json& r : f["resources"]) {
          if (r["name"] == "nvidia.com/gpu") r["nominalQuota"] = gpus;
        }
      }
    }
    auto [put_status, put] = Send("PUT", path, obj.dump(), "admin-secret");
    EXPECT_EQ(put_status, 200) << put.dump();
  };
  set_gpus("team-b-gpu", "0");
  set_gpus("team-a-gpu", "12");
  for (int i = 0; i < 100; ++i) {
    if (Get("/v1/workloads?namespace=team-a&state=pending", "admin-secret").second["items"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(Get("/v1/workloads?namespace=team-a&state=pending", "admin-secret").second["items"].empty());
  for (const char* name : {"second", "third"}) {
    EXPECT_EQ(Get(absl::StrCat("/v1/workloads/team-a/", name), "admin-secret").second["state"], "admitted");
  }
  auto queues = cli({"get", "clusterqueues"});
  EXPECT_THAT(queues.out, HasSubstr("nvidia.com/gpu@"));
  EXPECT_THAT(queues.out, HasSubstr("12/12"));

  // The audit log tells it in order, without gaps: the two changes by the
  // admin, then each gang admitted and released by gangkeeper, with reasons.
  // (Releases are recorded, not sent, with --kube none; they come a batch later.)
  json story;
  for (int i = 0; i < 100; ++i) {
    story = Get(absl::StrCat("/v1/audit?limit=1000&cursor=", before), "audit-secret").second;
    int released = 0;
    for (const json& e : story["items"]) released += e["action"] == "workload.released";
    if (released == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<std::string> lines;
  uint64_t expect_seq = before + 1;
  for (const json& e : story["items"]) {
    EXPECT_EQ(e["seq"].get<uint64_t>(), expect_seq++) << "a gap or a repeat in the audit log";
    EXPECT_FALSE(e["actor"].get<std::string>().empty());
    EXPECT_FALSE(e["reason"].get<std::string>().empty()) << e.dump();
    lines.push_back(absl::StrCat(e["action"].get<std::string>(), " ", e["object"]["name"].get<std::string>(), " by ",
                                 e["actor"].get<std::string>()));
  }
  ASSERT_GE(lines.size(), 6u) << story.dump(2);
  EXPECT_EQ(lines[0], "quota.changed  by platform");
  EXPECT_EQ(lines[1], "quota.changed  by platform");
  EXPECT_THAT(story["items"][0]["details"].dump(), HasSubstr("PUT ClusterQueue team-b-gpu"));
  EXPECT_THAT(story["items"][1]["details"].dump(), HasSubstr("PUT ClusterQueue team-a-gpu"));
  // Each gang: admitted before released, "second" (first in line) before "third".
  auto at = [&](const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) - lines.begin();
  };
  for (const char* name : {"second", "third"}) {
    const auto admitted = at(absl::StrCat("workload.admitted ", name, " by gangkeeper"));
    const auto released = at(absl::StrCat("workload.released ", name, " by gangkeeper"));
    EXPECT_LT(admitted, static_cast<std::ptrdiff_t>(lines.size())) << name;
    EXPECT_LT(released, static_cast<std::ptrdiff_t>(lines.size())) << name;
    EXPECT_LT(admitted, released) << name;
  }
  EXPECT_LT(at("workload.admitted second by gangkeeper"), at("workload.admitted third by gangkeeper"));

  // The same from the command line, an hour back; a workload's answer has
  // its release time from the history.
  auto recent = cli({"audit", "--since", "1h", "--action", "quota.changed", "-o", "json"});
  ASSERT_EQ(recent.exit_code, 0) << recent.err;
  EXPECT_THAT(recent.out, HasSubstr("PUT ClusterQueue team-b-gpu"));
  EXPECT_THAT(recent.out, HasSubstr("PUT ClusterQueue team-a-gpu"));
  auto future = cli({"audit", "--until", "2h", "--action", "quota.changed", "-o", "json"});
  EXPECT_THAT(future.out, ::testing::Not(HasSubstr("PUT ClusterQueue"))) << "--until 2h means two hours ago";
  EXPECT_TRUE(Get("/v1/workloads/team-a/second", "admin-secret").second.contains("released"));

  // After a restart: the same story from the audit log, and the quota
  // change still in force.
  server_->Signal(SIGTERM);
  ASSERT_THAT(server_->Wait(absl::Seconds(30)), IsOk());
  StartServer();
  json again = Get(absl::StrCat("/v1/audit?limit=1000&cursor=", before), "audit-secret").second;
  ASSERT_GE(again["items"].size(), story["items"].size());
  for (size_t i = 0; i < story["items"].size(); ++i) EXPECT_EQ(again["items"][i], story["items"][i]) << i;
  json cq = Get("/v1/clusterqueues/team-a-gpu/status", "admin-secret").second;
  bool twelve = false;
  for (const json& r : cq["resources"]) twelve = twelve || (r["resource"] == "nvidia.com/gpu" && r["nominal"] == "12");
  EXPECT_TRUE(twelve) << cq.dump();
  for (const char* name : {"first", "second", "third"}) {
    EXPECT_EQ(Get(absl::StrCat("/v1/workloads/team-a/", name), "admin-secret").second["state"], "admitted") << name;
  }
}

// GPUNodePool, gangkeeper's own kind, is a quota object like Kueue's.
TEST_F(ApiIntegrationTest, GpuNodePoolsAreChangedLikeEveryOtherQuotaObject) {
  const std::string list_path = "/apis/gangkeeper.io/v1alpha1/gpunodepools";
  const std::string path = list_path + "/gpu-a100";
  auto [list_status, list] = Get(list_path, "viewer-secret");
  ASSERT_EQ(list_status, 200) << list.dump();
  EXPECT_EQ(list["kind"], "GPUNodePoolList");
  EXPECT_EQ(list["items"].size(), 2u);
  json pool = Get(path, "admin-secret").second;
  ASSERT_EQ(pool["spec"]["nodes"], 2) << pool.dump();
  pool["spec"]["nodes"] = 3;
  EXPECT_EQ(Send("PUT", path, pool.dump(), "team-b-secret").first, 403);
  auto [put_status, put] = Send("PUT", path, pool.dump(), "admin-secret");
  ASSERT_EQ(put_status, 200) << put.dump();
  EXPECT_EQ(put["spec"]["nodes"], 3);
  const std::string version = put["metadata"].value("resourceVersion", "");
  EXPECT_FALSE(version.empty());
  json bad = put;
  bad["spec"]["gpu"] = "A100";
  auto [bad_status, invalid] = Send("PUT", path, bad.dump(), "admin-secret");
  EXPECT_EQ(bad_status, 422) << invalid.dump();
  EXPECT_THAT(invalid.dump(), HasSubstr("spec.gpu"));
  json stale = put;
  stale["metadata"]["resourceVersion"] = version + "0";
  EXPECT_EQ(Send("PUT", path, stale.dump(), "admin-secret").first, 409);
  // Kept over a restart, then deleted.
  server_->Signal(SIGKILL);
  ASSERT_THAT(server_->Wait(absl::Seconds(20)), IsOk());
  StartServer();
  EXPECT_EQ(Get(path, "admin-secret").second["spec"]["nodes"], 3);
  EXPECT_EQ(Send("DELETE", path, "", "admin-secret").first, 200);
  EXPECT_EQ(Get(path, "admin-secret").first, 404);
  auto [changes_status, changes] = Get("/v1/audit?action=quota.changed", "audit-secret");
  ASSERT_EQ(changes_status, 200);
  EXPECT_THAT(changes.dump(), HasSubstr("PUT GPUNodePool gpu-a100"));
  EXPECT_THAT(changes.dump(), HasSubstr("DELETE GPUNodePool gpu-a100"));
}

TEST_F(ApiIntegrationTest, GetAndDescribeFromTheCommandLine) {
  const std::string server = absl::StrCat("--server=https://127.0.0.1:", server_->api_port());
  const std::string ca = "--ca=" + dir_.File("certs/ca.crt");
  auto get = testing::RunCommand({testing::GangkeeperBinary(), "get", "workloads", "-n", "team-a", server, ca,
                                  "--token=admin-secret"},
                                 absl::Seconds(30));
  ASSERT_THAT(get, IsOk());
  EXPECT_EQ(get->exit_code, 0) << get->err;
  EXPECT_THAT(get->out, HasSubstr("NAMESPACE"));
  EXPECT_THAT(get->out, ::testing::ContainsRegex("team-a +job.batch/second +team-a-gpu +pending +1 "));
  EXPECT_THAT(get->out, ::testing::ContainsRegex("team-a +job.batch/first +team-a-gpu +admitted"));

  auto json_out = testing::RunCommand({testing::GangkeeperBinary(), "get", "clusterqueues", "-o", "json", server, ca,
                                       "--token=admin-secret"},
                                      absl::Seconds(30));
  ASSERT_THAT(json_out, IsOk());
  ASSERT_EQ(json_out->exit_code, 0) << json_out->err;
  json queues = json::parse(json_out->out);
  EXPECT_EQ(queues["items"].size(), 2u);

  auto describe = testing::RunCommand({testing::GangkeeperBinary(), "describe", "workload", "team-a/second", server,
                                       ca, "--token=admin-secret"},
                                      absl::Seconds(30));
  ASSERT_THAT(describe, IsOk());
  EXPECT_EQ(describe->exit_code, 0) << describe->err;
  EXPECT_THAT(describe->out, HasSubstr("Position:      1 in ClusterQueue, 1 in LocalQueue"));
  EXPECT_THAT(describe->out, HasSubstr("Waiting:"));

  // Refusals are exit 1 with the API's message; usage errors exit 2.
  auto refused = testing::RunCommand({testing::GangkeeperBinary(), "get", "workloads", server, ca,
                                      "--token=wrong"},
                                     absl::Seconds(30));
  ASSERT_THAT(refused, IsOk());
  EXPECT_EQ(refused->exit_code, 1);
  EXPECT_THAT(refused->err, HasSubstr("401"));
  auto usage = testing::RunCommand({testing::GangkeeperBinary(), "get", "pods", server, ca}, absl::Seconds(30));
  ASSERT_THAT(usage, IsOk());
  EXPECT_EQ(usage->exit_code, 2);
}

TEST_F(ApiIntegrationTest, EveryQuotaKindIsListedFromTheCommandLine) {
  const std::string server = absl::StrCat("--server=https://127.0.0.1:", server_->api_port());
  const std::string ca = "--ca=" + dir_.File("certs/ca.crt");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::GangkeeperBinary());
    args.insert(args.end(), {server, ca, "--token=viewer-secret"});
    auto r = testing::RunCommand(args, absl::Seconds(30));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::CommandResult{};
  };
  struct Want {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Want> wants = {
      {{"get", "localqueues"}, {"NAMESPACE", "CLUSTERQUEUE", "team-a", "gpu-queue", "team-a-gpu"}},
      {{"get", "lq", "-n", "team-b", "-o", "wide"}, {"PENDING", "ADMITTED", "team-b-gpu"}},
      {{"get", "flavors"}, {"NODELABELS", "nvidia-gpu"}},
      {{"get", "flavors", "-o", "wide"}, {"TOLERATIONS"}},
      {{"get", "cohorts", "-o", "wide"}, {"No cohorts found."}},  // policies/ has none
      {{"get", "gpunodepools"}, {"gpu-a100", "A100-80GB", "migmixed", "mixed [MIG3g,MIG2g,MIG1g,MIG1g]"}},
      {{"get", "priorityclasses", "-o", "wide"}, {"inference-critical", "PREEMPTIONPOLICY"}},
      {{"get", "workloadpriorityclasses"}, {"training-batch", "VALUE"}},
      {{"get", "clusterqueues", "-o", "wide"}, {"BORROWED", "SHARE", "team-a-gpu"}},
      {{"get", "workloads", "-n", "team-a", "-o", "yaml"}, {"items:\n  - ", "    name: first\n", "    state: admitted\n"}},
      {{"describe", "workload", "team-a/second", "-o", "yaml"}, {"name: second\n", "reason:\n"}},
  };
  for (const Want& w : wants) {
    auto r = run(w.args);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(w.args, " ") << ": " << r.err;
    for (const std::string& text : w.says) EXPECT_THAT(r.out, HasSubstr(text)) << absl::StrJoin(w.args, " ");
  }
  auto unknown = run({"get", "nodes"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("gpunodepools"));
  auto bad_output = run({"get", "flavors", "-o", "xml"});
  EXPECT_EQ(bad_output.exit_code, 2);
}

TEST_F(ApiIntegrationTest, ApplyFromTheCommandLine) {
  const std::string server = absl::StrCat("--server=https://127.0.0.1:", server_->api_port());
  const std::string ca = "--ca=" + dir_.File("certs/ca.crt");
  std::filesystem::create_directories(dir_.File("bundle"));
  std::ofstream(dir_.File("bundle/a.yaml")) << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                                               "metadata: {name: research, namespace: team-b}\n"
                                               "spec: {clusterQueue: team-b-gpu}\n";
  std::ofstream(dir_.File("bundle/b.json"))
      << R"({"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"WorkloadPriorityClass","metadata":{"name":"urgent"},"value":5000})";
  auto applied = testing::RunCommand(
      {testing::GangkeeperBinary(), "apply", "-f", dir_.File("bundle"), server, ca, "--token=admin-secret"},
      absl::Seconds(30));
  ASSERT_THAT(applied, IsOk());
  EXPECT_EQ(applied->exit_code, 0) << applied->err;
  EXPECT_THAT(applied->out, HasSubstr("LocalQueue team-b/research created"));
  EXPECT_THAT(applied->out, HasSubstr("WorkloadPriorityClass urgent created"));
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses/urgent", "admin-secret").first, 200);
  // Again, the same: unchanged (and not written). A bad bundle changes nothing and exits 1 with the reason.
  auto again = testing::RunCommand(
      {testing::GangkeeperBinary(), "apply", "-f", dir_.File("bundle/a.yaml"), server, ca, "--token=admin-secret"},
      absl::Seconds(30));
  ASSERT_THAT(again, IsOk());
  EXPECT_THAT(again->out, HasSubstr("LocalQueue team-b/research unchanged"));
  std::ofstream(dir_.File("bad.yaml")) << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                                          "metadata: {name: lost, namespace: team-b}\nspec: {clusterQueue: nowhere}\n";
  auto bad = testing::RunCommand(
      {testing::GangkeeperBinary(), "apply", "-f", dir_.File("bad.yaml"), server, ca, "--token=admin-secret"},
      absl::Seconds(30));
  ASSERT_THAT(bad, IsOk());
  EXPECT_EQ(bad->exit_code, 1);
  EXPECT_THAT(bad->err, HasSubstr("nowhere"));
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/lost", "admin-secret").first, 404);
}

TEST_F(ApiIntegrationTest, AuditFromTheCommandLineAndFollow) {
  const std::string server = absl::StrCat("--server=https://127.0.0.1:", server_->api_port());
  const std::string ca = "--ca=" + dir_.File("certs/ca.crt");
  auto table = testing::RunCommand({testing::GangkeeperBinary(), "audit", "-n", "team-a", "--name", "first", server,
                                    ca, "--token=audit-secret"},
                                   absl::Seconds(30));
  ASSERT_THAT(table, IsOk());
  EXPECT_EQ(table->exit_code, 0) << table->err;
  EXPECT_THAT(table->out, HasSubstr("SEQ"));
  // The user a review names is only claimed (no --client-ca here).
  EXPECT_THAT(table->out, ::testing::ContainsRegex("alice \\(claimed\\) +workload.pending +Job team-a/first"));
  EXPECT_THAT(table->out, ::testing::ContainsRegex("gangkeeper +workload.admitted +Job team-a/first +team-a-gpu"));
  EXPECT_THAT(table->out, ::testing::Not(HasSubstr("second")));

  // --follow prints what comes later: a gang registered while it runs.
  std::atomic<bool> registered{false};
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(800));
    auto w = testing::TlsConnection::Connect(server_->webhook_port(), options_);
    if (!w.ok()) return;
    auto r = (*w)->Request("POST", "/validate", JobReview("third", 1, 1).dump());
    registered = r.ok() && r->body.find(R"("allowed":true)") != std::string::npos;
  });
  auto follow = testing::RunCommand({testing::GangkeeperBinary(), "audit", "--action", "workload.pending", "--follow",
                                     "--follow-for=3s", "-o", "json", server, ca, "--token=audit-secret"},
                                    absl::Seconds(30));
  later.join();
  ASSERT_TRUE(registered);
  ASSERT_THAT(follow, IsOk());
  EXPECT_EQ(follow->exit_code, 0) << follow->err;
  std::vector<std::string> names;
  std::istringstream lines(follow->out);
  for (std::string line; std::getline(lines, line);) names.push_back(json::parse(line)["object"]["name"]);
  EXPECT_THAT(names, ::testing::ElementsAre("first", "second", "third"));
}

}  // namespace
}  // namespace gangkeeper
