// gangkeeper tests: the generative invariant check (see invariant_run.h).
#include "test/broker/invariant_run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/store/state_codec.h"

namespace gangkeeper::broker::invariants {
namespace {

using quantity::Quantity;

constexpr char kGpu[] = "nvidia.com/gpu";

bool g_trace = false;

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(gen_); }
  uint64_t Bits() { return gen_(); }
  template <typename T>
  const T& OneOf(const std::vector<T>& v) {
    return v[static_cast<size_t>(Uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  std::mt19937_64 gen_;
};

bool HoldsQuota(Phase p) { return p == Phase::kReserved || p == Phase::kRunning || p == Phase::kEvicting; }

// A pending answer of the simulated actuator.
struct Answer {
  bool release = true;  // else: the gang stopped
  WorkloadKey key;
  std::string uid;
};

class Runner {
 public:
  Runner(const World& world, bool guard) : world_(world), guard_(guard) {
    options_ = world.options;
    options_.anti_churn_guard = guard;
  }

  Result Go(const std::vector<Op>& ops) {
    absl::Status started = Start();
    if (!started.ok()) return Fail(absl::StrCat("the world does not load: ", started.message()));
    for (size_t i = 0; i < ops.size() && result_.ok; ++i) {
      index_ = i;
      DueDeletes();
      DueReviews();
      if (!result_.ok) break;
      Apply(ops[i]);
      if (!result_.ok) break;
      Check(ops[i]);
      ++result_.figures.ops;
    }
    if (result_.ok) {
      // The stream ends with the world at rest.
      Op quiet;
      quiet.type = Op::Type::kQuiet;
      index_ = ops.size();
      Apply(quiet);
      if (result_.ok) Check(quiet);
    }
    result_.figures.guarded = s_ != nullptr ? guarded_before_restarts_ + s_->guarded_total() : 0;
    return result_;
  }

 private:
  absl::Status Start() {
    std::shared_ptr<const model::PolicySet> p = Load(factor_);
    if (p == nullptr) return absl::InvalidArgumentError(load_error_);
    absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(p, options_);
    if (!s.ok()) return s.status();
    s_ = *std::move(s);
    return absl::OkStatus();
  }

  std::shared_ptr<const model::PolicySet> Load(int factor) {
    auto set = std::make_shared<model::PolicySet>();
    model::Diagnostics d;
    model::DecodeManifests(world_.Policies(factor), "world.yaml", set.get(), &d);
    if (d.HasErrors()) {
      load_error_ = d.ErrorSummary();
      return nullptr;
    }
    return set;
  }

  Result Fail(std::string why) {
    if (result_.ok) {
      result_.ok = false;
      result_.failure = absl::StrCat("op ", index_ + 1, ": ", why);
    }
    return result_;
  }

  absl::Time Tick() {
    now_ += absl::Seconds(1);
    return now_;
  }

  void Must(const absl::Status& s, const std::string& what) {
    if (!s.ok()) Fail(absl::StrCat(what, ": ", s.ToString()));
  }

  // A change of the world: preemption counts start again.
  void WorldChanged() {
    preempted_since_change_.clear();
    waiting_.clear();
  }

  // Takes the scheduler's changes: answers to send later, preemptions to
  // count. Returns how many there were.
  size_t Collect() {
    std::vector<StateChange> changes = s_->TakeChanges();
    for (const StateChange& c : changes) {
      if (g_trace) {
        std::fprintf(stderr, "  [op %zu] %s %s#%s cq=%s %s %s %s\n", index_ + 1, StateChangeTypeName(c.type),
                     KeyString(c.key).c_str(), c.uid.c_str(), c.cluster_queue.c_str(), c.reason.c_str(),
                     c.message.c_str(), c.assignment.has_value() ? absl::StrCat(c.assignment->usage.size()).c_str() : "");
      }
      if (c.type == StateChange::Type::kAdmitted) {
        answers_.push_back(Answer{true, c.key, c.uid});
        ++result_.figures.admitted;
        waiting_.erase(InstanceOf(c.key, c.uid));  // a preemptor got what it waited for
      } else if (c.type == StateChange::Type::kRequeued || c.type == StateChange::Type::kRemoved ||
                 c.type == StateChange::Type::kFinished) {
        // A victim is gone: a preemptor whose victims are all gone is ready.
        const InstanceKey gone = InstanceOf(c.key, c.uid);
        if (c.type != StateChange::Type::kRequeued) waiting_.erase(gone);
        if (c.type == StateChange::Type::kRemoved) {
          // An object replaced under its name leaves once its pods stopped;
          // its deletion, seen later, changes nothing.
          auto due = std::find_if(late_deletes_.begin(), late_deletes_.end(),
                                  [&](const auto& d) { return d.second == gone; });
          if (due != late_deletes_.end()) {
            late_deletes_.erase(due);
            Forget(gone);
          }
        }
        evicted_for_.erase(gone);
        for (auto& [p, w] : waiting_) {
          if (w.victims.erase(gone) != 0 && w.victims.empty()) w.ready = true;
        }
      } else if (c.type == StateChange::Type::kEvicted) {
        answers_.push_back(Answer{false, c.key, c.uid});
        if (!c.preemptor.name.empty()) {
          ++result_.figures.preempted;
          // With the anti-churn rule: nobody is preempted twice between two
          // changes of the world. Without it (the holds alone): nobody is
          // preempted twice for the same preemptor, the livelock of #19.
          const InstanceKey victim = InstanceOf(c.key, c.uid);
          if (const WorkloadInfo* p = s_->FindInstance(InstanceOf(c.preemptor, c.preemptor_uid))) {
            evicted_for_[victim] = InstanceOf(p->key, p->workload->uid);
            Waiting& w = waiting_[InstanceOf(p->key, p->workload->uid)];
            w.victims.insert(victim);
            w.ready = false;
          }
          const std::string by = guard_ ? std::string() : KeyString(c.preemptor);
          if (++preempted_since_change_[{victim, by}] > 1 && guard_) {
            Fail(absl::StrCat(KeyString(c.key), " (uid ", c.uid, ") was preempted ",
                              preempted_since_change_[{victim, by}], " times",
                              guard_ ? "" : absl::StrCat(" for ", by), " without a change in the world (last by ",
                              KeyString(c.preemptor), ")"));
          }
        }
      }
    }
    return changes.size();
  }

  // `tick`: the simulated clock moves first (a backoff may expire).
  size_t Schedule(bool tick = true) {
    // The quota a preemptor waits for is its own: once all its victims
    // have stopped, the next pass admits it (unless the world changed).
    // (In a StrictFIFO queue only while it is the head: a workload that
    // ranks before it, such as another preemptor's victim queued again,
    // goes first, as the strategy says. In a BestEffortFIFO queue unless,
    // after the pass, a preemptor ranked before it waits for its victims.)
    std::vector<InstanceKey> ready, yielded;
    for (const auto& [p, w] : waiting_) {
      if (!w.ready) continue;
      // Victims evicted for it before a change of the world count too
      // until they stop (a restart forgets nothing about evictions).
      // So do victims whose preemptor left (replaced under its name, say):
      // a new plan may count on them without a new eviction.
      if (std::any_of(evicted_for_.begin(), evicted_for_.end(), [&](const auto& e) {
            if (e.second == p) return true;
            const WorkloadInfo* by = s_->FindInstance(e.second);
            return by == nullptr || by->phase != Phase::kPending;
          })) {
        continue;
      }
      const WorkloadInfo* info = s_->FindInstance(p);
      if (info == nullptr) continue;
      auto cq = s_->policies().cluster_queues.find(info->cluster_queue);
      if (cq != s_->policies().cluster_queues.end() &&
          cq->second.queueing_strategy == model::QueueingStrategy::kStrictFIFO) {
        std::vector<const WorkloadInfo*> order = s_->PendingInQueueOrder(info->cluster_queue);
        if (order.empty() || order.front() != info) {
          // The head goes first and may take what its victims gave back:
          // the promise yields to the strategy.
          yielded.push_back(p);
          continue;
        }
      }
      ready.push_back(p);
    }
    for (const InstanceKey& p : yielded) waiting_.erase(p);
    ScheduleStats st = s_->Schedule(tick ? Tick() : now_);
    ++result_.figures.schedule_calls;
    result_.figures.cycles += st.cycles;
    const size_t changes = Collect();
    for (const InstanceKey& p : ready) {
      if (waiting_.count(p) == 0) continue;
      const WorkloadInfo* w = s_->FindInstance(p);
      if (w != nullptr && BehindWaitingPreemptor(*w)) continue;
      std::string queue;
      if (w != nullptr) {
        for (const WorkloadInfo* x : s_->PendingInQueueOrder(w->cluster_queue)) {
          absl::StrAppend(&queue, "\n    ", KeyString(x->key), "#", x->workload->uid, " priority ", x->priority, ": ",
                          x->reason.message);
        }
      }
      Fail(absl::StrCat(KeyString(p.key), " (uid ", p.uid, ") waited for victims that all stopped and was not admitted ",
                        "by the next pass (", w == nullptr ? "gone" : w->reason.message, "); its queue:", queue));
      break;
    }
    return changes;
  }

  // BestEffortFIFO: a preemptor ranked before `info` in its queue whose
  // victims are still stopping stays the head its queue tries (as in
  // Kueue, where it goes back to the top of the heap every cycle).
  bool BehindWaitingPreemptor(const WorkloadInfo& info) const {
    for (const WorkloadInfo* x : s_->PendingInQueueOrder(info.cluster_queue)) {
      if (x == &info) return false;
      const InstanceKey xi = InstanceOf(x->key, x->workload->uid);
      if (std::any_of(evicted_for_.begin(), evicted_for_.end(), [&](const auto& e) { return e.second == xi; })) {
        return true;
      }
    }
    return false;
  }

  // Tracked instances, sorted by key, optionally filtered.
  template <typename Pred>
  std::vector<const WorkloadInfo*> Tracked(Pred pred) const {
    std::vector<const WorkloadInfo*> out;
    for (const WorkloadInfo* w : s_->Workloads()) {
      if (pred(*w)) out.push_back(w);
    }
    std::sort(out.begin(), out.end(), [](const WorkloadInfo* a, const WorkloadInfo* b) {
      if (a->key != b->key) return a->key < b->key;
      return a->workload->uid < b->workload->uid;
    });
    return out;
  }

  static const WorkloadInfo* Pick(const std::vector<const WorkloadInfo*>& v, uint64_t pick) {
    return v.empty() ? nullptr : v[pick % v.size()];
  }

  workload::Workload Gang(const Op& op, const std::string& name, const std::string& uid) {
    workload::Workload w;
    w.namespace_name = absl::StrCat("ns-", op.cq % world_.clusterqueues);
    w.name = name;
    w.uid = uid;
    w.queue_name = "lq";
    w.priority = op.priority;
    w.creation_timestamp = now_;
    if (op.never_preempts) w.preemption_policy = model::PreemptionPolicy::kNever;
    workload::PodSet ps;
    ps.name = "main";
    ps.count = op.pods;
    if (op.min_pods > 0) {
      // As a Job says it (the durable state keeps the annotation).
      ps.min_count = op.min_pods;
      w.annotations[std::string(workload::kJobMinParallelismAnnotation)] = absl::StrCat(op.min_pods);
    }
    ps.requests[kGpu] = Quantity::FromUnits(op.gpus);
    ps.limits = ps.requests;
    w.pod_sets.push_back(ps);
    return w;
  }

  void Expect(const InstanceKey& instance) { model_.insert(instance); }

  void Forget(const InstanceKey& instance) { model_.erase(instance); }

  void DueDeletes() {
    for (auto it = late_deletes_.begin(); it != late_deletes_.end();) {
      if (it->first > index_) {
        ++it;
        continue;
      }
      const InstanceKey old = it->second;
      Must(s_->Remove(old.key, old.uid, Tick()), "late delete");
      Forget(old);
      WorldChanged();
      it = late_deletes_.erase(it);
    }
  }

  void Apply(const Op& op) {
    switch (op.type) {
      case Op::Type::kArrive: {
        const std::string name = absl::StrCat("w", next_++);
        workload::Workload w = Gang(op, name, absl::StrCat(name, "-uid"));
        Must(s_->Add(w, Tick()), absl::StrCat("add ", name));
        Expect(InstanceOf(w));
        ++result_.figures.arrivals;
        WorldChanged();
        break;
      }
      case Op::Type::kArriveGroup: {
        const std::string group = absl::StrCat("g", next_++);
        for (int i = 0; i < op.pods; ++i) {
          workload::Workload pod = Gang(op, absl::StrCat(group, "-", i), absl::StrCat(group, "-", i, "-uid"));
          pod.kind = workload::Kind::kPod;
          pod.pod_group_name = group;
          pod.pod_group_total_count = op.pods;
          pod.pod_sets[0].count = 1;
          Must(s_->Add(pod, Tick()), absl::StrCat("add pod of ", group));
          Expect(InstanceOf(pod));
        }
        ++result_.figures.arrivals;
        WorldChanged();
        break;
      }
      case Op::Type::kReuse: {
        const WorkloadInfo* picked = Pick(Confirmed([](const WorkloadInfo& w) { return !w.key.pod_group; }), op.pick);
        if (picked == nullptr) break;
        const WorkloadKey key = picked->key;
        workload::Workload w = *picked->workload;
        // A new object under the name means every earlier one was deleted
        // (we missed it). Pending ones are replaced at once; one that holds
        // quota keeps it until its deletion is seen.
        std::vector<std::pair<InstanceKey, bool>> earlier;  // instance, pending
        for (const WorkloadInfo* x : Tracked([&](const WorkloadInfo& x) { return x.key == key; })) {
          earlier.emplace_back(InstanceOf(x->key, x->workload->uid), x->phase == Phase::kPending);
        }
        // Every object the API server creates has a uid of its own.
        w.uid = absl::StrCat(key.name, "-uid-r", ++reuses_);
        w.creation_timestamp = now_;
        if (g_trace) {
          std::fprintf(stderr, "  [op %zu] reuse %s (%zu earlier) as %s\n", index_ + 1, KeyString(key).c_str(),
                       earlier.size(), w.uid.c_str());
        }
        Must(s_->Add(w, Tick()), absl::StrCat("add a new object under ", KeyString(key)));
        for (const auto& [instance, pending] : earlier) {
          if (pending) {
            Forget(instance);
            continue;
          }
          const bool due = std::any_of(late_deletes_.begin(), late_deletes_.end(),
                                       [&](const auto& d) { return d.second == instance; });
          if (!due) late_deletes_.emplace_back(index_ + static_cast<size_t>(op.delay), instance);
        }
        Expect(InstanceOf(w));
        WorldChanged();
        break;
      }
      case Op::Type::kFinish: {
        const WorkloadInfo* w = Pick(Tracked([](const WorkloadInfo& x) { return HoldsQuota(x.phase); }), op.pick);
        if (w == nullptr) break;
        const InstanceKey instance = InstanceOf(w->key, w->workload->uid);
        Must(s_->Finish(instance.key, w->workload->uid, Tick()), "finish");
        Forget(instance);
        WorldChanged();
        break;
      }
      case Op::Type::kRemove: {
        const WorkloadInfo* w = Pick(Confirmed([](const WorkloadInfo&) { return true; }), op.pick);
        if (w == nullptr) break;
        const InstanceKey instance = InstanceOf(w->key, w->workload->uid);
        Must(s_->Remove(instance.key, w->workload->uid, Tick()), "remove");
        Forget(instance);
        WorldChanged();
        break;
      }
      case Op::Type::kUpdate: {
        const WorkloadInfo* w = Pick(Confirmed([](const WorkloadInfo& x) {
                                       return x.phase == Phase::kPending && !x.key.pod_group;
                                     }),
                                     op.pick);
        if (w == nullptr) break;
        workload::Workload changed = *w->workload;
        changed.priority = op.priority;
        Must(s_->Update(changed, Tick()), "update");
        WorldChanged();
        break;
      }
      case Op::Type::kQuota: {
        if (op.factor == factor_) break;
        std::shared_ptr<const model::PolicySet> p = Load(op.factor);
        if (p == nullptr) {
          Fail(absl::StrCat("quota x", op.factor, " does not load: ", load_error_));
          break;
        }
        factor_ = op.factor;
        Must(s_->SetPolicies(p, Tick()), "set policies");
        Collect();
        WorldChanged();
        break;
      }
      case Op::Type::kRestart: {
        Collect();
        DurableState state;
        state.policies = s_->shared_policies();
        state.terminating = s_->Terminating();
        for (const WorkloadInfo* w : s_->Workloads()) {
          state.workloads[DurableKey(*w)] = std::make_shared<WorkloadInfo>(*w);
        }
        absl::StatusOr<DurableState> back = store::DecodeState(store::EncodeState(state), 1);
        if (!back.ok()) {
          Fail(absl::StrCat("the state does not decode: ", back.status().message()));
          break;
        }
        std::vector<std::shared_ptr<const WorkloadInfo>> images;
        for (auto& [id, info] : back->workloads) images.push_back(info);
        guarded_before_restarts_ += s_->guarded_total();
        absl::StatusOr<std::unique_ptr<Scheduler>> s =
            Scheduler::Restore(back->policies, back->terminating, std::move(images), options_);
        if (!s.ok()) {
          Fail(absl::StrCat("restore: ", s.status().message()));
          break;
        }
        s_ = *std::move(s);
        ++result_.figures.restarts;
        // Which preemptor a victim still stopping was evicted for is not
        // durable either: after the restart any preemptor in its tree may
        // count on it, so every waiting preemptor waits for it to stop.
        for (auto& [victim, preemptor] : evicted_for_) preemptor = InstanceKey{};
        // The holds of waiting preemptors are not durable: counted as a
        // change (DESIGN §2 states the invariant between changes).
        WorldChanged();
        break;
      }
      case Op::Type::kDeliver: {
        if (answers_.empty()) break;
        const size_t i = op.pick % answers_.size();
        const Answer a = answers_[i];
        answers_.erase(answers_.begin() + static_cast<std::ptrdiff_t>(i));
        Deliver(a, op.fail);
        break;
      }
      case Op::Type::kSchedule: {
        Schedule();
        break;
      }
      case Op::Type::kQuiet: {
        Quiet();
        break;
      }
      case Op::Type::kReview: {
        ApplyReview(op);
        break;
      }
    }
  }

  // A review alone: never a change of the world, and never a decision.
  void ApplyReview(const Op& op) {
    const size_t due = index_ + static_cast<size_t>(std::max(1, op.delay));
    switch (op.variant) {
      case Op::Review::kPhantom:
      case Op::Review::kForgedUid: {
        workload::Workload w;
        if (op.variant == Op::Review::kPhantom) {
          const std::string name = absl::StrCat("phantom", next_++);
          w = Gang(op, name, absl::StrCat(name, "-uid"));
        } else {
          const WorkloadInfo* picked = Pick(Confirmed([](const WorkloadInfo& x) { return !x.key.pod_group; }), op.pick);
          if (picked == nullptr) return;
          w = *picked->workload;
          w.uid = absl::StrCat(picked->key.name, "-forged-", next_++);
          w.pod_sets[0].count = 1;
        }
        w.unconfirmed = true;
        Must(s_->Add(w, Tick()), absl::StrCat("review of ", w.name));
        reviews_.push_back(Pending{due, InstanceOf(w), std::nullopt});
        break;
      }
      case Op::Review::kShrink: {
        const WorkloadInfo* picked =
            Pick(Confirmed([](const WorkloadInfo& x) { return x.phase == Phase::kPending && !x.key.pod_group; }), op.pick);
        if (picked == nullptr) return;
        const InstanceKey instance = InstanceOf(picked->key, picked->workload->uid);
        const std::vector<workload::PodSet> before = picked->workload->pod_sets;
        workload::Workload w = *picked->workload;
        w.unconfirmed = true;
        w.pod_sets[0].count = 1;
        w.pod_sets[0].requests[kGpu] = Quantity::FromUnits(1);
        Must(s_->Update(w, Tick()), "shrinking review");
        const WorkloadInfo* after = s_->FindInstance(instance);
        if (after == nullptr || after->workload->pod_sets.size() != before.size() ||
            after->workload->pod_sets[0].count != before[0].count ||
            after->workload->pod_sets[0].requests != before[0].requests) {
          Fail(absl::StrCat("a review changed ", KeyString(instance.key), "'s pod sets"));
        }
        break;
      }
      case Op::Review::kReal: {
        const std::string name = absl::StrCat("w", next_++);
        workload::Workload stored = Gang(op, name, absl::StrCat(name, "-uid"));
        workload::Workload review = stored;
        review.unconfirmed = true;
        review.pod_sets[0].count = 1;  // what the review said; the stored object says op.pods
        Must(s_->Add(review, Tick()), absl::StrCat("review of ", name));
        Expect(InstanceOf(stored));  // the API server has it: acknowledged
        reviews_.push_back(Pending{due, InstanceOf(stored), stored});
        break;
      }
    }
  }

  // Reviews whose outcome is due: the API server's word on them.
  void DueReviews() {
    for (auto it = reviews_.begin(); it != reviews_.end();) {
      if (it->due > index_) {
        ++it;
        continue;
      }
      const WorkloadInfo* w = s_->FindInstance(it->instance);
      if (w != nullptr && w->workload->unconfirmed) {
        if (it->stored.has_value()) {
          Must(s_->Update(*it->stored, Tick()), "confirmation");
          ++result_.figures.arrivals;
          WorldChanged();  // a real arrival
        } else {
          Must(s_->Remove(it->instance.key, it->instance.uid, Tick()), "never stored");
        }
      }
      it = reviews_.erase(it);
    }
  }

  // Instances the API server confirmed, sorted by key, filtered.
  template <typename Pred>
  std::vector<const WorkloadInfo*> Confirmed(Pred pred) const {
    return Tracked([&](const WorkloadInfo& w) { return !w.workload->unconfirmed && pred(w); });
  }

  void Deliver(const Answer& a, bool fail) {
    if (a.release) {
      const WorkloadInfo* w = s_->FindInstance(InstanceOf(a.key, a.uid));
      if (fail && w != nullptr && w->phase == Phase::kReserved) {
        Must(s_->ReleaseFailed(a.key, a.uid, "injected", Tick()), "release failed");
        WorldChanged();
      } else {
        Must(s_->ReleaseSucceeded(a.key, a.uid, Tick()), "released");
      }
    } else {
      Must(s_->Stopped(a.key, a.uid, Tick()), "stopped");
    }
    Collect();
  }

  // Nothing changes in the world: the actuator answers and the scheduler
  // runs until neither has anything left to do.
  void Quiet() {
    ++result_.figures.quiet_periods;
    const int64_t bound = 10 + 4 * static_cast<int64_t>(s_->size());
    for (int64_t round = 1; round <= bound && result_.ok; ++round) {
      const bool answered = !answers_.empty();
      std::vector<Answer> now;
      now.swap(answers_);
      for (const Answer& a : now) Deliver(a, false);
      const size_t changes = Schedule();
      if (!answered && changes == 0 && answers_.empty()) {
        result_.figures.max_rounds_to_fixed_point = std::max(result_.figures.max_rounds_to_fixed_point, round);
        // At the fixed point another pass changes nothing at all (at the
        // same time: time passing is a change, a release backoff expires).
        if (Schedule(false) != 0) Fail("a scheduling pass at the fixed point changed something");
        return;
      }
      if (!result_.ok) return;
    }
    // Without the anti-churn rule, cascades through third workloads (fair
    // sharing, priorities within a queue) may go on: what that mode checks
    // is the holds alone (no victim back on its preemptor's quota).
    if (!guard_) return;
    Fail(absl::StrCat("no fixed point after ", bound, " rounds of answers and scheduling passes with ", s_->size(),
                      " workloads"));
  }

  void Check(const Op& op) {
    if (absl::Status s = s_->CheckInvariants(); !s.ok()) {
      Fail(absl::StrCat("after ", Describe(op), ": ", s.message()));
      return;
    }
    // A gang admitted with fewer pods keeps at least its minimum and never
    // more than it asked for (its quota is CheckInvariants' to check).
    for (const WorkloadInfo* w : s_->Workloads()) {
      if (!w->admission.has_value() || w->admission->pod_sets.size() != w->workload->pod_sets.size()) continue;
      for (size_t i = 0; i < w->workload->pod_sets.size(); ++i) {
        const workload::PodSet& ps = w->workload->pod_sets[i];
        const int64_t got = w->admission->pod_sets[i].count;
        if (w->key.pod_group) continue;
        if (got < ps.MinCount() || got > ps.count) {
          Fail(absl::StrCat("after ", Describe(op), ": ", KeyString(w->key), " admitted with ", got, " of ", ps.count,
                            " pods (at least ", ps.MinCount(), ")"));
          return;
        }
      }
    }
    // Every acknowledged workload is tracked exactly once.
    std::set<InstanceKey> tracked;
    for (const WorkloadInfo* w : s_->Workloads()) {
      if (!tracked.insert(InstanceOf(w->key, w->workload->uid)).second) {
        Fail(absl::StrCat(KeyString(w->key), " is tracked twice"));
        return;
      }
    }
    // Beyond them only what reviews alone spoke of (not acknowledged by the
    // API server: holding nothing, which CheckInvariants checks).
    for (auto it = tracked.begin(); it != tracked.end();) {
      const WorkloadInfo* w = s_->FindInstance(*it);
      it = model_.count(*it) == 0 && w != nullptr && w->workload->unconfirmed ? tracked.erase(it) : std::next(it);
    }
    if (tracked != model_) {
      std::vector<std::string> lost, extra;
      for (const InstanceKey& k : model_) {
        if (tracked.count(k) == 0) lost.push_back(absl::StrCat(KeyString(k.key), "#", k.uid));
      }
      for (const InstanceKey& k : tracked) {
        if (model_.count(k) == 0) extra.push_back(absl::StrCat(KeyString(k.key), "#", k.uid));
      }
      Fail(absl::StrCat("after ", Describe(op), ": acknowledged but not tracked: [", absl::StrJoin(lost, ", "),
                        "]; tracked but not acknowledged: [", absl::StrJoin(extra, ", "), "]"));
    }
  }

  const World& world_;
  const bool guard_;
  SchedulerOptions options_;
  std::unique_ptr<Scheduler> s_;
  std::string load_error_;
  int factor_ = 2;
  int64_t next_ = 0;
  size_t index_ = 0;
  int64_t guarded_before_restarts_ = 0;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  std::vector<Answer> answers_;
  std::set<InstanceKey> model_;
  std::vector<std::pair<size_t, InstanceKey>> late_deletes_;
  // Reviews whose object the API server stores (`stored`) or not, decided
  // at op `due`.
  struct Pending {
    size_t due = 0;
    InstanceKey instance;
    std::optional<workload::Workload> stored;
  };
  std::vector<Pending> reviews_;
  std::map<InstanceKey, InstanceKey> evicted_for_;  // victim still evicting -> its preemptor
  int reuses_ = 0;
  std::map<std::pair<InstanceKey, std::string>, int> preempted_since_change_;
  // Preemptors not admitted yet (since the last change of the world): the
  // victims still stopping, and whether all have stopped.
  struct Waiting {
    std::set<InstanceKey> victims;
    bool ready = false;
  };
  std::map<InstanceKey, Waiting> waiting_;
  Result result_;
};

std::string Quota(int k) { return absl::StrCat("{N", k, "}"); }

}  // namespace

void SetTrace(bool on) { g_trace = on; }

std::string Describe(const Op& op) {
  switch (op.type) {
    case Op::Type::kArrive:
      return absl::StrCat("arrive cq=", op.cq, " pods=", op.pods,
                          op.min_pods > 0 ? absl::StrCat(" (at least ", op.min_pods, ")") : "", " gpus=", op.gpus,
                          " priority=", op.priority, op.never_preempts ? " never-preempts" : "");
    case Op::Type::kArriveGroup:
      return absl::StrCat("arrive-group cq=", op.cq, " pods=", op.pods, " gpus=", op.gpus, " priority=", op.priority);
    case Op::Type::kReuse: return absl::StrCat("reuse-name pick=", op.pick, " delete-old-after=", op.delay);
    case Op::Type::kFinish: return absl::StrCat("finish pick=", op.pick);
    case Op::Type::kRemove: return absl::StrCat("remove pick=", op.pick);
    case Op::Type::kUpdate: return absl::StrCat("update pick=", op.pick, " priority=", op.priority);
    case Op::Type::kQuota: return absl::StrCat("quota x", op.factor, "/2");
    case Op::Type::kRestart: return "restart";
    case Op::Type::kDeliver: return absl::StrCat("deliver pick=", op.pick, op.fail ? " (release fails)" : "");
    case Op::Type::kSchedule: return "schedule";
    case Op::Type::kQuiet: return "quiet";
    case Op::Type::kReview: {
      static const char* kNames[] = {"phantom create", "create under a tracked name", "shrinking update",
                                     "real create"};
      return absl::StrCat("review: ", kNames[static_cast<int>(op.variant)], " pick=", op.pick, " decided-after=",
                          op.delay);
    }
  }
  return "?";
}

std::string World::Policies(int factor) const {
  std::vector<std::pair<std::string, std::string>> subst;
  for (size_t k = 0; k < base_quotas.size(); ++k) {
    subst.emplace_back(Quota(static_cast<int>(k)), absl::StrCat(base_quotas[k] * factor / 2));
  }
  return absl::StrReplaceAll(yaml_template, subst);
}

World MakeWorld(uint64_t seed) {
  Rng r(seed ^ 0x5eed'0f'0b'1d'00ULL);
  World w;
  const int mode = static_cast<int>(r.Uniform(0, 2));  // 0 no cohort, 1 flat, 2 hierarchical
  const int flavors = static_cast<int>(r.Uniform(1, 2));
  w.clusterqueues = static_cast<int>(r.Uniform(2, 5));
  w.options.fair_sharing = mode != 0 && r.Chance(0.3);
  w.options.one_head_per_cycle = r.Chance(0.3);
  std::string y;
  for (int f = 0; f < flavors; ++f) {
    absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f", f, "}\n---\n");
  }
  auto quota = [&](int base, bool lend) {
    const int k = static_cast<int>(w.base_quotas.size());
    w.base_quotas.push_back(base);
    std::string out = absl::StrCat("nominalQuota: ", Quota(k));
    if (lend) {
      const int l = static_cast<int>(r.Uniform(0, base));
      const int lk = static_cast<int>(w.base_quotas.size());
      w.base_quotas.push_back(l);
      absl::StrAppend(&out, ", lendingLimit: ", Quota(lk));
    }
    return out;
  };
  std::vector<std::string> cohorts;
  if (mode == 1) cohorts = {"pool"};
  if (mode == 2) {
    absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: org}\nspec:\n",
                    "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n",
                    "    - {name: f0, resources: [{name: nvidia.com/gpu, ", quota(static_cast<int>(r.Uniform(0, 4)), false),
                    "}]}\n---\n");
    for (const char* c : {"x", "y"}) {
      absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: ", c,
                      "}\nspec: {parentName: org}\n---\n");
    }
    cohorts = {"x", "y", "org"};
  }
  std::vector<std::string> parts;
  for (int i = 0; i < w.clusterqueues; ++i) {
    const std::string cohort = cohorts.empty() ? "" : r.OneOf(cohorts);
    const bool strict = r.Chance(0.3);
    const std::string within = r.OneOf(std::vector<std::string>{"Never", "LowerPriority", "LowerOrNewerEqualPriority"});
    const std::string reclaim = r.OneOf(std::vector<std::string>{"Never", "LowerPriority", "Any"});
    std::string bwc = "{policy: Never}";
    if (reclaim != "Never" && r.Chance(0.3)) {
      bwc = r.Chance(0.5) ? "{policy: LowerPriority}" : "{policy: LowerPriority, maxPriorityThreshold: 10}";
    }
    std::string spec = absl::StrCat("  namespaceSelector: {}\n", cohort.empty() ? "" : absl::StrCat("  cohort: ", cohort, "\n"),
                                    "  queueingStrategy: ", strict ? "StrictFIFO" : "BestEffortFIFO", "\n",
                                    "  preemption: {withinClusterQueue: ", within, ", reclaimWithinCohort: ", reclaim,
                                    ", borrowWithinCohort: ", bwc, "}\n");
    if (r.Chance(0.4)) {
      absl::StrAppend(&spec, "  flavorFungibility: {whenCanBorrow: ", r.Chance(0.5) ? "TryNextFlavor" : "MayStopSearch",
                      ", whenCanPreempt: ", r.Chance(0.5) ? "TryNextFlavor" : "MayStopSearch", "}\n");
    }
    absl::StrAppend(&spec, "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n");
    const int mine = flavors == 2 && r.Chance(0.5) ? 2 : 1;
    for (int f = 0; f < mine; ++f) {
      std::string q = quota(static_cast<int>(r.Uniform(0, 6)), !cohort.empty() && r.Chance(0.25));
      if (!cohort.empty() && r.Chance(0.4)) absl::StrAppend(&q, ", borrowingLimit: ", r.Uniform(0, 4));
      absl::StrAppend(&spec, "    - {name: f", f, ", resources: [{name: nvidia.com/gpu, ", q, "}]}\n");
    }
    absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq-", i, "}\nspec:\n",
                    spec, "---\n", "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq, ",
                    "namespace: ns-", i, "}\nspec: {clusterQueue: cq-", i, "}\n---\n");
    parts.push_back(absl::StrCat("cq-", i, cohort.empty() ? "" : absl::StrCat("@", cohort), strict ? " strict" : "",
                                 " within=", within, " reclaim=", reclaim));
  }
  w.yaml_template = y;
  w.description = absl::StrCat(mode == 0 ? "no cohort" : mode == 1 ? "flat cohort" : "hierarchical cohorts", ", ",
                               flavors, " flavor(s)", w.options.fair_sharing ? ", fair sharing" : "",
                               w.options.one_head_per_cycle ? ", one head per cycle" : "", ": ",
                               absl::StrJoin(parts, "; "));
  return w;
}

