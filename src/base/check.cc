// gangkeeper: invariant check failure paths (see the header).
#include "gangkeeper/base/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "gangkeeper/base/log.h"

namespace gangkeeper::base {
namespace {
std::atomic<uint64_t> bug_count{0};
}  // namespace

void CheckFailed(const char* file, int line, const char* expr, const char* msg) {
  std::fprintf(stderr, "gangkeeper: check failed at %s:%d: %s %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

void BugHit(const char* file, int line, const char* expr, const char* msg) {
  bug_count.fetch_add(1, std::memory_order_relaxed);
  GetLogger("bug")->error("bug: {} at {}:{} ({})", msg, file, line, expr);
#ifndef NDEBUG
  CheckFailed(file, line, expr, msg);
#endif
}

uint64_t BugCount() { return bug_count.load(std::memory_order_relaxed); }

}  // namespace gangkeeper::base
