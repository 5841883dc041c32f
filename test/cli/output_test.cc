// The CLI's output formats as a reader sees them: Kubernetes units, YAML
// that reads back as the same strings, tables, diffs.
#include "src/cli/output.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace gangkeeper::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliOutputTest, QuantitiesInKubernetesUnits) {
  struct Case {
    const char* in;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{{"38654705664", "36Gi"},
                                         {"4258291200", "3.97Gi"},
                                         {"0", "0"},
                                         {"8", "8"},
                                         {"500m", "500m"},
                                         {"275Gi", "275Gi"},
                                         {"1500000000000", "1500G"}, {"1500000000001", "1.36Ti"},
                                         {"not-a-quantity", "not-a-quantity"}}) {
    EXPECT_EQ(HumanQuantity(c.in), c.want) << c.in;
  }
}

TEST(CliOutputTest, YamlQuotesWhatWouldNotReadBackAsAString) {
  const nlohmann::json j = {{"items", {{{"name", "first"}, {"nominal", "4"}, {"flag", "yes"}, {"empty", ""}}}},
                            {"count", 2},
                            {"active", true}};
  const std::string text = FormatYaml(j);
  EXPECT_THAT(text, HasSubstr("items:\n  - "));
  EXPECT_THAT(text, HasSubstr("    name: first\n"));
  EXPECT_THAT(text, HasSubstr("nominal: \"4\""));
  EXPECT_THAT(text, HasSubstr("active: true"));
  const YAML::Node back = YAML::Load(text);
  EXPECT_EQ(back["items"][0]["flag"].as<std::string>(), "yes");
  EXPECT_EQ(back["items"][0]["nominal"].Tag(), "!");  // quoted: a string
  EXPECT_EQ(back["count"].as<int>(), 2);
}

TEST(CliOutputTest, TablesPadColumnsWithoutTrailingBlanks) {
  EXPECT_EQ(FormatTable({{"NAME", "COHORT"}, {"team-a-gpu", ""}, {"b", "shared"}}),
            "NAME         COHORT\nteam-a-gpu\nb            shared\n");
}

TEST(CliOutputTest, DiffShowsTheChangeWithContext) {
  std::string before, after;
  for (int i = 0; i < 20; ++i) {
    before += "line " + std::to_string(i) + "\n";
    after += (i == 10 ? std::string("line ten") : "line " + std::to_string(i)) + "\n";
  }
  const std::string diff = LineDiff(before, after);
  EXPECT_THAT(diff, HasSubstr("- line 10\n+ line ten\n"));
  EXPECT_THAT(diff, HasSubstr("  line 7\n"));
  EXPECT_THAT(diff, Not(HasSubstr("line 2\n")));
  EXPECT_EQ(LineDiff(before, before), "");
}

}  // namespace
}  // namespace gangkeeper::cli
