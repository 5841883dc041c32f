// gangkeeper broker: Broker (see broker.h) — the writer thread, its event
// queue, durability before acknowledgement and actuation (the snapshots it
// publishes: snapshots.cc), and the read-only snapshots of a follower.
#include "gangkeeper/broker/broker.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/base/loop_round.h"
#include "gangkeeper/model/policy_digest.h"
#include "src/broker/broker_impl.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

// The broker keeps only what it may read again: the annotations that are
// Kueue's or its own (not kubectl's last-applied configuration, ...), no
// labels (extraction has taken the queue and priority class from them; the
// broker, the actuator and the Kueue objects read none) and no pod set
// limits (the webhook's requests == limits check used them). Each would
// cost memory for every tracked workload (issue #26: 100,000 of them).
workload::Workload Lean(workload::Workload w) {
  workload::Workload out = std::move(w);
  for (auto it = out.annotations.begin(); it != out.annotations.end();) {
    if (workload::IsKeptAnnotation(it->first)) {
      ++it;
    } else {
      it = out.annotations.erase(it);
    }
  }
  out.labels.clear();
  for (workload::PodSet& ps : out.pod_sets) ps.limits.clear();
  return out;
}

// A scheduler rebuilt from a durable state (its workloads are moved out);
// `startup` gets the releases and suspensions that were sent but not
// confirmed, to send again (both are idempotent).
absl::StatusOr<std::unique_ptr<Scheduler>> RestoreFrom(DurableState* state,
                                                       std::shared_ptr<const model::PolicySet> fallback,
                                                       const SchedulerOptions& options,
                                                       std::vector<StateChange>* startup) {
  std::vector<std::shared_ptr<const WorkloadInfo>> workloads;
  workloads.reserve(state->workloads.size());
  for (auto& [key, info] : state->workloads) workloads.push_back(std::move(info));
  state->workloads.clear();
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Restore(
      state->policies != nullptr ? state->policies : std::move(fallback), state->terminating, std::move(workloads),
      options);
  if (!scheduler.ok()) {
    return absl::Status(scheduler.status().code(),
                        absl::StrCat("restoring the recorded state: ", scheduler.status().message()));
  }
  for (const WorkloadInfo* info : (*scheduler)->Workloads()) {
    if (info->phase != Phase::kReserved && info->phase != Phase::kEvicting) continue;
    StateChange c;
    c.type = info->phase == Phase::kReserved ? StateChange::Type::kAdmitted : StateChange::Type::kEvicted;
    c.key = info->key;
    c.uid = info->workload->uid;
    c.cluster_queue = info->admission.has_value() ? info->admission->cluster_queue : info->cluster_queue;
    c.assignment = info->admission;
    c.reason = "Restarted";
    c.message = info->eviction_reason;
    startup->push_back(std::move(c));
  }
  return scheduler;
}

}  // namespace

// Events a loop thread handed to one broker during the current round of
// its event loop (base::LoopRound), queued together when the round ends:
// one lock, and at most one wake of the writer thread, for all of them.
// The function deferred to the round's end owns the batch; a batch never
// queued (its loop was destroyed first) answers its waiters Unavailable.
struct RoundBatch {
  struct Item {
    Queued queued;
    absl::Duration timeout;
  };
  explicit RoundBatch(Broker::Impl* i) : impl(i) {}
  RoundBatch(const RoundBatch&) = delete;
  RoundBatch& operator=(const RoundBatch&) = delete;
  ~RoundBatch() {
    for (Item& item : items) {
      item.queued.waiter->Answer(absl::UnavailableError("the server stopped before this reached the broker; retry"));
    }
  }

  Broker::Impl* const impl;
  std::vector<Item> items;
};

