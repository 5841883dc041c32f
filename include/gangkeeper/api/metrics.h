// gangkeeper: the broker's state as Prometheus metrics, with Kueue's names
// and labels where Kueue has the metric (KUEUE-SEMANTICS §Observability),
// so that existing Kueue dashboards work. Computed from the broker's
// published snapshot at scrape time; labels never name workloads.
#pragma once

#include "absl/status/status.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/denials.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/counters.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/store/journal.h"

namespace gangkeeper::api {

// Queue and quota gauges from `view`'s snapshots, Kueue's workload counters
// from `counters` (which must observe the broker: BrokerOptions::observers).
// Both must outlive `registry`'s scrapes.
[[nodiscard]] absl::Status RegisterBrokerMetrics(metrics::Registry& registry, const broker::SnapshotSource* view,
                                                 const broker::WorkloadCounters* counters);

// gangkeeper_store_journal_*: appends, fsyncs (one per group commit), bytes,
// snapshots, whether the journal accepts writes. `journal` outlives the
// registry's scrapes.
[[nodiscard]] absl::Status RegisterJournalMetrics(metrics::Registry& registry, const store::Journal* journal);

// gangkeeper_audit_*: events written, failed appends, whether the audit log
// accepts writes, retention that removed events younger than the minimum,
// the oldest event's age; with `denials`, the review denials only counted
// or aggregated. All three (and `clock`, which ages the oldest event)
// outlive the registry's scrapes.
[[nodiscard]] absl::Status RegisterAuditMetrics(metrics::Registry& registry, const audit::AuditLog* audit_log,
                                                const base::Clock* clock,
                                                const audit::DenialAggregator* denials = nullptr);

}  // namespace gangkeeper::api
