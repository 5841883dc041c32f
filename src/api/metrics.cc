// gangkeeper: journal and audit metrics (see metrics.h; Kueue's families are in kueue_metrics.cc).
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

}  // namespace

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
