// gangkeeper: time as an injected dependency.
//
// Every deadline, wait time, decay and audit timestamp in gangkeeper reads a
// Clock. Production code gets RealClock(); tests and `gangkeeper simulate` use
// SimulatedClock, which moves only when told to. The system clocks (absl and
// std::chrono) are read in src/base/clock.cc and nowhere else.
#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gangkeeper::base {

// A source of wall-clock time. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // The current wall-clock time.
  virtual absl::Time Now() const = 0;
};

// The process-wide real clock. Thread-safe; never destroyed.
Clock& RealClock();

// A clock that starts at a fixed time and moves only by AdvanceTime/SetTime.
// Thread-safe.
class SimulatedClock : public Clock {
 public:
  explicit SimulatedClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}

  absl::Time Now() const override;
  // Moves the clock forward by `d` (a negative `d` is ignored: time never
  // runs backwards on a simulated clock).
  void AdvanceTime(absl::Duration d);
  // Sets the clock to `t` if `t` is later than the current time.
  void SetTime(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// Measures elapsed time on the monotonic clock (immune to wall-clock steps),
// for latencies and timeouts. Thread-compatible.
class Stopwatch {
 public:
  Stopwatch();
  // Time since construction or the last Reset().
  absl::Duration Elapsed() const;
  void Reset();

 private:
  int64_t start_ns_;
};

// Parses an RFC 3339 time ("2026-12-07T09:45:39Z", "...T09:45:39.123456Z",
// "...T10:45:39+01:00") into `*out`; false (and `*out` untouched) when
// `text` is not one. Accepts exactly what absl::ParseTime(absl::RFC3339_full)
// accepts, with the same result; the UTC forms the Kubernetes API server
// writes (creationTimestamp, condition and audit times) take a fast path that
// does not go through absl's general format parser, which costs about a
// microsecond per call on the admission path.
bool ParseRfc3339(absl::string_view text, absl::Time* out);

}  // namespace gangkeeper::base
