// gangkeeper: a TrainJob's pod sets from its runtime (see trainjob.h).
//
// The runtime's JobSet template is read as a JobSet is (jobset.cc): one pod
// set per replicated job. The trainer step gets spec.trainer laid over it
// first, in a copy of the runtime: its Job runs numNodes pods, and its
// trainer container's resources become resourcesPerNode, so that the
// requests are computed by the same code as every other kind's.
#include "gangkeeper/workload/trainjob.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
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

// Placement through runtimePatches (see trainjob.h).
namespace {

using Allocator = rapidjson::Document::AllocatorType;

std::string Compact(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

const rapidjson::Value* FindConst(const rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string StrOf(const rapidjson::Value* v) { return v != nullptr && v->IsString() ? v->GetString() : ""; }

rapidjson::Value Str(absl::string_view s, Allocator& a) {
  return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// A toleration as JSON, as the API server writes it.
rapidjson::Value TolerationValue(const model::Toleration& t, Allocator& a) {
  rapidjson::Value v(rapidjson::kObjectType);
  if (!t.key.empty()) v.AddMember("key", Str(t.key, a), a);
  v.AddMember("operator", Str(t.op.empty() ? "Equal" : t.op, a), a);
  if (!t.value.empty()) v.AddMember("value", Str(t.value, a), a);
  if (!t.effect.empty()) v.AddMember("effect", Str(t.effect, a), a);
  if (t.toleration_seconds.has_value()) v.AddMember("tolerationSeconds", rapidjson::Value(*t.toleration_seconds), a);
  return v;
}

// Tolerations compare with the default operator filled in.
std::string TolerationKey(const rapidjson::Value& t) {
  const rapidjson::Value* seconds = FindConst(&t, "tolerationSeconds");
  const std::string op = StrOf(FindConst(&t, "operator"));
  return absl::StrCat(StrOf(FindConst(&t, "key")), "\x1f", op.empty() ? "Equal" : op, "\x1f",
                      StrOf(FindConst(&t, "value")), "\x1f", StrOf(FindConst(&t, "effect")), "\x1f",
                      seconds != nullptr && seconds->IsInt64() ? absl::StrCat(seconds->GetInt64()) : "-");
}

// The index of gangkeeper's entry in spec.runtimePatches, or -1.
int OurEntry(const rapidjson::Value* patches) {
  if (patches == nullptr || !patches->IsArray()) return -1;
  for (rapidjson::SizeType i = 0; i < patches->Size(); ++i) {
    if (StrOf(FindConst(&(*patches)[i], "manager")) == kTrainJobRuntimePatchManager) return static_cast<int>(i);
  }
  return -1;
}

// The pod spec patch another entry makes for replicated job `name`, or
// nullptr.
const rapidjson::Value* EntryPodSpec(const rapidjson::Value& entry, const std::string& name) {
  const rapidjson::Value* jobs = FindConst(
      FindConst(FindConst(FindConst(&entry, "trainingRuntimeSpec"), "template"), "spec"), "replicatedJobs");
  if (jobs == nullptr || !jobs->IsArray()) return nullptr;
  for (const rapidjson::Value& job : jobs->GetArray()) {
    if (StrOf(FindConst(&job, "name")) != name) continue;
    return FindConst(FindConst(FindConst(FindConst(&job, "template"), "spec"), "template"), "spec");
  }
  return nullptr;
}

// `inner` inside single-member objects, the outermost key first:
// Nest(v, {"template", "spec"}) is {"template": {"spec": v}}.
rapidjson::Value Nest(rapidjson::Value inner, std::initializer_list<const char*> keys, Allocator& a) {
  rapidjson::Value v = std::move(inner);
  for (auto key = std::rbegin(keys); key != std::rend(keys); ++key) {
    rapidjson::Value outer(rapidjson::kObjectType);
    outer.AddMember(rapidjson::StringRef(*key), v, a);
    v = std::move(outer);
  }
  return v;
}

// Takes out gangkeeper's entry at `index` of `patches`; the whole list
// when it is the only entry (the API server leaves an empty list out, so
// the object is as it was before release).
void AppendRemoveOurs(const rapidjson::Value& patches, int index, std::vector<PatchOp>* ops) {
  const std::string path = absl::StrCat("/spec/runtimePatches/", index);
  ops->push_back({"test", path + "/manager", absl::StrCat("\"", kTrainJobRuntimePatchManager, "\"")});
  ops->push_back({"remove", patches.Size() == 1 ? std::string("/spec/runtimePatches") : path, ""});
}

}  // namespace

absl::StatusOr<std::vector<PatchOp>> TrainJobPlacementOps(absl::string_view trainjob_json,
                                                          const std::vector<PodSet>& pod_sets,
                                                          const std::vector<TrainJobPlacement>& placements) {
  absl::StatusOr<rapidjson::Document> tj = Parse(trainjob_json, "TrainJob");
  if (!tj.ok()) return tj.status();
  const rapidjson::Value* patches = FindConst(FindConst(&*tj, "spec"), "runtimePatches");
  const int ours = OurEntry(patches);

  rapidjson::Document out_doc;
  Allocator& a = out_doc.GetAllocator();
  rapidjson::Value jobs(rapidjson::kArrayType);
  for (const TrainJobPlacement& p : placements) {
    auto ps = std::find_if(pod_sets.begin(), pod_sets.end(), [&](const PodSet& x) { return x.name == p.pod_set; });
    if (ps == pod_sets.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement for pod set \"", p.pod_set, "\": the TrainJob's runtime has no such replicated job"));
    }
    // What the pods have before gangkeeper's entry: the runtime's template,
    // then the other entries in order (labels merged, a toleration list
    // replacing the one before).
    std::map<std::string, std::string> labels = ps->node_selector;
    std::map<std::string, std::string> label_from;
    for (const auto& [k, v] : labels) label_from[k] = "the runtime's template";
    rapidjson::Value tolerations(rapidjson::kArrayType);
    for (const model::Toleration& t : ps->tolerations) tolerations.PushBack(TolerationValue(t, a), a);
    if (patches != nullptr && patches->IsArray()) {
      for (rapidjson::SizeType i = 0; i < patches->Size(); ++i) {
        if (static_cast<int>(i) == ours) continue;
        const rapidjson::Value* spec = EntryPodSpec((*patches)[i], p.pod_set);
        if (const rapidjson::Value* sel = FindConst(spec, "nodeSelector"); sel != nullptr && sel->IsObject()) {
          for (const auto& m : sel->GetObject()) {
            if (!m.value.IsString()) continue;
            labels[m.name.GetString()] = m.value.GetString();
            label_from[m.name.GetString()] =
                absl::StrCat("spec.runtimePatches[", i, "] (", StrOf(FindConst(&(*patches)[i], "manager")), ")");
          }
        }
        if (const rapidjson::Value* tol = FindConst(spec, "tolerations"); tol != nullptr && tol->IsArray()) {
          tolerations.SetArray();
          for (const rapidjson::Value& t : tol->GetArray()) tolerations.PushBack(rapidjson::Value(t, a), a);
        }
      }
    }
    rapidjson::Value added_labels(rapidjson::kObjectType);
    for (const auto& [k, v] : p.node_selector) {
      auto it = labels.find(k);
      if (it != labels.end()) {
        if (it->second == v) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "replicated job \"", p.pod_set, "\": nodeSelector ", k, "=", it->second, " (from ", label_from[k],
            ") conflicts with the admitted flavor's ", k, "=", v, ": drop it there or from the flavor"));
      }
      added_labels.AddMember(Str(k, a), Str(v, a), a);
    }
    bool added_toleration = false;
    std::vector<std::string> have;
    for (const rapidjson::Value& t : tolerations.GetArray()) have.push_back(TolerationKey(t));
    for (const model::Toleration& t : p.tolerations) {
      rapidjson::Value v = TolerationValue(t, a);
      const std::string key = TolerationKey(v);
      if (std::find(have.begin(), have.end(), key) != have.end()) continue;
      have.push_back(key);
      tolerations.PushBack(v, a);
      added_toleration = true;
    }
    if (added_labels.ObjectEmpty() && !added_toleration) continue;
    rapidjson::Value pod_spec(rapidjson::kObjectType);
    if (!added_labels.ObjectEmpty()) pod_spec.AddMember("nodeSelector", added_labels, a);
    if (added_toleration) pod_spec.AddMember("tolerations", tolerations, a);
    // A replicated job: {name, template: {spec: {template: {spec: pod_spec}}}}.
    rapidjson::Value job(rapidjson::kObjectType);
    job.AddMember("name", Str(p.pod_set, a), a);
    job.AddMember("template", Nest(std::move(pod_spec), {"spec", "template", "spec"}, a), a);
    jobs.PushBack(job, a);
  }

  std::vector<PatchOp> ops;
  if (ours >= 0) AppendRemoveOurs(*patches, ours, &ops);
  if (jobs.Empty()) return ops;
  // After a removal of the whole list there is no list to append to.
  const bool list_left = patches != nullptr && patches->IsArray() && !(ours >= 0 && patches->Size() == 1);
  rapidjson::Value entry(rapidjson::kObjectType);
  entry.AddMember("manager", Str(kTrainJobRuntimePatchManager, a), a);
  entry.AddMember("trainingRuntimeSpec", Nest(std::move(jobs), {"template", "spec", "replicatedJobs"}, a), a);
  if (list_left) {
    ops.push_back({"add", "/spec/runtimePatches/-", Compact(entry)});
  } else {
    // Absent or not a list: the list, with only gangkeeper's entry.
    rapidjson::Value list(rapidjson::kArrayType);
    list.PushBack(entry, a);
    ops.push_back({"add", "/spec/runtimePatches", Compact(list)});
  }
  return ops;
}

