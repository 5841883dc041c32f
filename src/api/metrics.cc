// gangkeeper: broker metrics (see metrics.h).
#include "gangkeeper/api/metrics.h"

#include <functional>
#include <limits>
#include <optional>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/status_macros.h"

namespace gangkeeper::api {
namespace {

using metrics::Sample;

// Quantities are exact milli-units; Prometheus wants units as doubles.
double Units(quantity::Quantity q) { return static_cast<double>(q.milli()) / 1000.0; }

// One sample per (ClusterQueue, flavor, resource) with the value `f` picks.
template <typename F>
metrics::SampleCallback PerFlavorResource(const broker::SnapshotSource* b, F f) {
  return [b, f] {
    std::vector<Sample> out;
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
    std::vector<Sample> out;
    std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
    for (const auto& [name, view] : snap->cluster_queues()) out.push_back(Sample{{name}, f(view->status)});
    return out;
  };
}

// Requests of each ClusterQueue's pending workloads per resource (count x
// per-pod request; a sum past the maximum saturates).
std::vector<Sample> PendingRequests(const broker::Snapshot& snap) {
  std::vector<Sample> out;
  for (const auto& [name, view] : snap.cluster_queues()) {
    std::map<std::string, quantity::Quantity> sum;
    for (const broker::PendingOrder::Item& item : view->pending->items) {
      const broker::WorkloadInfo* w = snap.Find(item.key);
      if (w == nullptr || w->workload == nullptr) continue;
      const std::vector<workload::PodSet>& sets =
          w->pod_group != nullptr ? w->pod_group->pod_sets : w->workload->pod_sets;
      for (const workload::PodSet& ps : sets) {
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

// Workloads per ClusterQueue: pending (active / inadmissible), pending
// requests, admitted, the fair share and the queue's status.
absl::Status RegisterQueueGauges(metrics::Registry& registry, const broker::SnapshotSource* b) {
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_pending_workloads", "Pending workloads per ClusterQueue.", {"cluster_queue", "status"}, [b] {
        std::vector<Sample> out;
        std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
        for (const auto& [name, view] : snap->cluster_queues()) {
          // Kueue's split: set aside until the cohort changes, or not.
          const int64_t parked = view->status.pending_inadmissible;
          out.push_back(Sample{{name, "active"}, static_cast<double>(view->status.pending - parked)});
          out.push_back(Sample{{name, "inadmissible"}, static_cast<double>(parked)});
        }
        return out;
      }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_resource_pending",
      "Requests of the pending workloads per ClusterQueue and resource (count x per-pod request).",
      {"cluster_queue", "resource"}, [b] { return PendingRequests(*b->snapshot()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_admitted_active_workloads",
      "Workloads holding quota in each ClusterQueue (reserved, running or being evicted).", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return static_cast<double>(st.admitted); })));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_reserving_active_workloads", "Workloads with quota reserved in each ClusterQueue.", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return static_cast<double>(st.admitted); })));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_weighted_share",
      "Fair-sharing weighted share (dominant resource share) of each ClusterQueue.", {"cluster_queue"},
      PerQueue(b, [](const broker::ClusterQueueStatus& st) { return st.weighted_share; })));
  return registry.AddCallbackGauge("kueue_cluster_queue_status", "1 for the ClusterQueue's current status.",
                                   {"cluster_queue", "status"}, [b] {
                                     std::vector<Sample> out;
                                     std::shared_ptr<const broker::Snapshot> snap = b->snapshot();
                                     for (const auto& [name, view] : snap->cluster_queues()) {
                                       out.push_back(Sample{{name, view->status.active ? "active" : "pending"}, 1});
                                     }
                                     return out;
                                   });
}

// Quota per ClusterQueue, flavor and resource: usage, reservation, nominal
// quota and the borrowing and lending limits.
absl::Status RegisterQuotaGauges(metrics::Registry& registry, const broker::SnapshotSource* b) {
  const std::vector<std::string> fr_labels = {"cohort", "cluster_queue", "flavor", "resource"};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_resource_usage", "Quota in use per ClusterQueue, flavor and resource.", fr_labels,
      PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.usage); })));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_resource_reservation", "Quota reserved per ClusterQueue, flavor and resource.", fr_labels,
      PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.usage); })));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_nominal_quota", "Nominal quota per ClusterQueue, flavor and resource.", fr_labels,
      PerFlavorResource(b, [](const broker::FlavorResourceStatus& r) { return Units(r.nominal); })));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge(
      "kueue_cluster_queue_borrowing_limit", "Borrowing limit per ClusterQueue, flavor and resource (+Inf when unset).",
      fr_labels, PerFlavorResource(b, [kInf](const broker::FlavorResourceStatus& r) {
        return r.borrowing_limit.has_value() ? Units(*r.borrowing_limit) : kInf;
      })));
  return registry.AddCallbackGauge("kueue_cluster_queue_lending_limit",
                                   "Lending limit per ClusterQueue, flavor and resource (+Inf when unset).", fr_labels,
                                   PerFlavorResource(b, [kInf](const broker::FlavorResourceStatus& r) {
                                     return r.lending_limit.has_value() ? Units(*r.lending_limit) : kInf;
                                   }));
}

