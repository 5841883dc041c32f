// gangkeeper: AppWrapper (workload.codeflare.dev/v1beta2) pod sets.
//
// An AppWrapper wraps whole Kubernetes objects (spec.components[i].template)
// and says where their pods are: spec.components[i].podSets[j] names a
// PodTemplateSpec by its path inside the component, in the AppWrapper's own
// path syntax ("template.spec.template",
// "template.spec.replicatedJobs[0].template.spec.template"), and the pod
// count (`replicas`, default 1). A component that declares no podSets gets
// the ones the AppWrapper controller infers for the kinds it knows (batch
// Job, JobSet, PyTorchJob, RayCluster, RayJob, Pod, Deployment,
// StatefulSet); any other component (a Service, a ConfigMap) runs no pods.
// The controller copies spec.components[i].podSetInfos[j] (nodeSelector,
// tolerations, ...) into the j-th template when it creates the component,
// so that entry is where release writes a pod set's placement: its
// template_pointer (the kinds table marks the kind `beside`), and hold.cc's
// PlacementTargetOps creates the list when it is missing.
// Pure functions; thread-compatible.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

// One pod set of a component, as the AppWrapper states it.
struct WrappedPodSet {
  std::string path;
  int64_t replicas = 1;
  base::FieldPath where;  // what errors about it name
};

// The value at `path` (AppWrapper syntax, starting at "template") inside
// `component`. nullopt when the path does not lead to a value; with
// `errors`, also an error at `where` naming the position that failed.
std::optional<JsonNode> AtPath(const JsonNode& component, absl::string_view path, const base::FieldPath& where,
                               base::FieldErrors* errors) {
  auto fail = [&](absl::string_view at, const std::string& why) -> std::optional<JsonNode> {
    if (errors != nullptr) {
      errors->Add(where, base::FieldErrorType::kInvalid,
                  absl::StrCat("\"", path, "\": at \"", at, "\" ", why,
                               ": a pod set's path must name a pod template inside the component, e.g. "
                               "\"template.spec.template\""));
    }
    return std::nullopt;
  };
  constexpr absl::string_view kRoot = "template";
  if (path.substr(0, kRoot.size()) != kRoot) return fail("", "the first element must be \"template\"");
  std::optional<JsonNode> cursor = Member(component, kRoot);
  if (!cursor.has_value()) return fail(kRoot, "the component has no template");
  size_t pos = kRoot.size();
  for (int steps = 0; pos < path.size(); ++steps) {
    if (steps > 64) return fail(path.substr(0, pos), "the path is too deep");
    const absl::string_view done = path.substr(0, pos);
    if (path[pos] == '[') {
      const size_t end = path.find(']', pos);
      size_t index = 0;
      if (end == absl::string_view::npos || !absl::SimpleAtoi(path.substr(pos + 1, end - pos - 1), &index)) {
        return fail(done, "an index must be a whole number in brackets");
      }
      if (!cursor->value().IsArray()) return fail(done, "the value is not a list");
      if (index >= cursor->value().Size()) return fail(done, absl::StrCat("index ", index, " is out of range"));
      cursor = JsonNode(cursor->value()[static_cast<rapidjson::SizeType>(index)], cursor->path().Index(index));
      pos = end + 1;
    } else if (path[pos] == '.') {
      size_t end = path.find_first_of(".[", pos + 1);
      if (end == absl::string_view::npos) end = path.size();
      const absl::string_view key = path.substr(pos + 1, end - pos - 1);
      if (key.empty()) return fail(done, "a field name is empty");
      if (!cursor->value().IsObject()) return fail(done, "the value is not an object");
      std::optional<JsonNode> next = Member(*cursor, key);
      if (!next.has_value()) return fail(done, absl::StrCat("there is no field \"", key, "\""));
      cursor = next;
      pos = end;
    } else {
      return fail(done, "expected \".\" or \"[\"");
    }
  }
  return cursor;
}

