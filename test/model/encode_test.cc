// EncodeObject / EncodeManifests: every fixture manifest and hand-built
// policy sets covering every field and enum value survive
// DecodeManifests(EncodeManifests(p)) field for field, and re-encoding the
// result gives the same text.
#include "gangkeeper/model/encode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

using ::nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using quantity::Quantity;

constexpr char kV1beta1[] = "kueue.x-k8s.io/v1beta1";
constexpr char kV1beta2[] = "kueue.x-k8s.io/v1beta2";
constexpr char kV1alpha1[] = "kueue.x-k8s.io/v1alpha1";

Quantity Q(const std::string& text) {
  absl::StatusOr<Quantity> q = quantity::ParseQuantity(text);
  EXPECT_TRUE(q.ok()) << text;
  return q.value_or(Quantity());
}

// ---------------------------------------------------------------------------
// Field-by-field comparison. Each Compare() starts by destructuring its
// struct into one binding per field, so a field added to objects.h or
// gpu_pool.h stops this file compiling until the comparison covers it.

std::string Show(const std::string& s) { return absl::StrCat("\"", s, "\""); }
std::string Show(Quantity q) { return q.Format(); }
std::string Show(double d) { return absl::StrFormat("%.17g", d); }
std::string Show(bool b) { return b ? "true" : "false"; }
template <typename T>
std::string Show(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return absl::StrCat("enum ", static_cast<int>(v));
  } else {
    return absl::StrCat(v);
  }
}
template <typename T>
std::string Show(const std::optional<T>& v) {
  return v.has_value() ? Show(*v) : "nullopt";
}

class Differ {
 public:
  template <typename T>
  void Eq(const std::string& path, const T& a, const T& b) {
    if (!(a == b)) diffs_.push_back(absl::StrCat(path, ": ", Show(a), " vs ", Show(b)));
  }
  void Eq(const std::string& path, const Labels& a, const Labels& b) {
    for (const auto& [k, v] : a) {
      auto it = b.find(k);
      if (it == b.end()) {
        Add(absl::StrCat(path, "[", k, "]: only on the left (", Show(v), ")"));
      } else {
        Eq(absl::StrCat(path, "[", k, "]"), v, it->second);
      }
    }
    for (const auto& [k, v] : b) {
      if (a.count(k) == 0) Add(absl::StrCat(path, "[", k, "]: only on the right (", Show(v), ")"));
    }
  }
  void Eq(const std::string& path, const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a != b) {
      Add(absl::StrCat(path, ": [", absl::StrJoin(a, ", "), "] vs [", absl::StrJoin(b, ", "), "]"));
    }
  }
  // Sizes, then each element with `compare(differ, element_path, x, y)`.
  template <typename T, typename F>
  void Each(const std::string& path, const std::vector<T>& a, const std::vector<T>& b, F compare) {
    if (a.size() != b.size()) {
      Add(absl::StrCat(path, ": ", a.size(), " elements vs ", b.size()));
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) compare(*this, absl::StrCat(path, "[", i, "]"), a[i], b[i]);
  }
  // Key sets, then each shared key's objects.
  template <typename Map, typename F>
  void EachKey(const std::string& path, const Map& a, const Map& b, F compare) {
    for (const auto& [k, v] : a) {
      auto it = b.find(k);
      const std::string p = absl::StrCat(path, "[", KeyText(k), "]");
      if (it == b.end()) {
        Add(absl::StrCat(p, ": only on the left"));
      } else {
        compare(*this, p, v, it->second);
      }
    }
    for (const auto& [k, v] : b) {
      if (a.count(k) == 0) Add(absl::StrCat(path, "[", KeyText(k), "]: only on the right"));
    }
  }

  void Add(std::string diff) { diffs_.push_back(std::move(diff)); }
  const std::vector<std::string>& diffs() const { return diffs_; }

 private:
  static std::string KeyText(const std::string& k) { return k; }
  static std::string KeyText(const std::pair<std::string, std::string>& k) {
    return absl::StrCat(k.first, "/", k.second);
  }

  std::vector<std::string> diffs_;
};

// SourceRef is not compared: it names the text an object was read from.
void Compare(Differ& d, const std::string& p, const ObjectMeta& a, const ObjectMeta& b) {
  [[maybe_unused]] const auto& [name, namespace_name, labels, api_version, resource_version, source] = a;
  d.Eq(p + ".name", a.name, b.name);
  d.Eq(p + ".namespace_name", a.namespace_name, b.namespace_name);
  d.Eq(p + ".labels", a.labels, b.labels);
  d.Eq(p + ".api_version", a.api_version, b.api_version);
  d.Eq(p + ".resource_version", a.resource_version, b.resource_version);
}

void Compare(Differ& d, const std::string& p, const Taint& a, const Taint& b) {
  [[maybe_unused]] const auto& [key, value, effect] = a;
  d.Eq(p + ".key", a.key, b.key);
  d.Eq(p + ".value", a.value, b.value);
  d.Eq(p + ".effect", a.effect, b.effect);
}

void Compare(Differ& d, const std::string& p, const Toleration& a, const Toleration& b) {
  [[maybe_unused]] const auto& [key, op, value, effect, toleration_seconds] = a;
  d.Eq(p + ".key", a.key, b.key);
  d.Eq(p + ".op", a.op, b.op);
  d.Eq(p + ".value", a.value, b.value);
  d.Eq(p + ".effect", a.effect, b.effect);
  d.Eq(p + ".toleration_seconds", a.toleration_seconds, b.toleration_seconds);
}

void Compare(Differ& d, const std::string& p, const ResourceFlavor& a, const ResourceFlavor& b) {
  [[maybe_unused]] const auto& [meta, node_labels, node_taints, tolerations, topology_name] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".node_labels", a.node_labels, b.node_labels);
  d.Each(p + ".node_taints", a.node_taints, b.node_taints,
         [](Differ& dd, const std::string& pp, const Taint& x, const Taint& y) { Compare(dd, pp, x, y); });
  d.Each(p + ".tolerations", a.tolerations, b.tolerations,
         [](Differ& dd, const std::string& pp, const Toleration& x, const Toleration& y) { Compare(dd, pp, x, y); });
  d.Eq(p + ".topology_name", a.topology_name, b.topology_name);
}

void Compare(Differ& d, const std::string& p, const ResourceQuota& a, const ResourceQuota& b) {
  [[maybe_unused]] const auto& [name, nominal, borrowing_limit, lending_limit] = a;
  d.Eq(p + ".name", a.name, b.name);
  d.Eq(p + ".nominal", a.nominal, b.nominal);
  d.Eq(p + ".borrowing_limit", a.borrowing_limit, b.borrowing_limit);
  d.Eq(p + ".lending_limit", a.lending_limit, b.lending_limit);
}

void Compare(Differ& d, const std::string& p, const FlavorQuotas& a, const FlavorQuotas& b) {
  [[maybe_unused]] const auto& [name, resources] = a;
  d.Eq(p + ".name", a.name, b.name);
  d.Each(p + ".resources", a.resources, b.resources,
         [](Differ& dd, const std::string& pp, const ResourceQuota& x, const ResourceQuota& y) {
           Compare(dd, pp, x, y);
         });
}

void Compare(Differ& d, const std::string& p, const ResourceGroup& a, const ResourceGroup& b) {
  [[maybe_unused]] const auto& [covered_resources, flavors] = a;
  d.Eq(p + ".covered_resources", a.covered_resources, b.covered_resources);
  d.Each(p + ".flavors", a.flavors, b.flavors,
         [](Differ& dd, const std::string& pp, const FlavorQuotas& x, const FlavorQuotas& y) {
           Compare(dd, pp, x, y);
         });
}

void CompareGroups(Differ& d, const std::string& p, const std::vector<ResourceGroup>& a,
                   const std::vector<ResourceGroup>& b) {
  d.Each(p, a, b, [](Differ& dd, const std::string& pp, const ResourceGroup& x, const ResourceGroup& y) {
    Compare(dd, pp, x, y);
  });
}

void Compare(Differ& d, const std::string& p, const LabelSelectorRequirement& a, const LabelSelectorRequirement& b) {
  [[maybe_unused]] const auto& [key, op, values] = a;
  d.Eq(p + ".key", a.key, b.key);
  d.Eq(p + ".op", a.op, b.op);
  d.Eq(p + ".values", a.values, b.values);
}

