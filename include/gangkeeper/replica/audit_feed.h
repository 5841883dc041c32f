// gangkeeper replica: every replica's audit log, written from the leader's
// journal in etcd (DESIGN §8, §9; issue #10).
//
// The audit events of a decision are a function of its journal record
// (audit::EventsFor), so etcd holds no audit log of its own: each replica
// reads the records after the last one its audit log has (a range, then a
// watch) and appends their events to its local audit log, in order. An
// audit append then costs etcd nothing, and every replica answers audit
// queries for the whole cluster's decisions. Review events (a denied
// review) come through the journal too (the intake, intake.h): every event
// written here carries the record it came from, also a review's, so a
// replica restarted on the same audit log goes on after its last record
// and writes no event twice.
//
// A replica that was down so long that the leader deleted records it had
// not written (ReplicaOptions::journal.keep_records behind the newest
// snapshot), or whose audit log is new (a lost volume), skips them, logs
// the range, and counts them in stats(): its history starts at the oldest
// record etcd still has (deploy/README.md, "Audit history").
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::replica {

struct AuditFeedStats {
  uint64_t position = 0;  // the last record whose events are written
  uint64_t records = 0;
  uint64_t skipped = 0;   // records gone from etcd before they were written here
  uint64_t failures = 0;  // audit appends that failed (retried)
};

class AuditFeed {
 public:
  // `client` and `audit` must outlive the feed.
  AuditFeed(etcd::Client* client, std::string prefix, audit::AuditLog* audit);
  ~AuditFeed();  // Stop()
  AuditFeed(const AuditFeed&) = delete;
  AuditFeed& operator=(const AuditFeed&) = delete;

  void Stop();
  AuditFeedStats stats() const;

 private:
  void Run();
  absl::Status CatchUpAndWatch();
  // Writes the events of `record` (the next one, or later after a gap).
  absl::Status Write(uint64_t record, const std::string& payload);

  etcd::Client* const client_;
  const std::string prefix_;
  audit::AuditLog* const audit_;
  mutable absl::Mutex mu_;
  AuditFeedStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gangkeeper::replica
