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

}  // namespace gangkeeper::testing
