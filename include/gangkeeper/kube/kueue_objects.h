// gangkeeper: what gangkeeper writes to Kueue's own API (issue #24 items
// 2-4), as pure functions of the broker's Snapshot, plus the two questions
// asked of the cluster before writing anything: which of Kueue's versions
// is served, and whether Kueue's own controller manager runs.
//
//   ClusterQueue .status   counts, flavorsReservation / flavorsUsage (with
//                          borrowed), fairSharing.weightedShare, Active
//   LocalQueue .status     counts, flavor reservation and usage, Active
//   Cohort .status         fairSharing.weightedShare
//   Workload               metadata (Kueue's name, ownerReference to the
//                          job), spec (podSets, queueName, priority), status
//                          (conditions, admission)
// Field names follow Kueue's v1beta2 and v1beta1 types (apis/kueue/*); the
// two differ where noted. The values are those GET /v1/clusterqueues/NAME/
// status shows (api/views.cc): both read the same snapshot.
//
// Conditions are built without lastTransitionTime (a pass compares what it
// would write with what it wrote, and a time would always differ);
// ConditionsJson stamps them, keeping the time of a condition whose status
// did not change, as Kubernetes' SetStatusCondition does.
//
// Thread-compatible (pure functions), except the two cluster questions,
// which call the API server.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

inline constexpr char kKueueGroup[] = "kueue.x-k8s.io";
// The label on every Workload gangkeeper publishes (its resync lists them
// by it) and the owner's uid, as Kueue labels its own.
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "gangkeeper";
inline constexpr char kJobUidLabel[] = "kueue.x-k8s.io/job-uid";
// On the Workload of a pod group, as Kueue marks its own.
inline constexpr char kIsGroupWorkloadAnnotation[] = "kueue.x-k8s.io/is-group-workload";

enum class KueueVersion { kV1beta1, kV1beta2 };
const char* KueueVersionName(KueueVersion v);
// "/apis/kueue.x-k8s.io/VERSION[/namespaces/NS]/RESOURCE[/NAME]", the one
// way every reader and writer of Kueue's API spells a path.
std::string KueuePath(KueueVersion v, absl::string_view resource, absl::string_view namespace_name = "",
                      absl::string_view name = "");

// The name Kueue's job integration gives the Workload of an object: the
// lower-case kind, "-", the object's name (together at most 247
// characters), "-", and the first 5 hex digits of the SHA-1 of kind, group,
// name and uid separated by newlines. Deterministic: a restart or another
// replica computes the same name.
std::string KueueWorkloadName(absl::string_view kind, absl::string_view group, absl::string_view owner_name,
                              absl::string_view owner_uid);

// A status condition without its time.
struct KueueCondition {
  std::string type, status, reason, message;
  friend bool operator==(const KueueCondition&, const KueueCondition&) = default;
};

// A status as gangkeeper writes it: `fields` (every key gangkeeper owns;
// null for one to remove) and the conditions, untimed.
struct KueueStatus {
  nlohmann::json fields = nlohmann::json::object();
  std::vector<KueueCondition> conditions;
  friend bool operator==(const KueueStatus&, const KueueStatus&) = default;
};

// The conditions of `status` (a listed object's .status) as KueueStatus
// keeps them, and its fields named in `keys` (missing ones as null).
KueueStatus ObservedStatus(const nlohmann::json& status, const std::vector<std::string>& keys);
// The conditions as written: `want`, each with the lastTransitionTime of
// the same type in `previous` (a conditions array) when its status is the
// same, else `now`.
nlohmann::json ConditionsJson(const std::vector<KueueCondition>& want, const nlohmann::json& previous,
                              absl::Time now);
// `s` as the .status of a merge patch: its fields and the stamped
// conditions (left out when there are none to write and none before, as
// for a Cohort, whose status has no conditions).
nlohmann::json StatusJson(const KueueStatus& s, const nlohmann::json& previous_conditions, absl::Time now);

// Non-throwing reads of what the API server sent (STYLE §6.5): the field
// `key` of `o` when `o` is an object and the field has the type, else
// "" / null / {} / [].
std::string JsonString(const nlohmann::json& o, const char* key);
nlohmann::json JsonField(const nlohmann::json& o, const char* key);
nlohmann::json JsonObject(const nlohmann::json& o, const char* key);
nlohmann::json JsonArray(const nlohmann::json& o, const char* key);