namespace {

// The calling thread's open batches, one per broker (weak: the deferred
// function owns each).
std::vector<std::weak_ptr<RoundBatch>>& OpenBatches() {
  thread_local std::vector<std::weak_ptr<RoundBatch>> open;
  return open;
}

// The calling thread's open batch for `impl` (null: none); with `take`, also
// out of the open list. Batches whose round ended are dropped on the way.
std::shared_ptr<RoundBatch> OpenBatchOf(const Broker::Impl* impl, bool take) {
  std::vector<std::weak_ptr<RoundBatch>>& open = OpenBatches();
  std::shared_ptr<RoundBatch> found;
  for (auto it = open.begin(); it != open.end();) {
    std::shared_ptr<RoundBatch> b = it->lock();
    const bool mine = b != nullptr && b->impl == impl;
    const bool drop = b == nullptr || (mine && take);
    if (mine) found = std::move(b);
    if (drop) {
      it = open.erase(it);
    } else {
      ++it;
    }
  }
  return found;
}

}  // namespace

void Broker::Impl::QueueRound(RoundBatch* batch) {
  if (batch->items.empty()) return;
  std::vector<RoundBatch::Item> items = std::move(batch->items);
  batch->items.clear();
  bool stopped = false;
  {
    absl::MutexLock lock(&mu);
    stopped = stopping;
    if (!stopped) {
      for (RoundBatch::Item& item : items) queue.push_back(Queued{std::move(item.queued.event), item.queued.waiter});
    }
  }
  for (RoundBatch::Item& item : items) {
    if (stopped) {
      item.queued.waiter->Answer(absl::UnavailableError("the broker is shutting down; retry"));
    } else {
      deadlines.Watch(item.queued.waiter, item.timeout);
    }
  }
}

void Broker::Impl::QueueOpenRound() {
  if (base::LoopRound::Current() == nullptr) return;
  if (std::shared_ptr<RoundBatch> b = OpenBatchOf(this, /*take=*/true)) QueueRound(b.get());
}

absl::Status Broker::Impl::Send(Event e, bool wait, absl::Duration timeout) {
  if (timeout == absl::ZeroDuration()) timeout = options.ack_timeout;
  if (e.type == Event::Type::kAdd || e.type == Event::Type::kUpdate) e.workload = Lean(std::move(e.workload));
  std::shared_ptr<Waiter> waiter = wait ? std::make_shared<Waiter>() : nullptr;
  QueueOpenRound();  // what this thread handed over before goes first
  {
    absl::MutexLock lock(&mu);
    if (stopping) return absl::UnavailableError("the broker is shutting down; retry");
    queue.push_back(Queued{std::move(e), waiter});
  }
  if (!wait) return absl::OkStatus();
  if (!waiter->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::UnavailableError(
        absl::StrCat("the broker did not confirm within ", absl::FormatDuration(timeout), "; retry"));
  }
  return waiter->status;
}

void Broker::Impl::SendAsync(Event e, EventQueue::Ack done, absl::Duration timeout) {
  if (timeout == absl::ZeroDuration()) timeout = options.ack_timeout;
  if (e.type == Event::Type::kAdd || e.type == Event::Type::kUpdate) e.workload = Lean(std::move(e.workload));
  auto waiter = std::make_shared<Waiter>();
  waiter->ack = std::move(done);
  if (base::LoopRound* round = base::LoopRound::Current()) {
    // On an event loop: queued with the rest of this round's (RoundBatch).
    std::shared_ptr<RoundBatch> batch = OpenBatchOf(this, /*take=*/false);
    if (batch == nullptr) {
      batch = std::make_shared<RoundBatch>(this);
      OpenBatches().push_back(batch);
      round->AtEnd([this, batch]() mutable {
        (void)OpenBatchOf(this, /*take=*/true);
        QueueRound(batch.get());
      });
    }
    batch->items.push_back(RoundBatch::Item{Queued{std::move(e), std::move(waiter)}, timeout});
    return;
  }
  bool stopped = false;
  {
    absl::MutexLock lock(&mu);
    stopped = stopping;
    if (!stopped) queue.push_back(Queued{std::move(e), waiter});
  }
  if (stopped) {  // answered here, outside the lock
    waiter->Answer(absl::UnavailableError("the broker is shutting down; retry"));
    return;
  }
  deadlines.Watch(waiter, timeout);
}

