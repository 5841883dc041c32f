// gangkeeper audit: the durable audit log (DESIGN §8; every byte on disk is
// specified in src/audit/FORMAT.md).
//
// One JSON object per event, each one record of a store::SegmentedLog (kind
// "audit") in <data-dir>/audit: checksummed, fsynced before Append returns,
// rotated by size, the oldest segments removed past a total size. An
// event's `seq` is its record number: gapless and monotonic, also across
// restarts and crashes.
//
// The log knows no broker types: the node turns the broker's durable
// batches into events (node/audit_events.h: with the file journal the
// journal record first, then its events, each carrying the record number,
// and a catch-up at start for a crash between the two; with etcd the
// replicated audit stream, node/audit_stream.h). An event's journal record
// and stream revision are read back at Open, so a writer resumes after the
// last one the log has.
//
// Each record is sealed into a SHA-256 hash chain (optionally with an
// HMAC); HEAD anchors the newest record and BASE the one before the oldest
// kept, so that a changed, removed or cut-off record shows in
// VerifyAuditLog (audit/verify.h). Size-based retention removes events
// younger than AuditOptions::min_retention only loudly (an error line, a
// count in stats() and an `audit.retention_forced` event).
//
// Queries are answered from an in-memory index of the newest events
// (AuditOptions::index_events; 48 bytes each, strings interned): the index
// gives the matching records' places on disk and only those are read. Older
// events are found by scanning their segments. The index is filled from the
// log in the background after Open, so a start is not delayed; until then
// those events are scanned too. Appends never wait for a query.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/log.h"

namespace gangkeeper::audit {

// Actions the audit module writes itself (the broker's are in
// src/node/audit_events.cc).
inline constexpr char kReviewDenied[] = "review.denied";
inline constexpr char kDenialsSuppressed[] = "review.denials_suppressed";
inline constexpr char kRetentionForced[] = "audit.retention_forced";
inline constexpr char kTailMissing[] = "audit.tail_missing";

struct Event {
  uint64_t seq = 0;  // given by the log
  absl::Time time;
  std::string actor;   // a Kubernetes user, an API token's name, or "gangkeeper"
  // The actor is what an unverified caller claimed (a review's userInfo),
  // not an identity gangkeeper checked. JSON "actorClaimed": true when set.
  bool actor_claimed = false;
  std::string action;  // workload.pending, workload.admitted, ..., quota.changed, review.denied
  std::string kind;    // the object's kind (Workload for broker events)
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string cluster_queue;
  std::string reason;
  std::string details;          // a JSON object (text), "" for none
  uint64_t journal_record = 0;  // broker events: the journal record they come from
  // Events from the replicated audit stream in etcd (node/audit_stream.h):
  // the etcd revision of the stream key the feed had written up to with
  // this event (its position; JSON "stream", absent when 0).
  uint64_t stream_revision = 0;
};

// The event as one line of JSON (no newline), DESIGN §8's field names.
// The log stores events without `seq` (with_seq false): the record number
// is the seq, so concurrent appends need not agree on it beforehand and
// share fsyncs (group commit).
std::string EncodeEvent(const Event& e, bool with_seq = true);
[[nodiscard]] absl::StatusOr<Event> DecodeEvent(absl::string_view json, uint64_t seq);

struct AuditOptions {
  std::string dir = "data/audit";
  store::FileSystem* fs = nullptr;  // nullptr: POSIX
  uint64_t segment_bytes = 16ull << 20;
  // The oldest segments are removed once the log is larger than this, and
  // once every event in them is older than max_age (a segment's events all
  // came before the next segment's first one). Zero max_age: no age limit.
  uint64_t max_bytes = 1ull << 30;
  absl::Duration max_age = absl::Hours(24 * 400);
  // max_bytes never removes a segment holding events younger than this
  // quietly: it still does (the size cap wins), but only after an error
  // log line, a count in stats() and an `audit.retention_forced` event.
  // Zero: no minimum.
  absl::Duration min_retention = absl::Hours(24 * 7);
  // The HMAC-SHA256 key of the records' seals and the anchors; "" for a
  // plain hash chain (LoadHmacKey reads one from a file).
  std::string hmac_key;
  // Required (Open refuses nullptr): stamps retention and recovery events
  // and ages segments. Must outlive the log.
  const base::Clock* clock = nullptr;
  bool truncate_corruption = false;
  // The newest this many events are indexed in memory (48 bytes each plus
  // their distinct strings); 0 turns the index off.
  size_t index_events = 1'000'000;
};

struct Query {
  std::string namespace_name, name, kind, action, actor, cluster_queue;
  std::optional<absl::Time> since, until;
  uint64_t after = 0;  // the cursor: events with seq > after
  size_t limit = 100;
};

struct Page {
  std::vector<Event> events;  // oldest first
  uint64_t next = 0;          // the cursor for the next page; 0 when this is the last
};

struct AuditStats {
  store::LogStats log;
  uint64_t last_journal_record = 0;
  uint64_t last_stream_revision = 0;
  uint64_t failed_appends = 0;
  uint64_t retention_forced = 0;         // passes that removed events younger than min_retention
  uint64_t retention_forced_events = 0;  // the events they removed
  std::optional<absl::Time> oldest_event;  // the time of the oldest event kept
  uint64_t indexed_events = 0;
  uint64_t index_first_seq = 0;  // 0 when nothing is indexed
  bool index_ready = false;      // the background fill is done
};

// The newest acknowledged record: what an external system anchors.
struct AuditHead {
  uint64_t seq = 0;  // 0: no record yet
  absl::Time time;   // its event's time
  std::string chain;  // 64 hex digits; all zero when the record is unchained (version 1)
  std::string hmac;   // 64 hex digits of the record's HMAC, "" without a key
};

// Reads an HMAC key from `path`: its bytes without one trailing newline,
// at least 16 of them. InvalidArgument naming the path and the fix.
[[nodiscard]] absl::StatusOr<std::string> LoadHmacKey(const std::string& path);

class AuditIndex;
class Chain;

class AuditLog {
 public:
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  [[nodiscard]] static absl::StatusOr<std::unique_ptr<AuditLog>> Open(AuditOptions options,
                                                                      store::LogRecovery* recovery);
  // Appends durably, in order; returns the seq of the first. Concurrent
  // appends share fsyncs.
  [[nodiscard]] absl::StatusOr<uint64_t> Append(const std::vector<Event>& events);
  // Events matching `q`, oldest first, at most q.limit (1..1000). Waits
  // first (at most kSettleWait) until every journal record announced so
  // far is settled.
  [[nodiscard]] absl::StatusOr<Page> Find(const Query& q) const;
  // The events of journal record `record` are on their way: the record is
  // durable and what it decided may already show elsewhere (the broker
  // publishes and actuates a batch before its events are written; see
  // node::AuditedJournal). Until Settle(record) (called once they are
  // appended, or failed to be), Find and head() wait, so a reader who saw
  // a decision finds its event. Records are announced in order.
  static constexpr absl::Duration kSettleWait = absl::Seconds(2);
  void Announce(uint64_t record);
  void Settle(uint64_t record);
  // The highest journal record whose events are in the log.
  uint64_t last_journal_record() const;
  // The highest stream revision of an event in the log (Event::stream_revision).
  uint64_t last_stream_revision() const;
  // The newest acknowledged record and its chain value (GET /v1/audit/head).
  AuditHead head() const;
  absl::Status health() const { return log_->health(); }
  AuditStats stats() const;

