// Integration: a real Prometheus (Debian's `prometheus` package) scrapes
// gangkeeper over TLS with a bearer token, and every query of the shipped
// Grafana dashboard and every alert expression of the shipped rules returns
// a series (deploy/overlays/monitoring).
//
// Two gangkeepers run on loopback, both scraped by one job:
//   - "replica": --store etcd://(a real etcd-server) and --kube pointing at
//     FakeKubeApi, driven the way a cluster would: a Job admitted, started
//     and preempted by a higher-priority one (it waits again), and a Job
//     whose release the API server refuses (a release failure). It has the
//     leader gauge, the scheduling, preemption and release families;
//   - "single": the file store (the journal families), --kube none.
// Prometheus gets a generated config (HTTPS, the test CA, the token of role
// `metrics` from a file, 1 s scrape interval), a temp data dir and a free
// loopback port. The test waits (bounded) for both targets to be up.
//
// "Returns a series", the method:
//   - dashboard panels: each target's expr, with the Grafana variables
//     replaced ($cluster_queue, $flavor, $resource by `.*`, the rate
//     interval by 1m), through /api/v1/query; the template variables'
//     label_values(SELECTOR, label) queries as SELECTOR;
//   - alerts: the expression with every comparison turned into its `bool`
//     form (`x > 0` becomes `x > bool 0`), so the threshold decides a 0/1
//     value instead of filtering: a series comes back whenever the metrics
//     the alert watches exist, whatever their values. Whether each alert
//     fires at the right values is promtool's part (alerts-test.yaml).
// Queries are retried (bounded) until each returns a series: rate() and
// increase() need two scrapes after the event.
//
// Skipped, with a message, where /usr/bin/prometheus is missing
// (scripts/deps.sh test installs it, so CI runs it).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "test/monitoring/promql_probe.h"
#include "test/testing/etcd_process.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/kubeconfig.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/testing/wait.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::monitoring_test {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kToken[] = "prometheus-scrape-token-0123456789";

std::string MonitoringDir() { return std::string(GK_SOURCE_DIR) + "/deploy/overlays/monitoring"; }

// A free loopback TCP port (bound, read, closed: Prometheus takes it next).
int ScrapeTestFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// /usr/bin/prometheus as a child: its output in a log file, killed when the
// test (or the thread that started it) ends.
class PrometheusProcess {
 public:
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(const std::string& dir) {
    auto p = std::unique_ptr<PrometheusProcess>(new PrometheusProcess());
    p->port_ = ScrapeTestFreePort();
    p->log_ = dir + "/prometheus.log";
    const std::vector<std::string> args = {kPrometheus,
                                           "--config.file=" + dir + "/prometheus.yml",
                                           "--storage.tsdb.path=" + dir + "/tsdb",
                                           absl::StrCat("--web.listen-address=127.0.0.1:", p->port_),
                                           "--log.level=warn"};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const char* log = p->log_.c_str();
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {  // async-signal-safe calls only until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      int fd = ::open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) ::_exit(127);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    p->pid_ = pid;
    httplib::Client c("127.0.0.1", p->port_);
    c.set_connection_timeout(1, 0);
    bool exited = false;
    const bool ready = testing::WaitFor(
        [&] {
          int status = 0;
          if (!exited && ::waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
            exited = true;
            p->pid_ = -1;
          }
          if (exited) return true;  // no use waiting
          auto r = c.Get("/-/ready");
          return r && r->status == 200;
        },
        absl::Seconds(20), absl::Milliseconds(100));
    if (!ready || exited) {
      return absl::FailedPreconditionError(
          absl::StrCat("prometheus ", exited ? "exited" : "is not ready after 20 s", ":\n", p->Log()));
    }
    return p;
  }

  ~PrometheusProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // GET path with query parameters; the parsed JSON body, or null.
  json Get(const std::string& path, const httplib::Params& params = {}) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    auto r = c.Get(path.c_str(), params, httplib::Headers{});
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }

