// gangkeeper: the only place that reads the system clocks (grep-checked).
#include "gangkeeper/base/clock.h"

#include <chrono>
#include <optional>
#include <string>

namespace gangkeeper::base {
namespace {

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

// `n` decimal digits at `p` as a number; false if any is not a digit.
bool Digits(const char* p, int n, int* value) {
  int v = 0;
  for (int i = 0; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + (p[i] - '0');
  }
  *value = v;
  return true;
}

// The fast path of ParseRfc3339: "YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z" with a
// valid calendar date, hour <= 23, minute <= 59 and second <= 59 (absl
// reads a leap second 60 as the next minute's 00: left to it). nullopt
// when `text` has any other shape, for the general parser to judge.
std::optional<absl::Time> ParseUtcFast(absl::string_view text) {
  constexpr size_t kBase = 20;  // "YYYY-MM-DDTHH:MM:SSZ"
  if (text.size() < kBase || text.back() != 'Z') return std::nullopt;
  const char* p = text.data();
  if (p[4] != '-' || p[7] != '-' || p[10] != 'T' || p[13] != ':' || p[16] != ':') return std::nullopt;
  int year, month, day, hour, minute, second;
  if (!Digits(p, 4, &year) || !Digits(p + 5, 2, &month) || !Digits(p + 8, 2, &day) || !Digits(p + 11, 2, &hour) ||
      !Digits(p + 14, 2, &minute) || !Digits(p + 17, 2, &second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return std::nullopt;
  // A day past the month's end (Feb 30) is normalized by CivilSecond:
  // compare to refuse it as absl::ParseTime does.
  const absl::CivilSecond civil(year, month, day, hour, minute, second);
  if (civil.day() != day || civil.month() != month) return std::nullopt;
  int64_t nanos = 0;
  const size_t rest = text.size() - kBase;  // fraction bytes, the '.' included
  if (rest > 0) {
    if (p[19] != '.' || rest < 2 || rest > 10) return std::nullopt;
    const int digits = static_cast<int>(rest) - 1;
    int fraction = 0;
    if (!Digits(p + 20, digits, &fraction)) return std::nullopt;
    nanos = fraction;
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  return absl::FromCivil(civil, absl::UTCTimeZone()) + absl::Nanoseconds(nanos);
}

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

bool ParseRfc3339(absl::string_view text, absl::Time* out) {
  if (std::optional<absl::Time> fast = ParseUtcFast(text)) {
    *out = *fast;
    return true;
  }
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return false;
  *out = t;
  return true;
}

}  // namespace gangkeeper::base
