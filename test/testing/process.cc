// gangkeeper tests: child processes (see process.h).
#include "test/testing/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace gangkeeper::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Forks and execs `args`. The parent is multi-threaded (servers, clients),
// so the child runs only async-signal-safe calls between fork and exec:
// everything that allocates (argv, the C strings) is made before the fork.
// A malloc in the child can block forever on a lock another thread held at
// fork time (it did, under AddressSanitizer, in CI).
pid_t Spawn(const std::vector<std::string>& args, const std::string& cwd, const std::string& out,
            const std::string& err) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* dir = cwd.empty() ? nullptr : cwd.c_str();
  const char* out_path = out.c_str();
  const char* err_path = err.c_str();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (dir != nullptr && ::chdir(dir) != 0) ::_exit(127);
  int o = ::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int e = ::open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (o < 0 || e < 0) ::_exit(127);
  ::dup2(o, 1);
  ::dup2(e, 2);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string MakeTempDir() {
  std::string tmpl = "/tmp/gangkeeper-proc-XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  return made != nullptr ? made : "/tmp";
}

}  // namespace

std::string GangkeeperBinary() { return GK_BINARY; }

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& args, absl::Duration timeout,
                                         const std::string& cwd) {
  std::string dir = MakeTempDir();
  std::string out = dir + "/out", err = dir + "/err";
  pid_t pid = Spawn(args, cwd, out, err);
  if (pid < 0) return absl::InternalError("fork failed");
  const int steps = static_cast<int>(absl::ToInt64Milliseconds(timeout) / 10) + 1;
  int status = 0;
  bool done = false;
  for (int i = 0; i < steps && !done; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      done = true;
    } else {
      ::usleep(10000);
    }
  }
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  CommandResult r{DecodeStatus(status), ReadAll(out), ReadAll(err)};
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!done) return absl::DeadlineExceededError(absl::StrCat(args[0], " did not finish in time; stderr: ", r.err));
  return r;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const std::vector<std::string>& args,
                                                                    const std::string& cwd, absl::Duration timeout) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->dir_ = MakeTempDir();
  p->out_file_ = p->dir_ + "/stdout";
  p->err_file_ = p->dir_ + "/stderr";
  std::vector<std::string> full = {GangkeeperBinary(), "serve"};
  full.insert(full.end(), args.begin(), args.end());
  p->pid_ = Spawn(full, cwd, p->out_file_, p->err_file_);
  if (p->pid_ < 0) return absl::InternalError("fork failed");
  static const std::regex kWebhook(R"(webhook: https://[^:\s]+:(\d+))");
  static const std::regex kApi(R"(api:\s+https://[^:\s]+:(\d+))");
  const int steps = static_cast<int>(absl::ToInt64Milliseconds(timeout) / 10) + 1;
  for (int i = 0; i < steps; ++i) {
    std::string out = p->Stdout();
    std::smatch w, a;
    if (out.find("try:") != std::string::npos && std::regex_search(out, w, kWebhook) &&
        std::regex_search(out, a, kApi)) {
      p->webhook_port_ = std::stoi(w[1]);
      p->api_port_ = std::stoi(a[1]);
      return p;
    }
    int status = 0;
    if (::waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
      p->reaped_ = true;
      p->exit_code_ = DecodeStatus(status);
      return absl::FailedPreconditionError(
          absl::StrCat("gangkeeper serve exited with ", p->exit_code_, "; stderr:\n", p->Stderr()));
    }
    ::usleep(10000);
  }
  return absl::FailedPreconditionError(absl::StrCat("gangkeeper serve printed no banner; stderr:\n", p->Stderr()));
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void ServerProcess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) {
  if (reaped_) return exit_code_;
  const int steps = static_cast<int>(absl::ToInt64Milliseconds(timeout) / 10) + 1;
  for (int i = 0; i < steps; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      exit_code_ = DecodeStatus(status);
      return exit_code_;
    }
    ::usleep(10000);
  }
  return absl::DeadlineExceededError("gangkeeper did not exit in time");
}

std::string ServerProcess::Stdout() const { return ReadAll(out_file_); }
std::string ServerProcess::Stderr() const { return ReadAll(err_file_); }

bool ServerProcess::WaitForStderr(const std::string& text, absl::Duration timeout) const {
  const int steps = static_cast<int>(absl::ToInt64Milliseconds(timeout) / 10) + 1;
  for (int i = 0; i < steps; ++i) {
    if (Stderr().find(text) != std::string::npos) return true;
    ::usleep(10000);
  }
  return false;
}

}  // namespace gangkeeper::testing
