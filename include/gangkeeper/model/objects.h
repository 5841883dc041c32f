// gangkeeper: the policy objects admission depends on.
//
// Plain value types decoded from Kueue manifests (kueue.x-k8s.io v1beta1 and
// v1beta2), Kubernetes PriorityClasses and Namespaces, and gangkeeper's own
// GPUNodePool (gpu_pool.h). Defaults are those Kueue applies, filled in by
// the decoder, so every field here has its effective value. A PolicySet is
// an immutable bundle once built; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gangkeeper/model/configuration.h"
#include "gangkeeper/model/gpu_pool.h"
#include "gangkeeper/model/policy_digest.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::model {

using FlavorName = std::string;
using ResourceName = std::string;
using ClusterQueueName = std::string;
using CohortName = std::string;
using Labels = std::map<std::string, std::string>;

// Where an object came from, for messages: "policies/queues.yaml#2".
struct SourceRef {
  std::string file;
  int document = 0;  // 1-based index of the document in the file; 0 = unknown
  std::string ToString() const;
};

struct ObjectMeta {
  std::string name;
  std::string namespace_name;  // namespaced kinds only
  Labels labels;
  std::string api_version;     // as written: kueue.x-k8s.io/v1beta1, ...
  std::string resource_version;
  SourceRef source;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
};

struct Toleration {
  std::string key;
  std::string op = "Equal";  // Equal or Exists
  std::string value;
  std::string effect;  // empty = all effects
  std::optional<int64_t> toleration_seconds;
};

struct ResourceFlavor {
  ObjectMeta meta;
  Labels node_labels;
  std::vector<Taint> node_taints;
  std::vector<Toleration> tolerations;
  std::string topology_name;  // TAS; recorded, not used
};

struct ResourceQuota {
  ResourceName name;
  quantity::Quantity nominal;
  std::optional<quantity::Quantity> borrowing_limit;  // nullopt = unlimited
  std::optional<quantity::Quantity> lending_limit;    // nullopt = all unused nominal is lendable
};

struct FlavorQuotas {
  FlavorName name;
  std::vector<ResourceQuota> resources;
};

struct ResourceGroup {
  std::vector<ResourceName> covered_resources;
  std::vector<FlavorQuotas> flavors;  // in order of preference
};

enum class QueueingStrategy { kBestEffortFIFO, kStrictFIFO };
enum class StopPolicy { kNone, kHold, kHoldAndDrain };
enum class WithinClusterQueuePolicy { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
enum class ReclaimWithinCohortPolicy { kNever, kLowerPriority, kAny };
enum class BorrowWithinCohortPolicy { kNever, kLowerPriority };
enum class FungibilityPolicy { kMayStopSearch, kTryNextFlavor };
enum class FungibilityPreference { kUnset, kBorrowingOverPreemption, kPreemptionOverBorrowing };
enum class PreemptionPolicy { kPreemptLowerPriority, kNever };

struct LabelSelectorRequirement {
  enum class Operator { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Operator op = Operator::kIn;
  std::vector<std::string> values;
};

// metav1.LabelSelector: every matchLabels pair and every requirement must hold.
struct LabelSelector {
  Labels match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
  bool Matches(const Labels& labels) const;
};

struct FlavorFungibility {
  FungibilityPolicy when_can_borrow = FungibilityPolicy::kMayStopSearch;
  FungibilityPolicy when_can_preempt = FungibilityPolicy::kTryNextFlavor;
  FungibilityPreference preference = FungibilityPreference::kUnset;
};

struct ClusterQueuePreemption {
  WithinClusterQueuePolicy within_cluster_queue = WithinClusterQueuePolicy::kNever;
  ReclaimWithinCohortPolicy reclaim_within_cohort = ReclaimWithinCohortPolicy::kNever;
  BorrowWithinCohortPolicy borrow_within_cohort = BorrowWithinCohortPolicy::kNever;
  std::optional<int32_t> borrow_max_priority_threshold;
};

struct ClusterQueue {
  ObjectMeta meta;
  // nullopt matches no namespace (Kueue: a nil selector); an empty selector
  // matches every namespace.
  std::optional<LabelSelector> namespace_selector;
  CohortName cohort;  // v1beta1 spec.cohort, v1beta2 spec.cohortName
  QueueingStrategy queueing_strategy = QueueingStrategy::kBestEffortFIFO;
  std::vector<ResourceGroup> resource_groups;
  FlavorFungibility flavor_fungibility;
  ClusterQueuePreemption preemption;
  double fair_sharing_weight = 1.0;  // 0 = infinite share
  StopPolicy stop_policy = StopPolicy::kNone;
  // Set only for a ClusterQueue read from the cluster (--policy-source
  // cluster) whose object is invalid: the broker refuses it for scheduling
  // (inactive, with this reason) while every other ClusterQueue keeps
  // admitting. Not part of Kueue's object: never encoded.
  std::string inactive_reason;
};

struct LocalQueue {
  ObjectMeta meta;  // namespace_name + name
  ClusterQueueName cluster_queue;
  StopPolicy stop_policy = StopPolicy::kNone;
};

struct Cohort {
  ObjectMeta meta;
  CohortName parent;  // spec.parentName; empty = root
  std::vector<ResourceGroup> resource_groups;
  double fair_sharing_weight = 1.0;
};

struct WorkloadPriorityClass {
  ObjectMeta meta;
  int32_t value = 0;
  std::string description;
};

// scheduling.k8s.io/v1 PriorityClass.
struct PriorityClass {
  ObjectMeta meta;
  int32_t value = 0;
  PreemptionPolicy preemption_policy = PreemptionPolicy::kPreemptLowerPriority;
  bool global_default = false;
  std::string description;
};

// v1 Namespace: only its labels matter (ClusterQueue namespaceSelectors).
struct Namespace {
  ObjectMeta meta;
};

// Every policy object, keyed by name (LocalQueues by {namespace, name}).
struct PolicySet {
  std::map<std::string, ResourceFlavor> flavors;
  std::map<std::string, ClusterQueue> cluster_queues;
  std::map<std::pair<std::string, std::string>, LocalQueue> local_queues;
  std::map<std::string, Cohort> cohorts;
  std::map<std::string, WorkloadPriorityClass> workload_priority_classes;
  std::map<std::string, PriorityClass> priority_classes;
  std::map<std::string, Namespace> namespaces;
  std::map<std::string, GpuNodePool> gpu_node_pools;
  std::map<std::string, SourceRef> gpu_node_pool_sources;  // GpuNodePool has no ObjectMeta
  // Kueue's Configuration (configuration.h): at most one, from the policy
  // files; an overlay never changes it.
  KueueConfiguration configuration;
  SourceRef configuration_source;
  // The content's identity, stamped on a shared set by Seal
  // (policy_digest.h); read it with DigestOf. A copy starts unsealed.
  SealedDigest sealed;

  // A namespace's labels: those of its Namespace object, plus
  // kubernetes.io/metadata.name which Kubernetes sets on every namespace.
  Labels NamespaceLabels(const std::string& namespace_name) const;

  // `cohort` and the cohorts above it through `cohorts[...].parent`,
  // nearest first; empty for "". A cohort only named (by a ClusterQueue or
  // as a parent) ends the walk. Bounded: a cycle of parents (which
  // validation refuses) stops at the first repeat.
  std::vector<std::string> CohortsAbove(const std::string& cohort) const;
};

// Names used in messages and the API.
const char* QueueingStrategyName(QueueingStrategy s);
const char* StopPolicyName(StopPolicy s);

}  // namespace gangkeeper::model