void Compare(Differ& d, const std::string& p, const std::optional<LabelSelector>& a,
             const std::optional<LabelSelector>& b) {
  if (a.has_value() != b.has_value()) {
    d.Add(absl::StrCat(p, ": ", a.has_value() ? "set" : "nullopt", " vs ", b.has_value() ? "set" : "nullopt"));
    return;
  }
  if (!a.has_value()) return;
  [[maybe_unused]] const auto& [match_labels, match_expressions] = *a;
  d.Eq(p + ".match_labels", a->match_labels, b->match_labels);
  d.Each(p + ".match_expressions", a->match_expressions, b->match_expressions,
         [](Differ& dd, const std::string& pp, const LabelSelectorRequirement& x, const LabelSelectorRequirement& y) {
           Compare(dd, pp, x, y);
         });
}

void Compare(Differ& d, const std::string& p, const ClusterQueue& a, const ClusterQueue& b) {
  [[maybe_unused]] const auto& [meta, namespace_selector, cohort, queueing_strategy, resource_groups,
                                flavor_fungibility, preemption, fair_sharing_weight, stop_policy,
                                inactive_reason] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".inactive_reason", a.inactive_reason, b.inactive_reason);
  Compare(d, p + ".namespace_selector", a.namespace_selector, b.namespace_selector);
  d.Eq(p + ".cohort", a.cohort, b.cohort);
  d.Eq(p + ".queueing_strategy", a.queueing_strategy, b.queueing_strategy);
  CompareGroups(d, p + ".resource_groups", a.resource_groups, b.resource_groups);
  [[maybe_unused]] const auto& [when_can_borrow, when_can_preempt, preference] = a.flavor_fungibility;
  d.Eq(p + ".flavor_fungibility.when_can_borrow", a.flavor_fungibility.when_can_borrow,
       b.flavor_fungibility.when_can_borrow);
  d.Eq(p + ".flavor_fungibility.when_can_preempt", a.flavor_fungibility.when_can_preempt,
       b.flavor_fungibility.when_can_preempt);
  d.Eq(p + ".flavor_fungibility.preference", a.flavor_fungibility.preference, b.flavor_fungibility.preference);
  [[maybe_unused]] const auto& [within_cluster_queue, reclaim_within_cohort, borrow_within_cohort,
                                borrow_max_priority_threshold] = a.preemption;
  d.Eq(p + ".preemption.within_cluster_queue", a.preemption.within_cluster_queue, b.preemption.within_cluster_queue);
  d.Eq(p + ".preemption.reclaim_within_cohort", a.preemption.reclaim_within_cohort,
       b.preemption.reclaim_within_cohort);
  d.Eq(p + ".preemption.borrow_within_cohort", a.preemption.borrow_within_cohort, b.preemption.borrow_within_cohort);
  d.Eq(p + ".preemption.borrow_max_priority_threshold", a.preemption.borrow_max_priority_threshold,
       b.preemption.borrow_max_priority_threshold);
  d.Eq(p + ".fair_sharing_weight", a.fair_sharing_weight, b.fair_sharing_weight);
  d.Eq(p + ".stop_policy", a.stop_policy, b.stop_policy);
}

void Compare(Differ& d, const std::string& p, const LocalQueue& a, const LocalQueue& b) {
  [[maybe_unused]] const auto& [meta, cluster_queue, stop_policy] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".cluster_queue", a.cluster_queue, b.cluster_queue);
  d.Eq(p + ".stop_policy", a.stop_policy, b.stop_policy);
}

void Compare(Differ& d, const std::string& p, const Cohort& a, const Cohort& b) {
  [[maybe_unused]] const auto& [meta, parent, resource_groups, fair_sharing_weight] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".parent", a.parent, b.parent);
  CompareGroups(d, p + ".resource_groups", a.resource_groups, b.resource_groups);
  d.Eq(p + ".fair_sharing_weight", a.fair_sharing_weight, b.fair_sharing_weight);
}

void Compare(Differ& d, const std::string& p, const WorkloadPriorityClass& a, const WorkloadPriorityClass& b) {
  [[maybe_unused]] const auto& [meta, value, description] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".value", a.value, b.value);
  d.Eq(p + ".description", a.description, b.description);
}

void Compare(Differ& d, const std::string& p, const PriorityClass& a, const PriorityClass& b) {
  [[maybe_unused]] const auto& [meta, value, preemption_policy, global_default, description] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
  d.Eq(p + ".value", a.value, b.value);
  d.Eq(p + ".preemption_policy", a.preemption_policy, b.preemption_policy);
  d.Eq(p + ".global_default", a.global_default, b.global_default);
  d.Eq(p + ".description", a.description, b.description);
}

void Compare(Differ& d, const std::string& p, const Namespace& a, const Namespace& b) {
  [[maybe_unused]] const auto& [meta] = a;
  Compare(d, p + ".meta", a.meta, b.meta);
}

void Compare(Differ& d, const std::string& p, const GpuNodePool& a, const GpuNodePool& b) {
  [[maybe_unused]] const auto& [name, resource_version, flavor, gpu, gpus_per_node, nodes, mig_strategy,
                                mig_profiles] = a;
  d.Eq(p + ".name", a.name, b.name);
  d.Eq(p + ".resource_version", a.resource_version, b.resource_version);
  d.Eq(p + ".flavor", a.flavor, b.flavor);
  d.Eq(p + ".gpu", a.gpu, b.gpu);
  d.Eq(p + ".gpus_per_node", a.gpus_per_node, b.gpus_per_node);
  d.Eq(p + ".nodes", a.nodes, b.nodes);
  d.Eq(p + ".mig_strategy", a.mig_strategy, b.mig_strategy);
  d.Eq(p + ".mig_profiles", a.mig_profiles, b.mig_profiles);
}

// Every difference between two policy sets, as "field.path: left vs right".
// gpu_node_pool_sources holds SourceRefs only and is not compared, nor is
// the sealed digest (not content: the identity of the rest).
std::vector<std::string> Diff(const PolicySet& a, const PolicySet& b) {
  [[maybe_unused]] const auto& [flavors, cluster_queues, local_queues, cohorts, workload_priority_classes,
                                priority_classes, namespaces, gpu_node_pools, gpu_node_pool_sources, configuration,
                                configuration_source, sealed] = a;
  Differ d;
  auto each = [](Differ& dd, const std::string& p, const auto& x, const auto& y) { Compare(dd, p, x, y); };
  d.EachKey("flavors", a.flavors, b.flavors, each);
  d.EachKey("cluster_queues", a.cluster_queues, b.cluster_queues, each);
  d.EachKey("local_queues", a.local_queues, b.local_queues, each);
  d.EachKey("cohorts", a.cohorts, b.cohorts, each);
  d.EachKey("workload_priority_classes", a.workload_priority_classes, b.workload_priority_classes, each);
  d.EachKey("priority_classes", a.priority_classes, b.priority_classes, each);
  d.EachKey("namespaces", a.namespaces, b.namespaces, each);
  d.EachKey("gpu_node_pools", a.gpu_node_pools, b.gpu_node_pools, each);
  // Kueue's Configuration: what is enforced (configuration_test.cc reads
  // it field by field); its source is a SourceRef only.
  if (!(a.configuration == b.configuration)) d.Add("configuration: differs");
  return d.diffs();
}

size_t ObjectCount(const PolicySet& p) {
  return p.flavors.size() + p.cluster_queues.size() + p.local_queues.size() + p.cohorts.size() +
         p.workload_priority_classes.size() + p.priority_classes.size() + p.namespaces.size() +
         p.gpu_node_pools.size();
}

// Encodes `p`, decodes the text, and expects no errors, a set equal to `p`
// field by field, and the same text when the decoded set is encoded again.
void ExpectRoundTrip(const PolicySet& p) {
  const std::string text = EncodeManifests(p);
  PolicySet back;
  Diagnostics diagnostics;
  DecodeManifests(text, "encoded.json", &back, &diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors()) << diagnostics.ErrorSummary() << "\nencoded: " << text;
  EXPECT_EQ(diagnostics.Count(Diagnostic::Severity::kNote), 0) << text;
  EXPECT_THAT(Diff(p, back), IsEmpty()) << "encoded: " << text;
  EXPECT_EQ(EncodeManifests(back), text);
}

// ---------------------------------------------------------------------------
// Builders for hand-made objects.

ObjectMeta Meta(const std::string& name, const std::string& api_version, Labels labels = {}) {
  ObjectMeta m;
  m.name = name;
  m.api_version = api_version;
  m.labels = std::move(labels);
  return m;
}