  // The instant query's result (a vector); an array, empty on errors.
  json Query(const std::string& promql, std::string* error) const {
    json body = Get("/api/v1/query", {{"query", promql}});
    if (!body.is_object() || body.value("status", "") != "success") {
      *error = body.is_object() ? body.value("error", "no answer") : "no answer";
      return json::array();
    }
    error->clear();
    const json& data = body["data"];
    if (data.value("resultType", "") != "vector") return json::array();
    return data["result"];
  }

 private:
  PrometheusProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// ---- Workloads, as rbac_test submits them ---------------------------------------

json MonitoringJob(const std::string& ns, const std::string& name, int pods, int gpus, const std::string& pc) {
  json res = {{"cpu", "100m"}, {"nvidia.com/gpu", std::to_string(gpus)}};
  json labels = {{"kueue.x-k8s.io/queue-name", "gpu-queue"}, {"kueue.x-k8s.io/priority-class", pc}};
  json container = {{"name", "w"}, {"image", "busybox"}, {"resources", {{"requests", res}, {"limits", res}}}};
  json pod = {{"restartPolicy", "Never"}, {"containers", json::array({container})}};
  json spec = {{"parallelism", pods}, {"completions", pods}, {"template", {{"spec", pod}}}};
  json meta = {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"labels", labels}};
  return {{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", meta}, {"spec", spec}};
}

std::string JobsOf(const std::string& ns) { return "/apis/batch/v1/namespaces/" + ns + "/jobs"; }
std::string JobPath(const json& job) {
  return JobsOf(job["metadata"]["namespace"].get<std::string>()) + "/" + job["metadata"]["name"].get<std::string>();
}

class MonitoringCluster {
 public:
  void Start() {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    ASSERT_EQ(certs->exit_code, 0) << certs->err;
    std::ofstream(dir_.File("tokens.json"))
        << json::array({{{"name", "prometheus"}, {"sha256", testing::Sha256Hex(kToken)}, {"role", "metrics"}}}).dump();
    std::ofstream(dir_.File("token")) << kToken;
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_THAT(etcd, IsOk());
    etcd_ = *std::move(etcd);
    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    auto fake = testing::FakeKubeApi::Start(fo);
    ASSERT_THAT(fake, IsOk());
    fake_ = *std::move(fake);
    testing::WriteKubeconfigFor(*fake_, dir_.path());
    const std::vector<std::string> common = {
        "--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
        "--tls-key=" + dir_.File("certs/tls.key"), "--policies=" + std::string(GK_SOURCE_DIR) + "/policies",
        "--tokens=" + dir_.File("tokens.json"), "--drain-delay=0s"};
    std::vector<std::string> replica = common;
    replica.insert(replica.end(), {"--data-dir=" + dir_.File("data-replica"), "--kube=" + dir_.File("kubeconfig"),
                                   "--store=etcd://" + etcd_->endpoint(), "--etcd-prefix=/gk/", "--lease-ttl=2s",
                                   "--lease-renew=500ms", "--replica-id=gangkeeper-0"});
    std::vector<std::string> single = common;
    single.insert(single.end(), {"--data-dir=" + dir_.File("data-single"), "--kube=none"});
    auto r = testing::ServerProcess::Start(replica, dir_.path());
    ASSERT_THAT(r, IsOk());
    replica_ = *std::move(r);
    auto s = testing::ServerProcess::Start(single, dir_.path());
    ASSERT_THAT(s, IsOk());
    single_ = *std::move(s);
    tls_.ca_file = dir_.File("certs/ca.crt");
    for (testing::ServerProcess* p : {replica_.get(), single_.get()}) {
      ASSERT_TRUE(testing::WaitFor([&] {
        auto api = testing::TlsConnection::Connect(p->api_port(), tls_);
        if (!api.ok()) return false;
        auto ready = (*api)->Request("GET", "/readyz");
        return ready.ok() && ready->status == 200;
      })) << p->Stderr();
    }
    auto c = testing::TlsConnection::Connect(replica_->webhook_port(), tls_);
    ASSERT_THAT(c, IsOk());
    webhook_ = *std::move(c);
  }

  // The API server's CREATE: /mutate, its patch, /validate, stored (held back).
  void Submit(json job) {
    static int n = 0;
    auto review = [&](const std::string& uid) {
      return json{{"apiVersion", "admission.k8s.io/v1"},
                  {"kind", "AdmissionReview"},
                  {"request",
                   {{"uid", uid},
                    {"kind", {{"group", "batch"}, {"version", "v1"}, {"kind", "Job"}}},
                    {"resource", {{"group", "batch"}, {"version", "v1"}, {"resource", "jobs"}}},
                    {"namespace", job["metadata"]["namespace"]},
                    {"name", job["metadata"]["name"]},
                    {"operation", "CREATE"},
                    {"userInfo", {{"username", "alice"}}},
                    {"object", job},
                    {"oldObject", nullptr},
                    {"dryRun", false}}}}
          .dump();
    };
    const std::string uid = absl::StrCat("monitoring-", ++n);
    auto m = webhook_->Request("POST", "/mutate", review(uid + "m"));
    ASSERT_THAT(m, IsOk());
    json answer = json::parse(m->body);
    ASSERT_TRUE(answer["response"]["allowed"].get<bool>()) << m->body;
    if (answer["response"].contains("patch")) {
      std::string patch;
      ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
      job = job.patch(json::parse(patch));
    }
    auto v = webhook_->Request("POST", "/validate", review(uid + "v"));
    ASSERT_THAT(v, IsOk());
    ASSERT_TRUE(json::parse(v->body)["response"]["allowed"].get<bool>()) << v->body;
    ASSERT_THAT(fake_->Create(JobsOf(job["metadata"]["namespace"].get<std::string>()), job), IsOk());
  }

  bool Released(const json& job) {
    auto o = fake_->Get(JobPath(job));
    return o.ok() && !(*o)["spec"].value("suspend", false);
  }
  void StartJob(const json& job) {
    auto o = fake_->Get(JobPath(job));
    ASSERT_THAT(o, IsOk());
    (*o)["status"]["startTime"] = "2026-12-03T10:00:00Z";
    ASSERT_THAT(fake_->Replace(JobPath(job), *o), IsOk());
  }

  // Prometheus' config: one job, both gangkeepers, HTTPS with the test CA
  // and the metrics token from a file.
  void WritePrometheusConfig() const {
    std::ofstream(dir_.File("prometheus.yml"))
        << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        << "scrape_configs:\n- job_name: gangkeeper\n  scheme: https\n  metrics_path: /metrics\n"
        << "  tls_config:\n    ca_file: " << dir_.File("certs/ca.crt") << "\n    server_name: localhost\n"
        << "  authorization:\n    credentials_file: " << dir_.File("token") << "\n"
        << "  static_configs:\n  - targets: ['127.0.0.1:" << replica_->api_port() << "', '127.0.0.1:"
        << single_->api_port() << "']\n";
  }

  testing::FakeKubeApi& fake() { return *fake_; }
  const testing::TempDir& dir() const { return dir_; }
  std::string Stderr() const { return replica_->Stderr() + single_->Stderr(); }

 private:
  testing::TempDir dir_;
  testing::TlsClientOptions tls_;
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::unique_ptr<testing::FakeKubeApi> fake_;
  std::unique_ptr<testing::ServerProcess> replica_, single_;
  std::unique_ptr<testing::TlsConnection> webhook_;
};

// Every query to check: what it is (for the failure message) and PromQL.
std::vector<std::pair<std::string, std::string>> DashboardAndAlertQueries() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(MonitoringDir() + "/gangkeeper-dashboard.json");
  const json dash = json::parse(in, nullptr, false);
  EXPECT_TRUE(dash.is_object()) << "gangkeeper-dashboard.json does not parse";
  if (!dash.is_object()) return out;
  for (const json& v : dash["templating"]["list"]) {
    if (v.value("type", "") != "query") continue;
    absl::StatusOr<std::string> selector = LabelValuesSelector(v["query"]["query"].get<std::string>());
    EXPECT_THAT(selector, IsOk()) << v["name"];
    if (selector.ok()) out.push_back({"variable " + v["name"].get<std::string>(), GrafanaToPromql(*selector)});
  }
  for (const json& p : dash["panels"]) {
    for (const json& t : p.value("targets", json::array())) {
      out.push_back({absl::StrCat("panel \"", p["title"].get<std::string>(), "\" ", t["refId"].get<std::string>()),
                     GrafanaToPromql(t["expr"].get<std::string>())});
    }
  }
  auto rules = testing::YamlFileToJson(MonitoringDir() + "/gangkeeper-rules.yaml");
  EXPECT_THAT(rules, IsOk());
  if (!rules.ok() || rules->empty()) return out;
  const json plain = json::parse(rules->front());  // kept: the loop reads into it
  for (const json& g : plain["groups"]) {
    for (const json& r : g["rules"]) {
      if (!r.contains("alert")) continue;
      out.push_back({"alert " + r["alert"].get<std::string>(), WithBoolComparisons(r["expr"].get<std::string>())});
    }
  }
  return out;
}

TEST(PrometheusScrapeTest, EveryDashboardQueryAndAlertExpressionReturnsASeries) {
  if (::access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is missing: install Debian's `prometheus` package (scripts/deps.sh test)";
  }
  MonitoringCluster c;
  ASSERT_NO_FATAL_FAILURE(c.Start());

  // team-a's GPUs (with the 2 it may borrow from team-b) taken by a Job
  // that runs, then preempted by a higher priority: it waits again, for more
  // than team-a can get.
  const json low = MonitoringJob("team-a", "low", 3, 2, "training-batch");
  ASSERT_NO_FATAL_FAILURE(c.Submit(low));
  ASSERT_TRUE(testing::WaitFor([&] { return c.Released(low); })) << c.Stderr();
  ASSERT_NO_FATAL_FAILURE(c.StartJob(low));
  const json urgent = MonitoringJob("team-a", "urgent", 2, 1, "inference-critical");
  ASSERT_NO_FATAL_FAILURE(c.Submit(urgent));
  ASSERT_TRUE(testing::WaitFor([&] { return c.Released(urgent); })) << c.Stderr();
  // A Job in team-b whose release the API server refuses: release failures.
  testing::ScriptedFailure refuse;
  refuse.method = "PATCH";
  refuse.path_contains = "/jobs/refused";
  refuse.status = 403;
  refuse.times = -1;
  c.fake().Fail(refuse);
  ASSERT_NO_FATAL_FAILURE(c.Submit(MonitoringJob("team-b", "refused", 1, 1, "training-batch")));

  c.WritePrometheusConfig();
  auto prom = PrometheusProcess::Start(c.dir().path());
  ASSERT_THAT(prom, IsOk());
  const bool up = testing::WaitFor(
      [&] {
        json t = (*prom)->Get("/api/v1/targets");
        if (!t.is_object()) return false;
        int healthy = 0;
        for (const json& a : t["data"]["activeTargets"]) healthy += a.value("health", "") == "up" ? 1 : 0;
        return healthy == 2;
      },
      absl::Seconds(20), absl::Milliseconds(200));
  ASSERT_TRUE(up) << "scrape targets: " << (*prom)->Get("/api/v1/targets").dump(2) << "\n" << (*prom)->Log();

  const std::vector<std::pair<std::string, std::string>> queries = DashboardAndAlertQueries();
  int alerts = 0, panels = 0;
  for (const auto& q : queries) {
    alerts += absl::StartsWith(q.first, "alert ") ? 1 : 0;
    panels += absl::StartsWith(q.first, "panel ") ? 1 : 0;
  }
  ASSERT_GE(alerts, 6);
  ASSERT_GE(panels, 20);
  std::map<std::string, std::string> failing;  // what -> why
  for (const auto& [what, promql] : queries) failing[what] = "not tried";
  testing::WaitFor(
      [&] {
        for (const auto& [what, promql] : queries) {
          if (!failing.count(what)) continue;
          std::string error;
          json result = (*prom)->Query(promql, &error);
          if (!result.empty()) {
            failing.erase(what);
          } else {
            failing[what] = absl::StrCat(error.empty() ? "no series" : error, ": ", promql);
          }
        }
        return failing.empty();
      },
      absl::Seconds(25), absl::Milliseconds(500));
  for (const auto& [what, why] : failing) ADD_FAILURE() << what << ": " << why;
  if (!failing.empty()) ADD_FAILURE() << (*prom)->Log();
}

}  // namespace
}  // namespace gangkeeper::monitoring_test
