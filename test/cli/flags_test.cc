#include "src/cli/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::cli {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Values {
  std::string addr = "0.0.0.0:9443";
  int threads = 8;
  bool dev = false;
  absl::Duration grace = absl::Seconds(25);
  size_t bytes = 10;
};

FlagSet MakeFlags(Values* v) {
  FlagSet f("serve", "test");
  f.String("webhook-addr", &v->addr, "address");
  f.Int("threads", &v->threads, "threads");
  f.Bool("dev", &v->dev, "dev mode");
  f.Duration("shutdown-grace", &v->grace, "grace");
  f.Size("max-body-bytes", &v->bytes, "bytes");
  return f;
}

TEST(FlagSetTest, ParsesEveryForm) {
  Values v;
  FlagSet f = MakeFlags(&v);
  bool help = false;
  ASSERT_THAT(f.Parse({"--webhook-addr=127.0.0.1:0", "--threads", "4", "--dev", "--shutdown-grace=2s",
                       "--max-body-bytes=99"},
                      nullptr, &help),
              IsOk());
  EXPECT_EQ(v.addr, "127.0.0.1:0");
  EXPECT_EQ(v.threads, 4);
  EXPECT_TRUE(v.dev);
  EXPECT_EQ(v.grace, absl::Seconds(2));
  EXPECT_EQ(v.bytes, 99u);
  EXPECT_FALSE(help);
  ASSERT_THAT(f.Parse({"--no-dev"}, nullptr, &help), IsOk());
  EXPECT_FALSE(v.dev);
}

TEST(FlagSetTest, ErrorsNameTheFlag) {
  Values v;
  FlagSet f = MakeFlags(&v);
  bool help = false;
  EXPECT_THAT(f.Parse({"--threads=lots"}, nullptr, &help), StatusIs(absl::StatusCode::kInvalidArgument, "--threads"));
  EXPECT_THAT(f.Parse({"--shutdown-grace=soon"}, nullptr, &help),
              StatusIs(absl::StatusCode::kInvalidArgument, "--shutdown-grace"));
  EXPECT_THAT(f.Parse({"--dev=maybe"}, nullptr, &help), StatusIs(absl::StatusCode::kInvalidArgument, "--dev"));
  EXPECT_THAT(f.Parse({"--colour=blue"}, nullptr, &help),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag --colour"));
  EXPECT_THAT(f.Parse({"--threads"}, nullptr, &help), StatusIs(absl::StatusCode::kInvalidArgument, "needs a value"));
  EXPECT_THAT(f.Parse({"stray"}, nullptr, &help), StatusIs(absl::StatusCode::kInvalidArgument, "stray"));
}

TEST(FlagSetTest, PositionalsAndHelp) {
  Values v;
  FlagSet f = MakeFlags(&v);
  bool help = false;
  std::vector<std::string> pos;
  ASSERT_THAT(f.Parse({"a", "--dev", "b", "--", "--c"}, &pos, &help), IsOk());
  EXPECT_THAT(pos, ElementsAre("a", "b", "--c"));
  ASSERT_THAT(f.Parse({"--help"}, nullptr, &help), IsOk());
  EXPECT_TRUE(help);
  EXPECT_THAT(f.Usage(), HasSubstr("--shutdown-grace"));
  EXPECT_THAT(f.Usage(), HasSubstr("(default 25s)"));
}

TEST(FlagSetTest, KubectlSpellings) {
  std::string ns, output = "table";
  bool all = false;
  std::vector<std::string> files;
  FlagSet f("get", "test");
  f.String("n,namespace", &ns, "namespace");
  f.Bool("A,all-namespaces", &all, "all");
  f.String("o,output", &output, "format");
  f.Strings("f,filename", &files, "files");
  bool help = false;
  std::vector<std::string> pos;
  ASSERT_THAT(f.Parse({"workloads", "-n", "team-a", "-A", "-ojson", "-f", "a", "--filename=b", "x"}, &pos, &help),
              IsOk());
  EXPECT_THAT(pos, ElementsAre("workloads", "x"));
  EXPECT_EQ(ns, "team-a");
  EXPECT_TRUE(all);
  EXPECT_EQ(output, "json");
  EXPECT_THAT(files, ElementsAre("a", "b"));
  ASSERT_THAT(f.Parse({"--namespace=team-b", "--all-namespaces=false", "--output", "yaml"}, &pos, &help), IsOk());
  EXPECT_EQ(ns, "team-b");
  EXPECT_FALSE(all);
  EXPECT_EQ(output, "yaml");
  EXPECT_THAT(f.Parse({"-x"}, &pos, &help), StatusIs(absl::StatusCode::kInvalidArgument, "unknown flag -x"));
  EXPECT_THAT(f.Parse({"-n"}, &pos, &help), StatusIs(absl::StatusCode::kInvalidArgument, "needs a value"));
  // One line per flag with both spellings; no --o.
  EXPECT_THAT(f.Usage(), HasSubstr("  -n, --namespace VALUE"));
  EXPECT_THAT(f.Usage(), HasSubstr("  -A, --all-namespaces"));
  EXPECT_THAT(f.Usage(), ::testing::Not(HasSubstr("--o ")));
  EXPECT_THAT(f.Usage(), HasSubstr("exit codes: 0 done"));
  EXPECT_THAT(f.Spellings(), ::testing::IsSupersetOf({"-n", "--namespace", "--no-all-namespaces", "--help"}));
}

}  // namespace
}  // namespace gangkeeper::cli
