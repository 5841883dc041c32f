// Policies for tests: one way to build them from YAML and one to load the
// repository's own policies/ directory.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "gtest/gtest.h"

namespace gangkeeper::testing {

// The policies of `yaml`; a decoding error fails the calling test.
inline std::shared_ptr<const model::PolicySet> PoliciesFrom(const std::string& yaml) {
  auto p = std::make_shared<model::PolicySet>();
  model::Diagnostics d;
  model::DecodeManifests(yaml, "test.yaml", p.get(), &d);
  EXPECT_FALSE(d.HasErrors()) << d.ErrorSummary();
  return p;
}

// The repository's policies/ directory (the example policies `gangkeeper
// serve` starts with), read once; a load error fails the calling test and
// gives an empty set.
std::shared_ptr<const model::PolicySet> RepositoryPolicies();

// Kueue manifests for tests, one object per call, instead of inline YAML of
// the same shape in every test. Each quota is `gpus` nvidia.com/gpu of
// `flavor`. Join them with Manifests.
std::string FlavorYaml(const std::string& name);
// A Cohort under `parent` ("" for a root) that lends `gpus` of its own (0:
// no resource groups).
std::string CohortYaml(const std::string& name, const std::string& parent = "", int64_t gpus = 0,
                       const std::string& flavor = "a100");
// A ClusterQueue for every namespace, in `cohort` ("" for none).
std::string ClusterQueueYaml(const std::string& name, const std::string& cohort, int64_t gpus,
                             const std::string& flavor = "a100");
std::string LocalQueueYaml(const std::string& namespace_name, const std::string& name,
                           const std::string& cluster_queue);
std::string Manifests(std::initializer_list<std::string> documents);

}  // namespace gangkeeper::testing
