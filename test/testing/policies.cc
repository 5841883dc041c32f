#include "test/testing/policies.h"

#include <utility>

#include "absl/status/statusor.h"

namespace gangkeeper::testing {

std::shared_ptr<const model::PolicySet> RepositoryPolicies() {
  absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return std::make_shared<const model::PolicySet>();
  EXPECT_FALSE(loaded->diagnostics.HasErrors()) << loaded->diagnostics.ErrorSummary();
  return std::make_shared<const model::PolicySet>(std::move(loaded->policies));
}

namespace {

std::string GpuResourceGroups(int64_t gpus, const std::string& flavor) {
  return "  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: " + flavor +
         "\n      resources: [{name: nvidia.com/gpu, nominalQuota: " + std::to_string(gpus) + "}]\n";
}

}  // namespace

std::string FlavorYaml(const std::string& name) {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: " + name + "}\n";
}

std::string CohortYaml(const std::string& name, const std::string& parent, int64_t gpus, const std::string& flavor) {
  std::string out = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: " + name + "}\n";
  if (parent.empty() && gpus == 0) return out + "spec: {}\n";
  out += "spec:\n";
  if (!parent.empty()) out += "  parentName: " + parent + "\n";
  if (gpus > 0) out += GpuResourceGroups(gpus, flavor);
  return out;
}

std::string ClusterQueueYaml(const std::string& name, const std::string& cohort, int64_t gpus,
                             const std::string& flavor) {
  std::string out = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: " + name +
                    "}\nspec:\n  namespaceSelector: {}\n";
  if (!cohort.empty()) out += "  cohort: " + cohort + "\n";
  return out + GpuResourceGroups(gpus, flavor);
}

std::string LocalQueueYaml(const std::string& namespace_name, const std::string& name,
                           const std::string& cluster_queue) {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " + name +
         ", namespace: " + namespace_name + "}\nspec: {clusterQueue: " + cluster_queue + "}\n";
}

std::string Manifests(std::initializer_list<std::string> documents) {
  std::string out;
  for (const std::string& d : documents) {
    if (!out.empty()) out += "---\n";
    out += d;
  }
  return out;
}

}  // namespace gangkeeper::testing
