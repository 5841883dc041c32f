// gangkeeper audit: the in-memory index of the newest events, which
// AuditLog::Find asks before it scans (see audit.h). Private to the module.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/store/log.h"

namespace gangkeeper::audit {

// The in-memory index of the newest events (see audit.h). Entries are
// contiguous in seq: entries_[i] is event begin_ + i. Appends hand their
// events to a small staging list under their own mutex; queries (and
// appends, when nobody queries) fold it into the index, so an append never
// waits for a query's filtering.
class AuditIndex {
 public:
  // One indexed event: 48 bytes.
  struct Entry {
    int64_t time_us = 0;
    int64_t max_time_us = 0;  // the latest time up to here: `since` is a binary search
    uint32_t offset = 0, size = 0;
    uint32_t ns = 0, name = 0, kind = 0, action = 0, actor = 0, cq = 0;
  };
  struct Hit {
    uint64_t seq;
    uint32_t offset, size;
  };

  AuditIndex(size_t capacity, uint64_t next_seq) : capacity_(capacity), begin_(next_seq) {}
  ~AuditIndex();

  // Fills events [from, end) from the log on a thread of its own.
  void StartFill(const store::SegmentedLog* log, uint64_t from, uint64_t end);

  void Stage(uint64_t seq, const Event& e, const store::RecordLocation& at);

  // Drops events below `first` (retention removed their segments).
  void TrimBelow(uint64_t first);

  // The first seq the index answers for (everything from there on).
  uint64_t Begin();

  // Up to `want` events matching `q` with seq >= `from`. False when the
  // index no longer reaches back to `from` (the caller scans the gap).
  bool Lookup(const Query& q, uint64_t from, size_t want, std::vector<Hit>* hits);

  void Stats(AuditStats* out);

  bool ready();

 private:
  struct Staged {
    uint64_t seq;
    int64_t time_us;
    uint64_t offset;
    uint32_t size;
    std::string ns, name, kind, action, actor, cq;
  };

  uint32_t InternLocked(const std::string& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Entry MakeLocked(const Staged& s, int64_t prev_max) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void FoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Strings of events that left the index are dropped once they outnumber
  // the events.
  void MaybeCompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Fill(const store::SegmentedLog* log, uint64_t from, uint64_t end);

  const size_t capacity_;
  std::atomic<bool> stop_{false};
  std::thread filler_;

  absl::Mutex staging_mu_;
  std::vector<Staged> staging_ ABSL_GUARDED_BY(staging_mu_);

  absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t begin_ ABSL_GUARDED_BY(mu_);
  std::vector<Staged> held_ ABSL_GUARDED_BY(mu_);   // staged after a gap, waiting
  std::vector<Entry> built_ ABSL_GUARDED_BY(mu_);  // the background fill, oldest first
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> strings_ ABSL_GUARDED_BY(mu_);  // id -> string (stable addresses)
  absl::flat_hash_map<absl::string_view, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::audit
