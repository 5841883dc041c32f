// gangkeeper store: the broker's journal and snapshots in etcd (DESIGN §9,
// issue #10), for several replicas sharing one durable state (replica/).
//
// Keys under the prefix P (--etcd-prefix, default "/gangkeeper/"):
//   P journal/<record, 20 digits>  one DurableBatch per record (the same
//                                  payload as the file journal,
//                                  state_codec.h)
//   P snapshot                     the manifest of the newest snapshot:
//                                  {"position","chunks","bytes","crc32c"}
//   P snapshots/<position, 20 digits>/<chunk, 6 digits>
//                                  the snapshot's EncodeState payload, cut
//                                  into chunks below etcd's request limit
//   P intake-applied               the position up to which the intake
//                                  (intake.h) is applied, in decimal: put
//                                  in the transaction of the record that
//                                  applied it
//   keys the owner adds to a record's transaction (record_ops below: the
//   node's audit stream, node/audit_stream.h) and deletes with the records
//   (trim_ops)
//
// Only the leader appends. Each append is one transaction that compares
// the leader's fence (the leader key still has this term's create
// revision) and that the record's key is absent, and puts the record: a
// batch (a gang admitted whole, a preemption with its victims) is durable
// whole or not at all, numbering is gapless, and a replica that lost the
// lease can never append again. When etcd does not answer, whether the
// transaction happened is found out by reading the record back (same
// payload: it did), so nothing is acknowledged twice or lost.
//
// ReadState() reads the newest snapshot and every record after it at one
// etcd revision: the state a new leader starts from. A new leader must read
// it after its term began (its leader key exists): from then on the old
// leader's fenced writes fail, so nothing it wrote can be missed. Followers
// fold the records they watch with store::ApplyBatch.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::store {

struct EtcdJournalOptions {
  std::string prefix = "/gangkeeper/";
  // A record (one broker batch) larger than this is refused (latched) with
  // a message naming etcd's --max-request-bytes (1.5 MiB by default).
  size_t max_record_bytes = 1400u << 10;
  size_t snapshot_chunk_bytes = 1u << 20;
  // Records covered by the snapshot are deleted only this many records
  // behind it, so a replica that follows a little behind still reads them.
  uint64_t keep_records = 10'000;
  // More operations for the transaction that writes `record` (the node puts
  // the record's audit events there: atomic with the record and fenced by
  // the same term, so a deposed leader writes none). Called under the
  // journal's lock (again when an attempt moves to the next record number);
  // its keys and values count towards max_record_bytes.
  std::function<std::vector<etcd::Op>(const broker::DurableBatch& batch, uint64_t record)> record_ops;
  // More operations for the snapshot's transaction that deletes the records
  // before `first_kept`: what the owner keeps beside them.
  std::function<std::vector<etcd::Op>(uint64_t first_kept)> trim_ops;
};

struct EtcdRecovery {
  uint64_t snapshot_position = 0;
  uint64_t replayed_records = 0;
  uint64_t workloads = 0;
  uint64_t next_record = 1;
  int64_t revision = 0;         // the etcd revision the state was read at
  int64_t intake_revision = 0;  // intake events up to this position are applied (intake.h)
  absl::Duration took;
};

struct EtcdJournalStats {
  uint64_t appends = 0;
  uint64_t append_failures = 0;
  uint64_t unknown_outcomes = 0;  // resolved by reading the record back
  uint64_t snapshots = 0;
  uint64_t last_snapshot_position = 0;
  uint64_t last_snapshot_bytes = 0;
  uint64_t next_record = 1;
};

// The keys of the layout above.
std::string JournalKey(const std::string& prefix, uint64_t record);
std::string JournalPrefix(const std::string& prefix);
std::string IntakeAppliedKey(const std::string& prefix);
// The record number of a journal key; nullopt for any other key.
std::optional<uint64_t> RecordOfKey(const std::string& prefix, const std::string& key);

// Reads the durable state from etcd: the newest snapshot and every record
// after it, all at one revision. DataLoss when a record or the snapshot
// does not decode, or records are missing (a gap).
[[nodiscard]] absl::StatusOr<broker::DurableState> ReadState(etcd::Client* client, const std::string& prefix,
                                                             EtcdRecovery* recovery);

class EtcdJournal final : public broker::StateSink {
 public:
  // `client` must outlive the journal. Appends start at `next_record`
  // (EtcdRecovery::next_record of the state the broker starts from).
  // `fence` is the compare every write carries (etcd::Elector::Fence of
  // this term); without one, appends and snapshots are refused: only a
  // leader writes, and a new term gets a new EtcdJournal.
  EtcdJournal(etcd::Client* client, EtcdJournalOptions options, uint64_t next_record,
              std::optional<etcd::Compare> fence);

  // StateSink: one transaction per batch; the record number. A batch that
  // only moves the intake on writes no record (the last record's number).
  // FailedPrecondition, latched, when the fence or the record's key says
  // another replica leads; Unavailable when etcd cannot be reached (the
  // broker keeps the changes and retries).
  absl::StatusOr<uint64_t> Append(const broker::DurableBatch& batch) override;

  // Writes `snap` (durable, newer than the last) as the newest snapshot,
  // then deletes the older snapshot and the records keep_records behind it.
  [[nodiscard]] absl::Status WriteSnapshot(const broker::Snapshot& snap);

  // OK, or the latched reason this replica may no longer append.
  absl::Status health() const;
  EtcdJournalStats stats() const;

 private:
  // Writes `payload` as the next record (none when empty) with `owned`
  // (record_ops for next_record_) and the intake cursor when `intake` is
  // past the last one written.
  absl::Status WriteLocked(const broker::DurableBatch& batch, const std::string& payload,
                           std::vector<etcd::Op> owned, int64_t intake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  etcd::Client* const client_;
  const EtcdJournalOptions options_;
  mutable absl::Mutex mu_;
  uint64_t next_record_ ABSL_GUARDED_BY(mu_);
  int64_t intake_written_ ABSL_GUARDED_BY(mu_) = 0;
  const std::optional<etcd::Compare> fence_;
  absl::Status latched_ ABSL_GUARDED_BY(mu_);
  EtcdJournalStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Mutex snapshot_mu_;  // one snapshot at a time
};

}  // namespace gangkeeper::store
