// gangkeeper store: the broker's journal and snapshots in etcd (see
// etcd_journal.h).
#include "gangkeeper/store/etcd_journal.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/crc32c.h"
#include "gangkeeper/store/state_codec.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::store {
namespace {

using json = nlohmann::json;

std::string Pad20(uint64_t n) { return absl::StrFormat("%020d", n); }

std::string ManifestKey(const std::string& prefix) { return prefix + "snapshot"; }
std::string SnapshotsPrefix(const std::string& prefix) { return prefix + "snapshots/"; }
std::string ChunkPrefix(const std::string& prefix, uint64_t position) {
  return absl::StrCat(SnapshotsPrefix(prefix), Pad20(position), "/");
}
std::string ChunkKey(const std::string& prefix, uint64_t position, uint64_t chunk) {
  return absl::StrCat(ChunkPrefix(prefix, position), absl::StrFormat("%06d", chunk));
}

// Whether `fence` holds for `kvs`, the leader key as etcd has it now.
bool FenceHolds(const etcd::Compare& fence, const std::vector<etcd::KeyValue>& kvs) {
  const etcd::KeyValue none;
  const etcd::KeyValue& kv = kvs.empty() ? none : kvs.front();
  int64_t have = 0;
  switch (fence.target) {
    case etcd::Compare::Target::kCreateRevision: have = kv.create_revision; break;
    case etcd::Compare::Target::kModRevision: have = kv.mod_revision; break;
    case etcd::Compare::Target::kVersion: have = kv.version; break;
    case etcd::Compare::Target::kLease: have = kv.lease; break;
    case etcd::Compare::Target::kValue: return !kvs.empty() && kv.value == fence.value;
  }
  switch (fence.result) {
    case etcd::Compare::Result::kEqual: return have == fence.number;
    case etcd::Compare::Result::kNotEqual: return have != fence.number;
    case etcd::Compare::Result::kGreater: return have > fence.number;
    case etcd::Compare::Result::kLess: return have < fence.number;
  }
  return false;
}

bool OutcomeUnknown(const absl::Status& s) { return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s); }

}  // namespace

std::string JournalPrefix(const std::string& prefix) { return prefix + "journal/"; }
std::string IntakeAppliedKey(const std::string& prefix) { return prefix + "intake-applied"; }

std::string JournalKey(const std::string& prefix, uint64_t record) {
  return absl::StrCat(JournalPrefix(prefix), Pad20(record));
}

std::optional<uint64_t> RecordOfKey(const std::string& prefix, const std::string& key) {
  absl::string_view rest = key;
  if (!absl::ConsumePrefix(&rest, JournalPrefix(prefix)) || rest.size() != 20) return std::nullopt;
  uint64_t n = 0;
  if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(rest, &n)) {
    return std::nullopt;
  }
  return n;
}

