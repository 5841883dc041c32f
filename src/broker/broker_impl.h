// gangkeeper broker: Broker::Impl, shared by broker.cc (the writer thread:
// events, durability before acknowledgement, actuation) and
// snapshots.cc (the published Snapshot: its lookups, Publish).
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

// Whoever waits for an event's answer: a thread (SubmitAndWait, Flush:
// `done` and `status`) or a callback (SubmitAsync: `ack`).
struct Waiter {
  absl::Notification done;
  absl::Status status;
  EventQueue::Ack ack;
  std::atomic<bool> answered{false};

  // Answers once, from any thread: later calls do nothing (the timeout
  // and the broker may race). The callback runs on the calling thread.
  void Answer(absl::Status s) {
    if (answered.exchange(true)) return;
    if (ack) {
      EventQueue::Ack call = std::move(ack);
      call(std::move(s));
      return;
    }
    status = std::move(s);
    done.Notify();
  }
};

// Answers SubmitAsync callbacks whose timeout passed before the broker's
// answer (Unavailable), on a thread of its own, started with the first
// one. Thread-safe.
class AckDeadlines {
 public:
  AckDeadlines() = default;
  ~AckDeadlines() { Stop(); }
  AckDeadlines(const AckDeadlines&) = delete;
  AckDeadlines& operator=(const AckDeadlines&) = delete;

  // `waiter` is answered with Unavailable `timeout` from now unless it was
  // answered before.
  void Watch(const std::shared_ptr<Waiter>& waiter, absl::Duration timeout);
  // Joins the thread; callbacks still watched are left to their owner.
  void Stop();

 private:
  struct Due {
    absl::Duration at;  // on `clock_`
    absl::Duration timeout;
    std::weak_ptr<Waiter> waiter;
    bool operator>(const Due& o) const { return at > o.at; }
  };
  void Run();

  const base::Stopwatch clock_;
  absl::Mutex mu_;
  std::vector<Due> heap_ ABSL_GUARDED_BY(mu_);  // a min-heap on `at`
  bool wake_ ABSL_GUARDED_BY(mu_) = false;     // an earlier deadline came in
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started under mu_
};

// An event in the queue, with whoever waits for its answer (null: nobody).
struct Queued {
  Event event;
  std::shared_ptr<Waiter> waiter;
};

struct RoundBatch;  // broker.cc

// Events that change the state (a follower's ReadOnlyView refuses them).
inline bool IsChange(const Event& e) { return e.type != Event::Type::kFlush; }

// The snapshot a broker restored from `state` would publish (its workloads
// are moved out; `fallback` when it records no policies), built on the
// calling thread with no thread started: a follower's (roles.h).
absl::StatusOr<std::shared_ptr<const Snapshot>> ReadOnlySnapshot(DurableState* state,
                                                                 std::shared_ptr<const model::PolicySet> fallback,
                                                                 const BrokerOptions& options,
                                                                 const base::Clock* clock);

struct Broker::Impl {
  BrokerOptions options;
  Actuator* actuator = nullptr;
  StateSink* sink = nullptr;
  const base::Clock* clock = nullptr;
  std::unique_ptr<Scheduler> scheduler;  // the writer thread's alone

  mutable absl::Mutex mu;
  std::deque<Queued> queue ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool started ABSL_GUARDED_BY(mu) = false;
  bool more_work ABSL_GUARDED_BY(mu) = false;  // Schedule() stopped at its time budget
  std::thread thread;
  // The timeouts of SubmitAsync callbacks.
  AckDeadlines deadlines;

  std::atomic<std::shared_ptr<const Snapshot>> current;
  // Changes not yet durable (the sink failed): retried before anything new
  // is acknowledged or actuated.
  std::vector<StateChange> unsynced;
  // The highest intake revision applied, and the one the sink last took.
  int64_t intake_applied = 0;
  int64_t intake_durable = 0;
  uint64_t durable_position = 0;  // the sink's position after the last durable batch
  std::shared_ptr<const model::PolicyOverlay> overlay;  // writer thread
  // Who changed the policies and how, for the batch's kPoliciesChanged
  // changes, in order (writer thread).
  std::deque<std::pair<std::string, std::string>> policy_notes;
  // The highest Event::policies_version applied (0: none yet).
  uint64_t policies_version = 0;
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
  // Pending reasons newer only in their numbers (defer_reason_numbers) are
  // published at most this often, and at once for a Flush (whose caller
  // reads what it submitted before).
  static constexpr absl::Duration kReasonRefresh = absl::Seconds(1);
  int64_t reasons_refreshed_ms = 0;

  // What the thread did so far (writer thread; published with each
  // snapshot). queue_depth is taken under `mu` with each batch.
  BrokerStats stats;
  // The most recently finished workloads, oldest first (writer thread).
  std::deque<std::shared_ptr<const WorkloadInfo>> finished;

  // Queues `e`; with `wait`, waits for its answer (see EventQueue).
  absl::Status Send(Event e, bool wait, absl::Duration timeout = absl::ZeroDuration());
  // Queues `e`; `done` gets its answer (see EventQueue::SubmitAsync). On an
  // event loop's thread (base::LoopRound) the event is queued when the
  // loop's round ends, with the others of the round.
  void SendAsync(Event e, EventQueue::Ack done, absl::Duration timeout);
  // Queues a round's events (RoundBatch) with one lock.
  void QueueRound(RoundBatch* batch);
  // Queues the calling loop thread's open round for this broker now, so
  // that what it hands over next comes after it.
  void QueueOpenRound();

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

  // Before a publication: brings in the pending reasons' newer numbers
  // when kReasonRefresh passed since the last time, or for a Flush.
  void RefreshReasons(bool flush);
  void Publish(absl::Time now);
  // Publishes the scheduler's whole state, from an empty snapshot.
  void PublishFirst(absl::Time now);
  void PublishWorkloads(const std::vector<WorkloadKey>& keys, Snapshot* snap) const;

  void Run();

  void ProcessBatch(std::vector<Queued>& batch);
};

}  // namespace gangkeeper::broker
