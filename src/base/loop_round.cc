// gangkeeper: the end of an event loop's round (see loop_round.h).
#include "gangkeeper/base/loop_round.h"

namespace gangkeeper::base {

LoopRound*& LoopRound::Slot() {
  thread_local LoopRound* current = nullptr;
  return current;
}

LoopRound* LoopRound::Current() { return Slot(); }

}  // namespace gangkeeper::base
