// gangkeeper CLI: `gangkeeper check-policies DIR|FILE`, offline validation.
//
// Prints every error, warning and note with its file and document index.
// Exit 0 when there are no errors, 1 when there are, 2 when the input
// cannot be read.
#include <cstdio>

#include "gangkeeper/model/manifest.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {

int RunCheckPolicies(const std::vector<std::string>& args) {
  bool quiet = false;
  FlagSet flags("check-policies",
                "Reads Kueue manifests, PriorityClasses and GPUNodePools from DIR or FILE and reports every problem\n"
                "with its file, document, object, field and fix.");
  flags.Synopsis("gangkeeper check-policies [--quiet] DIR|FILE...");
  flags.ExitCodes("0 clean; 1 errors in the manifests; 2 unreadable input or a usage error");
  flags.Examples("  gangkeeper check-policies policies/");
  flags.Bool("quiet", &quiet, "print errors and warnings only (no notes about skipped objects)");
  std::vector<std::string> paths;
  if (std::optional<int> done = flags.ParseOrExit(args, &paths)) return *done;
  if (paths.empty()) {
    std::fprintf(stderr, "gangkeeper check-policies: name a directory or file to check\n");
    return 2;
  }
  int errors = 0, warnings = 0, files = 0;
  for (const std::string& path : paths) {
    absl::StatusOr<model::LoadResult> result = model::LoadPolicies(path);
    if (!result.ok()) {
      std::fprintf(stderr, "gangkeeper check-policies: %s\n", std::string(result.status().message()).c_str());
      return 2;
    }
    for (const model::Diagnostic& d : result->diagnostics.items) {
      if (quiet && d.severity == model::Diagnostic::Severity::kNote) continue;
      std::printf("%s\n", d.ToString().c_str());
    }
    errors += result->diagnostics.Count(model::Diagnostic::Severity::kError);
    warnings += result->diagnostics.Count(model::Diagnostic::Severity::kWarning);
    files += result->files;
    const model::PolicySet& p = result->policies;
    std::fprintf(stderr,
                 "%s: %d file(s): %zu ResourceFlavor, %zu ClusterQueue, %zu LocalQueue, %zu Cohort, "
                 "%zu WorkloadPriorityClass, %zu PriorityClass, %zu GPUNodePool\n",
                 path.c_str(), result->files, p.flavors.size(), p.cluster_queues.size(), p.local_queues.size(),
                 p.cohorts.size(), p.workload_priority_classes.size(), p.priority_classes.size(),
                 p.gpu_node_pools.size());
  }
  std::fprintf(stderr, "%d error(s), %d warning(s) in %d file(s)\n", errors, warnings, files);
  return errors > 0 ? 1 : 0;
}

}  // namespace gangkeeper::cli
