// gangkeeper CLI: `gangkeeper simulate`, replaying a workload trace against
// the real scheduler on a simulated clock (include/gangkeeper/sim/).
//
// With --compare the trace runs twice (--policies, then the --compare
// policies) and the reports show both runs side by side with a verdict.
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

// Loads the Kueue manifests at `path` (file or directory); `flag` names the
// flag that gave it, for the message.
absl::StatusOr<std::shared_ptr<const model::PolicySet>> LoadPolicySet(const std::string& path,
                                                                      const std::string& flag) {
  absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(path);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", loaded.status().message()));
  }
  if (loaded->diagnostics.HasErrors()) {
    return absl::InvalidArgumentError(absl::StrCat("the policies in ", path, " (", flag,
                                                   ") have errors (see gangkeeper check-policies):\n",
                                                   loaded->diagnostics.ErrorSummary()));
  }
  return std::make_shared<const model::PolicySet>(std::move(loaded->policies));
}

// Runs the simulation; the exit code and message when it fails.
absl::StatusOr<sim::Report> Run(const sim::Trace& trace, std::shared_ptr<const model::PolicySet> policies,
                                const sim::SimOptions& options, int* code) {
  absl::StatusOr<sim::Report> report = sim::Simulate(trace, std::move(policies), options);
  if (!report.ok()) *code = report.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  return report;
}

}  // namespace

int RunSimulate(const std::vector<std::string>& args) {
  std::string policies_dir, compare_dir, workload_file, json_out, html_out;
  absl::Duration until = absl::ZeroDuration();
  absl::Duration stop_delay = absl::ZeroDuration();
  bool one_head = false, fair_sharing = false;
  FlagSet flags("simulate",
                "Replays a workload trace against gangkeeper's scheduler on a simulated clock (no sleeping) and\n"
                "reports makespan, utilization of nominal quota, time to admission per class, preemptions, fair\n"
                "share and lower bounds. Traces: CSV, JSON Lines, or Kueue's scheduler-performance generator.yaml\n"
                "(which brings its own policies; --policies then replaces them).\n"
                "With --compare the trace runs twice, against --policies (before) and against the --compare\n"
                "policies (after), and the reports put both runs side by side with a verdict.\n"
                "Unlike get's -o (a format), simulate's -o names the JSON report's file (also --json).\n"
                "See README \"Simulate a quota change\" and docs/simulate.md.");
  flags.Synopsis("gangkeeper simulate [--policies DIR] --workload FILE [--compare DIR] [--until DURATION]\n"
                 "                           [-o report.json] [--html report.html]");
  flags.ExitCodes("0 done; 1 the simulation failed; 2 bad input (the message names file, line and field)");
  flags.Examples(
      "  gangkeeper simulate --policies policies/ --workload trace.csv --html report.html\n"
      "  # what if team-b lends 2 GPUs: before and after, side by side\n"
      "  gangkeeper simulate --policies test/bench/traces/lend-gpus/before --workload test/bench/traces/lend-gpus/trace.csv \\\n"
      "      --compare test/bench/traces/lend-gpus/after --html compare.html -o compare.json");
  flags.String("policies", &policies_dir, "Kueue manifests (file or directory), as for serve --policies");
  flags.String("compare", &compare_dir, "run the trace again against these policies (after) and compare");
  flags.String("workload", &workload_file, "the trace: .csv, .jsonl or a Kueue generator .yaml");
  flags.Duration("until", &until, "stop at this simulated time (0 = when nothing is left to happen)");
  flags.String("o,json", &json_out, "write the JSON report to this file (without it, print a summary)");
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
    absl::StatusOr<std::shared_ptr<const model::PolicySet>> loaded = LoadPolicySet(policies_dir, "--policies");
    if (!loaded.ok()) return Fail(2, std::string(loaded.status().message()));
    policies = *std::move(loaded);
    options.policies_source = policies_dir;
  } else if (trace->policies != nullptr) {
    options.policies_source = "generated from " + workload_file;
  } else {
    return Fail(2, absl::StrCat(workload_file, " is a ", sim::TraceFormatName(trace->format),
                                " trace: give the policies its LocalQueues belong to with --policies DIR"));
  }
  std::shared_ptr<const model::PolicySet> compare_policies;
  if (!compare_dir.empty()) {
    absl::StatusOr<std::shared_ptr<const model::PolicySet>> loaded = LoadPolicySet(compare_dir, "--compare");
    if (!loaded.ok()) return Fail(2, std::string(loaded.status().message()));
    compare_policies = *std::move(loaded);
  }
  if (until > absl::ZeroDuration()) options.until_ms = absl::ToInt64Milliseconds(until);
  options.stop_delay_ms = absl::ToInt64Milliseconds(stop_delay);
  options.scheduler.one_head_per_cycle = one_head;
  options.scheduler.fair_sharing = fair_sharing;

  int code = 0;
  absl::StatusOr<sim::Report> report = Run(*trace, policies, options, &code);
  if (!report.ok()) return Fail(code, std::string(report.status().message()));
  std::string json, html, summary;
  if (compare_policies != nullptr) {
    sim::SimOptions after_options = options;
    after_options.policies_source = compare_dir;
    absl::StatusOr<sim::Report> after = Run(*trace, compare_policies, after_options, &code);
    if (!after.ok()) return Fail(code, absl::StrCat("with --compare ", compare_dir, ": ", after.status().message()));
    const sim::Comparison comparison{*std::move(report), *std::move(after)};
    if (!json_out.empty()) json = sim::ComparisonJson(comparison);
    if (!html_out.empty()) html = sim::ComparisonHtml(comparison);
    summary = sim::ComparisonSummary(comparison);
  } else {
    if (!json_out.empty()) json = sim::ReportJson(*report);
    if (!html_out.empty()) html = sim::ReportHtml(*report);
    summary = sim::ReportSummary(*report);
  }
  if (!json_out.empty()) {
    if (absl::Status s = WriteFile(json_out, json); !s.ok()) return Fail(2, std::string(s.message()));
  }
  if (!html_out.empty()) {
    if (absl::Status s = WriteFile(html_out, html); !s.ok()) return Fail(2, std::string(s.message()));
  }
  if (json_out.empty()) std::fputs(summary.c_str(), stdout);
  return 0;
}

}  // namespace gangkeeper::cli
