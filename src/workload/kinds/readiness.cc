// gangkeeper: how many of an object's pods are ready, per kind (see kinds.h).
//
// waitForPodsReady (KUEUE-SEMANTICS.md) asks each admitted workload whether
// its pods are up. Each kind answers from its own object, as Kueue's
// integrations do:
//   Job         status.ready + status.succeeded + the succeeded pods not yet
//               counted (status.uncountedTerminatedPods.succeeded)
//   JobSet      per replicatedJobsStatus entry, (ready + succeeded) Jobs,
//               at most the replicatedJob's replicas, times its pods per Job
//   Kubeflow    the Running condition True: all; otherwise the
//               replicaStatuses' active + succeeded, but never all (Kueue
//               counts a Kubeflow job ready only by its Running condition)
//   RayJob      status.rayClusterStatus.state "ready": all; otherwise the
//   RayCluster  status's readyWorkerReplicas, never all
//   Pod         1 when its Ready condition is True or it has Succeeded
// Whatever the status says, the answer is in [0, w.TotalPods()]. Missing or
// malformed status fields count as 0: readiness is only ever observed,
// never validated, so a status that makes no sense is "not ready".
#include <algorithm>
#include <string>

#include "src/workload/kinds/kinds.h"

namespace gangkeeper::workload {

const rapidjson::Value* StatusMember(const rapidjson::Value* v, absl::string_view name) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(rapidjson::Value(rapidjson::StringRef(name.data(), name.size())));
  return it == v->MemberEnd() ? nullptr : &it->value;
}

int64_t StatusCount(const rapidjson::Value* v, absl::string_view name) {
  const rapidjson::Value* m = StatusMember(v, name);
  if (m == nullptr || !m->IsInt64()) return 0;
  return std::clamp<int64_t>(m->GetInt64(), 0, kMaxPodCount);
}

bool HasTrueCondition(const rapidjson::Value& object, absl::string_view type) {
  const rapidjson::Value* conditions = StatusMember(StatusMember(&object, "status"), "conditions");
  if (conditions == nullptr || !conditions->IsArray()) return false;
  for (const rapidjson::Value& c : conditions->GetArray()) {
    const rapidjson::Value* t = StatusMember(&c, "type");
    const rapidjson::Value* s = StatusMember(&c, "status");
    if (t == nullptr || s == nullptr || !t->IsString() || !s->IsString()) continue;
    if (absl::string_view(t->GetString(), t->GetStringLength()) == type &&
        absl::string_view(s->GetString(), s->GetStringLength()) == "True") {
      return true;
    }
  }
  return false;
}

int64_t ClampReady(int64_t ready, const Workload& w) { return std::clamp<int64_t>(ready, 0, w.TotalPods()); }

namespace {

bool StringIs(const rapidjson::Value* v, absl::string_view want) {
  return v != nullptr && v->IsString() && absl::string_view(v->GetString(), v->GetStringLength()) == want;
}

// A count that is never "all": for kinds whose own signal of readiness is
// a state, not a count.
int64_t BelowAll(int64_t ready, const Workload& w) {
  return std::clamp<int64_t>(ready, 0, std::max<int64_t>(0, w.TotalPods() - 1));
}

}  // namespace

int64_t ReadyJob(const JsonNode& object, const Workload& w) {
  const rapidjson::Value* status = StatusMember(&object.value(), "status");
  int64_t ready = StatusCount(status, "ready") + StatusCount(status, "succeeded");
  const rapidjson::Value* uncounted = StatusMember(StatusMember(status, "uncountedTerminatedPods"), "succeeded");
  if (uncounted != nullptr && uncounted->IsArray()) ready += uncounted->Size();
  return ClampReady(ready, w);
}

int64_t ReadyJobSet(const JsonNode& object, const Workload& w) {
  const rapidjson::Value* jobs = StatusMember(StatusMember(&object.value(), "spec"), "replicatedJobs");
  const rapidjson::Value* statuses = StatusMember(StatusMember(&object.value(), "status"), "replicatedJobsStatus");
  if (jobs == nullptr || !jobs->IsArray() || statuses == nullptr || !statuses->IsArray()) return 0;
  int64_t ready = 0;
  for (const rapidjson::Value& s : statuses->GetArray()) {
    const rapidjson::Value* name = StatusMember(&s, "name");
    if (name == nullptr || !name->IsString()) continue;
    const absl::string_view job_name(name->GetString(), name->GetStringLength());
    // The pod set of that replicatedJob gives its pods; the spec its replicas.
    int64_t replicas = 1;
    for (const rapidjson::Value& j : jobs->GetArray()) {
      if (StringIs(StatusMember(&j, "name"), job_name)) {
        const rapidjson::Value* r = StatusMember(&j, "replicas");
        if (r != nullptr && r->IsInt64()) replicas = std::clamp<int64_t>(r->GetInt64(), 0, kMaxPodCount);
      }
    }
    for (const PodSet& ps : w.pod_sets) {
      if (ps.name != job_name || replicas == 0) continue;
      const int64_t jobs_ready = std::min(StatusCount(&s, "ready") + StatusCount(&s, "succeeded"), replicas);
      ready += jobs_ready * (ps.count / replicas);
    }
  }
  return ClampReady(ready, w);
}

int64_t ReadyKubeflow(const JsonNode& object, const Workload& w) {
  if (HasTrueCondition(object.value(), "Running")) return w.TotalPods();
  const rapidjson::Value* statuses = StatusMember(StatusMember(&object.value(), "status"), "replicaStatuses");
  if (statuses == nullptr || !statuses->IsObject()) return 0;
  int64_t ready = 0;
  for (const auto& m : statuses->GetObject()) {
    ready += StatusCount(&m.value, "active") + StatusCount(&m.value, "succeeded");
  }
  return BelowAll(ready, w);
}

namespace {

int64_t ReadyRayStatus(const rapidjson::Value* status, const Workload& w) {
  if (StringIs(StatusMember(status, "state"), "ready")) return w.TotalPods();
  return BelowAll(StatusCount(status, "readyWorkerReplicas"), w);
}

}  // namespace

int64_t ReadyRayJob(const JsonNode& object, const Workload& w) {
  return ReadyRayStatus(StatusMember(StatusMember(&object.value(), "status"), "rayClusterStatus"), w);
}

int64_t ReadyRayCluster(const JsonNode& object, const Workload& w) {
  return ReadyRayStatus(StatusMember(&object.value(), "status"), w);
}

int64_t ReadyPod(const JsonNode& object, const Workload& w) {
  if (StringIs(StatusMember(StatusMember(&object.value(), "status"), "phase"), "Succeeded")) return ClampReady(1, w);
  return HasTrueCondition(object.value(), "Ready") ? ClampReady(1, w) : 0;
}

}  // namespace gangkeeper::workload
