// gangkeeper node: the broker's decisions as audit events (DESIGN §8).
//
// The audit module keeps the log and knows no broker types; the node, which
// sees both, turns the broker's durable batches into audit::Events:
//   - with the file journal, AuditedJournal is the broker's StateSink: the
//     journal record first (the truth), then, once the batch's orders went
//     out and before it is acknowledged, its events, each carrying the
//     journal record number. If the process dies between the two, CatchUp()
//     at the next start appends the events of the journal records the log
//     does not have yet, so no decision is missing and none is there twice;
//   - with etcd, the leader writes each record's events to the audit stream
//     in the record's own transaction (audit_stream.h).
// Admission-review denials never pass through the broker: the webhook's
// denial auditing appends them to the log (file journal) or to the stream.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/store/journal.h"

namespace gangkeeper::node {

// The events of one journal record's changes. A legacy kReviewed change
// (written before the audit stream, state_codec's old records) gives the
// review's event as its replica encoded it.
std::vector<audit::Event> EventsFor(const std::vector<broker::StateChange>& changes, uint64_t journal_record);

// The events of one encoded journal record (store::EncodeBatch's payload,
// as the file journal and etcd hold it), each carrying `record`.
[[nodiscard]] absl::StatusOr<std::vector<audit::Event>> EventsOfRecord(absl::string_view payload, uint64_t record);

// Appends the events of the journal records after audit->last_journal_record().
[[nodiscard]] absl::Status CatchUp(const store::Journal& journal, audit::AuditLog* audit, uint64_t* appended);

// The broker's StateSink with the file journal: Append writes the journal
// record, Complete its events to the audit log (a release is sent without
// waiting for the second write and fsync; the batch is acknowledged after
// both). A failed audit append does not fail the batch (the journal has it;
// the next start's CatchUp writes its events) but shows in the audit log's
// health(). Used by the broker's thread only.
class AuditedJournal final : public broker::StateSink {
 public:
  AuditedJournal(store::Journal* journal, audit::AuditLog* audit) : journal_(journal), audit_(audit) {}
  absl::StatusOr<uint64_t> Append(const broker::DurableBatch& batch) override;
  void Complete() override;

 private:
  store::Journal* journal_;
  audit::AuditLog* audit_;
  uint64_t pending_record_ = 0;        // the journal record of pending_
  std::vector<audit::Event> pending_;  // its events, for Complete
};

}  // namespace gangkeeper::node
