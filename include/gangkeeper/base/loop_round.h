// gangkeeper: the end of an event loop's round.
//
// An event loop runs the handlers that are ready, then waits for more I/O.
// Work that many handlers of one round each start (handing events to the
// broker's thread, which wakes that thread) is cheaper done once, when the
// round's handlers have run: LoopRound::AtEnd defers a function to then.
// A loop thread installs its LoopRound for as long as it runs (ScopedRound);
// code that may run anywhere asks for the calling thread's (Current) and,
// on a thread without one, does the work at once.
//
//   if (base::LoopRound* round = base::LoopRound::Current()) {
//     round->AtEnd([] { WakeTheWriter(); });
//   } else {
//     WakeTheWriter();
//   }
//
// A function deferred to a round that never ends (the loop was stopped and
// destroyed first) is destroyed without being called: whatever it owns must
// answer its waiters from its destructor.
#pragma once

#include "absl/functional/any_invocable.h"

namespace gangkeeper::base {

class LoopRound {
 public:
  virtual ~LoopRound() = default;

  // Calls `fn` on this loop's thread after the handlers ready now have run
  // (before the loop waits for I/O). Only from the loop's own thread.
  virtual void AtEnd(absl::AnyInvocable<void() &&> fn) = 0;

  // The calling thread's round, or null on a thread that is not an event
  // loop's (or runs outside its handlers).
  static LoopRound* Current();

 private:
  friend class ScopedRound;
  static LoopRound*& Slot();
};

// Installs `round` as the calling thread's for its lifetime (nests: the one
// before comes back).
class ScopedRound {
 public:
  explicit ScopedRound(LoopRound* round) : previous_(LoopRound::Slot()) { LoopRound::Slot() = round; }
  ~ScopedRound() { LoopRound::Slot() = previous_; }
  ScopedRound(const ScopedRound&) = delete;
  ScopedRound& operator=(const ScopedRound&) = delete;

 private:
  LoopRound* const previous_;
};

}  // namespace gangkeeper::base
