// The client commands as a user runs them against a real `gangkeeper serve`
// on loopback over TLS, started the way ./run.sh starts it (development
// certificates, the example policies, the development token): every
// command, every output format, the errors, the completion scripts.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

class CliClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    // The quick start's token step, as ./run.sh runs it.
    auto token = testing::RunCommand(
        {"/bin/bash", absl::StrCat(GK_SOURCE_DIR, "/scripts/dev-token.sh"), "data", testing::GangkeeperBinary()},
        absl::Seconds(30), dir_->path());
    ASSERT_THAT(token, IsOk());
    ASSERT_EQ(token->exit_code, 0) << token->err;
    token_out_ = new std::string(token->out);
    auto server = testing::ServerProcess::Start(
        {"--dev", "--policies", absl::StrCat(GK_SOURCE_DIR, "/policies"), "--tokens", "data/dev-tokens.yaml",
         "--data-dir", "data", "--api-addr", "127.0.0.1:0", "--webhook-addr", "127.0.0.1:0"},
        dir_->path());
    ASSERT_THAT(server, IsOk());
    server_ = server->release();
    Submit("small", 1, 1);   // admitted
    Submit("huge", 3, 2);    // waits: 6 GPUs is what team-a may hold at most, and 1 is in use
  }
  static void TearDownTestSuite() {
    delete server_;
    delete token_out_;
    delete dir_;
  }

  // A Job's admission review, as the API server would send it.
  static void Submit(const std::string& name, int pods, int gpus) {
    testing::TlsClientOptions o;
    o.ca_file = dir_->File("certs/dev/ca.crt");
    auto w = testing::TlsConnection::Connect(server_->webhook_port(), o);
    ASSERT_THAT(w, IsOk());
    json job = testing::Job("team-a", name, pods, gpus);
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "gpu-queue";
    auto r = (*w)->Request("POST", "/validate", testing::Review("CREATE", "r-" + name, "team-a", name, job, nullptr).dump());
    ASSERT_THAT(r, IsOk());
    ASSERT_THAT(r->body, HasSubstr(R"("allowed":true)"));
  }

  static std::string Server() { return absl::StrCat("https://127.0.0.1:", server_->api_port()); }

  // The binary in the quick start's directory, with the server's address
  // in GANGKEEPER_SERVER and no token given (the dev token is found).
  static testing::CommandResult Cli(const std::vector<std::string>& args) {
    std::string line = absl::StrCat("GANGKEEPER_SERVER=", Server(), " exec ", testing::GangkeeperBinary());
    for (const std::string& a : args) absl::StrAppend(&line, " '", a, "'");
    auto r = testing::RunCommand({"/bin/bash", "-c", line}, absl::Seconds(30), dir_->path());
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : testing::CommandResult{};
  }

  static size_t Widest(const std::string& text) {
    size_t widest = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) widest = std::max(widest, line.size());
    return widest;
  }

  static testing::TempDir* dir_;
  static std::string* token_out_;
  static testing::ServerProcess* server_;
};

testing::TempDir* CliClientTest::dir_ = nullptr;
std::string* CliClientTest::token_out_ = nullptr;
testing::ServerProcess* CliClientTest::server_ = nullptr;

