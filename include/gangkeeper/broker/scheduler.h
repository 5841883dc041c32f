// gangkeeper broker: the deterministic core of the quota broker.
//
// Scheduler owns every tracked workload, the queues of every ClusterQueue
// and the quota tree, and decides admissions and preemptions with Kueue's
// semantics (KUEUE-SEMANTICS.md §3, DESIGN §2):
//   - events change its state: Add / Update / Remove / Finish a workload,
//     SetPolicies, ReleaseSucceeded / ReleaseFailed, Stopped (an evicted gang
//     is gone), Tick (time passes);
//   - Schedule() runs scheduling cycles to a fixed point: heads of the
//     queues -> flavor assignment -> fit / preempt / no fit -> ordering ->
//     re-check -> reserve. A gang gets all its quota in one step or none.
//     Unlike Kueue (one head per ClusterQueue per cycle), a cycle keeps
//     taking heads of a queue while they fit, in queue order;
//   - every state change is recorded as a StateChange, taken with
//     TakeChanges(): the Broker (broker.h) makes them durable, then turns
//     kAdmitted into a release and kEvicted into a suspension.
// It never reads a clock: every event carries its time, so a simulation or
// test replays exactly. Thread-compatible: the Broker's writer thread (or a
// test) is its only user.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/flavor_resource.h"
#include "gangkeeper/model/configuration.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::broker {

// Where a tracked workload is in its life.
enum class Phase : uint8_t {
  kPending,   // queued, holds no quota
  kReserved,  // quota reserved, release sent, not yet confirmed
  kRunning,   // released: the gang may run
  kEvicting,  // preempted or drained: suspension sent; quota held until Stopped
  kFinished,  // done; holds no quota
};
const char* PhaseName(Phase phase);
// The registry's coarser view: kReserved, kRunning and kEvicting hold quota
// and count as admitted.
WorkloadState StateOf(Phase phase);

// The flavors and quota one pod set was admitted with.
struct PodSetAssignment {
  std::string name;
  int64_t count = 0;
  std::map<model::ResourceName, model::FlavorName> flavors;
  std::map<model::ResourceName, quantity::Quantity> usage;  // total over the pod set
};

// A gang's admission: every pod set, and the quota it holds in total.
struct Assignment {
  model::ClusterQueueName cluster_queue;
  std::vector<PodSetAssignment> pod_sets;
  ResourceAmounts usage;
  // 0 when the gang fits in its ClusterQueue's nominal quota; otherwise the
  // height of the lowest cohort subtree that lends it what it borrows.
  int borrowing_level = 0;
};

// Why a pending workload is still pending, with the numbers.
struct PendingReason {
  enum class Code {
    kQueued,                  // not tried yet
    kWaitingForQuota,         // needs quota that others use now
    kExceedsMaxQuota,         // can never fit, even with the whole cohort idle
    kNoMatchingFlavor,        // no flavor of its ClusterQueue covers a resource / tolerates taints
    kWaitingForPreemption,    // victims chosen; waits for them to stop
    kPreemptionNoCandidates,  // would need preemption, but it may not preempt (preemptionPolicy: Never)
    kRequeueBackoff,          // evicted for a PodsReady timeout: waits out its backoff (waitForPodsReady)
    kDeactivated,             // evicted for PodsReady timeouts more than backoffLimitCount allows
    kBlockedByHead,           // StrictFIFO: waits behind the head of its ClusterQueue
    kStopped,                 // its ClusterQueue or LocalQueue is held (stopPolicy)
    kInactive,                // its LocalQueue or ClusterQueue does not exist / is disabled
    kNamespaceMismatch,       // the ClusterQueue does not select its namespace
    kIncompletePodGroup,      // a pod group still missing pods
    kReleaseFailed,           // the last release failed; retried
    kUnconfirmed,             // known only from a review: waits for the API server's stored object
  };
  Code code = Code::kQueued;
  // When its ClusterQueue offers several flavors for a resource group, the
  // scheduler appends why each flavor tried could not take the pod set
  // ("flavor spot has taint spot=true:NoSchedule ..."), in the order tried
  // (Kueue states each), to `message`, and keeps only their hash here (a
  // pending workload's reason should cost little at 100,000 of them; its
  // place here, not among the 16-byte aligned quantities, saves padding).
  size_t flavors_hash = 0;
  // The first blocker: which pod set, flavor and resource, and the numbers.
  std::string pod_set;
  model::FlavorName flavor;
  model::ResourceName resource;
  quantity::Quantity requested;     // what the gang needs of (flavor, resource)
  quantity::Quantity available;     // what its ClusterQueue can admit now
  quantity::Quantity max_capacity;  // what it could have with the cohort idle
  quantity::Quantity nominal;       // its ClusterQueue's nominal quota
  quantity::Quantity used;          // its ClusterQueue's usage
  int64_t used_by = 0;              // admitted workloads holding that usage
  std::optional<quantity::Quantity> borrowing_limit;
  // The reason as one sentence, e.g. "waiting for 2 nvidia.com/gpu in
  // team-a-gpu/nvidia-gpu: 4 of 4 used by 2 workloads; borrowing limit 0".
  std::string message;
};
const char* PendingReasonCodeName(PendingReason::Code code);

