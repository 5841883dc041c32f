// gangkeeper: one kueue.x-k8s.io Workload per tracked workload (issue #24
// item 3), so that `kubectl get workloads`, kueuectl and KueueViz show
// gangkeeper's decisions. The Workload is a report, never an input:
// gangkeeper reads nothing from it, so deleting or editing one by hand
// changes no decision (the next list repairs it).
//
// Named as Kueue names its own (kueue_objects.h, deterministic: a restart
// or a new leader finds the same object), owned by its job (an
// ownerReference with controller: true, so garbage collection removes it
// with the job), labelled app.kubernetes.io/managed-by=gangkeeper. A pod
// group (kueue.x-k8s.io/pod-group-name) gets one Workload named after the
// group and owned by every pod of the group (listed by the group's label
// when it is created and whenever the broker sees the members change), so
// garbage collection removes it with the last pod.
//
// A pass, like StatusWriter's (same options, same rate limit, leader only,
// refused while Kueue's controller runs), compares each tracked workload's
// Workload (spec and status) with what was last written or listed, and
// creates (POST), updates (PATCH spec; PATCH /status) or deletes what
// differs. A pass that starts leading lists the Workloads first and takes
// them as written: no duplicates, no rewrites of what is already right.
// Finished workloads get Finished=True on the Workload that exists (none
// is created for them). A workload whose object was deleted (the broker's
// kRemoved) has its Workload deleted (the garbage collector would too).
//
// As a broker::ChangeObserver (the leader's broker only) it remembers each
// workload's last eviction (preempted or not, the reason) for the Evicted
// and Preempted conditions, and which workloads were removed.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/kueue_objects.h"
#include "gangkeeper/kube/status_writer.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

class WritePass;  // src/kube/write_pass.h: a pass's writes, gated by the lease and a budget

class WorkloadPublisher final : public broker::ChangeObserver {
 public:
  // `client` and `view` must outlive the publisher.
  WorkloadPublisher(Client* client, const broker::SnapshotSource* view, KueueWriterOptions options);
  ~WorkloadPublisher() override;  // Stop()
  WorkloadPublisher(const WorkloadPublisher&) = delete;
  WorkloadPublisher& operator=(const WorkloadPublisher&) = delete;

  void OnDurable(const std::vector<broker::StateChange>& changes, const broker::Snapshot& after) override;

  void Start();
  void Stop();
  // One pass now (the thread calls it every `interval`); returns the writes.
  int Sync();
  // The next pass lists the Workloads first (repairs hand deletions).
  void ResyncNext();
  KueueWriterStats stats() const;

 private:
  struct Written {
    std::string object_uid;  // the Workload's own uid
    nlohmann::json spec;     // its summary as written (or listed)
    KueueStatus status;
    nlohmann::json conditions;  // with their times
    // Pod groups: the pods its ownerReferences name, and the group's
    // members (as the broker saw them) when they were set.
    std::set<std::string> owners;
    std::set<std::string> members;
  };
  void Run();
  bool Allowed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  void List() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  // Brings the Workload of `w` up to date; false when it could not (budget
  // or a failure): the pass is incomplete.
  // Its writes go through the pass's gate (src/kube/write_pass.h).
  bool Publish(const broker::WorkloadInfo& w, WritePass* pass) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  bool WriteStatus(const std::string& path, Written* entry, const KueueStatus& want, WritePass* pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  // A pod group's pods in the cluster (by its label), sorted by name.
  absl::StatusOr<std::vector<PodOwner>> GroupPods(const broker::WorkloadInfo& w);
  bool SyncPodOwners(const broker::WorkloadInfo& w, const std::string& key, const std::string& path, Written* entry,
                     WritePass* pass) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  void Count(bool ok);

  Client* const client_;
  const broker::SnapshotSource* const view_;
  const KueueWriterOptions options_;

  absl::Mutex sync_mu_;
  bool listed_ ABSL_GUARDED_BY(sync_mu_) = false;
  absl::Time last_list_ ABSL_GUARDED_BY(sync_mu_);
  uint64_t done_version_ ABSL_GUARDED_BY(sync_mu_) = UINT64_MAX;
  // By "NAMESPACE/NAME" of the Workload.
  std::map<std::string, Written> written_ ABSL_GUARDED_BY(sync_mu_);

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool resync_next_ ABSL_GUARDED_BY(mu_) = false;
  // From the change stream, by the Workload's "NAMESPACE/NAME".
  std::map<std::string, EvictionNote> evictions_ ABSL_GUARDED_BY(mu_);
  // Workloads ("NAMESPACE/NAME") whose job was deleted: delete them.
  std::set<std::string> removed_ ABSL_GUARDED_BY(mu_);
  KueueWriterStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gangkeeper::kube
