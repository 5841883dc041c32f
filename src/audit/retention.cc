// gangkeeper audit: retention: the oldest segments go past max_bytes and
// max_age, loudly when the size cap takes events younger than
// min_retention, and always after BASE anchors the chain (see audit.h).
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/log.h"
#include "src/audit/chain.h"
#include "src/audit/event_time.h"
#include "src/audit/index.h"
#include "src/audit/log_event.h"

namespace gangkeeper::audit {
namespace {

// The anchor of record `seq` read from its segment.
std::optional<Anchor> ReadAnchor(const store::SegmentedLog& log, uint64_t seq) {
  std::optional<Anchor> out;
  const absl::Status stop = absl::CancelledError("found");
  (void)log.Read(seq, [&](uint64_t at, absl::string_view payload) {
    Sealed sealed;
    absl::StatusOr<Event> e = SplitSealed(payload, &sealed) ? DecodeEvent(sealed.json, at) : absl::DataLossError("");
    if (e.ok()) out = Anchor{at, e->time, sealed.chain, sealed.has_hmac, sealed.hmac};
    return stop;
  });
  return out;
}

// The anchor before segment `first_seq`: remembered by the chain, or read.
std::optional<Anchor> AnchorBefore(const Chain& chain, const store::SegmentedLog& log, uint64_t first_seq) {
  std::optional<Anchor> a = chain.Before(first_seq);
  return a.has_value() ? a : ReadAnchor(log, first_seq - 1);
}

}  // namespace

std::optional<absl::Time> AuditLog::FirstEventTime(uint64_t first_seq) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = first_event_time_.find(first_seq); it != first_event_time_.end()) return it->second;
  }
  // The segment's first record, read alone: its length, then the record.
  std::optional<absl::Time> out;
  for (const store::SegmentInfo& seg : log_->Segments()) {
    if (seg.first_seq != first_seq) continue;
    absl::StatusOr<std::string> header =
        options_.fs->ReadRange(seg.path, store::kSegmentHeaderSize, store::kRecordHeaderSize);
    if (!header.ok() || header->size() < 4) break;
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>((*header)[i])) << (8 * i);
    absl::StatusOr<std::string> payload = log_->ReadRecord(
        first_seq, {first_seq, store::kSegmentHeaderSize, static_cast<uint32_t>(store::kRecordHeaderSize + length)});
    if (!payload.ok()) break;
    absl::StatusOr<Event> e = DecodeEvent(EventJson(*payload), first_seq);
    if (e.ok()) out = e->time;
  }
  if (out.has_value()) {
    absl::MutexLock lock(&mu_);
    first_event_time_[first_seq] = *out;
  }
  return out;
}

void AuditLog::Retain() {
  absl::MutexLock retain(&retain_mu_);
  const std::vector<store::SegmentInfo> segments = log_->Segments();
  {
    absl::MutexLock lock(&mu_);
    retained_segments_ = segments.size();
  }
  const absl::Time now = options_.clock->Now();
  size_t by_size = 0;
  size_t drop = SegmentsPastLimits(segments, now, &by_size);
  const size_t young = FirstYoungSegment(segments, by_size, now);
  if (young < by_size) RecordForcedRetention(segments, young, by_size, now);
  if (drop > 0 && !DropSegmentsBefore(segments[drop].first_seq, drop)) drop = 0;
  const std::optional<absl::Time> oldest =
      segments.empty() ? std::nullopt : FirstEventTime(segments[drop].first_seq);
  absl::MutexLock lock(&mu_);
  oldest_event_ = oldest;
}