// A pod group's members: the pods seen (by name) and their pod sets merged
// by shape, which is what the scheduler places.
struct PodGroupState {
  std::vector<std::string> pods;
  std::vector<workload::PodSet> pod_sets;
};

// Everything known about one tracked workload.
struct WorkloadInfo {
  // (Fields are grouped by size: 100,000 of these are held, each in one
  // allocation with its shared_ptr control block, and 16 bytes more would
  // move it to the allocator's next size class, 128 bytes up. Counters are
  // 32 bits. broker_bench's BM_Memory100k measures the total.)
  WorkloadKey key;
  std::shared_ptr<const workload::Workload> workload;
  model::ClusterQueueName cluster_queue;  // empty when its LocalQueue has none
  std::string local_queue;
  Phase phase = Phase::kPending;
  bool can_preempt = true;  // false with preemptionPolicy: Never
  // waitForPodsReady (Kueue's PodsReady condition and requeueState).
  // ready_pods, pods_ready, was_ready and unready_since are in memory only
  // (a restored gang counts as ready); requeue_count, requeue_at, active
  // and pods_ready_timeout are durable (store/FORMAT.md §4): a restart, or
  // a new leader, keeps a gang's backoff and its deactivation.
  bool pods_ready = false;  // all admitted pods ready (Kueue's PodsReady=True)
  bool was_ready = false;   // was ready once since its admission: a drop waits recoveryTimeout
  // False once deactivated (Kueue's spec.active=false): pending, never
  // admitted, until its object is changed or re-created.
  bool active = true;
  // While kEvicting: evicted for a PodsReady timeout, so once stopped it
  // backs off, or is deactivated.
  bool pods_ready_timeout = false;
  int32_t priority = 0;
  int32_t admissions = 0;         // times admitted
  int32_t evictions = 0;          // times preempted or evicted
  int32_t pod_group_members = 0;  // pods of a pod group seen so far
  int32_t ready_pods = 0;         // ready pods, as its object last said (while it holds quota)
  int32_t requeue_count = 0;      // evictions for a PodsReady timeout that were requeued
  absl::Time created_at;          // first seen
  absl::Time queued_at;           // queue-order time (creation, or kept across preemption)
  absl::Time admitted_at;         // last reservation (kReserved onwards)
  absl::Time finished_at;         // kFinished: when its end was seen
  // While it holds quota and is not ready: since when (its admission, or
  // the drop below ready).
  absl::Time unready_since = absl::InfinitePast();
  absl::Time requeue_at = absl::InfinitePast();  // kRequeueBackoff: when it is queued again
  std::optional<Assignment> admission;           // set while it holds quota
  PendingReason reason;                          // meaningful while kPending
  std::string eviction_reason;                   // while kEvicting: why
  std::shared_ptr<const PodGroupState> pod_group;  // pod groups only
  // What the actuator did (or, with --kube none, would have done) for the
  // last release or stop, or why the last release failed.
  std::string actuation;
};

