// gangkeeper CLI: the subcommands. Each takes the arguments after its name
// and returns the process exit code. Only src/cli reads flags and builds
// real implementations (STYLE §6.6).
#pragma once

#include <string>
#include <vector>

namespace gangkeeper::cli {

int RunServe(const std::vector<std::string>& args);
int RunCerts(const std::vector<std::string>& args);
int RunCheckPolicies(const std::vector<std::string>& args);
int RunGet(const std::vector<std::string>& args);
int RunDescribe(const std::vector<std::string>& args);
int RunAudit(const std::vector<std::string>& args);
// `gangkeeper audit verify DATA_DIR`: the offline check of an audit log.
int RunAuditVerify(const std::vector<std::string>& args);
int RunApply(const std::vector<std::string>& args);
// `stop`/`resume` of a ClusterQueue or LocalQueue (spec.stopPolicy).
int RunStop(const std::vector<std::string>& args);
int RunResume(const std::vector<std::string>& args);
int RunSimulate(const std::vector<std::string>& args);
// `gangkeeper completion bash|zsh`: prints a shell completion script.
int RunCompletion(const std::vector<std::string>& args);
// Dispatches argv[1] to a subcommand.
int RunMain(int argc, char** argv);

// A subcommand: its name, one line about it, and its entry point.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};
// Every subcommand, in the order the help lists them.
const std::vector<Command>& Commands();

}  // namespace gangkeeper::cli
