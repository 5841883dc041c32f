// gangkeeper: ObserveObject (see observe.h).
#include "gangkeeper/workload/observe.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "src/workload/json_probe.h"
#include "src/workload/kinds/kinds.h"

namespace gangkeeper::workload {
namespace {

const rapidjson::Value* Member(const rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string Str(const rapidjson::Value* v) {
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

std::map<std::string, std::string> StringMap(const rapidjson::Value* v) {
  std::map<std::string, std::string> out;
  if (v == nullptr || !v->IsObject()) return out;
  for (const auto& m : v->GetObject()) {
    if (m.value.IsString()) out.emplace(m.name.GetString(), Str(&m.value));
  }
  return out;
}

}  // namespace

bool IsFinishedObject(const JsonProbe& object) {
  const std::string phase = object.StringAt("/status/phase");
  if (phase == "Succeeded") return true;
  // The types of the conditions with status "True", in order.
  std::vector<std::string> true_types;
  const size_t conditions = object.SizeAt("/status/conditions");
  for (size_t i = 0; i < conditions; ++i) {
    const std::string at = absl::StrCat("/status/conditions/", i);
    if (object.StringAt(at + "/status") == "True") true_types.push_back(object.StringAt(at + "/type"));
  }
  auto has = [&](absl::string_view type) {
    return std::find(true_types.begin(), true_types.end(), type) != true_types.end();
  };
  // A failed AppWrapper whose components are still being deleted
  // (ResourcesDeployed True) still holds its pods, as Kueue reads it.
  if (phase == "Failed") return !has("ResourcesDeployed");
  const std::string ray = object.StringAt("/status/jobDeploymentStatus");
  if (ray == "Complete" || ray == "Failed") return true;
  return has("Complete") || has("Completed") || has("Failed") || has("Succeeded");
}

bool IsFinishedObject(const rapidjson::Value& object) { return IsFinishedObject(RapidJsonProbe(object)); }

int64_t ReadyPods(const rapidjson::Value& object, const KindInfo& kind, const Workload& w) {
  return ReadyCounterFor(kind.kind)(JsonNode(object, base::FieldPath()), w);
}

absl::StatusOr<ObservedObject> ObserveObject(absl::string_view json, const KindInfo& kind,
                                             const model::PolicySet& policies, const ExtractOptions& options) {
  rapidjson::Document doc;
  // Iteratively, like DecodeReview: nesting depth must not exhaust the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(absl::StrCat(kind.name, ": not JSON (", rapidjson::GetParseError_En(doc.GetParseError()),
                                                   " at offset ", doc.GetErrorOffset(), ")"));
  }
  if (!doc.IsObject()) return absl::InvalidArgumentError(absl::StrCat(kind.name, ": not a JSON object"));
  const rapidjson::Value* meta = Member(&doc, "metadata");
  ObservedObject o;
  o.kind = &kind;
  o.name = Str(Member(meta, "name"));
  if (o.name.empty()) return absl::InvalidArgumentError(absl::StrCat(kind.name, ": metadata.name is missing"));
  o.namespace_name = Str(Member(meta, "namespace"));
  o.uid = Str(Member(meta, "uid"));
  o.resource_version = Str(Member(meta, "resourceVersion"));
  o.deleting = Member(meta, "deletionTimestamp") != nullptr && !Member(meta, "deletionTimestamp")->IsNull();
  o.labels = StringMap(Member(meta, "labels"));
  o.annotations = StringMap(Member(meta, "annotations"));
  o.held = IsHeld(doc, kind);
  o.finished = IsFinishedObject(doc);
  o.pod_phase = Str(Member(Member(&doc, "status"), "phase"));
  absl::StatusOr<Workload> w = ExtractWorkload(doc, kind, policies, options);
  if (w.ok()) {
    if (w->namespace_name.empty()) w->namespace_name = o.namespace_name;
    // A Job released partially runs spec.parallelism (capped by
    // completions) pods; the Workload counts the full parallelism.
    if (kind.kind == Kind::kJob && o.annotations.count(std::string(kFullParallelismAnnotation)) != 0 &&
        w->pod_sets.size() == 1) {
      const rapidjson::Value* spec = Member(&doc, "spec");
      const rapidjson::Value* parallelism = Member(spec, "parallelism");
      const rapidjson::Value* completions = Member(spec, "completions");
      int64_t running = parallelism != nullptr && parallelism->IsInt64() ? parallelism->GetInt64() : 1;
      if (completions != nullptr && completions->IsInt64()) running = std::min(running, completions->GetInt64());
      if (running >= 0 && running < w->pod_sets[0].count) o.running_counts[w->pod_sets[0].name] = running;
    }
    o.ready_pods = ReadyPods(doc, kind, *w);
    // A TrainJob's Jobs are counted in pods with its runtime.
    if (kind.kind == Kind::kTrainJob && options.training_runtime) {
      absl::StatusOr<TrainingRuntimeRef> ref = ReadTrainingRuntimeRef(json);
      std::optional<std::string> runtime =
          ref.ok() ? options.training_runtime(*ref, w->namespace_name) : std::nullopt;
      if (runtime.has_value()) o.ready_pods = TrainJobReadyPods(json, *runtime, w->pod_sets);
    }
    o.workload = *std::move(w);
  } else {
    o.extract_error = w.status();
  }
  return o;
}

}  // namespace gangkeeper::workload