// A counter per pair of label values, read from the broker's counters.
using PairCounts = std::map<std::pair<std::string, std::string>, uint64_t>;
absl::Status AddPairCounter(metrics::Registry& registry, const broker::WorkloadCounters* b, const char* name, const char* help,
                            std::vector<std::string> labels, PairCounts broker::BrokerCounters::*member) {
  return registry.AddCallbackCounter(name, help, std::move(labels), [b, member] {
    const broker::BrokerCounters counters = b->counters();
    std::vector<Sample> out;
    for (const auto& [k, v] : counters.*member) out.push_back(Sample{{k.first, k.second}, static_cast<double>(v)});
    return out;
  });
}

// Kueue's workload counters (admitted, finished, preempted, evicted) and
// gangkeeper's own broker totals.
absl::Status RegisterWorkloadCounters(metrics::Registry& registry, const broker::SnapshotSource* view,
                                      const broker::WorkloadCounters* b) {
  GK_RETURN_IF_ERROR(AddPairCounter(registry, b, "kueue_admitted_workloads_total", "Gangs admitted (quota reserved).",
                                    {"cluster_queue", "priority_class"}, &broker::BrokerCounters::admitted));
  GK_RETURN_IF_ERROR(AddPairCounter(registry, b, "kueue_quota_reserved_workloads_total",
                                    "Gangs that got their quota reserved.", {"cluster_queue", "priority_class"},
                                    &broker::BrokerCounters::admitted));
  GK_RETURN_IF_ERROR(AddPairCounter(registry, b, "kueue_finished_workloads_total", "Gangs that ended.",
                                    {"cluster_queue", "priority_class"}, &broker::BrokerCounters::finished));
  GK_RETURN_IF_ERROR(AddPairCounter(registry, b, "kueue_preempted_workloads_total",
                                    "Gangs preempted, by the preemptor's ClusterQueue and the reason.",
                                    {"preempting_cluster_queue", "reason"}, &broker::BrokerCounters::preempted));
  GK_RETURN_IF_ERROR(
      registry.AddCallbackCounter("kueue_evicted_workloads_total", "Gangs evicted (preempted or drained), by reason.",
                                  {"cluster_queue", "reason", "underlying_cause", "priority_class"}, [b] {
                                    const broker::BrokerCounters counters = b->counters();
                                    std::vector<Sample> out;
                                    for (const auto& [k, v] : counters.evicted)
                                      out.push_back(Sample{k, static_cast<double>(v)});
                                    return out;
                                  }));
  GK_RETURN_IF_ERROR(
      registry.AddCallbackCounter("gangkeeper_broker_admitted_total", "Gangs admitted (quota reserved).", {}, [view] {
        return std::vector<Sample>{Sample{{}, static_cast<double>(view->snapshot()->stats().admitted)}};
      }));
  GK_RETURN_IF_ERROR(
      registry.AddCallbackCounter("gangkeeper_broker_preempted_total", "Gangs chosen as preemption victims.", {}, [view] {
        return std::vector<Sample>{Sample{{}, static_cast<double>(view->snapshot()->stats().preempted)}};
      }));
  return registry.AddCallbackGauge("gangkeeper_broker_tracked_workloads", "Workloads the broker tracks.", {}, [view] {
    return std::vector<Sample>{Sample{{}, static_cast<double>(view->snapshot()->workload_count())}};
  });
}

}  // namespace

absl::Status RegisterBrokerMetrics(metrics::Registry& registry, const broker::SnapshotSource* view,
                                   const broker::WorkloadCounters* counters) {
  GK_RETURN_IF_ERROR(RegisterQueueGauges(registry, view));
  GK_RETURN_IF_ERROR(RegisterQuotaGauges(registry, view));
  return RegisterWorkloadCounters(registry, view, counters);
}

