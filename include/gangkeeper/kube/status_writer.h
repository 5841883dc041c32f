// gangkeeper: the broker's ClusterQueue, LocalQueue and Cohort state
// written back to Kueue's objects' .status (issue #24 item 2), so that
// `kubectl get clusterqueues` and `kubectl get localqueues` show
// gangkeeper's truth with Kueue's own printer columns. A Cohort's status
// (its fairSharing.weightedShare) is written only to Cohort objects: a
// cohort named only by ClusterQueues has none.
//
// A pass compares what the latest snapshot says (kueue_objects.h) with
// what was last written (or listed) per object and writes only the
// objects that differ, with a merge patch of the status subresource. Passes
// run every `interval`, each writes at most `max_writes_per_pass` objects
// (the rest waits for the next pass): that is the rate limit. A pass over
// an unchanged snapshot does nothing at all. Only while `leading()` (asked
// before every write, so a pass that outlives the lease stops) and
// while `refused()` is empty (Kueue's own controller does not run): a pass
// that starts leading (or allowed again) first lists the objects and takes
// their status as written, so a new leader, or a restart, writes only what
// differs. Objects the cluster does not have (not listed, or 404) are
// skipped until the next list, every `resync`.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/kueue_objects.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

class WritePass;  // src/kube/write_pass.h: a pass's writes, gated by the lease and a budget

struct KueueWriterOptions {
  const base::Clock* clock = nullptr;  // required
  KueueVersion version = KueueVersion::kV1beta2;
  // Whether this replica leads now; null: always (one node, file journal).
  std::function<bool()> leading;
  // Non-empty: why nothing may be written now (Kueue's own controller
  // runs); null: never refused.
  std::function<std::string()> refused;
  // Time between passes: with max_writes_per_pass, the rate limit.
  absl::Duration interval = absl::Seconds(1);
  int max_writes_per_pass = 50;
  // How often the objects are listed again (repairs what someone else
  // changed or deleted).
  absl::Duration resync = absl::Seconds(30);
};

struct KueueWriterStats {
  uint64_t passes = 0;   // passes that compared (leading, not refused)
  uint64_t lists = 0;    // resyncs from a list
  uint64_t writes = 0;   // PATCH /status, POST, PATCH, DELETE sent and accepted
  uint64_t failures = 0; // writes the API server refused (retried next pass)
  uint64_t refused = 0;  // passes skipped because Kueue's controller runs
};

class StatusWriter {
 public:
  // `client` and `view` must outlive the writer.
  StatusWriter(Client* client, const broker::SnapshotSource* view, KueueWriterOptions options);
  ~StatusWriter();  // Stop()
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  void Start();
  void Stop();
  // One pass now (the thread calls it every `interval`). Returns the
  // writes it made.
  int Sync();
  // The next pass lists the objects first.
  void ResyncNext();
  KueueWriterStats stats() const;

 private:
  struct Written {
    KueueStatus status;
    nlohmann::json conditions;  // as written, with their times
  };
  void Run();
  bool Allowed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  void List() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  void TakeCohorts(KueueVersion v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  void MarkAbsent(const broker::Snapshot& snap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);
  // Writes `want` to `path` when it differs from `written[key]`, through
  // the pass's gate (src/kube/write_pass.h).
  bool WriteOne(const std::string& path, const std::string& key, const KueueStatus& want, WritePass* pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);

  Client* const client_;
  const broker::SnapshotSource* const view_;
  const KueueWriterOptions options_;

  absl::Mutex sync_mu_;  // one pass at a time
  bool listed_ ABSL_GUARDED_BY(sync_mu_) = false;
  absl::Time last_list_ ABSL_GUARDED_BY(sync_mu_);
  uint64_t done_version_ ABSL_GUARDED_BY(sync_mu_) = UINT64_MAX;  // snapshot fully written
  // By object path ("/apis/.../clusterqueues/NAME").
  std::map<std::string, Written> written_ ABSL_GUARDED_BY(sync_mu_);
  std::set<std::string> missing_ ABSL_GUARDED_BY(sync_mu_);

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool resync_next_ ABSL_GUARDED_BY(mu_) = false;
  KueueWriterStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gangkeeper::kube