// How late a SubmitAsync timeout may be answered (see AckDeadlines::Run).
constexpr absl::Duration kAckDeadlineSlack = absl::Milliseconds(50);

void AckDeadlines::Watch(const std::shared_ptr<Waiter>& waiter, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  const Due due{clock_.Elapsed() + timeout, timeout, waiter};
  if (heap_.empty() || due.at < heap_.front().at) wake_ = true;
  heap_.push_back(due);
  std::push_heap(heap_.begin(), heap_.end(), std::greater<Due>());
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void AckDeadlines::Run() {
  std::vector<Due> expired;
  mu_.Lock();
  while (!stopping_) {
    const absl::Duration now = clock_.Elapsed();
    while (!heap_.empty() && heap_.front().at <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<Due>());
      expired.push_back(std::move(heap_.back()));
      heap_.pop_back();
    }
    if (!expired.empty()) {
      mu_.Unlock();
      for (Due& d : expired) {
        if (std::shared_ptr<Waiter> w = d.waiter.lock()) {
          w->Answer(absl::UnavailableError(
              absl::StrCat("the broker did not confirm within ", absl::FormatDuration(d.timeout), "; retry")));
        }
      }
      expired.clear();
      mu_.Lock();
      continue;
    }
    wake_ = false;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || wake_; };
    // A little late rather than once per callback: under load a deadline
    // falls due every few microseconds, and each would wake this thread.
    const absl::Duration wait = heap_.empty() ? absl::Seconds(1) : heap_.front().at - now + kAckDeadlineSlack;
    mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
  }
  mu_.Unlock();
}

void AckDeadlines::Stop() {
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    t = std::move(thread_);
    heap_.clear();
  }
  if (t.joinable()) t.join();
}

absl::Status Broker::Impl::Apply(Event& e, absl::Time now) {
  switch (e.type) {
    case Event::Type::kAdd: return scheduler->Add(e.workload, now);
    case Event::Type::kUpdate: return scheduler->Update(e.workload, now);
    case Event::Type::kRemove: return scheduler->Remove(e.key, e.uid, now);
    case Event::Type::kFinish: return scheduler->Finish(e.key, e.uid, now);
    case Event::Type::kAdopt: return scheduler->Adopt(e.workload, e.flavors, e.admitted_at, now, e.running_counts);
    case Event::Type::kPolicies: {
      // A later publication of the same store is in effect: it holds this
      // set's change already (Event::policies_version).
      if (e.policies_version != 0 && e.policies_version < policies_version) return absl::OkStatus();
      absl::Status set = scheduler->SetPolicies(e.policies, now);
      if (set.ok()) {
        policies_version = std::max(policies_version, e.policies_version);
        if (e.overlay != nullptr) overlay = e.overlay;
        policy_notes.emplace_back(e.actor, e.message);
      }
      return set;
    }
    case Event::Type::kReleaseOk: return scheduler->ReleaseSucceeded(e.key, e.uid, now, e.message);
    case Event::Type::kReleaseFailed: return scheduler->ReleaseFailed(e.key, e.uid, e.message, now);
    case Event::Type::kStopped: return scheduler->Stopped(e.key, e.uid, now, e.message);
    case Event::Type::kRerelease: {
      // Not a state change: a running gang has a member that is held
      // again (a replacement pod); the actuator lets it go like the rest.
      const WorkloadInfo* info = scheduler->Find(e.key);
      if (info == nullptr || (info->phase != Phase::kRunning && info->phase != Phase::kReserved) ||
          !info->admission.has_value() ||
          actuator == nullptr) {
        return absl::OkStatus();
      }
      StateChange c;
      c.type = StateChange::Type::kAdmitted;
      c.key = e.key;
      c.uid = info->workload != nullptr ? info->workload->uid : "";
      c.assignment = info->admission;
      actuator->Release(MakeRelease(c));
      return absl::OkStatus();
    }
    case Event::Type::kPodsReady: return scheduler->PodsReady(e.key, e.uid, e.ready, now);
    case Event::Type::kFlush: return absl::OkStatus();
  }
  return absl::OkStatus();
}

