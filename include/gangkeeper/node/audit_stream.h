// gangkeeper node: the replicated audit stream in etcd (DESIGN §8, §9;
// issue #21). Every byte is specified in src/store/FORMAT.md, "The audit
// stream".
//
// Keys under the prefix P (--etcd-prefix):
//   P audit/v1/journal/<record, 20 digits>
//       the audit events of journal record <record>, put by the leader in
//       the record's own transaction (store::EtcdJournalOptions::record_ops:
//       atomic with the decision, fenced by the term, so a deposed leader
//       writes none); one per record, "" when the record has no events
//   P audit/v1/review/<unix ns, 20 digits>-<replica id>-<counter, 20 digits>
//       the events of admission reviews a replica's webhook denied, put by
//       that replica (no trip through the leader): durable in etcd's quorum
//       when ReviewWriter::Write returns
// A value is the events encoded by audit::EncodeEvent (without seq), one
// per line. Keys are written once and never changed; the leader deletes the
// record keys with the records (behind the snapshot) and review keys older
// than kReviewKeep.
//
// Every replica's AuditStreamFeed appends the stream to its local audit
// log in etcd's order: by the keys' mod revision (a range at one revision,
// sorted, then a watch from the next revision). Its position is the
// revision of the last key it wrote, carried by every event it appends
// (audit::Event::stream_revision) with the journal record
// (Event::journal_record), so a replica restarted on the same audit log
// reads both back (AuditLog::Open) and goes on after them: no event twice,
// none lost.
//
// Migration: journal records written before the stream (by an older
// leader) have no audit key. Their events are derived from the record as
// before (EventsOfRecord, including old kReviewed changes): at the start
// of each session for the records after the last one the log has (the
// stream having been read first), and when the stream's next record key is
// more than one past the last written record (a gap: the records between
// are read from the journal, and those etcd no longer has are counted as
// skipped). So an upgraded replica writes the old records' events, then
// the stream's, each once.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/store/etcd_journal.h"

namespace gangkeeper::node {

// Review keys older than this are deleted with the leader's snapshots: a
// replica away longer misses them (as it misses records past keep_records).
inline constexpr absl::Duration kReviewKeep = absl::Hours(24);

std::string AuditStreamPrefix(const std::string& prefix);  // P audit/v1/
std::string AuditRecordKey(const std::string& prefix, uint64_t record);
std::string AuditReviewPrefix(const std::string& prefix);
// The record of a P audit/v1/journal/ key; nullopt for any other key.
std::optional<uint64_t> RecordOfAuditKey(const std::string& prefix, const std::string& key);

// A stream value: the events, one line each, and back.
std::string EncodeStreamEvents(const std::vector<audit::Event>& events);
[[nodiscard]] absl::StatusOr<std::vector<audit::Event>> DecodeStreamEvents(absl::string_view value);

// Sets `journal`'s record_ops (each record's audit key) and trim_ops (the
// keys deleted with the records, and review keys older than kReviewKeep by
// `clock`, which must outlive the journal).
void AddAuditStream(store::EtcdJournalOptions* journal, const base::Clock* clock);

// Writes a replica's denied reviews to the stream.
class ReviewWriter {
 public:
  // `client` and `clock` must outlive the writer; `replica_id` is unique.
  ReviewWriter(etcd::Client* client, std::string prefix, std::string replica_id, const base::Clock* clock);
  // Durable in etcd when it returns OK.
  absl::Status Write(const audit::Event& e);

 private:
  etcd::Client* const client_;
  const std::string prefix_;
  const std::string replica_id_;
  const base::Clock* const clock_;
  std::atomic<uint64_t> counter_{0};
};

struct AuditStreamStats {
  uint64_t position = 0;        // the revision of the last stream key written
  uint64_t record = 0;          // the last journal record whose events are written
  uint64_t keys = 0;            // stream keys written
  uint64_t legacy_records = 0;  // records without an audit key, derived from the journal
  uint64_t skipped = 0;         // records gone from etcd before they were written here
  uint64_t undecodable = 0;     // stream values that do not decode (logged, skipped)
  uint64_t failures = 0;        // audit appends that failed (retried)
};

class AuditStreamFeed {
 public:
  // `client` and `audit` must outlive the feed.
  AuditStreamFeed(etcd::Client* client, std::string prefix, audit::AuditLog* audit);
  ~AuditStreamFeed();  // Stop()
  AuditStreamFeed(const AuditStreamFeed&) = delete;
  AuditStreamFeed& operator=(const AuditStreamFeed&) = delete;

  void Stop();
  AuditStreamStats stats() const;

 private:
  void Run();
  // Reads the stream after the position, the legacy records after it, then
  // watches; returns when the watch ends, a write fails, or Stop().
  absl::Status Session();
  absl::Status Apply(const etcd::KeyValue& kv);
  // Writes the events of the journal records after the last one written,
  // up to `upto`, derived from the records (migration; see above).
  absl::Status Legacy(uint64_t upto, int64_t revision);
  absl::Status Write(std::vector<audit::Event> events, uint64_t record, int64_t revision);

  etcd::Client* const client_;
  const std::string prefix_;
  audit::AuditLog* const audit_;
  mutable absl::Mutex mu_;
  AuditStreamStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gangkeeper::node
