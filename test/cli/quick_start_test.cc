// The README's "Quick start", followed as a newcomer follows it, in a fresh
// copy of the repository (what git tracks plus new files it does not
// ignore: no build/, data/ or certs/dev/):
//   - ./run.sh in a pseudo-terminal, as typed in a terminal, with
//     GANGKEEPER_BIN naming the suite's own binary (nothing is compiled)
//     and the listeners on 127.0.0.1 port 0 (the README's 9443 and 8443
//     are what the banner's URLs replace, so parallel tests never collide);
//   - each command it prints, then each command line of the README's Quick
//     start blocks, with nothing substituted but what run.sh printed: the
//     binary's path (its `try:` line), the webhook URL for
//     https://localhost:9443, and the API URL in GANGKEEPER_SERVER (the
//     CLI's default is https://localhost:8443);
//   - Ctrl-C typed into the terminal, which must end it with exit 0;
//   - ./run.sh a second time, which must reuse the token and certificates.
// Every wait is bounded; the child is killed and the copy removed however
// the test ends.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/wait.h"

extern char** environ;

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// The names the README uses, which the printed lines replace.
constexpr char kReadmeBinary[] = "build/release/src/cli/gangkeeper";
constexpr char kReadmeWebhook[] = "https://localhost:9443";
constexpr char kReadmeApi[] = "https://localhost:8443";
constexpr char kReview[] = "deploy/examples/review-team-a-two-gpu-training.json";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A process run as the session leader of a new pseudo-terminal, the way a
// shell in a terminal window runs it: its stdin, stdout and stderr are the
// terminal, so what it prints arrives interleaved as a user sees it, and a
// Ctrl-C typed into it is a SIGINT to its foreground process group. A
// thread drains the terminal (a full one would block the process).
class Terminal {
 public:
  static absl::StatusOr<std::unique_ptr<Terminal>> Start(const std::vector<std::string>& args, const std::string& cwd,
                                                         const std::vector<std::string>& extra_env) {
    std::unique_ptr<Terminal> t(new Terminal());
    t->master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (t->master_ < 0 || ::grantpt(t->master_) != 0 || ::unlockpt(t->master_) != 0) {
      return absl::InternalError("cannot open a pseudo-terminal (posix_openpt)");
    }
    char name[128];
    if (::ptsname_r(t->master_, name, sizeof(name)) != 0) return absl::InternalError("ptsname_r failed");
    winsize size{};
    size.ws_row = 50;
    size.ws_col = 160;
    ::ioctl(t->master_, TIOCSWINSZ, &size);
    // The parent holds the terminal's other end until the child has it, so
    // the reader never sees it closed before the child opened it.
    const int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return absl::InternalError(absl::StrCat("cannot open ", name));
    // Everything the child needs is allocated before fork (see process.cc).
    std::vector<std::string> env_strings = extra_env;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    std::vector<char*> envp, argv;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args_copy = args;
    for (std::string& a : args_copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    const char* dir = cwd.c_str();
    t->pid_ = ::fork();
    if (t->pid_ < 0) {
      ::close(slave);
      return absl::InternalError("fork failed");
    }
    if (t->pid_ == 0) {
      ::setsid();
      ::ioctl(slave, TIOCSCTTY, 0);
      ::dup2(slave, 0);
      ::dup2(slave, 1);
      ::dup2(slave, 2);
      if (::chdir(dir) != 0) ::_exit(127);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(slave);
    t->reader_ = std::thread([raw = t.get()] { raw->Drain(); });
    return t;
  }

  ~Terminal() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    stop_ = true;
    if (reader_.joinable()) reader_.join();
    if (master_ >= 0) ::close(master_);
  }

  // What the terminal showed so far, with the terminal's \r\n as \n.
  std::string Output() const {
    absl::MutexLock lock(&mu_);
    return absl::StrReplaceAll(output_, {{"\r", ""}});
  }

  // Types `keys` into the terminal ("\x03" is Ctrl-C).
  bool Type(const std::string& keys) { return ::write(master_, keys.data(), keys.size()) == ssize_t(keys.size()); }

  // The exit code (128+signal when killed), or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout) {
    int status = 0;
    const bool exited = testing::WaitFor(
        [&] { return reaped_ || ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout, absl::Milliseconds(50));
    if (!exited) return absl::DeadlineExceededError(absl::StrCat("still running after ", absl::FormatDuration(timeout)));
    if (!reaped_) {
      reaped_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    }
    return exit_code_;
  }

 private:
  Terminal() = default;

  void Drain() {
    char buf[4096];
    while (!stop_) {
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(master_, buf, sizeof(buf));
      if (n > 0) {
        absl::MutexLock lock(&mu_);
        output_.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        return;  // EIO: every process holding the terminal closed it
      }
    }
  }

  int master_ = -1;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::atomic<bool> stop_{false};
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::string output_;
};

// What ./run.sh printed: the token and its `try:` line, then the banner.
struct Printed {
  std::string token;
  std::string try_cli;   // "<binary> get clusterqueues"
  std::string binary;
  std::string webhook;   // https://127.0.0.1:PORT
  std::string api;
  std::string try_curl;  // "curl --cacert ... /readyz"
  bool complete() const { return !token.empty() && !try_cli.empty() && !webhook.empty() && !api.empty() && !try_curl.empty(); }
};

Printed ParsePrinted(const std::string& out) {
  Printed p;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "dev token (role admin): ")) {
      p.token = std::string(absl::StripAsciiWhitespace(rest));
    } else if (absl::ConsumePrefix(&rest, "  try:")) {
      rest = absl::StripAsciiWhitespace(rest);
      if (absl::StartsWith(rest, "curl ")) {
        p.try_curl = std::string(rest);
      } else if (absl::ConsumeSuffix(&rest, " get clusterqueues")) {
        p.binary = std::string(rest);
        p.try_cli = absl::StrCat(rest, " get clusterqueues");
      }
    } else if (absl::ConsumePrefix(&rest, "  webhook: ")) {
      p.webhook = std::string(rest.substr(0, rest.find(' ')));
    } else if (absl::ConsumePrefix(&rest, "  api:")) {
      rest = absl::StripLeadingAsciiWhitespace(rest);
      p.api = std::string(rest.substr(0, rest.find(' ')));
    }
  }
  return p;
}

