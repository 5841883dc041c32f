// gangkeeper: a pod's effective resource requests and limits (see pod_requests.h).
#include "src/workload/pod_requests.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"

namespace gangkeeper::workload {
namespace {

using quantity::Quantity;

absl::Status AddInto(const ResourceList& add, ResourceList* to) {
  for (const auto& [name, amount] : add) {
    absl::StatusOr<Quantity> sum = (*to)[name].Add(amount);
    if (!sum.ok()) {
      return absl::OutOfRangeError(absl::StrCat("the pod's total ", name, " does not fit in a quantity"));
    }
    (*to)[name] = *sum;
  }
  return absl::OkStatus();
}

void MaxInto(const ResourceList& other, ResourceList* to) {
  for (const auto& [name, amount] : other) {
    auto it = to->find(name);
    if (it == to->end()) {
      to->emplace(name, amount);
    } else {
      it->second = std::max(it->second, amount);
    }
  }
}

bool IsPodLevelResource(const std::string& name) {
  return name == "cpu" || name == "memory" || absl::StartsWith(name, "hugepages-");
}

// Which list of a container a pass aggregates.
enum class Pass { kRequests, kLimits };

ResourceList Select(const ContainerResources& c, Pass pass) {
  if (pass == Pass::kLimits) return c.limits;
  ResourceList requests = c.requests;
  for (const auto& [name, limit] : c.limits) requests.emplace(name, limit);  // keeps an explicit request
  return requests;
}

absl::StatusOr<ResourceList> Aggregate(const PodResources& pod, Pass pass) {
  ResourceList sum;
  for (const ContainerResources& c : pod.containers) GK_RETURN_IF_ERROR(AddInto(Select(c, pass), &sum));

  ResourceList sidecars;   // sidecars started so far
  ResourceList init_peak;  // the largest init-phase demand
  for (const ContainerResources& c : pod.init_containers) {
    ResourceList own = Select(c, pass);
    ResourceList during;
    if (c.sidecar) {
      GK_RETURN_IF_ERROR(AddInto(own, &sum));
      GK_RETURN_IF_ERROR(AddInto(own, &sidecars));
      during = sidecars;
    } else {
      during = own;
      GK_RETURN_IF_ERROR(AddInto(sidecars, &during));
    }
    MaxInto(during, &init_peak);
  }
  MaxInto(init_peak, &sum);

  ResourceList pod_level = pass == Pass::kLimits ? pod.pod_limits : pod.pod_requests;
  if (pass == Pass::kRequests) {
    for (const auto& [name, limit] : pod.pod_limits) pod_level.emplace(name, limit);
  }
  for (const auto& [name, amount] : pod_level) {
    if (IsPodLevelResource(name)) sum[name] = amount;
  }

  for (const auto& [name, amount] : pod.overhead) {
    if (pass == Pass::kLimits && !sum.contains(name)) continue;
    GK_RETURN_IF_ERROR(AddInto(ResourceList{{name, amount}}, &sum));
  }
  return sum;
}

}  // namespace

absl::StatusOr<EffectiveResources> ComputeEffectiveResources(const PodResources& pod) {
  EffectiveResources out;
  GK_ASSIGN_OR_RETURN(out.requests, Aggregate(pod, Pass::kRequests));
  GK_ASSIGN_OR_RETURN(out.limits, Aggregate(pod, Pass::kLimits));
  return out;
}

}  // namespace gangkeeper::workload
