// gangkeeper: Workload helpers (see workload.h).
#include "gangkeeper/workload/workload.h"

#include "absl/strings/numbers.h"

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

bool RestoreMinCounts(Workload* w) {
  if (w->kind != Kind::kJob || w->pod_sets.size() != 1 || w->pod_sets[0].min_count.has_value()) return false;
  auto it = w->annotations.find(std::string(kJobMinParallelismAnnotation));
  int64_t min = 0;
  if (it == w->annotations.end() || !absl::SimpleAtoi(it->second, &min)) return false;
  if (min <= 0 || min >= w->pod_sets[0].count) return false;
  w->pod_sets[0].min_count = min;
  return true;
}

}  // namespace gangkeeper::workload