ResourceQuota Quota(const std::string& name, const std::string& nominal,
                    std::optional<std::string> borrowing = std::nullopt,
                    std::optional<std::string> lending = std::nullopt) {
  ResourceQuota q;
  q.name = name;
  q.nominal = Q(nominal);
  if (borrowing.has_value()) q.borrowing_limit = Q(*borrowing);
  if (lending.has_value()) q.lending_limit = Q(*lending);
  return q;
}

std::vector<ResourceGroup> TwoGroups() {
  ResourceGroup whole;
  whole.covered_resources = {"cpu", "memory", "nvidia.com/gpu"};
  whole.flavors.push_back(FlavorQuotas{
      "nvidia-gpu", {Quota("cpu", "64", "0"), Quota("memory", "256Gi", std::nullopt, "128Gi"),
                     Quota("nvidia.com/gpu", "4", "2", "1")}});
  whole.flavors.push_back(FlavorQuotas{
      "spot", {Quota("cpu", "1500m"), Quota("memory", "1.5Gi", "512Mi"), Quota("nvidia.com/gpu", "0", "0", "0")}});
  ResourceGroup mig;
  mig.covered_resources = {"nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb.me"};
  mig.flavors.push_back(FlavorQuotas{
      "a100-mig", {Quota("nvidia.com/mig-3g.40gb", "9223372036854775807"), Quota("nvidia.com/mig-1g.10gb.me", "1m")}});
  return {whole, mig};
}

