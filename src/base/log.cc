// gangkeeper: spdlog set-up (see the header). The logger registry is the one
// global gangkeeper has (STYLE §6.10).
#include "gangkeeper/base/log.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/details/registry.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace gangkeeper::base {
namespace {

// %* in the JSON pattern: the message, JSON-escaped.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string escaped = JsonEscape(absl::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageFlag>(); }
};

std::mutex& ConfigMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

// Guarded by ConfigMutex().
LogOptions& CurrentOptions() {
  static LogOptions* options = new LogOptions();
  return *options;
}

std::unique_ptr<spdlog::formatter> MakeFormatter(LogFormat format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (format == LogFormat::kJson) {
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
  } else {
    formatter->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %L %n: %v");
  }
  return formatter;
}

void Apply(spdlog::logger& logger, const LogOptions& options) {
  logger.set_formatter(MakeFormatter(options.format));
  logger.set_level(spdlog::level::from_str(options.level));
  logger.flush_on(spdlog::level::warn);
}

}  // namespace

absl::Status ParseLogFormat(absl::string_view text, LogFormat* format) {
  if (text == "text") {
    *format = LogFormat::kText;
  } else if (text == "json") {
    *format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: unknown format \"", text, "\"; use text or json"));
  }
  return absl::OkStatus();
}

absl::Status ConfigureLogging(const LogOptions& options) {
  static constexpr absl::string_view kLevels[] = {"trace", "debug", "info", "warn",
                                                   "error", "critical", "off"};
  bool known = false;
  for (absl::string_view l : kLevels) known = known || l == options.level;
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: unknown level \"", options.level,
        "\"; use trace, debug, info, warn, error, critical or off"));
  }
  std::lock_guard<std::mutex> lock(ConfigMutex());
  CurrentOptions() = options;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { Apply(*l, options); });
  return absl::OkStatus();
}

std::shared_ptr<spdlog::logger> GetLogger(absl::string_view module) {
  std::string name(module);
  std::lock_guard<std::mutex> lock(ConfigMutex());
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  Apply(*logger, CurrentOptions());
  spdlog::register_logger(logger);
  return logger;
}

void FlushLogs() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
}

std::string JsonEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace gangkeeper::base
