// gangkeeper store: the embedded durable store of the broker's state
// (DESIGN §9, issue #8), in --data-dir:
//   LOCK         held while a gangkeeper uses the directory
//   journal/     a SegmentedLog (log.h) of broker::DurableBatch records,
//                encoded by state_codec.h (src/store/FORMAT.md §4)
//   snapshots/   whole broker::DurableStates, written atomically
//                (snapshot_file.h; FORMAT.md §5)
//
// Journal is the broker's StateSink: every batch is one record, durable
// (fsynced, group-committed with concurrent appends) before Append returns.
// Open() recovers: the newest valid snapshot, then every record after it;
// a torn tail is cut, a corrupt record in the middle stops start-up unless
// JournalOptions::truncate_corruption. Snapshots are written from the
// broker's published snapshots when enough records or time have passed,
// off the broker's thread; afterwards the journal segments the two newest
// snapshots cover are removed. A failed write latches (health()): no later
// append succeeds until a restart recovers from what is on disk.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/log.h"

namespace gangkeeper::store {

struct JournalOptions {
  std::string data_dir = "data";
  FileSystem* fs = nullptr;  // nullptr: the POSIX file system
  // --recover=truncate: cut the journal at a corrupt record in the middle
  // (losing what follows) instead of refusing to start.
  bool truncate_corruption = false;
  uint64_t segment_bytes = 64ull << 20;
  // A snapshot is due after this many records, or this much time with at
  // least one record, since the last one.
  uint64_t snapshot_every_records = 50'000;
  absl::Duration snapshot_every = absl::Minutes(5);
  int keep_snapshots = 2;
};

// What Open() found.
struct JournalRecovery {
  uint64_t snapshot_position = 0;  // 0: started without a snapshot
  uint64_t replayed_records = 0;   // journal records after the snapshot
  uint64_t workloads = 0;          // tracked workloads recovered
  uint64_t next_record = 0;        // the number the next record gets
  LogRecovery log;          // torn tail / corruption repairs
  std::vector<std::string> notes;  // every repair and skipped file, for the log
  absl::Duration took;
};

struct JournalStats {
  LogStats log;
  uint64_t snapshots = 0;
  uint64_t snapshot_failures = 0;
  uint64_t last_snapshot_position = 0;
  uint64_t last_snapshot_bytes = 0;
  absl::Duration last_snapshot_took;
  uint64_t records_since_snapshot = 0;
};

class Journal final : public broker::StateSink {
 public:
  // Locks and recovers `options.data_dir`. FailedPrecondition when another
  // process holds it; DataLoss on corruption that needs a decision (the
  // message says which file, where, and the flag that repairs it).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Journal>> Open(JournalOptions options,
                                                                     JournalRecovery* recovery);
  ~Journal() override;  // stops the snapshot thread
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // The state recovered by Open (for Broker::Create); empty afterwards.
  broker::DurableState TakeRecovered();

  // StateSink: one record per batch, durable on return; its record number.
  absl::StatusOr<uint64_t> Append(const broker::DurableBatch& batch) override;

  // The changes of every record after `after`, in order (the audit log
  // catches up with them after a crash). DataLoss on a bad record.
  [[nodiscard]] absl::Status ReadChanges(
      uint64_t after,
      const std::function<absl::Status(uint64_t record, const std::vector<broker::StateChange>&)>& f) const;

  // Writes `snap` as a snapshot when it is durable and newer than the last
  // one, then removes the journal segments the kept snapshots cover.
  [[nodiscard]] absl::Status WriteSnapshot(const broker::Snapshot& snap);
  bool SnapshotDue(absl::Time now) const;
  // Checks every `period` whether a snapshot is due and writes one of
  // `source()` (off the caller's thread) until StopSnapshots().
  void StartSnapshots(std::function<std::shared_ptr<const broker::Snapshot>()> source, const base::Clock* clock,
                      absl::Duration period = absl::Seconds(1));
  void StopSnapshots();

  // Records from `floor()` on are kept even when snapshots cover them (the
  // audit log still needs them). Set before snapshots start.
  void SetRetentionFloor(std::function<uint64_t()> floor) { floor_ = std::move(floor); }

  // OK, or the latched write error.
  absl::Status health() const;
  JournalStats stats() const;
  const std::string& data_dir() const { return options_.data_dir; }

 private:
  Journal(JournalOptions options, std::unique_ptr<FileLock> lock, std::unique_ptr<SegmentedLog> log);

  JournalOptions options_;
  std::unique_ptr<FileLock> lock_;
  std::unique_ptr<SegmentedLog> log_;
  std::string snapshot_dir_;
  broker::DurableState recovered_;

  mutable absl::Mutex mu_;
  uint64_t records_since_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_snapshot_time_ ABSL_GUARDED_BY(mu_);
  bool have_snapshot_time_ ABSL_GUARDED_BY(mu_) = false;
  JournalStats stats_ ABSL_GUARDED_BY(mu_);

  std::function<uint64_t()> floor_;
  absl::Mutex snapshot_mu_;  // one snapshot at a time
  std::thread snapshot_thread_;
  std::unique_ptr<absl::Notification> stop_snapshots_;
};

}  // namespace gangkeeper::store

