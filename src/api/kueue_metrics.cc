// gangkeeper: Kueue's metric families from the broker's snapshots and
// counters (see metrics.h). Every family carries Kueue's label names,
// `replica_role` included, so that Kueue's dashboards and alerts work
// unchanged. Labels name queues, cohorts, flavors, resources, priority
// classes and reasons: never a workload.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/api/metrics.h"
#include "gangkeeper/base/status_macros.h"

namespace gangkeeper::api {
namespace {

using metrics::Sample;
using Samples = std::vector<Sample>;

// Quantities are exact milli-units; Prometheus wants units as doubles.
double Units(quantity::Quantity q) { return static_cast<double>(q.milli()) / 1000.0; }

// A value derived from a snapshot, computed once per published snapshot:
// several families read the same sums (a walk over every workload), and a
// scrape reads them all while the snapshot stays the same. Thread-safe.
template <typename T>
class PerSnapshot {
 public:
  using Derive = T (*)(const broker::Snapshot&);
  PerSnapshot(const broker::SnapshotSource* source, Derive derive) : source_(source), derive_(derive) {}

  std::shared_ptr<const T> Get() {
    std::shared_ptr<const broker::Snapshot> snap = source_->snapshot();
    absl::MutexLock lock(&mu_);
    // A weak reference: the memo never keeps an old snapshot's state alive.
    if (value_ == nullptr || of_.lock() != snap) {
      value_ = std::make_shared<const T>(derive_(*snap));
      of_ = snap;
    }
    return value_;
  }

 private:
  const broker::SnapshotSource* const source_;
  const Derive derive_;
  absl::Mutex mu_;
  std::weak_ptr<const broker::Snapshot> of_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const T> value_ ABSL_GUARDED_BY(mu_);
};

// Registers callback families with `replica_role` appended to their labels
// and the role at scrape time appended to every sample.
class KueueFamilies {
 public:
  KueueFamilies(metrics::Registry& registry, ReplicaRole role) : registry_(registry), role_(std::move(role)) {}

  absl::Status Gauge(const char* name, const char* help, std::vector<std::string> labels,
                     metrics::SampleCallback collect) {
    labels.push_back("replica_role");
    return registry_.AddCallbackGauge(name, help, std::move(labels), WithRole(std::move(collect)));
  }
  absl::Status Counter(const char* name, const char* help, std::vector<std::string> labels,
                       metrics::SampleCallback collect) {
    labels.push_back("replica_role");
    return registry_.AddCallbackCounter(name, help, std::move(labels), WithRole(std::move(collect)));
  }

 private:
  metrics::SampleCallback WithRole(metrics::SampleCallback collect) const {
    return [collect = std::move(collect), role = role_] {
      Samples out = collect();
      const std::string r = role ? role() : "standalone";
      for (Sample& s : out) s.label_values.push_back(r);
      return out;
    };
  }

