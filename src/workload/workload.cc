// gangkeeper: Workload helpers (see workload.h).
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::workload {

std::string JsonPointerEscape(absl::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

int64_t Workload::TotalPods() const {
  int64_t total = 0;
  for (const PodSet& ps : pod_sets) total += ps.count;
  return total;
}

}  // namespace gangkeeper::workload
