// gangkeeper: ExtractWorkload, the parts common to every kind (see extract.h).
//
// Phases: 1. type and object metadata; 2. the kind's pod sets (kinds/*.cc,
// through the table in kinds.cc); 3. suspension; 4. pod-set checks (count,
// duplicate names); 5. priority (priority.h); 6. queue. Every problem is
// collected with its field path and returned as one InvalidArgument whose
// message is "path: detail; path: detail".
#include "gangkeeper/workload/extract.h"

#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "src/workload/json_access.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/priority.h"

namespace gangkeeper::workload {
namespace {

using base::FieldErrors;
using base::FieldErrorType;
using base::FieldPath;

absl::Status ErrorsToStatus(const FieldErrors& errors) {
  std::string message;
  std::set<std::pair<std::string, std::string>> seen;  // the same problem found by two phases
  for (const base::FieldError& e : errors.errors()) {
    if (!seen.emplace(e.path, e.detail).second) continue;
    if (!message.empty()) message += "; ";
    if (e.path.empty()) {
      absl::StrAppend(&message, e.detail);
    } else {
      absl::StrAppend(&message, e.path, ": ", e.detail);
    }
  }
  return absl::InvalidArgumentError(message);
}

std::string QualifiedVersion(const KindInfo& info) {
  return info.group.empty() ? std::string(info.version) : absl::StrCat(info.group, "/", info.version);
}

// apiVersion and kind, when present, must be the kind's (any version of its
// group: MPIJob comes as kubeflow.org/v1 or v2beta1).
void ReadTypeMeta(const JsonNode& root, const KindInfo& info, Workload* w, FieldErrors* errors) {
  w->api_version = QualifiedVersion(info);
  if (std::optional<std::string> api_version = StringField(root, "apiVersion", errors); api_version.has_value()) {
    const size_t slash = api_version->find('/');
    const absl::string_view group =
        slash == std::string::npos ? absl::string_view() : absl::string_view(*api_version).substr(0, slash);
    if (group != info.group) {
      errors->Add(root.path().Child("apiVersion"), FieldErrorType::kInvalid,
                  absl::StrCat("\"", *api_version, "\" is not a version of ", info.name, " (", QualifiedVersion(info),
                               ")"));
    } else {
      w->api_version = *api_version;
    }
  }
  if (std::optional<std::string> kind = StringField(root, "kind", errors); kind.has_value() && *kind != info.name) {
    errors->Add(root.path().Child("kind"), FieldErrorType::kInvalid,
                absl::StrCat("expected ", info.name, ", got \"", *kind, "\""));
  }
}

void ReadObjectMeta(const JsonNode& root, Workload* w, FieldErrors* errors) {
  std::optional<JsonNode> metadata = ObjectField(root, "metadata", errors);
  if (!metadata.has_value()) return;
  w->namespace_name = StringField(*metadata, "namespace", errors).value_or("");
  w->name = StringField(*metadata, "name", errors).value_or("");
  w->uid = StringField(*metadata, "uid", errors).value_or("");
  // Not kept (an unnamed AppWrapper reads it where it needs it), but a
  // generateName that is not a string is still a bad object.
  (void)StringField(*metadata, "generateName", errors);
  // Set by the API server; a value that does not parse is treated as
  // unknown (the arrival time orders the workload instead).
  FieldErrors ignored;
  if (std::optional<std::string> created = StringField(*metadata, "creationTimestamp", &ignored)) {
    absl::Time t;
    if (base::ParseRfc3339(*created, &t)) w->creation_timestamp = t;
  }
  w->labels = StringMapField(*metadata, "labels", errors);
  w->annotations = StringMapField(*metadata, "annotations", errors, &IsKeptAnnotation);
}

void CheckPodSets(const KindResult& result, FieldErrors* errors) {
  if (result.pod_sets.size() > kMaxPodSets) {
    errors->Add(FieldPath("spec"), FieldErrorType::kTooMany,
                absl::StrCat("has ", result.pod_sets.size(), " pod sets; at most ", kMaxPodSets, " are supported"));
    return;
  }
  absl::flat_hash_map<std::string, size_t> first;  // name -> index
  for (size_t i = 0; i < result.pod_sets.size(); ++i) {
    auto [it, inserted] = first.emplace(result.pod_sets[i].name, i);
    if (!inserted) {
      errors->Add(result.name_paths[i], FieldErrorType::kDuplicate,
                  absl::StrCat("pod set name \"", result.pod_sets[i].name, "\" is already used by ",
                               result.name_paths[it->second].str()));
    }
  }
}

}  // namespace

bool IsRuntimeUnknown(const absl::Status& s) { return absl::IsUnavailable(s); }

absl::StatusOr<Workload> ExtractWorkload(const rapidjson::Value& object, const KindInfo& info,
                                         const model::PolicySet& policies, const ExtractOptions& options) {
  if (!object.IsObject()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", info.name, " must be a JSON object, got ", JsonTypeName(object)));
  }
  const JsonNode root(object, FieldPath());
  FieldErrors errors;
  Workload w;
  w.kind = info.kind;

  // 1. Type and object metadata.
  ReadTypeMeta(root, info, &w, &errors);
  ReadObjectMeta(root, &w, &errors);

  // 2. Pod sets (a TrainJob's are its runtime's).
  std::string unknown_runtime;
  KindResult result = info.kind == Kind::kTrainJob
                          ? ExtractTrainJobWithRuntime(root, options.training_runtime, w.namespace_name, &errors,
                                                       &unknown_runtime)
                          : ExtractorFor(info.kind)(root, w, &errors);

  // 3. Suspension.
  w.suspended = ReadHeld(root, info, &errors);
  if (!unknown_runtime.empty()) {
    if (!errors.empty()) return ErrorsToStatus(errors);
    return absl::UnavailableError(absl::StrCat(
        "spec.runtimeRef: ", unknown_runtime,
        " is not known (yet): the TrainJob's pods are what its runtime describes, so it is queued once the "
        "runtime exists; create it, or name an existing one"));
  }

  // 4. Pod-set checks.
  CheckPodSets(result, &errors);
  if (result.pod_sets.empty() && errors.empty()) {
    errors.Add(FieldPath("spec"), FieldErrorType::kRequired, "the object describes no pods");
  }

  // 5. Priority: the pod PriorityClass is the kind's own source
  // (Kubeflow's schedulingPolicy), else the first template naming one.
  std::string pod_class = result.priority_class;
  FieldPath pod_class_path = result.priority_class_path;
  for (size_t i = 0; pod_class.empty() && i < result.pod_sets.size(); ++i) {
    if (result.pod_sets[i].priority_class_name.empty()) continue;
    pod_class = result.pod_sets[i].priority_class_name;
    pod_class_path = result.spec_paths[i].Child("priorityClassName");
  }
  auto label = w.labels.find(std::string(kPriorityClassLabel));
  const std::string workload_class = label == w.labels.end() ? "" : label->second;
  ResolvedPriority priority = ResolvePriority(
      policies, workload_class, FieldPath("metadata").Child("labels").Key(kPriorityClassLabel), pod_class,
      pod_class_path, &errors);
  w.priority = priority.priority;
  w.priority_class = std::move(priority.priority_class);
  w.priority_class_source = std::move(priority.source);
  w.preemption_policy = priority.preemption_policy;
  w.pod_priority_class = pod_class;

  // 6. Queue.
  if (auto it = w.labels.find(std::string(kQueueNameLabel)); it != w.labels.end() && !it->second.empty()) {
    w.queue_name = it->second;
  } else if (options.manage_jobs_without_queue_name &&
             policies.local_queues.contains(std::make_pair(w.namespace_name, std::string("default")))) {
    w.queue_name = "default";
  }

  if (!errors.empty()) return ErrorsToStatus(errors);
  w.pod_sets = std::move(result.pod_sets);
  w.pod_group_name = std::move(result.pod_group_name);
  w.pod_group_total_count = result.pod_group_total_count;
  // An AppWrapper's components, whatever their kind, are its gang's.
  w.owned_by_managed_object = result.owned_by_managed_object || ControlledByWrapper(root);
  return w;
}

}  // namespace gangkeeper::workload
