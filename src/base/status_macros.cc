// gangkeeper: status helpers (see the header).
#include "gangkeeper/base/status_macros.h"

#include "absl/strings/str_cat.h"

namespace gangkeeper::base {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace gangkeeper::base
