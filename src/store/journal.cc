// gangkeeper store: Journal (see journal.h).
#include "gangkeeper/store/journal.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/snapshot_file.h"
#include "gangkeeper/store/state_codec.h"

namespace gangkeeper::store {

using broker::DurableBatch;
using broker::DurableState;
using broker::Snapshot;
using broker::StateChange;

namespace {

constexpr char kSnapshotKind[] = "broker";

store::FileSystem* FsOf(const JournalOptions& o) { return o.fs != nullptr ? o.fs : store::DefaultFileSystem(); }

}  // namespace

Journal::Journal(JournalOptions options, std::unique_ptr<store::FileLock> lock,
                 std::unique_ptr<store::SegmentedLog> log)
    : options_(std::move(options)),
      lock_(std::move(lock)),
      log_(std::move(log)),
      snapshot_dir_(store::JoinPath(options_.data_dir, "snapshots")) {}

Journal::~Journal() { StopSnapshots(); }

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(JournalOptions options, JournalRecovery* recovery) {
  const base::Stopwatch watch;
  JournalRecovery ignored;
  JournalRecovery& rec = recovery != nullptr ? *recovery : ignored;
  store::FileSystem* fs = FsOf(options);
  if (absl::Status s = fs->CreateDirs(options.data_dir); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--data-dir ", options.data_dir, ": ", s.message()));
  }
  absl::StatusOr<std::unique_ptr<store::FileLock>> lock = store::LockDataDir(fs, options.data_dir);
  if (!lock.ok()) return lock.status();
  const std::string snapshot_dir = store::JoinPath(options.data_dir, "snapshots");

  // The newest good snapshot.
  DurableState state;
  absl::StatusOr<std::optional<store::LoadedSnapshot>> snap =
      store::LoadNewestSnapshot(fs, snapshot_dir, kSnapshotKind, &rec.notes);
  if (!snap.ok()) return snap.status();
  if (snap->has_value()) {
    absl::StatusOr<DurableState> decoded = DecodeState((*snap)->payload, (*snap)->position);
    if (!decoded.ok()) {
      return absl::DataLossError(absl::StrCat((*snap)->path, ": ", decoded.status().message(),
                                              ". Move the file away to start from the snapshot before it"));
    }
    state = *std::move(decoded);
    rec.snapshot_position = state.position;
  }

  // The journal after it.
  store::LogOptions log_options;
  log_options.kind = "journal";
  log_options.segment_bytes = options.segment_bytes;
  log_options.truncate_corruption = options.truncate_corruption;
  absl::StatusOr<std::unique_ptr<store::SegmentedLog>> log =
      store::SegmentedLog::Open(fs, store::JoinPath(options.data_dir, "journal"), log_options, &rec.log);
  if (!log.ok()) return log.status();
  for (const std::string& n : rec.log.notes) rec.notes.push_back(n);
  const store::LogStats ls = (*log)->stats();
  if (ls.next_seq > ls.first_seq && ls.first_seq > state.position + 1) {
    return absl::DataLossError(absl::StrCat(
        "journal in ", options.data_dir, ": records ", state.position + 1, " to ", ls.first_seq - 1,
        " are missing (the newest usable snapshot is at ", state.position,
        "). Restore the data directory from a backup"));
  }
  uint64_t corrupt = 0;
  absl::Status replay = (*log)->Read(
      state.position + 1,
      [&](uint64_t seq, absl::string_view payload) {
        ++rec.replayed_records;
        return ApplyBatch(payload, seq, &state);
      },
      &corrupt);
  if (!replay.ok()) {
    if (!absl::IsDataLoss(replay) || corrupt == 0) return replay;
    if (!options.truncate_corruption) {
      return absl::DataLossError(absl::StrCat(
          replay.message(), ". Restore the data directory from a backup, or start with --recover=truncate to "
          "drop journal record ", corrupt, " and everything after it"));
    }
    rec.notes.push_back(absl::StrCat("cut the journal at record ", corrupt, ": ", replay.message()));
    if (absl::Status s = (*log)->TruncateFrom(corrupt); !s.ok()) return s;
  }
  if ((*log)->next_seq() <= state.position) {
    if (absl::Status s = (*log)->StartAt(state.position + 1); !s.ok()) return s;
  }
  rec.workloads = state.workloads.size();
  rec.next_record = (*log)->next_seq();
  rec.took = watch.Elapsed();
  auto journal = std::unique_ptr<Journal>(new Journal(std::move(options), *std::move(lock), *std::move(log)));
  journal->recovered_ = std::move(state);
  {
    absl::MutexLock l(&journal->mu_);
    journal->stats_.last_snapshot_position = rec.snapshot_position;
    journal->records_since_snapshot_ = rec.replayed_records;
  }
  return journal;
}

DurableState Journal::TakeRecovered() {
  DurableState out = std::move(recovered_);
  recovered_ = DurableState{};
  return out;
}

absl::StatusOr<uint64_t> Journal::Append(const DurableBatch& batch) {
  const std::string payload = EncodeBatch(batch);
  absl::StatusOr<uint64_t> seq = log_->Append(payload);
  if (!seq.ok()) return seq.status();
  absl::MutexLock lock(&mu_);
  ++records_since_snapshot_;
  return *seq;
}

absl::Status Journal::ReadChanges(
    uint64_t after, const std::function<absl::Status(uint64_t record, const std::vector<StateChange>&)>& f) const {
  return log_->Read(after + 1, [&](uint64_t seq, absl::string_view payload) {
    DurableState scratch;
    std::vector<StateChange> changes;
    if (absl::Status s = ApplyBatch(payload, seq, &scratch, &changes); !s.ok()) return s;
    return f(seq, changes);
  });
}

absl::Status Journal::WriteSnapshot(const Snapshot& snap) {
  absl::MutexLock one(&snapshot_mu_);
  if (!snap.durable()) {
    return absl::FailedPreconditionError("snapshot: the broker holds changes that are not durable");
  }
  const uint64_t position = snap.durable_position();
  {
    absl::MutexLock lock(&mu_);
    if (position == 0 || position <= stats_.last_snapshot_position) return absl::OkStatus();  // nothing new
  }
  const base::Stopwatch watch;
  const std::string payload = EncodeState(broker::DurableStateOf(snap));
  store::FileSystem* fs = FsOf(options_);
  absl::Status s = store::WriteSnapshot(fs, snapshot_dir_, kSnapshotKind, position, payload);
  absl::StatusOr<uint64_t> oldest_kept = s.ok() ? store::PruneSnapshots(fs, snapshot_dir_, options_.keep_snapshots)
                                                : absl::StatusOr<uint64_t>(s);
  if (oldest_kept.ok()) {
    // Later records start a new segment, and segments the oldest kept
    // snapshot covers go.
    s = log_->Roll();
    uint64_t keep_from = *oldest_kept + 1;
    if (floor_) keep_from = std::min(keep_from, floor_());
    if (s.ok()) s = log_->DropBefore(keep_from);
  } else {
    s = oldest_kept.status();
  }
  absl::MutexLock lock(&mu_);
  if (!s.ok()) {
    ++stats_.snapshot_failures;
    return s;
  }
  ++stats_.snapshots;
  stats_.last_snapshot_position = position;
  stats_.last_snapshot_bytes = payload.size() + store::kSnapshotHeaderSize;
  stats_.last_snapshot_took = watch.Elapsed();
  // Records appended after `position` are not in it.
  const uint64_t appended_after = log_->next_seq() - 1 - position;
  records_since_snapshot_ = appended_after;
  return absl::OkStatus();
}

bool Journal::SnapshotDue(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (records_since_snapshot_ == 0) return false;
  if (records_since_snapshot_ >= options_.snapshot_every_records) return true;
  return have_snapshot_time_ && now - last_snapshot_time_ >= options_.snapshot_every;
}

void Journal::StartSnapshots(std::function<std::shared_ptr<const Snapshot>()> source, const base::Clock* clock,
                             absl::Duration period) {
  StopSnapshots();
  {
    absl::MutexLock lock(&mu_);
    last_snapshot_time_ = clock->Now();
    have_snapshot_time_ = true;
  }
  stop_snapshots_ = std::make_unique<absl::Notification>();
  absl::Notification* stop = stop_snapshots_.get();
  snapshot_thread_ = std::thread([this, source = std::move(source), clock, period, stop] {
    while (!stop->WaitForNotificationWithTimeout(period)) {
      if (!SnapshotDue(clock->Now())) continue;
      std::shared_ptr<const Snapshot> snap = source();
      if (snap == nullptr || !snap->durable()) continue;
      absl::Status s = WriteSnapshot(*snap);
      absl::MutexLock lock(&mu_);
      last_snapshot_time_ = clock->Now();
      (void)s;  // counted in stats (snapshot_failures); the journal stays the truth
    }
  });
}

void Journal::StopSnapshots() {
  if (stop_snapshots_ == nullptr) return;
  stop_snapshots_->Notify();
  if (snapshot_thread_.joinable()) snapshot_thread_.join();
  stop_snapshots_.reset();
}

absl::Status Journal::health() const { return log_->health(); }

JournalStats Journal::stats() const {
  JournalStats out;
  {
    absl::MutexLock lock(&mu_);
    out = stats_;
    out.records_since_snapshot = records_since_snapshot_;
  }
  out.log = log_->stats();
  return out;
}

}  // namespace gangkeeper::store
