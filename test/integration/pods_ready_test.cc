// Integration: waitForPodsReady through the real binary and FakeKubeApi.
// The policies are the repository's plus a Kueue Configuration with a
// short timeout and backoff; the test plays the Job controller, writing
// status.ready. A Job whose pods never become ready is evicted (suspended)
// after the timeout, requeued after its backoff, and admitted again once
// quota frees; a Job whose pods are ready keeps running. Real time passes
// here (the binary's clock); the broker's own tests use a test clock.
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/integration/kube_fixture.h"

namespace gangkeeper {
namespace {

using nlohmann::json;
using namespace ::gangkeeper::kube_it;  // NOLINT: the fixture and its objects

class PodsReadyIntegrationTest : public KubeIntegrationTest {
 protected:
  PodsReadyIntegrationTest() {
    const std::string policies = dir_.File("policies");
    std::filesystem::create_directories(policies);
    for (const auto& f : std::filesystem::directory_iterator(std::string(GK_SOURCE_DIR) + "/policies")) {
      if (f.path().extension() == ".yaml") std::filesystem::copy_file(f.path(), policies + "/" + f.path().filename().string());
    }
    std::ofstream(policies + "/kueue-configuration.yaml") << R"(apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 4s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Creation
    backoffBaseSeconds: 1
    backoffMaxSeconds: 2
)";
    extra_flags_ = {"--policies=" + policies};
  }

  // The Job controller: `ready` of the Job's pods are ready.
  void SetReady(const std::string& name, int ready) {
    json j = GetJob(name);
    j["status"]["startTime"] = "2026-12-06T10:00:00Z";
    j["status"]["active"] = ready;
    j["status"]["ready"] = ready;
    ASSERT_TRUE(fake_->Replace(absl::StrCat(kJobs, "/", name), j).ok());
  }

  // The Kubernetes Events gangkeeper posted about `name` with `reason`.
  std::vector<std::string> EventNotes(const std::string& name, const std::string& reason) {
    std::vector<std::string> out;
    for (const testing::RecordedCall& c : fake_->Calls()) {
      if (c.method != "POST" || !absl::StrContains(c.path, "/events")) continue;
      json e = json::parse(c.body, nullptr, false);
      if (!e.is_object() || e.value("reason", "") != reason) continue;
      if (!e.contains("regarding") || e["regarding"].value("name", "") != name) continue;
      out.push_back(e.value("note", ""));
    }
    return out;
  }
};

TEST_F(PodsReadyIntegrationTest, ANeverReadyJobIsEvictedRequeuedAndReadmittedWhileAReadyOneKeepsRunning) {
  // team-a: 4 GPUs, borrowing up to 2 more from team-b's idle ones.
  SubmitJob(Job("steady", 2, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("steady"); })) << server_->Stderr();
  SetReady("steady", 2);
  SubmitJob(Job("stuck", 4, 1));
  ASSERT_TRUE(WaitFor([&] { return Released("stuck"); })) << server_->Stderr();
  SubmitJob(Job("next", 2, 1));  // no room (8 > 6) until stuck goes
  // stuck's pods never become ready: evicted whole after the timeout.
  ASSERT_TRUE(WaitFor([&] { return !EventNotes("stuck", "Evicted").empty(); })) << server_->Stderr();
  EXPECT_THAT(EventNotes("stuck", "Evicted")[0], ::testing::HasSubstr("PodsReadyTimeout: 0 of 4 pods ready"));
  // Its quota freed, next is admitted (and becomes ready); stuck, requeued
  // after its backoff, waits for room.
  ASSERT_TRUE(WaitFor([&] { return Released("next"); })) << server_->Stderr();
  SetReady("next", 2);
  EXPECT_TRUE(Suspended(GetJob("stuck")));
  ASSERT_TRUE(WaitFor([&] { return !EventNotes("stuck", "RequeueBackoff").empty(); })) << server_->Stderr();
  EXPECT_THAT(EventNotes("stuck", "RequeueBackoff")[0], ::testing::HasSubstr("backoff of 1s"));
  absl::SleepFor(absl::Seconds(2));
  EXPECT_TRUE(Suspended(GetJob("stuck"))) << "no room while steady and next run";
  // The ready Job kept running all along.
  EXPECT_TRUE(Released("steady"));
  EXPECT_TRUE(EventNotes("steady", "Evicted").empty());
  // steady ends: stuck is admitted again.
  Complete("steady");
  ASSERT_TRUE(WaitFor([&] { return Released("stuck"); })) << server_->Stderr();
  SetReady("stuck", 4);
  absl::SleepFor(absl::Seconds(5));  // past the timeout: ready, so it stays
  EXPECT_TRUE(Released("stuck"));
  EXPECT_TRUE(Released("next"));
  EXPECT_EQ(EventNotes("stuck", "Evicted").size(), 1u);
}

}  // namespace
}  // namespace gangkeeper
