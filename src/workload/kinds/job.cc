// gangkeeper: batch/v1 Job → one pod set "main" (see kinds.h).
//
// count = parallelism (default 1), capped by completions when completions
// is set; Indexed Jobs count the same way (Kueue's batch/job integration).
#include <algorithm>

#include "absl/strings/numbers.h"
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

namespace {

// An annotation's value as a whole number, or nullopt (with an error at
// the annotation's path when present and not a whole number).
std::optional<int64_t> JobAnnotationInt(const Workload& meta, absl::string_view key, base::FieldErrors* errors) {
  auto it = meta.annotations.find(std::string(key));
  if (it == meta.annotations.end()) return std::nullopt;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    errors->Add(base::FieldPath("metadata").Child("annotations").Key(key), base::FieldErrorType::kInvalid,
                absl::StrCat("\"", it->second, "\" is not a whole number"));
    return std::nullopt;
  }
  return v;
}

}  // namespace

KindResult ExtractJob(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<int64_t> count = JobPodCount(*spec, errors);
  std::optional<PodSet> pod_set = ReadPodTemplate(*spec, "template", errors);
  if (!count.has_value() || !pod_set.has_value()) return result;
  // Released partially: spec.parallelism is the admitted count; the gang
  // is the count it asked for.
  if (std::optional<int64_t> full = JobAnnotationInt(meta, kFullParallelismAnnotation, errors);
      full.has_value() && *full > *count && *full <= kMaxPodCount) {
    count = *full;
  }
  // Partial admission: at least 1 and fewer than the Job's pods.
  if (std::optional<int64_t> min = JobAnnotationInt(meta, kJobMinParallelismAnnotation, errors)) {
    if (*min <= 0 || *min >= *count) {
      errors->Add(base::FieldPath("metadata").Child("annotations").Key(kJobMinParallelismAnnotation),
                  base::FieldErrorType::kInvalid,
                  absl::StrCat(*min, " must be between 1 and ", *count - 1, " (the Job runs ", *count,
                               " pods at once)"));
    } else {
      pod_set->min_count = *min;
    }
  }
  pod_set->name = "main";
  pod_set->count = *count;
  pod_set->template_pointer = std::string(TemplatesFor(Kind::kJob).fixed);
  result.Add(std::move(*pod_set), spec->path(), spec->path().Child("template").Child("spec"));
  return result;
}

}  // namespace gangkeeper::workload
