// gangkeeper: ray.io RayCluster and RayJob → "head" + one pod set per worker group (see kinds.h).
//
// A RayCluster's spec (a RayJob's spec.rayClusterSpec) has a headGroupSpec
// (pod set "head", count 1) and workerGroupSpecs[i] (pod set = groupName).
// A worker group's count is replicas, else minReplicas, else 1; capped at
// maxReplicas when set; times numOfHosts when that is above 1 (multi-host
// groups, as Kueue counts them). With spec.enableInTreeAutoscaling, KubeRay
// adds an autoscaler sidecar to the head pod, counted here with
// autoscalerOptions.resources or KubeRay's default (500m CPU, 512Mi).
//
// Not counted: a RayJob's submitter pod (submissionMode K8sJobMode runs it
// as a separate small Job; Kueue adds it as pod set "submitter"), and the
// Redis cleanup Job of GCS fault tolerance. Both are short-lived and small.
// A RayJob without rayClusterSpec (clusterSelector: run on an existing
// cluster) has nothing to admit and is an error.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

constexpr absl::string_view kHeadPodSet = "head";

ContainerResources AutoscalerContainer(const JsonNode& cluster_spec, base::FieldErrors* errors) {
  if (std::optional<JsonNode> options = ObjectField(cluster_spec, "autoscalerOptions", errors); options.has_value()) {
    if (std::optional<JsonNode> resources = ObjectField(*options, "resources", errors); resources.has_value()) {
      return ReadResourceRequirements(*resources, errors);
    }
  }
  ContainerResources defaults;
  defaults.requests = {{"cpu", quantity::Quantity::FromMilli(500)},
                       {"memory", quantity::Quantity::FromUnits(512LL * 1024 * 1024)}};
  defaults.limits = defaults.requests;
  return defaults;
}

std::optional<int64_t> WorkerCount(const JsonNode& group, base::FieldErrors* errors) {
  const size_t errors_before = errors->size();
  std::optional<int64_t> replicas = IntField(group, "replicas", 0, kMaxPodCount, errors);
  std::optional<int64_t> min_replicas = IntField(group, "minReplicas", 0, kMaxPodCount, errors);
  std::optional<int64_t> max_replicas = IntField(group, "maxReplicas", 0, kMaxPodCount, errors);
  std::optional<int64_t> hosts = IntField(group, "numOfHosts", 0, kMaxPodCount, errors);
  if (errors->size() != errors_before) return std::nullopt;
  int64_t count = replicas.has_value() ? *replicas : min_replicas.value_or(1);
  if (max_replicas.has_value() && count > *max_replicas) count = *max_replicas;
  if (hosts.value_or(1) > 1) return CheckedPodCount(count, *hosts, group.path(), "replicas * numOfHosts", errors);
  return count;
}

// `templates`: the kind's template pointers (under "/spec" for a RayCluster,
// "/spec/rayClusterSpec" for a RayJob).
KindResult ExtractRayClusterSpec(const JsonNode& cluster_spec, const PodTemplates& templates,
                                 base::FieldErrors* errors) {
  KindResult result;
  std::vector<ContainerResources> head_extra;
  if (BoolField(cluster_spec, "enableInTreeAutoscaling", errors).value_or(false)) {
    head_extra.push_back(AutoscalerContainer(cluster_spec, errors));
  }
  if (std::optional<JsonNode> head = ObjectField(cluster_spec, "headGroupSpec", errors, Presence::kRequired);
      head.has_value()) {
    std::optional<PodSet> pod_set = ReadPodTemplate(*head, "template", errors, head_extra);
    if (pod_set.has_value()) {
      pod_set->name = std::string(kHeadPodSet);
      pod_set->count = 1;
      pod_set->template_pointer = std::string(templates.fixed);
      result.Add(std::move(*pod_set), head->path(), head->path().Child("template").Child("spec"));
    }
  }

  std::optional<JsonNode> groups = ListField(cluster_spec, "workerGroupSpecs", errors);
  if (!groups.has_value()) return result;
  size_t index = 0;
  for (const JsonNode& group : Items(*groups)) {
    const size_t group_index = index++;
    if (!ExpectObject(group, errors)) continue;
    std::optional<std::string> name = StringField(group, "groupName", errors, Presence::kRequired);
    if (name.has_value() && name->empty()) {
      errors->Add(group.path().Child("groupName"), base::FieldErrorType::kRequired, "must not be empty");
    }
    std::optional<int64_t> count = WorkerCount(group, errors);
    std::optional<PodSet> pod_set = ReadPodTemplate(group, "template", errors);
    if (!name.has_value() || name->empty() || !count.has_value() || !pod_set.has_value()) continue;
    pod_set->name = *name;
    pod_set->count = *count;
    pod_set->template_pointer = TemplatePointer(templates.each, absl::StrCat(group_index));
    result.Add(std::move(*pod_set), group.path().Child("groupName"), group.path().Child("template").Child("spec"));
  }
  return result;
}

}  // namespace

KindResult ExtractRayCluster(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return KindResult();
  return ExtractRayClusterSpec(*spec, TemplatesFor(Kind::kRayCluster), errors);
}

KindResult ExtractRayJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return KindResult();
  std::optional<JsonNode> cluster_spec = ObjectField(*spec, "rayClusterSpec", errors);
  if (!cluster_spec.has_value()) {
    if (spec->value().IsObject() && !Member(*spec, "rayClusterSpec").has_value()) {
      errors->Add(spec->path().Child("rayClusterSpec"), base::FieldErrorType::kRequired,
                  "required: a RayJob that runs on an existing cluster (clusterSelector) has no pods to admit");
    }
    return KindResult();
  }
  return ExtractRayClusterSpec(*cluster_spec, TemplatesFor(Kind::kRayJob), errors);
}

}  // namespace gangkeeper::workload
