// gangkeeper: standard process metrics read from /proc at scrape time (see
// RegisterProcessMetrics in include/gangkeeper/metrics/registry.h). Linux
// only. Each callback reads /proc afresh; nothing is cached, so callbacks are
// thread-safe. The start time comes from /proc (boot time + start ticks), so
// no clock is read here.
#include "src/metrics/process_metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/status_macros.h"
#include "gangkeeper/metrics/registry.h"

namespace gangkeeper::metrics {
namespace {

// Reads a whole (possibly size-0 /proc) file.
absl::StatusOr<std::string> ReadProcFile(const char* path) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("open ", path, ": errno ", errno));
  std::string contents;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("read ", path, ": errno ", err));
    }
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

absl::StatusOr<ProcStat> ReadSelfStat() {
  GK_ASSIGN_OR_RETURN(std::string contents, ReadProcFile("/proc/self/stat"));
  return ParseProcStat(contents);
}

// One unlabeled sample, or none if `value` is an error.
std::vector<Sample> One(const absl::StatusOr<double>& value) {
  if (!value.ok()) return {};
  return {Sample{{}, *value}};
}

absl::StatusOr<double> ResidentMemoryBytes() {
  GK_ASSIGN_OR_RETURN(ProcStat stat, ReadSelfStat());
  return static_cast<double>(stat.rss_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

absl::StatusOr<double> VirtualMemoryBytes() {
  GK_ASSIGN_OR_RETURN(ProcStat stat, ReadSelfStat());
  return static_cast<double>(stat.vsize_bytes);
}

absl::StatusOr<double> CpuSeconds() {
  GK_ASSIGN_OR_RETURN(ProcStat stat, ReadSelfStat());
  return static_cast<double>(stat.utime_ticks + stat.stime_ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

absl::StatusOr<double> StartTimeSeconds() {
  GK_ASSIGN_OR_RETURN(ProcStat stat, ReadSelfStat());
  GK_ASSIGN_OR_RETURN(std::string proc_stat, ReadProcFile("/proc/stat"));
  GK_ASSIGN_OR_RETURN(int64_t boot_time, ParseBootTime(proc_stat));
  return static_cast<double>(boot_time) +
         static_cast<double>(stat.start_ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

absl::StatusOr<double> OpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return absl::UnavailableError(absl::StrCat("opendir /proc/self/fd: errno ", errno));
  double count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    absl::string_view name = entry->d_name;
    if (name != "." && name != "..") ++count;
  }
  ::closedir(dir);
  return count;
}

absl::StatusOr<double> MaxFds() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::UnavailableError(absl::StrCat("getrlimit: errno ", errno));
  }
  if (limit.rlim_cur == RLIM_INFINITY) return absl::UnavailableError("RLIMIT_NOFILE is unlimited");
  return static_cast<double>(limit.rlim_cur);
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view contents) {
  size_t paren = contents.rfind(')');
  if (paren == absl::string_view::npos) {
    return absl::InvalidArgumentError("/proc stat: no ')' after the command name");
  }
  // Fields from 3 (state) on, so field k is rest[k - 3].
  std::vector<absl::string_view> rest =
      absl::StrSplit(absl::StripAsciiWhitespace(contents.substr(paren + 1)), ' ', absl::SkipEmpty());
  constexpr size_t kRssIndex = 24 - 3;
  if (rest.size() <= kRssIndex) {
    return absl::InvalidArgumentError(
        absl::StrCat("/proc stat: expected at least 24 fields, got ", rest.size() + 2));
  }
  ProcStat stat;
  bool ok = absl::SimpleAtoi(rest[14 - 3], &stat.utime_ticks) && absl::SimpleAtoi(rest[15 - 3], &stat.stime_ticks) &&
            absl::SimpleAtoi(rest[22 - 3], &stat.start_ticks) && absl::SimpleAtoi(rest[23 - 3], &stat.vsize_bytes) &&
            absl::SimpleAtoi(rest[kRssIndex], &stat.rss_pages);
  if (!ok) return absl::InvalidArgumentError("/proc stat: a CPU, start time or memory field is not a number");
  return stat;
}

absl::StatusOr<int64_t> ParseBootTime(absl::string_view contents) {
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(line, &seconds)) {
      return absl::InvalidArgumentError(absl::StrCat("/proc/stat: btime \"", line, "\" is not a number"));
    }
    return seconds;
  }
  return absl::InvalidArgumentError("/proc/stat: no btime line");
}

absl::Status RegisterProcessMetrics(Registry& registry) {
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                                               {}, [] { return One(ResidentMemoryBytes()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {},
                                               [] { return One(VirtualMemoryBytes()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackCounter("process_cpu_seconds_total",
                                                 "Total user and system CPU time spent in seconds.", {},
                                                 [] { return One(CpuSeconds()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge("process_open_fds", "Number of open file descriptors.", {},
                                               [] { return One(OpenFds()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge("process_max_fds", "Maximum number of open file descriptors.", {},
                                               [] { return One(MaxFds()); }));
  GK_RETURN_IF_ERROR(registry.AddCallbackGauge("process_start_time_seconds",
                                               "Start time of the process since unix epoch in seconds.", {},
                                               [] { return One(StartTimeSeconds()); }));
  return absl::OkStatus();
}

}  // namespace gangkeeper::metrics
