// gangkeeper store: a segmented, append-only log of checksummed records.
//
// The journal (broker state changes) and the audit log are both built on
// it. The byte format is specified in src/store/FORMAT.md §2-3: segment
// files named by the sequence number of their first record, a checksummed
// header, then records `length, crc32c, seq, payload`.
//
// Append() is durable on return: its records are written and fsynced.
// Concurrent appenders share fsyncs (group commit): the first waiting
// caller writes everything queued behind it with one write and one fsync;
// the others are acknowledged by that fsync. A failed write or fsync
// latches: the log refuses every later append with that error (after a
// failed fsync nobody knows what reached the disk), and only a restart,
// which re-reads the files, clears it.
//
// Open() recovers: the last segment's valid prefix is kept; a torn or
// corrupt tail (nothing valid after it) is cut off and reported, never
// trusted. A corrupt record followed by valid ones is corruption in the
// middle: DataLoss, unless LogOptions::truncate_corruption cuts the log
// there. Records are numbered without gaps from 1.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gangkeeper/store/file_system.h"

namespace gangkeeper::store {

inline constexpr size_t kSegmentHeaderSize = 32;
inline constexpr size_t kRecordHeaderSize = 16;
inline constexpr uint64_t kMaxRecordPayload = 64ull << 20;
inline constexpr uint64_t kMaxSealTail = 256;  // bytes a Sealer may add to a payload

struct LogOptions {
  // Up to 8 ASCII characters, written in every segment header and checked
  // on open, so that a journal is never read as an audit log.
  std::string kind = "log";
  // A new segment starts once the current one has this many bytes.
  uint64_t segment_bytes = 64ull << 20;
  // Open(): cut the log at a corrupt record that has valid ones after it
  // (they are lost) instead of failing. gangkeeper serve --recover=truncate.
  bool truncate_corruption = false;
  // Groups are cut at this many bytes (one write, one fsync each).
  uint64_t max_group_bytes = 8ull << 20;
};

// What Open() found and did.
struct LogRecovery {
  uint64_t torn_tail_bytes = 0;  // cut off the last segment (unacknowledged writes)
  uint64_t corrupt_bytes = 0;    // cut off by truncate_corruption
  int removed_segments = 0;      // empty or torn-at-creation segments removed
  std::vector<std::string> notes;  // one line per repair, for the log
};

// Where a record is on disk: the segment (named by its first record), the
// record's byte offset in it and its size with the header. Lets a reader
// (the audit index) fetch one record without reading its segment.
struct RecordLocation {
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint32_t size = 0;
};

struct SegmentInfo {
  uint64_t first_seq = 0;
  std::string path;
  uint64_t bytes = 0;
};

struct LogStats {
  uint64_t appends = 0;  // Append() calls acknowledged
  uint64_t records = 0;
  uint64_t groups = 0;   // writes, each followed by one fsync
  uint64_t bytes = 0;
  uint64_t segments = 0;
  uint64_t first_seq = 0;  // oldest kept record (== next_seq when none)
  uint64_t next_seq = 0;
};

// Called by Append for each of its records as the record is numbered, in
// seq order across all appenders (under the log's lock): appends at most
// kMaxSealTail bytes to `tail` (empty at each call), which are stored
// after the payload as part of it (the audit log's hash chain,
// src/audit/FORMAT.md). It must be quick and must not call the log.
using Sealer = std::function<void(uint64_t seq, absl::string_view payload, std::string* tail)>;

class SegmentedLog {
 public:
  // Opens (creating `dir` if needed) and recovers the log in `dir`.
  // DataLoss on corruption in the middle (see above), InvalidArgument when
  // `dir` holds another kind of log. `recovery` may be null.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<SegmentedLog>> Open(FileSystem* fs, std::string dir,
                                                                          LogOptions options,
                                                                          LogRecovery* recovery);
  ~SegmentedLog();
  SegmentedLog(const SegmentedLog&) = delete;
  SegmentedLog& operator=(const SegmentedLog&) = delete;

