// gangkeeper replica: a follower's copy of the leader's durable state
// (DESIGN §9, issue #10).
//
// Follower reads the state from etcd (ReadState), then watches the journal
// and folds each new record into it (store::ApplyBatch), and shows the
// newer state in the replica's broker::ReadOnlyView (roles.h) at most every
// `min_interval`: building a snapshot costs time in the number of
// workloads, so a burst of records makes one rebuild. No scheduler runs. A gap in the records (a watch that
// missed some) or a compacted revision starts over from ReadState.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/roles.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::replica {

struct FollowerStats {
  uint64_t position = 0;  // the last record the view shows
  uint64_t records = 0;   // folded from the watch
  uint64_t reads = 0;     // whole reads of the state (start, gaps, compaction)
  uint64_t rebuilds = 0;  // snapshots built (ReadOnlyView::Show)
  bool synced = false;    // the view showed the state at least once
};

class Follower {
 public:
  // `client` and `view` must outlive the follower.
  Follower(etcd::Client* client, std::string prefix, broker::ReadOnlyView* view,
           absl::Duration min_interval = absl::Milliseconds(200));
  ~Follower();  // Stop()
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Stops watching; the view keeps the state it was last given.
  void Stop();
  FollowerStats stats() const;

 private:
  void Run();
  // One life: read, follow the watch until it ends or Stop().
  absl::Status Follow();
  // Shows the newest state when it changed; DataLoss on a gap.
  absl::Status HandOver();
  void OnEvents(const std::vector<etcd::WatchEvent>& events);

  etcd::Client* const client_;
  const std::string prefix_;
  broker::ReadOnlyView* const view_;
  const absl::Duration min_interval_;

  mutable absl::Mutex mu_;
  broker::DurableState state_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool gap_ ABSL_GUARDED_BY(mu_) = false;  // a record missing or undecodable: read again
  FollowerStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gangkeeper::replica
