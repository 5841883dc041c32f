// gangkeeper: parsers for the /proc files behind RegisterProcessMetrics()
// (private to src/metrics; separate so tests can feed them fixed text).
//
// Thread contract: pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::metrics {

// The fields of /proc/<pid>/stat that process metrics use (proc(5)).
struct ProcStat {
  uint64_t utime_ticks = 0;      // field 14, user CPU in clock ticks
  uint64_t stime_ticks = 0;      // field 15, system CPU in clock ticks
  uint64_t start_ticks = 0;      // field 22, start time in ticks after boot
  uint64_t vsize_bytes = 0;      // field 23
  int64_t rss_pages = 0;         // field 24
};

// Parses the one-line contents of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself contain spaces and parentheses, so
// fields are counted from the last ')'. Returns InvalidArgument if the line
// is truncated or a field is not a number.
[[nodiscard]] absl::StatusOr<ProcStat> ParseProcStat(absl::string_view contents);

// Returns the "btime" value (boot time, seconds since the Unix epoch) from
// the contents of /proc/stat, or InvalidArgument if it is missing.
[[nodiscard]] absl::StatusOr<int64_t> ParseBootTime(absl::string_view contents);

}  // namespace gangkeeper::metrics