namespace {

// The snapshot `manifest` (the manifest key as read) names, read at its
// revision into *state and *position; nothing when there is none.
// OutOfRange: compacted meanwhile (the caller reads again at a newer
// revision). DataLoss when it is damaged.
absl::Status ReadSnapshot(etcd::Client* client, const std::string& prefix, const etcd::RangeResult& manifest,
                          broker::DurableState* state, uint64_t* position) {
  if (manifest.kvs.empty()) return absl::OkStatus();
  const json m = json::parse(manifest.kvs.front().value, nullptr, false);
  if (!m.is_object() || !m.contains("position") || !m["position"].is_number_unsigned() || !m.contains("chunks") ||
      !m["chunks"].is_number_unsigned() || !m.contains("bytes") || !m["bytes"].is_number_unsigned() ||
      !m.contains("crc32c") || !m["crc32c"].is_number_unsigned()) {
    return absl::DataLossError(
        absl::StrCat("etcd ", ManifestKey(prefix), ": not a snapshot manifest ({position, chunks, bytes, crc32c})"));
  }
  *position = m["position"].get<uint64_t>();
  const uint64_t chunks = m["chunks"].get<uint64_t>();
  const uint64_t bytes = m["bytes"].get<uint64_t>();
  std::string payload;
  for (uint64_t c = 0; c < chunks; ++c) {
    etcd::RangeOptions o;
    o.revision = manifest.revision;
    absl::StatusOr<etcd::RangeResult> chunk = client->Range(ChunkKey(prefix, *position, c), o);
    if (!chunk.ok()) return chunk.status();
    if (chunk->kvs.empty()) {
      return absl::DataLossError(absl::StrCat("etcd ", ChunkKey(prefix, *position, c), ": chunk ", c, " of ", chunks,
                                              " of the snapshot at record ", *position, " is missing"));
    }
    payload += chunk->kvs.front().value;
  }
  if (payload.size() != bytes || Crc32c(payload) != m["crc32c"].get<uint32_t>()) {
    return absl::DataLossError(absl::StrCat("etcd ", ChunkPrefix(prefix, *position), ": the snapshot at record ",
                                            *position, " does not match its manifest (", payload.size(), " of ",
                                            bytes, " bytes, or its checksum)"));
  }
  absl::StatusOr<broker::DurableState> decoded = DecodeState(payload, *position);
  if (!decoded.ok()) {
    return absl::DataLossError(absl::StrCat("etcd snapshot at record ", *position, ": ", decoded.status().message()));
  }
  *state = *std::move(decoded);
  return absl::OkStatus();
}

// Folds every record from *expected on, read at `revision`, into *state, in
// order and without a gap; *expected ends after the last one. OutOfRange:
// compacted meanwhile. DataLoss on a gap or a record that does not decode.
absl::Status ReplayRecords(etcd::Client* client, const std::string& prefix, int64_t revision,
                           broker::DurableState* state, uint64_t* expected, uint64_t* replayed) {
  bool more = true;
  for (int page = 0; more && page < (1 << 24); ++page) {
    etcd::RangeOptions o;
    o.range_end = etcd::PrefixEnd(JournalPrefix(prefix));
    o.limit = 256;
    o.revision = revision;
    absl::StatusOr<etcd::RangeResult> r = client->Range(JournalKey(prefix, *expected), o);
    if (!r.ok()) return r.status();
    for (const etcd::KeyValue& kv : r->kvs) {
      const std::optional<uint64_t> record = RecordOfKey(prefix, kv.key);
      if (!record.has_value()) continue;  // not a record key: ignored
      if (*record != *expected) {
        return absl::DataLossError(absl::StrCat("etcd ", JournalPrefix(prefix), ": record ", *expected,
                                                " is missing (the next is ", *record,
                                                "); the journal in etcd has a gap"));
      }
      if (absl::Status a = ApplyBatch(kv.value, *record, state); !a.ok()) {
        return absl::DataLossError(absl::StrCat("etcd ", kv.key, ": ", a.message()));
      }
      ++*expected;
      ++*replayed;
    }
    more = r->more && !r->kvs.empty();
  }
  return absl::OkStatus();
}

// How far the intake is applied (intake.h), read at `revision`; 0 when
// never written. OutOfRange: compacted meanwhile.
absl::StatusOr<int64_t> ReadIntakeApplied(etcd::Client* client, const std::string& prefix, int64_t revision) {
  etcd::RangeOptions o;
  o.revision = revision;
  absl::StatusOr<etcd::RangeResult> cursor = client->Range(IntakeAppliedKey(prefix), o);
  if (!cursor.ok()) return cursor.status();
  int64_t intake = 0;
  if (!cursor->kvs.empty() && !absl::SimpleAtoi(cursor->kvs.front().value, &intake)) {
    return absl::DataLossError(absl::StrCat("etcd ", IntakeAppliedKey(prefix),
                                            ": not a position: ", cursor->kvs.front().value.substr(0, 40)));
  }
  return intake;
}

}  // namespace

absl::StatusOr<broker::DurableState> ReadState(etcd::Client* client, const std::string& prefix,
                                               EtcdRecovery* recovery) {
  const base::Stopwatch watch;
  absl::Status last = absl::OkStatus();
  // A compaction between the reads makes the fixed revision unreadable:
  // start again at a newer one (a few times).
  for (int attempt = 0; attempt < 4; ++attempt) {
    absl::StatusOr<etcd::RangeResult> manifest = client->Range(ManifestKey(prefix));
    if (!manifest.ok()) return manifest.status();
    const int64_t revision = manifest->revision;
    broker::DurableState state;
    uint64_t position = 0;
    absl::Status s = ReadSnapshot(client, prefix, *manifest, &state, &position);
    // Every record after the snapshot, in order, without a gap.
    uint64_t expected = position + 1;
    uint64_t replayed = 0;
    if (s.ok()) s = ReplayRecords(client, prefix, revision, &state, &expected, &replayed);
    absl::StatusOr<int64_t> intake = s.ok() ? ReadIntakeApplied(client, prefix, revision) : absl::StatusOr<int64_t>(s);
    if (absl::IsOutOfRange(intake.status())) {
      last = intake.status();
      continue;
    }
    if (!intake.ok()) return intake.status();
    state.position = expected - 1;
    if (recovery != nullptr) {
      recovery->snapshot_position = position;
      recovery->replayed_records = replayed;
      recovery->workloads = state.workloads.size();
      recovery->next_record = expected;
      recovery->revision = revision;
      recovery->intake_revision = *intake;
      recovery->took = watch.Elapsed();
    }
    return state;
  }
  return absl::UnavailableError(
      absl::StrCat("reading the state from etcd: compacted while reading, four times (", last.message(), ")"));
}

