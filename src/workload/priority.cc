// gangkeeper: priority resolution (see priority.h).
#include "src/workload/priority.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gangkeeper::workload {
namespace {

// What a pod PriorityClass gives a workload.
struct PodClass {
  std::string name;
  int32_t value = 0;
  model::PreemptionPolicy preemption_policy = model::PreemptionPolicy::kPreemptLowerPriority;
};

struct BuiltinClass {
  absl::string_view name;
  int32_t value;
};

// Created by the API server in every cluster (scheduling/v1).
constexpr BuiltinClass kBuiltinClasses[] = {
    {"system-cluster-critical", 2000000000},
    {"system-node-critical", 2000001000},
};

std::optional<PodClass> FindPodClass(const model::PolicySet& policies, absl::string_view name) {
  auto it = policies.priority_classes.find(std::string(name));
  if (it != policies.priority_classes.end()) {
    return PodClass{it->first, it->second.value, it->second.preemption_policy};
  }
  for (const BuiltinClass& b : kBuiltinClasses) {
    if (b.name == name) return PodClass{std::string(b.name), b.value};
  }
  return std::nullopt;
}

std::optional<PodClass> GlobalDefault(const model::PolicySet& policies) {
  std::optional<PodClass> best;
  for (const auto& [name, pc] : policies.priority_classes) {
    if (!pc.global_default) continue;
    if (!best.has_value() || pc.value < best->value) best = PodClass{name, pc.value, pc.preemption_policy};
  }
  return best;
}

// "a, b, c" (at most 20 names), or "none".
template <typename Map>
std::string DefinedNames(const Map& classes) {
  constexpr size_t kMaxListed = 20;
  std::vector<absl::string_view> names;
  for (const auto& entry : classes) {
    if (names.size() == kMaxListed) break;
    names.push_back(entry.first);
  }
  if (names.empty()) return "none";
  std::string out = absl::StrJoin(names, ", ");
  if (classes.size() > kMaxListed) absl::StrAppend(&out, ", ... (", classes.size(), " in all)");
  return out;
}

}  // namespace

ResolvedPriority ResolvePriority(const model::PolicySet& policies, absl::string_view workload_class,
                                 const base::FieldPath& workload_class_path, absl::string_view pod_class,
                                 const base::FieldPath& pod_class_path, base::FieldErrors* errors) {
  ResolvedPriority out;

  // The class the pods run with decides preemption (and is step 2/3's value).
  std::optional<PodClass> pods;
  std::string pod_source;
  if (!pod_class.empty()) {
    pods = FindPodClass(policies, pod_class);
    pod_source = std::string(kSourcePriorityClass);
    if (!pods.has_value()) {
      errors->Add(pod_class_path, base::FieldErrorType::kNotSupported,
                  absl::StrCat("PriorityClass \"", pod_class, "\" does not exist (defined: ",
                               DefinedNames(policies.priority_classes), ")"));
    }
  } else {
    pods = GlobalDefault(policies);
    pod_source = std::string(kSourceGlobalDefault);
  }
  if (pods.has_value()) out.preemption_policy = pods->preemption_policy;

  if (!workload_class.empty()) {
    auto it = policies.workload_priority_classes.find(std::string(workload_class));
    if (it == policies.workload_priority_classes.end()) {
      errors->Add(workload_class_path, base::FieldErrorType::kNotSupported,
                  absl::StrCat("WorkloadPriorityClass \"", workload_class, "\" does not exist (defined: ",
                               DefinedNames(policies.workload_priority_classes), ")"));
      return out;
    }
    out.priority = it->second.value;
    out.priority_class = it->first;
    out.source = std::string(kSourceWorkloadPriorityClass);
    return out;
  }
  if (pods.has_value()) {
    out.priority = pods->value;
    out.priority_class = pods->name;
    out.source = pod_source;
  }
  return out;
}

}  // namespace gangkeeper::workload
