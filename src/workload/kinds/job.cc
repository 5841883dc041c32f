// gangkeeper: batch/v1 Job → one pod set "main" (see kinds.h).
//
// count = parallelism (default 1), capped by completions when completions
// is set; Indexed Jobs count the same way (Kueue's batch/job integration).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {

std::optional<int64_t> JobPodCount(const JsonNode& job_spec, base::FieldErrors* errors) {
  const size_t errors_before = errors->size();
  std::optional<int64_t> parallelism = IntField(job_spec, "parallelism", 0, kMaxPodCount, errors);
  std::optional<int64_t> completions = IntField(job_spec, "completions", 0, kMaxPodCount, errors);
  if (errors->size() != errors_before) return std::nullopt;
  int64_t count = parallelism.value_or(1);
  if (completions.has_value()) count = std::min(count, *completions);
  return count;
}

std::optional<int64_t> CheckedPodCount(int64_t a, int64_t b, const base::FieldPath& path, absl::string_view what,
                                       base::FieldErrors* errors) {
  // Both factors are in [0, kMaxPodCount], so the product fits in int64_t.
  const int64_t product = a * b;
  if (product > kMaxPodCount) {
    errors->Add(path, base::FieldErrorType::kInvalid,
                absl::StrCat(what, " = ", a, " * ", b, " = ", product, " pods; at most ", kMaxPodCount,
                             " are supported per pod set"));
    return std::nullopt;
  }
  return product;
}

KindResult ExtractJob(const JsonNode& object, const Workload& /*meta*/, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<int64_t> count = JobPodCount(*spec, errors);
  std::optional<PodSet> pod_set = ReadPodTemplate(*spec, "template", errors);
  if (!count.has_value() || !pod_set.has_value()) return result;
  pod_set->name = "main";
  pod_set->count = *count;
  pod_set->template_pointer = std::string(TemplatesFor(Kind::kJob).fixed);
  result.Add(std::move(*pod_set), spec->path(), spec->path().Child("template").Child("spec"));
  return result;
}

}  // namespace gangkeeper::workload
