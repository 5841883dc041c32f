// gangkeeper: a TrainJob's pod sets from its runtime (see trainjob.h).
//
// The runtime's JobSet template is read as a JobSet is (jobset.cc): one pod
// set per replicated job. The trainer step gets spec.trainer laid over it
// first, in a copy of the runtime: its Job runs numNodes pods, and its
// trainer container's resources become resourcesPerNode, so that the
// requests are computed by the same code as every other kind's.
#include "gangkeeper/workload/trainjob.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "src/workload/json_access.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

constexpr absl::string_view kTrainerGroup = "trainer.kubeflow.org";
constexpr char kTrainerContainer[] = "node";

absl::StatusOr<rapidjson::Document> Parse(absl::string_view json, absl::string_view what) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  return doc;
}

// A member of a JSON object, or nullptr.
rapidjson::Value* Find(rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

bool IsTrainerStep(rapidjson::Value& job) {
  rapidjson::Value* labels = Find(Find(Find(&job, "template"), "metadata"), "labels");
  rapidjson::Value* step = Find(labels, kTrainJobAncestorStepLabel.data());
  if (step != nullptr) return step->IsString() && absl::string_view(step->GetString()) == "trainer";
  rapidjson::Value* name = Find(&job, "name");
  return name != nullptr && name->IsString() && absl::string_view(name->GetString()) == kTrainerContainer;
}

// The trainer container of a pod spec: the one named "node", else the only
// one.
rapidjson::Value* TrainerContainer(rapidjson::Value* pod_spec) {
  rapidjson::Value* containers = Find(pod_spec, "containers");
  if (containers == nullptr || !containers->IsArray()) return nullptr;
  for (rapidjson::Value& c : containers->GetArray()) {
    rapidjson::Value* name = Find(&c, "name");
    if (name != nullptr && name->IsString() && absl::string_view(name->GetString()) == kTrainerContainer) return &c;
  }
  return containers->Size() == 1 && (*containers)[0].IsObject() ? &(*containers)[0] : nullptr;
}

}  // namespace

absl::StatusOr<TrainingRuntimeRef> ReadTrainingRuntimeRef(absl::string_view trainjob_json) {
  absl::StatusOr<rapidjson::Document> doc = Parse(trainjob_json, "TrainJob");
  if (!doc.ok()) return doc.status();
  base::FieldErrors errors;
  const JsonNode root(*doc, base::FieldPath());
  TrainingRuntimeRef ref;
  std::optional<JsonNode> spec = ObjectField(root, "spec", &errors, Presence::kRequired);
  std::optional<JsonNode> rr =
      spec.has_value() ? ObjectField(*spec, "runtimeRef", &errors, Presence::kRequired) : std::nullopt;
  if (rr.has_value()) {
    ref.name = StringField(*rr, "name", &errors, Presence::kRequired).value_or("");
    ref.kind = StringField(*rr, "kind", &errors).value_or("ClusterTrainingRuntime");
    const std::string group = StringField(*rr, "apiGroup", &errors).value_or(std::string(kTrainerGroup));
    if (group != kTrainerGroup || (ref.kind != "ClusterTrainingRuntime" && ref.kind != "TrainingRuntime")) {
      errors.Add(rr->path(), base::FieldErrorType::kNotSupported,
                 absl::StrCat(group, "/", ref.kind, " is not a training runtime: name a ", kTrainerGroup,
                              " ClusterTrainingRuntime or TrainingRuntime"));
    }
    if (ref.name.empty() && Member(*rr, "name").has_value() && (*rr).value()["name"].IsString()) {
      errors.Add(rr->path().Child("name"), base::FieldErrorType::kRequired, "name the runtime");
    }
  }
  if (!errors.empty()) return base::ToStatus(errors);
  return ref;
}

