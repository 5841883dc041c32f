// gangkeeper broker: the Snapshot the broker publishes after every batch
// (an immutable view of its state: workloads, ClusterQueues, policies) and
// the SnapshotSource readers depend on (the webhook, the API, metrics,
// the reconciler), so that none of them needs the Broker itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"

namespace gangkeeper::broker {

class Broker;

// What the broker's thread has done since it was created.
struct BrokerStats {
  uint64_t batches = 0;
  uint64_t events = 0;
  uint64_t admitted = 0;
  uint64_t preempted = 0;
  uint64_t sink_failures = 0;
  uint64_t queue_depth = 0;  // events waiting when the last batch was taken
  // Workload images taken into snapshots (a changed workload, once per
  // publication that follows its change).
  uint64_t workloads_published = 0;
  // Pending reasons given newer numbers by a refresh
  // (SchedulerOptions::defer_reason_numbers).
  uint64_t reasons_refreshed = 0;
};

// 1-based positions among the pending workloads of a ClusterQueue and of
// the workload's LocalQueue.
struct QueuePosition {
  int64_t cluster_queue = 0;
  int64_t local_queue = 0;
};

// The pending workloads of one ClusterQueue, in queue order, each with its
// LocalQueue. Kept lean (it is rebuilt as the queue changes); positions are
// worked out when asked for.
struct PendingOrder {
  // The workload as the scheduler had it when the order was built, shared
  // (the snapshot's workloads hold the same; a copy of its key and queue
  // per item made rebuilding a long order cost a string copy per pending
  // workload).
  struct Item {
    std::shared_ptr<const WorkloadInfo> info;  // never null
    const WorkloadKey& key() const { return info->key; }
    const std::string& local_queue() const { return info->local_queue; }
  };
  std::vector<Item> items;
};

struct ClusterQueueView {
  ClusterQueueStatus status;
  std::shared_ptr<const PendingOrder> pending;  // never null
  std::map<model::ResourceName, quantity::Quantity> admitted_usage;  // summed over flavors
};

// An immutable view of the broker's state, published after every batch.
class Snapshot {
 public:
  uint64_t version() const { return version_; }
  absl::Time time() const { return time_; }
  // The sink position this state corresponds to (every change up to it is
  // durable), and whether the state is exactly that: false while changes
  // wait to be made durable (the sink failed). Snapshots are written only
  // from durable states.
  uint64_t durable_position() const { return durable_position_; }
  bool durable() const { return durable_; }
  // Deleted ClusterQueues that still hold quota.
  const std::vector<model::ClusterQueue>& terminating() const { return terminating_; }
  // What the API changed over the policy files; null when nothing.
  const std::shared_ptr<const model::PolicyOverlay>& overlay() const { return overlay_; }
  const model::PolicySet& policies() const { return *policies_; }
  const std::shared_ptr<const model::PolicySet>& shared_policies() const { return policies_; }
  // The newest instance of `key` the API server confirmed, else the newest
  // (known only from reviews); nullptr when unknown (or finished).
  const WorkloadInfo* Find(const WorkloadKey& key) const;
  // The instance `uid` of `key` (uid ignored for pod groups), or nullptr.
  const WorkloadInfo* FindInstance(const WorkloadKey& key, const std::string& uid) const;
  // Every instance of `key`, oldest first: usually one; more while an
  // older object under the same name still holds quota.
  std::vector<const WorkloadInfo*> Instances(const WorkloadKey& key) const;
  // Where a pending workload stands in its queues; nullopt when not queued.
  // Linear in the queue's length: to list many, use Positions().
  std::optional<QueuePosition> Position(const WorkloadKey& key) const;
  // The positions of every pending workload of `cq`, in one pass.
  std::map<WorkloadKey, QueuePosition> Positions(const model::ClusterQueueName& cq) const;
  // nullptr for an unknown ClusterQueue.
  const ClusterQueueView* FindClusterQueue(const model::ClusterQueueName& cq) const;
  using ClusterQueueMap = std::map<model::ClusterQueueName, std::shared_ptr<const ClusterQueueView>>;
  const ClusterQueueMap& cluster_queues() const { return *queues_; }
  // The cohorts of the quota tree (Cohort objects and those named only by
  // ClusterQueues), by name; refreshed with the ClusterQueue views.
  using CohortMap = std::map<model::CohortName, CohortStatus>;
  const CohortMap& cohorts() const { return *cohorts_; }
  // Calls `f` for every tracked instance (unordered).
  void ForEachWorkload(const std::function<void(const WorkloadInfo&)>& f) const;
  // The same, shared (a snapshot writer keeps them without copying).
  void ForEachShared(const std::function<void(const std::shared_ptr<const WorkloadInfo>&)>& f) const;
  size_t workload_count() const { return workload_count_; }
  // Of those, how many are known only from admission reviews (DESIGN §2).
  size_t unconfirmed_count() const { return unconfirmed_count_; }
  // What the broker's thread has done so far (as of this snapshot).
  const BrokerStats& stats() const { return stats_; }
  // Of the ClusterQueue `cq` (0 / empty when unknown): pending workloads,
  // and the quota its admitted workloads hold per resource (summed over
  // flavors).
  int64_t PendingIn(const model::ClusterQueueName& cq) const;
  // Find(key) as the webhook's registry reports it (registry.h).
  std::optional<WorkloadRecord> Record(const WorkloadKey& key) const;
  std::map<model::ResourceName, quantity::Quantity> AdmittedUsage(const model::ClusterQueueName& cq) const;
  // The most recently finished workloads (their last state, phase
  // kFinished), oldest first; bounded by BrokerOptions::keep_finished and
  // keep_finished_for. Never null.
  const std::vector<std::shared_ptr<const WorkloadInfo>>& finished() const { return *finished_; }

