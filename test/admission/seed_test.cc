// The seed's own manifests, wrapped in AdmissionReviews as the API server
// sends them: every managed object is suspended by /mutate with a patch that
// `kubectl patch --local --type=json` applies, a second pass changes nothing,
// and /validate accepts the seed's two-team Job against the example policies.
#include <filesystem>
#include <fstream>

#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/model/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/admission/review_builder.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::admission {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::Contains;
using ::testing::HasSubstr;

std::shared_ptr<const model::PolicySet> SeedExamplePolicies() {
  auto loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
  EXPECT_TRUE(loaded.ok());
  return std::make_shared<model::PolicySet>(loaded.ok() ? loaded->policies : model::PolicySet{});
}

struct Managed {
  const char* group;
  const char* resource;
  const char* suspended_at;  // JSON pointer of the suspend switch
};

// The managed kinds that appear in the seed manifests.
std::map<std::string, Managed> Kinds() {
  return {{"Job", {"batch", "jobs", "/spec/suspend"}},
          {"PyTorchJob", {"kubeflow.org", "pytorchjobs", "/spec/runPolicy/suspend"}},
          {"TFJob", {"kubeflow.org", "tfjobs", "/spec/runPolicy/suspend"}},
          {"Pod", {"", "pods", "/spec/schedulingGates"}}};
}

TEST(SeedTest, EveryManagedSeedObjectIsSuspendedOnceAndKubectlAgrees) {
  auto policies = SeedExamplePolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  int checked = 0;
  std::set<std::string> kinds_seen;
  const std::map<std::string, Managed> kinds = Kinds();
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GK_SOURCE_DIR) + "/test/fixtures/seed")) {
    if (entry.path().extension() != ".yaml") continue;
    auto docs = testing::YamlFileToJson(entry.path().string());
    ASSERT_THAT(docs, IsOk()) << entry.path();
    for (const std::string& text : *docs) {
      nlohmann::json object = nlohmann::json::parse(text, nullptr, false);
      if (!object.is_object() || !object.contains("kind")) continue;
      auto kind = kinds.find(object.value("kind", ""));
      if (kind == kinds.end()) continue;
      SCOPED_TRACE(entry.path().filename().string() + " " + kind->first);
      // Queue every seed object (most seed manifests predate the queue label).
      object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpu-queue";
      ReviewSpec s;
      s.group = kind->second.group;
      s.kind = kind->first;
      s.resource = kind->second.resource;
      s.namespace_name = object["metadata"].value("namespace", "default");
      s.name = object["metadata"].value("name", "");
      s.object = object;
      Answer a = ParseAnswer(hook.Mutate(ReviewBody(s)).body);
      ASSERT_TRUE(a.allowed());
      const bool already = Suspended(object, kind->second.suspended_at);
      if (already) {
        EXPECT_TRUE(a.patch.is_null()) << "an already suspended object needs no patch";
        continue;
      }
      ASSERT_FALSE(a.patch.is_null());
      nlohmann::json mutated = KubectlPatch(object, a.patch);
      EXPECT_TRUE(Suspended(mutated, kind->second.suspended_at)) << mutated.dump();
      EXPECT_EQ(mutated, object.patch(a.patch));
      s.object = mutated;
      EXPECT_TRUE(ParseAnswer(hook.Mutate(ReviewBody(s)).body).patch.is_null());
      kinds_seen.insert(kind->first);
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
  EXPECT_EQ(kinds_seen, (std::set<std::string>{"Job", "PyTorchJob", "TFJob", "Pod"}));
}

TEST(SeedTest, TheSeedTwoTeamJobIsAcceptedAndQueued) {
  auto policies = SeedExamplePolicies();
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([policies] { return policies; }, *registry, {});
  auto docs = testing::YamlFileToJson(std::string(GK_SOURCE_DIR) +
                                      "/test/fixtures/seed/seed000-L811-namespace-namespace-resourceflavor-"
                                      "clusterqueue.yaml");
  ASSERT_THAT(docs, IsOk());
  nlohmann::json job = nlohmann::json::parse(docs->back());
  ASSERT_EQ(job["kind"], "Job");
  ReviewSpec s;
  s.name = job["metadata"]["name"];
  s.object = job;
  Answer a = ParseAnswer(hook.Validate(ReviewBody(s)).body);
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains(HasSubstr("team-a/team-a-two-gpu-training (2 pods) is suspended and queued in "
                                               "LocalQueue gpu-queue -> ClusterQueue team-a-gpu")));
  auto record = registry->Find({"team-a", "team-a-two-gpu-training"});
  ASSERT_TRUE(record.has_value());
  ASSERT_EQ(record->workload.pod_sets.size(), 1u);
  EXPECT_EQ(record->workload.pod_sets[0].count, 2);
  EXPECT_EQ(record->workload.pod_sets[0].requests.at("nvidia.com/gpu"), quantity::Quantity::FromUnits(1));
  EXPECT_EQ(record->workload.pod_sets[0].requests.at("memory").Format(), "16Gi");
}

}  // namespace
}  // namespace gangkeeper::admission
