// gangkeeper: how admission hands workloads to the broker.
//
// The validating webhook registers a workload on an allowed, non-dryRun
// CREATE and reports updates, deletions and completions; it also asks what
// the broker knows (is this workload admitted? how many are queued ahead?).
// The broker (issue #5) implements this interface; NewInMemoryRegistry() is
// the stand-in until then: it records pending workloads, admits nothing.
// Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

enum class WorkloadState { kPending, kAdmitted, kFinished };

const char* WorkloadStateName(WorkloadState state);

// A workload is identified by its kind (API group + kind) and its
// namespace and name (DESIGN §4): a Job and a PyTorchJob may share a name.
// Grouped Pods are one workload per pod group: kind kPod with `pod_group`
// set and `name` the group's name, distinct from a single Pod of that name.
// An instance of a workload is its object's uid (kept beside the key:
// WorkloadInfo::workload->uid); a new uid under a known key is a new object.
//
// Tests and callers that name a Job may write {namespace, name}: the kind
// defaults to kJob.
struct WorkloadKey {
  std::string namespace_name;
  std::string name;
  workload::Kind kind = workload::Kind::kJob;
  bool pod_group = false;

  friend bool operator<(const WorkloadKey& a, const WorkloadKey& b) {
    if (a.namespace_name != b.namespace_name) return a.namespace_name < b.namespace_name;
    if (a.name != b.name) return a.name < b.name;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.pod_group < b.pod_group;
  }
  friend bool operator==(const WorkloadKey& a, const WorkloadKey& b) {
    return a.namespace_name == b.namespace_name && a.name == b.name && a.kind == b.kind &&
           a.pod_group == b.pod_group;
  }
  friend bool operator!=(const WorkloadKey& a, const WorkloadKey& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const WorkloadKey& k) {
    return H::combine(std::move(h), k.namespace_name, k.name, static_cast<int>(k.kind), k.pod_group);
  }
};

// The key of a workload: its pod group for grouped Pods, else its object.
WorkloadKey KeyOf(const workload::Workload& w);

// One object under a key: the key and the object's uid (empty for a pod
// group, whose pods come and go under the group's name).
struct InstanceKey {
  WorkloadKey key;
  std::string uid;
  friend bool operator<(const InstanceKey& a, const InstanceKey& b) {
    return a.key != b.key ? a.key < b.key : a.uid < b.uid;
  }
  friend bool operator==(const InstanceKey& a, const InstanceKey& b) { return a.key == b.key && a.uid == b.uid; }
  template <typename H>
  friend H AbslHashValue(H h, const InstanceKey& k) {
    return H::combine(std::move(h), k.key, k.uid);
  }
};
// The instance `w` is: its key, and its uid unless it is a pod group.
InstanceKey InstanceOf(const workload::Workload& w);
// The instance with `uid` under `key` (the uid is dropped for pod groups).
InstanceKey InstanceOf(const WorkloadKey& key, const std::string& uid);

// The kind part of a key as people and URLs spell it, kubectl style:
// lower-case kind, then "." and the API group when there is one:
// "job.batch", "pytorchjob.kubeflow.org", "pod", and "podgroup" for a
// pod group.
std::string KindRef(const WorkloadKey& key);
// The Kubernetes kind ("Job", "PyTorchJob", "Pod"), or "PodGroup".
std::string KindName(const WorkloadKey& key);
// The API group ("batch", "kubeflow.org", "" for Pods and pod groups).
std::string KindGroup(const WorkloadKey& key);
// "job.batch/team-a/train": unique over every key, for maps, URLs, the
// CLI and logs.
std::string KeyString(const WorkloadKey& key);
// The key a KindRef (case-insensitive; "job", "jobs", "job.batch",
// "Job", "podgroup" ...) names, with `ns` and `name`; nullopt when the
// kind is not one gangkeeper manages.
std::optional<WorkloadKey> ParseKindRef(absl::string_view kind_ref, const std::string& ns, const std::string& name);
// The inverse of KeyString; nullopt when `s` is not "KIND/NS/NAME".
std::optional<WorkloadKey> ParseKeyString(absl::string_view s);

struct WorkloadRecord {
  workload::Workload workload;
  std::string cluster_queue;
  WorkloadState state = WorkloadState::kPending;
  // Pods of a pod group seen so far (the gang is complete at the total).
  int64_t pod_group_members = 0;
};

// Runs blocking work on another thread (the server's worker pool), never
// on the caller's: the *Async calls of a registry that can only block go
// through it. May be called from any thread.
using BlockingRunner = std::function<void(absl::AnyInvocable<void()>)>;
// Called exactly once with what the blocking call would have returned.
using WriteDone = absl::AnyInvocable<void(absl::Status)>;

class WorkloadRegistry {
 public:
  virtual ~WorkloadRegistry() = default;

  // Records a new pending workload queued in `cluster_queue`. Registering
  // the same workload again (same key and uid: a retried review) changes
  // nothing; another pod of a known pod group adds a member. Returns only
  // once the registration is recorded; Unavailable when it cannot be.
  [[nodiscard]] virtual absl::Status Register(const workload::Workload& w, const std::string& cluster_queue) = 0;
  // A pending workload's pod sets changed. FailedPrecondition if admitted.
  [[nodiscard]] virtual absl::Status Update(const workload::Workload& w) = 0;
  // The object `uid` was deleted ("" = whichever instance is tracked). OK
  // when unknown, or when the key now names another object.
  [[nodiscard]] virtual absl::Status Remove(const WorkloadKey& key, const std::string& uid) = 0;
  // The workload completed or failed; its quota can go. OK when unknown.
  [[nodiscard]] virtual absl::Status Finish(const WorkloadKey& key, const std::string& uid) = 0;

  // The same four without a thread waiting: each returns at once and calls
  // `done` exactly once with what the call above would have returned, from
  // whichever thread has the answer (or the caller's, before returning,
  // when it is known at once); `done` must not block. The defaults run the
  // blocking call through `blocking` (inline when `blocking` is empty); the
  // broker's registry needs no thread at all (EventQueue::SubmitAsync).
  // The workload is taken by value: a caller that is done with it moves it
  // in (the broker's registry moves it on into its event, uncopied).
  virtual void RegisterAsync(workload::Workload w, const std::string& cluster_queue, const BlockingRunner& blocking,
                             WriteDone done);
  virtual void UpdateAsync(workload::Workload w, const BlockingRunner& blocking, WriteDone done);
  virtual void RemoveAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner& blocking,
                           WriteDone done);
  virtual void FinishAsync(const WorkloadKey& key, const std::string& uid, const BlockingRunner& blocking,
                           WriteDone done);

  virtual std::optional<WorkloadRecord> Find(const WorkloadKey& key) const = 0;
  // Pending workloads queued in `cluster_queue`.
  virtual int64_t PendingIn(const std::string& cluster_queue) const = 0;
  // Quota held by the admitted workloads of `cluster_queue`, per resource
  // (summed over flavors).
  virtual std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const = 0;
  // Tracked workloads known only from reviews (Workload::unconfirmed).
  virtual size_t UnconfirmedCount() const { return 0; }
};

std::unique_ptr<WorkloadRegistry> NewInMemoryRegistry();

}  // namespace gangkeeper::broker