  metrics::Registry& registry_;
  const ReplicaRole role_;
};

// ---- ClusterQueues --------------------------------------------------------

template <typename F>
metrics::SampleCallback PerFlavorResource(const broker::SnapshotSource* b, F f) {
  return [b, f] {
    Samples out;
    std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
    for (const auto& [name, view] : snap->cluster_queues()) {
      for (const auto& [fr, r] : view->status.resources) {
        out.push_back(Sample{{view->status.cohort, name, fr.flavor, fr.resource}, f(r)});
      }
    }
    return out;
  };
}

template <typename F>
metrics::SampleCallback PerQueue(const broker::SnapshotSource* b, F f) {
  return [b, f] {
    Samples out;
    std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
    for (const auto& [name, view] : snap->cluster_queues()) out.push_back(Sample{{name}, f(view->status)});
    return out;
  };
}

// The pod sets a workload asks for (a pod group's as far as it is known).
const std::vector<workload::PodSet>& PodSetsOf(const broker::WorkloadInfo& w) {
  return w.pod_group != nullptr ? w.pod_group->pod_sets : w.workload->pod_sets;
}

// Requests of each ClusterQueue's pending workloads per resource (count x
// per-pod request; a sum past the maximum saturates).
Samples PendingRequests(const broker::Snapshot& snap) {
  Samples out;
  for (const auto& [name, view] : snap.cluster_queues()) {
    std::map<std::string, quantity::Quantity> sum;
    for (const broker::PendingOrder::Item& item : view->pending->items) {
      const broker::WorkloadInfo* w = snap.Find(item.key());
      if (w == nullptr || w->workload == nullptr) continue;
      for (const workload::PodSet& ps : PodSetsOf(*w)) {
        for (const auto& [res, per_pod] : ps.requests) {
          absl::StatusOr<quantity::Quantity> total = per_pod.MultiplyBy(ps.count);
          sum[res] = sum[res].SaturatingAdd(total.ok() ? *total : quantity::Quantity::Max());
        }
      }
    }
    for (const auto& [res, q] : sum) out.push_back(Sample{{name, res}, Units(q)});
  }
  return out;
}

// Kueue reports every status of a queue, 1 for the current one.
Samples ClusterQueueStatuses(const broker::Snapshot& snap) {
  Samples out;
  auto add = [&out](const std::string& name, const std::string& current) {
    for (const char* status : {"pending", "active", "terminated"}) {
      out.push_back(Sample{{name, status}, current == status ? 1.0 : 0.0});
    }
  };
  for (const auto& [name, view] : snap.cluster_queues()) add(name, view->status.active ? "active" : "pending");
  for (const model::ClusterQueue& cq : snap.terminating()) {
    if (snap.FindClusterQueue(cq.meta.name) == nullptr) add(cq.meta.name, "terminated");
  }
  return out;
}

absl::Status RegisterQueueGauges(KueueFamilies& k, const broker::SnapshotSource* b) {
  GK_RETURN_IF_ERROR(
      k.Gauge("kueue_pending_workloads", "Pending workloads per ClusterQueue.", {"cluster_queue", "status"}, [b] {
        Samples out;
        std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
        for (const auto& [name, view] : snap->cluster_queues()) {
          // Kueue's split: set aside until the cohort changes, or not.
          const int64_t parked = view->status.pending_inadmissible;
          out.push_back(Sample{{name, "active"}, static_cast<double>(view->status.pending - parked)});
          out.push_back(Sample{{name, "inadmissible"}, static_cast<double>(parked)});
        }
        return out;
      }));
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cluster_queue_resource_pending",
                             "Requests of the pending workloads per ClusterQueue and resource (count x per-pod request).",
                             {"cluster_queue", "resource"}, [b] { return PendingRequests(*b->snapshot()); }));
  GK_RETURN_IF_ERROR(k.Gauge(
      "kueue_admitted_active_workloads",
      "Workloads holding quota in each ClusterQueue (reserved, running or being evicted).", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return static_cast<double>(st.admitted); })));
  GK_RETURN_IF_ERROR(k.Gauge(
      "kueue_reserving_active_workloads", "Workloads with quota reserved in each ClusterQueue.", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return static_cast<double>(st.admitted); })));
  GK_RETURN_IF_ERROR(k.Gauge(
      "kueue_cluster_queue_weighted_share",
      "Fair-sharing weighted share (dominant resource share) of each ClusterQueue.", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return st.weighted_share; })));
  return k.Gauge("kueue_cluster_queue_status",
                 "Each ClusterQueue's status (pending, active or terminated): 1 for the current one, else 0.",
                 {"cluster_queue", "status"}, [b] { return ClusterQueueStatuses(*b->snapshot()); });
}

