// Integration: three `gangkeeper serve --store etcd://...` replicas on one
// real etcd (Debian's etcd-server) on loopback (issue #10). Creates go to
// every replica while the leader admits; the leader is killed with SIGKILL
// again and again (fixed seed) and started again; a partitioned leader
// stops actuating; etcd itself is restarted under load. Afterwards every
// acknowledged workload exists once, every replica shows the same state,
// and replaying the audit log never finds a ClusterQueue over its quota.
// Last, one replica on an etcd that requires client certificates (the
// shape of deploy/overlays/ha), and the start errors of wrong TLS flags.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/etcd/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/etcd_process.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::Job;
using ::gangkeeper::testing::Review;
using ::gangkeeper::testing::Sha256Hex;
using nlohmann::json;

// Two teams of 8 GPUs sharing a cohort; each may borrow 4.
constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: team-b}
spec: {clusterQueue: team-b}
)";

#ifdef GK_SANITIZED
constexpr int kKills = 4;  // the sanitizer build is three times slower; the release build does all
#else
constexpr int kKills = 10;
#endif

class ReplicatedServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_THAT(etcd, IsOk());
    etcd_ = *std::move(etcd);
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    ASSERT_EQ(certs->exit_code, 0) << certs->err;
    json tokens = json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/queues.yaml")) << kPolicies;
    options_.ca_file = dir_.File("certs/ca.crt");
    for (int i = 0; i < 3; ++i) {
      replicas_.emplace_back();
      Start(i);
    }
  }

  // The flags of replica `i` (its data directory is data<i>).
  std::vector<std::string> Args(int i) const {
    return {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
            "--tls-key=" + dir_.File("certs/tls.key"), absl::StrCat("--data-dir=", dir_.File(absl::StrCat("data", i))),
            "--policies=" + dir_.File("policies"), "--kube=none", "--tokens=" + dir_.File("tokens.json"),
            "--drain-delay=0s", "--store=etcd://" + etcd_->endpoint(), "--etcd-prefix=/gk/", "--lease-ttl=2s",
            "--lease-renew=500ms", absl::StrCat("--replica-id=replica-", i), "--test-hooks",
            "--snapshot-every-records=100"};
  }

  void Start(int i) {
    auto p = testing::ServerProcess::Start(Args(i), dir_.path());
    ASSERT_THAT(p, IsOk());
    std::lock_guard<std::mutex> lock(replicas_mu_);
    replicas_[i] = *std::move(p);
  }

  // SIGKILL: a crash.
  void Kill(int i) {
    std::unique_ptr<testing::ServerProcess> gone;
    {
      std::lock_guard<std::mutex> lock(replicas_mu_);
      gone = std::move(replicas_[i]);
    }
    gone->Signal(SIGKILL);
    (void)gone->Wait(absl::Seconds(10));
  }

  absl::StatusOr<testing::HttpReply> Call(int i, const std::string& method, const std::string& path,
                                          const std::string& body = "", bool webhook = false) {
    int port = 0;
    {
      std::lock_guard<std::mutex> lock(replicas_mu_);
      if (replicas_[i] == nullptr) return absl::UnavailableError("not running");
      port = webhook ? replicas_[i]->webhook_port() : replicas_[i]->api_port();
    }
    auto c = testing::TlsConnection::Connect(port, options_);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body, "Authorization: Bearer admin-secret\r\n");
  }

  // Whether replica `i` says it leads (its gangkeeper_replica_leader gauge).
  bool Leads(int i) {
    absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/metrics");
    return r.ok() && r->body.find(absl::StrCat("gangkeeper_replica_leader{replica=\"replica-", i, "\"} 1")) !=
                         std::string::npos;
  }

  // The replica that leads, waiting up to `wait`; -1 when none does.
  int Leader(absl::Duration wait) {
    const base::Stopwatch watch;
    while (watch.Elapsed() < wait) {
      int leader = -1, count = 0;
      for (int i = 0; i < 3; ++i) {
        if (Leads(i)) {
          leader = i;
          ++count;
        }
      }
      EXPECT_LE(count, 1) << "two replicas lead at once";
      if (count == 1) return leader;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return -1;
  }

  // Sends a create of `name` to replica `i`; true when allowed.
  bool Create(int i, const std::string& ns, const std::string& name, int pods, int gpus) {
    json review = Review("CREATE", "req-" + name, ns, name, Job(ns, name, pods, gpus), nullptr);
    absl::StatusOr<testing::HttpReply> r = Call(i, "POST", "/validate", review.dump(), /*webhook=*/true);
    return r.ok() && r->status == 200 && r->body.find(R"("allowed":true)") != std::string::npos;
  }

  // "ns/name" -> state, as replica `i` shows them.
  std::map<std::string, std::string> States(int i) {
    std::map<std::string, std::string> out;
    absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/v1/workloads?state=all");
    if (!r.ok() || r->status != 200) return out;
    json all = json::parse(r->body, nullptr, false);
    for (const json& w : all["items"]) {
      out[w["namespace"].get<std::string>() + "/" + w["name"].get<std::string>()] = w["state"].get<std::string>();
    }
    return out;
  }

  // Waits (up to 15 s) until every running replica shows the same states
  // with all of `names`; returns them.
  std::map<std::string, std::string> Converged(const std::set<std::string>& names) {
    std::map<std::string, std::string> last;
    for (int round = 0; round < 150; ++round) {
      std::vector<std::map<std::string, std::string>> seen;
      for (int i = 0; i < 3; ++i) {
        bool running;
        {
          std::lock_guard<std::mutex> lock(replicas_mu_);
          running = replicas_[i] != nullptr;
        }
        if (running) seen.push_back(States(i));
      }
      bool same = !seen.empty();
      for (const auto& s : seen) same = same && s == seen.front();
      bool all = same;
      for (const std::string& n : names) all = all && seen.front().count(n) != 0;
      last = seen.empty() ? last : seen.front();
      if (all) return last;
      absl::SleepFor(absl::Milliseconds(100));
    }
    std::string seen_sizes;
    for (int i = 0; i < 3; ++i) {
      const std::map<std::string, std::string> st = States(i);
      int missing = 0;
      for (const std::string& n : names) missing += st.count(n) == 0;
      absl::StrAppend(&seen_sizes, " replica-", i, ": ", st.size(), " shown, ", missing, " missing;");
    }
    std::string logs;
    {
      std::lock_guard<std::mutex> lock(replicas_mu_);
      for (int i = 0; i < 3; ++i) {
        if (replicas_[i] == nullptr) continue;
        // Its warnings, errors and role changes (not the access log).
        std::vector<std::string> lines;
        for (absl::string_view line : absl::StrSplit(replicas_[i]->Stderr(), '\n')) {
          if (absl::StrContains(line, " access: ")) continue;
          if (absl::StrContains(line, "Z W ") || absl::StrContains(line, "Z E ") ||
              absl::StrContains(line, "replica")) {
            lines.emplace_back(line.substr(0, 300));
          }
        }
        if (lines.size() > 40) lines.erase(lines.begin(), lines.end() - 40);
        absl::StrAppend(&logs, "\n--- replica-", i, "\n", absl::StrJoin(lines, "\n"));
      }
    }
    ADD_FAILURE() << "the replicas did not converge:" << seen_sizes << logs;
    return last;
  }

  // Every audit event of replica `i`, oldest first.
  std::vector<json> AuditEvents(int i) {
    std::vector<json> out;
    std::string cursor;
    for (int page = 0; page < 1000; ++page) {
      absl::StatusOr<testing::HttpReply> r =
          Call(i, "GET", absl::StrCat("/v1/audit?limit=1000", cursor.empty() ? "" : "&cursor=" + cursor));
      if (!r.ok() || r->status != 200) break;
      json p = json::parse(r->body, nullptr, false);
      for (const json& e : p["items"]) out.push_back(e);
      if (!p.contains("next")) break;
      cursor = p["next"].get<std::string>();
    }
    return out;
  }

  // Replaying the leader's decisions (any replica's audit log holds them
  // all): no workload admitted twice without being freed, no ClusterQueue
  // over nominal + borrowing limit, the cohort within 16 GPUs.
  void CheckAuditLog(int i) {
    std::map<std::string, double> usage;
    std::map<std::string, std::string> holder;
    int admitted = 0;
    auto gpus = [](const json& a) {
      double n = 0;
      for (const auto& [flavor, resources] : a["usage"].items()) {
        if (resources.contains("nvidia.com/gpu")) n += std::stod(resources["nvidia.com/gpu"].get<std::string>());
      }
      return n;
    };
    for (const json& e : AuditEvents(i)) {
      const std::string action = e["action"].get<std::string>();
      if (!e.contains("object") || !e["object"].contains("name")) continue;
      const std::string key = e["object"]["namespace"].get<std::string>() + "/" + e["object"]["name"].get<std::string>();
      if (action == "workload.admitted") {
        ++admitted;
        const json& a = e["details"]["assignment"];
        const std::string cq = a["clusterQueue"].get<std::string>();
        EXPECT_EQ(holder.count(key), 0u) << key << " admitted twice without being freed: " << e.dump();
        holder[key] = cq;
        usage[cq] += gpus(a);
        EXPECT_LE(usage[cq], 12) << cq << " over quota at " << e.dump();
        EXPECT_LE(usage["team-a"] + usage["team-b"], 16) << "the cohort over quota at " << e.dump();
      } else if (e.contains("details") && e["details"].contains("freed")) {
        const json& a = e["details"]["freed"];
        usage[a["clusterQueue"].get<std::string>()] -= gpus(a);
        holder.erase(key);
      }
    }
    EXPECT_GT(admitted, 0);
  }

  static int Admitted(const std::map<std::string, std::string>& states) {
    int n = 0;
    for (const auto& [name, state] : states) n += state == "admitted";
    return n;
  }

  // Three clients creating one-pod jobs of `gpus` GPUs (namespaces from
  // `namespaces`, in turn) through every replica, every 20 ms each, until
  // Stop(). A create a replica refuses is tried once more on the next one,
  // as the API server would through the Service, and then counted refused.
  class Load {
   public:
    Load(ReplicatedServeTest* test, std::vector<std::string> namespaces, int gpus) {
      for (int t = 0; t < 3; ++t) {
        clients_.emplace_back([this, test, namespaces, gpus, t] {
          for (int k = 0; k < 100000 && !stop_.load(); ++k) {
            const int n = next_.fetch_add(1);
            const std::string& ns = namespaces[n % namespaces.size()];
            const std::string name = absl::StrCat("job-", n);
            if (test->Create((t + k) % 3, ns, name, 1, gpus) || test->Create((t + k + 1) % 3, ns, name, 1, gpus)) {
              std::lock_guard<std::mutex> lock(mu_);
              acknowledged_.insert(ns + "/" + name);
            } else {
              ++refused_;
            }
            absl::SleepFor(absl::Milliseconds(20));
          }
        });
      }
    }
    ~Load() { Stop(); }
    void Stop() {
      stop_ = true;
      for (std::thread& c : clients_) {
        if (c.joinable()) c.join();
      }
    }
    std::set<std::string> acknowledged() {
      std::lock_guard<std::mutex> lock(mu_);
      return acknowledged_;
    }
    // Waits (at most 10 s) until `n` more creates than now are acknowledged.
    void WaitForMore(size_t n) {
      const size_t from = acknowledged().size();
      for (int i = 0; i < 500 && acknowledged().size() < from + n; ++i) absl::SleepFor(absl::Milliseconds(20));
    }
    int refused() const { return refused_.load(); }

   private:
    std::mutex mu_;
    std::set<std::string> acknowledged_;
    std::atomic<bool> stop_{false};
    std::atomic<int> next_{0};
    std::atomic<int> refused_{0};
    std::vector<std::thread> clients_;
  };

  testing::TempDir dir_;
  testing::TlsClientOptions options_;
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::mutex replicas_mu_;  // the load's threads read the ports
  std::vector<std::unique_ptr<testing::ServerProcess>> replicas_;
};

