// gangkeeper tests: a quota world for the scheduler's parts, built without a
// Scheduler: Kueue policies (ResourceFlavors, ClusterQueues, Cohorts) as
// YAML, the quota tree built from them, gangs admitted to ClusterQueues
// (their usage charged to the tree), pending gangs, the anti-churn guard,
// and the Preemptor and FlavorAssigner reading them. Used by
// flavor_assigner_test.cc and preemption_test.cc, whose rows describe a
// world with the helpers below. Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"
#include "src/broker/churn_guard.h"
#include "src/broker/entry.h"
#include "src/broker/flavor_assigner.h"
#include "src/broker/preemption.h"
#include "src/broker/resource_tree.h"

namespace gangkeeper::broker {

inline constexpr char kGpu[] = "nvidia.com/gpu";
inline constexpr char kMig1g[] = "nvidia.com/mig-1g.10gb";
inline constexpr char kMig3g[] = "nvidia.com/mig-3g.40gb";

// --- Policy YAML, one document each; Docs() joins them. ---

// A ResourceFlavor; `spec` is YAML under `spec:` (taints, node labels).
std::string Flavor(const std::string& name, const std::string& spec = "");
// A Cohort, under `parent` when set.
std::string CohortDoc(const std::string& name, const std::string& parent = "");
// A ClusterQueue selecting every namespace. `spec` holds spec lines (two
// spaces indented: cohort, preemption, flavorFungibility ...), `groups`
// its resource groups as built by Group().
std::string Cq(const std::string& name, const std::string& spec, const std::vector<std::string>& groups);
// A resource group covering `resources`, one flavor per entry of `flavors`
// written "a100: 4" (every resource gets that nominal quota) or
// "a100: 4, borrowingLimit: 2" (and those limits).
std::string Group(const std::vector<std::string>& resources, const std::vector<std::string>& flavors);
// The usual one: nvidia.com/gpu alone.
std::string GpuGroup(const std::vector<std::string>& flavors);
std::string Docs(const std::vector<std::string>& docs);

// A pod set of `count` pods, each requesting `requests` (resource ->
// units), with optional tolerations and node selector.
struct PodSetSpec {
  std::string name = "main";
  int64_t count = 1;
  std::vector<std::pair<std::string, int64_t>> requests;
  std::vector<model::Toleration> tolerations;
  std::map<std::string, std::string> node_selector;
};
std::vector<workload::PodSet> PodSets(const std::vector<PodSetSpec>& specs);

// An admitted gang in a row: its ClusterQueue, priority, what it holds
// ("a100" -> units of nvidia.com/gpu, or {flavor, resource, units}), and
// when it was admitted (seconds; newer is preempted first).
struct Holding {
  std::string flavor;
  std::string resource = kGpu;
  int64_t units = 0;
};
struct AdmittedSpec {
  std::string name;
  std::string cq;
  int32_t priority = 0;
  std::vector<Holding> holds;
  int admitted_s = 0;
  bool evicting = false;         // preempted already; its pods are stopping
  bool preempted_before = false; // preempted once, nothing changed since (the anti-churn rule)
  int queued_s = 0;              // its queue-order time (LowerOrNewerEqualPriority compares it)
};

class QuotaWorld {
 public:
  // Decodes `yaml` and builds the tree; error() says what went wrong.
  explicit QuotaWorld(const std::string& yaml, bool anti_churn_guard = true);
  QuotaWorld(const QuotaWorld&) = delete;
  QuotaWorld& operator=(const QuotaWorld&) = delete;

  // "" when the policies decoded and the tree was built.
  const std::string& error() const { return error_; }

  // Admits `spec` (charging its holdings to the tree); error() on failure.
  Entry& Admit(const AdmittedSpec& spec);
  // A pending gang, queued at `queued_s` seconds.
  Entry& Pending(const std::string& name, int32_t priority, std::vector<workload::PodSet> pod_sets,
                 int queued_s = 100, bool can_preempt = true);

  const model::ClusterQueue& cluster_queue(const std::string& name) const;
  const ResourceTree& tree() const { return tree_; }
  ChurnGuard& guard() { return guard_; }
  Preemptor& preemptor() { return preemptor_; }
  // The flavor assigner on this world, with the preemptor as its oracle.
  AssignmentResult Assign(const Entry& in, const std::string& cq, bool fair_sharing = false);
  // The preemptor's victims for `in` taking `units` of `fr` in `cq`.
  std::vector<Target> FindTargets(const Entry& in, const std::string& cq, const FlavorResource& fr, int64_t units,
                                  bool fair_sharing = false);

 private:
  std::unique_ptr<Entry> MakeEntry(const std::string& name, int32_t priority, std::vector<workload::PodSet> pod_sets,
                                   absl::Time queued_at);

  std::string error_;  // first: the members below report into it
  std::shared_ptr<model::PolicySet> policies_;
  ResourceTree tree_;
  QueueMap queues_;
  std::vector<Queue*> queue_by_node_;
  EntryIndex entries_;
  std::vector<std::unique_ptr<Entry>> pending_;
  ChurnGuard guard_;
  Preemptor preemptor_;
  uint64_t seq_ = 0;
};

// "main: nvidia.com/gpu=a100; worker: nvidia.com/gpu=h100" (resources in
// order), or "" for none.
std::string FlavorsOf(const Assignment& a);
// "name InClusterQueue" per victim, in the preemptor's order.
std::vector<std::string> Victims(const std::vector<Target>& targets);
const char* FitModeName(FitMode mode);

}  // namespace gangkeeper::broker
