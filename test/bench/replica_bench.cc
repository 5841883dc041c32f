// gangkeeper: the etcd store's figures (issue #10), on the real binary over
// real TLS on loopback:
//   1. registrations per second (allowed creates through /validate, each
//      durable before its answer) into one replica on the embedded journal,
//      and into three replicas on one etcd with the clients spread over them;
//   2. admission-to-release latency (audit: workload.pending to
//      workload.released of the same workload) p50 / p99, both stores;
//   3. failover: SIGKILL of the leader to another replica leading
//      (gangkeeper_replica_leader), several times.
// A plain program (not Google Benchmark: it drives processes), built with
// -DGK_BUILD_BENCH=ON. Usage: gangkeeper_replica_bench [seconds] [clients] [kills]
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "nlohmann/json.hpp"
#include "test/testing/etcd_process.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using nlohmann::json;

// One team with room for every gang: every registration is admitted and
// released at once, so the latency is the machinery's, not the queue's.
constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 10000000}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: team-a}
spec: {clusterQueue: team-a}
)";

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

class Bench {
 public:
  bool Setup() {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    if (!certs.ok() || certs->exit_code != 0) return false;
    json tokens = json::array(
        {{{"name", "platform"}, {"sha256", testing::Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/queues.yaml")) << kPolicies;
    options_.ca_file = dir_.File("certs/ca.crt");
    return true;
  }

  std::unique_ptr<testing::ServerProcess> Serve(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0",
                                     "--tls-cert=" + dir_.File("certs/tls.crt"),
                                     "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File(name),
                                     "--policies=" + dir_.File("policies"), "--kube=none",
                                     "--tokens=" + dir_.File("tokens.json"), "--drain-delay=0s",
                                     "--log-level=warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = testing::ServerProcess::Start(args, dir_.path());
    if (!p.ok()) {
      std::fprintf(stderr, "start %s: %s\n", name.c_str(), std::string(p.status().message()).c_str());
      return nullptr;
    }
    return *std::move(p);
  }

  struct Load {
    int64_t allowed = 0, refused = 0;
    double seconds = 0;
    std::vector<double> answer_ms;
  };

  // `clients` threads send creates round robin over `ports` for `seconds`.
  Load Run(const std::vector<int>& ports, int clients, double seconds, const std::string& tag) {
    Load out;
    std::mutex mu;
    std::atomic<int64_t> next{0};
    const base::Stopwatch watch;
    const absl::Duration length = absl::Seconds(seconds);
    std::vector<std::thread> pool;
    for (int t = 0; t < clients; ++t) {
      pool.emplace_back([&, t] {
        std::unique_ptr<testing::TlsConnection> conn;
        std::vector<double> mine;
        int64_t ok = 0, bad = 0;
        for (int i = 0; i < 1000000 && watch.Elapsed() < length; ++i) {
          if (conn == nullptr) {
            auto c = testing::TlsConnection::Connect(ports[static_cast<size_t>(t) % ports.size()], options_);
            if (!c.ok()) return;
            conn = *std::move(c);
          }
          const std::string name = absl::StrCat(tag, "-", next.fetch_add(1));
          const json review =
              testing::Review("CREATE", "req-" + name, "team-a", name, testing::Job("team-a", name, 2, 1), nullptr);
          const base::Stopwatch one;
          auto r = conn->Request("POST", "/validate", review.dump());
          mine.push_back(absl::ToDoubleMilliseconds(one.Elapsed()));
          if (!r.ok()) {
            conn.reset();
            ++bad;
            continue;
          }
          (r->body.find(R"("allowed":true)") != std::string::npos ? ok : bad)++;
        }
        std::lock_guard<std::mutex> lock(mu);
        out.allowed += ok;
        out.refused += bad;
        out.answer_ms.insert(out.answer_ms.end(), mine.begin(), mine.end());
      });
    }
    for (std::thread& th : pool) th.join();
    out.seconds = absl::ToDoubleSeconds(watch.Elapsed());
    return out;
  }

  json Get(int api_port, const std::string& path) {
    auto c = testing::TlsConnection::Connect(api_port, options_);
    if (!c.ok()) return json();
    auto r = (*c)->Request("GET", path, "", "Authorization: Bearer admin-secret\r\n");
    if (!r.ok() || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }

  // Registration (workload.pending) to release (workload.released), from
  // the audit log, in milliseconds; waits until `want` releases are there.
  std::vector<double> ReleaseLatencies(int api_port, int64_t want) {
    std::map<std::string, absl::Time> pending;
    std::vector<double> out;
    for (int round = 0; round < 100; ++round) {
      pending.clear();
      out.clear();
      std::string cursor;
      for (int page = 0; page < 100000; ++page) {
        json p = Get(api_port, absl::StrCat("/v1/audit?limit=1000", cursor.empty() ? "" : "&cursor=" + cursor));
        if (!p.is_object()) break;
        for (const json& e : p["items"]) {
          if (!e.contains("object") || !e["object"].contains("name")) continue;
          const std::string name = e["object"]["name"].get<std::string>();
          absl::Time t;
          std::string err;
          if (!absl::ParseTime(absl::RFC3339_full, e["time"].get<std::string>(), &t, &err)) continue;
          const std::string action = e["action"].get<std::string>();
          if (action == "workload.pending") pending[name] = t;
          if (action == "workload.released" && pending.count(name) != 0) {
            out.push_back(absl::ToDoubleMilliseconds(t - pending[name]));
          }
        }
        if (!p.contains("next")) break;
        cursor = p["next"].get<std::string>();
      }
      if (static_cast<int64_t>(out.size()) >= want) break;
      absl::SleepFor(absl::Milliseconds(500));
    }
    return out;
  }

  bool Leads(int api_port, const std::string& id) {
    auto c = testing::TlsConnection::Connect(api_port, options_);
    if (!c.ok()) return false;
    auto r = (*c)->Request("GET", "/metrics", "", "Authorization: Bearer admin-secret\r\n");
    return r.ok() && r->body.find(absl::StrCat("gangkeeper_replica_leader{replica=\"", id, "\"} 1")) !=
                         std::string::npos;
  }

  static void Report(const char* what, const Load& l, const std::vector<double>& release_ms) {
    std::printf("| %s | %.0f | %.2f | %.2f | %.1f | %.1f | %lld |\n", what,
                static_cast<double>(l.allowed) / l.seconds, Percentile(l.answer_ms, 0.5),
                Percentile(l.answer_ms, 0.99), Percentile(release_ms, 0.5), Percentile(release_ms, 0.99),
                static_cast<long long>(l.refused));
  }

  testing::TempDir dir_;
  testing::TlsClientOptions options_;
};

int Main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const int clients = argc > 2 ? std::atoi(argv[2]) : 16;
  const int kills = argc > 3 ? std::atoi(argv[3]) : 5;
  Bench b;
  if (!b.Setup()) return 1;
  std::printf("%d clients, %.0f s each; every create is durable before its answer\n\n", clients, seconds);
  std::printf("| store | registrations/s | answer p50 ms | answer p99 ms | pending→released p50 ms | p99 ms | refused |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  {
    std::unique_ptr<testing::ServerProcess> one = b.Serve("file", {});
    if (one == nullptr) return 1;
    Bench::Load l = b.Run({one->webhook_port()}, clients, seconds, "file");
    Bench::Report("file journal, 1 replica", l, b.ReleaseLatencies(one->api_port(), l.allowed));
  }
  auto etcd = testing::EtcdProcess::Start();
  if (!etcd.ok()) {
    std::fprintf(stderr, "etcd: %s\n", std::string(etcd.status().message()).c_str());
    return 1;
  }
  std::vector<std::unique_ptr<testing::ServerProcess>> replicas;
  auto start = [&](int i) {
    return b.Serve(absl::StrCat("etcd", i), {"--store=etcd://" + (*etcd)->endpoint(), "--lease-ttl=2s",
                                             "--lease-renew=500ms", absl::StrCat("--replica-id=replica-", i)});
  };
  for (int i = 0; i < 3; ++i) replicas.push_back(start(i));
  for (const auto& r : replicas) {
    if (r == nullptr) return 1;
  }
  absl::SleepFor(absl::Seconds(1));
  {
    std::vector<int> ports;
    for (const auto& r : replicas) ports.push_back(r->webhook_port());
    Bench::Load l = b.Run(ports, clients, seconds, "etcd");
    Bench::Report("etcd, 3 replicas", l, b.ReleaseLatencies(replicas[0]->api_port(), l.allowed));
  }
  // Failover: SIGKILL of the leader until another leads.
  std::vector<double> takeover_ms;
  for (int k = 0; k < kills; ++k) {
    int leader = -1;
    for (int round = 0; round < 400 && leader < 0; ++round) {
      for (int i = 0; i < 3; ++i) {
        if (b.Leads(replicas[static_cast<size_t>(i)]->api_port(), absl::StrCat("replica-", i))) leader = i;
      }
      if (leader < 0) absl::SleepFor(absl::Milliseconds(25));
    }
    if (leader < 0) return 1;
    const base::Stopwatch since;
    replicas[static_cast<size_t>(leader)]->Signal(SIGKILL);
    (void)replicas[static_cast<size_t>(leader)]->Wait(absl::Seconds(10));
    bool taken = false;
    for (int round = 0; round < 1000 && !taken; ++round) {
      for (int i = 0; i < 3; ++i) {
        if (i != leader && b.Leads(replicas[static_cast<size_t>(i)]->api_port(), absl::StrCat("replica-", i))) {
          taken = true;
        }
      }
      if (!taken) absl::SleepFor(absl::Milliseconds(10));
    }
    takeover_ms.push_back(absl::ToDoubleMilliseconds(since.Elapsed()));
    replicas[static_cast<size_t>(leader)] = start(leader);
    if (replicas[static_cast<size_t>(leader)] == nullptr) return 1;
  }
  std::printf("\nfailover (lease TTL 2 s, renew 0.5 s), SIGKILL of the leader to another leading, %d kills: "
              "p50 %.0f ms, max %.0f ms\n",
              kills, Percentile(takeover_ms, 0.5), Percentile(takeover_ms, 1.0));
  return 0;
}

}  // namespace
}  // namespace gangkeeper

int main(int argc, char** argv) { return gangkeeper::Main(argc, argv); }
