// gangkeeper: Kubeflow training jobs → one pod set per replica type (see kinds.h).
//
// PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob (kubeflow.org/v1) and MPIJob
// (kubeflow.org/v2beta1, or v1) all keep a map of replica type → {replicas,
// template} under spec.<x>ReplicaSpecs and a runPolicy. Pod sets follow a
// fixed replica-type order per kind (Kueue's OrderedReplicaTypes), named by
// the lower-case type, count = replicas (default 1). Replica types match
// case-insensitively, as Kubeflow's defaulting normalizes "worker" to
// "Worker"; a type the kind does not know is an error, because its pods
// would run outside the quota. The pod PriorityClass comes from
// runPolicy.schedulingPolicy.priorityClass, else from the first replica
// template (in the fixed order) that names one.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

struct KubeflowShape {
  Kind id;
  absl::string_view kind;
  absl::string_view replica_specs_field;
  std::vector<absl::string_view> replica_types;  // pod-set order
};

KindResult ExtractKubeflow(const JsonNode& object, const KubeflowShape& shape, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;

  if (std::optional<JsonNode> run_policy = ObjectField(*spec, "runPolicy", errors); run_policy.has_value()) {
    if (std::optional<JsonNode> scheduling = ObjectField(*run_policy, "schedulingPolicy", errors);
        scheduling.has_value()) {
      std::optional<std::string> pc = StringField(*scheduling, "priorityClass", errors);
      if (pc.has_value() && !pc->empty()) {
        result.priority_class = *pc;
        result.priority_class_path = scheduling->path().Child("priorityClass");
      }
    }
  }

  std::optional<JsonNode> replica_specs =
      ObjectField(*spec, shape.replica_specs_field, errors, Presence::kRequired);
  if (!replica_specs.has_value()) return result;
  const std::vector<std::pair<std::string, JsonNode>> entries = Entries(*replica_specs, errors);
  if (replica_specs->value().ObjectEmpty()) {
    errors->Add(replica_specs->path(), base::FieldErrorType::kRequired,
                absl::StrCat("a ", shape.kind, " needs at least one replica type (",
                             absl::StrJoin(shape.replica_types, ", "), ")"));
  }

  // entry_for[i]: the entry for replica_types[i].
  std::vector<const std::pair<std::string, JsonNode>*> entry_for(shape.replica_types.size(), nullptr);
  for (const auto& entry : entries) {
    bool known = false;
    for (size_t i = 0; i < shape.replica_types.size(); ++i) {
      if (!absl::EqualsIgnoreCase(entry.first, shape.replica_types[i])) continue;
      known = true;
      if (entry_for[i] != nullptr) {
        errors->Add(entry.second.path(), base::FieldErrorType::kDuplicate,
                    absl::StrCat("replica type ", shape.replica_types[i], " is given twice (as \"",
                                 entry_for[i]->first, "\" and \"", entry.first, "\")"));
      } else {
        entry_for[i] = &entry;
      }
    }
    if (!known) {
      errors->Add(entry.second.path(), base::FieldErrorType::kNotSupported,
                  absl::StrCat("unknown replica type \"", entry.first, "\"; a ", shape.kind, " has ",
                               absl::StrJoin(shape.replica_types, ", ")));
    }
  }

  for (size_t i = 0; i < shape.replica_types.size(); ++i) {
    if (entry_for[i] == nullptr) continue;
    const JsonNode& replica = entry_for[i]->second;
    if (!ExpectObject(replica, errors)) continue;
    std::optional<int64_t> replicas = IntField(replica, "replicas", 0, kMaxPodCount, errors);
    const bool replicas_ok = replicas.has_value() || !Member(replica, "replicas").has_value();
    std::optional<PodSet> pod_set = ReadPodTemplate(replica, "template", errors);
    if (!replicas_ok || !pod_set.has_value()) continue;
    pod_set->name = absl::AsciiStrToLower(shape.replica_types[i]);
    pod_set->count = replicas.value_or(1);
    pod_set->template_pointer = TemplatePointer(TemplatesFor(shape.id).each, entry_for[i]->first);
    result.Add(std::move(*pod_set), replica.path(), replica.path().Child("template").Child("spec"));
  }
  return result;
}

}  // namespace

KindResult ExtractPyTorchJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(object, {Kind::kPyTorchJob, "PyTorchJob", "pytorchReplicaSpecs", {"Master", "Worker"}},
                         errors);
}

KindResult ExtractTFJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(
      object, {Kind::kTFJob, "TFJob", "tfReplicaSpecs", {"Chief", "Master", "PS", "Worker", "Evaluator"}}, errors);
}

KindResult ExtractMPIJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(object, {Kind::kMPIJob, "MPIJob", "mpiReplicaSpecs", {"Launcher", "Worker"}}, errors);
}

KindResult ExtractXGBoostJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(object, {Kind::kXGBoostJob, "XGBoostJob", "xgbReplicaSpecs", {"Master", "Worker"}}, errors);
}

KindResult ExtractJAXJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(object, {Kind::kJAXJob, "JAXJob", "jaxReplicaSpecs", {"Worker"}}, errors);
}

KindResult ExtractPaddleJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  return ExtractKubeflow(object, {Kind::kPaddleJob, "PaddleJob", "paddleReplicaSpecs", {"Master", "Worker"}}, errors);
}

}  // namespace gangkeeper::workload
