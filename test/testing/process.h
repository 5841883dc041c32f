// gangkeeper tests: run the real gangkeeper binary as a child process.
//
// ServerProcess starts `gangkeeper serve …`, captures stdout and stderr in
// files, waits (bounded) for the banner that names the two ports, and can
// signal and reap the process. RunCommand runs a short command to the end.
// The destructor kills a process that is still running. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gangkeeper::testing {

// Path of the gangkeeper binary under test (set by CMake).
std::string GangkeeperBinary();

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `args` (args[0] is the program) with a time limit; kills it on time-out.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& args, absl::Duration timeout,
                                         const std::string& cwd = "");

class ServerProcess {
 public:
  // Starts `gangkeeper serve <args>` in `cwd` and waits up to `timeout` for
  // its banner. FailedPrecondition (with the process's stderr) when it exits
  // or never prints the banner.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const std::vector<std::string>& args,
                                                              const std::string& cwd,
                                                              absl::Duration timeout = absl::Seconds(20));
  ~ServerProcess();

  int webhook_port() const { return webhook_port_; }
  int api_port() const { return api_port_; }
  pid_t pid() const { return pid_; }

  void Signal(int sig);
  // Waits for exit; returns the exit code (128+signal when killed), or
  // DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  std::string Stdout() const;
  std::string Stderr() const;
  // Waits until stderr contains `text`.
  bool WaitForStderr(const std::string& text, absl::Duration timeout) const;

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string out_file_, err_file_, dir_;
  int webhook_port_ = 0;
  int api_port_ = 0;
};

}  // namespace gangkeeper::testing