ReleaseOrder Broker::Impl::MakeRelease(const StateChange& c) const {
  ReleaseOrder o;
  o.key = c.key;
  o.uid = c.uid;
  if (const WorkloadInfo* info = scheduler->FindInstance(InstanceOf(c.key, c.uid))) {
    o.workload = info->workload;
    o.admitted_at = info->admitted_at;
  }
  o.assignment = *c.assignment;
  const model::PolicySet& p = scheduler->policies();
  for (const PodSetAssignment& ps : c.assignment->pod_sets) {
    ReleaseOrder::PodSetPlacement placement;
    placement.name = ps.name;
    std::set<std::string> seen;
    for (const auto& [res, flavor] : ps.flavors) {
      if (!seen.insert(flavor).second) continue;
      auto f = p.flavors.find(flavor);
      if (f == p.flavors.end()) continue;
      for (const auto& [k, v] : f->second.node_labels) placement.node_selector[k] = v;
      placement.tolerations.insert(placement.tolerations.end(), f->second.tolerations.begin(),
                                   f->second.tolerations.end());
    }
    o.placements.push_back(std::move(placement));
  }
  return o;
}

void Broker::Impl::AnswerSelf(Event::Type type, const StateChange& c) {
  Event e;
  e.type = type;
  e.key = c.key;
  e.uid = c.uid;
  absl::MutexLock lock(&mu);
  queue.push_back(Queued{std::move(e), nullptr});
}

void Broker::Impl::Actuate(const std::vector<StateChange>& changes) {
  for (const StateChange& c : changes) {
    if (c.type == StateChange::Type::kAdmitted) {
      if (actuator != nullptr) {
        actuator->Release(MakeRelease(c));
      } else {
        AnswerSelf(Event::Type::kReleaseOk, c);
      }
    } else if (c.type == StateChange::Type::kEvicted) {
      if (actuator != nullptr) {
        SuspendOrder o;
        o.key = c.key;
        o.uid = c.uid;
        if (const WorkloadInfo* info = scheduler->FindInstance(InstanceOf(c.key, c.uid))) o.workload = info->workload;
        o.reason = c.reason;
        o.message = c.message;
        o.preemptor = c.preemptor;
        actuator->Suspend(o);
      } else {
        AnswerSelf(Event::Type::kStopped, c);
      }
    }
  }
}

void Broker::Impl::Run() {
  if (!startup.empty()) {
    Actuate(startup);
    startup.clear();
  }
  std::vector<Queued> batch;
  while (true) {
    bool stop = false;
    // Stale pending orders and reason numbers are refreshed within about
    // kOrderRefresh even when no event comes.
    const bool stale = !stale_orders.empty() || scheduler->stale_reasons() > 0;
    {
      absl::MutexLock lock(&mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || !queue.empty() || more_work; };
      mu.AwaitWithTimeout(absl::Condition(&ready), stale ? std::min(options.tick, kOrderRefresh) : options.tick);
      const size_t n = std::min(queue.size(), options.max_batch);
      batch.clear();
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      stop = stopping && queue.empty();
      stats.queue_depth = queue.size();
    }
    ProcessBatch(batch);
    if (stop) return;
  }
}

void Broker::Impl::RefreshReasons(bool flush) {
  if (scheduler->stale_reasons() == 0) return;
  const int64_t now_ms = absl::ToInt64Milliseconds(since_start.Elapsed());
  if (!flush && now_ms - reasons_refreshed_ms < absl::ToInt64Milliseconds(kReasonRefresh)) return;
  stats.reasons_refreshed += scheduler->RefreshReasons();
  reasons_refreshed_ms = now_ms;
}