// The command lines of the README's "## Quick start" section, block by
// block (```sh ... ```).
std::vector<std::vector<std::string>> QuickStartBlocks(const std::string& readme) {
  std::vector<std::vector<std::string>> blocks;
  bool in_section = false, in_block = false;
  for (absl::string_view line : absl::StrSplit(readme, '\n')) {
    if (absl::StartsWith(line, "## ")) in_section = line == "## Quick start";
    if (!in_section) continue;
    if (absl::StartsWith(line, "```")) {
      in_block = !in_block;
      if (in_block) blocks.emplace_back();
      continue;
    }
    if (in_block && !absl::StripAsciiWhitespace(line).empty()) blocks.back().emplace_back(line);
  }
  return blocks;
}

class QuickStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // What a newcomer's shell would not have: a token or server of their
    // own, or a cluster (KUBERNETES_SERVICE_HOST makes --kube auto go
    // in-cluster; the quick start runs without one, on loopback only).
    for (const char* name : {"GANGKEEPER_SERVER", "GANGKEEPER_TOKEN", "GANGKEEPER_TOKEN_FILE", "GANGKEEPER_CA",
                             "GANGKEEPER_BIN", "KUBERNETES_SERVICE_HOST", "KUBECONFIG"}) {
      ::unsetenv(name);
    }
    repo_ = dir_.File("gangkeeper");
  }

  // A bash command line run to the end in the copy, bounded.
  testing::CommandResult Shell(const std::string& line) {
    auto r = testing::RunCommand({"/bin/bash", "-c", line}, absl::Seconds(60), repo_);
    EXPECT_THAT(r, IsOk()) << line;
    return r.ok() ? *r : testing::CommandResult{};
  }

  // The tree as a fresh clone has it, the way deploy/build-check.sh copies
  // it: tracked files (those deleted in the working tree skipped) and new
  // ones git does not ignore. False (and the reason) when GK_SOURCE_DIR is
  // no git checkout.
  bool CopyTree(std::string* why_not) {
    const std::string src = GK_SOURCE_DIR;
    auto git = testing::RunCommand({"/bin/bash", "-c", "git -C \"$0\" rev-parse --is-inside-work-tree", src},
                                   absl::Seconds(30));
    if (!git.ok() || git->exit_code != 0) {
      *why_not = absl::StrCat(src, " is not a git checkout (or git is missing): ", git.ok() ? git->err : "");
      return false;
    }
    auto copy = testing::RunCommand(
        {"/bin/bash", "-c",
         "set -euo pipefail; mkdir -p \"$1\"; "
         "git -C \"$0\" ls-files -z --cached --others --exclude-standard | "
         "while IFS= read -r -d '' f; do if [[ -e \"$0/$f\" || -L \"$0/$f\" ]]; then printf '%s\\0' \"$f\"; fi; done | "
         "sort -zu | tar -C \"$0\" --null -T - -cf - | tar -C \"$1\" -xf -",
         src, repo_},
        absl::Seconds(120));
    EXPECT_THAT(copy, IsOk());
    EXPECT_EQ(copy.ok() ? copy->exit_code : -1, 0) << (copy.ok() ? copy->err : "");
    return true;
  }

  // ./run.sh on loopback port 0 in a terminal, until the banner is out.
  std::unique_ptr<Terminal> RunSh(Printed* printed) {
    auto t = Terminal::Start({"./run.sh", "--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0"}, repo_,
                             {absl::StrCat("GANGKEEPER_BIN=", testing::GangkeeperBinary())});
    EXPECT_THAT(t, IsOk());
    if (!t.ok()) return nullptr;
    Terminal& term = **t;
    const bool up = testing::WaitFor(
        [&] {
          *printed = ParsePrinted(term.Output());
          return printed->complete() || term.Wait(absl::ZeroDuration()).ok();
        },
        absl::Seconds(60), absl::Milliseconds(50));
    EXPECT_TRUE(up && printed->complete()) << "./run.sh printed no banner within 60 s:\n" << term.Output();
    return std::move(*t);
  }

  // A README line with run.sh's printed names in place of the README's.
  std::string Substitute(const std::string& line, const Printed& p) {
    return absl::StrReplaceAll(line, {{kReadmeBinary, p.binary}, {kReadmeWebhook, p.webhook}, {kReadmeApi, p.api}});
  }

  // The CLI talks to the printed API URL (the README's is its default).
  static std::string WithServer(const Printed& p, const std::string& line) {
    return absl::StrCat("export GANGKEEPER_SERVER=", p.api, "; ", line);
  }

  std::string ReviewUid() {
    const json review = json::parse(ReadFile(absl::StrCat(repo_, "/", kReview)), nullptr, false);
    if (!review.is_object() || !review.contains("request") || !review["request"].is_object()) return "";
    return review["request"].value("uid", "");
  }

  // The answer of a README curl line to /mutate or /validate.
  void CheckReviewAnswer(const std::string& line, const testing::CommandResult& r, bool validate) {
    ASSERT_EQ(r.exit_code, 0) << line << "\n" << r.err;
    const json answer = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(answer.is_object() && answer.contains("response") && answer["response"].is_object())
        << line << " answered no AdmissionReview: " << r.out;
    const json& response = answer["response"];
    EXPECT_EQ(response.value("uid", ""), ReviewUid()) << r.out;
    EXPECT_EQ(response.value("allowed", false), true) << r.out;
    if (!validate) {
      EXPECT_FALSE(response.contains("patch")) << "/mutate patched a Job created suspended: " << r.out;
    } else {
      EXPECT_THAT(response.dump(), HasSubstr("LocalQueue gpu-queue -> ClusterQueue team-a-gpu")) << r.out;
    }
  }

  // Runs the printed describe line until the workload shows as admitted.
  void CheckAdmitted(const std::string& line) {
    testing::CommandResult r;
    const bool admitted = testing::WaitFor(
        [&] {
          r = Shell(line);
          return r.exit_code == 0 && absl::StrContains(r.out, "Admitted:");
        },
        absl::Seconds(20), absl::Milliseconds(200));
    EXPECT_TRUE(admitted) << line << "\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("team-a/team-a-two-gpu-training"));
    EXPECT_THAT(r.out, HasSubstr("State:         admitted"));
    EXPECT_THAT(r.out, HasSubstr("in ClusterQueue team-a-gpu"));
  }

  // Ctrl-C in the terminal: a clean stop, exit 0, within the shutdown
  // grace (25 s) and a margin.
  void CtrlC(Terminal& term) {
    ASSERT_TRUE(term.Type("\x03"));
    auto code = term.Wait(absl::Seconds(40));
    ASSERT_THAT(code, IsOk()) << term.Output();
    EXPECT_EQ(*code, 0) << term.Output();
    EXPECT_THAT(term.Output(), HasSubstr("received SIGINT")) << "the stop was not Ctrl-C's";
  }

  testing::TempDir dir_;
  std::string repo_;
};