std::vector<Op> MakeOps(uint64_t seed, int count) {
  Rng r(seed);
  std::vector<Op> ops;
  ops.reserve(static_cast<size_t>(count));
  static const std::vector<int32_t> kPriorities = {0, 0, 10, 10, 100};
  for (int i = 0; i < count; ++i) {
    Op op;
    op.pick = r.Bits();
    op.cq = static_cast<int>(r.Uniform(0, 4));
    op.priority = r.OneOf(kPriorities);
    const int64_t roll = r.Uniform(0, 999);
    if (roll < 170) {
      op.type = Op::Type::kArrive;
      op.pods = static_cast<int>(r.Uniform(1, 3));
      op.gpus = static_cast<int>(r.Uniform(1, 3));
      op.never_preempts = r.Chance(0.1);
      // Some gangs may start with fewer pods (partial admission).
      if (r.Chance(0.2)) {
        op.pods += static_cast<int>(r.Uniform(1, 4));
        op.min_pods = static_cast<int>(r.Uniform(1, op.pods - 1));
      }
    } else if (roll < 195) {
      op.type = Op::Type::kArriveGroup;
      op.pods = static_cast<int>(r.Uniform(2, 3));
      op.gpus = 1;
    } else if (roll < 215) {
      op.type = Op::Type::kReuse;
      op.delay = static_cast<int>(r.Uniform(1, 20));
    } else if (roll < 285) {
      op.type = Op::Type::kFinish;
    } else if (roll < 305) {
      op.type = Op::Type::kRemove;
    } else if (roll < 320) {
      op.type = Op::Type::kUpdate;
    } else if (roll < 330) {
      op.type = Op::Type::kQuota;
      op.factor = static_cast<int>(r.Uniform(1, 3));
    } else if (roll < 340) {
      op.type = Op::Type::kRestart;
    } else if (roll < 640) {
      op.type = Op::Type::kDeliver;
      op.fail = r.Chance(0.05);
    } else if (roll < 860) {
      op.type = Op::Type::kSchedule;
    } else if (roll < 900) {
      op.type = Op::Type::kReview;
      op.variant = static_cast<Op::Review>(r.Uniform(0, 3));
      op.delay = static_cast<int>(r.Uniform(1, 20));
    } else {
      op.type = Op::Type::kQuiet;
    }
    ops.push_back(op);
  }
  return ops;
}