absl::Status RegisterJournalMetrics(metrics::Registry& registry, const store::Journal* journal) {
  struct One {
    const char* name;
    const char* help;
    bool counter;
    double (*value)(const store::JournalStats&);
  };
  static constexpr One kAll[] = {
      {"gangkeeper_store_journal_appends_total", "Journal appends acknowledged (one per broker batch), each durable.", true,
       [](const store::JournalStats& s) { return static_cast<double>(s.log.appends); }},
      {"gangkeeper_store_journal_fsyncs_total", "Journal writes, each followed by one fsync (group commit).", true,
       [](const store::JournalStats& s) { return static_cast<double>(s.log.groups); }},
      {"gangkeeper_store_journal_bytes_total", "Bytes written to the journal.", true,
       [](const store::JournalStats& s) { return static_cast<double>(s.log.bytes); }},
      {"gangkeeper_store_journal_segments", "Journal segment files kept.", false,
       [](const store::JournalStats& s) { return static_cast<double>(s.log.segments); }},
      {"gangkeeper_store_journal_next_record", "The number the next journal record gets.", false,
       [](const store::JournalStats& s) { return static_cast<double>(s.log.next_seq); }},
      {"gangkeeper_store_journal_snapshots_total", "Snapshots written.", true,
       [](const store::JournalStats& s) { return static_cast<double>(s.snapshots); }},
      {"gangkeeper_store_journal_snapshot_failures_total", "Snapshots that could not be written.", true,
       [](const store::JournalStats& s) { return static_cast<double>(s.snapshot_failures); }},
      {"gangkeeper_store_journal_last_snapshot_bytes", "Size of the last snapshot.", false,
       [](const store::JournalStats& s) { return static_cast<double>(s.last_snapshot_bytes); }},
      {"gangkeeper_store_journal_last_snapshot_seconds", "Time the last snapshot took to write.", false,
       [](const store::JournalStats& s) { return absl::ToDoubleSeconds(s.last_snapshot_took); }},
      {"gangkeeper_store_journal_records_since_snapshot", "Journal records a restart would replay.", false,
       [](const store::JournalStats& s) { return static_cast<double>(s.records_since_snapshot); }},
  };
  for (const One& m : kAll) {
    auto value = m.value;
    auto collect = [journal, value] { return std::vector<Sample>{Sample{{}, value(journal->stats())}}; };
    absl::Status s = m.counter ? registry.AddCallbackCounter(m.name, m.help, {}, collect)
                               : registry.AddCallbackGauge(m.name, m.help, {}, collect);
    if (!s.ok()) return s;
  }
  return registry.AddCallbackGauge("gangkeeper_store_journal_healthy",
                                   "1 while the journal accepts writes; 0 after a write error (restart needed).", {},
                                   [journal] {
                                     return std::vector<Sample>{Sample{{}, journal->health().ok() ? 1.0 : 0.0}};
                                   });
}

absl::Status RegisterAuditMetrics(metrics::Registry& registry, const audit::AuditLog* audit_log,
                                  const base::Clock* clock, const audit::DenialAggregator* denials) {
  absl::Status s;
  // One unlabelled sample, counter or gauge.
  auto add = [&](bool counter, const char* name, const char* help, std::function<double()> value) {
    if (!s.ok()) return;
    metrics::SampleCallback samples = [value = std::move(value)] { return std::vector<Sample>{Sample{{}, value()}}; };
    s = counter ? registry.AddCallbackCounter(name, help, {}, std::move(samples))
                : registry.AddCallbackGauge(name, help, {}, std::move(samples));
  };
  add(true, "gangkeeper_audit_events_total", "Audit events written (the last seq), including those rotated away.",
      [audit_log] { return static_cast<double>(audit_log->stats().log.next_seq - 1); });
  add(true, "gangkeeper_audit_failed_appends_total", "Audit appends that failed (the journal keeps their decisions).",
      [audit_log] { return static_cast<double>(audit_log->stats().failed_appends); });
  add(false, "gangkeeper_audit_healthy", "1 while the audit log accepts writes.",
      [audit_log] { return audit_log->health().ok() ? 1.0 : 0.0; });
  add(false, "gangkeeper_audit_indexed_events", "Audit events held in the in-memory query index (older ones are scanned).",
      [audit_log] { return static_cast<double>(audit_log->stats().indexed_events); });
  add(true, "gangkeeper_audit_retention_forced_total",
      "Times the size cap (--audit-max-mib) removed audit events younger than --audit-min-retention (each also "
      "logged as an error and recorded as an audit.retention_forced event).",
      [audit_log] { return static_cast<double>(audit_log->stats().retention_forced); });
  add(true, "gangkeeper_audit_retention_forced_events_total",
      "Audit events younger than --audit-min-retention that the size cap removed.",
      [audit_log] { return static_cast<double>(audit_log->stats().retention_forced_events); });
  add(false, "gangkeeper_audit_oldest_event_age_seconds",
      "Age of the oldest audit event kept: how far back the history reaches (0 when empty).", [audit_log, clock] {
        const std::optional<absl::Time> oldest = audit_log->stats().oldest_event;
        return oldest.has_value() ? absl::ToDoubleSeconds(clock->Now() - *oldest) : 0.0;
      });
  if (denials == nullptr) return s;
  add(true, "gangkeeper_audit_denials_suppressed_total",
      "Review denials over the audit rate limit that were only counted (summarised in review.denials_suppressed "
      "events).",
      [denials] { return static_cast<double>(denials->stats().suppressed); });
  add(true, "gangkeeper_audit_denials_aggregated_total",
      "Repeated review denials folded into one aggregated review.denied event per source, object and reason.",
      [denials] { return static_cast<double>(denials->stats().aggregated); });
  return s;
}

}  // namespace gangkeeper::api