// One durable state change (what the StateSink records, and what the audit
// log and the actuator act on).
struct StateChange {
  enum class Type {
    kRegistered,      // a workload is tracked and pending
    kUpdated,         // a pending workload's pod sets changed
    kRemoved,         // the object was deleted; quota (if any) freed
    kAdmitted,        // quota reserved: release the gang with `assignment`
    kReleased,        // the release went through
    kReleaseFailed,   // the release failed: back to pending, quota freed
    kEvicted,         // preempted / drained: suspend the gang; quota held
    kRequeued,        // an evicted gang stopped: quota freed, pending again
    kFinished,        // completed; quota freed
    kPoliciesChanged, // the policy set was replaced
    // Legacy, never produced any more: an admission review some replica's
    // webhook denied, recorded in the state log before reviews got their
    // own audit stream (node/audit_stream.h). Kept so that journal records
    // written then still decode (state_codec); `message` holds the audit
    // event as the audit module encodes it, `actor` who sent the review.
    kReviewed,
  };
  Type type = Type::kRegistered;
  absl::Time time;
  WorkloadKey key;
  std::string uid;
  model::ClusterQueueName cluster_queue;
  std::shared_ptr<const workload::Workload> workload;  // kRegistered, kUpdated
  // kAdmitted, kEvicted, kReleased: the admission; kReleaseFailed,
  // kRequeued, kRemoved, kFinished: the quota freed (when it held any).
  std::optional<Assignment> assignment;
  // Who asked for it: the Kubernetes user for kRegistered / kUpdated (the
  // workload's submitted_by), else empty (gangkeeper itself); claimed when
  // it is only what an admission review says (Workload::submitter_claimed).
  std::string actor;
  bool actor_claimed = false;
  // About a workload known only from a review (Workload::unconfirmed):
  // tracked and journaled, but nothing was decided, so the audit log does
  // not show it; its confirmation is its kRegistered for the audit.
  bool unconfirmed = false;
  // kEvicted: "Preempted" / "InClusterQueue" ... and the message; kReleaseFailed: the error.
  std::string reason;
  std::string message;
  WorkloadKey preemptor;  // kEvicted by preemption
  // Which object of that name (two may share it while an old one's pods
  // stop). In memory only: the journal keeps the key, as before.
  std::string preemptor_uid;
};
const char* StateChangeTypeName(StateChange::Type type);

// Quota and usage of one ClusterQueue on one FlavorResource.
struct FlavorResourceStatus {
  quantity::Quantity nominal;
  std::optional<quantity::Quantity> borrowing_limit;
  std::optional<quantity::Quantity> lending_limit;
  quantity::Quantity usage;
  quantity::Quantity borrowed;   // max(0, usage - nominal)
  quantity::Quantity lent;       // nominal - usage lent to others, when any
  quantity::Quantity available;  // admissible now without preemption
};

struct ClusterQueueStatus {
  model::ClusterQueueName name;
  model::CohortName cohort;
  bool active = true;  // exists, not disabled, not held
  std::string inactive_reason;  // why not active ("" when it is)
  std::map<FlavorResource, FlavorResourceStatus> resources;
  int64_t pending = 0;
  // Of those, set aside until something changes in the cohort (Kueue's
  // inadmissible workloads; the rest are active).
  int64_t pending_inadmissible = 0;
  int64_t admitted = 0;  // holding quota (reserved, running, evicting)
  double weighted_share = 0;  // fair sharing DRS (0 when not borrowing)
};

// A cohort of the quota tree (a Cohort object or one named only by
// ClusterQueues), for Kueue's Cohort .status.
struct CohortStatus {
  model::CohortName name;
  model::CohortName parent;  // "" for a root
  // Fair sharing DRS of its subtree in its parent, like a ClusterQueue's:
  // 0 for a root and when not borrowing; INT64_MAX for weight 0 borrowing.
  double weighted_share = 0;
};

