// gangkeeper broker: the quota broker service (DESIGN §2).
//
// One writer thread owns a Scheduler (scheduler.h). Everything reaches it as
// events through a queue: workloads created / updated / deleted / finished
// (the webhook, through the WorkloadRegistry interface), policy changes,
// the actuator's answers, clock ticks. The thread takes the queued events in
// batches; for each batch it applies them, runs scheduling cycles to a fixed
// point, hands the batch's StateChanges to the StateSink (durable before
// anything else happens), then tells the Actuator to release admitted gangs
// and suspend evicted ones, publishes an immutable Snapshot, and only then
// acknowledges the batch's events. Readers (webhook, API, metrics) use
// snapshot() and never wait for the writer.
//
// Thread-safe.
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
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::broker {

// What the actuator must do to let an admitted gang run: unsuspend it (or
// remove the scheduling gate) with, per pod set, the node labels and
// tolerations of the flavors it was given.
struct ReleaseOrder {
  WorkloadKey key;
  std::string uid;
  std::shared_ptr<const workload::Workload> workload;
  Assignment assignment;
  // When the quota was reserved: recorded on the object (the
  // gangkeeper.io/admitted-flavors annotation) so that an adoption after a
  // restart keeps it.
  absl::Time admitted_at;
  struct PodSetPlacement {
    std::string name;
    std::map<std::string, std::string> node_selector;  // the flavors' nodeLabels
    std::vector<model::Toleration> tolerations;        // the flavors' tolerations
  };
  std::vector<PodSetPlacement> placements;  // one per pod set, in order
};

// Suspend (or re-gate) a whole gang: preempted, or its queue is drained.
struct SuspendOrder {
  WorkloadKey key;
  std::string uid;
  std::shared_ptr<const workload::Workload> workload;
  std::string reason;   // InClusterQueue, InCohortReclamation, ..., Stopped
  std::string message;  // for events and the audit log
  WorkloadKey preemptor;
};

// Carries out admissions and preemptions in the cluster (issue #6
// implements it on the Kubernetes API). Called on the broker thread; must
// not block: do the work elsewhere and report with Broker::ReleaseResult /
// Broker::GangStopped.
class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual void Release(const ReleaseOrder& order) = 0;
  virtual void Suspend(const SuspendOrder& order) = 0;
};

// Makes state changes durable (implemented by the store module: the journal
// in --data-dir, the journal in etcd). The broker acknowledges no event, and
// actuates nothing, before Append returned OK for the batch.
class StateSink {
 public:
  virtual ~StateSink() = default;
  // Durable, in order, when this returns OK: the position of the batch in
  // the sink (a journal record number; 0 for sinks without positions).
  [[nodiscard]] virtual absl::StatusOr<uint64_t> Append(const DurableBatch& batch) = 0;
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
  struct Item {
    WorkloadKey key;
    std::string local_queue;
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
  const std::map<model::ClusterQueueName, std::shared_ptr<const ClusterQueueView>>& cluster_queues() const {
    return queues_;
  }
  // Calls `f` for every tracked instance (unordered).
  void ForEachWorkload(const std::function<void(const WorkloadInfo&)>& f) const;
  // The same, shared (a snapshot writer keeps them without copying).
  void ForEachShared(const std::function<void(const std::shared_ptr<const WorkloadInfo>&)>& f) const;
  size_t workload_count() const { return workload_count_; }
  // Of those, how many are known only from admission reviews (DESIGN §2).
  size_t unconfirmed_count() const { return unconfirmed_count_; }
  // The most recently finished workloads (their last state, phase
  // kFinished), oldest first; bounded by BrokerOptions::keep_finished and
  // keep_finished_for. Never null.
  const std::vector<std::shared_ptr<const WorkloadInfo>>& finished() const { return *finished_; }

  static constexpr size_t kShards = 1024;