TEST_F(CliClientTest, QuickStartPrintsATokenAndACommandThatWorks) {
  ASSERT_NE(server_, nullptr);
  EXPECT_THAT(*token_out_, HasSubstr("dev token (role admin): "));
  struct stat st {};
  ASSERT_EQ(stat(dir_->File("data/dev-token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The printed line, run as printed (from the directory run.sh runs in).
  std::string printed;
  for (absl::string_view line : absl::StrSplit(*token_out_, '\n')) {
    if (absl::ConsumePrefix(&line, "  try: ")) printed = std::string(line);
  }
  ASSERT_EQ(printed, absl::StrCat(testing::GangkeeperBinary(), " get clusterqueues"));
  auto r = testing::RunCommand({"/bin/bash", "-c", absl::StrCat("GANGKEEPER_SERVER=", Server(), " ", printed)},
                               absl::Seconds(30), dir_->path());
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_THAT(r->out, ::testing::ContainsRegex("team-a-gpu +gpu-shared +1 +1 +"));
  EXPECT_THAT(r->out, HasSubstr("memory@nvidia-gpu"));
  EXPECT_THAT(r->out, HasSubstr("256Gi"));
  // Run again, the token step keeps the token.
  auto again = testing::RunCommand(
      {"/bin/bash", absl::StrCat(GK_SOURCE_DIR, "/scripts/dev-token.sh"), "data", testing::GangkeeperBinary()},
      absl::Seconds(30), dir_->path());
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->out, *token_out_);
}

TEST_F(CliClientTest, GetEveryKindInEveryFormat) {
  const std::vector<std::string> kinds = {"clusterqueues", "workloads", "localqueues", "flavors", "cohorts",
                                          "workloadpriorityclasses", "priorityclasses", "gpunodepools"};
  for (const std::string& kind : kinds) {
    for (const std::string format : {"table", "wide", "json", "yaml", "name"}) {
      auto r = Cli({"get", kind, "-o", format});
      EXPECT_EQ(r.exit_code, 0) << kind << " -o " << format << ": " << r.err;
      EXPECT_EQ(r.err, "") << kind << " -o " << format;
      // -o wide of workloads shows each reason in full; every other table fits.
      if (format == "table" || (format == "wide" && kind != "workloads")) {
        EXPECT_LE(Widest(r.out), 120u) << kind << " -o " << format << "\n" << r.out;
      }
      if (format == "json") {
        EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << kind;
      }
      if (format == "yaml") {
        EXPECT_THAT(r.out, HasSubstr("items:")) << kind;
      }
    }
  }
  struct Want {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::vector<Want> wants = {
      {{"get", "cq"}, {"RESOURCE@FLAVOR", "USAGE/NOMINAL", "memory@nvidia-gpu", "0/256Gi"}},
      {{"get", "cq", "-o", "wide"}, {"BORROWED", "LENT", "SHARE"}},
      {{"get", "cq", "-o", "name"}, {"clusterqueue/team-a-gpu\nclusterqueue/team-b-gpu\n"}},
      {{"get", "clusterqueue/team-b-gpu"}, {"team-b-gpu"}},
      {{"get", "workloads", "-A"}, {"job.batch/small", "admitted", "job.batch/huge", "pending"}},
      {{"get", "wl", "--all-namespaces", "-o", "wide"}, {"LOCALQUEUE", "gpu-queue", "main:nvidia.com/gpu@nvidia-gpu"}},
      {{"get", "wl", "-n", "team-a", "--state", "pending", "-o", "name"}, {"job.batch/huge\n"}},
      {{"get", "workloads", "-n", "team-b"}, {"No workloads found."}},
      {{"get", "lq", "-n", "team-a", "-o", "wide"}, {"PENDING", "ADMITTED", "gpu-queue"}},
      {{"get", "lq", "-o", "name"}, {"localqueue/gpu-queue"}},
      {{"get", "flavors"}, {"NODELABELS", "nvidia-gpu"}},
      {{"get", "cohorts"}, {"No cohorts found."}},
      {{"get", "pools"}, {"gpu-a100"}},
      {{"get", "pc", "-o", "wide"}, {"PREEMPTIONPOLICY"}},
      {{"get", "wpc"}, {"training-batch"}},
  };
  for (const Want& w : wants) {
    auto r = Cli(w.args);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(w.args, " ") << ": " << r.err;
    for (const std::string& text : w.says) EXPECT_THAT(r.out, HasSubstr(text)) << absl::StrJoin(w.args, " ");
  }
  EXPECT_THAT(Cli({"get", "cq"}).out, ::testing::ContainsRegex("team-a-gpu +nvidia.com/gpu@nvidia-gpu +1/4\n"));
  // Names are not bytes: 256Gi, not 274877906944.
  EXPECT_THAT(Cli({"get", "cq"}).out, Not(HasSubstr("274877906944")));
}

TEST_F(CliClientTest, DescribeEachKindAndEachSpelling) {
  auto cq = Cli({"describe", "clusterqueue", "team-a-gpu"});
  EXPECT_EQ(cq.exit_code, 0) << cq.err;
  EXPECT_THAT(cq.out, HasSubstr("Workloads:     1 pending, 1 admitted"));
  EXPECT_THAT(cq.out, ::testing::ContainsRegex("nvidia.com/gpu@nvidia-gpu +1 +4 "));
  EXPECT_THAT(cq.out, HasSubstr("team-a/huge"));
  EXPECT_LE(Widest(cq.out), 120u);
  auto lq = Cli({"describe", "lq", "gpu-queue", "-n", "team-a"});
  EXPECT_EQ(lq.exit_code, 0) << lq.err;
  EXPECT_THAT(lq.out, HasSubstr("ClusterQueue:  team-a-gpu"));
  EXPECT_EQ(Cli({"describe", "localqueue/gpu-queue", "-n", "team-a"}).out, lq.out);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"describe", "workload", "team-a/huge"},
           {"describe", "workload", "-n", "team-a", "huge"},
           {"describe", "workload", "huge", "-n", "team-a"},
           {"describe", "workload", "-n", "team-a", "job/huge"},
           {"describe", "workload/huge", "-n", "team-a"},
           {"describe", "workload", "job/team-a/huge"}}) {
    auto r = Cli(args);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("Waiting:")) << absl::StrJoin(args, " ");
  }
  auto yaml = Cli({"describe", "cq", "team-a-gpu", "-o", "yaml"});
  EXPECT_THAT(yaml.out, HasSubstr("status:"));
  auto missing = Cli({"describe", "workload", "-n", "team-a", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("team-a/nope"));
  EXPECT_THAT(missing.err, Not(HasSubstr("{")));
  EXPECT_EQ(Cli({"describe", "pods", "x"}).exit_code, 2);
}