 private:
  AuditLog(AuditOptions options, std::unique_ptr<store::SegmentedLog> log, std::unique_ptr<Chain> chain,
           uint64_t last_journal_record, uint64_t last_stream_revision);
  // Append without the retention pass that may follow.
  absl::StatusOr<uint64_t> AppendRecords(const std::vector<Event>& events);
  // Removes the oldest segments past max_bytes and max_age (see
  // AuditOptions); one pass at a time.
  void Retain() ABSL_LOCKS_EXCLUDED(mu_, retain_mu_);
  // Retain's steps (retention.cc). How many of the oldest `segments` go:
  // `by_size` for max_bytes, the result also for max_age.
  size_t SegmentsPastLimits(const std::vector<store::SegmentInfo>& segments, absl::Time now, size_t* by_size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_);
  // The first of the `by_size` oldest segments holding events younger than
  // min_retention (and not older than max_age); `by_size` when none does.
  size_t FirstYoungSegment(const std::vector<store::SegmentInfo>& segments, size_t by_size, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_);
  // Logs, counts and records (audit.retention_forced) that the size cap
  // removes segments [young, by_size).
  void RecordForcedRetention(const std::vector<store::SegmentInfo>& segments, size_t young, size_t by_size,
                             absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_);
  // Writes BASE, then removes the `count` segments before record `keep`;
  // false (logged) when BASE cannot be written and nothing was removed.
  bool DropSegmentsBefore(uint64_t keep, size_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_);
  // The time of the first event of the segment starting at `first_seq`.
  std::optional<absl::Time> FirstEventTime(uint64_t first_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_);
  // Scans records [from, end) of the log for `q`, adding to `found` until
  // it holds `want`.
  absl::Status Scan(const Query& q, uint64_t from, uint64_t end, size_t want, std::vector<Event>* found) const;
  // Waits (at most kSettleWait) until the records announced by now are
  // settled.
  void AwaitSettled() const ABSL_LOCKS_EXCLUDED(mu_);

  AuditOptions options_;
  std::unique_ptr<store::SegmentedLog> log_;
  std::unique_ptr<Chain> chain_;
  std::unique_ptr<AuditIndex> index_;
  absl::Mutex retain_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  uint64_t last_journal_record_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t announced_ ABSL_GUARDED_BY(mu_) = 0;  // Announce's highest record
  uint64_t settled_ ABSL_GUARDED_BY(mu_) = 0;    // Settle's highest record
  uint64_t last_stream_revision_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_appends_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retained_segments_ ABSL_GUARDED_BY(mu_) = 0;  // segment count at the last retention pass
  uint64_t retention_forced_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retention_forced_events_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Time> oldest_event_ ABSL_GUARDED_BY(mu_);
  // The time of each segment's first event (by its first seq), learnt as
  // appends start segments or read once.
  std::map<uint64_t, absl::Time> first_event_time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::audit
