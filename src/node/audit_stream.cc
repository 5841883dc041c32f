// gangkeeper node: the replicated audit stream (see audit_stream.h).
#include "gangkeeper/node/audit_stream.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/node/audit_events.h"

namespace gangkeeper::node {
namespace {

std::string StreamPad20(uint64_t n) { return absl::StrFormat("%020d", n); }
std::string StreamRecordPrefix(const std::string& prefix) { return AuditStreamPrefix(prefix) + "journal/"; }

}  // namespace

std::string AuditStreamPrefix(const std::string& prefix) { return prefix + "audit/v1/"; }
std::string AuditReviewPrefix(const std::string& prefix) { return AuditStreamPrefix(prefix) + "review/"; }
std::string AuditRecordKey(const std::string& prefix, uint64_t record) {
  return StreamRecordPrefix(prefix) + StreamPad20(record);
}

std::optional<uint64_t> RecordOfAuditKey(const std::string& prefix, const std::string& key) {
  absl::string_view rest = key;
  if (!absl::ConsumePrefix(&rest, StreamRecordPrefix(prefix)) || rest.size() != 20) return std::nullopt;
  uint64_t n = 0;
  if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(rest, &n)) {
    return std::nullopt;
  }
  return n;
}

std::string EncodeStreamEvents(const std::vector<audit::Event>& events) {
  std::string out;
  for (const audit::Event& e : events) {
    audit::Event plain = e;
    plain.journal_record = plain.stream_revision = 0;  // the reader's positions, not the writer's
    absl::StrAppend(&out, audit::EncodeEvent(plain, /*with_seq=*/false), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<audit::Event>> DecodeStreamEvents(absl::string_view value) {
  std::vector<audit::Event> out;
  for (absl::string_view line : absl::StrSplit(value, '\n', absl::SkipEmpty())) {
    absl::StatusOr<audit::Event> e = audit::DecodeEvent(line, 0);
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

void AddAuditStream(store::EtcdJournalOptions* journal, const base::Clock* clock) {
  const std::string prefix = journal->prefix;
  journal->record_ops = [prefix](const broker::DurableBatch& batch, uint64_t record) {
    return std::vector<etcd::Op>{
        etcd::Op::Put(AuditRecordKey(prefix, record), EncodeStreamEvents(EventsFor(batch.changes, record)))};
  };
  journal->trim_ops = [prefix, clock](uint64_t first_kept) {
    const absl::Time cutoff = clock->Now() - kReviewKeep;
    const uint64_t ns = static_cast<uint64_t>(std::max<int64_t>(0, absl::ToUnixNanos(cutoff)));
    return std::vector<etcd::Op>{
        etcd::Op::Delete(StreamRecordPrefix(prefix), AuditRecordKey(prefix, first_kept)),
        etcd::Op::Delete(AuditReviewPrefix(prefix), AuditReviewPrefix(prefix) + StreamPad20(ns))};
  };
}

ReviewWriter::ReviewWriter(etcd::Client* client, std::string prefix, std::string replica_id,
                           const base::Clock* clock)
    : client_(client), prefix_(std::move(prefix)), replica_id_(std::move(replica_id)), clock_(clock) {}

absl::Status ReviewWriter::Write(const audit::Event& e) {
  const uint64_t ns = static_cast<uint64_t>(std::max<int64_t>(0, absl::ToUnixNanos(clock_->Now())));
  const std::string key =
      absl::StrCat(AuditReviewPrefix(prefix_), StreamPad20(ns), "-", replica_id_, "-", StreamPad20(++counter_));
  absl::StatusOr<int64_t> put = client_->Put(key, EncodeStreamEvents({e}));
  return put.ok() ? absl::OkStatus() : put.status();
}

AuditStreamFeed::AuditStreamFeed(etcd::Client* client, std::string prefix, audit::AuditLog* audit)
    : client_(client), prefix_(std::move(prefix)), audit_(audit) {
  {
    absl::MutexLock lock(&mu_);
    stats_.position = audit_->last_stream_revision();
    stats_.record = audit_->last_journal_record();
  }
  thread_ = std::thread([this] { Run(); });
}

AuditStreamFeed::~AuditStreamFeed() { Stop(); }

void AuditStreamFeed::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

AuditStreamStats AuditStreamFeed::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void AuditStreamFeed::Run() {
  constexpr absl::Duration kFirst = absl::Milliseconds(100);
  absl::Duration backoff = kFirst;
  while (!stop_.HasBeenNotified()) {
    absl::Status s = Session();
    if (stop_.HasBeenNotified()) break;
    if (s.ok()) backoff = kFirst;
    base::GetLogger("audit")->warn("audit stream: stopped ({}); again in {}", s.ok() ? "the watch ended" : s.message(),
                                   absl::FormatDuration(backoff));
    if (stop_.WaitForNotificationWithTimeout(backoff)) break;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

// Appends `events` (none: only the positions move, in memory) stamped with
// the positions after them: `record` (0: unchanged) and `revision`.
absl::Status AuditStreamFeed::Write(std::vector<audit::Event> events, uint64_t record, int64_t revision) {
  uint64_t last_record, position;
  {
    absl::MutexLock lock(&mu_);
    last_record = std::max(stats_.record, record);
    position = std::max<uint64_t>(stats_.position, static_cast<uint64_t>(std::max<int64_t>(0, revision)));
  }
  for (audit::Event& e : events) {
    e.journal_record = last_record;
    e.stream_revision = position;
  }
  if (!events.empty()) {
    absl::StatusOr<uint64_t> appended = audit_->Append(events);
    if (!appended.ok()) {
      absl::MutexLock lock(&mu_);
      ++stats_.failures;
      return appended.status();
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.record = last_record;
  stats_.position = position;
  return absl::OkStatus();
}

absl::Status AuditStreamFeed::Legacy(uint64_t upto, int64_t revision) {
  uint64_t from;
  {
    absl::MutexLock lock(&mu_);
    from = stats_.record + 1;
  }
  if (from > upto) return absl::OkStatus();
  etcd::RangeOptions o;
  o.range_end = upto == std::numeric_limits<uint64_t>::max() ? etcd::PrefixEnd(store::JournalPrefix(prefix_))
                                                             : store::JournalKey(prefix_, upto + 1);
  o.limit = 256;
  o.revision = revision;
  for (int page = 0; page < (1 << 24) && !stop_.HasBeenNotified(); ++page) {
    absl::StatusOr<etcd::RangeResult> r = client_->Range(store::JournalKey(prefix_, from), o);
    if (!r.ok()) return r.status();
    o.revision = r->revision;
    for (const etcd::KeyValue& kv : r->kvs) {
      const std::optional<uint64_t> record = store::RecordOfKey(prefix_, kv.key);
      if (!record.has_value() || *record < from) continue;
      if (*record > from) {
        base::GetLogger("audit")->warn(
            "audit stream: records {} to {} were removed from etcd before this replica wrote their events; skipped",
            from, *record - 1);
        absl::MutexLock lock(&mu_);
        stats_.skipped += *record - from;
      }
      absl::StatusOr<std::vector<audit::Event>> events = EventsOfRecord(kv.value, *record);
      if (!events.ok()) return events.status();
      if (absl::Status s = Write(*std::move(events), *record, 0); !s.ok()) return s;
      {
        absl::MutexLock lock(&mu_);
        ++stats_.legacy_records;
      }
      from = *record + 1;
    }
    if (!r->more || r->kvs.empty()) break;
  }
  if (upto != std::numeric_limits<uint64_t>::max() && from <= upto) {
    base::GetLogger("audit")->warn(
        "audit stream: records {} to {} were removed from etcd before this replica wrote their events; skipped", from,
        upto);
    {
      absl::MutexLock lock(&mu_);
      stats_.skipped += upto - from + 1;
    }
    return Write({}, upto, 0);
  }
  return absl::OkStatus();
}

absl::Status AuditStreamFeed::Apply(const etcd::KeyValue& kv) {
  uint64_t position, last_record;
  {
    absl::MutexLock lock(&mu_);
    position = stats_.position;
    last_record = stats_.record;
  }
  if (kv.mod_revision <= static_cast<int64_t>(position)) return absl::OkStatus();
  const std::optional<uint64_t> record = RecordOfAuditKey(prefix_, kv.key);
  if (!record.has_value() && !absl::StartsWith(kv.key, AuditReviewPrefix(prefix_))) {
    return absl::OkStatus();  // not a key this version writes
  }
  if (record.has_value() && *record > last_record + 1) {
    // Records between: written before the stream (or gone from etcd).
    if (absl::Status s = Legacy(*record - 1, 0); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    last_record = stats_.record;
  }
  absl::StatusOr<std::vector<audit::Event>> events = DecodeStreamEvents(kv.value);
  if (!events.ok()) {
    base::GetLogger("audit")->error("audit stream: {} does not decode ({}); skipped", kv.key,
                                    events.status().message());
    absl::MutexLock lock(&mu_);
    ++stats_.undecodable;
    events = std::vector<audit::Event>{};
  }
  // A record whose events are written already (derived before the stream
  // key was read) moves only the position.
  if (record.has_value() && *record <= last_record) events->clear();
  if (absl::Status s = Write(*std::move(events), record.value_or(0), kv.mod_revision); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  ++stats_.keys;
  return absl::OkStatus();
}

absl::Status AuditStreamFeed::Session() {
  // The stream after the position, at one revision, in revision order.
  uint64_t position;
  {
    absl::MutexLock lock(&mu_);
    position = stats_.position;
  }
  const std::string stream = AuditStreamPrefix(prefix_);
  etcd::RangeOptions o;
  o.range_end = etcd::PrefixEnd(stream);
  o.limit = 256;
  std::string from = stream;
  int64_t revision = 0;
  std::vector<etcd::KeyValue> items;
  for (int page = 0; page < (1 << 24); ++page) {
    absl::StatusOr<etcd::RangeResult> r = client_->Range(from, o);
    if (!r.ok()) return r.status();
    if (revision == 0) revision = o.revision = r->revision;
    for (etcd::KeyValue& kv : r->kvs) {
      from = kv.key + std::string(1, '\0');
      if (kv.mod_revision > static_cast<int64_t>(position)) items.push_back(std::move(kv));
    }
    if (!r->more || r->kvs.empty() || stop_.HasBeenNotified()) break;
  }
  std::sort(items.begin(), items.end(), [](const etcd::KeyValue& a, const etcd::KeyValue& b) {
    return a.mod_revision != b.mod_revision ? a.mod_revision < b.mod_revision : a.key < b.key;
  });
  for (const etcd::KeyValue& kv : items) {
    if (absl::Status s = Apply(kv); !s.ok()) return s;
  }
  items.clear();
  // Records after the last written without an audit key at that revision:
  // written before the stream (migration).
  if (absl::Status s = Legacy(std::numeric_limits<uint64_t>::max(), revision); !s.ok()) return s;
  // Then what comes after. A write that fails ends the session; the next
  // one starts from the position.
  struct End {
    absl::Mutex mu;
    absl::Status why = absl::UnavailableError("the watch ended");
    absl::Notification ended;
  };
  auto end = std::make_shared<End>();
  etcd::WatchOptions wo;
  wo.range_end = etcd::PrefixEnd(stream);
  wo.start_revision = revision + 1;
  absl::StatusOr<std::unique_ptr<etcd::Watch>> watch = client_->StartWatch(
      stream, wo,
      [this, end](const std::vector<etcd::WatchEvent>& events, int64_t) {
        // Callbacks come one at a time on the watch's thread.
        if (end->ended.HasBeenNotified()) return;
        for (const etcd::WatchEvent& e : events) {
          if (e.type != etcd::WatchEvent::Type::kPut) continue;  // the leader's clean-up
          if (absl::Status s = Apply(e.kv); !s.ok()) {
            absl::MutexLock lock(&end->mu);
            if (end->ended.HasBeenNotified()) return;
            end->why = s;
            end->ended.Notify();
            return;
          }
        }
      },
      [end](const absl::Status& s) {
        absl::MutexLock lock(&end->mu);
        if (end->ended.HasBeenNotified()) return;
        if (!s.ok()) end->why = s;
        end->ended.Notify();
      });
  if (!watch.ok()) return watch.status();
  absl::Status out = absl::OkStatus();
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
    if (end->ended.HasBeenNotified()) {
      absl::MutexLock lock(&end->mu);
      out = end->why;
      break;
    }
  }
  (*watch)->Cancel();
  watch->reset();
  return out;
}

}  // namespace gangkeeper::node
