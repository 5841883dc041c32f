// gangkeeper: the parts of Kueue's Configuration (config.kueue.x-k8s.io
// v1beta1/v1beta2, kind Configuration) that gangkeeper enforces, read from
// the policy files beside the quota objects (KUEUE-SEMANTICS.md §2.7):
//
//   - resources.transformations: a request for an `input` resource is
//     charged as `outputs` per unit of it (times the quantity of
//     `multiplyBy` when set); strategy Retain (Kueue's default) keeps the
//     input as well, Replace drops it. This is how one ClusterQueue quota in
//     nvidia.com/gpu covers MIG slices: input nvidia.com/mig-1g.10gb,
//     outputs {nvidia.com/gpu: 125m}, strategy Replace.
//   - waitForPodsReady: an admitted gang whose pods are not all ready within
//     `timeout` is evicted whole and requeued after a backoff, and
//     deactivated after backoffLimitCount requeues (WaitForPodsReady below;
//     the broker enforces it, `serve --wait-for-pods-ready` is its short
//     form).
//   - fairSharing: turns fair sharing on for every cohort (v1beta1
//     `enable: true`; v1beta2 by its presence) and orders the fair-sharing
//     preemption strategies (preemptionStrategies).
//
// Everything else a Configuration may say is reported, when loaded, as a
// warning naming what gangkeeper does not enforce. Value types; pure
// functions; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::model {

enum class TransformationStrategy { kRetain, kReplace };

struct ResourceTransformation {
  std::string input;
  TransformationStrategy strategy = TransformationStrategy::kRetain;
  // Scales the input before the outputs are computed; "" = none.
  std::string multiply_by;
  // Charged per unit of the input (a negative factor is an allowance; a
  // resource's total generated charge never goes below zero).
  std::map<std::string, quantity::Quantity> outputs;

  friend bool operator==(const ResourceTransformation&, const ResourceTransformation&) = default;
};

// Fair sharing's preemption strategies (KUEUE-SEMANTICS.md §3.7), tried in
// the order given.
enum class FairPreemptionStrategy {
  kLessThanOrEqualToFinalShare,  // S2-a
  kLessThanInitialShare,         // S2-b
};
const char* FairPreemptionStrategyName(FairPreemptionStrategy s);

// Which time orders a workload requeued after a PodsReady timeout:
// Eviction (Kueue's default: behind what was queued before the eviction)
// or Creation (back at its original place).
enum class RequeuingTimestamp { kEviction, kCreation };

// Kueue's waitForPodsReady, with Kueue's defaults (v1beta1 when `enable`
// is true; v1beta2 by the section's presence).
struct WaitForPodsReady {
  bool enabled = false;
  // How long an admitted gang may take until all its admitted pods are ready.
  absl::Duration timeout = absl::Minutes(5);
  // While an admitted gang is not ready, nothing else is admitted.
  bool block_admission = false;
  // A running gang whose pods drop below ready for longer than this is
  // evicted as well; zero: never (Kueue's "0s").
  absl::Duration recovery_timeout = absl::Minutes(5);
  RequeuingTimestamp timestamp = RequeuingTimestamp::kEviction;
  // The n-th requeue waits base * 2^(n-1) seconds, at most max.
  int64_t backoff_base_seconds = 60;
  int64_t backoff_max_seconds = 3600;
  // Requeues allowed before the workload is deactivated; none: unlimited.
  std::optional<int64_t> backoff_limit_count;

  friend bool operator==(const WaitForPodsReady&, const WaitForPodsReady&) = default;
};

// The wait before the `count`-th requeue (count >= 1) after a PodsReady
// timeout: backoff_base_seconds * 2^(count-1), at most backoff_max_seconds.
// Kueue adds a small random jitter; gangkeeper does not (deterministic).
absl::Duration PodsReadyBackoff(const WaitForPodsReady& w, int64_t count);

struct KueueConfiguration {
  // A Configuration document was loaded (the fields below have Kueue's
  // defaults when not).
  bool present = false;
  std::string api_version;  // as written
  std::vector<ResourceTransformation> transformations;
  // Fair sharing for every cohort, whatever the cohorts' labels say.
  bool fair_sharing = false;
  // Kueue's default order; only [S2a], [S2b] and [S2a, S2b] are valid.
  std::vector<FairPreemptionStrategy> preemption_strategies = {FairPreemptionStrategy::kLessThanOrEqualToFinalShare,
                                                               FairPreemptionStrategy::kLessThanInitialShare};
  WaitForPodsReady wait_for_pods_ready;

  friend bool operator==(const KueueConfiguration&, const KueueConfiguration&) = default;
};

// One pod's requests as the quota sees them: `requests` with every
// transformation applied (the inputs a Retain keeps, the rest as is, plus
// what the transformations generate). Products are exact and rounded up to
// the milli-unit; sums saturate. Returns `requests` unchanged when no
// transformation names a resource in it.
std::map<std::string, quantity::Quantity> QuotaRequests(const KueueConfiguration& config,
                                                        const std::map<std::string, quantity::Quantity>& requests);

// QuotaRequests without the copy where nothing transforms (the common case,
// and the admission and assignment paths ask once per pod set): returns
// `requests` itself, or the transformed map, kept in `*storage`.
const std::map<std::string, quantity::Quantity>& QuotaRequestsOf(
    const KueueConfiguration& config, const std::map<std::string, quantity::Quantity>& requests,
    std::map<std::string, quantity::Quantity>* storage);

}  // namespace gangkeeper::model