struct SchedulerOptions {
  // Kueue's fairSharing.enable for every cohort tree. A root Cohort labelled
  // gangkeeper.io/fair-sharing: "true" enables it for its tree alone.
  bool fair_sharing = false;
  // Kueue's behaviour: one head per ClusterQueue per cycle. Off by default:
  // a cycle admits as many workloads of a queue as fit, in order.
  bool one_head_per_cycle = false;
  // The anti-churn rule (DESIGN §2): a workload preempted once is not
  // preempted again until something changes in its cohort tree (an
  // arrival, update, deletion, completion, failed release, adoption,
  // backoff expiry or policy change). The quota a preemptor holds while its
  // victims stop already keeps them from coming back in its way; this rule
  // is the guarantee behind it. Off only in tests that check the holds
  // alone.
  bool anti_churn_guard = true;
  // Upper bound on cycles per Schedule() call (each admits or preempts
  // something, or the fixed point is reached).
  int max_cycles = 1'000'000;
  // Schedule() returns (with ScheduleStats::more) once it has run this long,
  // between rounds, so that a storm of retries cannot hold up the broker;
  // the next call goes on. Only how the work is split depends on it.
  absl::Duration time_budget = absl::InfiniteDuration();
  // A pending workload tried again whose reason is the same but for its
  // live numbers (available, used, used by) keeps the reason it has until
  // RefreshReasons(), which the owner calls now and then (the Broker at
  // most every second, and on a Flush): every change in a tree's usage
  // would otherwise re-describe, copy and re-publish every pending head
  // there (a cost per event that grows with the pending workloads). Off:
  // the numbers are current after every Schedule() (what tests of the
  // numbers read).
  bool defer_reason_numbers = false;
  // waitForPodsReady when the policies' Kueue Configuration does not
  // enable it (serve --wait-for-pods-ready); the Configuration's wins.
  model::WaitForPodsReady wait_for_pods_ready;
};

struct ScheduleStats {
  int64_t cycles = 0;
  int64_t admitted = 0;
  int64_t preempted = 0;  // victims chosen
  int64_t nominated = 0;   // scheduling decisions taken
  int64_t equivalent = 0;  // set aside without trying: same shape as one that did not fit
  // Preemption candidates spared because they were preempted once already
  // and nothing changed in their tree since (the anti-churn rule).
  int64_t guarded = 0;
  // Nominations that fit only with fewer pods (partial admission).
  int64_t partial = 0;
  // Borrowers held back a round for a lender's own demand (cycle.cc,
  // ReclaimableBorrower).
  int64_t deferred_borrowers = 0;
  bool more = false;       // stopped at the time budget with work left
};

class Scheduler {
 public:
  // InvalidArgument when the policies cannot form a quota tree.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      std::shared_ptr<const model::PolicySet> policies, SchedulerOptions options = {});
  // Rebuilds a scheduler from durable state (durable.h): the policies and
  // terminating ClusterQueues, then every workload with its phase, queue
  // time, priority and admission. Admitted gangs hold their quota again
  // (beyond it when the quota was lowered, as after Adopt); pending ones are
  // queued in their original order. An image held only by `workloads` is
  // taken over, not copied. Records no StateChange. A workload whose
  // quota cannot be restored (its ClusterQueue and flavors are gone) is
  // queued as pending, with the reason in `actuation`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Scheduler>> Restore(
      std::shared_ptr<const model::PolicySet> policies, const std::vector<model::ClusterQueue>& terminating,
      std::vector<std::shared_ptr<const WorkloadInfo>> workloads, SchedulerOptions options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // --- Events. Each validates its input, changes nothing on error, and
  // records its StateChanges. ---