TEST_F(QuickStartTest, TheReadmesQuickStartWorksFromAFreshClone) {
  std::string why_not;
  if (!CopyTree(&why_not)) GTEST_SKIP() << why_not;
  for (const char* unwanted : {"build", "data", "certs/dev"}) {
    ASSERT_FALSE(std::filesystem::exists(absl::StrCat(repo_, "/", unwanted))) << "the copy holds " << unwanted;
  }
  const std::vector<std::vector<std::string>> blocks = QuickStartBlocks(ReadFile(repo_ + "/README.md"));
  ASSERT_GE(blocks.size(), 2u) << "README.md has no \"## Quick start\" with command blocks";
  ASSERT_FALSE(blocks[0].empty());
  ASSERT_TRUE(absl::StartsWith(blocks[0][0], "./run.sh")) << "the quick start's first command: " << blocks[0][0];

  // 1. ./run.sh, in a terminal.
  Printed p;
  std::unique_ptr<Terminal> term = RunSh(&p);
  ASSERT_TRUE(term != nullptr && p.complete());
  EXPECT_THAT(p.webhook, ::testing::StartsWith("https://127.0.0.1:"));
  EXPECT_THAT(p.api, ::testing::StartsWith("https://127.0.0.1:"));
  EXPECT_EQ(p.binary, testing::GangkeeperBinary());
  EXPECT_EQ(ReadFile(repo_ + "/data/dev-token"), p.token + "\n");

  // 2. What it printed: the get clusterqueues line and the curl line.
  testing::CommandResult r = Shell(WithServer(p, p.try_cli));
  EXPECT_EQ(r.exit_code, 0) << p.try_cli << "\n" << r.err;
  EXPECT_THAT(r.out, HasSubstr("team-a-gpu"));
  const bool ready = testing::WaitFor(
      [&] {
        r = Shell(p.try_curl);
        return r.exit_code == 0 && absl::StrContains(r.out, R"("status":"ready")");
      },
      absl::Seconds(20), absl::Milliseconds(200));
  EXPECT_TRUE(ready) << p.try_curl << "\n" << r.out << r.err;

  // 3. The README's commands, in order, as printed names make them.
  std::string assignments;  // `review=...` lines, for the lines after them
  std::set<std::string> checked;
  for (size_t b = 1; b < blocks.size(); ++b) {
    for (const std::string& readme_line : blocks[b]) {
      if (absl::StartsWith(readme_line, "./")) continue;  // ./test.sh: the suite itself
      std::string line = Substitute(readme_line, p);
      if (line.find('=') != std::string::npos && line.find(' ') == std::string::npos) {
        absl::StrAppend(&assignments, line, "; ");
        continue;
      }
      SCOPED_TRACE(line);
      if (absl::StrContains(line, "completion bash")) absl::StrAppend(&line, "\ncomplete -p gangkeeper");
      if (absl::StrContains(line, "describe workload")) {
        CheckAdmitted(WithServer(p, assignments + line));
        checked.insert("describe workload");
        continue;
      }
      r = Shell(WithServer(p, assignments + line));
      if (absl::StrContains(line, "/mutate") || absl::StrContains(line, "/validate")) {
        const bool validate = absl::StrContains(line, "/validate");
        CheckReviewAnswer(line, r, validate);
        checked.insert(validate ? "/validate" : "/mutate");
        continue;
      }
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      if (absl::StrContains(line, "get clusterqueues")) {
        // The README's line is the one run.sh prints (and a comment).
        EXPECT_THAT(line, ::testing::StartsWith(p.try_cli));
        EXPECT_THAT(r.out, HasSubstr("team-a-gpu"));
        checked.insert("get clusterqueues");
      } else if (absl::StrContains(line, "describe clusterqueue")) {
        EXPECT_THAT(r.out, HasSubstr("team-a-gpu"));
      } else if (absl::StrContains(line, "completion bash")) {
        EXPECT_THAT(r.out, HasSubstr("_gangkeeper"));
      }
    }
  }
  EXPECT_THAT(checked, ::testing::UnorderedElementsAre("get clusterqueues", "/mutate", "/validate", "describe workload"))
      << "the README's Quick start lacks a command this test expects there";

  // 4. Ctrl-C.
  CtrlC(*term);
  term.reset();

  // 5. ./run.sh again: the same token, the same certificates.
  const std::vector<std::string> kept = {"data/dev-token", "data/dev-tokens.yaml", "certs/dev/ca.crt",
                                         "certs/dev/tls.crt", "certs/dev/tls.key"};
  std::vector<std::string> before;
  for (const std::string& f : kept) before.push_back(ReadFile(absl::StrCat(repo_, "/", f)));
  Printed again;
  term = RunSh(&again);
  ASSERT_TRUE(term != nullptr && again.complete());
  EXPECT_EQ(again.token, p.token);
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_FALSE(before[i].empty()) << kept[i];
    EXPECT_EQ(ReadFile(absl::StrCat(repo_, "/", kept[i])), before[i]) << kept[i] << " changed on the second run";
  }
  EXPECT_THAT(term->Output(), Not(HasSubstr("made development certificates")));
  r = Shell(WithServer(again, again.try_cli));
  EXPECT_EQ(r.exit_code, 0) << again.try_cli << "\n" << r.err;
  EXPECT_THAT(r.out, HasSubstr("team-a-gpu"));
  // The workload the first run admitted is still there (the journal in data/).
  CheckAdmitted(WithServer(again, absl::StrCat(again.binary, " describe workload -n team-a team-a-two-gpu-training")));
  CtrlC(*term);
}

}  // namespace
}  // namespace gangkeeper
