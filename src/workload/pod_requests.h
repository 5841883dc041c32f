// gangkeeper: a pod's effective resource requests and limits.
//
// The arithmetic Kubernetes uses to decide how much of a node one pod takes
// (component-helpers resource.PodRequests / PodLimits), on values already
// read from JSON, so it can be tested on its own. Called by pod_spec.cc for
// every pod template. Pure functions; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::workload {

using ResourceList = std::map<std::string, quantity::Quantity>;

// One container's resources as written in its spec.
struct ContainerResources {
  ResourceList requests;
  ResourceList limits;
  // An init container with restartPolicy: Always (a sidecar): it keeps
  // running next to the regular containers.
  bool sidecar = false;
};

struct PodResources {
  std::vector<ContainerResources> containers;
  std::vector<ContainerResources> init_containers;  // in spec order
  ResourceList overhead;                            // spec.overhead
  // Pod-level spec.resources (PodLevelResources); only cpu, memory and
  // hugepages-* are honoured there, as in Kubernetes.
  ResourceList pod_requests;
  ResourceList pod_limits;
};

struct EffectiveResources {
  ResourceList requests;
  ResourceList limits;
};

// The pod's effective requests and limits:
//   1. each container's limit stands in for a missing request (the API
//      server's defaulting);
//   2. sum = regular containers + sidecars;
//   3. each non-sidecar init container counts with the sidecars started
//      before it, each sidecar with itself and the sidecars before it; the
//      largest of these is the init peak;
//   4. per resource, max(sum, init peak);
//   5. pod-level resources, when set, replace the result for cpu, memory and
//      hugepages-* (a pod-level limit stands in for a missing pod-level
//      request);
//   6. overhead is added to every request, and to the limits the pod has.
// Resources named with a zero amount are kept. Returns OutOfRange, naming
// the resource, when a sum does not fit in a Quantity.
[[nodiscard]] absl::StatusOr<EffectiveResources> ComputeEffectiveResources(const PodResources& pod);

}  // namespace gangkeeper::workload
