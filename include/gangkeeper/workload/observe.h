// gangkeeper: what a Kubernetes object read from the API server says.
//
// The reconciler lists and watches the managed kinds and needs, for each
// object, its identity, whether it is still held back (suspended or gated
// by gangkeeper), whether it has ended, what gangkeeper wrote into it when
// it released it, and the Workload it amounts to. ObserveObject parses the
// JSON text once (RapidJSON stays inside this module) and answers all of
// that. Pure function; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/extract.h"
#include "gangkeeper/workload/hold.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::workload {

// The annotation gangkeeper writes on a released object: the flavors per
// pod set and exactly what release added to each pod template, so that a
// suspend can take it out again (and a restarted gangkeeper knows what it
// admitted).
inline constexpr absl::string_view kAdmittedFlavorsAnnotation = "gangkeeper.io/admitted-flavors";

struct ObservedObject {
  const KindInfo* kind = nullptr;
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string resource_version;
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // Suspended (spec.suspend / spec.runPolicy.suspend true) or, for a Pod,
  // still carrying gangkeeper's scheduling gate.
  bool held = false;
  // Ended for good: a Job's Complete/Failed condition, a Kubeflow job's
  // Succeeded/Failed, a JobSet's Completed/Failed, a RayJob's
  // jobDeploymentStatus Complete/Failed, a Pod's phase Succeeded/Failed,
  // an AppWrapper's phase Succeeded, or Failed once its components are
  // gone (ResourcesDeployed no longer True).
  bool finished = false;
  // Pods: the status phase ("Pending", "Running", ...).
  std::string pod_phase;
  // How many of its pods are ready, as the kind reports it (ReadyPods);
  // 0 when the object is not well-formed.
  int64_t ready_pods = 0;
  // The Workload, when the object is well-formed (see ExtractWorkload);
  // otherwise `extract_error` says why.
  std::optional<Workload> workload;
  absl::Status extract_error;
  // Pod sets that run fewer pods than the Workload counts, by name: a Job
  // released partially runs spec.parallelism pods while the Workload has
  // the count it asked for (gangkeeper.io/full-parallelism). Adopting it
  // charges what runs. Empty for everything else.
  std::map<std::string, int64_t> running_counts;
};

// InvalidArgument when `json` is not a JSON object with metadata.name.
[[nodiscard]] absl::StatusOr<ObservedObject> ObserveObject(absl::string_view json, const KindInfo& kind,
                                                           const model::PolicySet& policies,
                                                           const ExtractOptions& options = {});

// How many pods of `object` (a `kind`, read as `w`) are ready, by the
// kind's own status fields (the kinds table's ready counter; see
// src/workload/kinds/readiness.cc): in [0, w.TotalPods()].
int64_t ReadyPods(const rapidjson::Value& object, const KindInfo& kind, const Workload& w);

// The terminal-state test ObserveObject uses, on a parsed object; through a
// JsonProbe for modules that hold objects in another JSON library (the
// actuator's nlohmann::json).
bool IsFinishedObject(const rapidjson::Value& object);
bool IsFinishedObject(const JsonProbe& object);

}  // namespace gangkeeper::workload
