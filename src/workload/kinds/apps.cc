// gangkeeper: kinds without a suspend field, held by their replica count
// (see kinds.h): StatefulSet and Deployment (apps/v1), LeaderWorkerSet
// (leaderworkerset.x-k8s.io/v1).
//
// Kueue manages these through their pods (each pod a workload, or the pods
// of one object a pod group, gated at creation). gangkeeper holds the
// object itself instead, as it holds every other kind: /mutate sets
// spec.replicas to 0 and keeps the count asked for in
// gangkeeper.io/held-replicas (HoldMethod::kReplicas, hold.cc); release
// writes the placement into the templates and puts the count back, so the
// controller creates every pod already placed; preemption scales to 0
// again and takes the placement out. The whole object is one gang: all its
// replicas are admitted together or not at all. While it is admitted its
// replica count cannot change (the validating webhook refuses it, as it
// refuses a changed gang of any kind): an autoscaler must not own it.
//
// Pod sets: a StatefulSet's or Deployment's "main" (replicas pods of
// spec.template); a LeaderWorkerSet's "leader" (one per group, of
// leaderTemplate) and "worker" (size - 1 per group, of workerTemplate), or,
// without a leaderTemplate, "main" (size per group, of workerTemplate), as
// Kueue names them; a LeaderWorkerSet's count is per group times
// spec.replicas groups.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/workload/kinds/kinds.h"
#include "src/workload/pod_spec.h"

namespace gangkeeper::workload {
namespace {

// spec.replicas as asked for: the count kept in gangkeeper.io/held-replicas
// while held (spec.replicas is 0 then), else spec.replicas (default 1).
std::optional<int64_t> AskedReplicas(const JsonNode& spec, const Workload& meta, base::FieldErrors* errors) {
  std::optional<int64_t> replicas = IntField(spec, "replicas", 0, kMaxPodCount, errors);
  if (!replicas.has_value() && Member(spec, "replicas").has_value()) return std::nullopt;
  auto held = meta.annotations.find(std::string(kHeldReplicasAnnotation));
  if (held != meta.annotations.end() && replicas.value_or(1) == 0) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(held->second, &n) || n < 0 || n > kMaxPodCount) {
      errors->Add(base::FieldPath("metadata").Child("annotations").Key(kHeldReplicasAnnotation),
                  base::FieldErrorType::kInvalid,
                  absl::StrCat("\"", held->second, "\" is not a replica count between 0 and ", kMaxPodCount,
                               " (gangkeeper writes it; remove it to let spec.replicas count)"));
      return std::nullopt;
    }
    return n;
  }
  return replicas.value_or(1);
}

// A StatefulSet or Deployment: one pod set "main" of spec.template.
KindResult ExtractReplicated(const JsonNode& object, const Workload& meta, Kind kind, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<int64_t> count = AskedReplicas(*spec, meta, errors);
  std::optional<PodSet> pod_set = ReadPodTemplate(*spec, "template", errors);
  if (!count.has_value() || !pod_set.has_value()) return result;
  pod_set->name = "main";
  pod_set->count = *count;
  pod_set->template_pointer = std::string(TemplatesFor(kind).fixed);
  result.Add(std::move(*pod_set), spec->path(), spec->path().Child("template").Child("spec"));
  return result;
}

}  // namespace

KindResult ExtractStatefulSet(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result = ExtractReplicated(object, meta, Kind::kStatefulSet, errors);
  // A LeaderWorkerSet's own StatefulSets: the LeaderWorkerSet is the gang.
  result.owned_by_managed_object = ReadOwnedByManagedKind(object, meta, errors);
  return result;
}

KindResult ExtractDeployment(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result = ExtractReplicated(object, meta, Kind::kDeployment, errors);
  result.owned_by_managed_object = ReadOwnedByManagedKind(object, meta, errors);
  return result;
}

KindResult ExtractLeaderWorkerSet(const JsonNode& object, const Workload& meta, base::FieldErrors* errors) {
  KindResult result;
  std::optional<JsonNode> spec = ObjectField(object, "spec", errors, Presence::kRequired);
  if (!spec.has_value()) return result;
  std::optional<int64_t> groups = AskedReplicas(*spec, meta, errors);
  std::optional<JsonNode> lwt = ObjectField(*spec, "leaderWorkerTemplate", errors, Presence::kRequired);
  if (!lwt.has_value()) return result;
  std::optional<int64_t> size = IntField(*lwt, "size", 1, kMaxPodCount, errors);
  const bool size_ok = size.has_value() || !Member(*lwt, "size").has_value();
  const bool has_leader = Member(*lwt, "leaderTemplate").has_value();
  std::optional<PodSet> leader;
  if (has_leader) leader = ReadPodTemplate(*lwt, "leaderTemplate", errors);
  std::optional<PodSet> worker = ReadPodTemplate(*lwt, "workerTemplate", errors);
  if (!groups.has_value() || !size_ok || !worker.has_value() || (has_leader && !leader.has_value())) return result;
  const PodTemplates& templates = TemplatesFor(Kind::kLeaderWorkerSet);
  const int64_t per_group = size.value_or(1);
  if (has_leader) {
    leader->name = "leader";
    leader->count = *groups;
    leader->template_pointer = std::string(templates.fixed);
    result.Add(std::move(*leader), lwt->path().Child("leaderTemplate"),
               lwt->path().Child("leaderTemplate").Child("spec"));
  }
  std::optional<int64_t> workers = CheckedPodCount(*groups, has_leader ? per_group - 1 : per_group, lwt->path(),
                                                   "replicas * workers per group", errors);
  if (!workers.has_value()) return result;
  worker->name = has_leader ? "worker" : "main";
  worker->count = *workers;
  worker->template_pointer = TemplatePointer(templates.each, "");
  result.Add(std::move(*worker), lwt->path().Child("workerTemplate"), lwt->path().Child("workerTemplate").Child("spec"));
  return result;
}

int64_t ReadyReplicas(const JsonNode& object, const Workload& w) {
  return ClampReady(StatusCount(StatusMember(&object.value(), "status"), "readyReplicas"), w);
}

int64_t ReadyLeaderWorkerSet(const JsonNode& object, const Workload& w) {
  // The pods of one group: the gang's pods over its groups (spec.replicas
  // while it runs; a held one, at 0 replicas, has nothing ready).
  const int64_t groups = StatusCount(StatusMember(&object.value(), "spec"), "replicas");
  if (groups <= 0) return 0;
  const int64_t per_group = w.TotalPods() / groups;
  const int64_t ready_groups = StatusCount(StatusMember(&object.value(), "status"), "readyReplicas");
  return ClampReady(std::min(ready_groups, groups) * per_group, w);
}

}  // namespace gangkeeper::workload
