// gangkeeper: the only place that reads the system clocks (grep-checked).
#include "gangkeeper/base/clock.h"

#include <chrono>

namespace gangkeeper::base {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Clock& RealClock() {
  static SystemClock* clock = new SystemClock();  // never destroyed
  return *clock;
}

absl::Time SimulatedClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void SimulatedClock::AdvanceTime(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void SimulatedClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  if (t > now_) now_ = t;
}

Stopwatch::Stopwatch() : start_ns_(MonotonicNanos()) {}

absl::Duration Stopwatch::Elapsed() const { return absl::Nanoseconds(MonotonicNanos() - start_ns_); }

void Stopwatch::Reset() { start_ns_ = MonotonicNanos(); }

}  // namespace gangkeeper::base