void Figures::Add(const Figures& o) {
  ops += o.ops;
  schedule_calls += o.schedule_calls;
  cycles += o.cycles;
  admitted += o.admitted;
  preempted += o.preempted;
  guarded += o.guarded;
  quiet_periods += o.quiet_periods;
  max_rounds_to_fixed_point = std::max(max_rounds_to_fixed_point, o.max_rounds_to_fixed_point);
  restarts += o.restarts;
  arrivals += o.arrivals;
}

std::string Figures::ToString() const {
  return absl::StrCat(ops, " operations (", arrivals, " arrivals, ", restarts, " restarts, ", quiet_periods,
                      " quiet periods), ", schedule_calls, " scheduling passes, ", cycles, " cycles, ", admitted,
                      " admissions, ", preempted, " preemptions, ", guarded,
                      " candidates spared by the anti-churn rule, at most ", max_rounds_to_fixed_point,
                      " rounds to a fixed point");
}

Result Run(const World& world, const std::vector<Op>& ops, bool guard) {
  Runner runner(world, guard);
  return runner.Go(ops);
}

namespace {

// The kind of a failure: its text after the operation number.
std::string FailureKind(const std::string& failure) {
  const size_t colon = failure.find(": ");
  std::string k = colon == std::string::npos ? failure : failure.substr(colon + 2);
  return k.substr(0, std::min<size_t>(k.size(), 24));
}

}  // namespace