// Quota per ClusterQueue, flavor and resource: usage, reservation, nominal
// quota and the borrowing and lending limits.
absl::Status RegisterQuotaGauges(KueueFamilies& k, const broker::SnapshotSource* b) {
  const std::vector<std::string> fr_labels = {"cohort", "cluster_queue", "flavor", "resource"};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cluster_queue_resource_usage", "Quota in use per ClusterQueue, flavor and resource.",
                             fr_labels,
                             PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.usage); })));
  GK_RETURN_IF_ERROR(
      k.Gauge("kueue_cluster_queue_resource_reservation", "Quota reserved per ClusterQueue, flavor and resource.",
              fr_labels, PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.usage); })));
  GK_RETURN_IF_ERROR(
      k.Gauge("kueue_cluster_queue_nominal_quota", "Nominal quota per ClusterQueue, flavor and resource.", fr_labels,
              PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.nominal); })));
  GK_RETURN_IF_ERROR(k.Gauge(
      "kueue_cluster_queue_borrowing_limit", "Borrowing limit per ClusterQueue, flavor and resource (+Inf when unset).",
      fr_labels, PerFlavorResource(b, [kInf](const broker::FlavorResourceStatus& r) {
        return r.borrowing_limit.has_value() ? Units(*r.borrowing_limit) : kInf;
      })));
  return k.Gauge("kueue_cluster_queue_lending_limit",
                 "Lending limit per ClusterQueue, flavor and resource (+Inf when unset).", fr_labels,
                 PerFlavorResource(b, [kInf](const broker::FlavorResourceStatus& r) {
                   return r.lending_limit.has_value() ? Units(*r.lending_limit) : kInf;
                 }));
}

// ---- LocalQueues ----------------------------------------------------------

// What one LocalQueue holds now, summed from the snapshot.
struct LocalQueueState {
  int64_t pending_active = 0;
  int64_t pending_inadmissible = 0;
  int64_t admitted = 0;
  std::map<std::pair<std::string, std::string>, quantity::Quantity> usage;  // (flavor, resource)
};
// By (name, namespace), Kueue's label order.
using LocalQueues = std::map<std::pair<std::string, std::string>, LocalQueueState>;

LocalQueues LocalQueueStates(const broker::Snapshot& snap) {
  LocalQueues out;
  for (const auto& [key, lq] : snap.policies().local_queues) out[{key.second, key.first}];
  snap.ForEachWorkload([&out](const broker::WorkloadInfo& w) {
    if (w.local_queue.empty() || w.workload == nullptr) return;
    LocalQueueState& s = out[{w.local_queue, w.key.namespace_name}];
    if (w.phase == broker::Phase::kPending) {
      ++(w.reason.code == broker::PendingReason::Code::kQueued ? s.pending_active : s.pending_inadmissible);
    }
    if (!w.admission.has_value()) return;
    ++s.admitted;
    for (const broker::PodSetAssignment& ps : w.admission->pod_sets) {
      for (const auto& [res, flavor] : ps.flavors) {
        auto used = ps.usage.find(res);
        if (used == ps.usage.end()) continue;
        quantity::Quantity& sum = s.usage[{flavor, res}];
        sum = sum.SaturatingAdd(used->second);
      }
    }
  });
  return out;
}

using LocalQueueMemo = std::shared_ptr<PerSnapshot<LocalQueues>>;

template <typename F>
metrics::SampleCallback PerLocalQueue(LocalQueueMemo memo, F f) {
  return [memo = std::move(memo), f] {
    Samples out;
    for (const auto& [key, state] : *memo->Get()) f(key.first, key.second, state, out);
    return out;
  };
}

