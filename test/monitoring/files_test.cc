// The monitoring files of deploy/overlays/monitoring, without a Prometheus:
//   - the overlay renders (kubectl kustomize) to a ServiceMonitor that
//     scrapes the Service's `api` port over HTTPS with the serving CA and a
//     token Secret, the PrometheusRule and the dashboard's ConfigMap;
//   - the PrometheusRule's groups equal the plain rules file's;
//   - every alert is documented (summary, description), has a severity and
//     a `for:`; the dashboard has its uid, variables and panels, and groups
//     only by low-cardinality labels (never a workload's name or uid);
//   - the helpers the Prometheus test uses to probe the queries.
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/deploy/render.h"
#include "test/monitoring/promql_probe.h"
#include "test/testing/status_matchers.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::monitoring_test {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;

std::string MonitoringFilesDir() { return deploy_test::SourceDir() + "/deploy/overlays/monitoring"; }

json MonitoringYaml(const std::string& file) {
  auto docs = testing::YamlFileToJson(MonitoringFilesDir() + "/" + file);
  EXPECT_THAT(docs, IsOk()) << file;
  if (!docs.ok() || docs->size() != 1) return json();
  return json::parse(docs->front());
}

json MonitoringDashboard() {
  std::ifstream in(MonitoringFilesDir() + "/gangkeeper-dashboard.json");
  return json::parse(in, nullptr, false);
}

// Every PromQL expression shipped: the alerts' and the dashboard's.
std::vector<std::string> ShippedExpressions() {
  std::vector<std::string> out;
  const json rules = MonitoringYaml("gangkeeper-rules.yaml");
  for (const json& g : rules["groups"]) {
    for (const json& r : g["rules"]) out.push_back(r["expr"].get<std::string>());
  }
  const json dash = MonitoringDashboard();
  for (const json& p : dash["panels"]) {
    for (const json& t : p.value("targets", json::array())) out.push_back(t["expr"].get<std::string>());
  }
  return out;
}

TEST(MonitoringFilesTest, ThePrometheusRuleCarriesThePlainRulesFilesGroups) {
  const json plain = MonitoringYaml("gangkeeper-rules.yaml");
  const json operator_rule = MonitoringYaml("prometheusrule.yaml");
  ASSERT_TRUE(plain.contains("groups"));
  EXPECT_EQ(operator_rule["spec"]["groups"], plain["groups"])
      << "regenerate prometheusrule.yaml's spec from gangkeeper-rules.yaml (the command is in its header)";
}

