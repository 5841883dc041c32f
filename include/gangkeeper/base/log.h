// gangkeeper: logging through spdlog, one named logger per module.
//
// ConfigureLogging() is called once by `src/cli` before anything logs; it
// chooses the sink (stderr), the format (text or JSON lines) and the level.
// GetLogger() is thread-safe and returns the same logger for the same name.
// Never log request bodies, tokens or keys.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/fmt/fmt.h"
#include "spdlog/logger.h"

namespace gangkeeper::base {

enum class LogFormat { kText, kJson };

struct LogOptions {
  LogFormat format = LogFormat::kText;
  // trace, debug, info, warn, error, critical, off.
  std::string level = "info";
};

// Parses "text" / "json". InvalidArgument otherwise.
[[nodiscard]] absl::Status ParseLogFormat(absl::string_view text, LogFormat* format);

// Applies `options` to every existing and future logger. InvalidArgument
// for an unknown level name.
[[nodiscard]] absl::Status ConfigureLogging(const LogOptions& options);

// The logger for `module` ("server", "access", "broker", ...).
std::shared_ptr<spdlog::logger> GetLogger(absl::string_view module);

// A logger for high-volume lines (the access log, one line per request):
// lines gather in memory and reach stderr in batches, at most
// kBatchFlushInterval late (or when 64 KiB gather, or at once from a
// warning up). FlushLogs() writes what is gathered. A kill -9 loses at
// most the last interval's lines; their order among themselves is kept,
// against other loggers' lines it may not be. The same name gives the same
// logger, whichever function made it first.
inline constexpr std::chrono::milliseconds kBatchFlushInterval{100};
std::shared_ptr<spdlog::logger> GetBatchingLogger(absl::string_view module);

// Flushes every logger (at shutdown).
void FlushLogs();

// Escapes `text` for use inside a JSON string (quotes not included).
std::string JsonEscape(absl::string_view text);

}  // namespace gangkeeper::base

// Debian's abseil has its own string_view type (not std::string_view), so
// fmt needs to be told how to print it.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
