// gangkeeper audit: how event times are written (FORMAT.md §4): RFC 3339,
// UTC, microseconds. Private to the module.
#pragma once

#include <string>

#include "absl/time/time.h"

namespace gangkeeper::audit {

inline std::string Rfc3339Micros(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

}  // namespace gangkeeper::audit