absl::Status RegisterLocalQueueGauges(KueueFamilies& k, const broker::SnapshotSource* b) {
  auto lqs = std::make_shared<PerSnapshot<LocalQueues>>(b, &LocalQueueStates);
  const std::vector<std::string> lq = {"name", "namespace"};
  GK_RETURN_IF_ERROR(k.Gauge(
      "kueue_local_queue_pending_workloads", "Pending workloads per LocalQueue (active: not tried since the last "
      "change; inadmissible: tried and set aside until something changes).",
      {"name", "namespace", "status"},
      PerLocalQueue(lqs, [](const std::string& n, const std::string& ns, const LocalQueueState& s, Samples& out) {
        out.push_back(Sample{{n, ns, "active"}, static_cast<double>(s.pending_active)});
        out.push_back(Sample{{n, ns, "inadmissible"}, static_cast<double>(s.pending_inadmissible)});
      })));
  auto admitted = [](const std::string& n, const std::string& ns, const LocalQueueState& s, Samples& out) {
    out.push_back(Sample{{n, ns}, static_cast<double>(s.admitted)});
  };
  GK_RETURN_IF_ERROR(k.Gauge("kueue_local_queue_reserving_active_workloads",
                             "Workloads with quota reserved per LocalQueue.", lq, PerLocalQueue(lqs, admitted)));
  GK_RETURN_IF_ERROR(k.Gauge("kueue_local_queue_admitted_active_workloads",
                             "Workloads holding quota per LocalQueue (reserved, running or being evicted).", lq,
                             PerLocalQueue(lqs, admitted)));
  auto usage = [](const std::string& n, const std::string& ns, const LocalQueueState& s, Samples& out) {
    for (const auto& [fr, q] : s.usage) out.push_back(Sample{{n, ns, fr.first, fr.second}, Units(q)});
  };
  const std::vector<std::string> fr = {"name", "namespace", "flavor", "resource"};
  GK_RETURN_IF_ERROR(k.Gauge("kueue_local_queue_resource_usage", "Quota in use per LocalQueue, flavor and resource.",
                             fr, PerLocalQueue(lqs, usage)));
  GK_RETURN_IF_ERROR(k.Gauge("kueue_local_queue_resource_reservation",
                             "Quota reserved per LocalQueue, flavor and resource.", fr, PerLocalQueue(lqs, usage)));
  return k.Gauge("kueue_local_queue_status",
                 "Whether each LocalQueue is active (True: it and its ClusterQueue exist and admit; False: held, "
                 "or its ClusterQueue is missing or inactive): 1 for the current value, else 0.",
                 {"name", "namespace", "active"}, [b] {
                   Samples out;
                   std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
                   for (const auto& [key, queue] : snap->policies().local_queues) {
                     const broker::ClusterQueueView* cq = snap->FindClusterQueue(queue.cluster_queue);
                     const bool active =
                         queue.stop_policy == model::StopPolicy::kNone && cq != nullptr && cq->status.active;
                     for (const char* v : {"True", "False", "Unknown"}) {
                       out.push_back(Sample{{key.second, key.first, v}, (active ? "True" : "False") == std::string(v)
                                                                            ? 1.0
                                                                            : 0.0});
                     }
                   }
                   return out;
                 });
}

// ---- Cohorts --------------------------------------------------------------

// The cohort tree as the policies and the ClusterQueues name it (a cohort
// may exist only as a name a ClusterQueue or a child refers to), and per
// cohort subtree: nominal quota and reservations per (flavor, resource), and
// admitted workloads.
struct Subtree {
  std::map<std::pair<std::string, std::string>, quantity::Quantity> quota;
  std::map<std::pair<std::string, std::string>, quantity::Quantity> reserved;
  int64_t admitted = 0;
};
struct CohortSums {
  std::map<std::string, std::string> parent;  // every cohort, "" for a root
  std::map<std::string, std::string> root;    // every cohort's root
  std::map<std::string, Subtree> subtrees;    // every cohort
};

CohortSums SumCohorts(const broker::Snapshot& snap) {
  CohortSums t;
  const model::PolicySet& p = snap.policies();
  for (const auto& [name, c] : p.cohorts) {
    t.parent[name] = c.parent;
    if (!c.parent.empty()) t.parent.emplace(c.parent, "");
  }
  for (const auto& [name, view] : snap.cluster_queues()) {
    if (!view->status.cohort.empty()) t.parent.emplace(view->status.cohort, "");
  }
  for (const auto& [name, parent] : t.parent) {
    const std::vector<std::string> up = p.CohortsAbove(name);
    t.root[name] = up.empty() ? name : up.back();
    t.subtrees[name];
  }
  auto add = [](quantity::Quantity& sum, quantity::Quantity q) { sum = sum.SaturatingAdd(q); };
  for (const auto& [name, c] : p.cohorts) {
    for (const std::string& up : p.CohortsAbove(name)) {
      for (const model::ResourceGroup& g : c.resource_groups) {
        for (const model::FlavorQuotas& f : g.flavors) {
          for (const model::ResourceQuota& r : f.resources) add(t.subtrees[up].quota[{f.name, r.name}], r.nominal);
        }
      }
    }
  }
  for (const auto& [name, view] : snap.cluster_queues()) {
    for (const std::string& up : p.CohortsAbove(view->status.cohort)) {
      Subtree& s = t.subtrees[up];
      s.admitted += view->status.admitted;
      for (const auto& [fr, r] : view->status.resources) {
        add(s.quota[{fr.flavor, fr.resource}], r.nominal);
        add(s.reserved[{fr.flavor, fr.resource}], r.usage);
      }
    }
  }
  return t;
}