  // Appends one record per payload, in order, durably. Returns the seq of
  // the first. InvalidArgument for an empty batch or a payload over
  // kMaxRecordPayload (less kMaxSealTail when sealed); the latched error
  // after a failure. `where` (when not null) gets each record's location;
  // `seal` (when not null) adds a tail to each payload (see Sealer;
  // readers get payload and tail as one).
  [[nodiscard]] absl::StatusOr<uint64_t> Append(absl::Span<const absl::string_view> payloads,
                                                std::vector<RecordLocation>* where = nullptr,
                                                const Sealer* seal = nullptr);
  [[nodiscard]] absl::StatusOr<uint64_t> Append(absl::string_view payload);

  // Calls `f(seq, payload)` for every record with seq >= `from`, in order,
  // up to the last one acknowledged when Read was called. DataLoss naming
  // the segment, offset and expected seq on a bad or missing record;
  // `corrupt_seq` (when not null) gets that seq. Stops at f's first error.
  // Safe to call while others append.
  [[nodiscard]] absl::Status Read(uint64_t from,
                                  const std::function<absl::Status(uint64_t seq, absl::string_view payload)>& f,
                                  uint64_t* corrupt_seq = nullptr) const;

  // Read() that also gives each record's location.
  using LocatedReader = std::function<absl::Status(uint64_t seq, absl::string_view payload, const RecordLocation& at)>;
  [[nodiscard]] absl::Status ReadLocated(uint64_t from, const LocatedReader& f, uint64_t* corrupt_seq = nullptr) const;

  // The payload of record `seq` at `at` (from Append or ReadLocated): one
  // read of its bytes, checksum and seq checked. NotFound once retention
  // removed its segment, DataLoss when the bytes there are not that record.
  [[nodiscard]] absl::StatusOr<std::string> ReadRecord(uint64_t seq, const RecordLocation& at) const;

  // The next append starts a new segment (so that DropBefore can remove
  // the current one once a snapshot covers it).
  [[nodiscard]] absl::Status Roll();
  // Removes every segment whose records all have seq < `seq`; never the
  // one being written.
  [[nodiscard]] absl::Status DropBefore(uint64_t seq);
  // Repair: removes record `seq` and everything after it. Only while
  // nothing appends.
  [[nodiscard]] absl::Status TruncateFrom(uint64_t seq);

  // For a log without segments (new, or emptied by a repair): the next
  // record gets `seq`, because a snapshot covers everything before it.
  // FailedPrecondition when the log holds records.
  [[nodiscard]] absl::Status StartAt(uint64_t seq);

  // The segments kept, oldest first, with their sizes on disk.
  std::vector<SegmentInfo> Segments() const;

  // The seq the next record gets.
  uint64_t next_seq() const;
  // OK, or the latched write error.
  absl::Status health() const;
  LogStats stats() const;
  const std::string& dir() const;

  struct Impl;

 private:
  explicit SegmentedLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Segment file name for a segment whose first record is `first_seq`.
std::string SegmentFileName(uint64_t first_seq);

// Reading segment bytes without a SegmentedLog, read-only (offline checks:
// gangkeeper audit verify). A record of `segment` at byte `offset`:
struct RawRecord {
  uint64_t seq = 0;
  absl::string_view payload;
  size_t size = 0;  // with its 16-byte header
};
// True when a whole record with a matching checksum starts at `offset`.
bool ParseRecordAt(absl::string_view segment, size_t offset, RawRecord* out);
// OK when `segment` starts with a good header of a `kind` log whose first
// record is `first_seq`; else DataLoss saying what is wrong.
[[nodiscard]] absl::Status CheckSegmentHeader(absl::string_view segment, const std::string& kind, uint64_t first_seq);

}  // namespace gangkeeper::store
