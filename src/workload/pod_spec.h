// gangkeeper: reading a pod template or pod spec into a PodSet.
//
// Every kind ends at one or more PodSpecs (a Job's spec.template.spec, a
// PyTorchJob replica's template.spec, a Pod's spec). ReadPodSpec reads what
// the broker needs from one: the effective per-pod requests and limits
// (pod_requests.h), nodeSelector, tolerations, priorityClassName and whether
// it mounts a PersistentVolumeClaim. Problems are added to `errors` with
// their paths. Pure functions; thread-compatible.
#pragma once

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/workload/workload.h"
#include "src/workload/json_access.h"
#include "src/workload/pod_requests.h"

namespace gangkeeper::workload {

// Reads the PodSpec at `spec`. `extra_containers` are counted as regular
// containers the controller adds at run time (the Ray autoscaler sidecar).
// The PodSet's name and count are left for the caller. nullopt when `spec`
// is unusable (errors added).
std::optional<PodSet> ReadPodSpec(const JsonNode& spec, base::FieldErrors* errors,
                                  const std::vector<ContainerResources>& extra_containers = {});

// Reads the required PodTemplateSpec member `name` of `parent` (usually
// "template") and its required `spec`, whose path is
// parent.path().Child(name).Child("spec").
std::optional<PodSet> ReadPodTemplate(const JsonNode& parent, absl::string_view name, base::FieldErrors* errors,
                                      const std::vector<ContainerResources>& extra_containers = {});

// Reads a ResourceRequirements object ({requests, limits}) at `resources`.
ContainerResources ReadResourceRequirements(const JsonNode& resources, base::FieldErrors* errors);

}  // namespace gangkeeper::workload
