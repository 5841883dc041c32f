// gangkeeper: invariant checks (Envoy's RELEASE_ASSERT / ASSERT / ENVOY_BUG).
//
// GK_CHECK(cond)  always on; aborts with file:line when an invariant is
//                 broken (accounting below zero, a gang half-reserved).
// GK_DCHECK(cond) debug builds only.
// GK_BUG(cond, msg) logs and counts when `cond` is false and serving can
//                 safely continue; fatal in debug builds.
// Never use any of them for conditions imposed by input or the environment.
#pragma once

#include <cstdint>
#include <string>

namespace gangkeeper::base {

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const char* msg);
void BugHit(const char* file, int line, const char* expr, const char* msg);
// How many GK_BUG conditions fired since start (exported as a metric).
uint64_t BugCount();

}  // namespace gangkeeper::base

#define GK_CHECK(cond)                                                        \
  do {                                                                        \
    if (!(cond)) ::gangkeeper::base::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (false)

#define GK_CHECK_MSG(cond, msg)                                                  \
  do {                                                                           \
    if (!(cond)) ::gangkeeper::base::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (false)

#ifdef NDEBUG
#define GK_DCHECK(cond) \
  do {                  \
  } while (false && (cond))
#else
#define GK_DCHECK(cond) GK_CHECK(cond)
#endif

#define GK_BUG(cond, msg)                                                  \
  do {                                                                     \
    if (!(cond)) ::gangkeeper::base::BugHit(__FILE__, __LINE__, #cond, msg); \
  } while (false)

// Aborts with the status message unless `expr` (an absl::Status or
// StatusOr) is OK. For calls that cannot fail unless gangkeeper has a bug.
#define GK_CHECK_OK(expr)                                                            \
  do {                                                                               \
    const auto& gk_check_ok_status_ = (expr);                                        \
    if (!gk_check_ok_status_.ok()) {                                                 \
      ::gangkeeper::base::CheckFailed(__FILE__, __LINE__, #expr,                     \
                                      std::string(gk_check_ok_status_.message()).c_str()); \
    }                                                                                \
  } while (false)
