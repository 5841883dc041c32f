// gangkeeper broker: partial admission (KUEUE-SEMANTICS.md §3.8), the
// search for the largest pod counts that fit when a gang's whole counts do
// not, as Kueue searches them.
//
// A pod set may shrink from `count` to `MinCount()` (a Job's
// kueue.x-k8s.io/job-min-parallelism). With delta_i = count_i - min_i and
// D = the sum of the deltas, step k of D removes floor(delta_i * k / D)
// pods from every pod set at once; a binary search finds the smallest k
// whose counts fit, or can be made to fit by preempting (the victims are
// found for those counts). The whole gang was tried first (step 0), so the
// search starts at step 1. Like Kueue's, it assumes that fewer pods never
// fit worse.
#include <optional>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

// The counts of step `k` of `total` (see above).
void PartialCountsAt(const std::vector<workload::PodSet>& full, int64_t k, int64_t total,
                     std::vector<workload::PodSet>* out) {
  for (size_t i = 0; i < full.size(); ++i) {
    const int64_t delta = full[i].count - full[i].MinCount();
    (*out)[i].count = full[i].count - static_cast<int64_t>(absl::int128(delta) * k / total);
  }
}

}  // namespace

bool CanBePartiallyAdmitted(const std::vector<workload::PodSet>& pod_sets) {
  for (const workload::PodSet& ps : pod_sets) {
    if (ps.MinCount() < ps.count) return true;
  }
  return false;
}

std::optional<Scheduler::State::Reduced> Scheduler::State::AssignReduced(const Entry& e, const model::ClusterQueue& cq,
                                                              bool fair_sharing) {
  const std::vector<workload::PodSet>& full = e.PodSets();
  int64_t total = 0;
  for (const workload::PodSet& ps : full) total += ps.count - ps.MinCount();
  if (total <= 0) return std::nullopt;
  std::vector<workload::PodSet> trial = full;
  std::optional<Reduced> best;
  // Smallest step in [1, total] that fits.
  int64_t lo = 1;
  int64_t hi = total + 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    PartialCountsAt(full, mid, total, &trial);
    Reduced r;
    r.result = AssignFlavors(e, trial, cq, fair_sharing);
    bool fits = r.result.mode == FitMode::kFit;
    if (r.result.mode == FitMode::kPreempt || r.result.mode == FitMode::kReclaim) {
      r.targets = r.result.targets.has_value() ? *std::move(r.result.targets)
                                               : FindTargets(e, cq, fair_sharing, r.result);
      r.result.targets.reset();
      fits = !r.targets.empty();
    }
    if (fits) {
      best = std::move(r);
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return best;  // when set, its step is `lo`: the smallest that fits
}

}  // namespace gangkeeper::broker
