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

absl::Status AddOne(const std::string& name, const Quantity& amount, ResourceList* to) {
  Quantity& have = (*to)[name];
  absl::StatusOr<Quantity> sum = have.Add(amount);
  if (!sum.ok()) return absl::OutOfRangeError(absl::StrCat("the pod's total ", name, " does not fit in a quantity"));
  have = *sum;
  return absl::OkStatus();
}

absl::Status AddInto(const ResourceList& add, ResourceList* to) {
  for (const auto& [name, amount] : add) GK_RETURN_IF_ERROR(AddOne(name, amount, to));
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

// Adds what Select(c, pass) holds to `to` without copying it (the common
// path: every container of every pod set of every review).
absl::Status AddSelected(const ContainerResources& c, Pass pass, ResourceList* to) {
  if (pass == Pass::kLimits) return AddInto(c.limits, to);
  GK_RETURN_IF_ERROR(AddInto(c.requests, to));
  for (const auto& [name, limit] : c.limits) {
    if (!c.requests.contains(name)) GK_RETURN_IF_ERROR(AddOne(name, limit, to));
  }
  return absl::OkStatus();
}

absl::StatusOr<ResourceList> Aggregate(const PodResources& pod, Pass pass) {
  ResourceList sum;
  for (const ContainerResources& c : pod.containers) GK_RETURN_IF_ERROR(AddSelected(c, pass, &sum));

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
    GK_RETURN_IF_ERROR(AddOne(name, amount, &sum));
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