// A count at `path` as the AppWrapper controller infers it: `absent` when
// there is none, the integer when there is one; anything else is an error.
std::optional<int64_t> InferredCount(const JsonNode& component, absl::string_view path, int64_t absent,
                                     base::FieldErrors* errors) {
  std::optional<JsonNode> v = AtPath(component, path, component.path(), nullptr);
  if (!v.has_value()) return absent;
  if (!v->value().IsInt64() || v->value().GetInt64() < 0 || v->value().GetInt64() > kMaxPodCount) {
    errors->Add(v->path(), base::FieldErrorType::kInvalid,
                absl::StrCat(DescribeJson(v->value()), " is not a pod count (a whole number from 0 to ",
                             kMaxPodCount, ")"));
    return std::nullopt;
  }
  return v->value().GetInt64();
}

bool Exists(const JsonNode& component, absl::string_view path) {
  return AtPath(component, path, component.path(), nullptr).has_value();
}

// Ray: a head pod, then each worker group's replicas.
void InferRay(const JsonNode& component, const std::string& prefix, std::vector<WrappedPodSet>* out,
              base::FieldErrors* errors) {
  out->push_back({prefix + "headGroupSpec.template", 1, component.path()});
  std::optional<JsonNode> workers = AtPath(component, prefix + "workerGroupSpecs", component.path(), nullptr);
  if (!workers.has_value() || !workers->value().IsArray()) return;
  for (size_t i = 0; i < workers->value().Size() && i < kMaxPodSets; ++i) {
    const std::string group = absl::StrCat(prefix, "workerGroupSpecs[", i, "].");
    if (!Exists(component, group + "template")) continue;
    std::optional<int64_t> replicas = InferredCount(component, group + "replicas", 1, errors);
    if (replicas.has_value()) out->push_back({group + "template", *replicas, component.path()});
  }
}

// The pod sets the AppWrapper controller infers for a component that
// declares none (its known kinds); none for other kinds.
std::vector<WrappedPodSet> Infer(const JsonNode& component, base::FieldErrors* errors) {
  std::vector<WrappedPodSet> out;
  std::optional<JsonNode> tmpl = Member(component, "template");
  if (!tmpl.has_value()) return out;
  base::FieldErrors ignored;
  const std::string api_version = StringField(*tmpl, "apiVersion", &ignored).value_or("");
  const std::string kind = StringField(*tmpl, "kind", &ignored).value_or("");
  const base::FieldPath& at = component.path();
  auto job_pods = [&](const std::string& job_spec) -> std::optional<int64_t> {
    std::optional<int64_t> parallelism = InferredCount(component, job_spec + "parallelism", 1, errors);
    std::optional<int64_t> completions = InferredCount(component, job_spec + "completions", -1, errors);
    if (!parallelism.has_value() || !completions.has_value()) return std::nullopt;
    return *completions >= 0 && *completions < *parallelism ? *completions : *parallelism;
  };
  if (api_version == "batch/v1" && kind == "Job") {
    if (std::optional<int64_t> n = job_pods("template.spec.")) out.push_back({"template.spec.template", *n, at});
  } else if (api_version == "jobset.x-k8s.io/v1alpha2" && kind == "JobSet") {
    std::optional<JsonNode> jobs = AtPath(component, "template.spec.replicatedJobs", at, nullptr);
    if (jobs.has_value() && jobs->value().IsArray()) {
      for (size_t i = 0; i < jobs->value().Size() && i < kMaxPodSets; ++i) {
        const std::string job = absl::StrCat("template.spec.replicatedJobs[", i, "].");
        if (!Exists(component, job + "template")) continue;
        std::optional<int64_t> pods = job_pods(job + "template.spec.");
        std::optional<int64_t> replicas = InferredCount(component, job + "replicas", 1, errors);
        if (!pods.has_value() || !replicas.has_value()) continue;
        std::optional<int64_t> n = CheckedPodCount(*replicas, *pods, at, "replicas × pods per Job", errors);
        if (n.has_value()) out.push_back({job + "template.spec.template", *n, at});
      }
    }
  } else if (api_version == "kubeflow.org/v1" && kind == "PyTorchJob") {
    for (const char* type : {"Master", "Worker"}) {
      const std::string replica = absl::StrCat("template.spec.pytorchReplicaSpecs.", type, ".");
      if (!Exists(component, replica + "template")) continue;
      std::optional<int64_t> n = InferredCount(component, replica + "replicas", 1, errors);
      if (n.has_value()) out.push_back({replica + "template", *n, at});
    }
  } else if (api_version == "ray.io/v1" && kind == "RayCluster") {
    InferRay(component, "template.spec.", &out, errors);
  } else if (api_version == "ray.io/v1" && kind == "RayJob") {
    InferRay(component, "template.spec.rayClusterSpec.", &out, errors);
  } else if (api_version == "v1" && kind == "Pod") {
    out.push_back({"template", 1, at});
  } else if (api_version == "apps/v1" && (kind == "Deployment" || kind == "StatefulSet")) {
    if (Exists(component, "template.spec.template")) {
      std::optional<int64_t> n = InferredCount(component, "template.spec.replicas", 1, errors);
      if (n.has_value()) out.push_back({"template.spec.template", *n, at});
    }
  }
  return out;
}