  static constexpr size_t kShards = 1024;

 private:
  friend class Broker;
  // The newest instance of each key, by kind and ns/name (one pointer a
  // workload: a snapshot of 100,000 holds 100,000 of them).
  using Shard = absl::flat_hash_map<std::string, std::shared_ptr<const WorkloadInfo>>;
  // The older instances of the few keys that have more than one, oldest
  // first (copied only when one of them changes).
  using Older = absl::flat_hash_map<std::string, std::vector<std::shared_ptr<const WorkloadInfo>>>;
  // The shard table, shared by consecutive snapshots until a workload
  // changes (a batch that changes none publishes without touching its
  // kShards pointers); likewise the ClusterQueue views.
  using ShardTable = std::vector<std::shared_ptr<const Shard>>;
  using Finished = std::vector<std::shared_ptr<const WorkloadInfo>>;
  // Shared empty tables, so that constructing a snapshot allocates nothing
  // but itself.
  static const std::shared_ptr<const Older>& EmptyOlder();
  static const std::shared_ptr<const ClusterQueueMap>& EmptyQueues();
  static const std::shared_ptr<const Finished>& EmptyFinished();
  static const std::shared_ptr<const CohortMap>& EmptyCohorts();
  uint64_t version_ = 0;
  absl::Time time_;
  uint64_t durable_position_ = 0;
  bool durable_ = true;
  std::vector<model::ClusterQueue> terminating_;
  std::shared_ptr<const model::PolicyOverlay> overlay_;
  std::shared_ptr<const model::PolicySet> policies_;
  std::shared_ptr<const ShardTable> shards_;  // null until the first publication
  std::shared_ptr<const Older> older_ = EmptyOlder();
  std::shared_ptr<const ClusterQueueMap> queues_ = EmptyQueues();
  std::shared_ptr<const CohortMap> cohorts_ = EmptyCohorts();
  size_t workload_count_ = 0;
  size_t unconfirmed_count_ = 0;
  BrokerStats stats_;
  std::shared_ptr<const Finished> finished_ = EmptyFinished();
};

// Where readers get the broker's state: the latest snapshot, never null,
// without waiting for the writer. Thread-safe.
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  virtual std::shared_ptr<const Snapshot> snapshot() const = 0;
};

}  // namespace gangkeeper::broker
