// gangkeeper: reading a pod template or pod spec into a PodSet (see pod_spec.h).
#include "src/workload/pod_spec.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gangkeeper::workload {
namespace {

using base::FieldErrors;
using base::FieldErrorType;

// Reads containers (or initContainers) into `out`. `init` enables the
// restartPolicy (sidecar) field.
void ReadContainers(const JsonNode& list, bool init, FieldErrors* errors, std::vector<ContainerResources>* out) {
  for (const JsonNode& container : Items(list)) {
    if (!ExpectObject(container, errors)) continue;
    ContainerResources resources;
    if (std::optional<JsonNode> r = ObjectField(container, "resources", errors); r.has_value()) {
      resources = ReadResourceRequirements(*r, errors);
    }
    std::optional<JsonNode> restart_policy = Member(container, "restartPolicy");
    if (init && restart_policy.has_value()) {
      std::optional<std::string> policy = AsString(*restart_policy, errors);
      if (policy == "Always") {
        resources.sidecar = true;
      } else if (policy.has_value()) {
        errors->Add(restart_policy->path(), FieldErrorType::kNotSupported,
                    absl::StrCat("an init container's restartPolicy may only be Always (a sidecar), got \"", *policy,
                                 "\""));
      }
    }
    out->push_back(std::move(resources));
  }
}

std::vector<model::Toleration> ReadTolerations(const JsonNode& spec, FieldErrors* errors) {
  std::vector<model::Toleration> out;
  std::optional<JsonNode> list = ListField(spec, "tolerations", errors);
  if (!list.has_value()) return out;
  for (const JsonNode& item : Items(*list)) {
    if (!ExpectObject(item, errors)) continue;
    model::Toleration t;
    t.key = StringField(item, "key", errors).value_or("");
    std::optional<std::string> op = StringField(item, "operator", errors);
    if (op.has_value() && !op->empty()) {
      if (*op != "Equal" && *op != "Exists") {
        errors->Add(item.path().Child("operator"), FieldErrorType::kNotSupported,
                    absl::StrCat("must be Equal or Exists, got \"", *op, "\""));
      }
      t.op = *op;
    }
    t.value = StringField(item, "value", errors).value_or("");
    t.effect = StringField(item, "effect", errors).value_or("");
    t.toleration_seconds = IntField(item, "tolerationSeconds", std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max(), errors);
    out.push_back(std::move(t));
  }
  return out;
}

// Any volume backed by a PersistentVolumeClaim: a persistentVolumeClaim
// volume, or a generic ephemeral volume with a volumeClaimTemplate.
bool ReadHasPersistentVolume(const JsonNode& spec, FieldErrors* errors) {
  std::optional<JsonNode> list = ListField(spec, "volumes", errors);
  if (!list.has_value()) return false;
  bool found = false;
  for (const JsonNode& volume : Items(*list)) {
    if (!ExpectObject(volume, errors)) continue;
    if (ObjectField(volume, "persistentVolumeClaim", errors).has_value()) found = true;
    if (std::optional<JsonNode> eph = ObjectField(volume, "ephemeral", errors); eph.has_value()) {
      if (ObjectField(*eph, "volumeClaimTemplate", errors).has_value()) found = true;
    }
  }
  return found;
}

}  // namespace

ContainerResources ReadResourceRequirements(const JsonNode& resources, FieldErrors* errors) {
  ContainerResources out;
  if (!ExpectObject(resources, errors)) return out;
  out.requests = ResourceMapField(resources, "requests", errors);
  out.limits = ResourceMapField(resources, "limits", errors);
  return out;
}

std::optional<PodSet> ReadPodSpec(const JsonNode& spec, FieldErrors* errors,
                                  const std::vector<ContainerResources>& extra_containers) {
  if (!ExpectObject(spec, errors)) return std::nullopt;
  PodResources pod;
  std::optional<JsonNode> containers = ListField(spec, "containers", errors, Presence::kRequired);
  if (containers.has_value()) {
    if (containers->value().Empty()) {
      errors->Add(containers->path(), FieldErrorType::kRequired, "a pod needs at least one container");
    }
    ReadContainers(*containers, /*init=*/false, errors, &pod.containers);
  }
  if (std::optional<JsonNode> init = ListField(spec, "initContainers", errors); init.has_value()) {
    ReadContainers(*init, /*init=*/true, errors, &pod.init_containers);
  }
  pod.containers.insert(pod.containers.end(), extra_containers.begin(), extra_containers.end());
  pod.overhead = ResourceMapField(spec, "overhead", errors);
  if (std::optional<JsonNode> r = ObjectField(spec, "resources", errors); r.has_value()) {
    ContainerResources pod_level = ReadResourceRequirements(*r, errors);
    pod.pod_requests = std::move(pod_level.requests);
    pod.pod_limits = std::move(pod_level.limits);
  }

  PodSet out;
  absl::StatusOr<EffectiveResources> effective = ComputeEffectiveResources(pod);
  if (effective.ok()) {
    out.requests = std::move(effective->requests);
    out.limits = std::move(effective->limits);
  } else {
    errors->Add(spec.path(), FieldErrorType::kInvalid, effective.status().message());
  }
  out.priority_class_name = StringField(spec, "priorityClassName", errors).value_or("");
  out.node_selector = StringMapField(spec, "nodeSelector", errors);
  out.tolerations = ReadTolerations(spec, errors);
  out.has_persistent_volume = ReadHasPersistentVolume(spec, errors);
  return out;
}

std::optional<PodSet> ReadPodTemplate(const JsonNode& parent, absl::string_view name, FieldErrors* errors,
                                      const std::vector<ContainerResources>& extra_containers) {
  std::optional<JsonNode> tmpl = ObjectField(parent, name, errors, Presence::kRequired);
  if (!tmpl.has_value()) return std::nullopt;
  std::optional<JsonNode> spec = ObjectField(*tmpl, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return std::nullopt;
  return ReadPodSpec(*spec, errors, extra_containers);
}

}  // namespace gangkeeper::workload
