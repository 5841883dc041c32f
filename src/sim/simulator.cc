// gangkeeper sim: the simulated cluster (see simulator.h): an event queue
// of arrivals, completions and stops around the real broker::Scheduler, and
// the bookkeeping that becomes the Report.
#include "gangkeeper/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gangkeeper/base/status_macros.h"

namespace gangkeeper::sim {
namespace {

using broker::FlavorResource;
using broker::StateChange;
using broker::WorkloadKey;
using quantity::Quantity;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

absl::Time At(int64_t ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

// One workload of the trace as the simulated cluster sees it.
struct SimWorkload {
  const TraceWorkload* trace = nullptr;
  WorkloadKey key;
  std::string uid;
  std::string cluster_queue;  // of its LocalQueue
  int64_t remaining_ms = 0;   // run time still to do
  int64_t saved_ms = 0;       // progress kept across preemptions (checkpoints)
  int64_t started_ms = 0;     // start of the current run
  uint64_t attempt = 0;       // bumped by every start and preemption: stale events are dropped
  bool arrived = false;
  bool running = false;
  std::optional<int64_t> first_admitted_ms;
  std::optional<int64_t> last_admitted_ms;
  std::optional<int64_t> finished_ms;
};

// Events the queue holds (arrivals come from the sorted trace instead).
enum class EventKind { kFinish = 0, kStop = 1 };

struct Event {
  int64_t time_ms;
  EventKind kind;
  uint64_t seq;
  size_t index;
  uint64_t attempt;
  // For std::priority_queue: the earliest (time, kind, seq) on top.
  friend bool operator<(const Event& a, const Event& b) {
    if (a.time_ms != b.time_ms) return a.time_ms > b.time_ms;
    if (a.kind != b.kind) return a.kind > b.kind;
    return a.seq > b.seq;
  }
};

// The quota one ClusterQueue holds of one FlavorResource, as steps.
struct UsageTrack {
  std::vector<std::pair<int64_t, absl::int128>> steps;  // (time, usage from then on)
  absl::int128 current = 0;
  absl::int128 peak = 0;
};

// The smallest 1-2-5 number of milliseconds >= `ms` (at least 1).
int64_t NiceInterval(int64_t ms) {
  int64_t base = 1;
  while (true) {
    for (int64_t m : {1, 2, 5}) {
      if (base * m >= ms) return base * m;
    }
    if (base > kNever / 100) return base;
    base *= 10;
  }
}

// The root of `cohort`'s tree in `p` (implicit cohorts are their own root).
std::string RootCohort(const model::PolicySet& p, const std::string& cohort) {
  std::string at = cohort;
  for (size_t steps = 0; steps <= p.cohorts.size(); ++steps) {
    auto it = p.cohorts.find(at);
    if (it == p.cohorts.end() || it->second.meta.name.empty() || it->second.parent.empty()) return at;
    at = it->second.parent;
  }
  return at;  // a cycle; validation reports it
}

absl::int128 Milli(const Quantity& q) { return q.milli(); }

class Simulation {
 public:
  Simulation(const Trace& trace, std::shared_ptr<const model::PolicySet> policies, const SimOptions& options)
      : trace_(trace), policies_(std::move(policies)), options_(options) {}

  absl::StatusOr<Report> Run();

 private:
  absl::Status Prepare();
  void ComputeLowerBounds();
  absl::Status Pass(int64_t now);
  absl::Status HandleChanges(int64_t now, std::vector<size_t>* stops);
  void ChangeUsage(const std::string& cq, const broker::ResourceAmounts& amounts, int sign, int64_t now);
  void SampleUntil(int64_t before_ms);
  // Ends the runs due at `now` (completions, then stops).
  absl::Status EndRuns(int64_t now, int64_t* last_finish_ms);
  // The Job a trace workload arrives as (priority from its class).
  workload::Workload ArrivalObject(const SimWorkload& w) const;
  void Finalize();
  // Per class: counts, the never admitted, times to admission.
  void FinalizeClasses();

  const Trace& trace_;
  std::shared_ptr<const model::PolicySet> policies_;
  SimOptions options_;
  std::unique_ptr<broker::Scheduler> scheduler_;
  std::vector<SimWorkload> workloads_;
  std::vector<size_t> by_arrival_;
  std::map<WorkloadKey, size_t> index_;
  std::priority_queue<Event> events_;
  uint64_t next_seq_ = 0;
  std::map<std::string, std::map<FlavorResource, UsageTrack>> usage_;
  std::vector<std::string> cq_names_;  // sorted
  // Weighted-share samples: one row per sample, one column per cq_names_.
  std::vector<std::vector<double>> share_samples_;
  int64_t interval_ms_ = 1;
  int64_t next_sample_ms_ = 0;
  Report report_;
};

absl::Status Simulation::Prepare() {
  if (policies_ == nullptr) policies_ = trace_.policies;
  if (policies_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(trace_.file, ": a ", TraceFormatName(trace_.format),
                     " trace names LocalQueues but brings no policies: give --policies DIR"));
  }
  std::vector<std::string> errors;
  workloads_.resize(trace_.workloads.size());
  const model::PolicySet& p = *policies_;
  for (size_t i = 0; i < trace_.workloads.size(); ++i) {
    const TraceWorkload& t = trace_.workloads[i];
    SimWorkload& w = workloads_[i];
    w.trace = &t;
    w.key = WorkloadKey{t.namespace_name, t.name};
    w.uid = absl::StrFormat("sim-%09d", i);
    w.remaining_ms = t.runtime_ms;
    if (errors.size() >= 20) continue;
    auto lq = p.local_queues.find({t.namespace_name, t.queue});
    if (lq == p.local_queues.end()) {
      std::vector<std::string> known;
      for (const auto& [key, q] : p.local_queues) {
        if (key.first == t.namespace_name) known.push_back(key.second);
      }
      errors.push_back(absl::StrCat(
          t.source, ": field queue: LocalQueue ", t.namespace_name, "/", t.queue, " does not exist in the policies; ",
          known.empty()
              ? absl::StrCat("namespace ", t.namespace_name, " has no LocalQueue: add one or fix the namespace")
              : absl::StrCat("LocalQueues in ", t.namespace_name, ": ", absl::StrJoin(known, ", "))));
      continue;
    }
    w.cluster_queue = lq->second.cluster_queue;
    if (!t.priority_class.empty() && p.workload_priority_classes.count(t.priority_class) == 0 &&
        p.priority_classes.count(t.priority_class) == 0) {
      errors.push_back(absl::StrCat(t.source, ": field priority: no WorkloadPriorityClass or PriorityClass named \"",
                                    t.priority_class, "\" in the policies: give a number or a class they define"));
    }
    if (index_.emplace(w.key, i).second == false) {
      errors.push_back(absl::StrCat(t.source, ": field name: workload ", t.namespace_name, "/", t.name,
                                    " is named twice in the trace"));
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  for (const auto& [name, cq] : p.cluster_queues) cq_names_.push_back(name);
  broker::SchedulerOptions so = options_.scheduler;
  so.time_budget = absl::InfiniteDuration();  // only the simulated clock counts
  absl::StatusOr<std::unique_ptr<broker::Scheduler>> s = broker::Scheduler::Create(policies_, so);
  if (!s.ok()) return base::Annotate(s.status(), "building the quota tree from the policies");
  scheduler_ = *std::move(s);
  by_arrival_.resize(workloads_.size());
  for (size_t i = 0; i < by_arrival_.size(); ++i) by_arrival_[i] = i;
  std::stable_sort(by_arrival_.begin(), by_arrival_.end(), [&](size_t a, size_t b) {
    return workloads_[a].trace->arrival_ms < workloads_[b].trace->arrival_ms;
  });
  for (const auto& [name, cq] : p.cluster_queues) {
    ClusterQueueFigures& f = report_.cluster_queues[name];
    f.cohort = cq.cohort.empty() ? "" : RootCohort(p, cq.cohort);
    auto cls = trace_.cluster_queue_classes.find(name);
    if (cls != trace_.cluster_queue_classes.end()) f.class_name = cls->second;
    for (const model::ResourceGroup& g : cq.resource_groups) {
      for (const model::FlavorQuotas& fq : g.flavors) {
        for (const model::ResourceQuota& rq : fq.resources) {
          f.resources[FlavorResource{fq.name, rq.name}].nominal = rq.nominal;
          usage_[name][FlavorResource{fq.name, rq.name}];
        }
      }
    }
  }
  return absl::OkStatus();
}

void Simulation::ComputeLowerBounds() {
  const model::PolicySet& p = *policies_;
  // Capacity per tree and per ClusterQueue, by resource name.
  std::map<std::string, std::map<std::string, absl::int128>> tree_capacity;
  std::map<std::string, std::map<std::string, absl::int128>> cq_capacity;  // absent resource: unlimited
  std::map<std::string, std::string> tree_of;
  for (const auto& [name, cq] : p.cluster_queues) {
    const std::string tree = cq.cohort.empty() ? absl::StrCat("ClusterQueue ", name)
                                               : absl::StrCat("cohort ", RootCohort(p, cq.cohort));
    tree_of[name] = tree;
    std::map<std::string, absl::int128> own;
    std::set<std::string> unlimited;
    for (const model::ResourceGroup& g : cq.resource_groups) {
      for (const model::FlavorQuotas& fq : g.flavors) {
        for (const model::ResourceQuota& rq : fq.resources) {
          tree_capacity[tree][rq.name] += Milli(rq.nominal);
          own[rq.name] += Milli(rq.nominal);
          if (!cq.cohort.empty()) {
            if (rq.borrowing_limit.has_value()) {
              own[rq.name] += Milli(*rq.borrowing_limit);
            } else {
              unlimited.insert(rq.name);
            }
          }
        }
      }
    }
    for (const std::string& r : unlimited) own.erase(r);
    cq_capacity[name] = std::move(own);
  }
  for (const auto& [name, cohort] : p.cohorts) {
    const std::string tree = absl::StrCat("cohort ", RootCohort(p, name));
    for (const model::ResourceGroup& g : cohort.resource_groups) {
      for (const model::FlavorQuotas& fq : g.flavors) {
        for (const model::ResourceQuota& rq : fq.resources) tree_capacity[tree][rq.name] += Milli(rq.nominal);
      }
    }
  }
  std::map<std::string, std::map<std::string, absl::int128>> tree_work, cq_work;
  LowerBounds& b = report_.bounds;
  for (const SimWorkload& w : workloads_) {
    const TraceWorkload& t = *w.trace;
    std::map<std::string, absl::int128> per_resource;
    for (const workload::PodSet& ps : t.pod_sets) {
      for (const auto& [r, q] : ps.requests) per_resource[r] += Milli(q) * ps.count;
    }
    for (const auto& [r, amount] : per_resource) {
      tree_work[tree_of[w.cluster_queue]][r] += amount * t.runtime_ms;
      cq_work[w.cluster_queue][r] += amount * t.runtime_ms;
    }
    const int64_t end = t.arrival_ms + t.runtime_ms;
    if (end > b.arrival_ms || b.arrival_bound_by.empty()) {
      b.arrival_ms = end;
      b.arrival_bound_by = absl::StrCat(t.namespace_name, "/", t.name);
    }
  }
  auto consider = [&](const std::string& what, const std::string& resource, absl::int128 work,
                      absl::int128 capacity) {
    if (capacity <= 0 || work <= 0) return;
    const absl::int128 ms = (work + capacity - 1) / capacity;
    const int64_t bound = ms > absl::int128(kNever) ? kNever : static_cast<int64_t>(ms);
    if (bound > b.work_ms) {
      b.work_ms = bound;
      b.work_bound_by = absl::StrCat(what, ", ", resource);
    }
  };
  for (const auto& [tree, work] : tree_work) {
    for (const auto& [r, amount] : work) consider(tree, r, amount, tree_capacity[tree][r]);
  }
  for (const auto& [cq, work] : cq_work) {
    for (const auto& [r, amount] : work) {
      absl::int128 cap = tree_capacity[tree_of[cq]][r];
      auto own = cq_capacity[cq].find(r);
      if (own != cq_capacity[cq].end()) cap = std::min(cap, own->second);
      consider(absl::StrCat("ClusterQueue ", cq), r, amount, cap);
    }
  }
}

void Simulation::ChangeUsage(const std::string& cq, const broker::ResourceAmounts& amounts, int sign, int64_t now) {
  auto& tracks = usage_[cq];
  for (const auto& [fr, q] : amounts) {
    UsageTrack& u = tracks[fr];
    u.current += sign > 0 ? Milli(q) : -Milli(q);
    u.peak = std::max(u.peak, u.current);
    if (!u.steps.empty() && u.steps.back().first == now) {
      u.steps.back().second = u.current;
    } else {
      u.steps.emplace_back(now, u.current);
    }
  }
}

absl::Status Simulation::HandleChanges(int64_t now, std::vector<size_t>* stops) {
  for (StateChange& c : scheduler_->TakeChanges()) {
    auto it = index_.find(c.key);
    if (it == index_.end()) continue;
    SimWorkload& w = workloads_[it->second];
    switch (c.type) {
      case StateChange::Type::kAdmitted: {
        if (!c.assignment.has_value()) break;
        ChangeUsage(c.assignment->cluster_queue, c.assignment->usage, +1, now);
        GK_RETURN_IF_ERROR(scheduler_->ReleaseSucceeded(c.key, w.uid, At(now)));
        w.running = true;
        w.started_ms = now;
        ++w.attempt;
        if (!w.first_admitted_ms.has_value()) w.first_admitted_ms = now;
        w.last_admitted_ms = now;
        ++report_.admissions;
        ++report_.cluster_queues[c.assignment->cluster_queue].admissions;
        events_.push(Event{now + w.remaining_ms, EventKind::kFinish, next_seq_++, it->second, w.attempt});
        break;
      }
      case StateChange::Type::kEvicted: {
        if (w.running) {
          const int64_t progress = w.saved_ms + (now - w.started_ms);
          const int64_t ckpt = w.trace->checkpoint_ms;
          w.saved_ms = ckpt > 0 ? progress / ckpt * ckpt : 0;
          report_.lost_work_ms += progress - w.saved_ms;
          w.remaining_ms = w.trace->runtime_ms - w.saved_ms;
          w.running = false;
        }
        ++w.attempt;
        ++report_.preemptions;
        const std::string cq = c.assignment.has_value() ? c.assignment->cluster_queue : c.cluster_queue;
        ClusterQueueFigures& f = report_.cluster_queues[cq];
        ++f.preemptions;
        ++f.preemptions_by_class[w.trace->class_name];
        ++report_.classes[w.trace->class_name].preemptions;
        if (options_.stop_delay_ms <= 0) {
          stops->push_back(it->second);
        } else {
          events_.push(Event{now + options_.stop_delay_ms, EventKind::kStop, next_seq_++, it->second, w.attempt});
        }
        break;
      }
      case StateChange::Type::kRequeued:
      case StateChange::Type::kFinished:
      case StateChange::Type::kRemoved:
      case StateChange::Type::kReleaseFailed:
        if (c.assignment.has_value()) ChangeUsage(c.assignment->cluster_queue, c.assignment->usage, -1, now);
        break;
      default:
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status Simulation::Pass(int64_t now) {
  // Each round either stops preempted gangs (which frees quota for their
  // preemptors) or ends the pass; every preemption lowers the priority of
  // what can be preempted next, so this is bounded well below the limit.
  const size_t limit = workloads_.size() + 2;
  for (size_t round = 0;; ++round) {
    if (round > limit) {
      return absl::InternalError(absl::StrCat("scheduling at t=", now, "ms did not settle after ", limit,
                                              " rounds of preemption: a preemption loop in the scheduler"));
    }
    broker::ScheduleStats stats = scheduler_->Schedule(At(now));
    ++report_.scheduling_passes;
    report_.scheduling_cycles += stats.cycles;
    std::vector<size_t> stops;
    GK_RETURN_IF_ERROR(HandleChanges(now, &stops));
    if (stops.empty()) return absl::OkStatus();
    for (size_t i : stops) GK_RETURN_IF_ERROR(scheduler_->Stopped(workloads_[i].key, workloads_[i].uid, At(now)));
    GK_RETURN_IF_ERROR(HandleChanges(now, &stops));
  }
}

void Simulation::SampleUntil(int64_t before_ms) {
  while (next_sample_ms_ < before_ms) {
    std::vector<double> row(cq_names_.size(), 0.0);
    size_t col = 0;
    for (const broker::ClusterQueueStatus& st : scheduler_->ClusterQueues()) {
      while (col < cq_names_.size() && cq_names_[col] < st.name) ++col;
      if (col < cq_names_.size() && cq_names_[col] == st.name) row[col] = st.weighted_share;
    }
    share_samples_.push_back(std::move(row));
    if (share_samples_.size() > static_cast<size_t>(2 * std::max(options_.target_buckets, 1))) {
      // Outlasted the estimate: keep every other sample, double the width.
      std::vector<std::vector<double>> kept;
      for (size_t i = 0; i < share_samples_.size(); i += 2) kept.push_back(std::move(share_samples_[i]));
      share_samples_ = std::move(kept);
      interval_ms_ *= 2;
    }
    next_sample_ms_ = static_cast<int64_t>(share_samples_.size()) * interval_ms_;
  }
}

absl::Status Simulation::EndRuns(int64_t now, int64_t* last_finish_ms) {
  while (!events_.empty() && events_.top().time_ms == now) {
    const Event e = events_.top();
    events_.pop();
    SimWorkload& w = workloads_[e.index];
    if (e.attempt != w.attempt) continue;  // preempted since
    if (e.kind == EventKind::kFinish) {
      if (!w.running) continue;
      w.running = false;
      w.finished_ms = now;
      *last_finish_ms = now;
      ++report_.finished;
      ++report_.classes[w.trace->class_name].finished;
      GK_RETURN_IF_ERROR(scheduler_->Finish(w.key, w.uid, At(now)));
    } else {
      GK_RETURN_IF_ERROR(scheduler_->Stopped(w.key, w.uid, At(now)));
    }
  }
  return absl::OkStatus();
}

workload::Workload Simulation::ArrivalObject(const SimWorkload& w) const {
  const TraceWorkload& t = *w.trace;
  workload::Workload obj;
  obj.kind = workload::Kind::kJob;
  obj.api_version = "batch/v1";
  obj.namespace_name = t.namespace_name;
  obj.name = t.name;
  obj.uid = w.uid;
  obj.queue_name = t.queue;
  obj.priority = t.priority;
  obj.pod_sets = t.pod_sets;
  if (!t.priority_class.empty()) {
    obj.priority_class = t.priority_class;
    const model::PolicySet& p = *policies_;
    if (auto wpc = p.workload_priority_classes.find(t.priority_class); wpc != p.workload_priority_classes.end()) {
      obj.priority = wpc->second.value;
      obj.priority_class_source = "WorkloadPriorityClass";
    } else if (auto pc = p.priority_classes.find(t.priority_class); pc != p.priority_classes.end()) {
      obj.priority = pc->second.value;
      obj.priority_class_source = "PriorityClass";
      obj.preemption_policy = pc->second.preemption_policy;
    }
  }
  return obj;
}

absl::StatusOr<Report> Simulation::Run() {
  GK_RETURN_IF_ERROR(Prepare());
  ComputeLowerBounds();
  report_.workload_file = trace_.file;
  report_.trace_format = TraceFormatName(trace_.format);
  report_.policies = options_.policies_source;
  report_.workloads = static_cast<int64_t>(workloads_.size());
  report_.until_ms = options_.until_ms;
  report_.stop_delay_ms = options_.stop_delay_ms;
  report_.one_head_per_cycle = options_.scheduler.one_head_per_cycle;
  report_.fair_sharing = options_.scheduler.fair_sharing;
  const int64_t estimate = options_.until_ms.has_value() ? *options_.until_ms : report_.bounds.max_ms();
  const int64_t target = std::max(options_.target_buckets, 1);
  interval_ms_ = NiceInterval(std::max<int64_t>(1, (estimate + target - 1) / target));

  size_t next_arrival = 0;
  int64_t last_event_ms = 0;
  int64_t last_finish_ms = 0;
  while (true) {
    int64_t now = kNever;
    if (next_arrival < by_arrival_.size()) now = workloads_[by_arrival_[next_arrival]].trace->arrival_ms;
    // Completions and stops of runs preempted since they were queued are dropped.
    while (!events_.empty()) {
      const Event& top = events_.top();
      const SimWorkload& w = workloads_[top.index];
      if (top.attempt == w.attempt && (top.kind != EventKind::kFinish || w.running)) break;
      events_.pop();
    }
    if (!events_.empty()) now = std::min(now, events_.top().time_ms);
    if (now == kNever) break;
    if (options_.until_ms.has_value() && now > *options_.until_ms) break;
    SampleUntil(now);
    // 1. Completions, then stops, then arrivals.
    GK_RETURN_IF_ERROR(EndRuns(now, &last_finish_ms));
    while (next_arrival < by_arrival_.size() && workloads_[by_arrival_[next_arrival]].trace->arrival_ms == now) {
      SimWorkload& w = workloads_[by_arrival_[next_arrival++]];
      w.arrived = true;
      GK_RETURN_IF_ERROR(base::Annotate(scheduler_->Add(ArrivalObject(w), At(now)), w.trace->source));
    }
    // 2. The scheduling pass.
    GK_RETURN_IF_ERROR(Pass(now));
    last_event_ms = now;
  }
  report_.end_ms = options_.until_ms.has_value() ? *options_.until_ms : last_event_ms;
  SampleUntil(std::max<int64_t>(report_.end_ms, 1));
  if (report_.finished == report_.workloads) report_.makespan_ms = last_finish_ms;
  Finalize();
  return std::move(report_);
}

// One usage track of a ClusterQueue's FlavorResource, integrated up to
// `end`: used quota-time, peak, utilization and its per-bucket series.
void IntegrateUsage(const UsageTrack& u, int64_t end, int64_t interval_ms, int64_t buckets_count,
                    ResourceFigures* out) {
  ResourceFigures& rf = *out;
  std::vector<absl::int128> buckets(static_cast<size_t>(buckets_count), 0);
  for (size_t i = 0; i < u.steps.size(); ++i) {
    int64_t from = u.steps[i].first;
    int64_t to = i + 1 < u.steps.size() ? u.steps[i + 1].first : end;
    from = std::min(from, end);
    to = std::min(to, end);
    const absl::int128 usage = u.steps[i].second;
    if (to <= from || usage == 0) continue;
    rf.used_milli_ms += usage * (to - from);
    for (int64_t b = from / interval_ms; b < buckets_count && b * interval_ms < to; ++b) {
      const int64_t lo = std::max(from, b * interval_ms);
      const int64_t hi = std::min(to, (b + 1) * interval_ms);
      if (hi > lo) buckets[static_cast<size_t>(b)] += usage * (hi - lo);
    }
  }
  rf.peak = Quantity::FromMilli(static_cast<int64_t>(std::min(u.peak, absl::int128(kNever))));
  const absl::int128 nominal = Milli(rf.nominal);
  if (nominal > 0 && end > 0) {
    rf.utilization =
        static_cast<double>(rf.used_milli_ms) / (static_cast<double>(nominal) * static_cast<double>(end));
    rf.series.resize(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) {
      const int64_t lo = static_cast<int64_t>(b) * interval_ms;
      const int64_t len = std::min(end, lo + interval_ms) - lo;
      rf.series[b] = len > 0 ? static_cast<double>(buckets[b]) / (static_cast<double>(nominal) * len) : 0.0;
    }
  }
}

void Simulation::Finalize() {
  Report& r = report_;
  const int64_t end = r.end_ms;
  r.interval_ms = interval_ms_;
  r.buckets = std::max<int64_t>(1, (end + interval_ms_ - 1) / interval_ms_);
  // Usage integrals, overall and per bucket.
  std::map<std::string, std::pair<absl::int128, absl::int128>> total;  // resource -> (used, nominal)
  std::map<std::string, std::map<std::string, std::pair<absl::int128, absl::int128>>> by_class;
  for (auto& [cq, tracks] : usage_) {
    ClusterQueueFigures& f = r.cluster_queues[cq];
    for (auto& [fr, u] : tracks) {
      ResourceFigures& rf = f.resources[fr];
      IntegrateUsage(u, end, interval_ms_, r.buckets, &rf);
      const absl::int128 nominal = Milli(rf.nominal);
      total[fr.resource].first += rf.used_milli_ms;
      total[fr.resource].second += nominal;
      if (!f.class_name.empty()) {
        by_class[f.class_name][fr.resource].first += rf.used_milli_ms;
        by_class[f.class_name][fr.resource].second += nominal;
      }
    }
  }
  auto ratio = [&](const std::pair<absl::int128, absl::int128>& un) -> std::optional<double> {
    if (un.second <= 0 || end <= 0) return std::nullopt;
    return static_cast<double>(un.first) / (static_cast<double>(un.second) * static_cast<double>(end));
  };
  for (const auto& [res, un] : total) {
    if (std::optional<double> v = ratio(un)) r.utilization[res] = *v;
  }
  for (const auto& [cls, per] : by_class) {
    for (const auto& [res, un] : per) {
      if (std::optional<double> v = ratio(un)) r.utilization_by_queue_class[cls][res] = *v;
    }
  }
  // Weighted shares, one value per bucket.
  for (size_t col = 0; col < cq_names_.size(); ++col) {
    std::vector<double>& series = r.cluster_queues[cq_names_[col]].weighted_share;
    series.assign(static_cast<size_t>(r.buckets), 0.0);
    for (size_t b = 0; b < series.size() && b < share_samples_.size(); ++b) series[b] = share_samples_[b][col];
  }
  FinalizeClasses();
}

void Simulation::FinalizeClasses() {
  Report& r = report_;
  std::map<std::string, std::vector<int64_t>> last_waits, first_waits;
  for (const SimWorkload& w : workloads_) {
    ClassFigures& c = r.classes[w.trace->class_name];
    ++c.workloads;
    if (!w.first_admitted_ms.has_value()) {
      if (w.arrived) {
        ++r.unadmitted_count;
        if (static_cast<int>(r.unadmitted.size()) < options_.max_unadmitted_listed) {
          const broker::WorkloadInfo* info = scheduler_->Find(w.key);
          r.unadmitted.push_back(Unadmitted{absl::StrCat(w.key.namespace_name, "/", w.key.name),
                                            w.trace->class_name,
                                            info != nullptr ? info->reason.message : std::string()});
        }
      }
      continue;
    }
    ++c.admitted;
    last_waits[w.trace->class_name].push_back(*w.last_admitted_ms - w.trace->arrival_ms);
    first_waits[w.trace->class_name].push_back(*w.first_admitted_ms - w.trace->arrival_ms);
  }
  for (auto& [name, c] : r.classes) {
    c.time_to_admission = ComputeWaitStats(last_waits[name]);
    c.time_to_first_admission = ComputeWaitStats(first_waits[name]);
    c.waits_ms = std::move(last_waits[name]);
  }
}

}  // namespace

WaitStats ComputeWaitStats(std::vector<int64_t>& values) {
  WaitStats s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  absl::int128 sum = 0;
  for (int64_t v : values) sum += v;
  s.mean_ms = static_cast<double>(sum) / static_cast<double>(values.size());
  auto rank = [&](int p) {
    // Nearest rank: the ceil(p/100 * n)-th smallest (1-based).
    const size_t n = values.size();
    size_t k = (static_cast<size_t>(p) * n + 99) / 100;
    if (k < 1) k = 1;
    return values[std::min(k, n) - 1];
  };
  s.p50_ms = rank(50);
  s.p90_ms = rank(90);
  s.p99_ms = rank(99);
  s.max_ms = values.back();
  return s;
}

absl::StatusOr<Report> Simulate(const Trace& trace, std::shared_ptr<const model::PolicySet> policies,
                                const SimOptions& options) {
  Simulation sim(trace, std::move(policies), options);
  return sim.Run();
}

}  // namespace gangkeeper::sim
