// gangkeeper audit: review denials, rate-limited and aggregated on their
// way to the audit log (DESIGN §8), so that a flood of denied reviews —
// anything that reaches the webhook port can send them — cannot rotate the
// history away.
//
// A denial's key is (source address, object kind, namespace, name,
// reason). The first denial of a key is written at once and opens a
// window; repeats within the window are counted and written as one event
// when the window ends, or at Stop(): the last denial with details.count
// (the repeats), details.first and details.last. A denial that would open
// a window while the budget (DenialLimits: `per_second` on average, `burst`
// at once) is spent is only counted; a `review.denials_suppressed` event
// every `summary_every` says how many, and from which sources. So in t
// seconds at most burst + 2 × per_second × t denial events reach the log,
// whatever the flood.
//
// Time comes from the injected clock. Poll() writes what is due; Start()
// runs a thread that polls every second (tests call Poll themselves).
// Events are written through the sink outside the aggregator's lock.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::audit {

struct DenialLimits {
  // Repeats of a key within this long after its first denial make one
  // aggregated event. Longer: fewer events, later.
  absl::Duration window = absl::Minutes(1);
  // Windows opened (first denials written) per second on average, and at
  // once. Lower: a flood writes less, and fewer distinct denials are kept
  // one by one.
  double per_second = 10;
  double burst = 100;
  // How often the count of suppressed denials is written (when non-zero).
  absl::Duration summary_every = absl::Minutes(1);
  // Sources named in a summary (the rest are summed as "other").
  size_t summary_sources = 20;
};

struct DenialStats {
  uint64_t denials = 0;     // Record() calls
  uint64_t written = 0;     // written at once (first of a window)
  uint64_t aggregated = 0;  // repeats folded into aggregated events
  uint64_t aggregated_events = 0;
  uint64_t suppressed = 0;  // only counted (over the budget)
  uint64_t summaries = 0;
  uint64_t failed = 0;      // events the sink refused
};

class DenialAggregator {
 public:
  using Sink = std::function<absl::Status(const Event&)>;

  // `clock` must outlive the aggregator.
  DenialAggregator(DenialLimits limits, const base::Clock* clock, Sink sink);
  ~DenialAggregator();
  DenialAggregator(const DenialAggregator&) = delete;
  DenialAggregator& operator=(const DenialAggregator&) = delete;

  // A denied review from `source` (an IP address; "" when unknown): written
  // now (details.source added), counted into its window, or suppressed.
  // Returns the sink's error when it refused the event written now.
  absl::Status Record(Event denial, const std::string& source);
  // Writes the aggregated events whose window ended and, when due, the
  // summary of suppressed denials.
  void Poll();
  // A thread that calls Poll() every second until Stop().
  void Start();
  // Stops that thread, then writes every pending aggregate and summary
  // (at shutdown). Idempotent.
  void Stop();
  DenialStats stats() const;

 private:
  struct Window {
    absl::Time end;
    absl::Time first, last;  // of the repeats
    uint64_t count = 0;      // repeats after the first denial
    std::string source;
    Event latest;
  };

  // The events due at `now` (all of them when `all`), taken out under mu_.
  std::vector<Event> TakeDueLocked(absl::Time now, bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The aggregated event of `w`'s repeats (moves its latest denial).
  Event AggregateLocked(Window& w, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Write(const std::vector<Event>& events);

  const DenialLimits limits_;
  const base::Clock* const clock_;
  const Sink sink_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Window> windows_ ABSL_GUARDED_BY(mu_);
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_ ABSL_GUARDED_BY(mu_);
  // Suppressed since the last summary, by source.
  std::map<std::string, uint64_t> suppressed_by_source_ ABSL_GUARDED_BY(mu_);
  uint64_t suppressed_since_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time summary_from_ ABSL_GUARDED_BY(mu_);
  DenialStats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread poller_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::audit
