// gangkeeper: spdlog set-up (see the header). The logger registry is the one
// global gangkeeper has (STYLE §6.10).
#include "gangkeeper/base/log.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/details/registry.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/base_sink.h"
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

// Gathers formatted lines and writes them to stderr a batch at a time: one
// write(2) for many requests instead of one each under the console mutex.
// Written when kBatchBytes gather, when the logger flushes (a warning or
// worse, FlushLogs), and by the flusher thread every kFlushInterval.
class BatchingStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static constexpr size_t kBatchBytes = 64 * 1024;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    batch_.append(formatted.data(), formatted.size());
    if (batch_.size() >= kBatchBytes) flush_();
  }
  void flush_() override {
    if (batch_.empty()) return;
    std::fwrite(batch_.data(), 1, batch_.size(), stderr);
    std::fflush(stderr);
    batch_.clear();
  }

 private:
  std::string batch_;
};

// Flushes the batching loggers every kBatchFlushInterval, for the life of
// the process. The loggers it holds are never destroyed (the registry's
// destruction at exit must not leave the thread a dangling logger).
class BatchFlusher {
 public:
  static BatchFlusher& Get() {
    static BatchFlusher* flusher = new BatchFlusher();
    return *flusher;
  }
  void Add(std::shared_ptr<spdlog::logger> logger) {
    std::lock_guard<std::mutex> lock(mu_);
    loggers_.push_back(std::move(logger));
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    }
  }

 private:
  void Run() {
    for (;;) {
      std::this_thread::sleep_for(kBatchFlushInterval);
      std::vector<std::shared_ptr<spdlog::logger>> loggers;
      {
        std::lock_guard<std::mutex> lock(mu_);
        loggers = loggers_;
      }
      for (const auto& l : loggers) l->flush();
    }
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<spdlog::logger>> loggers_;
  bool started_ = false;
};

std::shared_ptr<spdlog::logger> MakeLogger(absl::string_view module, bool batching) {
  std::string name(module);
  std::shared_ptr<spdlog::logger> logger;
  {
    std::lock_guard<std::mutex> lock(ConfigMutex());
    if (auto existing = spdlog::get(name)) return existing;
    spdlog::sink_ptr sink;
    if (batching) {
      sink = std::make_shared<BatchingStderrSink>();
    } else {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    }
    logger = std::make_shared<spdlog::logger>(name, std::move(sink));
    Apply(*logger, CurrentOptions());
    spdlog::register_logger(logger);
  }
  if (batching) BatchFlusher::Get().Add(logger);
  return logger;
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

std::shared_ptr<spdlog::logger> GetLogger(absl::string_view module) { return MakeLogger(module, false); }

std::shared_ptr<spdlog::logger> GetBatchingLogger(absl::string_view module) { return MakeLogger(module, true); }

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