// The pod sets a component declares (spec.components[i].podSets).
std::vector<WrappedPodSet> Declared(const JsonNode& list, base::FieldErrors* errors) {
  std::vector<WrappedPodSet> out;
  std::set<std::string> paths;
  for (const JsonNode& ps : Items(list)) {
    if (!ExpectObject(ps, errors)) continue;
    std::optional<std::string> path = StringField(ps, "path", errors, Presence::kRequired);
    std::optional<int64_t> replicas = IntField(ps, "replicas", 0, kMaxPodCount, errors);
    if (!path.has_value()) continue;
    if (!paths.insert(*path).second) {
      errors->Add(ps.path().Child("path"), base::FieldErrorType::kDuplicate,
                  absl::StrCat("\"", *path, "\" is declared twice: each pod set of a component has its own path"));
      continue;
    }
    const bool replicas_ok = replicas.has_value() || !Member(ps, "replicas").has_value();
    if (replicas_ok) out.push_back({*path, replicas.value_or(1), ps.path().Child("path")});
  }
  return out;
}

}  // namespace

KindResult ExtractAppWrapper(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<JsonNode> components = ListField(*spec, "components", errors, Presence::kRequired);
  if (!components.has_value()) return result;
  // Kueue names an AppWrapper's pod sets <name>-<index> over all components.
  // Not named yet (a mutating review of a create with generateName): the
  // generateName prefix stands in.
  std::string prefix = absl::StrCat(meta.name, "-");
  if (meta.name.empty()) {
    base::FieldErrors ignored;
    std::optional<JsonNode> metadata = ObjectField(object, "metadata", &ignored);
    std::optional<std::string> generate =
        metadata.has_value() ? StringField(*metadata, "generateName", &ignored) : std::nullopt;
    prefix = generate.has_value() && !generate->empty() ? *generate : "appwrapper-";
  }
  size_t flat = 0;
  const std::vector<JsonNode> items = Items(*components);
  for (size_t i = 0; i < items.size(); ++i) {
    const JsonNode& component = items[i];
    if (!ExpectObject(component, errors)) continue;
    if (!ObjectField(component, "template", errors, Presence::kRequired).has_value()) continue;
    std::optional<JsonNode> declared = ListField(component, "podSets", errors);
    const std::vector<WrappedPodSet> wrapped = declared.has_value() && declared->value().Size() > 0
                                                   ? Declared(*declared, errors)
                                                   : Infer(component, errors);
    for (size_t j = 0; j < wrapped.size(); ++j, ++flat) {
      const WrappedPodSet& w = wrapped[j];
      std::optional<JsonNode> tmpl = AtPath(component, w.path, w.where, errors);
      if (!tmpl.has_value()) continue;
      if (!ExpectObject(*tmpl, errors)) continue;
      std::optional<JsonNode> pod_spec = ObjectField(*tmpl, "spec", errors, Presence::kRequired);
      if (!pod_spec.has_value()) continue;
      std::optional<PodSet> pod_set = ReadPodSpec(*pod_spec, errors);
      if (!pod_set.has_value()) continue;
      pod_set->name = absl::StrCat(prefix, flat);
      pod_set->count = w.replicas;
      pod_set->template_pointer = absl::StrCat("/spec/components/", i, "/podSetInfos/", j);
      result.Add(std::move(*pod_set), w.where, pod_spec->path());
    }
  }
  return result;
}

int64_t ReadyAppWrapper(const JsonNode& object, const Workload& w) {
  return HasTrueCondition(object.value(), "PodsReady") ? w.TotalPods() : 0;
}

}  // namespace gangkeeper::workload
