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
//   - fairSharing: turns fair sharing on for every cohort (v1beta1
//     `enable: true`; v1beta2 by its presence) and orders the fair-sharing
//     preemption strategies (preemptionStrategies).
//
// Everything else a Configuration may say is reported, when loaded, as a
// warning naming what gangkeeper does not enforce. Value types; pure
// functions; thread-compatible.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

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

  friend bool operator==(const KueueConfiguration&, const KueueConfiguration&) = default;
};

// One pod's requests as the quota sees them: `requests` with every
// transformation applied (the inputs a Retain keeps, the rest as is, plus
// what the transformations generate). Products are exact and rounded up to
// the milli-unit; sums saturate. Returns `requests` unchanged when no
// transformation names a resource in it.
std::map<std::string, quantity::Quantity> QuotaRequests(const KueueConfiguration& config,
                                                        const std::map<std::string, quantity::Quantity>& requests);

}  // namespace gangkeeper::model
