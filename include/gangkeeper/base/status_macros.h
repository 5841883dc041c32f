// gangkeeper: early-return helpers for absl::Status / absl::StatusOr.
//
// Debian's abseil 20220623 has no status macros, so these are small local
// versions with the same meaning, to be swapped for abseil's later.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::base {

// Returns `status` with `context` prepended to its message ("context: msg"),
// keeping the code. OK stays OK.
[[nodiscard]] absl::Status Annotate(const absl::Status& status, absl::string_view context);

namespace status_internal {
inline const absl::Status& AsStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}
}  // namespace status_internal

}  // namespace gangkeeper::base

#define GK_STATUS_CONCAT_INNER_(a, b) a##b
#define GK_STATUS_CONCAT_(a, b) GK_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (a Status or StatusOr); returns its status if not OK.
#define GK_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                  \
    const auto& gk_status_value_ = (expr);                                              \
    if (!gk_status_value_.ok()) {                                                       \
      return ::gangkeeper::base::status_internal::AsStatus(gk_status_value_);           \
    }                                                                                   \
  } while (false)

// GK_ASSIGN_OR_RETURN(auto x, MakeX()); evaluates a StatusOr, returns its
// status if not OK, else moves the value into `lhs`.
#define GK_ASSIGN_OR_RETURN(lhs, expr) \
  GK_ASSIGN_OR_RETURN_IMPL_(GK_STATUS_CONCAT_(gk_statusor_, __LINE__), lhs, expr)

#define GK_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()
