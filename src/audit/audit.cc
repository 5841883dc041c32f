// gangkeeper audit: the audit log (see audit.h).
#include "gangkeeper/audit/audit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/log.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::audit {
namespace {

using nlohmann::json;

std::string Rfc3339Micros(absl::Time t) { return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone()); }

json QuantitiesJson(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

json AssignmentJson(const broker::Assignment& a) {
  json pod_sets = json::array();
  for (const broker::PodSetAssignment& ps : a.pod_sets) {
    pod_sets.push_back({{"name", ps.name}, {"count", ps.count}, {"flavors", ps.flavors}, {"usage", QuantitiesJson(ps.usage)}});
  }
  json usage = json::object();
  for (const auto& [fr, q] : a.usage) usage[fr.flavor][fr.resource] = q.Format();
  return {{"clusterQueue", a.cluster_queue}, {"podSets", pod_sets}, {"usage", usage},
          {"borrowingLevel", a.borrowing_level}};
}

const char* ActionOf(const broker::StateChange& c) {
  using T = broker::StateChange::Type;
  switch (c.type) {
    case T::kRegistered: return "workload.pending";
    case T::kUpdated: return "workload.updated";
    case T::kRemoved: return "workload.deleted";
    case T::kAdmitted: return "workload.admitted";
    case T::kReleased: return "workload.released";
    case T::kReleaseFailed: return "workload.release_failed";
    case T::kEvicted: return c.preemptor.name.empty() ? "workload.evicted" : "workload.preempted";
    case T::kRequeued: return "workload.requeued";
    case T::kFinished: return "workload.finished";
    case T::kPoliciesChanged: return "quota.changed";
  }
  return "workload.changed";
}

}  // namespace

std::string EncodeEvent(const Event& e) {
  // Fields in DESIGN §8's order.
  nlohmann::ordered_json j = {{"seq", e.seq},
            {"time", Rfc3339Micros(e.time)},
            {"actor", e.actor},
            {"action", e.action},
            {"object", {{"kind", e.kind}, {"namespace", e.namespace_name}, {"name", e.name}, {"uid", e.uid}}},
            {"clusterQueue", e.cluster_queue},
            {"reason", e.reason}};
  nlohmann::ordered_json details =
      e.details.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(e.details, nullptr, false);
  j["details"] = details.is_discarded() ? nlohmann::ordered_json(e.details) : details;
  if (e.journal_record != 0) j["journal"] = e.journal_record;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<Event> DecodeEvent(absl::string_view text, uint64_t seq) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, " is not a JSON object"));
  }
  auto str = [&](const json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Event e;
  e.seq = seq;  // the record number is the truth
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", str(j, "time"), absl::UTCTimeZone(), &e.time, &err)) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, ": time: ", err));
  }
  e.actor = str(j, "actor");
  e.action = str(j, "action");
  if (auto o = j.find("object"); o != j.end() && o->is_object()) {
    e.kind = str(*o, "kind");
    e.namespace_name = str(*o, "namespace");
    e.name = str(*o, "name");
    e.uid = str(*o, "uid");
  }
  e.cluster_queue = str(j, "clusterQueue");
  e.reason = str(j, "reason");
  if (auto d = j.find("details"); d != j.end()) e.details = d->dump();
  if (auto r = j.find("journal"); r != j.end() && r->is_number_unsigned()) e.journal_record = r->get<uint64_t>();
  return e;
}

std::vector<Event> EventsFor(const std::vector<broker::StateChange>& changes, uint64_t journal_record) {
  std::vector<Event> out;
  out.reserve(changes.size());
  for (const broker::StateChange& c : changes) {
    Event e;
    e.time = c.time;
    e.actor = c.actor.empty() ? "gangkeeper" : c.actor;
    e.action = ActionOf(c);
    e.journal_record = journal_record;
    json details = json::object();
    if (c.type == broker::StateChange::Type::kPoliciesChanged) {
      e.kind = "PolicySet";
      if (!c.message.empty()) details["change"] = c.message;  // "PUT ClusterQueue team-a"
    } else {
      e.kind = "Workload";
      e.namespace_name = c.key.namespace_name;
      e.name = c.key.name;
      e.uid = c.uid;
      e.cluster_queue = c.cluster_queue;
      if (c.workload != nullptr) {
        details["objectKind"] = workload::InfoFor(c.workload->kind).name;
        details["pods"] = c.workload->TotalPods();
        if (!c.workload->queue_name.empty()) details["localQueue"] = c.workload->queue_name;
        details["priority"] = c.workload->priority;
      }
      if (c.assignment.has_value()) {
        // Admissions hold this quota from now on; frees give it back.
        details[c.type == broker::StateChange::Type::kAdmitted || c.type == broker::StateChange::Type::kEvicted ||
                        c.type == broker::StateChange::Type::kReleased
                    ? "assignment"
                    : "freed"] = AssignmentJson(*c.assignment);
      }
      if (!c.preemptor.name.empty()) {
        details["preemptor"] = absl::StrCat(c.preemptor.namespace_name, "/", c.preemptor.name);
      }
      if (!c.message.empty()) details["message"] = c.message;
    }
    e.reason = c.reason;
    e.details = details.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(e));
  }
  return out;
}

