// Integration: the audit log's defences on the real binary over TLS on
// loopback (issue #20): the chain head on the API, `gangkeeper audit
// verify` on the data directory it left (intact, forged, cut off), a flood
// of forged denials that must not rotate a workload's history away, and
// the size cap that removes young events only out loud.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/metrics/prom_text.h"
#include "test/testing/audit_records.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::Sha256Hex;
using nlohmann::json;
using ::testing::HasSubstr;

// A CREATE review of a Job of `pods` pods of `gpus` GPUs in team-a's
// queue; 4 × 2 GPUs can never fit team-a-gpu (at most 6), so it is denied.
std::string AuditJobReview(const std::string& name, int pods, int gpus, const std::string& user = "alice") {
  json job = testing::Job("team-a", name, pods, gpus);
  job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpu-queue";
  json review = testing::Review("CREATE", "review-" + name, "team-a", name, job, nullptr);
  review["request"]["userInfo"]["username"] = user;
  return review.dump();
}

class AuditIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    json tokens = json::array({{{"name", "platform"}, {"sha256", Sha256Hex("admin-secret")}, {"role", "admin"}},
                               {{"name", "audit"}, {"sha256", Sha256Hex("audit-secret")}, {"role", "auditor"}},
                               {{"name", "dashboards"}, {"sha256", Sha256Hex("viewer-secret")}, {"role", "viewer"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();
    std::ofstream(dir_.File("hmac.key")) << "b1946ac92492d2347c6235b4d2611184\n";
    options_.ca_file = dir_.File("certs/ca.crt");
  }

  absl::Status StartServer(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0",
                                     "--tls-cert=" + dir_.File("certs/tls.crt"),
                                     "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
                                     "--policies=" + std::string(GK_SOURCE_DIR) + "/policies", "--kube=none",
                                     "--tokens=" + dir_.File("tokens.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> p = testing::ServerProcess::Start(args, dir_.path());
    if (!p.ok()) return p.status();
    server_ = *std::move(p);
    return absl::OkStatus();
  }
  void StopServer() {
    server_->Signal(SIGTERM);
    absl::StatusOr<int> code = server_->Wait(absl::Seconds(30));
    ASSERT_THAT(code, IsOk());
    EXPECT_EQ(*code, 0) << server_->Stderr();
  }

  // The answer to GET `path` on the API listener, with `token` unless "".
  testing::HttpReply ApiGet(const std::string& path, const std::string& token) {
    absl::StatusOr<std::unique_ptr<testing::TlsConnection>> c =
        testing::TlsConnection::Connect(server_->api_port(), options_);
    const std::string auth = token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n");
    absl::StatusOr<testing::HttpReply> r = c.ok() ? (*c)->Request("GET", path, "", auth) : c.status();
    EXPECT_THAT(r, IsOk()) << path;
    return r.ok() ? *std::move(r) : testing::HttpReply{};
  }
  std::pair<int, json> Get(const std::string& path, const std::string& token) {
    testing::HttpReply r = ApiGet(path, token);
    return {r.status, json::parse(r.body, nullptr, false)};
  }
  // One unlabelled sample of /metrics (-1 when absent).
  double Metric(const std::string& name) {
    absl::StatusOr<std::vector<testing::PromFamily>> fams = testing::ParsePromText(ApiGet("/metrics", "admin-secret").body);
    absl::StatusOr<double> v = fams.ok() ? testing::PromValue(*fams, name, {}) : fams.status();
    return v.ok() ? *v : -1;
  }
  // POSTs each review to /validate over `connections` keep-alive
  // connections at once; returns how many were answered `allowed: false`.
  int Validate(const std::vector<std::string>& reviews, int connections) {
    std::atomic<size_t> next{0};
    std::atomic<int> denied{0};
    std::vector<std::thread> threads;
    const base::Stopwatch watch;
    for (int t = 0; t < connections; ++t) {
      threads.emplace_back([&] {
        auto c = testing::TlsConnection::Connect(server_->webhook_port(), options_);
        if (!c.ok()) return;
        for (size_t i = next++; i < reviews.size() && watch.Elapsed() < absl::Seconds(120); i = next++) {
          auto r = (*c)->Request("POST", "/validate", reviews[i]);
          if (!r.ok()) return;
          if (r->body.find(R"("allowed":false)") != std::string::npos) ++denied;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return denied.load();
  }
  testing::CommandResult Verify(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {testing::GangkeeperBinary(), "audit", "verify", dir_.File("data")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = testing::RunCommand(args, absl::Seconds(60));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::CommandResult{};
  }
  std::vector<std::string> Segments() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_.File("data/audit"))) {
      if (e.path().extension() == ".log") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  testing::TempDir dir_;
  testing::TlsClientOptions options_;
  std::unique_ptr<testing::ServerProcess> server_;
};

TEST_F(AuditIntegrationTest, AMissingKeyFileIsAStartErrorNamingTheFlag) {
  absl::Status s = StartServer({"--audit-hmac-key=" + dir_.File("no-such.key")});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("--audit-hmac-key"));
  std::ofstream(dir_.File("empty.key")) << "";
  s = StartServer({"--audit-hmac-key=" + dir_.File("empty.key")});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("openssl rand -hex 32"));
}

TEST_F(AuditIntegrationTest, TheHeadIsServedToAuditorsAndVerifyChecksTheLogItLeft) {
  ASSERT_THAT(StartServer({"--audit-hmac-key=" + dir_.File("hmac.key")}), IsOk());
  EXPECT_EQ(Validate({AuditJobReview("first", 1, 2), AuditJobReview("too-big", 4, 2, "system:masters-claimed")}, 1), 1);
  // The head names the newest record: a seq, a SHA-256 and its HMAC.
  auto [status, head] = Get("/v1/audit/head", "audit-secret");
  ASSERT_EQ(status, 200) << head.dump();
  EXPECT_GT(head["seq"].get<uint64_t>(), 2u);
  EXPECT_EQ(head["chain"].get<std::string>().size(), 64u);
  EXPECT_EQ(head["hmac"].get<std::string>().size(), 64u);
  EXPECT_THAT(head["time"].get<std::string>(), ::testing::EndsWith("Z"));
  EXPECT_EQ(Get("/v1/audit/head", "admin-secret").first, 200);
  EXPECT_EQ(Get("/v1/audit/head", "viewer-secret").first, 403);
  EXPECT_EQ(Get("/v1/audit/head", "").first, 401);
  // The denial carries the caller's address and its claimed user.
  auto [denied_status, denied] = Get("/v1/audit?action=review.denied", "audit-secret");
  ASSERT_EQ(denied_status, 200);
  ASSERT_EQ(denied["items"].size(), 1u) << denied.dump();
  EXPECT_EQ(denied["items"][0]["actor"], "system:masters-claimed");
  EXPECT_EQ(denied["items"][0]["actorClaimed"], true);
  EXPECT_EQ(denied["items"][0]["details"]["source"], "127.0.0.1");
  auto [all_status, all] = Get("/v1/audit?limit=1000", "audit-secret");
  ASSERT_EQ(all_status, 200);
  // Every event whose actor came from a review says so; gangkeeper's own
  // decisions do not.
  for (const json& e : all["items"]) {
    EXPECT_EQ(e.value("actorClaimed", false), e["actor"] != "gangkeeper") << e.dump();
  }
  const uint64_t last_seen = Get("/v1/audit/head", "audit-secret").second["seq"].get<uint64_t>();
  StopServer();

  // Intact, with and without the key.
  testing::CommandResult ok = Verify({"--audit-hmac-key=" + dir_.File("hmac.key")});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("hash chain intact; HMAC confirmed on"));
  EXPECT_THAT(ok.out, HasSubstr(absl::StrCat("to ", last_seen)));
  testing::CommandResult no_key = Verify();
  EXPECT_EQ(no_key.exit_code, 0) << no_key.out << no_key.err;
  EXPECT_THAT(no_key.out, HasSubstr("not checked (no --audit-hmac-key)"));

  // The denial's actor rewritten and its CRC recomputed: named.
  const std::string segment = Segments().back();
  const std::string original = ReadFile(segment);
  std::string bytes = original;
  uint64_t forged = 0;
  for (const testing::SegmentRecord& r : testing::SegmentRecords(bytes)) {
    if (r.payload.find("system:masters-claimed") != std::string::npos) forged = r.seq;
  }
  ASSERT_NE(forged, 0u);
  ASSERT_TRUE(testing::ForgeRecord(&bytes, forged, "system:masters-claimed", "someone-else"));
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  testing::CommandResult bad = Verify({"--audit-hmac-key=" + dir_.File("hmac.key")});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_THAT(bad.out, HasSubstr(absl::StrCat("ERROR: ", std::filesystem::path(segment).filename().string(),
                                              ": record ", forged, ": the hash chain does not match")));

  // Restored, then its last two records cut off: a warning with the count.
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << original;
  const std::vector<testing::SegmentRecord> records = testing::SegmentRecords(original);
  ASSERT_GE(records.size(), 2u);
  std::filesystem::resize_file(segment, records[records.size() - 2].offset);
  testing::CommandResult cut = Verify({"--audit-hmac-key=" + dir_.File("hmac.key")});
  EXPECT_EQ(cut.exit_code, 3) << cut.out << cut.err;
  EXPECT_THAT(cut.out, HasSubstr("WARNING: HEAD: record"));
  EXPECT_THAT(cut.out, HasSubstr("truncated tail: 2 record(s)"));
}

TEST_F(AuditIntegrationTest, AFloodOfForgedDenialsLeavesAWorkloadsHistoryQueryable) {
  // 1 MiB of log (128 KiB segments); 5 denials a second, 50 at once.
  ASSERT_THAT(StartServer({"--audit-max-mib=1", "--audit-denials-per-second=5"}), IsOk());
  EXPECT_EQ(Validate({AuditJobReview("first", 1, 2)}, 1), 0);
  std::vector<std::string> flood;
  for (int i = 0; i < 3000; ++i) flood.push_back(AuditJobReview(absl::StrCat("forged-", i), 4, 2, "system:admin"));
  ASSERT_GT(flood.size() * 800, 2u << 20) << "one event each would outrun the size cap";
  const base::Stopwatch watch;
  EXPECT_EQ(Validate(flood, 4), 3000);
  const double seconds = absl::ToDoubleSeconds(watch.Elapsed());
  // The workload's story is all there, and nothing was rotated away.
  json history;
  for (int i = 0; i < 100; ++i) {  // its release is recorded a batch later
    history = Get("/v1/audit?namespace=team-a&name=first", "audit-secret").second;
    if (history["items"].size() >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<std::string> actions;
  for (const json& e : history["items"]) actions.push_back(e["action"].get<std::string>());
  EXPECT_THAT(actions, ::testing::ElementsAre("workload.pending", "workload.admitted", "workload.released"));
  EXPECT_EQ(Metric("gangkeeper_audit_retention_forced_total"), 0);
  auto [denied_status, denied] = Get("/v1/audit?action=review.denied&limit=1000", "audit-secret");
  ASSERT_EQ(denied_status, 200);
  const double written = static_cast<double>(denied["items"].size());
  EXPECT_LE(written, 50 + 5 * (seconds + 1));
  EXPECT_GE(Metric("gangkeeper_audit_denials_suppressed_total"), 3000 - written);
  StopServer();
  // The suppressed ones were summarised at the stop; the log verifies.
  ASSERT_THAT(StartServer({"--audit-max-mib=1", "--audit-denials-per-second=5"}), IsOk());
  auto [told_status, told] = Get("/v1/audit?action=review.denials_suppressed", "audit-secret");
  ASSERT_EQ(told_status, 200);
  double counted = 0, from_loopback = 0;
  for (const json& e : told["items"]) {
    counted += e["details"]["count"].get<double>();
    from_loopback += e["details"]["sources"].value("127.0.0.1", 0.0);
  }
  EXPECT_EQ(counted + written, 3000) << told.dump();
  EXPECT_EQ(from_loopback, counted);
  StopServer();
  testing::CommandResult ok = Verify();
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

TEST_F(AuditIntegrationTest, TheSizeCapRemovesYoungEventsOnlyWithALogLineAMetricAndAnEvent) {
  // No denial limit to speak of: every denial is an event, and 1 MiB fills.
  ASSERT_THAT(StartServer({"--audit-max-mib=1", "--audit-denials-per-second=100000"}), IsOk());
  std::vector<std::string> reviews;
  for (int i = 0; i < 2500; ++i) reviews.push_back(AuditJobReview(absl::StrCat("big-", i), 4, 2));
  EXPECT_EQ(Validate(reviews, 8), 2500);
  EXPECT_GT(Metric("gangkeeper_audit_retention_forced_total"), 0);
  EXPECT_GT(Metric("gangkeeper_audit_retention_forced_events_total"), 0);
  EXPECT_GE(Metric("gangkeeper_audit_oldest_event_age_seconds"), 0);
  EXPECT_TRUE(server_->WaitForStderr("younger than the minimum retention of 168h", absl::Seconds(5)))
      << server_->Stderr();
  auto [status, forced] = Get("/v1/audit?action=audit.retention_forced", "audit-secret");
  ASSERT_EQ(status, 200);
  ASSERT_FALSE(forced["items"].empty());
  EXPECT_GT(forced["items"][0]["details"]["events"].get<int>(), 0);
  EXPECT_EQ(forced["items"][0]["details"]["minRetention"], "168h");
  StopServer();
  // Through rotation and retention the chain still checks (BASE).
  testing::CommandResult ok = Verify();
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace gangkeeper