// ---- ClusterQueue and LocalQueue ----
const std::vector<std::string>& ClusterQueueStatusKeys();
std::vector<std::string> LocalQueueStatusKeys(KueueVersion v);
// `policies`: the snapshot's (why an inactive queue is inactive).
KueueStatus ClusterQueueStatusOf(const broker::ClusterQueueView& view, const model::PolicySet& policies);
// Every LocalQueue of the snapshot's policies, by (namespace, name).
std::map<std::pair<std::string, std::string>, KueueStatus> LocalQueueStatusesOf(const broker::Snapshot& snap,
                                                                                 KueueVersion v);

// ---- Cohort ----
// Kueue's CohortStatus (v1beta2 and v1beta1): fairSharing.weightedShare,
// no conditions.
const std::vector<std::string>& CohortStatusKeys();
KueueStatus CohortStatusOf(const broker::CohortStatus& cohort);

// ---- Workload ----
// False for what gets no Workload object: workloads known only from a
// review, and instances without a uid (pod groups have none of their own:
// they get one).
bool PublishesWorkload(const broker::WorkloadInfo& w);
// The Workload's name, as Kueue's integrations name it: KueueWorkloadName
// of the job, or, for a pod group (kueue.x-k8s.io/pod-group-name), the
// group's name.
std::string KueueWorkloadNameOf(const broker::WorkloadInfo& w);
std::string KueueWorkloadNameFor(const broker::WorkloadKey& key, absl::string_view uid);
// One pod of a pod group, as an ownerReference of the group's Workload.
struct PodOwner {
  std::string name, uid;
};
// apiVersion, kind, metadata (name, namespace, labels, ownerReferences)
// and spec. A job's Workload has one ownerReference, to the job, with
// controller: true. A pod group's is owned by every pod of `pods` (no
// controller, as Kueue's: the garbage collector removes it with the last
// pod) and carries kIsGroupWorkloadAnnotation.
nlohmann::json WorkloadObject(const broker::WorkloadInfo& w, KueueVersion v, const std::vector<PodOwner>& pods = {});
// metadata.ownerReferences of a pod group's Workload.
nlohmann::json PodOwnerReferences(const std::vector<PodOwner>& pods);
nlohmann::json WorkloadSpec(const broker::WorkloadInfo& w, KueueVersion v);
const std::vector<std::string>& WorkloadStatusKeys();

// The last eviction of a workload as the broker's change stream told it.
struct EvictionNote {
  bool preempted = false;
  std::string reason;   // InClusterQueue, InCohortReclamation, ... (Kueue's Preempted reasons)
  std::string message;
};
// The Workload's status for `w`. `previous` is what was written (or listed)
// before: a finished workload keeps its admission and conditions and gains
// Finished; Evicted / Preempted / Requeued are carried over when `eviction`
// is unknown (after a restart or a leader change).
KueueStatus WorkloadStatusOf(const broker::WorkloadInfo& w, const KueueStatus* previous,
                             const std::optional<EvictionNote>& eviction);
// Kueue's QuotaReserved=False reason for a pending reason code.
const char* QuotaReservedReason(broker::PendingReason::Code code);

// ---- Questions to the cluster ----
// The newest of Kueue's versions the cluster serves (v1beta2, else
// v1beta1), from GET /apis/kueue.x-k8s.io (discovery). NotFound, saying
// so, when the group is not served (Kueue's CRDs are not installed) or
// serves neither version; other errors as the client returns them (the
// caller cannot tell, and says so). Asked once at start (node's
// ChoosePolicySource), and the answer is handed to whoever else needs it.
[[nodiscard]] absl::StatusOr<KueueVersion> DiscoverKueue(Client& client);

struct KueueDetectionOptions {
  std::string kueue_namespace = "kueue-system";
  std::string lease_name = "c1f6bfd2.kueue.x-k8s.io";  // Kueue's default leader election id
};
// Whether Kueue's own controller manager runs: its webhook configurations
// (a Mutating/ValidatingWebhookConfiguration whose name contains "kueue"
// and ends in "webhook-configuration", or that has Kueue's ClusterQueue
// webhook mclusterqueue.kb.io / vclusterqueue.kb.io) or its leader Lease
// held. "" when neither; else what was found, as a sentence. An error when
// the API server cannot tell (e.g. 403: RBAC), which the caller treats as
// "assume it runs".
absl::StatusOr<std::string> DetectKueueController(Client& client, const KueueDetectionOptions& options = {});

}  // namespace gangkeeper::kube
