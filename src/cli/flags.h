// gangkeeper CLI: the per-subcommand flag set, parsed by CLI11.
//
// Each subcommand declares its own flags, so `gangkeeper certs --help` shows
// only what `certs` takes and an unknown flag is an error naming the
// subcommand. Accepts --name=value, --name value, -n value, -nvalue, --bool,
// --no-bool, and flags before, between or after positional arguments
// (kubectl's habits). A name "n,namespace" declares -n and --namespace for
// one flag; a one-letter name is a short flag (-o). CLI11 does the parsing;
// this class keeps the help text in gangkeeper's own layout (one usage
// text per command, its examples and exit codes) and turns CLI11's errors
// into absl::Status values. Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gangkeeper::cli {

class FlagSet {
 public:
  explicit FlagSet(std::string command, std::string summary)
      : command_(std::move(command)), summary_(std::move(summary)) {}

  void String(std::string name, std::string* target, std::string help);
  // A flag that may be given several times (-f a -f b), or with commas.
  void Strings(std::string name, std::vector<std::string>* target, std::string help);
  void Int(std::string name, int* target, std::string help);
  void Size(std::string name, size_t* target, std::string help);
  void Bool(std::string name, bool* target, std::string help);
  void Duration(std::string name, absl::Duration* target, std::string help);

  // The usage line(s) after "usage: " (default "gangkeeper COMMAND [flags]").
  void Synopsis(std::string text) { synopsis_ = std::move(text); }
  // Example command lines, shown under "examples:".
  void Examples(std::string text) { examples_ = std::move(text); }
  // What the exit codes mean (default: 0 done, 1 error, 2 usage).
  void ExitCodes(std::string text) { exit_codes_ = std::move(text); }

  // Parses args (after the subcommand). Positional arguments are returned in
  // `positional` when non-null, else an error. Sets *help when --help/-h.
  [[nodiscard]] absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional,
                                   bool* help);
  std::string Usage() const;
  // Parse() as a command's first step: an exit code when the command should
  // end here (2 after printing the problem to stderr, 0 after printing
  // Usage() for --help), nullopt to go on.
  std::optional<int> ParseOrExit(const std::vector<std::string>& args, std::vector<std::string>* positional);
  // Every spelling of every flag (--namespace, -n, --no-dev), for completion.
  std::vector<std::string> Spellings() const;

 private:
  enum class Type { kString, kStrings, kInt, kSize, kBool, kDuration };
  struct Flag {
    std::string name;  // as declared: "n,namespace"
    Type type;
    void* target;
    std::string help;
    std::string default_text;
  };
  void AddToApp(CLI::App* app, absl::Status* problem) const;

  std::string command_;
  std::string summary_;
  std::string synopsis_;
  std::string examples_;
  std::string exit_codes_;
  std::vector<Flag> flags_;
};

// `gangkeeper completion`: while a sink is set, ParseOrExit() appends the
// command's flag spellings to it and ends the command (exit 0) before it
// does anything, so the completion script lists each command's own flags.
void SetCompletionSinkForFlags(std::vector<std::string>* sink);

}  // namespace gangkeeper::cli