std::vector<Op> Shrink(const World& world, std::vector<Op> ops, bool guard, absl::Duration budget) {
  const Result first = Run(world, ops, guard);
  if (first.ok) return ops;
  const std::string want = FailureKind(first.failure);
  const base::Stopwatch watch;
  // Drop chunks, halving their size, while the failure stays.
  for (size_t chunk = std::max<size_t>(1, ops.size() / 2); watch.Elapsed() < budget; chunk /= 2) {
    bool removed = true;
    while (removed && watch.Elapsed() < budget) {
      removed = false;
      for (size_t at = 0; at + chunk <= ops.size() && watch.Elapsed() < budget;) {
        std::vector<Op> shorter(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(at));
        shorter.insert(shorter.end(), ops.begin() + static_cast<std::ptrdiff_t>(at + chunk), ops.end());
        Result r = Run(world, shorter, guard);
        if (!r.ok && FailureKind(r.failure) == want) {
          ops = std::move(shorter);
          removed = true;
        } else {
          at += chunk;
        }
      }
    }
    if (chunk <= 1) break;
  }
  return ops;
}

std::string Reproduce(const World& world, std::vector<Op> ops, bool guard, absl::Duration budget) {
  if (Run(world, ops, guard).ok) return "the failure did not repeat";
  ops = Shrink(world, std::move(ops), guard, budget);
  const Result r = Run(world, ops, guard);
  std::string out = absl::StrCat("failure: ", r.failure, "\nworld: ", world.description,
                                 "\nanti-churn rule: ", guard ? "on" : "off", "\noperations (", ops.size(), "):\n");
  for (size_t i = 0; i < ops.size(); ++i) absl::StrAppend(&out, "  ", i + 1, ". ", Describe(ops[i]), "\n");
  absl::StrAppend(&out, "policies (quota x2/2):\n", world.Policies(2));
  return out;
}

}  // namespace gangkeeper::broker::invariants