absl::Status RegisterCohortGauges(KueueFamilies& k, const broker::SnapshotSource* b) {
  auto sums = std::make_shared<PerSnapshot<CohortSums>>(b, &SumCohorts);
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cohort_info", "The cohort tree: 1 per cohort with its parent and root.",
                             {"cohort", "parent_cohort", "root_cohort"}, [sums] {
                               Samples out;
                               std::shared_ptr<const CohortSums> t = sums->Get();
                               for (const auto& [name, parent] : t->parent) {
                                 out.push_back(Sample{{name, parent, t->root.at(name)}, 1});
                               }
                               return out;
                             }));
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cluster_queue_info",
                             "Where each ClusterQueue sits in the cohort tree: 1 with its cohort and root cohort.",
                             {"cluster_queue", "parent_cohort", "root_cohort"}, [b, sums] {
                               Samples out;
                               std::shared_ptr<const CohortSums> t = sums->Get();
                               for (const auto& [name, view] : b->snapshot()->cluster_queues()) {
                                 const std::string& c = view->status.cohort;
                                 auto root = t->root.find(c);
                                 out.push_back(Sample{{name, c, root != t->root.end() ? root->second : c}, 1});
                               }
                               return out;
                             }));
  using Pick = std::map<std::pair<std::string, std::string>, quantity::Quantity> Subtree::*;
  auto per_fr = [sums](Pick pick) {
    return [sums, pick] {
      Samples out;
      for (const auto& [cohort, s] : sums->Get()->subtrees) {
        for (const auto& [fr, q] : s.*pick) out.push_back(Sample{{cohort, fr.first, fr.second}, Units(q)});
      }
      return out;
    };
  };
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cohort_subtree_quota",
                             "Nominal quota summed over each cohort's subtree, per flavor and resource.",
                             {"cohort", "flavor", "resource"}, per_fr(&Subtree::quota)));
  GK_RETURN_IF_ERROR(k.Gauge("kueue_cohort_subtree_resource_reservations",
                             "Quota reserved in each cohort's subtree, per flavor and resource.",
                             {"cohort", "flavor", "resource"}, per_fr(&Subtree::reserved)));
  return k.Gauge("kueue_cohort_subtree_admitted_active_workloads",
                 "Workloads holding quota in each cohort's subtree.", {"cohort"}, [sums] {
                   Samples out;
                   for (const auto& [cohort, s] : sums->Get()->subtrees) {
                     out.push_back(Sample{{cohort}, static_cast<double>(s.admitted)});
                   }
                   return out;
                 });
}

// ---- Counters ---------------------------------------------------------------

template <typename Key>
metrics::SampleCallback CountsOf(const broker::WorkloadCounters* b, std::map<Key, uint64_t> broker::BrokerCounters::*m) {
  return [b, m] {
    const broker::BrokerCounters counters = b->counters();
    Samples out;
    for (const auto& [k, v] : counters.*m) {
      if constexpr (std::is_same_v<Key, std::pair<std::string, std::string>>) {
        out.push_back(Sample{{k.first, k.second}, static_cast<double>(v)});
      } else {
        out.push_back(Sample{k, static_cast<double>(v)});
      }
    }
    return out;
  };
}

