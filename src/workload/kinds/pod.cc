// gangkeeper: v1 Pod → pod set "main" with count 1, possibly in a pod group (see kinds.h).
//
// A pod labelled kueue.x-k8s.io/pod-group-name is one member of a group
// whose size is the annotation kueue.x-k8s.io/pod-group-total-count (a
// positive integer); both are recorded so the broker can gather the group.
// Either one without the other is an error, as in Kueue. A pod whose
// controller owner is a managed kind (a Job's pods, a JobSet's pods, ...)
// is marked owned_by_managed_object: its owner is the workload.
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

// A positive decimal integer of at most kMaxPodCount, digits only.
std::optional<int64_t> ParsePodCount(absl::string_view text) {
  if (text.empty() || text.size() > 7) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > kMaxPodCount) return std::nullopt;
  return value;
}

void ReadPodGroup(const Workload& meta, KindResult* result, base::FieldErrors* errors) {
  const base::FieldPath label_path = base::FieldPath("metadata").Child("labels").Key(kPodGroupNameLabel);
  const base::FieldPath count_path =
      base::FieldPath("metadata").Child("annotations").Key(kPodGroupTotalCountAnnotation);
  auto label = meta.labels.find(std::string(kPodGroupNameLabel));
  auto count = meta.annotations.find(std::string(kPodGroupTotalCountAnnotation));
  const bool has_group = label != meta.labels.end() && !label->second.empty();
  const bool has_count = count != meta.annotations.end();
  if (!has_group && !has_count) return;
  if (!has_group) {
    errors->Add(label_path, base::FieldErrorType::kRequired,
                absl::StrCat("required: the ", kPodGroupTotalCountAnnotation, " annotation is set, so the ",
                             kPodGroupNameLabel, " label must name the group"));
    return;
  }
  if (!has_count) {
    errors->Add(count_path, base::FieldErrorType::kRequired,
                absl::StrCat("required: pod group \"", label->second, "\" must declare its size in the ",
                             kPodGroupTotalCountAnnotation, " annotation"));
    return;
  }
  std::optional<int64_t> total = ParsePodCount(count->second);
  if (!total.has_value()) {
    errors->Add(count_path, base::FieldErrorType::kInvalid,
                absl::StrCat("must be a positive integer of at most ", kMaxPodCount, ", got \"",
                             absl::CHexEscape(count->second), "\""));
    return;
  }
  result->pod_group_name = label->second;
  result->pod_group_total_count = *total;
}

}  // namespace

// True when a controller ownerReference names a managed kind (or, for a
// pod with the pod-template-hash label, a Deployment's ReplicaSet).
bool ReadOwnedByManagedKind(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  std::optional<JsonNode> metadata = ObjectField(object, "metadata", errors);
  if (!metadata.has_value()) return false;
  std::optional<JsonNode> refs = ListField(*metadata, "ownerReferences", errors);
  if (!refs.has_value()) return false;
  const bool template_hash = meta.labels.count(std::string(kPodTemplateHashLabel)) != 0;
  bool owned = false;
  for (const JsonNode& ref : Items(*refs)) {
    if (!ExpectObject(ref, errors)) continue;
    std::optional<std::string> api_version = StringField(ref, "apiVersion", errors);
    std::optional<std::string> kind = StringField(ref, "kind", errors);
    std::optional<bool> controller = BoolField(ref, "controller", errors);
    if (!api_version.has_value() || !kind.has_value() || !controller.value_or(false)) continue;
    const size_t slash = api_version->find('/');
    const absl::string_view group =
        slash == std::string::npos ? absl::string_view() : absl::string_view(*api_version).substr(0, slash);
    const KindInfo* info = FindKind(group, *kind);
    if (info != nullptr && info->kind != Kind::kPod) owned = true;
    if (template_hash && IsDeploymentPodOwner(group, *kind)) owned = true;
  }
  return owned;
}

bool ControlledByWrapper(const JsonNode& object) {
  const rapidjson::Value& v = object.value();
  if (!v.IsObject() || !v.HasMember("metadata") || !v["metadata"].IsObject()) return false;
  const rapidjson::Value& meta = v["metadata"];
  if (!meta.HasMember("ownerReferences") || !meta["ownerReferences"].IsArray()) return false;
  for (const rapidjson::Value& ref : meta["ownerReferences"].GetArray()) {
    if (!ref.IsObject() || !ref.HasMember("controller") || !ref["controller"].IsBool() ||
        !ref["controller"].GetBool() || !ref.HasMember("apiVersion") || !ref["apiVersion"].IsString() ||
        !ref.HasMember("kind") || !ref["kind"].IsString()) {
      continue;
    }
    const absl::string_view api_version(ref["apiVersion"].GetString(), ref["apiVersion"].GetStringLength());
    const size_t slash = api_version.find('/');
    const absl::string_view group = slash == absl::string_view::npos ? absl::string_view() : api_version.substr(0, slash);
    if (IsWrapperKind(group, absl::string_view(ref["kind"].GetString(), ref["kind"].GetStringLength()))) return true;
  }
  return false;
}

KindResult ExtractPod(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result;
  ReadPodGroup(meta, &result, errors);
  result.owned_by_managed_object = ReadOwnedByManagedKind(object, meta, errors);
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<PodSet> pod_set = ReadPodSpec(*spec, errors);
  if (!pod_set.has_value()) return result;
  pod_set->name = "main";
  pod_set->count = 1;
  result.Add(std::move(*pod_set), spec->path(), spec->path());
  return result;
}

}  // namespace gangkeeper::workload