 private:
  friend class Broker;
  // The instances of one key: the newest, and the older ones (null in the
  // common case of one).
  struct Slot {
    std::shared_ptr<const WorkloadInfo> newest;
    std::shared_ptr<const std::vector<std::shared_ptr<const WorkloadInfo>>> older;
  };
  using Shard = absl::flat_hash_map<std::string, Slot>;  // by kind and ns/name
  uint64_t version_ = 0;
  absl::Time time_;
  uint64_t durable_position_ = 0;
  bool durable_ = true;
  std::vector<model::ClusterQueue> terminating_;
  std::shared_ptr<const model::PolicyOverlay> overlay_;
  std::shared_ptr<const model::PolicySet> policies_;
  std::vector<std::shared_ptr<const Shard>> shards_;
  std::map<model::ClusterQueueName, std::shared_ptr<const ClusterQueueView>> queues_;
  size_t workload_count_ = 0;
  size_t unconfirmed_count_ = 0;
  std::shared_ptr<const std::vector<std::shared_ptr<const WorkloadInfo>>> finished_ =
      std::make_shared<const std::vector<std::shared_ptr<const WorkloadInfo>>>();
};

struct BrokerOptions {
  // time_budget defaults to 50 ms here: acknowledgements wait for the batch.
  SchedulerOptions scheduler{.time_budget = absl::Milliseconds(50)};
  // How long a registering caller waits for its event to be applied and
  // made durable before it gets Unavailable.
  absl::Duration ack_timeout = absl::Seconds(5);
  // Events taken per batch at most.
  size_t max_batch = 4096;
  // Period of clock ticks (a scheduling pass even without events).
  absl::Duration tick = absl::Seconds(1);
  // Finished workloads kept for Snapshot::finished() (the API's
  // state=finished): at most this many, none older than keep_finished_for.
  size_t keep_finished = 1000;
  absl::Duration keep_finished_for = absl::Hours(1);
  // Called on the broker's thread once an admission is durable, with how
  // long the gang waited since it was created or last requeued (Kueue's
  // admission wait time); may be empty. Must not block.
  std::function<void(const model::ClusterQueueName& cluster_queue, const std::string& priority_class,
                     absl::Duration waited)>
      on_admitted;
};

// A change that reached this replica through the replicated store (a
// replica's webhook wrote it to etcd): applied like the calls of
// WorkloadRegistry, without waiting, in the order submitted. `revision`
// (increasing) is its place in the store: each batch hands the sink the
// highest one applied so far (DurableBatch::intake_revision), so the store
// records how far the intake is consumed in the same transaction as the
// changes, and a new leader applies exactly the events after it.
struct IntakeEvent {
  enum class Type { kRegister, kUpdate, kRemove, kFinish, kPolicies, kReview };
  Type type = Type::kRegister;
  workload::Workload workload;  // kRegister, kUpdate
  WorkloadKey key;              // kRemove, kFinish
  std::string uid;              // kRemove, kFinish: only that object ("" = any)
  // kPolicies: the new set, what the API changed over the files, who, what.
  // kReview: `what` is an admission review's audit event (encoded by the
  // audit module), `actor` who sent the review; recorded as a
  // StateChange::kReviewed in the journal, nothing else changes.
  std::shared_ptr<const model::PolicySet> policies;
  std::shared_ptr<const model::PolicyOverlay> overlay;
  std::string actor, what;
  int64_t revision = 0;
};

// What a replica does (etcd store, DESIGN §9): a leader schedules, makes
// its changes durable in its sink and actuates; a follower only shows the
// state the leader made durable (Follow), and refuses changes.
enum class Role { kLeader, kFollower };

struct BrokerStats {
  uint64_t batches = 0;
  uint64_t events = 0;
  uint64_t admitted = 0;
  uint64_t preempted = 0;
  uint64_t sink_failures = 0;
  uint64_t queue_depth = 0;
};

// Counters by ClusterQueue for metrics, with Kueue's label sets: labels are
// ClusterQueues, priority classes and reasons, never workload names.
struct BrokerCounters {
  // (cluster_queue, priority_class)
  std::map<std::pair<std::string, std::string>, uint64_t> admitted;
  std::map<std::pair<std::string, std::string>, uint64_t> finished;
  // (cluster_queue, reason, underlying_cause, priority_class)
  std::map<std::vector<std::string>, uint64_t> evicted;
  // (preempting_cluster_queue, reason)
  std::map<std::pair<std::string, std::string>, uint64_t> preempted;
};

class Broker final : public WorkloadRegistry {
 public:
  // `actuator` and `sink` must outlive the broker; either may be null
  // (no actuation / nothing made durable). `clock` stamps events.
  // `recovered` (may be null) is the durable state to start from (the
  // journal's recovery; its workloads are moved out): they are restored as
  // they were, gangs
  // whose release or suspension was not confirmed are released or suspended
  // again when the broker starts (both are idempotent), and then `policies`
  // replace the recorded ones the way SetPolicies does.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Broker>> Create(
      std::shared_ptr<const model::PolicySet> policies, BrokerOptions options, Actuator* actuator,
      StateSink* sink, const base::Clock* clock, DurableState* recovered = nullptr);
  ~Broker() override;  // stops the thread
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Starts the writer thread. Events sent before Start wait in the queue.
  void Start();
  // Applies what is queued, then stops the thread. Idempotent.
  void Stop();

