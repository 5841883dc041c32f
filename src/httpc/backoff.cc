// gangkeeper httpc: the backoff policy, the retry budget and the
// interruptible sleep (see backoff.h).
#include "gangkeeper/httpc/backoff.h"

#include <algorithm>

#include "absl/strings/numbers.h"

namespace gangkeeper::httpc {

Backoff::Backoff(BackoffPolicy policy) : Backoff(policy, std::random_device{}()) {}

Backoff::Backoff(BackoffPolicy policy, uint64_t seed) : policy_(policy), rng_(seed) {}

absl::Duration Backoff::Delay(int retry, absl::string_view retry_after) {
  const int doublings = std::clamp(retry, 0, std::clamp(policy_.max_doublings, 0, 30));
  const absl::Duration cap = std::min(policy_.initial * (int64_t{1} << doublings), policy_.max);
  absl::Duration d = cap;
  if (policy_.full_jitter) {
    absl::MutexLock lock(&mu_);
    std::uniform_int_distribution<int64_t> dist(0, std::max<int64_t>(0, absl::ToInt64Microseconds(cap)));
    d = absl::Microseconds(dist(rng_));
  }
  int64_t seconds = 0;
  if (!retry_after.empty() && absl::SimpleAtoi(retry_after, &seconds) && seconds >= 0) {
    d = std::max(d, std::min(absl::Seconds(seconds), policy_.max_retry_after));
  }
  return std::max(d, absl::ZeroDuration());
}

RetryBudget::RetryBudget(const base::Clock& clock, absl::Duration max_total)
    : clock_(clock), start_(clock.Now()), max_total_(max_total) {}

absl::Duration RetryBudget::Elapsed() const { return clock_.Now() - start_; }

bool RetryBudget::Allows(absl::Duration wait) const { return Elapsed() + wait <= max_total_; }

bool Sleeper::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&cancelled_), d);
  return !cancelled_;
}

void Sleeper::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

bool Sleeper::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

}  // namespace gangkeeper::httpc