TEST(MonitoringFilesTest, EveryAlertIsDocumentedWithASeverityAndADuration) {
  std::set<std::string> names;
  const json rules = MonitoringYaml("gangkeeper-rules.yaml");
  for (const json& g : rules["groups"]) {
    for (const json& r : g["rules"]) {
      ASSERT_TRUE(r.contains("alert")) << r.dump();
      const std::string name = r["alert"].get<std::string>();
      EXPECT_TRUE(names.insert(name).second) << name << " twice";
      EXPECT_THAT(name, ::testing::StartsWith("Gangkeeper"));
      EXPECT_TRUE(r.contains("for")) << name;
      EXPECT_THAT(r["labels"].value("severity", ""), ::testing::AnyOf("warning", "critical")) << name;
      EXPECT_FALSE(r["annotations"].value("summary", "").empty()) << name;
      EXPECT_GT(r["annotations"].value("description", "").size(), 80u) << name << ": say what to do";
    }
  }
  // What issue #23 asks the alerts to cover.
  for (const char* want : {"GangkeeperWorkPendingWithFreeQuota", "GangkeeperReleaseFailures", "GangkeeperAuditUnhealthy",
                           "GangkeeperLeaderChanges", "GangkeeperWebhookErrors", "GangkeeperWebhookSlow"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
}

TEST(MonitoringFilesTest, TheDashboardHasItsUidVariablesAndPanels) {
  const json dash = MonitoringDashboard();
  ASSERT_TRUE(dash.is_object()) << "gangkeeper-dashboard.json does not parse";
  EXPECT_EQ(dash.value("uid", ""), "gangkeeper-overview");
  std::set<std::string> vars;
  for (const json& v : dash["templating"]["list"]) vars.insert(v["name"].get<std::string>());
  EXPECT_THAT(vars, ::testing::IsSupersetOf({"datasource", "cluster_queue", "flavor", "resource"}));
  std::set<int> ids;
  std::set<std::string> titles;
  for (const json& p : dash["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "panel id " << p["id"];
    titles.insert(p["title"].get<std::string>());
    if (p["type"] == "row") continue;
    EXPECT_FALSE(p.value("targets", json::array()).empty()) << p["title"];
    EXPECT_FALSE(p.value("description", "").empty()) << p["title"];
  }
  for (const char* want : {"Pending workloads by ClusterQueue and status", "Usage vs nominal quota by flavor and resource",
                           "MIG profiles: usage vs nominal", "Time to admission", "Preemptions", "Release failures",
                           "Review latency"}) {
    EXPECT_TRUE(titles.count(want)) << want;
  }
}

TEST(MonitoringFilesTest, QueriesGroupOnlyByLowCardinalityLabels) {
  const std::set<std::string> allowed = {
      "job",    "instance", "cluster_queue", "status",  "resource", "flavor",   "cohort",  "namespace",
      "name",   "reason",   "result",        "action",  "kind",     "webhook",  "decision", "listener",
      "code",   "le",       "replica",       "preempting_cluster_queue"};
  const std::regex by(R"((?:by|on|without|ignoring)\s*\(([^)]*)\))");
  for (const std::string& expr : ShippedExpressions()) {
    for (std::sregex_iterator it(expr.begin(), expr.end(), by), end; it != end; ++it) {
      for (absl::string_view l : absl::StrSplit((*it)[1].str(), ',', absl::SkipWhitespace())) {
        EXPECT_TRUE(allowed.count(std::string(absl::StripAsciiWhitespace(l)))) << l << " in " << expr;
      }
    }
    EXPECT_FALSE(absl::StrContains(expr, "uid")) << expr;
  }
}

TEST(MonitoringFilesTest, TheOverlayRendersTheScrapeTheRulesAndTheDashboard) {
  absl::StatusOr<deploy_test::Rendering> r = deploy_test::Kustomize(MonitoringFilesDir());
  ASSERT_THAT(r, IsOk());
  const json* sm = deploy_test::Find(r->objects, "ServiceMonitor", "gangkeeper");
  ASSERT_NE(sm, nullptr);
  EXPECT_EQ((*sm)["metadata"]["namespace"], "gangkeeper-system");
  const json& ep = (*sm)["spec"]["endpoints"][0];
  EXPECT_EQ(ep["scheme"], "https");
  EXPECT_EQ(ep["path"], "/metrics");
  EXPECT_EQ(ep["tlsConfig"]["ca"]["secret"]["name"], "gangkeeper-tls");
  EXPECT_EQ(ep["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
  EXPECT_EQ(ep["tlsConfig"]["serverName"], "gangkeeper.gangkeeper-system.svc");
  EXPECT_FALSE(ep["bearerTokenSecret"].value("name", "").empty());
  // The port is the Service's API port, and the selector selects the Service.
  absl::StatusOr<deploy_test::Rendering> base = deploy_test::Kustomize(deploy_test::SourceDir() + "/deploy");
  ASSERT_THAT(base, IsOk());
  const json* svc = deploy_test::Find(base->objects, "Service", "gangkeeper");
  ASSERT_NE(svc, nullptr);
  bool port_found = false;
  for (const json& p : (*svc)["spec"]["ports"]) port_found |= p["name"] == ep["port"] && p["port"] == 8443;
  EXPECT_TRUE(port_found) << ep["port"];
  for (auto& [k, v] : (*sm)["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_EQ((*svc)["metadata"]["labels"].value(k, ""), v) << k;
  }
  const json* rule = deploy_test::Find(r->objects, "PrometheusRule", "gangkeeper");
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ((*rule)["spec"]["groups"], MonitoringYaml("gangkeeper-rules.yaml")["groups"]);
  const json* cm = deploy_test::Find(r->objects, "ConfigMap", "gangkeeper-dashboard");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ((*cm)["metadata"]["labels"].value("grafana_dashboard", ""), "1");
  EXPECT_EQ(json::parse((*cm)["data"]["gangkeeper-dashboard.json"].get<std::string>()), MonitoringDashboard());
  EXPECT_EQ(r->objects.size(), 3u);
}

TEST(PromqlProbeTest, ComparisonsBecomeBoolOutsideMatchers) {
  EXPECT_EQ(WithBoolComparisons("x > 0"), "x > bool 0");
  EXPECT_EQ(WithBoolComparisons("min(x{a!=\"b\"}) == 0"), "min(x{a!=\"b\"}) == bool 0");
  EXPECT_EQ(WithBoolComparisons("a >= on (j) b"), "a >= bool on (j) b");
  EXPECT_EQ(WithBoolComparisons("a<=b"), "a<= bool b");
  EXPECT_EQ(WithBoolComparisons("a != bool b"), "a != bool b");
  EXPECT_EQ(WithBoolComparisons("x{c=~\"5..\"} / y{l=\"a>b\"} < 1"), "x{c=~\"5..\"} / y{l=\"a>b\"} < bool 1");
}

TEST(PromqlProbeTest, GrafanaVariablesMatchEverything) {
  EXPECT_EQ(GrafanaToPromql("rate(x{cluster_queue=~\"$cluster_queue\"}[$__rate_interval])"),
            "rate(x{cluster_queue=~\".*\"}[1m])");
  EXPECT_EQ(GrafanaToPromql("x{f=~\"${flavor}\", r=~\"$resource\"}"), "x{f=~\".*\", r=~\".*\"}");
  absl::StatusOr<std::string> selector = LabelValuesSelector("label_values(x{a=~\"$a\", b=\"c\"}, resource)");
  ASSERT_THAT(selector, IsOk());
  EXPECT_EQ(*selector, "x{a=~\"$a\", b=\"c\"}");
  EXPECT_FALSE(LabelValuesSelector("query_result(x)").ok());
}

}  // namespace
}  // namespace gangkeeper::monitoring_test
