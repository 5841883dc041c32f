// Integration: durability of the real binary (issue #8). Concurrent clients
// create, delete and finish Jobs through the webhook and change team-a's
// quota through the API, over TLS, while the
// server is killed with SIGKILL at random moments (fixed seed) and started
// again on the same --data-dir; and a SIGTERM under load. Afterwards every
// acknowledged change is there, admitted gangs are the same as before a
// kill, no ClusterQueue ever held more than its quota allows (replayed from
// the audit log), and the audit log is numbered without gaps or repeats.
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

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
// Its own namespace: a unity batch merges the anonymous namespaces of the
// target's files, and testing::Job would hide the fixture's Job there.
namespace crash_it {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::Job;
using ::gangkeeper::testing::Review;
using ::gangkeeper::testing::Sha256Hex;
using nlohmann::json;
using ::testing::HasSubstr;

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
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
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

// team-a's ClusterQueue as the API gets it, with NOMINAL to fill in.
constexpr char kTeamA[] = R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
  "metadata": {"name": "team-a"},
  "spec": {"cohort": "shared", "namespaceSelector": {},
    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "gpu",
      "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "NOMINAL", "borrowingLimit": "4"}]}]}]}})";

// What the clients were told, shared by the load threads.
struct Ledger {
  std::mutex mu;
  std::map<std::string, std::string> live;  // "ns/name" -> ns, created and acknowledged, not ended
  std::set<std::string> ended;              // deleted or finished, acknowledged
  std::set<std::string> uncertain;          // ended without an answer: either way is right
  int creates = 0, deletes = 0, finishes = 0, refused = 0, cut = 0, quota_changes = 0;
  // team-a's GPU nominal quota as last acknowledged by the API, and the
  // values of changes that got no answer since (either may have happened).
  int quota = 8;
  std::set<int> quota_unsure;
  // Quota changes in flight, by number: their values, and the values of the
  // changes that were in flight at the same time (the server may have
  // applied those after this one, though their answers came first).
  int next_change = 0;
  std::map<int, std::pair<int, std::set<int>>> changes_in_flight;
};

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    json tokens = json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/queues.yaml")) << kPolicies;
    options_.ca_file = dir_.File("certs/ca.crt");
  }

  void StartServer() {
    auto p = testing::ServerProcess::Start(
        {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
         "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
         "--policies=" + dir_.File("policies"), "--kube=none", "--tokens=" + dir_.File("tokens.json"),
         "--drain-delay=0s", "--snapshot-every-records=200"},
        dir_.path());
    ASSERT_THAT(p, IsOk());
    server_ = *std::move(p);
  }

