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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

enum class WorkloadState { kPending, kAdmitted, kFinished };

const char* WorkloadStateName(WorkloadState state);

// A workload is named by namespace and name (a pod group by its group name).
struct WorkloadKey {
  std::string namespace_name;
  std::string name;
  friend bool operator<(const WorkloadKey& a, const WorkloadKey& b) {
    return a.namespace_name != b.namespace_name ? a.namespace_name < b.namespace_name : a.name < b.name;
  }
  friend bool operator==(const WorkloadKey& a, const WorkloadKey& b) {
    return a.namespace_name == b.namespace_name && a.name == b.name;
  }
};

// The key of a workload: its pod group for grouped Pods, else its name.
WorkloadKey KeyOf(const workload::Workload& w);

struct WorkloadRecord {
  workload::Workload workload;
  std::string cluster_queue;
  WorkloadState state = WorkloadState::kPending;
  // Pods of a pod group seen so far (the gang is complete at the total).
  int64_t pod_group_members = 0;
};

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
  // The object was deleted. OK when unknown.
  [[nodiscard]] virtual absl::Status Remove(const WorkloadKey& key) = 0;
  // The workload completed or failed; its quota can go. OK when unknown.
  [[nodiscard]] virtual absl::Status Finish(const WorkloadKey& key) = 0;

  virtual std::optional<WorkloadRecord> Find(const WorkloadKey& key) const = 0;
  // Pending workloads queued in `cluster_queue`.
  virtual int64_t PendingIn(const std::string& cluster_queue) const = 0;
  // Quota held by the admitted workloads of `cluster_queue`, per resource
  // (summed over flavors).
  virtual std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const = 0;
};

std::unique_ptr<WorkloadRegistry> NewInMemoryRegistry();

}  // namespace gangkeeper::broker
