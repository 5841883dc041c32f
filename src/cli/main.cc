// gangkeeper: the binary's entry point (commands in dispatch.cc).
#include "absl/synchronization/mutex.h"
#include "src/cli/commands.h"

int main(int argc, char** argv) {
  // Debian's abseil is built without NDEBUG, so every Mutex::Lock would
  // keep a lock-order graph (GraphCycles) to detect deadlocks: about 1-2 %
  // of a /validate request's CPU. The test binaries keep the check (they
  // link the same library and never call this); the shipped binary does not
  // pay for it on every lock.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return gangkeeper::cli::RunMain(argc, argv);
}
