// gangkeeper model: extended resources (see extended_resource.h).
#include "gangkeeper/model/extended_resource.h"

#include "absl/strings/match.h"

namespace gangkeeper::model {

bool IsExtendedResource(absl::string_view name) {
  return absl::StrContains(name, '/') && !absl::StrContains(name, "kubernetes.io/") &&
         !absl::StartsWith(name, "requests.");
}

}  // namespace gangkeeper::model