absl::Status RegisterWorkloadCounters(KueueFamilies& k, const broker::WorkloadCounters* b) {
  using C = broker::BrokerCounters;
  const std::vector<std::string> cq_pc = {"cluster_queue", "priority_class"};
  const std::vector<std::string> lq_pc = {"name", "namespace", "priority_class"};
  GK_RETURN_IF_ERROR(k.Counter("kueue_admitted_workloads_total", "Gangs admitted (quota reserved).", cq_pc,
                               CountsOf(b, &C::admitted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_quota_reserved_workloads_total", "Gangs that got their quota reserved.", cq_pc,
                               CountsOf(b, &C::admitted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_finished_workloads_total", "Gangs that ended.", cq_pc, CountsOf(b, &C::finished)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_preempted_workloads_total",
                               "Gangs preempted, by the preemptor's ClusterQueue and the reason.",
                               {"preempting_cluster_queue", "reason"}, CountsOf(b, &C::preempted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_evicted_workloads_total", "Gangs evicted (preempted or drained), by reason.",
                               {"cluster_queue", "reason", "underlying_cause", "priority_class"},
                               CountsOf(b, &C::evicted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_local_queue_admitted_workloads_total", "Gangs admitted per LocalQueue.", lq_pc,
                               CountsOf(b, &C::local_admitted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_local_queue_quota_reserved_workloads_total",
                               "Gangs that got their quota reserved, per LocalQueue.", lq_pc,
                               CountsOf(b, &C::local_admitted)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_local_queue_finished_workloads_total", "Gangs that ended, per LocalQueue.", lq_pc,
                               CountsOf(b, &C::local_finished)));
  GK_RETURN_IF_ERROR(k.Counter("kueue_local_queue_evicted_workloads_total", "Gangs evicted per LocalQueue, by reason.",
                               {"name", "namespace", "reason", "underlying_cause", "priority_class"},
                               CountsOf(b, &C::local_evicted)));
  return k.Counter("kueue_cohort_subtree_admitted_workloads_total",
                   "Gangs admitted in each cohort's subtree (the tree as it was at each admission).",
                   {"cohort", "priority_class"}, CountsOf(b, &C::cohort_admitted));
}

// gangkeeper's own broker totals (no Kueue counterpart, so no replica_role).
absl::Status RegisterBrokerTotals(metrics::Registry& registry, const broker::SnapshotSource* view) {
  GK_RETURN_IF_ERROR(
      registry.AddCallbackCounter("gangkeeper_broker_admitted_total", "Gangs admitted (quota reserved).", {}, [view] {
        return Samples{Sample{{}, static_cast<double>(view->snapshot()->stats().admitted)}};
      }));
  GK_RETURN_IF_ERROR(
      registry.AddCallbackCounter("gangkeeper_broker_preempted_total", "Gangs chosen as preemption victims.", {}, [view] {
        return Samples{Sample{{}, static_cast<double>(view->snapshot()->stats().preempted)}};
      }));
  return registry.AddCallbackGauge("gangkeeper_broker_tracked_workloads", "Workloads the broker tracks.", {}, [view] {
    return Samples{Sample{{}, static_cast<double>(view->snapshot()->workload_count())}};
  });
}

}  // namespace

absl::Status RegisterBrokerMetrics(metrics::Registry& registry, const broker::SnapshotSource* view,
                                   const broker::WorkloadCounters* counters, ReplicaRole role) {
  KueueFamilies k(registry, std::move(role));
  GK_RETURN_IF_ERROR(RegisterQueueGauges(k, view));
  GK_RETURN_IF_ERROR(RegisterQuotaGauges(k, view));
  GK_RETURN_IF_ERROR(RegisterLocalQueueGauges(k, view));
  GK_RETURN_IF_ERROR(RegisterCohortGauges(k, view));
  GK_RETURN_IF_ERROR(RegisterWorkloadCounters(k, counters));
  return RegisterBrokerTotals(registry, view);
}

absl::Status RegisterBuildInfo(metrics::Registry& registry, const BuildInfo& info) {
  // Kueue's label names (go_version stays empty: gangkeeper is C++).
  return registry.AddCallbackGauge(
      "kueue_build_info", "gangkeeper's build: 1, labelled by version, commit, build date, compiler and platform.",
      {"git_version", "git_commit", "build_date", "go_version", "compiler", "platform"}, [info] {
        return Samples{Sample{{info.version, info.commit, info.build_date, "", info.compiler, info.platform}, 1}};
      });
}

}  // namespace gangkeeper::api
