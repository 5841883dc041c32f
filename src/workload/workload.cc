// gangkeeper: Workload helpers (see workload.h).
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::workload {

int64_t Workload::TotalPods() const {
  int64_t total = 0;
  for (const PodSet& ps : pod_sets) total += ps.count;
  return total;
}

}  // namespace gangkeeper::workload