AuditLog::AuditLog(AuditOptions options, std::unique_ptr<store::SegmentedLog> log, uint64_t last_journal_record)
    : options_(std::move(options)), log_(std::move(log)), last_journal_record_(last_journal_record) {}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options, store::LogRecovery* recovery) {
  store::LogOptions lo;
  lo.kind = "audit";
  lo.segment_bytes = options.segment_bytes;
  lo.truncate_corruption = options.truncate_corruption;
  store::FileSystem* fs = options.fs != nullptr ? options.fs : store::DefaultFileSystem();
  absl::StatusOr<std::unique_ptr<store::SegmentedLog>> log = store::SegmentedLog::Open(fs, options.dir, lo, recovery);
  if (!log.ok()) return log.status();
  // The journal record of the newest broker event: read back from the last
  // segments (a broker event comes with every batch, so it is near the end).
  uint64_t last_record = 0;
  const store::LogStats st = (*log)->stats();
  if (st.next_seq > st.first_seq) {
    const uint64_t window = 100'000;
    const uint64_t from = st.next_seq - st.first_seq > window ? st.next_seq - window : st.first_seq;
    absl::Status s = (*log)->Read(from, [&](uint64_t seq, absl::string_view payload) {
      absl::StatusOr<Event> e = DecodeEvent(payload, seq);
      if (e.ok()) last_record = std::max(last_record, e->journal_record);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  auto out = std::unique_ptr<AuditLog>(new AuditLog(std::move(options), *std::move(log), last_record));
  absl::MutexLock lock(&out->mu_);
  out->RetainLocked();
  return out;
}

absl::StatusOr<uint64_t> AuditLog::Append(const std::vector<Event>& events) {
  if (events.empty()) return log_->next_seq();
  // Appends are serialised here, so the seq written inside each event is
  // the record number the log gives it.
  absl::MutexLock lock(&mu_);
  const uint64_t first = log_->next_seq();
  std::vector<std::string> lines;
  lines.reserve(events.size());
  uint64_t record = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    Event numbered = events[i];
    numbered.seq = first + i;
    lines.push_back(EncodeEvent(numbered));
    record = std::max(record, events[i].journal_record);
  }
  std::vector<absl::string_view> views(lines.begin(), lines.end());
  absl::StatusOr<uint64_t> seq = log_->Append(views);
  if (!seq.ok()) {
    ++failed_appends_;
    return seq.status();
  }
  last_journal_record_ = std::max(last_journal_record_, record);
  RetainLocked();
  return *seq;
}

void AuditLog::RetainLocked() {
  // Past max_bytes, whole segments go from the oldest (never the last).
  std::vector<store::SegmentInfo> segments = log_->Segments();
  uint64_t total = 0;
  for (const store::SegmentInfo& s : segments) total += s.bytes;
  size_t drop = 0;
  while (drop + 1 < segments.size() && total > options_.max_bytes) total -= segments[drop++].bytes;
  if (drop > 0) (void)log_->DropBefore(segments[drop].first_seq);
}

absl::StatusOr<Page> AuditLog::Find(const Query& q) const {
  const size_t limit = std::clamp<size_t>(q.limit, 1, 1000);
  Page page;
  const absl::Status stop = absl::CancelledError("page full");
  absl::Status s = log_->Read(q.after + 1, [&](uint64_t seq, absl::string_view payload) {
    absl::StatusOr<Event> e = DecodeEvent(payload, seq);
    if (!e.ok()) return e.status();
    if (q.until.has_value() && e->time > *q.until) return absl::OkStatus();
    if (q.since.has_value() && e->time < *q.since) return absl::OkStatus();
    if (!q.namespace_name.empty() && e->namespace_name != q.namespace_name) return absl::OkStatus();
    if (!q.name.empty() && e->name != q.name) return absl::OkStatus();
    if (!q.kind.empty() && e->kind != q.kind) return absl::OkStatus();
    if (!q.action.empty() && e->action != q.action) return absl::OkStatus();
    if (!q.actor.empty() && e->actor != q.actor) return absl::OkStatus();
    if (!q.cluster_queue.empty() && e->cluster_queue != q.cluster_queue) return absl::OkStatus();
    if (page.events.size() == limit) {
      page.next = page.events.back().seq;
      return stop;
    }
    page.events.push_back(*std::move(e));
    return absl::OkStatus();
  });
  if (!s.ok() && s != stop) return s;
  return page;
}

uint64_t AuditLog::last_journal_record() const {
  absl::MutexLock lock(&mu_);
  return last_journal_record_;
}

AuditStats AuditLog::stats() const {
  AuditStats out;
  out.log = log_->stats();
  absl::MutexLock lock(&mu_);
  out.last_journal_record = last_journal_record_;
  out.failed_appends = failed_appends_;
  return out;
}

absl::Status CatchUp(const broker::Journal& journal, AuditLog* audit, uint64_t* appended) {
  *appended = 0;
  const uint64_t first_kept = journal.stats().log.first_seq;
  const uint64_t last = audit->last_journal_record();
  if (last + 1 < first_kept && last != 0) {
    base::GetLogger("audit")->error(
        "audit: the events of journal records {} to {} were never written and the journal no longer has them",
        last + 1, first_kept - 1);
  }
  return journal.ReadChanges(audit->last_journal_record(),
                             [&](uint64_t record, const std::vector<broker::StateChange>& changes) {
                               std::vector<Event> events = EventsFor(changes, record);
                               if (events.empty()) return absl::OkStatus();
                               absl::StatusOr<uint64_t> s = audit->Append(events);
                               if (!s.ok()) return s.status();
                               *appended += events.size();
                               return absl::OkStatus();
                             });
}

absl::StatusOr<uint64_t> AuditedJournal::Append(const broker::DurableBatch& batch) {
  absl::StatusOr<uint64_t> record = journal_->Append(batch);
  if (!record.ok()) return record;
  absl::StatusOr<uint64_t> audited = audit_->Append(EventsFor(batch.changes, *record));
  if (!audited.ok()) {
    base::GetLogger("audit")->error("audit: events of journal record {} not written ({}); the next start writes them",
                                    *record, audited.status().message());
  }
  return record;
}

}  // namespace gangkeeper::audit