TEST_F(CliClientTest, StopAndResumeSetTheStopPolicy) {
  auto stop = Cli({"stop", "localqueue", "gpu-queue", "-n", "team-b", "--drain"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("stopPolicy HoldAndDrain"));
  EXPECT_THAT(Cli({"get", "lq", "-n", "team-b"}).out, ::testing::ContainsRegex("gpu-queue +team-b-gpu +HoldAndDrain"));
  EXPECT_THAT(Cli({"stop", "lq/gpu-queue", "-n", "team-b", "--drain"}).out, HasSubstr("unchanged"));
  auto resume = Cli({"resume", "lq", "gpu-queue", "-n", "team-b"});
  EXPECT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_THAT(Cli({"get", "lq", "-n", "team-b"}).out, ::testing::ContainsRegex("gpu-queue +team-b-gpu +None"));
  EXPECT_EQ(Cli({"stop", "cq", "team-b-gpu"}).exit_code, 0);
  EXPECT_THAT(Cli({"describe", "cq", "team-b-gpu"}).out, HasSubstr("Active:        false (stopPolicy Hold)"));
  EXPECT_EQ(Cli({"resume", "clusterqueue/team-b-gpu"}).exit_code, 0);
  EXPECT_THAT(Cli({"describe", "cq", "team-b-gpu"}).out, HasSubstr("Active:        true\n"));
  EXPECT_EQ(Cli({"stop", "workload", "x"}).exit_code, 2);
}

TEST_F(CliClientTest, ApplyDryRunShowsADiffAndUnchangedObjectsAreNotWritten) {
  const std::string lq = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                         "metadata: {name: research, namespace: team-b}\nspec: {clusterQueue: team-b-gpu}\n";
  std::ofstream(dir_->File("lq.yaml")) << lq;
  auto dry = Cli({"apply", "-f", "lq.yaml", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("LocalQueue team-b/research created (dry run)"));
  EXPECT_THAT(dry.out, HasSubstr("+ "));
  EXPECT_EQ(Cli({"get", "lq", "research", "-n", "team-b"}).exit_code, 1);  // nothing written
  EXPECT_THAT(Cli({"apply", "-f", "lq.yaml"}).out, HasSubstr("LocalQueue team-b/research created"));
  const std::string audited = Cli({"audit", "--action", "quota.changed", "-o", "json"}).out;
  auto same = Cli({"apply", "-f", "lq.yaml"});
  EXPECT_THAT(same.out, HasSubstr("LocalQueue team-b/research unchanged"));
  EXPECT_EQ(Cli({"audit", "--action", "quota.changed", "-o", "json"}).out, audited);  // not audited
  EXPECT_THAT(Cli({"apply", "-f", "lq.yaml", "--dry-run"}).out, HasSubstr("LocalQueue team-b/research unchanged"));
  std::ofstream(dir_->File("lq3.yaml")) << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                                           "metadata: {name: research, namespace: team-b}\n"
                                           "spec: {clusterQueue: team-b-gpu, stopPolicy: Hold}\n";
  auto diff = Cli({"apply", "-f", "lq3.yaml", "--dry-run"});
  EXPECT_THAT(diff.out, HasSubstr("LocalQueue team-b/research configured (dry run)"));
  EXPECT_THAT(diff.out, HasSubstr("-   stopPolicy: None\n+   stopPolicy: Hold\n"));
}

TEST_F(CliClientTest, ErrorsAreOneSentenceWithTheWholeMessage) {
  // 422: the whole message, with the fix at its end.
  std::ofstream(dir_->File("bad.yaml"))
      << "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-b-gpu}\n"
         "spec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n"
         "    flavors:\n    - name: nvidia-gpu\n      resources:\n      - {name: nvidia.com/gpu, nominalQuota: four}\n"
         "  description: " << std::string(300, 'x') << "\n";
  auto bad = Cli({"apply", "-f", "bad.yaml"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("\"four\" is not a quantity (use \"4\")"));
  EXPECT_THAT(bad.err, HasSubstr("(HTTP 422)"));
  EXPECT_THAT(bad.err, Not(HasSubstr("{\"error\"")));
  // 404 of a quota object: the API's sentence, not its JSON.
  auto missing = Cli({"describe", "cq", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("\"nope\""));
  EXPECT_THAT(missing.err, Not(HasSubstr("{\"error\"")));
  // 401: says how to give a token.
  auto refused = Cli({"get", "cq", "--token", "wrong"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("401"));
  EXPECT_THAT(refused.err, HasSubstr("--token"));
  // Server down: which server, and what to check.
  auto down = Cli({"get", "cq", "--server", "https://127.0.0.1:1"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.err, HasSubstr("https://127.0.0.1:1"));
  EXPECT_THAT(down.err, HasSubstr("is `gangkeeper serve` running"));
  EXPECT_EQ(std::count(down.err.begin(), down.err.end(), '\n'), 1);
  // The wrong CA.
  auto wrong_ca = Cli({"get", "cq", "--ca", "/etc/ssl/certs/ca-certificates.crt"});
  EXPECT_EQ(wrong_ca.exit_code, 1);
  EXPECT_THAT(wrong_ca.err, HasSubstr("--ca"));
  // Usage errors: exit 2.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"get", "nodes"}, {"get", "cq", "-o", "xml"}, {"get", "wl", "-n", "x", "-A"}, {"get", "cq", "--colour"},
           {"get"}, {"apply"}, {"describe"}, {"completion", "fish"}, {"nonsense"}}) {
    auto r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("gangkeeper")) << absl::StrJoin(args, " ");
  }
}

TEST_F(CliClientTest, EveryCommandHasOneUsageTextWithExamplesAndExitCodes) {
  for (const std::string command :
       {"serve", "get", "describe", "apply", "stop", "resume", "audit", "check-policies", "certs", "simulate",
        "completion"}) {
    auto r = Cli({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_THAT(r.out, HasSubstr("examples:")) << command;
    EXPECT_THAT(r.out, HasSubstr("exit codes:")) << command;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), 'u') > 0 && absl::StrContains(r.out, "usage: gangkeeper"), true);
    EXPECT_THAT(r.out, Not(HasSubstr("--o "))) << command;
    EXPECT_LE(Widest(r.out), 120u) << command;
  }
  auto get = Cli({"get", "--help"});
  EXPECT_THAT(get.out, HasSubstr("-n, --namespace"));
  EXPECT_THAT(get.out, HasSubstr("-A, --all-namespaces"));
  EXPECT_THAT(get.out, HasSubstr("-o, --output"));
  EXPECT_THAT(Cli({"audit", "-o", "yaml", "--limit", "1"}).out, HasSubstr("---\n"));
}

TEST_F(CliClientTest, CompletionScriptsParseAndComplete) {
  for (const std::string shell : {"bash", "zsh"}) {
    auto script = Cli({"completion", shell});
    ASSERT_EQ(script.exit_code, 0) << script.err;
    std::ofstream(dir_->File("completion." + shell)) << script.out;
    auto checked = testing::RunCommand({"/bin/bash", "-n", dir_->File("completion." + shell)}, absl::Seconds(30));
    ASSERT_THAT(checked, IsOk());
    EXPECT_EQ(checked->exit_code, 0) << shell << ": " << checked->err;
  }
  // Sourced into bash, the function completes commands, kinds and flags.
  auto complete = [&](const std::string& words) {
    const std::string line = absl::StrCat("source completion.bash; COMP_WORDS=(", words,
                                          "); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _gangkeeper; "
                                          "printf '%s\\n' \"${COMPREPLY[@]}\"");
    auto r = testing::RunCommand({"/bin/bash", "-c", line}, absl::Seconds(30), dir_->path());
    EXPECT_THAT(r, IsOk());
    return r.ok() ? r->out : "";
  };
  EXPECT_EQ(complete("gangkeeper de"), "describe\n");
  EXPECT_THAT(complete("gangkeeper get cl"), HasSubstr("clusterqueues"));
  EXPECT_THAT(complete("gangkeeper get workloads --all"), HasSubstr("--all-namespaces"));
  EXPECT_THAT(complete("gangkeeper serve --tls-c"), HasSubstr("--tls-cert"));
  EXPECT_THAT(complete("gangkeeper get cq -o ''"), HasSubstr("wide"));
}

}  // namespace
}  // namespace gangkeeper
