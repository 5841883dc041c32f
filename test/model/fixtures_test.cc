// Real manifests: the seed's, Kueue's documented examples, and policies/.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model/test_util.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::model {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Fixture(const std::string& rel) { return std::string(GK_SOURCE_DIR) + "/" + rel; }

std::vector<std::string> YamlFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FixturesTest, EverySeedManifestLoadsWithoutErrors) {
  std::vector<std::string> files = YamlFiles(Fixture("test/fixtures/seed"));
  ASSERT_GE(files.size(), 19u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto r = LoadPolicies(f);
    ASSERT_THAT(r, IsOk());
    EXPECT_FALSE(r->diagnostics.HasErrors()) << r->diagnostics.ErrorSummary();
  }
}

TEST(FixturesTest, SeedTwoTeamSetupDecodesItsPolicyObjects) {
  auto r = LoadPolicies(Fixture("test/fixtures/seed/seed000-L811-namespace-namespace-resourceflavor-clusterqueue.yaml"));
  ASSERT_THAT(r, IsOk());
  const PolicySet& p = r->policies;
  EXPECT_EQ(p.flavors.at("nvidia-gpu").node_labels.at("accelerator"), "nvidia");
  EXPECT_EQ(p.cluster_queues.at("team-a-gpu").resource_groups[0].flavors[0].resources[2].nominal,
            quantity::Quantity::FromUnits(4));
  EXPECT_EQ(p.cluster_queues.at("team-b-gpu").resource_groups[0].flavors[0].resources[2].nominal,
            quantity::Quantity::FromUnits(2));
  EXPECT_EQ(p.local_queues.at({"team-a", "gpu-queue"}).cluster_queue, "team-a-gpu");
  EXPECT_EQ(p.namespaces.size(), 2u);
  // The Job in the same file is skipped with a note.
  int notes = r->diagnostics.Count(Diagnostic::Severity::kNote);
  EXPECT_EQ(notes, 1);
  auto pc = LoadPolicies(Fixture("test/fixtures/seed/seed000-L991-priorityclass-priorityclass.yaml"));
  ASSERT_THAT(pc, IsOk());
  EXPECT_EQ(pc->policies.priority_classes.at("training-batch").value, 10000);
  EXPECT_EQ(pc->policies.priority_classes.at("training-batch").preemption_policy, PreemptionPolicy::kNever);
  EXPECT_EQ(pc->policies.priority_classes.at("inference-critical").preemption_policy,
            PreemptionPolicy::kPreemptLowerPriority);
}

TEST(FixturesTest, KueueExamplesLoadOrNameTheUnsupportedField) {
  std::vector<std::string> files = YamlFiles(Fixture("test/fixtures/kueue"));
  ASSERT_GE(files.size(), 11u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto r = LoadPolicies(f);
    ASSERT_THAT(r, IsOk());
    // Either clean, or every error names a field gangkeeper does not support.
    for (const Diagnostic& d : r->diagnostics.items) {
      if (d.severity != Diagnostic::Severity::kError) continue;
      EXPECT_THAT(d.message, HasSubstr("not supported")) << d.ToString();
      EXPECT_FALSE(d.path.empty()) << d.ToString();
    }
  }
  auto checks = LoadPolicies(Fixture("test/fixtures/kueue/admin-minimal-cq.yaml"));
  ASSERT_THAT(checks, IsOk());
  EXPECT_THAT(checks->diagnostics.ErrorSummary(), HasSubstr("ClusterQueue cluster-queue-2: spec.admissionChecksStrategy"));
  auto concurrent = LoadPolicies(Fixture("test/fixtures/kueue/admin-concurrent-admission-setup.yaml"));
  ASSERT_THAT(concurrent, IsOk());
  std::string warnings;
  for (const Diagnostic& d : concurrent->diagnostics.items) warnings += d.ToString() + "\n";
  EXPECT_THAT(warnings, HasSubstr("spec.concurrentAdmissionPolicy: concurrent admission"));
  const ClusterQueue& cq = concurrent->policies.cluster_queues.at("team-cluster-queue");
  ASSERT_EQ(cq.resource_groups[0].flavors.size(), 3u);
  EXPECT_EQ(cq.resource_groups[0].flavors[2].name, "spot");
  EXPECT_EQ(cq.resource_groups[0].flavors[2].resources[1].nominal.Format(), "64Gi");
}

// A ConfigMap mounted as a volume: each file sits in a hidden timestamped
// directory, "..data" links to it and the visible names link through
// "..data". Loading the mount must see every object once.
TEST(FixturesTest, PoliciesMountedFromAConfigMapLoadOnce) {
  namespace fs = std::filesystem;
  const fs::path mount = fs::temp_directory_path() / ("gk-configmap-" + std::to_string(::getpid()));
  fs::remove_all(mount);
  const fs::path real = mount / "..2026_12_03_10_00_00.123456789";
  fs::create_directories(real);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(Fixture("policies"))) {
    if (e.path().extension() != ".yaml") continue;
    fs::copy_file(e.path(), real / e.path().filename());
    names.push_back(e.path().filename().string());
  }
  ASSERT_FALSE(names.empty());
  fs::create_directory_symlink(real.filename(), mount / "..data");
  for (const std::string& n : names) fs::create_symlink(fs::path("..data") / n, mount / n);
  auto mounted = LoadPolicies(mount.string());
  auto plain = LoadPolicies(Fixture("policies"));
  fs::remove_all(mount);
  ASSERT_THAT(mounted, IsOk());
  ASSERT_THAT(plain, IsOk());
  EXPECT_FALSE(mounted->diagnostics.HasErrors()) << mounted->diagnostics.ErrorSummary();
  EXPECT_EQ(mounted->files, plain->files);
  EXPECT_EQ(mounted->policies.cluster_queues.size(), plain->policies.cluster_queues.size());
  EXPECT_EQ(mounted->policies.local_queues.size(), plain->policies.local_queues.size());
}

TEST(FixturesTest, ExamplePoliciesAreCleanAndComplete) {
  auto r = LoadPolicies(Fixture("policies"));
  ASSERT_THAT(r, IsOk());
  EXPECT_FALSE(r->diagnostics.HasErrors()) << r->diagnostics.ErrorSummary();
  EXPECT_EQ(r->diagnostics.Count(Diagnostic::Severity::kWarning), 0);
  const PolicySet& p = r->policies;
  EXPECT_EQ(p.flavors.count("nvidia-gpu"), 1u);
  EXPECT_EQ(p.cluster_queues.at("team-a-gpu").cohort, "gpu-shared");
  EXPECT_EQ(p.cluster_queues.at("team-b-gpu").cohort, "gpu-shared");
  EXPECT_EQ(p.local_queues.size(), 2u);
  EXPECT_EQ(p.priority_classes.at("training-batch").value, p.workload_priority_classes.at("training-batch").value);
  EXPECT_EQ(p.priority_classes.at("inference-critical").value,
            p.workload_priority_classes.at("inference-critical").value);
  ASSERT_EQ(p.gpu_node_pools.count("migmixed"), 1u);
  auto adv = Advertise(p.gpu_node_pools.at("migmixed"));
  ASSERT_THAT(adv, IsOk());
  EXPECT_EQ(adv->per_node.at("nvidia.com/mig-3g.40gb"), 1);
  EXPECT_EQ(adv->per_node.at("nvidia.com/mig-2g.20gb"), 1);
  EXPECT_EQ(adv->per_node.at("nvidia.com/mig-1g.10gb"), 2);
}

}  // namespace
}  // namespace gangkeeper::model