absl::StatusOr<std::vector<PodSet>> TrainJobPodSets(absl::string_view trainjob_json, absl::string_view runtime_json) {
  absl::StatusOr<rapidjson::Document> tj = Parse(trainjob_json, "TrainJob");
  if (!tj.ok()) return tj.status();
  absl::StatusOr<rapidjson::Document> rt = Parse(runtime_json, "training runtime");
  if (!rt.ok()) return rt.status();
  base::FieldErrors errors;

  // 1. What the TrainJob lays over the trainer step.
  const JsonNode tj_root(*tj, base::FieldPath());
  std::optional<JsonNode> tj_spec = ObjectField(tj_root, "spec", &errors, Presence::kRequired);
  std::optional<JsonNode> trainer = tj_spec.has_value() ? ObjectField(*tj_spec, "trainer", &errors) : std::nullopt;
  // 0: not set (numNodes is at least 1). A plain integer: GCC 12 warns
  // about a maybe-uninitialized optional here.
  int64_t num_nodes = 0;
  if (trainer.has_value()) num_nodes = IntField(*trainer, "numNodes", 1, kMaxPodCount, &errors).value_or(0);
  std::optional<JsonNode> per_node = trainer.has_value() ? ObjectField(*trainer, "resourcesPerNode", &errors)
                                                         : std::nullopt;
  if (per_node.has_value()) (void)ReadResourceRequirements(*per_node, &errors);  // its errors, at its paths
  if (!errors.empty()) return base::ToStatus(errors);
  if (num_nodes == 0) {
    rapidjson::Value* ml = Find(Find(&*rt, "spec"), "mlPolicy");
    rapidjson::Value* n = Find(ml, "numNodes");
    if (n != nullptr && n->IsInt64() && n->GetInt64() >= 1 && n->GetInt64() <= kMaxPodCount) num_nodes = n->GetInt64();
  }

  // 2. Laid over a copy of the runtime (`rt` is that copy).
  rapidjson::Value* jobs = Find(Find(Find(Find(&*rt, "spec"), "template"), "spec"), "replicatedJobs");
  bool found_trainer = false;
  if (jobs != nullptr && jobs->IsArray()) {
    for (rapidjson::Value& job : jobs->GetArray()) {
      if (!job.IsObject() || !IsTrainerStep(job)) continue;
      found_trainer = true;
      rapidjson::Value* job_spec = Find(Find(&job, "template"), "spec");
      if (job_spec == nullptr || !job_spec->IsObject()) continue;  // reported by the read below
      rapidjson::Document::AllocatorType& a = rt->GetAllocator();
      if (num_nodes > 0) {
        for (const char* field : {"parallelism", "completions"}) {
          if (Find(job_spec, field) != nullptr) job_spec->RemoveMember(field);
          job_spec->AddMember(rapidjson::Value(field, a), rapidjson::Value(num_nodes), a);
        }
      }
      if (per_node.has_value()) {
        rapidjson::Value* container = TrainerContainer(Find(Find(job_spec, "template"), "spec"));
        if (container == nullptr) {
          errors.Add(tj_root.path().Child("spec").Child("trainer").Child("resourcesPerNode"),
                     base::FieldErrorType::kInvalid,
                     "the runtime's trainer step has no container named \"node\" (nor a single container) to "
                     "take these resources");
          continue;
        }
        if (Find(container, "resources") != nullptr) container->RemoveMember("resources");
        container->AddMember("resources", rapidjson::Value(per_node->value(), a), a);
      }
    }
  }
  if (!found_trainer && trainer.has_value()) {
    errors.Add(base::FieldPath("spec").Child("template").Child("spec").Child("replicatedJobs"),
               base::FieldErrorType::kInvalid,
               absl::StrCat("no replicated job is the trainer step (label ", kTrainJobAncestorStepLabel,
                            ": trainer, or named \"node\"): the TrainJob's spec.trainer has nowhere to go"));
  }

  // 3. The runtime's JobSet, read as a JobSet's pod sets are.
  const JsonNode rt_root(*rt, base::FieldPath());
  std::vector<PodSet> out;
  std::optional<JsonNode> rt_spec = ObjectField(rt_root, "spec", &errors, Presence::kRequired);
  std::optional<JsonNode> tmpl = rt_spec.has_value() ? ObjectField(*rt_spec, "template", &errors, Presence::kRequired)
                                                     : std::nullopt;
  std::optional<JsonNode> js_spec = tmpl.has_value() ? ObjectField(*tmpl, "spec", &errors, Presence::kRequired)
                                                     : std::nullopt;
  std::optional<JsonNode> list =
      js_spec.has_value() ? ListField(*js_spec, "replicatedJobs", &errors, Presence::kRequired) : std::nullopt;
  if (list.has_value()) {
    const std::vector<JsonNode> items = Items(*list);
    for (size_t i = 0; i < items.size(); ++i) {
      const JsonNode& job = items[i];
      if (!ExpectObject(job, &errors)) continue;
      std::optional<std::string> name = StringField(job, "name", &errors, Presence::kRequired);
      std::optional<int64_t> replicas = IntField(job, "replicas", 0, kMaxPodCount, &errors);
      std::optional<JsonNode> job_tmpl = ObjectField(job, "template", &errors, Presence::kRequired);
      std::optional<JsonNode> job_spec =
          job_tmpl.has_value() ? ObjectField(*job_tmpl, "spec", &errors, Presence::kRequired) : std::nullopt;
      if (!name.has_value() || !job_spec.has_value()) continue;
      std::optional<int64_t> per_job = JobPodCount(*job_spec, &errors);
      std::optional<PodSet> pod_set = ReadPodTemplate(*job_spec, "template", &errors);
      if (!per_job.has_value() || !pod_set.has_value()) continue;
      std::optional<int64_t> count =
          CheckedPodCount(replicas.value_or(1), *per_job, job.path(), "replicas × pods per Job", &errors);
      if (!count.has_value()) continue;
      pod_set->name = *name;
      pod_set->count = *count;
      pod_set->template_pointer = absl::StrCat("/spec/template/spec/replicatedJobs/", i, "/template/spec/template");
      out.push_back(std::move(*pod_set));
    }
  }
  if (!errors.empty()) return base::ToStatus(errors);
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "spec.template.spec.replicatedJobs: the runtime runs no pods: give it at least one replicated job");
  }
  return out;
}

}  // namespace gangkeeper::workload
