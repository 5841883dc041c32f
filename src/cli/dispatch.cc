// gangkeeper CLI: subcommand dispatch and top-level help.
#include <cstdio>
#include <string>
#include <vector>

#include "src/cli/commands.h"

namespace gangkeeper::cli {
namespace {

constexpr char kUsage[] =
    "usage: gangkeeper <command> [flags]\n"
    "\n"
    "commands:\n"
    "  serve     run the admission webhook and API listeners\n"
    "  certs     make a CA and a serving certificate for the webhook Service\n"
    "  check-policies  validate Kueue manifests offline (exit 1 on errors)\n"
    "  get       list clusterqueues or workloads from the API (--server, --token)\n"
    "  describe  show one workload: where it queues and why it waits\n"
    "  audit     show audit events (filters, --follow) from the API; 'audit verify DATA_DIR' checks a log offline\n"
    "  apply     apply Kueue manifests through the API (-f FILE|DIR), all or nothing\n"
    "  simulate  replay a workload trace against the scheduler on a simulated clock (--workload FILE)\n"
    "  version   print the version\n"
    "\n"
    "Run 'gangkeeper <command> --help' for a command's flags.\n";

}  // namespace

int RunMain(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "serve") return RunServe(args);
  if (command == "certs") return RunCerts(args);
  if (command == "check-policies") return RunCheckPolicies(args);
  if (command == "get") return RunGet(args);
  if (command == "describe") return RunDescribe(args);
  if (command == "audit" && !args.empty() && args[0] == "verify") return RunAuditVerify({args.begin() + 1, args.end()});
  if (command == "audit") return RunAudit(args);
  if (command == "apply") return RunApply(args);
  if (command == "simulate") return RunSimulate(args);
  if (command == "version" || command == "--version") {
    std::printf("gangkeeper %s\n", GK_VERSION);
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "gangkeeper: unknown command \"%s\"\n\n%s", command.c_str(), kUsage);
  return 2;
}

}  // namespace gangkeeper::cli
