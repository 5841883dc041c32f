// gangkeeper broker: Broker::Impl, shared by broker.cc (the writer thread:
// events, durability before acknowledgement, actuation, role switches) and
// snapshots.cc (the published Snapshot: its lookups, Publish, counters).
// Private to src/broker. Thread-compatible unless a field says otherwise.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"

namespace gangkeeper::broker {

struct Waiter {
  absl::Notification done;
  absl::Status status;
};

struct Event {
  enum class Type {
    kAdd, kUpdate, kRemove, kFinish, kAdopt, kRerelease, kPolicies, kReview, kReleaseOk, kReleaseFailed, kStopped, kFlush,
    kFollow, kLead  // role switches: taken alone, never in a batch with others
  };
  Type type = Type::kFlush;
  workload::Workload workload;
  std::map<std::string, std::map<std::string, std::string>> flavors;  // kAdopt
  std::optional<absl::Time> admitted_at;                              // kAdopt
  WorkloadKey key;
  std::string uid;
  std::string message;
  std::shared_ptr<const model::PolicySet> policies;
  std::shared_ptr<const model::PolicyOverlay> overlay;  // kPolicies from the API
  std::string actor;                                    // kPolicies from the API
  std::shared_ptr<Waiter> waiter;  // null: nobody waits
  int64_t intake_revision = 0;     // an intake event's place in the store (Submit)
  // kFollow, kLead: the state to start from; kLead: the new sink and actuator.
  std::shared_ptr<DurableState> state;
  StateSink* sink = nullptr;
  Actuator* actuator = nullptr;
};

inline bool IsRoleSwitch(const Event& e) { return e.type == Event::Type::kFollow || e.type == Event::Type::kLead; }

// Events that change the state (a follower refuses them).
inline bool IsChange(const Event& e) { return e.type != Event::Type::kFlush && !IsRoleSwitch(e); }

struct Broker::Impl {
  BrokerOptions options;
  Actuator* actuator = nullptr;
  StateSink* sink = nullptr;
  const base::Clock* clock = nullptr;
  std::unique_ptr<Scheduler> scheduler;  // the writer thread's alone

  mutable absl::Mutex mu;
  std::deque<Event> queue ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool started ABSL_GUARDED_BY(mu) = false;
  bool more_work ABSL_GUARDED_BY(mu) = false;  // Schedule() stopped at its time budget
  std::thread thread;

  std::atomic<std::shared_ptr<const Snapshot>> current;
  // Changes not yet durable (the sink failed): retried before anything new
  // is acknowledged or actuated.
  std::vector<StateChange> unsynced;
  // The highest intake revision applied, and the one the sink last took.
  int64_t intake_applied = 0;
  int64_t intake_durable = 0;
  std::atomic<Role> role{Role::kLeader};
  uint64_t durable_position = 0;  // the sink's position after the last durable batch
  std::shared_ptr<const model::PolicyOverlay> overlay;  // writer thread
  // Who changed the policies and how, for the batch's kPoliciesChanged
  // changes, in order (writer thread).
  std::deque<std::pair<std::string, std::string>> policy_notes;
  // Admission reviews to record with the batch (kReview).
  std::vector<StateChange> reviews;
  // After a restore: releases and suspensions to send again (writer thread).
  std::vector<StateChange> startup;

  // Snapshot bookkeeping (writer thread only).
  static constexpr int64_t kSmallQueue = 128;
  static constexpr absl::Duration kOrderRefresh = absl::Seconds(1);
  base::Stopwatch since_start;
  std::map<model::ClusterQueueName, std::string> tree_of;
  std::map<std::string, std::vector<model::ClusterQueueName>> tree_members;
  std::set<model::ClusterQueueName> stale_orders;  // pending order older than the queue
  std::map<model::ClusterQueueName, int64_t> order_built_ms;

  mutable absl::Mutex stats_mu;
  BrokerStats stats ABSL_GUARDED_BY(stats_mu);
  BrokerCounters counters ABSL_GUARDED_BY(stats_mu);

  std::string PriorityClassOf(const WorkloadKey& key) const;

  // When each requeued gang went back to waiting (writer thread).
  std::map<WorkloadKey, absl::Time> requeued_at;
  // The most recently finished workloads, oldest first (writer thread).
  std::deque<std::shared_ptr<const WorkloadInfo>> finished;

  // Counts what the durable changes did, by ClusterQueue.
  void Count(const std::vector<StateChange>& changes);

  absl::Status Send(Event e, bool wait, absl::Duration timeout = absl::ZeroDuration());

  absl::Status Apply(Event& e, absl::Time now);

  ReleaseOrder MakeRelease(const StateChange& c) const;

  // Without an actuator the broker gives the answer itself, as an event.
  void AnswerSelf(Event::Type type, const StateChange& c);

  // After the changes are durable: tell the cluster. Without an actuator
  // (no cluster to talk to) a release is done at once and an evicted gang
  // is stopped at once.
  void Actuate(const std::vector<StateChange>& changes);

  std::shared_ptr<const PendingOrder> BuildOrder(const model::ClusterQueueName& cq) const;

  // The batch the sink makes durable: the changes, the state after them of
  // every workload they name, and the policies when they changed.
  DurableBatch MakeDurableBatch(const std::vector<StateChange>& changes) const;

  void Publish(absl::Time now);

  void Run();

  void ProcessBatch(std::vector<Event>& batch);

  // Follow or Lead: the scheduler is rebuilt from the event's state and the
  // snapshot is published whole. A new leader then runs its first cycle at
  // once and sends again what was sent but not confirmed.
  void SwitchRole(Event& e);
};

}  // namespace gangkeeper::broker
