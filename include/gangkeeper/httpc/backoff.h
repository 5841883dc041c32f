// gangkeeper httpc: how a client waits between attempts, for the Kubernetes
// client, the etcd client and the CLI (one policy type for all of them).
//
// Backoff computes the delay before a retry (exponential, capped, with or
// without full jitter, at least the server's Retry-After); RetryBudget says
// whether a call may still wait, measured on an injected base::Clock; a
// Sleeper waits and can be woken for good by Cancel() (shutdown).
//
// Backoff and Sleeper are thread-safe; RetryBudget is thread-compatible
// (one per call).
#pragma once

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::httpc {

struct BackoffPolicy {
  // The cap before retry n is min(max, initial * 2^min(n, max_doublings)).
  absl::Duration initial = absl::Milliseconds(200);
  absl::Duration max = absl::Seconds(10);
  int max_doublings = 20;
  // True: the delay is uniform in [0, cap] ("full jitter", which spreads
  // many clients retrying together); false: the delay is the cap.
  bool full_jitter = true;
  // A Retry-After the server gave is honoured up to this long.
  absl::Duration max_retry_after = absl::Hours(1);
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy);
  // Seeded, for tests that want the same jitter every run.
  Backoff(BackoffPolicy policy, uint64_t seed);

  // The delay before retry `retry` (0 = the first retry after the first
  // attempt). `retry_after` is the server's Retry-After header (whole
  // seconds; anything else, e.g. an HTTP date, is ignored): the delay is at
  // least that long, up to policy.max_retry_after.
  absl::Duration Delay(int retry, absl::string_view retry_after = "");

  const BackoffPolicy& policy() const { return policy_; }

 private:
  const BackoffPolicy policy_;
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

// The time a call may spend in total, retries and waits included, from the
// moment the budget is made.
class RetryBudget {
 public:
  RetryBudget(const base::Clock& clock, absl::Duration max_total);
  // False when waiting `wait` now would end past max_total.
  bool Allows(absl::Duration wait) const;
  absl::Duration Elapsed() const;

 private:
  const base::Clock& clock_;
  const absl::Time start_;
  const absl::Duration max_total_;
};

// An interruptible sleep.
class Sleeper {
 public:
  // Waits `d` unless Cancel() was or is called (then returns false at once).
  bool Sleep(absl::Duration d);
  // Wakes every sleeper, now and later.
  void Cancel();
  bool cancelled() const;

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gangkeeper::httpc