EtcdJournal::EtcdJournal(etcd::Client* client, EtcdJournalOptions options, uint64_t next_record,
                         std::optional<etcd::Compare> fence)
    : client_(client), options_(std::move(options)), fence_(std::move(fence)) {
  absl::MutexLock lock(&mu_);
  next_record_ = std::max<uint64_t>(1, next_record);
  stats_.next_record = next_record_;
}

absl::StatusOr<uint64_t> EtcdJournal::Append(const broker::DurableBatch& batch) {
  const bool record = !batch.changes.empty() || batch.policies != nullptr || !batch.workloads.empty();
  const std::string payload = record ? EncodeBatch(batch) : std::string();
  absl::MutexLock lock(&mu_);
  if (!latched_.ok()) return latched_;
  if (!fence_.has_value()) {
    return absl::FailedPreconditionError("etcd journal: only the leader appends, and this replica does not lead");
  }
  if (!record && batch.intake_revision <= intake_written_) return next_record_ - 1;
  // The owner's keys go in the same request: they count too.
  std::vector<etcd::Op> owned;
  if (record && options_.record_ops) owned = options_.record_ops(batch, next_record_);
  size_t bytes = payload.size();
  for (const etcd::Op& op : owned) bytes += op.key.size() + op.value.size();
  if (bytes > options_.max_record_bytes) {
    latched_ = absl::FailedPreconditionError(absl::StrCat(
        "etcd journal: record ", next_record_, " would be ", bytes, " bytes, over the ",
        options_.max_record_bytes, " bytes one etcd request may carry; raise etcd's --max-request-bytes"));
    ++stats_.append_failures;
    return latched_;
  }
  absl::Status s = WriteLocked(batch, payload, std::move(owned), batch.intake_revision);
  if (!s.ok()) {
    ++stats_.append_failures;
    return s;
  }
  intake_written_ = std::max(intake_written_, batch.intake_revision);
  if (!record) return next_record_ - 1;
  const uint64_t written = next_record_++;
  ++stats_.appends;
  stats_.next_record = next_record_;
  return written;
}

absl::Status EtcdJournal::WriteLocked(const broker::DurableBatch& batch, const std::string& payload,
                                      std::vector<etcd::Op> owned, int64_t intake) {
  std::vector<etcd::Op> extra;
  if (intake > intake_written_) extra.push_back(etcd::Op::Put(IntakeAppliedKey(options_.prefix), absl::StrCat(intake)));
  if (payload.empty()) {
    absl::StatusOr<etcd::TxnResult> t = client_->Txn({*fence_}, extra, {etcd::Op::Get(fence_->key)});
    if (!t.ok()) return t.status();  // the cursor is written again with the next batch
    if (t->succeeded) return absl::OkStatus();
    latched_ = absl::FailedPreconditionError(
        absl::StrCat("etcd journal: the leader key ", fence_->key, " changed: this replica's term ended"));
    return latched_;
  }
  // Bounded: each round either ends or moves past a record this leader's
  // own earlier, unacknowledged attempt wrote.
  uint64_t record = next_record_;
  uint64_t owned_record = next_record_;
  for (int round = 0; round < 8; ++round) {
    const std::string key = JournalKey(options_.prefix, record);
    std::vector<etcd::Op> ops = {etcd::Op::Put(key, payload)};
    ops.insert(ops.end(), extra.begin(), extra.end());
    // Made for next_record_ in Append; again when the record moved on.
    if (options_.record_ops && record != owned_record) {
      owned = options_.record_ops(batch, record);
      owned_record = record;
    }
    ops.insert(ops.end(), owned.begin(), owned.end());
    absl::StatusOr<etcd::TxnResult> t =
        client_->Txn({*fence_, etcd::Compare::Absent(key)}, ops, {etcd::Op::Get(key), etcd::Op::Get(fence_->key)});
    if (!t.ok()) {
      if (!OutcomeUnknown(t.status())) return t.status();
      // Did it happen? Read the record back.
      ++stats_.unknown_outcomes;
      absl::StatusOr<etcd::RangeResult> back = client_->Range(key);
      if (back.ok() && !back->kvs.empty() && back->kvs.front().value == payload) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat("etcd journal: record ", record, " not written: ",
                                                 t.status().message()));
    }
    if (t->succeeded) return absl::OkStatus();
    const std::vector<etcd::KeyValue> none;
    const std::vector<etcd::KeyValue>& existing = t->responses.size() > 0 ? t->responses[0] : none;
    const std::vector<etcd::KeyValue>& leader = t->responses.size() > 1 ? t->responses[1] : none;
    if (!FenceHolds(*fence_, leader)) {
      latched_ = absl::FailedPreconditionError(absl::StrCat(
          "etcd journal: the leader key ", fence_->key, " changed: this replica's term ended (record ", record,
          " not written)"));
      return latched_;
    }
    if (!existing.empty() && existing.front().value == payload) return absl::OkStatus();
    // The fence holds, so only this term wrote the record: an attempt whose
    // answer was lost (its changes come again in this batch, and folding a
    // batch twice changes nothing). The batch goes to the next record.
    next_record_ = ++record;
  }
  latched_ = absl::InternalError("etcd journal: the record keys keep being taken; stopping appends");
  return latched_;
}