// A replica's data directory holds its audit log: a second process pointed
// at it refuses to start, as with the file journal, and names the holder.
TEST_F(ReplicatedServeTest, ASecondProcessOnAReplicasDataDirectoryFailsToStart) {
  std::vector<std::string> args = {testing::GangkeeperBinary(), "serve"};
  for (const std::string& a : Args(0)) {
    args.push_back(absl::StartsWith(a, "--replica-id=") ? "--replica-id=intruder" : a);
  }
  auto second = testing::RunCommand(args, absl::Seconds(30), dir_.path());
  ASSERT_THAT(second, IsOk());
  EXPECT_NE(second->exit_code, 0);
  EXPECT_THAT(second->err, ::testing::HasSubstr("--data-dir " + dir_.File("data0")));
  EXPECT_THAT(second->err, ::testing::HasSubstr("another gangkeeper process uses this data directory"));
  EXPECT_THAT(second->err, ::testing::HasSubstr(absl::StrCat("pid ", replicas_[0]->pid(), " on ")));
  // Replica 0 serves on.
  absl::StatusOr<testing::HttpReply> r = Call(0, "GET", "/v1/workloads");
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ReplicatedServeTest, CreatesOnEveryReplicaAreAdmittedByTheOneLeader) {
  const int leader = Leader(absl::Seconds(15));
  ASSERT_GE(leader, 0) << "nobody was elected";
  std::set<std::string> names;
  // 12 one-GPU jobs per team, spread over the replicas: 16 fit the cohort.
  for (int n = 0; n < 24; ++n) {
    const std::string ns = n % 2 == 0 ? "team-a" : "team-b";
    const std::string name = absl::StrCat("job-", n);
    ASSERT_TRUE(Create(n % 3, ns, name, 1, 1)) << name;
    names.insert(ns + "/" + name);
  }
  const std::map<std::string, std::string> states = Converged(names);
  EXPECT_EQ(Admitted(states), 16) << "the cohort's 16 GPUs, no more, no less";
  EXPECT_EQ(states.size(), 24u);
  for (int i = 0; i < 3; ++i) CheckAuditLog(i);
}

