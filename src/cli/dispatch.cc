// gangkeeper CLI: subcommand dispatch and top-level help.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/commands.h"

namespace gangkeeper::cli {
namespace {

int RunVersion(const std::vector<std::string>&) {
  std::printf("gangkeeper %s\n", GK_VERSION);
  return 0;
}

std::string DispatchUsage() {
  std::string out =
      "usage: gangkeeper COMMAND [flags]\n"
      "\n"
      "gangkeeper: Kueue's quota semantics as an admission webhook and GPU quota broker.\n"
      "\n"
      "commands:\n";
  for (const Command& c : Commands()) absl::StrAppendFormat(&out, "  %-15s %s\n", c.name, c.summary);
  out +=
      "\n"
      "The client commands (get, describe, apply, stop, resume, audit) talk to the API listener: --server\n"
      "(GANGKEEPER_SERVER, default https://localhost:8443), --ca (GANGKEEPER_CA, default certs/dev/ca.crt) and\n"
      "--token or --token-file (GANGKEEPER_TOKEN, GANGKEEPER_TOKEN_FILE; for a server on this machine,\n"
      "data/dev-token, which ./run.sh writes, is used when no token is given).\n"
      "\n"
      "exit codes: 0 done; 1 an error (the server refused, or the work failed); 2 a usage error.\n"
      "Run 'gangkeeper COMMAND --help' for a command's flags and examples.\n";
  return out;
}

}  // namespace

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"serve", "run the admission webhook and API listeners", RunServe},
      {"get", "list clusterqueues, workloads, localqueues, flavors, ... (kubectl get)", RunGet},
      {"describe", "show one clusterqueue, localqueue or workload: quota, usage, why it waits", RunDescribe},
      {"apply", "apply Kueue manifests through the API (-f FILE|DIR), all or nothing; --dry-run shows a diff",
       RunApply},
      {"stop", "stop admissions to a clusterqueue or localqueue (stopPolicy Hold, --drain)", RunStop},
      {"resume", "let a stopped clusterqueue or localqueue admit again", RunResume},
      {"audit", "show audit events (filters, --follow); 'audit verify DATA_DIR' checks a log offline", RunAudit},
      {"check-policies", "validate Kueue manifests offline (exit 1 on errors)", RunCheckPolicies},
      {"certs", "make a CA and a serving certificate for the webhook Service", RunCerts},
      {"simulate", "replay a workload trace against the scheduler on a simulated clock", RunSimulate},
      {"completion", "print a bash or zsh completion script", RunCompletion},
      {"version", "print the version", RunVersion},
  };
  return kCommands;
}

int RunMain(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(DispatchUsage().c_str(), stderr);
    return 2;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "audit" && !args.empty() && args[0] == "verify") return RunAuditVerify({args.begin() + 1, args.end()});
  if (command == "--version") return RunVersion(args);
  if (command == "help" || command == "--help" || command == "-h") {
    if (!args.empty()) {
      for (const Command& c : Commands()) {
        if (c.name == args[0]) return c.run({"--help"});
      }
    }
    std::fputs(DispatchUsage().c_str(), stdout);
    return 0;
  }
  for (const Command& c : Commands()) {
    if (c.name == command) return c.run(args);
  }
  std::fprintf(stderr, "gangkeeper: unknown command \"%s\"\n\n%s", command.c_str(), DispatchUsage().c_str());
  return 2;
}

}  // namespace gangkeeper::cli