absl::Status EtcdJournal::WriteSnapshot(const broker::Snapshot& snap) {
  absl::MutexLock one(&snapshot_mu_);
  if (!fence_.has_value()) return absl::FailedPreconditionError("etcd snapshot: only the leader writes snapshots");
  if (!snap.durable()) return absl::FailedPreconditionError("etcd snapshot: the broker holds changes not yet durable");
  const uint64_t position = snap.durable_position();
  {
    absl::MutexLock lock(&mu_);
    if (!latched_.ok()) return latched_;
    if (position == 0 || position <= stats_.last_snapshot_position) return absl::OkStatus();
  }
  const std::string payload = EncodeState(broker::DurableStateOf(snap));
  const size_t chunk = std::max<size_t>(1024, options_.snapshot_chunk_bytes);
  const uint64_t chunks = (payload.size() + chunk - 1) / chunk;
  for (uint64_t c = 0; c < chunks; ++c) {
    absl::StatusOr<etcd::TxnResult> t = client_->Txn(
        {*fence_}, {etcd::Op::Put(ChunkKey(options_.prefix, position, c), payload.substr(c * chunk, chunk))});
    if (!t.ok()) return t.status();
    if (!t->succeeded) return absl::FailedPreconditionError("etcd snapshot: this replica's term ended");
  }
  const json manifest = {{"position", position},
                         {"chunks", chunks},
                         {"bytes", payload.size()},
                         {"crc32c", Crc32c(payload)}};
  // The manifest moves to the new snapshot; older snapshots and the records
  // far enough behind it go in the same transaction.
  std::vector<etcd::Op> ops = {etcd::Op::Put(ManifestKey(options_.prefix), manifest.dump()),
                               etcd::Op::Delete(SnapshotsPrefix(options_.prefix), ChunkPrefix(options_.prefix, position))};
  if (position > options_.keep_records) {
    const uint64_t first_kept = position - options_.keep_records + 1;
    ops.push_back(etcd::Op::Delete(JournalPrefix(options_.prefix), JournalKey(options_.prefix, first_kept)));
    if (options_.trim_ops) {
      std::vector<etcd::Op> more = options_.trim_ops(first_kept);
      ops.insert(ops.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
    }
  }
  absl::StatusOr<etcd::TxnResult> t = client_->Txn({*fence_}, ops);
  if (!t.ok()) return t.status();
  if (!t->succeeded) return absl::FailedPreconditionError("etcd snapshot: this replica's term ended");
  absl::MutexLock lock(&mu_);
  ++stats_.snapshots;
  stats_.last_snapshot_position = position;
  stats_.last_snapshot_bytes = payload.size();
  return absl::OkStatus();
}

absl::Status EtcdJournal::health() const {
  absl::MutexLock lock(&mu_);
  return latched_;
}

EtcdJournalStats EtcdJournal::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gangkeeper::store