void Broker::Impl::ProcessBatch(std::vector<Queued>& batch) {
  const absl::Time now = clock->Now();
  std::vector<absl::Status> results;
  results.reserve(batch.size());
  for (Queued& q : batch) {
    results.push_back(Apply(q.event, now));
    intake_applied = std::max(intake_applied, q.event.intake_revision);
  }
  const base::Stopwatch schedule_watch;
  const ScheduleStats sched = scheduler->Schedule(now);
  if (options.on_schedule && (sched.nominated > 0 || sched.admitted > 0)) {
    options.on_schedule(sched, schedule_watch.Elapsed());
  }
  {
    absl::MutexLock lock(&mu);
    more_work = sched.more;
  }
  std::vector<StateChange> changes = scheduler->TakeChanges();
  for (StateChange& c : changes) {
    if (c.type != StateChange::Type::kPoliciesChanged || policy_notes.empty()) continue;
    c.actor = policy_notes.front().first;
    c.message = policy_notes.front().second;
    policy_notes.pop_front();
  }
  policy_notes.clear();
  absl::Status durable = absl::OkStatus();
  if (!unsynced.empty()) {
    unsynced.insert(unsynced.end(), std::make_move_iterator(changes.begin()), std::make_move_iterator(changes.end()));
    changes = std::move(unsynced);
    unsynced.clear();
  }
  if (sink != nullptr && (!changes.empty() || intake_applied > intake_durable)) {
    DurableBatch durable_batch = MakeDurableBatch(changes);
    durable_batch.intake_revision = intake_applied;
    absl::StatusOr<uint64_t> position = sink->Append(durable_batch);
    durable = position.status();
    if (position.ok()) {
      durable_position = *position;
      intake_durable = intake_applied;
    }
  }
  ++stats.batches;
  stats.events += batch.size();
  stats.admitted += static_cast<uint64_t>(sched.admitted);
  stats.preempted += static_cast<uint64_t>(sched.preempted);
  if (!durable.ok()) {
    ++stats.sink_failures;
    base::GetLogger("broker")->error("broker: state store unavailable, {} change(s) kept to retry: {}", changes.size(),
                       durable.message());
    unsynced = std::move(changes);
  }
  RefreshReasons(std::any_of(batch.begin(), batch.end(),
                             [](const Queued& q) { return q.event.type == Event::Type::kFlush; }));
  // Published before the orders go out: the actuator asks the snapshot
  // whether an order is still wanted (kube::OrderWanted), and must find
  // the change that gave it there, not the state before it.
  Publish(now);
  if (durable.ok()) Actuate(changes);
  if (durable.ok() && !changes.empty()) {
    const std::shared_ptr<const Snapshot> after = current.load();
    for (ChangeObserver* o : options.observers) o->OnDurable(changes, *after);
  }
  // After the orders (a release waits for the journal, not for the audit
  // log's write and fsync), before the answers (an acknowledged event is
  // in the audit log when its answer arrives).
  if (durable.ok() && sink != nullptr) sink->Complete();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].waiter == nullptr) continue;
    batch[i].waiter->Answer(
        !durable.ok() ? absl::UnavailableError(absl::StrCat("the state store is unavailable (", durable.message(),
                                                            "); retry"))
                      : results[i]);
    batch[i].waiter.reset();  // a callback's captures go now, not with the next batch
  }
}

absl::StatusOr<std::shared_ptr<const Snapshot>> ReadOnlySnapshot(DurableState* state,
                                                                 std::shared_ptr<const model::PolicySet> fallback,
                                                                 const BrokerOptions& options,
                                                                 const base::Clock* clock) {
  if (fallback == nullptr) fallback = std::make_shared<const model::PolicySet>();
  std::vector<StateChange> unconfirmed;  // a follower sends nothing
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      RestoreFrom(state, std::move(fallback), options.scheduler, &unconfirmed);
  if (!scheduler.ok()) return scheduler.status();
  Broker::Impl impl;
  impl.options = options;
  impl.clock = clock;
  impl.scheduler = *std::move(scheduler);
  impl.overlay = state->overlay;
  impl.durable_position = state->position;
  impl.stats = options.start_stats;
  impl.PublishFirst(clock->Now());
  return impl.current.load();
}