std::vector<PatchOp> TrainJobRestoreOps(absl::string_view trainjob_json) {
  std::vector<PatchOp> ops;
  absl::StatusOr<rapidjson::Document> tj = Parse(trainjob_json, "TrainJob");
  if (!tj.ok()) return ops;
  const rapidjson::Value* patches = FindConst(FindConst(&*tj, "spec"), "runtimePatches");
  const int ours = OurEntry(patches);
  if (ours >= 0) AppendRemoveOurs(*patches, ours, &ops);
  return ops;
}

bool TrainJobActive(absl::string_view trainjob_json) {
  absl::StatusOr<rapidjson::Document> tj = Parse(trainjob_json, "TrainJob");
  if (!tj.ok()) return false;
  const rapidjson::Value* jobs = FindConst(FindConst(&*tj, "status"), "jobsStatus");
  if (jobs == nullptr || !jobs->IsArray()) return false;
  for (const rapidjson::Value& j : jobs->GetArray()) {
    const rapidjson::Value* active = FindConst(&j, "active");
    if (active != nullptr && active->IsInt64() && active->GetInt64() > 0) return true;
  }
  return false;
}

int64_t TrainJobReadyPods(absl::string_view trainjob_json, absl::string_view runtime_json,
                          const std::vector<PodSet>& pod_sets) {
  absl::StatusOr<rapidjson::Document> tj = Parse(trainjob_json, "TrainJob");
  absl::StatusOr<rapidjson::Document> rt = Parse(runtime_json, "training runtime");
  if (!tj.ok() || !rt.ok()) return 0;
  const rapidjson::Value* statuses = FindConst(FindConst(&*tj, "status"), "jobsStatus");
  const rapidjson::Value* jobs =
      FindConst(FindConst(FindConst(FindConst(&*rt, "spec"), "template"), "spec"), "replicatedJobs");
  if (statuses == nullptr || !statuses->IsArray() || jobs == nullptr || !jobs->IsArray()) return 0;
  auto count = [](const rapidjson::Value* v) -> int64_t {
    return v != nullptr && v->IsInt64() ? std::clamp<int64_t>(v->GetInt64(), 0, kMaxPodCount) : 0;
  };
  int64_t ready = 0, total = 0;
  for (const PodSet& ps : pod_sets) total += ps.count;
  for (const rapidjson::Value& s : statuses->GetArray()) {
    const std::string name = StrOf(FindConst(&s, "name"));
    auto ps = std::find_if(pod_sets.begin(), pod_sets.end(), [&](const PodSet& x) { return x.name == name; });
    if (name.empty() || ps == pod_sets.end()) continue;
    int64_t replicas = 1;
    for (const rapidjson::Value& j : jobs->GetArray()) {
      if (StrOf(FindConst(&j, "name")) != name) continue;
      if (const rapidjson::Value* r = FindConst(&j, "replicas"); r != nullptr) replicas = count(r);
    }
    if (replicas == 0) continue;
    const int64_t jobs_ready = std::min(count(FindConst(&s, "ready")) + count(FindConst(&s, "succeeded")), replicas);
    ready += jobs_ready * (ps->count / replicas);
  }
  return std::clamp<int64_t>(ready, 0, total);
}

