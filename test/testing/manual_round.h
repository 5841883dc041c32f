// gangkeeper tests: an event loop's round (base::LoopRound) that the test
// ends, or abandons, by hand. Install it on a thread with
// base::ScopedRound; what code on that thread defers with AtEnd runs at
// End(), and is destroyed uncalled at Abandon() (the loop was destroyed
// before its round ended). Thread-compatible: one thread uses it.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "gangkeeper/base/loop_round.h"

namespace gangkeeper::testing {

class ManualRound : public base::LoopRound {
 public:
  void AtEnd(absl::AnyInvocable<void() &&> fn) override { pending_.push_back(std::move(fn)); }
  size_t pending() const { return pending_.size(); }
  // The loop's handlers are done: what they deferred runs.
  void End() {
    std::vector<absl::AnyInvocable<void() &&>> run;
    run.swap(pending_);
    for (auto& fn : run) std::move(fn)();
  }
  // The loop was destroyed before its round ended.
  void Abandon() { pending_.clear(); }

 private:
  std::vector<absl::AnyInvocable<void() &&>> pending_;
};

}  // namespace gangkeeper::testing
