// gangkeeper CLI: a small per-subcommand flag parser.
//
// Each subcommand declares its own flags, so `gangkeeper certs --help` shows
// only what `certs` takes and an unknown flag is an error naming the
// subcommand. Accepts --name=value, --name value, --bool, --no-bool.
// Thread-compatible.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gangkeeper::cli {

class FlagSet {
 public:
  explicit FlagSet(std::string command, std::string summary)
      : command_(std::move(command)), summary_(std::move(summary)) {}

  void String(std::string name, std::string* target, std::string help);
  void Int(std::string name, int* target, std::string help);
  void Size(std::string name, size_t* target, std::string help);
  void Bool(std::string name, bool* target, std::string help);
  void Duration(std::string name, absl::Duration* target, std::string help);

  // Parses args (after the subcommand). Positional arguments are returned in
  // `positional` when non-null, else an error. Sets *help when --help/-h.
  [[nodiscard]] absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional,
                                   bool* help);
  std::string Usage() const;
  // Parse() as a command's first step: an exit code when the command should
  // end here (2 after printing the problem to stderr, 0 after printing
  // Usage() for --help), nullopt to go on.
  std::optional<int> ParseOrExit(const std::vector<std::string>& args, std::vector<std::string>* positional);

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<absl::Status(absl::string_view)> set;
  };
  const Flag* Find(absl::string_view name) const;

  std::string command_;
  std::string summary_;
  std::vector<Flag> flags_;
};

}  // namespace gangkeeper::cli
