// gangkeeper: the broker's state as Prometheus metrics, with Kueue's names
// and labels where Kueue has the metric (KUEUE-SEMANTICS §Observability),
// so that existing Kueue dashboards work. Computed from the broker's
// published snapshot at scrape time; labels never name workloads.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/denials.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/counters.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/store/journal.h"

namespace gangkeeper::api {

// The replica's role as Kueue's `replica_role` label says it: "leader",
// "follower", or "standalone" (one instance, no election). Asked on every
// scrape; must be thread-safe and quick. Null means "standalone".
using ReplicaRole = std::function<std::string()>;

// Kueue's families (ClusterQueue, LocalQueue and cohort gauges from `view`'s
// snapshots, the workload counters from `counters`, which must observe the
// broker: BrokerOptions::observers), each with `replica_role`, and
// gangkeeper's broker totals. Both must outlive `registry`'s scrapes.
[[nodiscard]] absl::Status RegisterBrokerMetrics(metrics::Registry& registry, const broker::SnapshotSource* view,
                                                 const broker::WorkloadCounters* counters, ReplicaRole role = nullptr);

// What kueue_build_info reports.
struct BuildInfo {
  std::string version;     // the project version
  std::string commit;      // the git commit built, or "unknown"
  std::string build_date;  // when the build was configured (UTC, RFC 3339)
  std::string compiler;    // e.g. "GNU 12.2.0"
  std::string platform;    // e.g. "linux/x86_64"
};
[[nodiscard]] absl::Status RegisterBuildInfo(metrics::Registry& registry, const BuildInfo& info);

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
