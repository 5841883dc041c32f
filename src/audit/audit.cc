// gangkeeper audit: the audit log: open, append, stats (see audit.h).
// Queries are in query.cc, retention in retention.cc, the index in
// index.cc, the event codec in event.cc; the broker's side is the node's
// (node/audit_events.h, node/audit_stream.h).
#include "gangkeeper/audit/audit.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/log.h"
#include "src/audit/chain.h"
#include "src/audit/event_time.h"
#include "src/audit/index.h"
#include "src/audit/log_event.h"

namespace gangkeeper::audit {

AuditLog::AuditLog(AuditOptions options, std::unique_ptr<store::SegmentedLog> log, std::unique_ptr<Chain> chain,
                   uint64_t last_journal_record, uint64_t last_stream_revision)
    : options_(std::move(options)),
      log_(std::move(log)),
      chain_(std::move(chain)),
      last_journal_record_(last_journal_record),
      last_stream_revision_(last_stream_revision) {
  if (options_.index_events == 0) return;
  const store::LogStats st = log_->stats();
  index_ = std::make_unique<AuditIndex>(options_.index_events, st.next_seq);
  const uint64_t n = st.next_seq - st.first_seq;
  index_->StartFill(log_.get(), n > options_.index_events ? st.next_seq - options_.index_events : st.first_seq,
                    st.next_seq);
}

AuditLog::~AuditLog() = default;

namespace {

// The anchor file `name` in `dir`, if it holds one.
std::optional<Anchor> ReadAnchorFile(store::FileSystem* fs, const std::string& dir, const char* name) {
  absl::StatusOr<std::string> bytes = fs->Read(store::JoinPath(dir, name));
  return bytes.ok() ? LastAnchor(*bytes) : std::nullopt;
}

// HEAD names the newest record acknowledged before: a log that ends before
// it (at `last`) lost its tail, which must not go unnoticed. The event that
// records it, logged, or nothing.
std::optional<Event> TailMissing(const AuditOptions& options, const Anchor& last) {
  std::optional<Anchor> head = ReadAnchorFile(options.fs, options.dir, kHeadFile);
  if (!head.has_value() || head->seq <= last.seq) return std::nullopt;
  const uint64_t missing = head->seq - last.seq;
  base::GetLogger("audit")->error(
      "audit: {} ends at record {} but its HEAD says record {} was written: {} record(s) are missing (cut off "
      "or lost); recorded as an {} event. Restore {} from a backup if you have one",
      options.dir, last.seq, head->seq, missing, kTailMissing, options.dir);
  return LogEvent(options.clock->Now(), kTailMissing, "TailMissing",
                  {{"from", last.seq + 1},
                   {"to", head->seq},
                   {"count", missing},
                   {"headChain", Hex(head->chain)},
                   {"headTime", Rfc3339Micros(head->time)}});
}

// A signed log goes on signed with the same key, or verify says so: warns
// when the newest record `last` was signed and the key is missing or another.
void CheckHmacKey(const AuditOptions& options, const Anchor& last) {
  Hasher hasher(options.hmac_key);
  if (!hasher.keyed()) {
    base::GetLogger("audit")->warn(
        "audit: {} is HMAC-signed but no --audit-hmac-key was given: new records carry none, and gangkeeper audit "
        "verify will report them",
        options.dir);
  } else if (hasher.Mac(absl::string_view(reinterpret_cast<const char*>(last.chain.data()), last.chain.size())) !=
             last.hmac) {
    base::GetLogger("audit")->warn(
        "audit: record {} of {} was signed with another --audit-hmac-key: gangkeeper audit verify takes one key and "
        "will stop where the key changed",
        last.seq, options.dir);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options, store::LogRecovery* recovery) {
  if (options.clock == nullptr) return absl::InvalidArgumentError("audit log: AuditOptions.clock is required");
  store::LogOptions lo;
  lo.kind = "audit";
  lo.segment_bytes = options.segment_bytes;
  lo.truncate_corruption = options.truncate_corruption;
  if (options.fs == nullptr) options.fs = store::DefaultFileSystem();
  store::FileSystem* fs = options.fs;
  absl::StatusOr<std::unique_ptr<store::SegmentedLog>> log = store::SegmentedLog::Open(fs, options.dir, lo, recovery);
  if (!log.ok()) return log.status();
  // The journal record of the newest broker event: read back from the last
  // segments (a broker event comes with every batch, so it is near the end).
  // The newest record's seal continues the chain.
  uint64_t last_record = 0;
  uint64_t last_stream = 0;
  const store::LogStats st = (*log)->stats();
  Anchor last;
  last.seq = st.next_seq - 1;
  if (st.next_seq > st.first_seq) {
    const uint64_t window = 100'000;
    const uint64_t from = st.next_seq - st.first_seq > window ? st.next_seq - window : st.first_seq;
    absl::Status s = (*log)->Read(from, [&](uint64_t seq, absl::string_view payload) {
      Sealed sealed;
      const bool split = SplitSealed(payload, &sealed);
      absl::StatusOr<Event> e = DecodeEvent(split ? sealed.json : payload, seq);
      if (e.ok()) {
        last_record = std::max(last_record, e->journal_record);
        last_stream = std::max(last_stream, e->stream_revision);
      }
      if (seq == last.seq) {
        last = Anchor{seq, e.ok() ? e->time : absl::UnixEpoch(), sealed.chain, sealed.has_hmac, sealed.hmac};
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  } else if (std::optional<Anchor> base = ReadAnchorFile(fs, options.dir, kBaseFile);
             base.has_value() && base->seq == last.seq) {
    last = *base;  // every record went with retention: the chain goes on from BASE
  }
  std::optional<Event> tail_missing = TailMissing(options, last);
  if (last.has_hmac) CheckHmacKey(options, last);
  auto chain = std::make_unique<Chain>(fs, options.dir, options.hmac_key);
  chain->Start(last);
  auto out = std::unique_ptr<AuditLog>(new AuditLog(std::move(options), *std::move(log), std::move(chain), last_record,
                                                       last_stream));
  out->Retain();
  if (tail_missing.has_value()) {
    if (absl::StatusOr<uint64_t> s = out->Append({*tail_missing}); !s.ok()) return s.status();
  }
  return out;
}

absl::StatusOr<uint64_t> AuditLog::Append(const std::vector<Event>& events) {
  absl::StatusOr<uint64_t> seq = AppendRecords(events);
  if (!seq.ok()) return seq;
  bool rotated = false;
  {
    absl::MutexLock lock(&mu_);
    rotated = log_->stats().segments != retained_segments_;
  }
  if (rotated) Retain();
  return seq;
}

absl::StatusOr<uint64_t> AuditLog::AppendRecords(const std::vector<Event>& events) {
  if (events.empty()) return log_->next_seq();
  std::vector<std::string> lines;
  std::vector<absl::Time> times;
  lines.reserve(events.size());
  times.reserve(events.size());
  uint64_t record = 0;
  uint64_t stream = 0;
  for (const Event& e : events) {
    lines.push_back(EncodeEvent(e, /*with_seq=*/false));
    times.push_back(e.time);
    record = std::max(record, e.journal_record);
    stream = std::max(stream, e.stream_revision);
  }
  std::vector<absl::string_view> views(lines.begin(), lines.end());
  std::vector<store::RecordLocation> where;
  Chain::Call call;
  call.times = &times;
  const store::Sealer seal = chain_->SealerFor(&call);
  absl::StatusOr<uint64_t> seq = log_->Append(views, &where, &seal);
  if (!seq.ok()) {
    absl::MutexLock lock(&mu_);
    ++failed_appends_;
    return seq.status();
  }
  chain_->Acknowledged(call.last);
  // Only the first record of an Append can start a segment.
  const bool started_segment = where.front().offset == store::kSegmentHeaderSize;
  if (started_segment) chain_->SegmentStarted(*seq, call.before);
  if (index_ != nullptr) {
    for (size_t i = 0; i < events.size(); ++i) index_->Stage(*seq + i, events[i], where[i]);
  }
  absl::MutexLock lock(&mu_);
  last_journal_record_ = std::max(last_journal_record_, record);
  last_stream_revision_ = std::max(last_stream_revision_, stream);
  if (started_segment) first_event_time_[*seq] = events.front().time;
  return *seq;
}

void AuditLog::Announce(uint64_t record) {
  absl::MutexLock lock(&mu_);
  announced_ = std::max(announced_, record);
}

void AuditLog::Settle(uint64_t record) {
  absl::MutexLock lock(&mu_);
  settled_ = std::max(settled_, record);
}

void AuditLog::AwaitSettled() const {
  struct Wait {
    const AuditLog* log;
    uint64_t target;
    static bool Done(Wait* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->log->settled_ >= w->target; }
  };
  absl::MutexLock lock(&mu_);
  Wait wait{this, announced_};
  if (settled_ >= wait.target) return;
  if (!mu_.AwaitWithTimeout(absl::Condition(&Wait::Done, &wait), kSettleWait)) {
    base::GetLogger("audit")->warn("audit: the events of journal record {} were announced but not settled within {}; "
                                   "answering without them",
                                   wait.target, absl::FormatDuration(kSettleWait));
  }
}

uint64_t AuditLog::last_journal_record() const {
  absl::MutexLock lock(&mu_);
  return last_journal_record_;
}

uint64_t AuditLog::last_stream_revision() const {
  absl::MutexLock lock(&mu_);
  return last_stream_revision_;
}

AuditStats AuditLog::stats() const {
  AuditStats out;
  out.log = log_->stats();
  if (index_ != nullptr) index_->Stats(&out);
  absl::MutexLock lock(&mu_);
  out.last_journal_record = last_journal_record_;
  out.last_stream_revision = last_stream_revision_;
  out.failed_appends = failed_appends_;
  out.retention_forced = retention_forced_;
  out.retention_forced_events = retention_forced_events_;
  out.oldest_event = oldest_event_;
  return out;
}

AuditHead AuditLog::head() const {
  AwaitSettled();
  const Anchor a = chain_->head();
  return {a.seq, a.time, Hex(a.chain), a.has_hmac ? Hex(a.hmac) : ""};
}

absl::StatusOr<std::string> LoadHmacKey(const std::string& path) {
  absl::StatusOr<std::string> key = store::DefaultFileSystem()->Read(path);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the key (", key.status().message(), ")"));
  }
  if (absl::EndsWith(*key, "\n")) key->pop_back();
  if (absl::EndsWith(*key, "\r")) key->pop_back();
  if (key->size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the key has ", key->size(), " byte(s); use at least 16 random ones, e.g. openssl rand -hex 32 > ",
        path));
  }
  return key;
}

}  // namespace gangkeeper::audit
