// gangkeeper tests: audit log records as bytes (src/audit/FORMAT.md §3),
// for tests that tamper with a log the way someone who can write its files
// would: read a segment's records, rebuild one with its CRC recomputed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/store/crc32c.h"
#include "gangkeeper/store/log.h"

namespace gangkeeper::testing {

inline std::string Le64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

// One record: length, CRC-32C of seq and payload, seq, payload.
inline std::string AuditRecordBytes(uint64_t seq, absl::string_view payload) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((payload.size() >> (8 * i)) & 0xFF);
  const std::string body = absl::StrCat(Le64(seq), payload);
  const uint32_t crc = store::Crc32c(body);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out + body;
}

struct SegmentRecord {
  size_t offset = 0;  // of the record's header in the segment
  uint64_t seq = 0;
  std::string payload;
  size_t size() const { return store::kRecordHeaderSize + payload.size(); }
};

// The whole records of a segment file's bytes, in order.
inline std::vector<SegmentRecord> SegmentRecords(absl::string_view segment) {
  std::vector<SegmentRecord> out;
  store::RawRecord r;
  for (size_t off = store::kSegmentHeaderSize; store::ParseRecordAt(segment, off, &r); off += r.size) {
    out.push_back({off, r.seq, std::string(r.payload)});
  }
  return out;
}

// What a forger without the key does: replaces `from` with `to` in record
// `seq` of `segment` and recomputes its CRC (its seal stays as it was).
// False when the segment has no such record or the record no such text.
inline bool ForgeRecord(std::string* segment, uint64_t seq, absl::string_view from, absl::string_view to) {
  for (const SegmentRecord& r : SegmentRecords(*segment)) {
    if (r.seq != seq) continue;
    const std::string forged = absl::StrReplaceAll(r.payload, {{from, to}});
    if (forged == r.payload) return false;
    segment->replace(r.offset, r.size(), AuditRecordBytes(seq, forged));
    return true;
  }
  return false;
}

}  // namespace gangkeeper::testing