size_t AuditLog::SegmentsPastLimits(const std::vector<store::SegmentInfo>& segments, absl::Time now,
                                    size_t* by_size) {
  // Whole segments go from the oldest (never the last): past max_bytes, and
  // while the next segment began before now - max_age.
  uint64_t total = 0;
  for (const store::SegmentInfo& s : segments) total += s.bytes;
  *by_size = 0;
  while (*by_size + 1 < segments.size() && total > options_.max_bytes) total -= segments[(*by_size)++].bytes;
  size_t drop = *by_size;
  if (options_.max_age <= absl::ZeroDuration()) return drop;
  const absl::Time age_cutoff = now - options_.max_age;
  while (drop + 1 < segments.size()) {
    const std::optional<absl::Time> next = FirstEventTime(segments[drop + 1].first_seq);
    if (!next.has_value() || *next >= age_cutoff) break;
    ++drop;
  }
  return drop;
}

size_t AuditLog::FirstYoungSegment(const std::vector<store::SegmentInfo>& segments, size_t by_size, absl::Time now) {
  // A segment's events all came before the next one's first.
  if (options_.min_retention <= absl::ZeroDuration()) return by_size;
  const bool aged = options_.max_age > absl::ZeroDuration();
  const absl::Time age_cutoff = now - options_.max_age;
  const absl::Time floor = now - options_.min_retention;
  for (size_t i = 0; i < by_size; ++i) {
    const std::optional<absl::Time> next = FirstEventTime(segments[i + 1].first_seq);
    if (!next.has_value() || (*next >= floor && (!aged || *next >= age_cutoff))) return i;
  }
  return by_size;
}

void AuditLog::RecordForcedRetention(const std::vector<store::SegmentInfo>& segments, size_t young, size_t by_size,
                                     absl::Time now) {
  const uint64_t first = segments[young].first_seq;
  const uint64_t end = segments[by_size].first_seq;
  const absl::Time from = FirstEventTime(first).value_or(now);
  const std::optional<Anchor> newest = AnchorBefore(*chain_, *log_, end);
  const absl::Time until = newest.has_value() ? newest->time : now;
  base::GetLogger("audit")->error(
      "audit: the size cap ({} MiB) removes {} segment(s) holding {} event(s) (records {} to {}, {} to {}) younger "
      "than the minimum retention of {}; recorded as an {} event. Raise --audit-max-mib or find what floods the "
      "log (gangkeeper audit --action review.denials_suppressed)",
      options_.max_bytes >> 20, by_size - young, end - first, first, end - 1, Rfc3339Micros(from),
      Rfc3339Micros(until), absl::FormatDuration(options_.min_retention), kRetentionForced);
  {
    absl::MutexLock lock(&mu_);
    ++retention_forced_;
    retention_forced_events_ += end - first;
  }
  (void)AppendRecords({LogEvent(now, kRetentionForced, "SizeCapReached",
                                {{"segments", by_size - young},
                                 {"events", end - first},
                                 {"firstSeq", first},
                                 {"lastSeq", end - 1},
                                 {"oldest", Rfc3339Micros(from)},
                                 {"newest", Rfc3339Micros(until)},
                                 {"newestAgeSeconds", absl::ToInt64Seconds(now - until)},
                                 {"minRetention", absl::FormatDuration(options_.min_retention)},
                                 {"maxBytes", options_.max_bytes}})});
}

bool AuditLog::DropSegmentsBefore(uint64_t keep, size_t count) {
  // BASE first: the chain of the first record kept must stay checkable.
  const std::optional<Anchor> before = AnchorBefore(*chain_, *log_, keep);
  absl::Status based = before.has_value() ? chain_->WriteBase(*before)
                                          : absl::DataLossError(absl::StrCat("record ", keep - 1, " cannot be read"));
  if (!based.ok()) {
    base::GetLogger("audit")->error("audit: {} segment(s) kept past the limits: {}/{} cannot be written ({})", count,
                                    options_.dir, kBaseFile, based.message());
    return false;
  }
  (void)log_->DropBefore(keep);
  if (index_ != nullptr) index_->TrimBelow(log_->stats().first_seq);
  chain_->ForgetBefore(keep);
  absl::MutexLock lock(&mu_);
  first_event_time_.erase(first_event_time_.begin(), first_event_time_.lower_bound(keep));
  return true;
}

}  // namespace gangkeeper::audit