  json Get(const std::string& path) {
    auto c = testing::TlsConnection::Connect(server_->api_port(), options_);
    EXPECT_THAT(c, IsOk());
    if (!c.ok()) return json();
    auto r = (*c)->Request("GET", path, "", "Authorization: Bearer admin-secret\r\n");
    EXPECT_THAT(r, IsOk());
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  // name -> state ("pending" / "admitted") of every tracked workload.
  std::map<std::string, std::string> States() {
    std::map<std::string, std::string> out;
    json all = Get("/v1/workloads?state=all");
    for (const json& w : all["items"]) {
      // The tracked ones; recently finished ones are kept in memory only.
      if (w["state"] == "finished") continue;
      out[w["namespace"].get<std::string>() + "/" + w["name"].get<std::string>()] = w["state"].get<std::string>();
    }
    return out;
  }

  // No ClusterQueue beyond nominal + borrowing limit, the cohort within its
  // total nominal quota.
  void ExpectNoOvercommit(const std::string& when) {
    double cohort_usage = 0;
    for (const char* cq : {"team-a", "team-b"}) {
      json st = Get(absl::StrCat("/v1/clusterqueues/", cq, "/status"));
      for (const json& r : st["resources"]) {
        const double usage = std::stod(r["usage"].get<std::string>());
        cohort_usage += usage;
        // team-a's nominal moves between 6 and 10 (+ borrowing limit 4); team-b has 8 + 4.
        EXPECT_LE(usage, 14) << when << ": " << cq << " uses " << usage << " GPUs";
      }
    }
    EXPECT_LE(cohort_usage, 18) << when << ": the cohort uses " << cohort_usage << " of at most 18 GPUs";
  }

  // Load: `threads` clients send random creates, deletes and finishes until `stop`.
  void RunLoad(int threads, uint64_t seed, std::atomic<bool>* stop, Ledger* ledger, int round) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        std::mt19937_64 rng(seed * 97 + static_cast<uint64_t>(t));
        std::unique_ptr<testing::TlsConnection> conn;
        for (int i = 0; i < 100000 && !stop->load(); ++i) {
          if (conn == nullptr) {
            auto c = testing::TlsConnection::Connect(server_->webhook_port(), options_);
            if (!c.ok()) return;  // the server is gone
            conn = *std::move(c);
          }
          const int dice = static_cast<int>(rng() % 100);
          if (dice < 5) {
            // A quota change through the API: team-a's nominal GPUs to 6, 8 or 10.
            const int nominal = 6 + 2 * static_cast<int>(rng() % 3);
            std::string cq(kTeamA);
            cq.replace(cq.find("NOMINAL"), 7, std::to_string(nominal));
            auto api = testing::TlsConnection::Connect(server_->api_port(), options_);
            if (!api.ok()) return;
            int change = 0;
            {
              std::lock_guard<std::mutex> lock(ledger->mu);
              change = ledger->next_change++;
              std::set<int> overlapping;
              for (auto& [n, other] : ledger->changes_in_flight) {
                other.second.insert(nominal);
                overlapping.insert(other.first);
              }
              ledger->changes_in_flight[change] = {nominal, std::move(overlapping)};
            }
            auto r = (*api)->Request("PUT", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a", cq,
                                     "Authorization: Bearer admin-secret\r\n");
            std::lock_guard<std::mutex> lock(ledger->mu);
            std::set<int> overlapping = std::move(ledger->changes_in_flight[change].second);
            ledger->changes_in_flight.erase(change);
            if (r.ok() && r->status == 200) {
              ledger->quota = nominal;
              ledger->quota_unsure = std::move(overlapping);
              ++ledger->quota_changes;
            } else {
              ledger->quota_unsure.insert(nominal);
              if (!r.ok()) return;
            }
            continue;
          }
          std::string victim;
          if (dice >= 70) {
            std::lock_guard<std::mutex> lock(ledger->mu);
            if (!ledger->live.empty()) {
              auto it = ledger->live.begin();
              std::advance(it, static_cast<long>(rng() % ledger->live.size()));
              victim = it->first;
            }
          }
          json review;
          std::string key;
          std::string kind;
          if (victim.empty()) {
            const std::string ns = rng() % 2 == 0 ? "team-a" : "team-b";
            const std::string name = absl::StrCat("job-", round, "-", t, "-", i);
            key = ns + "/" + name;
            kind = "create";
            review = Review("CREATE", "r-" + name, ns, name,
                            Job(ns, name, 1 + static_cast<int>(rng() % 3), 1 + static_cast<int>(rng() % 2)), nullptr);
          } else {
            key = victim;
            const std::string ns = victim.substr(0, victim.find('/'));
            const std::string name = victim.substr(victim.find('/') + 1);
            if (dice >= 85) {
              kind = "delete";
              review = Review("DELETE", absl::StrCat("d-", name, "-", round), ns, name, nullptr, Job(ns, name, 1, 1));
            } else {
              kind = "finish";
              review = Review("UPDATE", absl::StrCat("f-", name, "-", round), ns, name, Job(ns, name, 1, 1, true),
                              Job(ns, name, 1, 1), "status");
            }
          }
          auto r = conn->Request("POST", "/validate", review.dump());
          if (!r.ok() || r->status != 200) {
            std::lock_guard<std::mutex> lock(ledger->mu);
            ++ledger->cut;  // no answer: the kill came first; nothing is promised
            // A delete or finish may or may not have been recorded.
            if (kind != "create" && ledger->live.erase(key) != 0) ledger->uncertain.insert(key);
            conn.reset();
            if (!r.ok()) return;
            continue;
          }
          const bool allowed = r->body.find(R"("allowed":true)") != std::string::npos;
          std::lock_guard<std::mutex> lock(ledger->mu);
          if (kind == "create") {
            if (allowed) {
              ledger->live[key] = key.substr(0, key.find('/'));
              ++ledger->creates;
            } else {
              ++ledger->refused;
            }
          } else if (allowed && (ledger->live.erase(key) != 0 || ledger->uncertain.erase(key) != 0)) {
            ledger->ended.insert(key);
            ++(kind == "delete" ? ledger->deletes : ledger->finishes);
          }
        }
      });
    }
    for (std::thread& th : pool) th.join();
  }

  // Every audit event, through the API's pages.
  std::vector<json> AuditEvents() {
    std::vector<json> out;
    std::string cursor;
    for (int page = 0; page < 10000; ++page) {
      json p = Get(absl::StrCat("/v1/audit?limit=1000", cursor.empty() ? "" : "&cursor=" + cursor));
      for (const json& e : p["items"]) out.push_back(e);
      if (!p.contains("next")) break;
      cursor = p["next"].get<std::string>();
    }
    return out;
  }

  // The audit log, read back: numbered 1, 2, 3, ... with no gap and no
  // repeat, and replaying what it says was admitted and freed never puts a
  // ClusterQueue over nominal + borrowing limit or the cohort over its total.
  void CheckAuditLog() {
    const std::vector<json> events = AuditEvents();
    ASSERT_FALSE(events.empty());
    std::map<std::string, double> usage;  // ClusterQueue -> GPUs held
    std::map<std::string, std::string> holder;  // workload -> ClusterQueue holding quota
    uint64_t expect = 1;
    int admitted = 0;
    for (const json& e : events) {
      const uint64_t seq = e["seq"].get<uint64_t>();
      ASSERT_EQ(seq, expect) << "audit seq " << expect << " is missing or repeated: " << e.dump();
      ++expect;
      const std::string action = e["action"].get<std::string>();
      const std::string key = e["object"]["namespace"].get<std::string>() + "/" + e["object"]["name"].get<std::string>();
      auto gpus = [](const json& a) {
        double n = 0;
        for (const auto& [flavor, resources] : a["usage"].items()) {
          if (resources.contains("nvidia.com/gpu")) n += std::stod(resources["nvidia.com/gpu"].get<std::string>());
        }
        return n;
      };
      if (action == "workload.admitted") {
        ++admitted;
        const json& a = e["details"]["assignment"];
        const std::string cq = a["clusterQueue"].get<std::string>();
        EXPECT_EQ(holder.count(key), 0u) << key << " admitted twice without freeing (seq " << seq << ")";
        holder[key] = cq;
        usage[cq] += gpus(a);
        EXPECT_LE(usage[cq], 14) << "seq " << seq << ": " << cq << " holds " << usage[cq] << " GPUs";
        EXPECT_LE(usage["team-a"] + usage["team-b"], 18) << "seq " << seq << ": the cohort is over 18 GPUs";
      } else if (e["details"].contains("freed")) {
        const json& a = e["details"]["freed"];
        usage[a["clusterQueue"].get<std::string>()] -= gpus(a);
        holder.erase(key);
      }
    }
    EXPECT_GT(admitted, 10);
  }

  void CheckAgainst(Ledger& ledger, const std::string& when) {
    const std::map<std::string, std::string> states = States();
    json cq = Get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a");
    const int nominal = std::stoi(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"].get<std::string>());
    std::lock_guard<std::mutex> lock(ledger.mu);
    EXPECT_TRUE(nominal == ledger.quota || ledger.quota_unsure.count(nominal) != 0)
        << when << ": team-a's nominal quota is " << nominal << ", the last acknowledged change set " << ledger.quota;
    for (const auto& [key, ns] : ledger.live) {
      EXPECT_EQ(states.count(key), 1u) << when << ": " << key << " was acknowledged but is gone";
    }
    for (const std::string& key : ledger.ended) {
      EXPECT_EQ(states.count(key), 0u) << when << ": " << key << " was deleted or finished but is back";
    }
  }

  testing::TempDir dir_;
  testing::TlsClientOptions options_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(CrashTest, EveryAcknowledgedChangeSurvivesTwentyKills) {
  std::mt19937_64 rng(20261203);
  Ledger ledger;
  constexpr int kKills = 22;
  for (int round = 0; round < kKills; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    StartServer();
    ASSERT_NE(server_, nullptr);
    CheckAgainst(ledger, absl::StrCat("after kill ", round));
    ExpectNoOvercommit(absl::StrCat("after kill ", round));
    std::atomic<bool> stop{false};
    const bool quiesced = round % 2 == 1;
    std::thread load([&] { RunLoad(3, static_cast<uint64_t>(round) + 1, &stop, &ledger, round); });
    absl::SleepFor(absl::Milliseconds(100 + static_cast<int64_t>(rng() % 500)));
    std::map<std::string, std::string> before;
    if (quiesced) {
      stop = true;
      load.join();
      // Let the broker settle: answers to its own releases and suspensions
      // (--kube none) come one batch later, and a preemption takes two.
      before = States();
      for (int i = 0; i < 30; ++i) {
        absl::SleepFor(absl::Milliseconds(200));
        std::map<std::string, std::string> again = States();
        if (again == before) break;
        before = std::move(again);
      }
      ExpectNoOvercommit(absl::StrCat("before kill ", round));
    }
    server_->Signal(SIGKILL);
    stop = true;
    if (load.joinable()) load.join();
    ASSERT_THAT(server_->Wait(absl::Seconds(20)), IsOk());
    server_.reset();
    if (quiesced) {
      // Admitted gangs (and pending ones) are exactly the same after the crash.
      StartServer();
      ASSERT_NE(server_, nullptr);
      EXPECT_EQ(States(), before);
      server_->Signal(SIGKILL);
      ASSERT_THAT(server_->Wait(absl::Seconds(20)), IsOk());
      server_.reset();
    }
  }
  StartServer();
  ASSERT_NE(server_, nullptr);
  CheckAgainst(ledger, "at the end");
  ExpectNoOvercommit("at the end");
  CheckAuditLog();
  std::lock_guard<std::mutex> lock(ledger.mu);
  EXPECT_GT(ledger.creates, 100) << "the load did too little to prove anything";
  EXPECT_GT(ledger.deletes + ledger.finishes, 20);
  EXPECT_GT(ledger.quota_changes, 5);
  RecordProperty("creates", ledger.creates);
  RecordProperty("ended", ledger.deletes + ledger.finishes);
}

TEST_F(CrashTest, SigtermUnderLoadExitsZeroAndLosesNothing) {
  StartServer();
  ASSERT_NE(server_, nullptr);
  Ledger ledger;
  std::atomic<bool> stop{false};
  std::thread load([&] { RunLoad(4, 7, &stop, &ledger, 0); });
  absl::SleepFor(absl::Milliseconds(700));
  server_->Signal(SIGTERM);
  absl::StatusOr<int> code = server_->Wait(absl::Seconds(40));
  stop = true;
  load.join();
  ASSERT_THAT(code, IsOk());
  EXPECT_EQ(*code, 0) << server_->Stderr();
  EXPECT_THAT(server_->Stderr(), HasSubstr("stopped cleanly"));
  server_.reset();
  StartServer();
  ASSERT_NE(server_, nullptr);
  CheckAgainst(ledger, "after SIGTERM");
  // The final snapshot covered everything: nothing to replay.
  EXPECT_THAT(server_->Stderr(), HasSubstr("0 record(s) replayed")) << server_->Stderr();
  std::lock_guard<std::mutex> lock(ledger.mu);
  EXPECT_GT(ledger.creates, 10);
}

}  // namespace crash_it
}  // namespace gangkeeper