  // --- WorkloadRegistry (the webhook): each waits until applied and durable.
  absl::Status Register(const workload::Workload& w, const std::string& cluster_queue) override;
  absl::Status Update(const workload::Workload& w) override;
  absl::Status Remove(const WorkloadKey& key, const std::string& uid) override;
  absl::Status Finish(const WorkloadKey& key, const std::string& uid) override;
  std::optional<WorkloadRecord> Find(const WorkloadKey& key) const override;
  int64_t PendingIn(const std::string& cluster_queue) const override;
  std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const override;
  size_t UnconfirmedCount() const override;

  // --- The reconciler: what the cluster says (each waits until applied).
  // The object `uid` is gone / has ended; nothing happens to other objects
  // under the same key. An empty uid matches every instance.
  absl::Status ObjectGone(const WorkloadKey& key, const std::string& uid);
  absl::Status ObjectFinished(const WorkloadKey& key, const std::string& uid);
  // A workload found running (see Scheduler::Adopt), with its flavors and
  // admission time as the object records them (gangkeeper.io/admitted-flavors).
  absl::Status Adopt(const workload::Workload& w, std::map<std::string, std::map<std::string, std::string>> flavors,
                     std::optional<absl::Time> admitted_at = std::nullopt);

  // --- Replication (several replicas on etcd). A broker made by Create is a
  // leader with the sink and actuator it was given.
  // Becomes a follower showing `state` (a leader's durable state): the
  // scheduler is rebuilt from it, nothing is scheduled, made durable or
  // actuated, and direct changes are refused. Called again with newer
  // states as the leader's records arrive. Waits until applied.
  [[nodiscard]] absl::Status Follow(DurableState state);
  // Becomes the leader from `state` (read after its term began): `sink`
  // and `actuator` (may be null) take over, releases and suspensions not
  // confirmed are sent again, and `policies` (the files with the API's
  // overlay) replace the recorded ones when they differ, as in Create.
  // Waits until applied.
  [[nodiscard]] absl::Status Lead(DurableState state, std::shared_ptr<const model::PolicySet> policies,
                                  StateSink* sink, Actuator* actuator);
  Role role() const;
  // Queues an intake event (does not wait). Ignored by a follower.
  void Submit(IntakeEvent e);

  // A running gang has members held again (a pod group's replacement pod,
  // gated by the webhook): the actuator is asked to release it again, which
  // lets go of those and leaves the rest as they are. No state changes.
  void EnsureReleased(const WorkloadKey& key);

  // Replaces the policies; waits until applied. InvalidArgument when they
  // cannot form a quota tree (nothing changes).
  [[nodiscard]] absl::Status SetPolicies(std::shared_ptr<const model::PolicySet> policies);
  // The same for a change through the API: `overlay` (what the API changed
  // over the policy files) is made durable with the policies; `actor` and
  // `what` ("PUT ClusterQueue team-a") go into the audit event.
  [[nodiscard]] absl::Status SetPolicies(std::shared_ptr<const model::PolicySet> policies,
                                         std::shared_ptr<const model::PolicyOverlay> overlay,
                                         const std::string& actor, const std::string& what);
  // The actuator's answers (do not wait).
  // `detail` says what was sent (kept with the workload and in the audit).
  void ReleaseResult(const WorkloadKey& key, const std::string& uid, absl::Status result,
                     const std::string& detail = "");
  void GangStopped(const WorkloadKey& key, const std::string& uid, const std::string& detail = "");

  // The latest snapshot; never null.
  std::shared_ptr<const Snapshot> snapshot() const;
  // Waits until every event queued before the call is applied. For tests
  // and shutdown; false on timeout.
  bool Flush(absl::Duration timeout);
  BrokerStats stats() const;
  BrokerCounters counters() const;
  // Current policies (for the webhook's PolicyProvider).
  std::shared_ptr<const model::PolicySet> policies() const { return snapshot()->shared_policies(); }

  struct Impl;

 private:
  explicit Broker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::broker