  // Tracks a new pending workload in its LocalQueue (workload.queue_name).
  // Its queue-order time is the object's creationTimestamp when known
  // (Kueue's order), else `now`. The same instance (key and uid) again is a
  // no-op; a new pod of a known pod group adds a member. Another uid under
  // a tracked key is a new object: a pending older instance is replaced
  // (that object is gone: names are unique per kind), one that holds quota
  // keeps it until its own end is seen, and the new one is queued beside
  // it. InvalidArgument for a workload without namespace or name.
  // An unconfirmed workload (known only from a review, DESIGN §2) is
  // tracked but not queued, and replaces nothing; the same instance added
  // again confirmed (read from the API server) is confirmed: it takes the
  // stored object's pod sets, priority, queue and creationTimestamp, is
  // queued, and replaces what else holds no quota under its key.
  [[nodiscard]] absl::Status Add(const workload::Workload& w, absl::Time now);
  // New pod sets or priority for the pending instance w.uid (a pod group:
  // its queue and priority). FailedPrecondition when it holds quota,
  // NotFound when that instance is not tracked. A confirmed `w` for an
  // unconfirmed instance confirms it (as Add); an unconfirmed `w` for a
  // confirmed instance changes nothing (a review's word against the API
  // server's).
  [[nodiscard]] absl::Status Update(const workload::Workload& w, absl::Time now);
  // The object `uid` under `key` is gone (uid "": every instance of the
  // key). OK when unknown.
  [[nodiscard]] absl::Status Remove(const WorkloadKey& key, const std::string& uid, absl::Time now);
  // A workload found running in the cluster: released before gangkeeper
  // restarted, or unsuspended by someone else. It is tracked as admitted
  // (a kAdmitted change, so the actuator confirms the release, a no-op) with
  // `flavors` (pod set -> resource -> flavor, e.g. from the
  // gangkeeper.io/admitted-flavors annotation) where they fit its
  // ClusterQueue's resource groups, else the first flavor of the group that
  // covers each resource. `admitted_at` (from the same annotation) is kept
  // as its admission time when set, so that preemption picks the same
  // victims after a restart as before it (newest admitted first). Its quota is counted even beyond the quota (the
  // pods run regardless); like a lowered quota, nothing new is admitted
  // there until usage falls back. OK (no change) when it already holds
  // quota; FailedPrecondition when it has no usable ClusterQueue (it stays
  // pending). A pod set named in `running_counts` runs (and is charged
  // for) that many pods, fewer than its count: a Job released partially
  // (its admission is then partial, as when the broker admitted it).
  [[nodiscard]] absl::Status Adopt(const workload::Workload& w,
                                   const std::map<std::string, std::map<std::string, std::string>>& flavors,
                                   std::optional<absl::Time> admitted_at, absl::Time now,
                                   const std::map<std::string, int64_t>& running_counts = {});
  // The object `uid` under `key` completed (uid "": every instance). OK
  // when unknown. Its last WorkloadInfo (phase kFinished) is kept for
  // TakeFinished.
  [[nodiscard]] absl::Status Finish(const WorkloadKey& key, const std::string& uid, absl::Time now);
  // Replaces the policies. Admitted work keeps its quota even when quota is
  // lowered below usage or its ClusterQueue is deleted; pending work moves
  // with its LocalQueue. InvalidArgument (and nothing changes) when the
  // policies cannot form a quota tree.
  [[nodiscard]] absl::Status SetPolicies(std::shared_ptr<const model::PolicySet> policies,
                                         absl::Time now);
  // The actuator's answers. Stale answers (unknown key, other uid, other
  // phase) are ignored and return OK.
  [[nodiscard]] absl::Status ReleaseSucceeded(const WorkloadKey& key, const std::string& uid,
                                              absl::Time now, const std::string& detail = "");
  [[nodiscard]] absl::Status ReleaseFailed(const WorkloadKey& key, const std::string& uid,
                                           const std::string& why, absl::Time now);
  // An evicted gang's pods are gone: its quota is freed and it is pending
  // again with its original queue position.
  [[nodiscard]] absl::Status Stopped(const WorkloadKey& key, const std::string& uid,
                                     absl::Time now, const std::string& detail = "");

  // How many pods of the instance `uid` under `key` are ready (its
  // object's word, workload/observe.h ReadyPods; uid "" for a pod group:
  // the sum over its pods). Only a gang holding quota listens: once all its
  // admitted pods are ready it is ready (PodsReady); dropping below that
  // starts the recovery clock. OK when unknown or not admitted.
  [[nodiscard]] absl::Status PodsReady(const WorkloadKey& key, const std::string& uid, int64_t ready,
                                       absl::Time now);

