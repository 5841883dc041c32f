// gangkeeper replica: the audit log from the journal in etcd (see
// audit_feed.h).
#include "gangkeeper/replica/audit_feed.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gangkeeper/store/state_codec.h"
#include "src/replica/watch_loop.h"

namespace gangkeeper::replica {

AuditFeed::AuditFeed(etcd::Client* client, std::string prefix, audit::AuditLog* audit)
    : client_(client), prefix_(std::move(prefix)), audit_(audit) {
  {
    absl::MutexLock lock(&mu_);
    stats_.position = audit_->last_journal_record();
  }
  thread_ = std::thread([this] { Run(); });
}

AuditFeed::~AuditFeed() { Stop(); }

void AuditFeed::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

AuditFeedStats AuditFeed::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void AuditFeed::Run() {
  internal::RunSessions(&stop_, "audit", "audit feed: following the journal in etcd", [this] { return CatchUpAndWatch(); });
}

absl::Status AuditFeed::Write(uint64_t record, const std::string& payload) {
  uint64_t position;
  {
    absl::MutexLock lock(&mu_);
    position = stats_.position;
  }
  if (record <= position) return absl::OkStatus();
  if (record > position + 1) {
    base::GetLogger("audit")->warn(
        "audit feed: records {} to {} were removed from etcd before this replica wrote their events; skipped",
        position + 1, record - 1);
    absl::MutexLock lock(&mu_);
    stats_.skipped += record - position - 1;
  }
  broker::DurableState scratch;
  std::vector<broker::StateChange> changes;
  if (absl::Status s = store::ApplyBatch(payload, record, &scratch, &changes); !s.ok()) {
    return absl::DataLossError(absl::StrCat("journal record ", record, ": ", s.message()));
  }
  std::vector<audit::Event> events = audit::EventsFor(changes, record);
  // A review's event comes as the answering replica wrote it, without a
  // record: it carries the one it arrived in here, so that after a restart
  // the audit log's last record (AuditLog::Open reads it back) is this
  // record, and the feed neither writes it again nor, after a flood of
  // reviews, starts over from the oldest record etcd keeps.
  for (audit::Event& e : events) {
    if (e.journal_record == 0) e.journal_record = record;
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
  stats_.position = record;
  ++stats_.records;
  return absl::OkStatus();
}

absl::Status AuditFeed::CatchUpAndWatch() {
  uint64_t from;
  {
    absl::MutexLock lock(&mu_);
    from = stats_.position + 1;
  }
  etcd::RangeOptions o;
  o.range_end = etcd::PrefixEnd(store::JournalPrefix(prefix_));
  o.limit = 256;
  int64_t revision = 0;
  for (int page = 0; page < (1 << 24); ++page) {
    absl::StatusOr<etcd::RangeResult> r = client_->Range(store::JournalKey(prefix_, from), o);
    if (!r.ok()) return r.status();
    if (revision == 0) {
      revision = r->revision;
      o.revision = revision;
    }
    for (const etcd::KeyValue& kv : r->kvs) {
      const std::optional<uint64_t> record = store::RecordOfKey(prefix_, kv.key);
      if (!record.has_value()) continue;
      if (absl::Status s = Write(*record, kv.value); !s.ok()) return s;
      from = *record + 1;
    }
    if (!r->more || r->kvs.empty() || stop_.HasBeenNotified()) break;
  }
  // A write that fails ends the session (at the next tick); the events
  // after it wait for the next one, which starts from the position.
  absl::Mutex failed_mu;
  absl::Status failed;
  etcd::WatchOptions wo;
  wo.range_end = etcd::PrefixEnd(store::JournalPrefix(prefix_));
  wo.start_revision = revision + 1;
  return internal::WatchUntilEnd(
      client_, store::JournalPrefix(prefix_), wo,
      [&](const std::vector<etcd::WatchEvent>& events, int64_t) {
        // Callbacks come one at a time on the watch's thread.
        absl::MutexLock lock(&failed_mu);
        if (!failed.ok()) return;
        for (const etcd::WatchEvent& e : events) {
          if (e.type != etcd::WatchEvent::Type::kPut) continue;  // the leader's clean-up
          const std::optional<uint64_t> record = store::RecordOfKey(prefix_, e.kv.key);
          if (!record.has_value()) continue;
          if (absl::Status s = Write(*record, e.kv.value); !s.ok()) {
            failed = s;
            return;
          }
        }
      },
      &stop_, absl::Milliseconds(200), [&] {
        absl::MutexLock lock(&failed_mu);
        return failed;
      });
}

}  // namespace gangkeeper::replica
