// gangkeeper node: the broker's side of the audit log. The events of a
// journal record's state changes, AuditedJournal (the broker's StateSink:
// the journal, then its events) and CatchUp (the events a crash left
// unwritten). See audit_events.h.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gangkeeper/node/audit_events.h"

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/state_codec.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::node {
namespace {

using nlohmann::json;
using audit::Event;
using audit::AuditLog;
using audit::DecodeEvent;

json AuditQuantitiesJson(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

json AuditAssignmentJson(const broker::Assignment& a) {
  json pod_sets = json::array();
  for (const broker::PodSetAssignment& ps : a.pod_sets) {
    pod_sets.push_back({{"name", ps.name}, {"count", ps.count}, {"flavors", ps.flavors}, {"usage", AuditQuantitiesJson(ps.usage)}});
  }
  json usage = json::object();
  for (const auto& [fr, q] : a.usage) usage[fr.flavor][fr.resource] = q.Format();
  return {{"clusterQueue", a.cluster_queue}, {"podSets", pod_sets}, {"usage", usage},
          {"borrowingLevel", a.borrowing_level}};
}

const char* AuditActionOf(const broker::StateChange& c) {
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
    case T::kReviewed: return "review";  // legacy: never reached (EventsFor keeps the review's own event)
  }
  return "workload.changed";
}

// The reason of a change that carries none of its own (every event has one).
std::string AuditDefaultReason(broker::StateChange::Type t) {
  using T = broker::StateChange::Type;
  switch (t) {
    case T::kRegistered: return "Queued";
    case T::kUpdated: return "Updated";
    case T::kRemoved: return "Deleted";
    case T::kAdmitted: return "Admitted";
    case T::kReleased: return "Released";
    case T::kReleaseFailed: return "ReleaseFailed";
    case T::kEvicted: return "Evicted";
    case T::kRequeued: return "Requeued";
    case T::kFinished: return "Finished";
    case T::kPoliciesChanged: return "PoliciesChanged";
    case T::kReviewed: return "Reviewed";
  }
  return "Changed";
}

}  // namespace

std::vector<Event> EventsFor(const std::vector<broker::StateChange>& changes, uint64_t journal_record) {
  std::vector<Event> out;
  out.reserve(changes.size());
  for (const broker::StateChange& c : changes) {
    if (c.type == broker::StateChange::Type::kReviewed) {
      // Legacy (records written before the audit stream): a replica's
      // webhook wrote the event and the leader's journal carried it; it is
      // kept as it was.
      absl::StatusOr<Event> reviewed = DecodeEvent(c.message, 0);
      if (!reviewed.ok()) {
        base::GetLogger("audit")->error("audit: journal record {}: a review's event does not decode ({}); skipped",
                                        journal_record, reviewed.status().message());
        continue;
      }
      out.push_back(*std::move(reviewed));
      continue;
    }
    if (c.unconfirmed) continue;  // nothing was decided on a review alone
    Event e;
    e.time = c.time;
    e.actor = c.actor.empty() ? "gangkeeper" : c.actor;
    e.actor_claimed = !c.actor.empty() && c.actor_claimed;  // a review's userInfo, not verified
    e.action = AuditActionOf(c);
    e.journal_record = journal_record;
    json details = json::object();
    if (c.type == broker::StateChange::Type::kPoliciesChanged) {
      e.kind = "PolicySet";
      if (!c.message.empty()) details["change"] = c.message;  // "PUT ClusterQueue team-a"
    } else {
      // The object's own kind ("Job", "PyTorchJob", "Pod", or "PodGroup"
      // for a pod group): a Job and a PyTorchJob may share a name.
      e.kind = broker::KindName(c.key);
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
                    : "freed"] = AuditAssignmentJson(*c.assignment);
      }
      if (!c.preemptor.name.empty()) {
        details["preemptor"] = broker::KeyString(c.preemptor);
      }
      if (!c.message.empty()) details["message"] = c.message;
    }
    e.reason = c.reason.empty() ? AuditDefaultReason(c.type) : c.reason;
    e.details = details.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<std::vector<Event>> EventsOfRecord(absl::string_view payload, uint64_t record) {
  broker::DurableState scratch;
  std::vector<broker::StateChange> changes;
  if (absl::Status s = store::ApplyBatch(payload, record, &scratch, &changes); !s.ok()) {
    return absl::DataLossError(absl::StrCat("journal record ", record, ": ", s.message()));
  }
  std::vector<Event> events = EventsFor(changes, record);
  // A legacy review's event comes as its replica wrote it, without a
  // record: it carries the one it arrived in, so that the audit log's last
  // record (AuditLog::Open reads it back) is this one.
  for (Event& e : events) {
    if (e.journal_record == 0) e.journal_record = record;
  }
  return events;
}

absl::Status CatchUp(const store::Journal& journal, AuditLog* audit, uint64_t* appended) {
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
  Complete();  // a batch whose Complete never came (not from the broker)
  absl::StatusOr<uint64_t> record = journal_->Append(batch);
  if (!record.ok()) return record;
  pending_record_ = *record;
  pending_ = EventsFor(batch.changes, *record);
  audit_->Announce(*record);
  return record;
}

void AuditedJournal::Complete() {
  if (pending_record_ == 0) return;
  const uint64_t record = std::exchange(pending_record_, 0);
  std::vector<audit::Event> events = std::exchange(pending_, {});
  if (!events.empty()) {
    absl::StatusOr<uint64_t> audited = audit_->Append(events);
    if (!audited.ok()) {
      base::GetLogger("audit")->error("audit: events of journal record {} not written ({}); the next start writes them",
                                      record, audited.status().message());
    }
  }
  audit_->Settle(record);
}

}  // namespace gangkeeper::node