  // The waitForPodsReady in effect: the policies' Kueue Configuration's
  // when it enables it, else SchedulerOptions::wait_for_pods_ready.
  const model::WaitForPodsReady& wait_for_pods_ready() const;

  // Runs scheduling cycles until nothing more can be admitted or preempted.
  // With waitForPodsReady, first evicts the gangs not ready in time, and
  // with blockAdmission admits nothing while an admitted gang is not ready.
  ScheduleStats Schedule(absl::Time now);

  // The state changes since the last call, in order.
  std::vector<StateChange> TakeChanges();
  // The workloads finished since the last call (their last state).
  std::vector<std::shared_ptr<const WorkloadInfo>> TakeFinished();

  // With defer_reason_numbers: how many pending workloads have newer
  // numbers in their reason than the one Find() shows, and brings them in
  // (each is then dirty, see TakeDirty); returns how many changed.
  size_t stale_reasons() const;
  size_t RefreshReasons();

  // The workloads and ClusterQueues whose state (phase, reason, queue
  // membership, usage) changed since the last call; `all_queues` when the
  // policies changed. For incremental snapshots.
  void TakeDirty(std::vector<WorkloadKey>* workloads, std::vector<model::ClusterQueueName>* queues,
                 bool* all_queues);

  // --- Reads (the Broker copies these into its snapshots). ---
  const model::PolicySet& policies() const;
  std::shared_ptr<const model::PolicySet> shared_policies() const;
  // The newest instance of `key`, or nullptr.
  const WorkloadInfo* Find(const WorkloadKey& key) const;
  const WorkloadInfo* FindInstance(const InstanceKey& instance) const;
  // Every instance of `key`, oldest first (usually one), shared: the
  // Scheduler copies an image before its next change (the Broker's
  // snapshots hold these).
  std::vector<std::shared_ptr<const WorkloadInfo>> Instances(const WorkloadKey& key) const;
  std::shared_ptr<const WorkloadInfo> ShareInstance(const InstanceKey& instance) const;
  // Every tracked instance (finished ones are forgotten after Finish).
  std::vector<const WorkloadInfo*> Workloads() const;
  size_t size() const;
  // Of those, how many are known only from reviews (Workload::unconfirmed).
  size_t unconfirmed() const;
  // Pending workloads of `cq`, in queue order (position 1 first).
  std::vector<const WorkloadInfo*> PendingInQueueOrder(const model::ClusterQueueName& cq) const;
  // The same, shared (as Instances).
  std::vector<std::shared_ptr<const WorkloadInfo>> SharePendingInQueueOrder(const model::ClusterQueueName& cq) const;
  // Every ClusterQueue of the policies, plus deleted ones that still hold quota.
  std::vector<ClusterQueueStatus> ClusterQueues() const;
  // The definitions of deleted ClusterQueues that still hold quota.
  std::vector<model::ClusterQueue> Terminating() const;
  std::optional<ClusterQueueStatus> ClusterQueue(const model::ClusterQueueName& cq) const;
  // Every cohort of the quota tree, by name.
  std::vector<CohortStatus> Cohorts() const;
  // The root of `cq`'s cohort tree ("" for a ClusterQueue without a cohort,
  // or unknown): usage anywhere in a tree changes what all its queues can
  // admit.
  std::string TreeOf(const model::ClusterQueueName& cq) const;

  // Checks the invariants: usage within what the cohort arithmetic allows
  // for every admission made; no gang partly reserved; recorded usage equals
  // the sum of admitted workloads; no workload both pending and admitted.
  // Internal error naming the first violation.
  [[nodiscard]] absl::Status CheckInvariants() const;

  // The anti-churn counters: how many candidates the rule spared in all.
  int64_t guarded_total() const;

  // The implementation's state (src/broker/scheduler_state.h).
  struct State;

 private:
  explicit Scheduler(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gangkeeper::broker