TEST_F(ReplicatedServeTest, ADenialByAnyReplicaIsInEveryReplicasAuditLog) {
  const int leader = Leader(absl::Seconds(15));
  ASSERT_GE(leader, 0);
  const int follower = (leader + 2) % 3;
  // 16 GPUs: more than team-a can ever hold (8 + 4 borrowed).
  EXPECT_FALSE(Create(follower, "team-a", "too-big", 4, 4));
  for (int i = 0; i < 3; ++i) {
    std::vector<json> denials;
    for (int round = 0; round < 100 && denials.empty(); ++round) {
      for (const json& e : AuditEvents(i)) {
        if (e.value("action", "") == "review.denied") denials.push_back(e);
      }
      if (denials.empty()) absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_EQ(denials.size(), 1u) << "replica " << i;
    EXPECT_EQ(denials[0]["object"]["name"], "too-big") << denials[0].dump();
    EXPECT_EQ(denials[0]["object"]["kind"], "Job") << denials[0].dump();
    // Through the rate limit and the intake, marked and with its source.
    EXPECT_EQ(denials[0]["actorClaimed"], true) << denials[0].dump();
    EXPECT_EQ(denials[0]["details"]["source"], "127.0.0.1") << denials[0].dump();
  }
}

TEST_F(ReplicatedServeTest, KillingTheLeaderAgainAndAgainLosesNothing) {
  std::mt19937_64 rng(20261203);
  // Clients create two-GPU jobs on every live replica, all along.
  Load load(this, {"team-a", "team-b"}, 2);
  absl::Duration worst_takeover;
  for (int kill = 0; kill < kKills; ++kill) {
    const int leader = Leader(absl::Seconds(15));
    ASSERT_GE(leader, 0) << "nobody leads before kill " << kill;
    absl::SleepFor(absl::Milliseconds(200 + static_cast<int64_t>(rng() % 600)));
    const base::Stopwatch since_kill;
    Kill(leader);
    const int next_leader = Leader(absl::Seconds(15));
    ASSERT_GE(next_leader, 0) << "nobody took over after kill " << kill;
    // How long it took is a figure for the benchmark (test/bench/replica_bench.cc),
    // not a test: on a loaded machine it stretches.
    worst_takeover = std::max(worst_takeover, since_kill.Elapsed());
    Start(leader);
  }
  load.Stop();
  const std::set<std::string> want = load.acknowledged();
  ASSERT_GT(want.size(), 10u);
  const std::map<std::string, std::string> states = Converged(want);
  for (const std::string& name : want) EXPECT_EQ(states.count(name), 1u) << name << " was acknowledged, then lost";
  EXPECT_EQ(Admitted(states), 8) << "eight two-GPU jobs fill the cohort's 16 GPUs";
  for (int i = 0; i < 3; ++i) CheckAuditLog(i);
  std::printf("[ takeover ] worst time from SIGKILL to a new leader: %s over %d kills\n",
              absl::FormatDuration(worst_takeover).c_str(), kKills);
}

TEST_F(ReplicatedServeTest, APartitionedLeaderStopsActuatingAndAnotherLeads) {
  const int old = Leader(absl::Seconds(15));
  ASSERT_GE(old, 0);
  ASSERT_TRUE(Create(old, "team-a", "before", 1, 1));
  // SIGUSR2 (--test-hooks): its lease keep-alives stop, as in a partition.
  replicas_[old]->Signal(SIGUSR2);
  ASSERT_TRUE(replicas_[old]->WaitForStderr("lease keep-alives paused", absl::Seconds(5)));
  // It steps down by itself within the lease TTL (2 s) minus a renew period,
  // before etcd lets its key go; then another replica is elected.
  ASSERT_TRUE(replicas_[old]->WaitForStderr("leadership lost", absl::Seconds(5)));
  EXPECT_FALSE(Leads(old));
  int next = -1;
  for (int i = 0; i < 100 && (next < 0 || next == old); ++i) {
    next = Leader(absl::Seconds(10));
    if (next == old) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GE(next, 0);
  EXPECT_NE(next, old);
  // The old leader still takes registrations; the new one admits them.
  ASSERT_TRUE(Create(old, "team-a", "after", 1, 1));
  const std::map<std::string, std::string> states = Converged({"team-a/before", "team-a/after"});
  EXPECT_EQ(states.at("team-a/after"), "admitted");
  CheckAuditLog(next);
}

TEST_F(ReplicatedServeTest, EtcdRestartedUnderLoadLosesNothingAcknowledged) {
  ASSERT_GE(Leader(absl::Seconds(15)), 0);
  // Three clients create one-GPU jobs on every replica all along: before,
  // while etcd is down, and after it came back.
  Load load(this, {"team-a"}, 1);
  load.WaitForMore(20);
  etcd_->Kill();
  const size_t before = load.acknowledged().size();
  // Without etcd nothing is acknowledged: the webhook refuses (its failure
  // policy decides what the API server does).
  absl::SleepFor(absl::Seconds(1));
  EXPECT_FALSE(Create(0, "team-a", "during", 1, 1));
  ASSERT_THAT(etcd_->Restart(), IsOk());
  ASSERT_GE(Leader(absl::Seconds(20)), 0) << "nobody leads after etcd came back";
  load.WaitForMore(20);
  load.Stop();
  EXPECT_GT(load.refused(), 0) << "creates while etcd was down were acknowledged";
  const std::set<std::string> want = load.acknowledged();
  EXPECT_GE(want.size(), before + 20) << "the load did not go on after etcd came back";
  const std::map<std::string, std::string> states = Converged(want);
  for (const std::string& name : want) EXPECT_EQ(states.count(name), 1u) << name << " was acknowledged, then lost";
  EXPECT_EQ(states.count("team-a/during"), 0u);
  EXPECT_EQ(Admitted(states), 12) << "team-a's 8 GPUs and the 4 it may borrow";
  for (int i = 0; i < 3; ++i) CheckAuditLog(i);
}

TEST_F(ReplicatedServeTest, QuotaChangesThroughAnyReplicaAreAppliedByTheLeaderAndNoneIsLost) {
  const int leader = Leader(absl::Seconds(15));
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % 3;
  // team-b uses its 8 GPUs, so team-a can borrow none: a 12-GPU gang of
  // team-a waits.
  ASSERT_TRUE(Create(leader, "team-b", "fill", 2, 4));
  ASSERT_TRUE(Create(follower, "team-a", "big", 3, 4));
  EXPECT_EQ(Converged({"team-b/fill", "team-a/big"}).at("team-a/big"), "pending");
  // Raise team-a's quota through a follower's API.
  const std::string cq = R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
    "metadata": {"name": "team-a"}, "spec": {"cohort": "shared", "namespaceSelector": {},
    "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "gpu",
    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}})";
  absl::StatusOr<testing::HttpReply> put =
      Call(follower, "PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a", cq);
  ASSERT_THAT(put, IsOk());
  ASSERT_EQ(put->status, 200) << put->body;
  // The answering replica shows it at once; the leader admits with it.
  absl::StatusOr<testing::HttpReply> got = Call(follower, "GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a");
  ASSERT_THAT(got, IsOk());
  EXPECT_NE(got->body.find(R"("nominalQuota":"16")"), std::string::npos) << got->body;
  EXPECT_EQ(Converged({"team-a/big"}).at("team-a/big"), "admitted");

  // Three LocalQueues created at once through the three replicas: each
  // change is made on top of the others, none overwrites another.
  std::vector<std::thread> writers;
  std::vector<int> status(3, 0);
  for (int i = 0; i < 3; ++i) {
    writers.emplace_back([&, i] {
      const std::string lq = absl::StrCat(R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "extra-)", i, R"(", "namespace": "team-b"}, "spec": {"clusterQueue": "team-b"}})");
      absl::StatusOr<testing::HttpReply> r =
          Call(i, "PUT", absl::StrCat("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/extra-", i), lq);
      status[i] = r.ok() ? r->status : -1;
    });
  }
  for (std::thread& w : writers) w.join();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status[i], 201) << "replica " << i;
  for (int i = 0; i < 3; ++i) {
    std::string body;
    for (int round = 0; round < 100; ++round) {
      absl::StatusOr<testing::HttpReply> r = Call(i, "GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues");
      body = r.ok() ? r->body : "";
      if (absl::StrContains(body, "extra-0") && absl::StrContains(body, "extra-1") &&
          absl::StrContains(body, "extra-2")) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    for (int q = 0; q < 3; ++q) {
      EXPECT_TRUE(absl::StrContains(body, absl::StrCat("extra-", q))) << "replica " << i << " lacks extra-" << q;
    }
  }
  // Every change is in every replica's audit log once, by its token.
  for (int i = 0; i < 3; ++i) {
    std::vector<json> events;
    for (int round = 0; round < 100; ++round) {
      events.clear();
      for (const json& e : AuditEvents(i)) {
        if (e.value("action", "") == "quota.changed" && e.value("actor", "") == "platform") events.push_back(e);
      }
      if (events.size() >= 4) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    EXPECT_EQ(events.size(), 4u) << "replica " << i;
  }
}

// The real binary on a real etcd that requires client certificates, as
// deploy/overlays/ha runs it: `gangkeeper serve --store etcd://...
// --etcd-ca --etcd-cert --etcd-key` answers a review and shows the
// workload; a wrong CA, a missing or foreign client certificate, or no TLS
// at all stop the start with a message naming the flag to fix.
TEST(EtcdTlsServeTest, ServesOverTlsWithAClientCertificateAndNamesTheFlagThatIsWrong) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("etcd"));
  std::filesystem::create_directories(dir.File("other"));
  absl::StatusOr<testing::EtcdTls> tls = testing::MakeEtcdCerts(dir.File("etcd"));
  ASSERT_THAT(tls, IsOk());
  ASSERT_THAT(testing::MakeEtcdCerts(dir.File("other")), IsOk());
  absl::StatusOr<std::unique_ptr<testing::EtcdProcess>> etcd = testing::EtcdProcess::StartTls(*tls);
  ASSERT_THAT(etcd, IsOk());
  auto certs =
      testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir.File("certs")}, absl::Seconds(30));
  ASSERT_THAT(certs, IsOk());
  ASSERT_EQ(certs->exit_code, 0) << certs->err;
  std::ofstream(dir.File("tokens.json"))
      << json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}}}).dump();
  std::filesystem::create_directories(dir.File("policies"));
  std::ofstream(dir.File("policies/queues.yaml")) << kPolicies;
  auto args = [&](const std::string& data, std::vector<std::string> etcd_flags) {
    std::vector<std::string> a = {"--webhook-addr=127.0.0.1:0",
                                  "--api-addr=127.0.0.1:0",
                                  "--tls-cert=" + dir.File("certs/tls.crt"),
                                  "--tls-key=" + dir.File("certs/tls.key"),
                                  "--data-dir=" + dir.File(data),
                                  "--policies=" + dir.File("policies"),
                                  "--kube=none",
                                  "--tokens=" + dir.File("tokens.json"),
                                  "--drain-delay=0s",
                                  "--store=etcd://" + (*etcd)->endpoint(),
                                  "--etcd-prefix=/gk/"};
    a.insert(a.end(), etcd_flags.begin(), etcd_flags.end());
    return a;
  };

  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server = testing::ServerProcess::Start(
      args("data", {"--etcd-ca=" + tls->client_ca_file, "--etcd-cert=" + tls->client_cert_file,
                    "--etcd-key=" + tls->client_key_file}),
      dir.path());
  ASSERT_THAT(server, IsOk());
  testing::TlsClientOptions o;
  o.ca_file = dir.File("certs/ca.crt");
  auto call = [&](int port, const std::string& method, const std::string& path,
                  const std::string& body = "") -> absl::StatusOr<testing::HttpReply> {
    auto c = testing::TlsConnection::Connect(port, o);
    if (!c.ok()) return c.status();
    return (*c)->Request(method, path, body, "Authorization: Bearer admin-secret\r\n");
  };
  // Ready once it shows the state from etcd (it leads: it is alone).
  bool ready = false;
  for (int i = 0; i < 150 && !ready; ++i) {
    absl::StatusOr<testing::HttpReply> r = call((*server)->api_port(), "GET", "/readyz");
    ready = r.ok() && r->status == 200;
    if (!ready) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(ready) << (*server)->Stderr();
  const json review = Review("CREATE", "req-tls", "team-a", "over-tls", Job("team-a", "over-tls", 2, 1), nullptr);
  absl::StatusOr<testing::HttpReply> answer = call((*server)->webhook_port(), "POST", "/validate", review.dump());
  ASSERT_THAT(answer, IsOk());
  EXPECT_EQ(answer->status, 200);
  EXPECT_THAT(answer->body, ::testing::HasSubstr(R"("allowed":true)"));
  std::string state;
  for (int i = 0; i < 150 && state != "admitted"; ++i) {
    absl::StatusOr<testing::HttpReply> r = call((*server)->api_port(), "GET", "/v1/workloads?state=all");
    if (r.ok() && r->status == 200) {
      for (const json& w : json::parse(r->body, nullptr, false).value("items", json::array())) {
        if (w.value("name", "") == "over-tls") state = w.value("state", "");
      }
    }
    if (state != "admitted") absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(state, "admitted") << "the workload, decided by this replica and kept in etcd";
  // It is in etcd: the journal has records under the prefix, read with
  // the client certificate.
  etcd::ClientOptions eo;
  eo.endpoints = {(*etcd)->endpoint()};
  eo.ca_file = tls->client_ca_file;
  eo.cert_file = tls->client_cert_file;
  eo.key_file = tls->client_key_file;
  absl::StatusOr<std::unique_ptr<etcd::Client>> reader = etcd::Client::Create(eo);
  ASSERT_THAT(reader, IsOk());
  etcd::RangeOptions journal;
  journal.range_end = etcd::PrefixEnd("/gk/journal/");
  journal.count_only = true;
  absl::StatusOr<etcd::RangeResult> records = (*reader)->Range("/gk/journal/", journal);
  ASSERT_THAT(records, IsOk());
  EXPECT_GT(records->count, 0);

  struct Case {
    const char* what;
    std::vector<std::string> flags;
    const char* names;  // the flag the error must name
  };
  const Case cases[] = {
      {"etcd's certificate is not from --etcd-ca",
       {"--etcd-ca=" + dir.File("other/ca.crt"), "--etcd-cert=" + tls->client_cert_file,
        "--etcd-key=" + tls->client_key_file},
       "--etcd-ca"},
      {"no client certificate", {"--etcd-ca=" + tls->client_ca_file}, "--etcd-cert"},
      {"a client certificate etcd's CA did not sign",
       {"--etcd-ca=" + tls->client_ca_file, "--etcd-cert=" + dir.File("other/client.crt"),
        "--etcd-key=" + dir.File("other/client.key")},
       "--etcd-cert"},
      {"no TLS to an etcd that speaks only TLS", {}, "--etcd-ca"},
  };
  int n = 0;
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.what);
    std::vector<std::string> argv = {testing::GangkeeperBinary(), "serve"};
    for (const std::string& a : args(absl::StrCat("bad", n++), tc.flags)) argv.push_back(a);
    absl::StatusOr<testing::CommandResult> r = testing::RunCommand(argv, absl::Seconds(60), dir.path());
    ASSERT_THAT(r, IsOk());
    EXPECT_NE(r->exit_code, 0) << "started without a working etcd connection";
    EXPECT_THAT(r->err, ::testing::HasSubstr(tc.names)) << r->err;
  }
}

}  // namespace
}  // namespace gangkeeper
