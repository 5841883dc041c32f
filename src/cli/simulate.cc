// gangkeeper CLI: `gangkeeper simulate`, replaying a workload trace against
// the real scheduler on a simulated clock (include/gangkeeper/sim/).
//
// Exit 0 with the report written (or the summary printed), 2 for bad input
// (flags, an unreadable or malformed trace or policy file: the message names
// the file, line and field), 1 when the simulation itself fails.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/sim/report.h"
#include "gangkeeper/sim/simulator.h"
#include "gangkeeper/sim/trace.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gangkeeper simulate: %s\n", message.c_str());
  return code;
}

// Writes `text` to `path` (temp file + rename, so a reader never sees half).
absl::Status WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be written"));
    out << text;
    out.flush();
    if (!out) return absl::UnavailableError(absl::StrCat(path, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be written"));
  }
  return absl::OkStatus();
}

}  // namespace

int RunSimulate(const std::vector<std::string>& args) {
  std::string policies_dir, workload_file, json_out, html_out;
  absl::Duration until = absl::ZeroDuration();
  absl::Duration stop_delay = absl::ZeroDuration();
  bool one_head = false, fair_sharing = false;
  FlagSet flags("simulate",
                "Replays a workload trace against gangkeeper's scheduler on a simulated clock (no sleeping) and\n"
                "reports makespan, utilization of nominal quota, time to admission per class, preemptions, fair\n"
                "share and lower bounds. Traces: CSV, JSON Lines, or Kueue's scheduler-performance generator.yaml\n"
                "(which brings its own policies; --policies then replaces them).\n"
                "See README \"Simulate a quota change\".");
  flags.Synopsis("gangkeeper simulate [--policies DIR] --workload FILE [--until DURATION] [-o report.json]\n"
                 "                           [--html report.html]");
  flags.ExitCodes("0 done; 1 the simulation failed; 2 bad input (the message names file, line and field)");
  flags.Examples("  gangkeeper simulate --policies policies/ --workload trace.csv --html report.html");
  flags.String("policies", &policies_dir, "Kueue manifests (file or directory), as for serve --policies");
  flags.String("workload", &workload_file, "the trace: .csv, .jsonl or a Kueue generator .yaml");
  flags.Duration("until", &until, "stop at this simulated time (0 = when nothing is left to happen)");
  flags.String("o", &json_out, "write the JSON report here (without it, print a summary)");
  flags.String("html", &html_out, "write a self-contained HTML report here");
  flags.Duration("stop-delay", &stop_delay, "how long a preempted gang takes to stop and free its quota");
  flags.Bool("one-head-per-cycle", &one_head, "Kueue's cycle: one workload per ClusterQueue per cycle");
  flags.Bool("fair-sharing", &fair_sharing, "enable fair sharing in every cohort");
  if (std::optional<int> done = flags.ParseOrExit(args, nullptr)) return *done;
  if (workload_file.empty()) return Fail(2, "name the trace with --workload FILE (.csv, .jsonl or generator .yaml)");
  if (absl::ToInt64Milliseconds(until) < 0 || absl::Milliseconds(absl::ToInt64Milliseconds(until)) != until ||
      absl::Milliseconds(absl::ToInt64Milliseconds(stop_delay)) != stop_delay) {
    return Fail(2, "--until and --stop-delay take whole milliseconds, e.g. 90s or 1500ms");
  }

  absl::StatusOr<sim::Trace> trace = sim::ReadTraceFile(workload_file);
  if (!trace.ok()) return Fail(2, std::string(trace.status().message()));

  std::shared_ptr<const model::PolicySet> policies;
  sim::SimOptions options;
  if (!policies_dir.empty()) {
    absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(policies_dir);
    if (!loaded.ok()) return Fail(2, std::string(loaded.status().message()));
    if (loaded->diagnostics.HasErrors()) {
      return Fail(2, absl::StrCat("the policies in ", policies_dir, " have errors (see gangkeeper check-policies):\n",
                                  loaded->diagnostics.ErrorSummary()));
    }
    policies = std::make_shared<const model::PolicySet>(std::move(loaded->policies));
    options.policies_source = policies_dir;
  } else if (trace->policies != nullptr) {
    options.policies_source = "generated from " + workload_file;
  } else {
    return Fail(2, absl::StrCat(workload_file, " is a ", sim::TraceFormatName(trace->format),
                                " trace: give the policies its LocalQueues belong to with --policies DIR"));
  }
  if (until > absl::ZeroDuration()) options.until_ms = absl::ToInt64Milliseconds(until);
  options.stop_delay_ms = absl::ToInt64Milliseconds(stop_delay);
  options.scheduler.one_head_per_cycle = one_head;
  options.scheduler.fair_sharing = fair_sharing;

  absl::StatusOr<sim::Report> report = sim::Simulate(*trace, policies, options);
  if (!report.ok()) {
    return Fail(report.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
                std::string(report.status().message()));
  }
  if (!json_out.empty()) {
    if (absl::Status s = WriteFile(json_out, sim::ReportJson(*report)); !s.ok()) {
      return Fail(2, std::string(s.message()));
    }
  }
  if (!html_out.empty()) {
    if (absl::Status s = WriteFile(html_out, sim::ReportHtml(*report)); !s.ok()) {
      return Fail(2, std::string(s.message()));
    }
  }
  if (json_out.empty()) std::fputs(sim::ReportSummary(*report).c_str(), stdout);
  return 0;
}

}  // namespace gangkeeper::cli