void Broker::Impl::PublishFirst(absl::Time now) {
  auto first = std::make_shared<Snapshot>();
  first->policies_ = scheduler->shared_policies();
  first->time_ = now;
  auto table = std::make_shared<Snapshot::ShardTable>();
  for (size_t i = 0; i < Snapshot::kShards; ++i) table->push_back(std::make_shared<const Snapshot::Shard>());
  first->shards_ = std::move(table);
  current.store(std::move(first));
  Publish(now);
}

Broker::Broker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Broker::~Broker() { Stop(); }

absl::StatusOr<std::unique_ptr<Broker>> Broker::Create(std::shared_ptr<const model::PolicySet> policies,
                                                       BrokerOptions options, Actuator* actuator, StateSink* sink,
                                                       const base::Clock* clock, DurableState* recovered) {
  if (clock == nullptr) return absl::InvalidArgumentError("broker: a clock is required");
  if (policies == nullptr) policies = std::make_shared<const model::PolicySet>();
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler;
  std::vector<StateChange> startup;
  if (recovered != nullptr) {
    scheduler = RestoreFrom(recovered, policies, options.scheduler, &startup);
    if (!scheduler.ok()) return scheduler.status();
  } else {
    scheduler = Scheduler::Create(policies, options.scheduler);
  }
  if (!scheduler.ok()) return scheduler.status();
  // The policies in effect are recorded (a durable broker's first batch
  // says what it started with), and after a restore they replace the
  // recorded ones when their content differs (model/policy_digest.h: the
  // digests, computed once when each set was sealed): quota files edited
  // while gangkeeper was down apply; the same files change nothing.
  const bool changed = recovered != nullptr && recovered->policies != nullptr &&
                       model::DigestOf(*recovered->policies) != model::DigestOf(*policies);
  const bool unrecorded = sink != nullptr && (recovered == nullptr || recovered->policies == nullptr);
  if (changed || unrecorded) {
    if (absl::Status s = (*scheduler)->SetPolicies(policies, clock->Now()); !s.ok()) return s;
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->actuator = actuator;
  impl->sink = sink;
  impl->clock = clock;
  impl->scheduler = *std::move(scheduler);
  impl->startup = std::move(startup);
  if (recovered != nullptr) impl->overlay = recovered->overlay;
  impl->durable_position = recovered != nullptr ? recovered->position : 0;
  impl->stats = options.start_stats;
  impl->PublishFirst(clock->Now());
  return std::unique_ptr<Broker>(new Broker(std::move(impl)));
}

void Broker::Start() {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->started || impl_->stopping) return;
  impl_->started = true;
  impl_->thread = std::thread([this] { impl_->Run(); });
}

void Broker::Stop() {
  bool join = false;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
    join = impl_->started;
  }
  if (join) impl_->thread.join();
  // Never started: what waits in the queue is never applied.
  std::deque<Queued> left;
  {
    absl::MutexLock lock(&impl_->mu);
    left.swap(impl_->queue);
  }
  for (Queued& q : left) {
    if (q.waiter != nullptr) q.waiter->Answer(absl::UnavailableError("the broker stopped before applying this; retry"));
  }
  impl_->deadlines.Stop();
}

void Broker::Submit(Event e) { (void)impl_->Send(std::move(e), false); }

absl::Status Broker::SubmitAndWait(Event e, absl::Duration timeout) {
  return impl_->Send(std::move(e), true, timeout);
}

void Broker::SubmitAsync(Event e, Ack done, absl::Duration timeout) {
  impl_->SendAsync(std::move(e), std::move(done), timeout);
}

bool Broker::Flush(absl::Duration timeout) {
  auto waiter = std::make_shared<Waiter>();
  impl_->QueueOpenRound();
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->stopping) return false;
    impl_->queue.push_back(Queued{Event::Flush(), waiter});
  }
  return waiter->done.WaitForNotificationWithTimeout(timeout);
}

std::shared_ptr<const Snapshot> Broker::snapshot() const { return impl_->current.load(); }

}  // namespace gangkeeper::broker
