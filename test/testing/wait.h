// Waiting in tests: poll a condition, bounded in time.
#pragma once

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gangkeeper::testing {

// Polls `done` every `poll` for at most `limit`; true as soon as it holds.
// A bounded wait for something another thread or process does: never a
// timing assertion (the limit is generous; only a hang reaches it).
inline bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(20),
                    absl::Duration poll = absl::Milliseconds(20)) {
  const absl::Time end = absl::Now() + limit;
  while (absl::Now() < end) {
    if (done()) return true;
    absl::SleepFor(poll);
  }
  return done();
}

}  // namespace gangkeeper::testing