// Every optional field set, every list with more than one element.
ResourceFlavor FullFlavor(const std::string& name) {
  ResourceFlavor f;
  f.meta = Meta(name, kV1beta1, {{"team", "a"}, {"empty-value", ""}});
  f.meta.resource_version = "12345";
  f.node_labels = {{"accelerator", "nvidia"}, {"cloud.google.com/gke-accelerator", "nvidia-h100-80gb"}};
  f.node_taints = {Taint{"sku", "gpu", "NoSchedule"}, Taint{"dedicated", "", "PreferNoSchedule"},
                   Taint{"evict", "now", "NoExecute"}};
  f.tolerations = {Toleration{"sku", "Equal", "gpu", "NoSchedule", std::nullopt},
                   Toleration{"", "Exists", "", "", std::nullopt},
                   Toleration{"node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 300},
                   Toleration{"k", "Equal", "", "PreferNoSchedule", 0},
                   Toleration{"min", "Equal", "v", "NoExecute", std::numeric_limits<int64_t>::min()},
                   Toleration{"max", "Equal", "v", "NoExecute", std::numeric_limits<int64_t>::max()}};
  f.topology_name = "default-topology";
  return f;
}

ClusterQueue FullClusterQueue(const std::string& name, const std::string& api_version) {
  ClusterQueue cq;
  cq.meta = Meta(name, api_version, {{"tier", "gold"}});
  LabelSelector sel;
  sel.match_labels = {{"kubernetes.io/metadata.name", "team-a"}};
  sel.match_expressions = {
      {"env", LabelSelectorRequirement::Operator::kIn, {"prod", "staging"}},
      {"legacy", LabelSelectorRequirement::Operator::kNotIn, {"true"}},
      {"gpu-allowed", LabelSelectorRequirement::Operator::kExists, {}},
      {"quarantine", LabelSelectorRequirement::Operator::kDoesNotExist, {}},
  };
  cq.namespace_selector = sel;
  cq.cohort = "gpu-shared";
  cq.queueing_strategy = QueueingStrategy::kStrictFIFO;
  cq.resource_groups = TwoGroups();
  cq.flavor_fungibility = {FungibilityPolicy::kTryNextFlavor, FungibilityPolicy::kTryNextFlavor,
                           FungibilityPreference::kPreemptionOverBorrowing};
  cq.preemption = {WithinClusterQueuePolicy::kLowerOrNewerEqualPriority, ReclaimWithinCohortPolicy::kAny,
                   BorrowWithinCohortPolicy::kLowerPriority, 1000};
  cq.fair_sharing_weight = 2.5;
  cq.stop_policy = StopPolicy::kHoldAndDrain;
  return cq;
}

LocalQueue MakeLocalQueue(const std::string& ns, const std::string& name, const std::string& cq, StopPolicy stop,
                          const std::string& api_version = kV1beta1) {
  LocalQueue lq;
  lq.meta = Meta(name, api_version);
  lq.meta.namespace_name = ns;
  lq.cluster_queue = cq;
  lq.stop_policy = stop;
  return lq;
}

Cohort MakeCohort(const std::string& name, const std::string& api_version, const std::string& parent, double weight,
                  std::vector<ResourceGroup> groups = {}) {
  Cohort c;
  c.meta = Meta(name, api_version);
  c.parent = parent;
  c.fair_sharing_weight = weight;
  c.resource_groups = std::move(groups);
  return c;
}

WorkloadPriorityClass MakeWpc(const std::string& name, int32_t value, const std::string& description,
                              const std::string& api_version = kV1beta1) {
  WorkloadPriorityClass w;
  w.meta = Meta(name, api_version);
  w.value = value;
  w.description = description;
  return w;
}

PriorityClass MakePc(const std::string& name, int32_t value, PreemptionPolicy policy, bool global_default,
                     const std::string& description) {
  PriorityClass pc;
  pc.meta = Meta(name, "scheduling.k8s.io/v1", {{"owner", "platform"}});
  pc.value = value;
  pc.preemption_policy = policy;
  pc.global_default = global_default;
  pc.description = description;
  return pc;
}

Namespace MakeNamespace(const std::string& name, Labels labels) {
  Namespace n;
  n.meta = Meta(name, "v1", std::move(labels));
  return n;
}

GpuNodePool MakePool(const std::string& name, const std::string& flavor, GpuModel gpu, int64_t gpus_per_node,
                     int64_t nodes, MigStrategy strategy, std::vector<std::string> profiles) {
  return GpuNodePool{name, "", flavor, gpu, gpus_per_node, nodes, strategy, std::move(profiles)};
}

template <typename Map, typename Obj>
void Put(Map& map, Obj object) {
  auto key = object.meta.name;
  map.emplace(std::move(key), std::move(object));
}
void Put(std::map<std::pair<std::string, std::string>, LocalQueue>& map, LocalQueue lq) {
  auto key = std::make_pair(lq.meta.namespace_name, lq.meta.name);
  map.emplace(std::move(key), std::move(lq));
}
void Put(std::map<std::string, GpuNodePool>& map, GpuNodePool pool) {
  auto key = pool.name;
  map.emplace(std::move(key), std::move(pool));
}

// One of everything, every optional field set somewhere and unset elsewhere.
PolicySet FullPolicySet() {
  PolicySet p;
  Put(p.flavors, FullFlavor("nvidia-gpu"));
  ResourceFlavor bare;
  bare.meta = Meta("default-flavor", kV1beta2);
  Put(p.flavors, bare);
  Put(p.cluster_queues, FullClusterQueue("team-a-gpu", kV1beta1));
  Put(p.cluster_queues, FullClusterQueue("team-b-gpu", kV1beta2));
  ClusterQueue defaults;
  defaults.meta = Meta("defaults", kV1beta1);
  Put(p.cluster_queues, defaults);
  Put(p.local_queues, MakeLocalQueue("team-a", "gpu-queue", "team-a-gpu", StopPolicy::kNone));
  Put(p.local_queues, MakeLocalQueue("team-b", "gpu-queue", "team-b-gpu", StopPolicy::kHold, kV1beta2));
  Put(p.local_queues, MakeLocalQueue("team-b", "drain", "team-b-gpu", StopPolicy::kHoldAndDrain));
  Put(p.cohorts, MakeCohort("root", kV1beta1, "", 1.0));
  Put(p.cohorts, MakeCohort("gpu-shared", kV1beta2, "root", 0.5, TwoGroups()));
  Put(p.cohorts, MakeCohort("legacy", kV1alpha1, "root", 0.0));
  Put(p.workload_priority_classes, MakeWpc("training-batch", 10000, "batch training"));
  Put(p.workload_priority_classes, MakeWpc("lowest", std::numeric_limits<int32_t>::min(), "", kV1beta2));
  Put(p.workload_priority_classes, MakeWpc("highest", std::numeric_limits<int32_t>::max(), "x: \"y\"\n# not a comment"));
  Put(p.priority_classes, MakePc("inference-critical", 1000000, PreemptionPolicy::kPreemptLowerPriority, true,
                                 "serving; preempts batch"));
  Put(p.priority_classes, MakePc("training-batch", 10000, PreemptionPolicy::kNever, false, ""));
  Put(p.priority_classes, MakePc("system-max", 2000001000, PreemptionPolicy::kNever, false, "ünïcödé ✓"));
  Put(p.priority_classes, MakePc("system-min", std::numeric_limits<int32_t>::min(),
                                 PreemptionPolicy::kPreemptLowerPriority, false, "lowest"));
  Put(p.namespaces, MakeNamespace("team-a", {{"team", "a"}, {"kubernetes.io/metadata.name", "team-a"}}));
  Put(p.namespaces, MakeNamespace("team-b", {}));
  Put(p.gpu_node_pools, MakePool("gpu-a100", "nvidia-gpu", GpuModel::kA100_80GB, 8, 2, MigStrategy::kNone, {}));
  Put(p.gpu_node_pools, MakePool("migmixed", "a100-mig", GpuModel::kA100_80GB, 1, 0, MigStrategy::kMixed,
                                 {"MIG3g", "2g.20gb", "1g.10gb+me", "MIG1g"}));
  Put(p.gpu_node_pools, MakePool("migsingle", "a100-mig", GpuModel::kA100_40GB, 4, 100000, MigStrategy::kSingle,
                                 {"MIG1g", "MIG1g", "MIG1g", "MIG1g", "MIG1g", "MIG1g", "MIG1g"}));
  Put(p.gpu_node_pools, MakePool("h100", "h100", GpuModel::kH100_80GB, 16, 1, MigStrategy::kMixed, {"7g.80gb"}));
  Put(p.gpu_node_pools, MakePool("h200", "h200", GpuModel::kH200_141GB, 1, 3, MigStrategy::kNone, {}));
  return p;
}

json Spec(const json& object) { return object.contains("spec") ? object["spec"] : json(); }

// ---------------------------------------------------------------------------
// Fixtures: every manifest in the repository.

// Manifests under test/fixtures (Kueue's examples, the seed, captured
// reviews) and the example policies/, relative to the source dir.
std::vector<std::string> ManifestFiles() {
  std::vector<std::string> out;
  const std::filesystem::path root(GK_SOURCE_DIR);
  for (const char* dir : {"test/fixtures", "policies"}) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(root / dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        out.push_back(std::filesystem::relative(it->path(), root).string());
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadSource(const std::string& rel) {
  std::ifstream in(std::string(GK_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class FixtureRoundTripTest : public ::testing::TestWithParam<std::string> {};

// Files with errors (Kueue examples using admission checks) still round-trip
// the objects that did decode.
TEST_P(FixtureRoundTripTest, DecodedObjectsSurviveEncodeAndDecode) {
  PolicySet p;
  Diagnostics diagnostics;
  DecodeManifests(ReadSource(GetParam()), GetParam(), &p, &diagnostics);
  ExpectRoundTrip(p);
}

INSTANTIATE_TEST_SUITE_P(Repository, FixtureRoundTripTest, ::testing::ValuesIn(ManifestFiles()), TestName);

TEST(FixtureCoverageTest, CoversTheCleanPolicyFixtures) {
  int clean_with_objects = 0;
  size_t objects = 0;
  for (const std::string& f : ManifestFiles()) {
    PolicySet p;
    Diagnostics diagnostics;
    DecodeManifests(ReadSource(f), f, &p, &diagnostics);
    if (!diagnostics.HasErrors() && ObjectCount(p) > 0) ++clean_with_objects;
    objects += ObjectCount(p);
  }
  // Counts when this test was written: 20 files (seed, Kueue examples,
  // policies/) hold policy objects and decode cleanly; 51 objects in all. A
  // drop means the fixtures moved and the round trips above test less.
  EXPECT_GE(clean_with_objects, 20);
  EXPECT_GE(objects, 51u);
}

TEST(FixtureCoverageTest, ThePolicyDirectoryRoundTripsAsOneSet) {
  PolicySet p;
  Diagnostics diagnostics;
  for (const std::string& f : ManifestFiles()) {
    if (f.rfind("policies/", 0) == 0) DecodeManifests(ReadSource(f), f, &p, &diagnostics);
  }
  ASSERT_FALSE(diagnostics.HasErrors()) << diagnostics.ErrorSummary();
  ASSERT_GE(ObjectCount(p), 10u);
  ExpectRoundTrip(p);
}

// ---------------------------------------------------------------------------
// Hand-built sets.

TEST(EncodeTest, FullPolicySetRoundTrips) { ExpectRoundTrip(FullPolicySet()); }

TEST(EncodeTest, EmptyPolicySetIsAnEmptyList) {
  const std::string text = EncodeManifests(PolicySet{});
  EXPECT_EQ(text, R"({"apiVersion":"v1","items":[],"kind":"List"})");
  ExpectRoundTrip(PolicySet{});
}

TEST(EncodeTest, ItemsComeInDependencyOrderThenByName) {
  const json list = json::parse(EncodeManifests(FullPolicySet()));
  std::vector<std::string> order;
  for (const json& item : list["items"]) {
    std::string name = item["metadata"]["name"].get<std::string>();
    if (item["metadata"].contains("namespace")) name = item["metadata"]["namespace"].get<std::string>() + "/" + name;
    order.push_back(item["kind"].get<std::string>() + " " + name);
  }
  EXPECT_THAT(order, ElementsAre("Namespace team-a", "Namespace team-b", "PriorityClass inference-critical",
                                 "PriorityClass system-max", "PriorityClass system-min",
                                 "PriorityClass training-batch", "WorkloadPriorityClass highest",
                                 "WorkloadPriorityClass lowest", "WorkloadPriorityClass training-batch",
                                 "ResourceFlavor default-flavor", "ResourceFlavor nvidia-gpu", "GPUNodePool gpu-a100",
                                 "GPUNodePool h100", "GPUNodePool h200", "GPUNodePool migmixed",
                                 "GPUNodePool migsingle", "Cohort gpu-shared", "Cohort legacy", "Cohort root",
                                 "ClusterQueue defaults", "ClusterQueue team-a-gpu", "ClusterQueue team-b-gpu",
                                 "LocalQueue team-a/gpu-queue", "LocalQueue team-b/drain",
                                 "LocalQueue team-b/gpu-queue"));
}

TEST(EncodeTest, EncodingIsDeterministic) {
  EXPECT_EQ(EncodeManifests(FullPolicySet()), EncodeManifests(FullPolicySet()));
}

// The form the API serves: Kueue's v1beta1 ClusterQueue after defaulting.
TEST(EncodeTest, ClusterQueueInKueueForm) {
  ClusterQueue cq;
  cq.meta = Meta("team-a-gpu", kV1beta1);
  cq.cohort = "gpu-shared";
  cq.namespace_selector = LabelSelector{{{"kubernetes.io/metadata.name", "team-a"}}, {}};
  ResourceGroup g;
  g.covered_resources = {"cpu", "nvidia.com/gpu"};
  g.flavors.push_back(FlavorQuotas{"nvidia-gpu", {Quota("cpu", "64"), Quota("nvidia.com/gpu", "4", "2")}});
  cq.resource_groups = {g};
  cq.preemption.within_cluster_queue = WithinClusterQueuePolicy::kLowerPriority;
  cq.preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kAny;
  EXPECT_EQ(EncodeObject(cq), json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "team-a-gpu"},
    "spec": {
      "cohort": "gpu-shared",
      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}},
      "queueingStrategy": "BestEffortFIFO",
      "resourceGroups": [{
        "coveredResources": ["cpu", "nvidia.com/gpu"],
        "flavors": [{"name": "nvidia-gpu", "resources": [
          {"name": "cpu", "nominalQuota": "64"},
          {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2"}]}]}],
      "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
      "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                     "borrowWithinCohort": {"policy": "Never"}},
      "fairSharing": {"weight": "1"},
      "stopPolicy": "None"
    }})"));
}

TEST(EncodeTest, OtherKindsInKubernetesForm) {
  EXPECT_EQ(EncodeObject(MakeLocalQueue("team-a", "gpu-queue", "team-a-gpu", StopPolicy::kHold)), json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
    "metadata": {"name": "gpu-queue", "namespace": "team-a"},
    "spec": {"clusterQueue": "team-a-gpu", "stopPolicy": "Hold"}})"));
  EXPECT_EQ(EncodeObject(MakePc("batch", 100, PreemptionPolicy::kNever, false, "d")), json::parse(R"({
    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
    "metadata": {"name": "batch", "labels": {"owner": "platform"}},
    "value": 100, "preemptionPolicy": "Never", "globalDefault": false, "description": "d"})"));
  EXPECT_EQ(EncodeObject(MakeWpc("batch", -5, "")), json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
    "metadata": {"name": "batch"}, "value": -5})"));
  EXPECT_EQ(EncodeObject(MakeNamespace("team-a", {{"team", "a"}})), json::parse(R"({
    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}})"));
  EXPECT_EQ(EncodeObject(MakeCohort("shared", kV1beta1, "root", 1.0)), json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Cohort", "metadata": {"name": "shared"},
    "spec": {"parentName": "root", "fairSharing": {"weight": "1"}}})"));
  EXPECT_EQ(EncodeObject(FullFlavor("f")), json::parse(R"({
    "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
    "metadata": {"name": "f", "labels": {"team": "a", "empty-value": ""}, "resourceVersion": "12345"},
    "spec": {
      "nodeLabels": {"accelerator": "nvidia", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
      "nodeTaints": [{"key": "sku", "value": "gpu", "effect": "NoSchedule"},
                     {"key": "dedicated", "effect": "PreferNoSchedule"},
                     {"key": "evict", "value": "now", "effect": "NoExecute"}],
      "tolerations": [
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "k", "operator": "Equal", "effect": "PreferNoSchedule", "tolerationSeconds": 0},
        {"key": "min", "operator": "Equal", "value": "v", "effect": "NoExecute",
         "tolerationSeconds": -9223372036854775808},
        {"key": "max", "operator": "Equal", "value": "v", "effect": "NoExecute",
         "tolerationSeconds": 9223372036854775807}],
      "topologyName": "default-topology"}})"));
}

// The cluster source's stand-in for an invalid ClusterQueue: the record of
// the policies keeps its reason (an annotation); the object served as
// Kueue's does not carry it.
TEST(EncodeTest, AStandInsInactiveReasonRoundTripsInTheManifestsOnly) {
  ClusterQueue stand_in;
  stand_in.meta = Meta("broken", kV1beta1);
  stand_in.namespace_selector = LabelSelector{};
  stand_in.inactive_reason = "its object is invalid: spec.resourceGroups[0].flavors[0]: \"lots\" \u00e9";
  ClusterQueue active = stand_in;
  active.meta.name = "fine";
  active.inactive_reason.clear();
  PolicySet p;
  Put(p.cluster_queues, stand_in);
  Put(p.cluster_queues, active);
  ExpectRoundTrip(p);
  PolicySet back;
  Diagnostics diagnostics;
  DecodeManifests(EncodeManifests(p), "encoded.json", &back, &diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors()) << diagnostics.ErrorSummary();
  EXPECT_EQ(back.cluster_queues.at("broken").inactive_reason, stand_in.inactive_reason);
  EXPECT_TRUE(back.cluster_queues.at("fine").inactive_reason.empty());
  const json list = json::parse(EncodeManifests(p));
  EXPECT_EQ(list["items"][0]["metadata"]["annotations"][std::string(kInactiveReasonAnnotation)],
            stand_in.inactive_reason);
  EXPECT_FALSE(list["items"][1]["metadata"].contains("annotations")) << "an active queue carries none";
  EXPECT_FALSE(EncodeObject(stand_in)["metadata"].contains("annotations"));
}

// Kueue: a nil selector matches no namespace, `{}` matches every one.
TEST(EncodeTest, NilAndEmptyNamespaceSelectorStayDistinct) {
  ClusterQueue nil_selector;
  nil_selector.meta = Meta("nil-selector", kV1beta1);
  ClusterQueue empty_selector = nil_selector;
  empty_selector.meta.name = "empty-selector";
  empty_selector.namespace_selector = LabelSelector{};

  EXPECT_FALSE(Spec(EncodeObject(nil_selector)).contains("namespaceSelector"));
  EXPECT_EQ(Spec(EncodeObject(empty_selector))["namespaceSelector"], json::object());

  PolicySet p;
  Put(p.cluster_queues, nil_selector);
  Put(p.cluster_queues, empty_selector);
  ExpectRoundTrip(p);
  PolicySet back;
  Diagnostics diagnostics;
  DecodeManifests(EncodeManifests(p), "encoded.json", &back, &diagnostics);
  EXPECT_FALSE(back.cluster_queues.at("nil-selector").namespace_selector.has_value());
  ASSERT_TRUE(back.cluster_queues.at("empty-selector").namespace_selector.has_value());
  EXPECT_TRUE(back.cluster_queues.at("empty-selector").namespace_selector->Matches(back.NamespaceLabels("any")));
}

TEST(EncodeTest, UnlimitedAndZeroLimitsStayDistinct) {
  ClusterQueue cq;
  cq.meta = Meta("limits", kV1beta1);
  cq.cohort = "c";
  ResourceGroup g;
  g.covered_resources = {"nvidia.com/gpu"};
  g.flavors.push_back(FlavorQuotas{"unlimited", {Quota("nvidia.com/gpu", "4")}});
  g.flavors.push_back(FlavorQuotas{"zero", {Quota("nvidia.com/gpu", "4", "0", "0")}});
  cq.resource_groups = {g};
  const json groups = Spec(EncodeObject(cq))["resourceGroups"];
  const json unlimited = groups[0]["flavors"][0]["resources"][0];
  const json zero = groups[0]["flavors"][1]["resources"][0];
  EXPECT_FALSE(unlimited.contains("borrowingLimit"));
  EXPECT_FALSE(unlimited.contains("lendingLimit"));
  EXPECT_EQ(zero["borrowingLimit"], "0");
  EXPECT_EQ(zero["lendingLimit"], "0");
  PolicySet p;
  Put(p.cluster_queues, cq);
  ExpectRoundTrip(p);
}

TEST(EncodeTest, CohortFieldNameFollowsTheVersion) {
  const json v1beta1 = Spec(EncodeObject(FullClusterQueue("q", kV1beta1)));
  EXPECT_EQ(v1beta1["cohort"], "gpu-shared");
  EXPECT_FALSE(v1beta1.contains("cohortName"));
  const json v1beta2 = Spec(EncodeObject(FullClusterQueue("q", kV1beta2)));
  EXPECT_EQ(v1beta2["cohortName"], "gpu-shared");
  EXPECT_FALSE(v1beta2.contains("cohort"));

  EXPECT_EQ(Spec(EncodeObject(MakeCohort("c", kV1alpha1, "root", 1.0)))["parent"], "root");
  EXPECT_EQ(Spec(EncodeObject(MakeCohort("c", kV1beta1, "root", 1.0)))["parentName"], "root");
  EXPECT_EQ(Spec(EncodeObject(MakeCohort("c", kV1beta2, "root", 1.0)))["parentName"], "root");

  PolicySet p;
  Put(p.cluster_queues, FullClusterQueue("old", kV1beta1));
  Put(p.cluster_queues, FullClusterQueue("new", kV1beta2));
  Put(p.cohorts, MakeCohort("alpha", kV1alpha1, "root", 1.0));
  Put(p.cohorts, MakeCohort("beta", kV1beta1, "root", 1.0));
  Put(p.cohorts, MakeCohort("beta2", kV1beta2, "root", 1.0));
  ExpectRoundTrip(p);
}

// A version the decoder refuses for the kind (or none) becomes the default,
// so the journal never holds an object it cannot read back.
TEST(EncodeTest, MissingOrUnreadableVersionBecomesTheDefault) {
  ClusterQueue cq;
  cq.meta = Meta("q", "");
  EXPECT_EQ(EncodeObject(cq)["apiVersion"], kV1beta1);
  cq.meta.api_version = kV1alpha1;  // v1alpha1 is a Cohort-only version
  EXPECT_EQ(EncodeObject(cq)["apiVersion"], kV1beta1);
  PriorityClass pc;
  pc.meta = Meta("pc", "");
  EXPECT_EQ(EncodeObject(pc)["apiVersion"], "scheduling.k8s.io/v1");
  pc.meta.api_version = "scheduling.k8s.io/v1beta1";
  EXPECT_EQ(EncodeObject(pc)["apiVersion"], "scheduling.k8s.io/v1beta1");
  Namespace ns;
  ns.meta = Meta("ns", "");
  EXPECT_EQ(EncodeObject(ns)["apiVersion"], "v1");
  LocalQueue lq = MakeLocalQueue("ns", "lq", "q", StopPolicy::kNone, "");
  EXPECT_EQ(EncodeObject(lq)["apiVersion"], kV1beta1);
  EXPECT_EQ(EncodeObject(MakeWpc("w", 1, "", ""))["apiVersion"], kV1beta1);
  EXPECT_EQ(EncodeObject(MakeCohort("c", "", "", 1.0))["apiVersion"], kV1beta1);
  ResourceFlavor rf;
  rf.meta = Meta("rf", "kueue.x-k8s.io/v2");
  EXPECT_EQ(EncodeObject(rf)["apiVersion"], kV1beta1);
}

// A cluster-scoped object never carries a namespace (the decoder would warn
// and drop it).
TEST(EncodeTest, ClusterScopedKindsWriteNoNamespace) {
  ResourceFlavor rf;
  rf.meta = Meta("rf", kV1beta1);
  rf.meta.namespace_name = "stray";
  EXPECT_FALSE(EncodeObject(rf)["metadata"].contains("namespace"));
}

TEST(EncodeTest, EveryPreemptionAndFungibilityValueRoundTrips) {
  PolicySet p;
  int n = 0;
  auto add = [&](ClusterQueue cq) {
    const std::string name = absl::StrCat("q", n++);
    cq.meta = Meta(name, n % 2 == 0 ? kV1beta1 : kV1beta2);
    Put(p.cluster_queues, std::move(cq));
  };
  for (WithinClusterQueuePolicy w : {WithinClusterQueuePolicy::kNever, WithinClusterQueuePolicy::kLowerPriority,
                                     WithinClusterQueuePolicy::kLowerOrNewerEqualPriority}) {
    for (ReclaimWithinCohortPolicy r :
         {ReclaimWithinCohortPolicy::kNever, ReclaimWithinCohortPolicy::kLowerPriority, ReclaimWithinCohortPolicy::kAny}) {
      ClusterQueue cq;
      cq.preemption.within_cluster_queue = w;
      cq.preemption.reclaim_within_cohort = r;
      add(cq);
      if (r == ReclaimWithinCohortPolicy::kNever) continue;  // borrowWithinCohort needs reclaim
      for (std::optional<int32_t> threshold : {std::optional<int32_t>(), std::optional<int32_t>(0),
                                               std::optional<int32_t>(std::numeric_limits<int32_t>::min()),
                                               std::optional<int32_t>(std::numeric_limits<int32_t>::max())}) {
        cq.preemption.borrow_within_cohort = BorrowWithinCohortPolicy::kLowerPriority;
        cq.preemption.borrow_max_priority_threshold = threshold;
        add(cq);
      }
    }
  }
  // A threshold with policy Never is kept too (Kueue ignores it, but it was written).
  ClusterQueue never_with_threshold;
  never_with_threshold.preemption.borrow_max_priority_threshold = 7;
  add(never_with_threshold);
  for (FungibilityPolicy borrow : {FungibilityPolicy::kMayStopSearch, FungibilityPolicy::kTryNextFlavor}) {
    for (FungibilityPolicy preempt : {FungibilityPolicy::kMayStopSearch, FungibilityPolicy::kTryNextFlavor}) {
      ClusterQueue cq;
      cq.flavor_fungibility = {borrow, preempt, FungibilityPreference::kUnset};
      add(cq);
    }
  }
  for (FungibilityPreference pref :
       {FungibilityPreference::kBorrowingOverPreemption, FungibilityPreference::kPreemptionOverBorrowing}) {
    ClusterQueue cq;
    cq.flavor_fungibility = {FungibilityPolicy::kTryNextFlavor, FungibilityPolicy::kTryNextFlavor, pref};
    add(cq);
  }
  for (StopPolicy s : {StopPolicy::kNone, StopPolicy::kHold, StopPolicy::kHoldAndDrain}) {
    for (QueueingStrategy q : {QueueingStrategy::kBestEffortFIFO, QueueingStrategy::kStrictFIFO}) {
      ClusterQueue cq;
      cq.stop_policy = s;
      cq.queueing_strategy = q;
      add(cq);
    }
    Put(p.local_queues, MakeLocalQueue("ns", absl::StrCat("lq", n++), "q0", s));
  }
  EXPECT_GE(p.cluster_queues.size(), 30u);
  ExpectRoundTrip(p);
}

TEST(EncodeTest, SelectorShapesRoundTrip) {
  PolicySet p;
  using Op = LabelSelectorRequirement::Operator;
  std::vector<LabelSelector> selectors = {
      LabelSelector{},
      LabelSelector{{{"a", "1"}, {"b", ""}}, {}},
      LabelSelector{{}, {{"k", Op::kIn, {"x"}}}},
      LabelSelector{{}, {{"k", Op::kNotIn, {"x", "y", "z"}}, {"k", Op::kExists, {}}}},
      LabelSelector{{{"kubernetes.io/metadata.name", "team-a"}}, {{"k", Op::kDoesNotExist, {}}}},
  };
  for (size_t i = 0; i < selectors.size(); ++i) {
    ClusterQueue cq;
    cq.meta = Meta(absl::StrCat("s", i), kV1beta1);
    cq.namespace_selector = selectors[i];
    Put(p.cluster_queues, cq);
  }
  ExpectRoundTrip(p);
}

// Weights that are whole milli-units are Kueue-style quantity strings; any
// other double is a JSON number that reads back bit for bit.
TEST(EncodeTest, FairSharingWeightsRoundTripExactly) {
  struct Case {
    double weight;
    json want;
  };
  const Case cases[] = {
      {0.0, "0"},           {1.0, "1"},           {0.5, "500m"},       {2.5, "2500m"},
      {0.001, "1m"},        {1000.0, "1k"},       {1e15, "1P"},        {1.0 / 3.0, 1.0 / 3.0},
      {1e-9, 1e-9},         {0.0005, 0.0005},     {123456.7891, 123456.7891},
      {4e15 + 0.5, 4e15 + 0.5},                  {1e300, 1e300},
  };
  PolicySet p;
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(Show(c.weight));
    ClusterQueue cq;
    cq.meta = Meta(absl::StrCat("q", n), kV1beta1);
    cq.fair_sharing_weight = c.weight;
    EXPECT_EQ(Spec(EncodeObject(cq))["fairSharing"]["weight"], c.want);
    Put(p.cluster_queues, cq);
    Put(p.cohorts, MakeCohort(absl::StrCat("c", n), kV1beta2, "", c.weight));
    ++n;
  }
  ExpectRoundTrip(p);
}

TEST(EncodeTest, QuantitiesUseTheirCanonicalSpelling) {
  ClusterQueue cq;
  cq.meta = Meta("q", kV1beta1);
  cq.resource_groups = TwoGroups();
  const json groups = Spec(EncodeObject(cq))["resourceGroups"];
  EXPECT_EQ(groups[0]["flavors"][0]["resources"][1]["nominalQuota"], "256Gi");
  EXPECT_EQ(groups[0]["flavors"][1]["resources"][0]["nominalQuota"], "1500m");
  EXPECT_EQ(groups[0]["flavors"][1]["resources"][1]["nominalQuota"], "1536Mi");
  EXPECT_EQ(groups[1]["flavors"][0]["resources"][1]["nominalQuota"], "1m");
}

// Only the decoder can fill in coveredResources; the encoder must not leave
// it out, or an explicitly empty list would come back filled.
TEST(EncodeTest, EmptyListsThatMeanSomethingAreWritten) {
  ClusterQueue cq;
  cq.meta = Meta("q", kV1beta1);
  ResourceGroup g;
  g.flavors.push_back(FlavorQuotas{"f", {Quota("cpu", "1")}});
  g.flavors.push_back(FlavorQuotas{"empty", {}});
  cq.resource_groups = {g};
  const json group = Spec(EncodeObject(cq))["resourceGroups"][0];
  EXPECT_EQ(group["coveredResources"], json::array());
  EXPECT_EQ(group["flavors"][1]["resources"], json::array());
  PolicySet p;
  Put(p.cluster_queues, cq);
  ExpectRoundTrip(p);
}

TEST(EncodeTest, MigGpuNodePoolsRoundTrip) {
  const GpuNodePool mixed = MakePool("migmixed", "a100-mig", GpuModel::kA100_80GB, 2, 3, MigStrategy::kMixed,
                                     {"MIG3g", "MIG2g", "MIG1g", "1g.10gb+me"});
  EXPECT_EQ(EncodeObject(mixed), json::parse(R"({
    "apiVersion": "gangkeeper.io/v1alpha1", "kind": "GPUNodePool", "metadata": {"name": "migmixed"},
    "spec": {"flavor": "a100-mig", "gpu": "A100-80GB", "gpusPerNode": 2, "nodes": 3, "migStrategy": "mixed",
             "migProfiles": ["MIG3g", "MIG2g", "MIG1g", "1g.10gb+me"]}})"));
  const GpuNodePool whole = MakePool("whole", "nvidia-gpu", GpuModel::kH100_80GB, 8, 0, MigStrategy::kNone, {});
  EXPECT_FALSE(Spec(EncodeObject(whole)).contains("migProfiles"));
  EXPECT_EQ(Spec(EncodeObject(whole))["migStrategy"], "none");

  PolicySet p;
  Put(p.gpu_node_pools, mixed);
  Put(p.gpu_node_pools, whole);
  Put(p.gpu_node_pools, MakePool("single", "a100-40", GpuModel::kA100_40GB, 1, 1, MigStrategy::kSingle,
                                 {"3g.20gb", "3g.20gb"}));
  Put(p.gpu_node_pools, MakePool("h200", "h200", GpuModel::kH200_141GB, 4, 2, MigStrategy::kMixed,
                                 {"4g.71gb", "2g.35gb", "1g.18gb"}));
  ExpectRoundTrip(p);
}

// Hand-built strings that are not UTF-8 cannot be written as JSON. They are
// replaced (as Kubernetes' own decoding does) instead of throwing.
TEST(EncodeTest, InvalidUtf8IsReplacedNotThrown) {
  PolicySet p;
  Put(p.workload_priority_classes, MakeWpc("w", 1, "bad \xff byte"));
  const std::string text = EncodeManifests(p);
  EXPECT_THAT(text, HasSubstr("bad \xEF\xBF\xBD byte"));
  PolicySet back;
  Diagnostics diagnostics;
  DecodeManifests(text, "encoded.json", &back, &diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors()) << diagnostics.ErrorSummary();
  EXPECT_EQ(back.workload_priority_classes.at("w").description, "bad \xEF\xBF\xBD byte");
  EXPECT_EQ(EncodeManifests(back), text);
}

// Brackets inside strings are text, not nesting: the decoder's depth guard
// must not refuse the encoded journal because of a description.
TEST(EncodeTest, BracketsInTextDoNotTripTheDepthLimit) {
  PolicySet p;
  Put(p.workload_priority_classes, MakeWpc("brackets", 1, std::string(300, '[') + std::string(300, '{')));
  Put(p.priority_classes, MakePc("quotes", 1, PreemptionPolicy::kNever, false, "\"[[[\\\"{{{\\"));
  ExpectRoundTrip(p);
}

// The comparison used above really notices a change in each field.
TEST(EncodeTest, DiffNamesTheFieldThatDiffers) {
  struct Case {
    const char* want_path;
    std::function<void(PolicySet&)> mutate;
  };
  auto cq = [](PolicySet& p) -> ClusterQueue& { return p.cluster_queues.at("team-a-gpu"); };
  auto rf = [](PolicySet& p) -> ResourceFlavor& { return p.flavors.at("nvidia-gpu"); };
  const Case cases[] = {
      {"flavors[nvidia-gpu].meta.name", [&](PolicySet& p) { rf(p).meta.name = "x"; }},
      {"flavors[nvidia-gpu].meta.labels[team]", [&](PolicySet& p) { rf(p).meta.labels["team"] = "b"; }},
      {"flavors[nvidia-gpu].meta.labels[new]: only on the left", [&](PolicySet& p) { rf(p).meta.labels["new"] = ""; }},
      {"flavors[nvidia-gpu].meta.api_version", [&](PolicySet& p) { rf(p).meta.api_version = kV1beta2; }},
      {"flavors[nvidia-gpu].meta.resource_version", [&](PolicySet& p) { rf(p).meta.resource_version = "1"; }},
      {"flavors[nvidia-gpu].meta.namespace_name", [&](PolicySet& p) { rf(p).meta.namespace_name = "n"; }},
      {"flavors[nvidia-gpu].node_labels[accelerator]", [&](PolicySet& p) { rf(p).node_labels["accelerator"] = "amd"; }},
      {"flavors[nvidia-gpu].node_taints[1].value", [&](PolicySet& p) { rf(p).node_taints[1].value = "v"; }},
      {"flavors[nvidia-gpu].node_taints[0].key", [&](PolicySet& p) { rf(p).node_taints[0].key = "k"; }},
      {"flavors[nvidia-gpu].node_taints[2].effect", [&](PolicySet& p) { rf(p).node_taints[2].effect = "NoSchedule"; }},
      {"flavors[nvidia-gpu].node_taints: 2 elements vs 3", [&](PolicySet& p) { rf(p).node_taints.pop_back(); }},
      {"flavors[nvidia-gpu].tolerations[0].key", [&](PolicySet& p) { rf(p).tolerations[0].key = "k"; }},
      {"flavors[nvidia-gpu].tolerations[0].op", [&](PolicySet& p) { rf(p).tolerations[0].op = "Exists"; }},
      {"flavors[nvidia-gpu].tolerations[0].value", [&](PolicySet& p) { rf(p).tolerations[0].value = "v"; }},
      {"flavors[nvidia-gpu].tolerations[0].effect", [&](PolicySet& p) { rf(p).tolerations[0].effect = ""; }},
      {"flavors[nvidia-gpu].tolerations[2].toleration_seconds: nullopt vs 300",
       [&](PolicySet& p) { rf(p).tolerations[2].toleration_seconds.reset(); }},
      {"flavors[nvidia-gpu].topology_name", [&](PolicySet& p) { rf(p).topology_name = ""; }},
      {"cluster_queues[team-a-gpu].namespace_selector: nullopt vs set",
       [&](PolicySet& p) { cq(p).namespace_selector.reset(); }},
      {"cluster_queues[team-a-gpu].namespace_selector.match_labels[kubernetes.io/metadata.name]",
       [&](PolicySet& p) { cq(p).namespace_selector->match_labels["kubernetes.io/metadata.name"] = "b"; }},
      {"cluster_queues[team-a-gpu].namespace_selector.match_expressions[0].key",
       [&](PolicySet& p) { cq(p).namespace_selector->match_expressions[0].key = "k"; }},
      {"cluster_queues[team-a-gpu].namespace_selector.match_expressions[1].op",
       [&](PolicySet& p) { cq(p).namespace_selector->match_expressions[1].op = LabelSelectorRequirement::Operator::kIn; }},
      {"cluster_queues[team-a-gpu].namespace_selector.match_expressions[0].values",
       [&](PolicySet& p) { cq(p).namespace_selector->match_expressions[0].values.push_back("z"); }},
      {"cluster_queues[team-a-gpu].cohort", [&](PolicySet& p) { cq(p).cohort = ""; }},
      {"cluster_queues[team-a-gpu].queueing_strategy",
       [&](PolicySet& p) { cq(p).queueing_strategy = QueueingStrategy::kBestEffortFIFO; }},
      {"cluster_queues[team-a-gpu].resource_groups[1].covered_resources",
       [&](PolicySet& p) { cq(p).resource_groups[1].covered_resources.pop_back(); }},
      {"cluster_queues[team-a-gpu].resource_groups[0].flavors[1].name",
       [&](PolicySet& p) { cq(p).resource_groups[0].flavors[1].name = "x"; }},
      {"cluster_queues[team-a-gpu].resource_groups[0].flavors[0].resources[2].name",
       [&](PolicySet& p) { cq(p).resource_groups[0].flavors[0].resources[2].name = "x"; }},
      {"cluster_queues[team-a-gpu].resource_groups[0].flavors[0].resources[1].nominal: 257Gi vs 256Gi",
       [&](PolicySet& p) { cq(p).resource_groups[0].flavors[0].resources[1].nominal = Q("257Gi"); }},
      {"cluster_queues[team-a-gpu].resource_groups[0].flavors[0].resources[0].borrowing_limit: nullopt vs 0",
       [&](PolicySet& p) { cq(p).resource_groups[0].flavors[0].resources[0].borrowing_limit.reset(); }},
      {"cluster_queues[team-a-gpu].resource_groups[0].flavors[0].resources[1].lending_limit",
       [&](PolicySet& p) { cq(p).resource_groups[0].flavors[0].resources[1].lending_limit = Q("1"); }},
      {"cluster_queues[team-a-gpu].flavor_fungibility.when_can_borrow",
       [&](PolicySet& p) { cq(p).flavor_fungibility.when_can_borrow = FungibilityPolicy::kMayStopSearch; }},
      {"cluster_queues[team-a-gpu].flavor_fungibility.when_can_preempt",
       [&](PolicySet& p) { cq(p).flavor_fungibility.when_can_preempt = FungibilityPolicy::kMayStopSearch; }},
      {"cluster_queues[team-a-gpu].flavor_fungibility.preference",
       [&](PolicySet& p) { cq(p).flavor_fungibility.preference = FungibilityPreference::kUnset; }},
      {"cluster_queues[team-a-gpu].preemption.within_cluster_queue",
       [&](PolicySet& p) { cq(p).preemption.within_cluster_queue = WithinClusterQueuePolicy::kNever; }},
      {"cluster_queues[team-a-gpu].preemption.reclaim_within_cohort",
       [&](PolicySet& p) { cq(p).preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kLowerPriority; }},
      {"cluster_queues[team-a-gpu].preemption.borrow_within_cohort",
       [&](PolicySet& p) { cq(p).preemption.borrow_within_cohort = BorrowWithinCohortPolicy::kNever; }},
      {"cluster_queues[team-a-gpu].preemption.borrow_max_priority_threshold: 1001 vs 1000",
       [&](PolicySet& p) { cq(p).preemption.borrow_max_priority_threshold = 1001; }},
      {"cluster_queues[team-a-gpu].fair_sharing_weight: 2.5000000000000004 vs 2.5",
       [&](PolicySet& p) { cq(p).fair_sharing_weight = std::nextafter(2.5, 3.0); }},
      {"cluster_queues[team-a-gpu].stop_policy", [&](PolicySet& p) { cq(p).stop_policy = StopPolicy::kHold; }},
      {"cluster_queues[team-a-gpu]: only on the right", [&](PolicySet& p) { p.cluster_queues.erase("team-a-gpu"); }},
      {"local_queues[team-b/drain].cluster_queue",
       [&](PolicySet& p) { p.local_queues.at({"team-b", "drain"}).cluster_queue = "x"; }},
      {"local_queues[team-b/drain].stop_policy",
       [&](PolicySet& p) { p.local_queues.at({"team-b", "drain"}).stop_policy = StopPolicy::kNone; }},
      {"local_queues[team-a/gpu-queue].meta.namespace_name",
       [&](PolicySet& p) { p.local_queues.at({"team-a", "gpu-queue"}).meta.namespace_name = "x"; }},
      {"cohorts[gpu-shared].parent", [&](PolicySet& p) { p.cohorts.at("gpu-shared").parent = ""; }},
      {"cohorts[gpu-shared].resource_groups: 0 elements vs 2",
       [&](PolicySet& p) { p.cohorts.at("gpu-shared").resource_groups.clear(); }},
      {"cohorts[gpu-shared].fair_sharing_weight",
       [&](PolicySet& p) { p.cohorts.at("gpu-shared").fair_sharing_weight = 1; }},
      {"cohorts[root].meta.api_version", [&](PolicySet& p) { p.cohorts.at("root").meta.api_version = kV1beta2; }},
      {"workload_priority_classes[highest].value",
       [&](PolicySet& p) { p.workload_priority_classes.at("highest").value = 0; }},
      {"workload_priority_classes[highest].description",
       [&](PolicySet& p) { p.workload_priority_classes.at("highest").description = ""; }},
      {"priority_classes[training-batch].value", [&](PolicySet& p) { p.priority_classes.at("training-batch").value++; }},
      {"priority_classes[training-batch].preemption_policy",
       [&](PolicySet& p) {
         p.priority_classes.at("training-batch").preemption_policy = PreemptionPolicy::kPreemptLowerPriority;
       }},
      {"priority_classes[training-batch].global_default: true vs false",
       [&](PolicySet& p) { p.priority_classes.at("training-batch").global_default = true; }},
      {"priority_classes[training-batch].description",
       [&](PolicySet& p) { p.priority_classes.at("training-batch").description = "d"; }},
      {"namespaces[team-b].meta.labels[x]: only on the left",
       [&](PolicySet& p) { p.namespaces.at("team-b").meta.labels["x"] = "y"; }},
      {"gpu_node_pools[migmixed].name", [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").name = "x"; }},
      {"gpu_node_pools[migmixed].flavor", [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").flavor = "x"; }},
      {"gpu_node_pools[migmixed].gpu",
       [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").gpu = GpuModel::kH100_80GB; }},
      {"gpu_node_pools[migmixed].gpus_per_node",
       [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").gpus_per_node = 2; }},
      {"gpu_node_pools[migmixed].nodes", [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").nodes = 1; }},
      {"gpu_node_pools[migmixed].mig_strategy",
       [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").mig_strategy = MigStrategy::kSingle; }},
      {"gpu_node_pools[migmixed].mig_profiles",
       [&](PolicySet& p) { p.gpu_node_pools.at("migmixed").mig_profiles.pop_back(); }},
  };
  const PolicySet base = FullPolicySet();
  EXPECT_THAT(Diff(base, base), IsEmpty());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want_path);
    PolicySet changed = base;
    c.mutate(changed);
    // Left is the changed set, right the original.
    std::vector<std::string> diffs = Diff(changed, base);
    ASSERT_EQ(diffs.size(), 1u) << absl::StrJoin(diffs, "\n");
    EXPECT_THAT(diffs[0], HasSubstr(c.want_path));
  }
  // SourceRefs are where an object was read from, not what it is.
  PolicySet moved = base;
  moved.flavors.at("nvidia-gpu").meta.source = SourceRef{"elsewhere.yaml", 3};
  moved.gpu_node_pool_sources["migmixed"] = SourceRef{"elsewhere.yaml", 4};
  EXPECT_THAT(Diff(base, moved), IsEmpty());
}

// ---------------------------------------------------------------------------
// Decoder fixes found while writing the encoder.

// YAML must be UTF-8 (go-yaml, and so kubectl, refuses anything else); a
// string that is not could not be written to the journal or the API.
TEST(EncodeDecoderTest, YamlStringsMustBeUtf8) {
  Decoded raw = Decode(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: w\nvalue: 1\n"
      "description: \"bad \xff byte\"\n",
      /*validate=*/false);
  EXPECT_THAT(raw.Errors(), ElementsAre(HasSubstr("not valid UTF-8")));
  EXPECT_TRUE(raw.policies.workload_priority_classes.empty());
  // A lone surrogate escape would decode to bytes that are not UTF-8; yaml-cpp
  // already refuses it.
  Decoded escape = Decode(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: w\nvalue: 1\n"
      "description: \"\\ud800\"\n",
      /*validate=*/false);
  EXPECT_THAT(escape.Errors(), ElementsAre(HasSubstr("invalid unicode")));
  Decoded key = Decode("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n  labels:\n    \"k\xc3\": v\n",
                       /*validate=*/false);
  EXPECT_THAT(key.Errors(), ElementsAre(HasSubstr("not valid UTF-8")));
  // Other documents of the same file still load.
  Decoded mixed = Decode("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n---\n"
                         "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bad\n  labels:\n    k: \"\xe2\x82\"\n",
                         /*validate=*/false);
  EXPECT_THAT(mixed.Errors(), ElementsAre(HasSubstr("test.yaml#2")));
  EXPECT_EQ(mixed.policies.namespaces.count("ok"), 1u);
  // Valid multi-byte text is fine.
  Decoded good = Decode(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata:\n  name: w\nvalue: 1\n"
      "description: \"ünïcödé ✓ \\u00ff \\U0001F600\"\n",
      /*validate=*/false);
  EXPECT_THAT(good.Errors(), IsEmpty()) << good.All();
  EXPECT_EQ(good.policies.workload_priority_classes.at("w").description, "ünïcödé ✓ ÿ \xF0\x9F\x98\x80");
}

// The depth guard still refuses really deep JSON, and brackets in JSON
// strings no longer count.
TEST(EncodeDecoderTest, JsonDepthGuardSkipsStrings) {
  Decoded deep = Decode(std::string(200, '[') + std::string(200, ']'), /*validate=*/false);
  EXPECT_THAT(deep.Errors(), ElementsAre(HasSubstr("nested deeper than")));
  Decoded deep_object = Decode("{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}", false);
  EXPECT_THAT(deep_object.Errors(), ElementsAre(HasSubstr("nested deeper than")));
  Decoded text = Decode(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","labels":{"k":")" +
                            std::string(200, '[') + R"(\"{"}}})",
                        /*validate=*/false);
  EXPECT_THAT(text.Errors(), IsEmpty()) << text.All();
  EXPECT_EQ(text.policies.namespaces.at("n").meta.labels.at("k"), std::string(200, '[') + "\"{");
}

}  // namespace
}  // namespace gangkeeper::model