KindResult ExtractTrainJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  (void)object;
  (void)meta;
  errors->Add(base::FieldPath("spec").Child("runtimeRef"), base::FieldErrorType::kRequired,
              "a TrainJob's pods are its runtime's: read it with its runtime (ExtractOptions::training_runtime)");
  return {};
}

KindResult ExtractTrainJobWithRuntime(const JsonNode& object, const TrainingRuntimeLookup& lookup,
                                      absl::string_view namespace_name, base::FieldErrors* errors,
                                      std::string* unknown_runtime) {
  KindResult result;
  const std::string json = Compact(object.value());
  absl::StatusOr<TrainingRuntimeRef> ref = ReadTrainingRuntimeRef(json);
  if (!ref.ok()) {
    errors->Add(base::FieldPath(), base::FieldErrorType::kInvalid, ref.status().message());
    return result;
  }
  std::optional<std::string> runtime = lookup ? lookup(*ref, namespace_name) : std::nullopt;
  if (!runtime.has_value()) {
    *unknown_runtime = ref->kind == "TrainingRuntime"
                           ? absl::StrCat("TrainingRuntime \"", namespace_name, "/", ref->name, "\"")
                           : absl::StrCat(ref->kind, " \"", ref->name, "\"");
    return result;
  }
  absl::StatusOr<std::vector<PodSet>> pod_sets = TrainJobPodSets(json, *runtime);
  if (!pod_sets.ok()) {
    errors->Add(base::FieldPath(), base::FieldErrorType::kInvalid, pod_sets.status().message());
    return result;
  }
  const base::FieldPath where = base::FieldPath("spec").Child("runtimeRef");
  for (PodSet& ps : *pod_sets) result.Add(std::move(ps), where, where);
  return result;
}

int64_t ReadyTrainJob(const JsonNode& object, const Workload& w) {
  (void)object;
  (void)w;
  return 0;
}

}  // namespace gangkeeper::workload
