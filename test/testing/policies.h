// Policies for tests: one way to build them from YAML and one to load the
// repository's own policies/ directory.
#pragma once

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

}  // namespace gangkeeper::testing
