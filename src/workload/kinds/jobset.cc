// gangkeeper: jobset.x-k8s.io JobSet → one pod set per replicatedJob (see kinds.h).
//
// spec.replicatedJobs[i] = {name, replicas (default 1), template: a Job
// template}. Pod set name = the replicatedJob's name; count = replicas × the
// Job's pod count (parallelism, default 1, capped by completions). The pod
// PriorityClass is the first template's priorityClassName.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {

KindResult ExtractJobSet(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<JsonNode> jobs = ListField(*spec, "replicatedJobs", errors, Presence::kRequired);
  if (!jobs.has_value()) return result;
  if (jobs->value().Empty()) {
    errors->Add(jobs->path(), base::FieldErrorType::kRequired, "a JobSet needs at least one replicatedJob");
  }
  size_t index = 0;
  for (const JsonNode& job : Items(*jobs)) {
    const size_t job_index = index++;
    if (!ExpectObject(job, errors)) continue;
    std::optional<std::string> name = StringField(job, "name", errors, Presence::kRequired);
    if (name.has_value() && name->empty()) {
      errors->Add(job.path().Child("name"), base::FieldErrorType::kRequired, "must not be empty");
    }
    std::optional<int64_t> replicas = IntField(job, "replicas", 0, kMaxPodCount, errors);
    const bool replicas_ok = replicas.has_value() || !Member(job, "replicas").has_value();
    std::optional<JsonNode> job_template = ObjectField(job, "template", errors, Presence::kRequired);
    if (!job_template.has_value()) continue;
    std::optional<JsonNode> job_spec = ObjectField(*job_template, "spec", errors, Presence::kRequired);
    if (!job_spec.has_value()) continue;
    std::optional<int64_t> per_job = JobPodCount(*job_spec, errors);
    std::optional<PodSet> pod_set = ReadPodTemplate(*job_spec, "template", errors);
    if (!name.has_value() || name->empty() || !replicas_ok || !per_job.has_value() || !pod_set.has_value()) {
      continue;
    }
    std::optional<int64_t> count =
        CheckedPodCount(replicas.value_or(1), *per_job, job.path(), "replicas * job pods", errors);
    if (!count.has_value()) continue;
    pod_set->name = *name;
    pod_set->count = *count;
    pod_set->template_pointer = TemplatePointer(TemplatesFor(Kind::kJobSet).each, absl::StrCat(job_index));
    result.Add(std::move(*pod_set), job.path().Child("name"),
               job_spec->path().Child("template").Child("spec"));
  }
  return result;
}

}  // namespace gangkeeper::workload
