// gangkeeper: tests for model/gpu_pool.h and src/model/gpu_pool_decode.h — the MIG profile
// tables, profile spellings, Rule P layout checks (with a brute-force cross-check against the
// counting rule and PEERS §6.3's 28 maximal layouts), pool validation paths, advertised resources
// and manifest decoding.
#include "gangkeeper/model/gpu_pool.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/field_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/model/gpu_pool_decode.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::model {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;
using base::FieldErrorType;
using base::FieldErrors;
using base::FieldPath;
using nlohmann::json;

absl::StatusOr<std::vector<MigProfile>> Resolve(GpuModel model,
                                                const std::vector<std::string>& names) {
  std::vector<MigProfile> layout;
  for (const std::string& name : names) {
    absl::StatusOr<MigProfile> p = ResolveMigProfile(model, name);
    if (!p.ok()) return p.status();
    layout.push_back(*p);
  }
  return layout;
}

std::vector<std::string> Repeat(const std::string& name, int n) {
  return std::vector<std::string>(static_cast<size_t>(n), name);
}

std::vector<std::string> Paths(const FieldErrors& errors) {
  std::vector<std::string> paths;
  for (const base::FieldError& e : errors.errors()) paths.push_back(e.path);
  return paths;
}

std::string Dump(const FieldErrors& errors) { return base::ToStatus(errors).ToString(); }

// ---- Names and tables ---------------------------------------------------------------------------

TEST(GpuModelTest, NamesRoundTrip) {
  for (GpuModel m : kAllGpuModels) {
    absl::StatusOr<GpuModel> parsed = ParseGpuModel(GpuModelName(m));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(GpuModelName(GpuModel::kA100_80GB), "A100-80GB");
  EXPECT_EQ(GpuModelName(GpuModel::kH200_141GB), "H200-141GB");
}

TEST(GpuModelTest, UnknownNamesListTheSupportedOnes) {
  EXPECT_THAT(ParseGpuModel("A100"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "supported: A100-40GB, A100-80GB, H100-80GB, H200-141GB"));
  EXPECT_THAT(ParseGpuModel("a100_80gb"),
              StatusIs(absl::StatusCode::kInvalidArgument, "did you mean A100-80GB?"));
  EXPECT_THAT(ParseGpuModel(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MigStrategyTest, NamesRoundTrip) {
  for (MigStrategy s : {MigStrategy::kNone, MigStrategy::kSingle, MigStrategy::kMixed}) {
    absl::StatusOr<MigStrategy> parsed = ParseMigStrategy(MigStrategyName(s));
    ASSERT_THAT(parsed, IsOk());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_THAT(ParseMigStrategy("Mixed"),
              StatusIs(absl::StatusCode::kInvalidArgument, "did you mean mixed?"));
  EXPECT_THAT(ParseMigStrategy("dynamic"),
              StatusIs(absl::StatusCode::kInvalidArgument, "supported: none, single, mixed"));
}

std::vector<std::string> TableNames(GpuModel model) {
  std::vector<std::string> names;
  for (const MigProfile& p : MigProfileTable(model)) names.emplace_back(p.name);
  return names;
}

TEST(MigProfileTableTest, NamesPerModelFollowPeersTable) {
  EXPECT_THAT(TableNames(GpuModel::kA100_40GB),
              ElementsAre("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb",
                          "7g.40gb"));
  EXPECT_THAT(TableNames(GpuModel::kA100_80GB),
              ElementsAre("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                          "7g.80gb"));
  EXPECT_THAT(TableNames(GpuModel::kH100_80GB),
              ElementsAre("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
                          "7g.80gb"));
  EXPECT_THAT(TableNames(GpuModel::kH200_141GB),
              ElementsAre("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb",
                          "7g.141gb"));
}

TEST(MigProfileTableTest, GeometryFollowsPeersTableOnEveryModel) {
  struct Row {
    int id, compute, memory, max_instances;
    std::vector<int> starts;
    bool me;
  };
  const std::vector<Row> want = {
      {19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, false}, {20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}, true},
      {15, 1, 2, 4, {0, 2, 4, 6}, false},          {14, 2, 2, 3, {0, 2, 4}, false},
      {9, 3, 4, 2, {0, 4}, false},                 {5, 4, 4, 1, {0}, false},
      {0, 7, 8, 1, {0}, false},
  };
  for (GpuModel m : kAllGpuModels) {
    SCOPED_TRACE(GpuModelName(m));
    absl::Span<const MigProfile> table = MigProfileTable(m);
    ASSERT_EQ(table.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(table[i].name);
      EXPECT_EQ(table[i].profile_id, want[i].id);
      EXPECT_EQ(table[i].compute_slices, want[i].compute);
      EXPECT_EQ(table[i].memory_slices, want[i].memory);
      EXPECT_EQ(table[i].max_instances, want[i].max_instances);
      EXPECT_EQ(table[i].media_extensions, want[i].me);
      std::vector<int> starts;
      for (int s = 0; s < 8; ++s) {
        if (table[i].start_slots & (1u << s)) starts.push_back(s);
      }
      EXPECT_EQ(starts, want[i].starts);
    }
  }
}

TEST(MigResourceNamesTest, MixedStrategyNamesReplacePlusWithDot) {
  EXPECT_THAT(MigResourceNames(GpuModel::kA100_80GB),
              ElementsAre("nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb.me",
                          "nvidia.com/mig-1g.20gb", "nvidia.com/mig-2g.20gb",
                          "nvidia.com/mig-3g.40gb", "nvidia.com/mig-4g.40gb",
                          "nvidia.com/mig-7g.80gb"));
  EXPECT_THAT(MigResourceNames(GpuModel::kA100_40GB),
              ::testing::Contains("nvidia.com/mig-3g.20gb"));
}

// ---- Spellings ----------------------------------------------------------------------------------

TEST(ResolveMigProfileTest, AcceptedSpellings) {
  struct Case {
    GpuModel model;
    std::string spelling;
    std::string want_name;
  };
  const Case cases[] = {
      {GpuModel::kA100_80GB, "MIG1g", "1g.10gb"},
      {GpuModel::kA100_80GB, "MIG2g", "2g.20gb"},
      {GpuModel::kA100_80GB, "MIG3g", "3g.40gb"},
      {GpuModel::kA100_80GB, "MIG4g", "4g.40gb"},
      {GpuModel::kA100_80GB, "MIG7g", "7g.80gb"},
      {GpuModel::kA100_80GB, "3g.40gb", "3g.40gb"},
      {GpuModel::kA100_80GB, "1g.20gb", "1g.20gb"},
      {GpuModel::kA100_80GB, "1g.10gb+me", "1g.10gb+me"},
      {GpuModel::kA100_40GB, "MIG1g", "1g.5gb"},
      {GpuModel::kA100_40GB, "1g.10gb", "1g.10gb"},  // the 2-memory-slice 1g on this model
      {GpuModel::kH100_80GB, "MIG3g", "3g.40gb"},
      {GpuModel::kH200_141GB, "MIG3g", "3g.71gb"},
      {GpuModel::kH200_141GB, "1g.18gb+me", "1g.18gb+me"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(GpuModelName(c.model), " ", c.spelling));
    absl::StatusOr<MigProfile> p = ResolveMigProfile(c.model, c.spelling);
    ASSERT_THAT(p, IsOk());
    EXPECT_EQ(p->name, c.want_name);
  }
  // MIG1g is the 1-memory-slice profile (ID 19), not 1g.20gb (ID 15).
  EXPECT_EQ(ResolveMigProfile(GpuModel::kA100_80GB, "MIG1g")->profile_id, 19);
  EXPECT_EQ(ResolveMigProfile(GpuModel::kA100_40GB, "1g.10gb")->memory_slices, 2);
  EXPECT_EQ(ResolveMigProfile(GpuModel::kA100_80GB, "1g.10gb")->memory_slices, 1);
}

TEST(ResolveMigProfileTest, RefusedSpellingsExplain) {
  struct Case {
    std::string name;
    GpuModel model;
    std::string spelling;
    std::vector<std::string> want_substrings;
  };
  const Case cases[] = {
      {"another model's name says whose it is and lists this model's names",
       GpuModel::kA100_80GB,
       "3g.20gb",
       {"it is a profile of A100-40GB",
        "A100-80GB profiles are 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
        "MIG1g, MIG2g, MIG3g, MIG4g, MIG7g"}},
      {"an A100-80GB name on an H200",
       GpuModel::kH200_141GB,
       "3g.40gb",
       {"A100-80GB and H100-80GB", "3g.71gb"}},
      {"names are case-sensitive", GpuModel::kA100_80GB, "mig3g", {"did you mean MIG3g?"}},
      {"upper-case NVIDIA name", GpuModel::kA100_80GB, "3G.40GB", {"did you mean 3g.40gb?"}},
      {"a resource name instead of a profile",
       GpuModel::kA100_80GB,
       "nvidia.com/mig-3g.40gb",
       {"write the profile name 3g.40gb"}},
      {"the resource spelling of +me", GpuModel::kA100_80GB, "1g.10gb.me",
       {"write the profile name 1g.10gb+me"}},
      {"no such AKS name", GpuModel::kA100_80GB, "MIG5g", {"unknown MIG profile \"MIG5g\""}},
      {"empty", GpuModel::kA100_80GB, "", {"unknown MIG profile \"\""}},
      {"AKS has no short name for +me", GpuModel::kA100_80GB, "MIG1g+me", {"unknown"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<MigProfile> p = ResolveMigProfile(c.model, c.spelling);
    ASSERT_THAT(p, StatusIs(absl::StatusCode::kInvalidArgument));
    for (const std::string& want : c.want_substrings) {
      EXPECT_THAT(std::string(p.status().message()), HasSubstr(want));
    }
  }
}

// ---- Layouts: Rule P ----------------------------------------------------------------------------

// Checks PlaceMigLayout's answer independently: allowed starts, inside the GPU, disjoint.
void ExpectValidPlacement(absl::Span<const MigProfile> layout) {
  const std::vector<int> starts = PlaceMigLayout(layout);
  ASSERT_EQ(starts.size(), layout.size());
  std::array<int, 8> owner;
  owner.fill(-1);
  for (size_t i = 0; i < layout.size(); ++i) {
    const int s = starts[i];
    ASSERT_GE(s, 0);
    EXPECT_TRUE(layout[i].start_slots & (1u << s)) << layout[i].name << " at " << s;
    ASSERT_LE(s + layout[i].memory_slices, 8) << layout[i].name << " at " << s;
    for (int k = s; k < s + layout[i].memory_slices; ++k) {
      EXPECT_EQ(owner[k], -1) << "memory slice " << k << " used twice";
      owner[k] = static_cast<int>(i);
    }
  }
}

TEST(CheckMigLayoutTest, AcceptedLayouts) {
  struct Case {
    GpuModel model;
    std::vector<std::string> layout;
  };
  const Case cases[] = {
      {GpuModel::kA100_80GB, {"MIG4g", "MIG3g"}},
      {GpuModel::kA100_80GB, {"MIG3g", "MIG4g"}},
      {GpuModel::kA100_80GB, {"MIG3g", "MIG2g", "MIG1g", "MIG1g"}},
      {GpuModel::kA100_80GB, {"MIG7g"}},
      {GpuModel::kA100_80GB, Repeat("MIG1g", 7)},
      {GpuModel::kA100_80GB, {"MIG3g", "MIG3g"}},
      {GpuModel::kA100_80GB, {"MIG1g"}},
      {GpuModel::kA100_80GB, {"4g.40gb", "2g.20gb", "1g.10gb"}},
      {GpuModel::kA100_80GB, {"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"}},
      {GpuModel::kA100_80GB, Repeat("1g.20gb", 4)},
      {GpuModel::kA100_80GB, {"1g.10gb", "1g.20gb", "1g.10gb", "1g.20gb", "1g.20gb"}},
      {GpuModel::kA100_80GB, {"1g.10gb+me", "MIG1g", "MIG1g", "MIG1g", "MIG1g", "MIG1g", "MIG1g"}},
      {GpuModel::kA100_80GB, {"MIG3g", "1g.20gb", "1g.20gb"}},
      {GpuModel::kA100_40GB, {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}},
      {GpuModel::kH100_80GB, {"MIG4g", "MIG2g", "MIG1g"}},
      {GpuModel::kH200_141GB, {"4g.71gb", "3g.71gb"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(GpuModelName(c.model), " [", absl::StrJoin(c.layout, ", "), "]"));
    absl::StatusOr<std::vector<MigProfile>> layout = Resolve(c.model, c.layout);
    ASSERT_THAT(layout, IsOk());
    EXPECT_THAT(CheckMigLayout(c.model, *layout), IsOk());
    ExpectValidPlacement(*layout);
  }
}

// Every layout after "valid example(s): " in `message` must itself fit.
void ExpectSuggestionsFit(GpuModel model, const std::string& message) {
  const size_t at = message.find("valid example");
  ASSERT_NE(at, std::string::npos) << message;
  const std::string list = message.substr(message.find(": ", at) + 2);
  int seen = 0;
  for (absl::string_view layout : absl::StrSplit(list, " or ")) {
    ASSERT_TRUE(absl::ConsumePrefix(&layout, "[") && absl::ConsumeSuffix(&layout, "]")) << list;
    const std::vector<std::string> names = absl::StrSplit(layout, ", ");
    absl::StatusOr<std::vector<MigProfile>> profiles = Resolve(model, names);
    ASSERT_THAT(profiles, IsOk());
    EXPECT_THAT(CheckMigLayout(model, *profiles), IsOk()) << layout;
    ++seen;
  }
  EXPECT_GE(seen, 1);
}

TEST(CheckMigLayoutTest, RefusedLayoutsSayWhy) {
  struct Case {
    std::string name;
    std::vector<std::string> layout;
    std::vector<std::string> want_substrings;
  };
  const Case cases[] = {
      {"two 4g overlap at slice 0",
       {"MIG4g", "MIG4g"},
       {"layout [4g.40gb, 4g.40gb] does not fit one A100-80GB",
        "4g.40gb can only start at memory slice 0, so 2 of them overlap",
        "(compute 8 of 7 slices, memory 8 of 8)",
        "valid examples: [4g.40gb, 3g.40gb] or [4g.40gb, 2g.20gb, 1g.10gb]"}},
      {"7g shares with nothing",
       {"MIG7g", "MIG1g"},
       {"7g.80gb takes the whole GPU", "compute 8 of 7 slices, memory 9 of 8", "[7g.80gb]"}},
      {"eight 1g instances",
       Repeat("MIG1g", 8),
       {"it has 8 instances and one GPU holds at most 7",
        "valid example", "[1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]"}},
      {"two 3g leave no memory for a 1g",
       {"MIG3g", "MIG3g", "MIG1g"},
       {"more memory slices than the GPU has", "(compute 7 of 7 slices, memory 9 of 8)",
        "[3g.40gb, 3g.40gb]"}},
      {"two +me instances",
       {"1g.10gb+me", "1g.10gb+me"},
       {"at most one +me", "has 2", "1g.10gb+me]"}},
      {"five 2-slice 1g",
       Repeat("1g.20gb", 5),
       {"1g.20gb can only start at memory slices 0, 2, 4 and 6, so at most 4 fit, not 5",
        "memory 10 of 8", "[1g.20gb, 1g.20gb, 1g.20gb, 1g.20gb]"}},
      {"three 3g",
       Repeat("3g.40gb", 3),
       {"3g.40gb can only start at memory slices 0 and 4, so at most 2 fit, not 3"}},
      {"4g with two 2g needs an eighth compute slice",
       {"MIG4g", "MIG2g", "MIG2g"},
       {"more compute slices than the GPU has", "(compute 8 of 7 slices, memory 8 of 8)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<MigProfile>> layout = Resolve(GpuModel::kA100_80GB, c.layout);
    ASSERT_THAT(layout, IsOk());
    EXPECT_TRUE(PlaceMigLayout(*layout).empty() || c.name == "two +me instances");
    absl::Status s = CheckMigLayout(GpuModel::kA100_80GB, *layout);
    ASSERT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    for (const std::string& want : c.want_substrings) {
      EXPECT_THAT(std::string(s.message()), HasSubstr(want));
    }
    ExpectSuggestionsFit(GpuModel::kA100_80GB, std::string(s.message()));
  }
}

TEST(CheckMigLayoutTest, EmptyAndForeignLayoutsAreRefused) {
  EXPECT_THAT(CheckMigLayout(GpuModel::kA100_80GB, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "at least one profile"));
  EXPECT_TRUE(PlaceMigLayout({}).empty());
  absl::StatusOr<MigProfile> foreign = ResolveMigProfile(GpuModel::kA100_40GB, "3g.20gb");
  ASSERT_THAT(foreign, IsOk());
  EXPECT_THAT(CheckMigLayout(GpuModel::kA100_80GB, {*foreign}),
              StatusIs(absl::StatusCode::kInvalidArgument, "not a A100-80GB profile"));
}

// Positions matter: with the 3g at slice 0 the two 2g would need starts 4 and 6, and 2g cannot
// start at 6; only the 3g at slice 4 works. PlaceMigLayout must backtrack to find it.
TEST(PlaceMigLayoutTest, SearchesStartSlotsRatherThanTakingTheFirst) {
  absl::StatusOr<std::vector<MigProfile>> layout =
      Resolve(GpuModel::kA100_80GB, {"2g.20gb", "2g.20gb", "3g.40gb"});
  ASSERT_THAT(layout, IsOk());
  ExpectValidPlacement(*layout);
  const std::vector<int> starts = PlaceMigLayout(*layout);
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[2], 4);  // the 3g must take the upper half
}

// The 28 maximal layouts of PEERS §6.3, in A100-40GB names (1g.10gb is the 2-slice profile).
std::vector<std::vector<std::string>> PeersMaximalLayouts() {
  const std::string g7 = "7g.40gb", g4 = "4g.20gb", g3 = "3g.20gb", g2 = "2g.10gb",
                    d = "1g.10gb", s = "1g.5gb";
  return {
      {g7},
      {g4, g3},
      {g3, g3},
      {g3, g2, g2},
      {g3, g2, d},
      {g3, d, d},
      {g3, g2, s, s},
      {g3, d, s, s},
      {g3, s, s, s, s},
      {g4, g2, s},
      {g4, g2, d},
      {g4, d, d},
      {g4, d, s, s},
      {g4, s, s, s},
      {g2, g2, g2, s},
      {g2, g2, g2, d},
      {g2, g2, d, d},
      {g2, g2, d, s, s},
      {g2, g2, s, s, s},
      {g2, d, d, d},
      {g2, d, d, s, s},
      {g2, d, s, s, s, s},
      {g2, s, s, s, s, s},
      {d, d, d, d},
      {d, d, d, s, s},
      {d, d, s, s, s, s},
      {d, s, s, s, s, s, s},
      {s, s, s, s, s, s, s},
  };
}

TEST(CheckMigLayoutTest, PeersMaximalLayoutsFitAndCannotGrow) {
  const GpuModel model = GpuModel::kA100_40GB;
  for (const std::vector<std::string>& names : PeersMaximalLayouts()) {
    SCOPED_TRACE(absl::StrJoin(names, "+"));
    absl::StatusOr<std::vector<MigProfile>> layout = Resolve(model, names);
    ASSERT_THAT(layout, IsOk());
    EXPECT_THAT(CheckMigLayout(model, *layout), IsOk());
    ExpectValidPlacement(*layout);
    for (const MigProfile& extra : MigProfileTable(model)) {
      if (extra.media_extensions) continue;
      std::vector<MigProfile> grown = *layout;
      grown.push_back(extra);
      EXPECT_THAT(CheckMigLayout(model, grown), Not(IsOk())) << "+" << extra.name;
    }
  }
}

// The counting rule of PEERS §6.3, written independently of the implementation's table.
struct CountingProfile {
  std::string name;  // A100-80GB
  int compute, memory, max_instances;
};
const std::vector<CountingProfile>& CountingProfiles() {
  static const std::vector<CountingProfile> profiles = {
      {"1g.10gb", 1, 1, 7}, {"1g.20gb", 1, 2, 4}, {"2g.20gb", 2, 2, 3},
      {"3g.40gb", 3, 4, 2}, {"4g.40gb", 4, 4, 1}, {"7g.80gb", 7, 8, 1},
  };
  return profiles;
}

bool CountingRuleFits(const std::vector<int>& counts) {
  int compute = 0, memory = 0, total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const CountingProfile& p = CountingProfiles()[i];
    if (counts[i] > p.max_instances) return false;
    compute += counts[i] * p.compute;
    memory += counts[i] * p.memory;
    total += counts[i];
  }
  return total >= 1 && compute <= 7 && memory <= 8;
}

// Calls `f(counts)` for every multiset of the six non-+me profiles with 1..max_total instances.
template <typename F>
void ForEachMultiset(int max_total, F f) {
  std::vector<int> counts(CountingProfiles().size(), 0);
  auto rec = [&](auto&& self, size_t i, int left) -> void {
    if (i == counts.size()) {
      if (left < max_total) f(counts);
      return;
    }
    for (int k = 0; k <= left; ++k) {
      counts[i] = k;
      self(self, i + 1, left - k);
    }
    counts[i] = 0;
  };
  rec(rec, 0, max_total);
}

TEST(CheckMigLayoutTest, RulePAgreesWithCountingOnEveryMultisetFromAnEmptyGpu) {
  const GpuModel model = GpuModel::kA100_80GB;
  int checked = 0, valid = 0, maximal = 0;
  std::set<std::multiset<std::string>> maximal_sets;
  ForEachMultiset(8, [&](const std::vector<int>& counts) {
    std::vector<std::string> names;
    for (size_t i = 0; i < counts.size(); ++i) {
      for (int k = 0; k < counts[i]; ++k) names.push_back(CountingProfiles()[i].name);
    }
    absl::StatusOr<std::vector<MigProfile>> layout = Resolve(model, names);
    ASSERT_THAT(layout, IsOk());
    const bool rule_p = CheckMigLayout(model, *layout).ok();
    const bool counting = CountingRuleFits(counts);
    EXPECT_EQ(rule_p, counting) << "[" << absl::StrJoin(names, ", ") << "]";
    EXPECT_EQ(!PlaceMigLayout(*layout).empty(), counting) << "[" << absl::StrJoin(names, ", ")
                                                          << "]";
    ++checked;
    if (!counting) return;
    ++valid;
    bool can_grow = false;
    for (size_t i = 0; i < counts.size(); ++i) {
      std::vector<int> grown = counts;
      ++grown[i];
      can_grow = can_grow || CountingRuleFits(grown);
    }
    if (!can_grow) {
      ++maximal;
      maximal_sets.insert(std::multiset<std::string>(names.begin(), names.end()));
    }
  });
  EXPECT_EQ(checked, 3002);  // C(6+8, 6) - 1 non-empty multisets of up to 8 instances
  EXPECT_EQ(valid, 77);      // PEERS §6.3
  EXPECT_EQ(maximal, 28);    // PEERS §6.3

  // The same 28 as PEERS lists (translated from A100-40GB to A100-80GB names).
  const std::map<std::string, std::string> to_80gb = {
      {"7g.40gb", "7g.80gb"}, {"4g.20gb", "4g.40gb"}, {"3g.20gb", "3g.40gb"},
      {"2g.10gb", "2g.20gb"}, {"1g.10gb", "1g.20gb"}, {"1g.5gb", "1g.10gb"}};
  std::set<std::multiset<std::string>> peers;
  for (const std::vector<std::string>& names : PeersMaximalLayouts()) {
    std::multiset<std::string> translated;
    for (const std::string& n : names) translated.insert(to_80gb.at(n));
    peers.insert(translated);
  }
  EXPECT_EQ(peers.size(), 28u);
  EXPECT_EQ(maximal_sets, peers);
}

TEST(CheckMigLayoutTest, MediaExtensionVariantsCountLikePeers) {
  // PEERS §6.3: 127 valid non-empty multisets once +me variants are included (at most one +me).
  const GpuModel model = GpuModel::kA100_80GB;
  absl::StatusOr<MigProfile> me = ResolveMigProfile(model, "1g.10gb+me");
  ASSERT_THAT(me, IsOk());
  int valid = 0;
  ForEachMultiset(8, [&](const std::vector<int>& counts) {
    std::vector<std::string> names;
    for (size_t i = 0; i < counts.size(); ++i) {
      for (int k = 0; k < counts[i]; ++k) names.push_back(CountingProfiles()[i].name);
    }
    absl::StatusOr<std::vector<MigProfile>> layout = Resolve(model, names);
    ASSERT_THAT(layout, IsOk());
    if (CheckMigLayout(model, *layout).ok()) ++valid;
    // Swapping one 1g.10gb for 1g.10gb+me never changes the verdict ...
    if (counts[0] > 0) {
      std::vector<MigProfile> swapped = *layout;
      swapped[0] = *me;
      EXPECT_EQ(CheckMigLayout(model, swapped).ok(), CheckMigLayout(model, *layout).ok());
      if (CheckMigLayout(model, swapped).ok()) ++valid;
    }
    // ... and adding +me works exactly when adding a 1g.10gb would.
    std::vector<MigProfile> plus_me = *layout;
    plus_me.push_back(*me);
    std::vector<int> grown = counts;
    ++grown[0];
    EXPECT_EQ(CheckMigLayout(model, plus_me).ok(), CountingRuleFits(grown));
  });
  EXPECT_EQ(valid, 127);
}

// ---- Pool validation ----------------------------------------------------------------------------

GpuNodePool Pool(MigStrategy strategy, std::vector<std::string> profiles,
                 GpuModel gpu = GpuModel::kA100_80GB) {
  GpuNodePool pool;
  pool.name = "a100-mig";
  pool.flavor = "a100-mig-mixed";
  pool.gpu = gpu;
  pool.gpus_per_node = 1;
  pool.nodes = 2;
  pool.mig_strategy = strategy;
  pool.mig_profiles = std::move(profiles);
  return pool;
}

const std::vector<std::string> kSeedLayout = {"MIG3g", "MIG2g", "MIG1g", "MIG1g"};

TEST(ValidateGpuNodePoolTest, FieldPathsAndTypes) {
  struct Case {
    std::string name;
    GpuNodePool pool;
    std::vector<std::string> want_paths;
    std::vector<FieldErrorType> want_types;
    std::string want_detail;  // substring of the first error, if set
  };
  auto with = [](GpuNodePool p, auto edit) {
    edit(p);
    return p;
  };
  const GpuNodePool seed = Pool(MigStrategy::kMixed, kSeedLayout);
  const std::vector<Case> cases = {
      {"the seed pool is valid", seed, {}, {}, ""},
      {"whole GPUs without profiles are valid", Pool(MigStrategy::kNone, {}), {}, {}, ""},
      {"single with one profile repeated is valid",
       Pool(MigStrategy::kSingle, Repeat("MIG1g", 7)), {}, {}, ""},
      {"zero nodes is a valid (scaled-down) pool",
       with(seed, [](GpuNodePool& p) { p.nodes = 0; }), {}, {}, ""},
      {"the upper bounds are inclusive",
       with(seed, [](GpuNodePool& p) { p.nodes = 100000; p.gpus_per_node = 16; }), {}, {}, ""},
      {"flavor is required",
       with(seed, [](GpuNodePool& p) { p.flavor.clear(); }),
       {"spec.flavor"}, {FieldErrorType::kRequired}, "ResourceFlavor"},
      {"flavor must be a DNS subdomain",
       with(seed, [](GpuNodePool& p) { p.flavor = "A100_Mixed"; }),
       {"spec.flavor"}, {FieldErrorType::kInvalid}, "A100_Mixed"},
      {"gpusPerNode below 1",
       with(seed, [](GpuNodePool& p) { p.gpus_per_node = 0; }),
       {"spec.gpusPerNode"}, {FieldErrorType::kInvalid}, "gpusPerNode is 0; it must be between 1 and 16"},
      {"gpusPerNode above 16",
       with(seed, [](GpuNodePool& p) { p.gpus_per_node = 17; }),
       {"spec.gpusPerNode"}, {FieldErrorType::kInvalid}, "17"},
      {"negative nodes",
       with(seed, [](GpuNodePool& p) { p.nodes = -1; }),
       {"spec.nodes"}, {FieldErrorType::kInvalid}, "nodes is -1"},
      {"too many nodes",
       with(seed, [](GpuNodePool& p) { p.nodes = 100001; }),
       {"spec.nodes"}, {FieldErrorType::kInvalid}, "100000"},
      {"none forbids profiles",
       Pool(MigStrategy::kNone, {"MIG7g"}),
       {"spec.migProfiles"}, {FieldErrorType::kForbidden}, "migStrategy: mixed"},
      {"mixed needs profiles",
       Pool(MigStrategy::kMixed, {}),
       {"spec.migProfiles"}, {FieldErrorType::kRequired}, "MIG3g"},
      {"single needs profiles",
       Pool(MigStrategy::kSingle, {}),
       {"spec.migProfiles"}, {FieldErrorType::kRequired}, ""},
      {"an unknown profile is reported at its index",
       Pool(MigStrategy::kMixed, {"MIG3g", "MIG5g", "MIG1g"}),
       {"spec.migProfiles[1]"}, {FieldErrorType::kNotSupported}, "MIG5g"},
      {"another model's name is reported at its index",
       Pool(MigStrategy::kMixed, {"3g.20gb", "3g.40gb"}),
       {"spec.migProfiles[0]"}, {FieldErrorType::kNotSupported}, "A100-40GB"},
      {"single refuses mixed device types",
       Pool(MigStrategy::kSingle, {"MIG3g", "MIG2g"}),
       {"spec.migProfiles"}, {FieldErrorType::kInvalid}, "use migStrategy: mixed"},
      {"a layout that does not fit",
       Pool(MigStrategy::kMixed, {"MIG4g", "MIG4g"}),
       {"spec.migProfiles"}, {FieldErrorType::kInvalid}, "4g.40gb can only start at memory slice 0"},
      {"single checks the fit too",
       Pool(MigStrategy::kSingle, Repeat("MIG3g", 3)),
       {"spec.migProfiles"}, {FieldErrorType::kInvalid}, "at most 2 fit"},
      {"a very long list is refused without per-entry noise",
       Pool(MigStrategy::kMixed, Repeat("nope", 15)),
       {"spec.migProfiles"}, {FieldErrorType::kTooMany}, "15"},
      {"every problem is reported",
       with(Pool(MigStrategy::kMixed, {"MIG3g", "MIG9g"}),
            [](GpuNodePool& p) { p.gpus_per_node = 0; p.nodes = -5; p.flavor.clear(); }),
       {"spec.flavor", "spec.gpusPerNode", "spec.nodes", "spec.migProfiles[1]"},
       {FieldErrorType::kRequired, FieldErrorType::kInvalid, FieldErrorType::kInvalid,
        FieldErrorType::kNotSupported},
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FieldErrors errors;
    ValidateGpuNodePool(c.pool, FieldPath("spec"), &errors);
    EXPECT_THAT(Paths(errors), ElementsAreArray(c.want_paths)) << Dump(errors);
    std::vector<FieldErrorType> types;
    for (const base::FieldError& e : errors.errors()) types.push_back(e.type);
    EXPECT_THAT(types, ElementsAreArray(c.want_types));
    if (!c.want_detail.empty() && !errors.empty()) {
      EXPECT_THAT(errors.errors()[0].detail, HasSubstr(c.want_detail));
    }
  }
}

TEST(ValidateGpuNodePoolTest, PathsFollowTheGivenRoot) {
  FieldErrors errors;
  ValidateGpuNodePool(Pool(MigStrategy::kMixed, {"MIG3g", "bogus"}),
                      FieldPath("items").Index(3).Child("spec"), &errors);
  EXPECT_THAT(Paths(errors), ElementsAre("items[3].spec.migProfiles[1]"));
}

// ---- Advertised resources -----------------------------------------------------------------------

using ResourceMap = std::map<std::string, int64_t>;

TEST(AdvertiseTest, SeedMixedPool) {
  GpuNodePool pool = Pool(MigStrategy::kMixed, kSeedLayout);
  pool.nodes = 3;
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/mig-3g.40gb", 1},
                                      {"nvidia.com/mig-2g.20gb", 1},
                                      {"nvidia.com/mig-1g.10gb", 2}}));
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/mig-3g.40gb", 3},
                                   {"nvidia.com/mig-2g.20gb", 3},
                                   {"nvidia.com/mig-1g.10gb", 6}}));
  // The model could advertise 4g.40gb, this pool does not.
  const std::vector<std::string> possible = MigResourceNames(pool.gpu);
  EXPECT_NE(std::find(possible.begin(), possible.end(), "nvidia.com/mig-4g.40gb"), possible.end());
  EXPECT_EQ(r->per_node.count("nvidia.com/mig-4g.40gb"), 0u);
}

TEST(AdvertiseTest, EightGpusPerNode) {
  GpuNodePool pool = Pool(MigStrategy::kMixed, kSeedLayout);
  pool.gpus_per_node = 8;
  pool.nodes = 3;
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/mig-3g.40gb", 8},
                                      {"nvidia.com/mig-2g.20gb", 8},
                                      {"nvidia.com/mig-1g.10gb", 16}}));
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/mig-3g.40gb", 24},
                                   {"nvidia.com/mig-2g.20gb", 24},
                                   {"nvidia.com/mig-1g.10gb", 48}}));
}

TEST(AdvertiseTest, MixedWithMediaExtensionsAndFullNames) {
  GpuNodePool pool = Pool(MigStrategy::kMixed, {"1g.10gb+me", "1g.10gb", "MIG1g", "4g.40gb"});
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/mig-1g.10gb.me", 1},
                                      {"nvidia.com/mig-1g.10gb", 2},
                                      {"nvidia.com/mig-4g.40gb", 1}}));
}

TEST(AdvertiseTest, SingleCountsPartitionsAsGpus) {
  GpuNodePool pool = Pool(MigStrategy::kSingle, Repeat("MIG1g", 7));
  pool.gpus_per_node = 8;
  pool.nodes = 2;
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/gpu", 56}}));
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/gpu", 112}}));

  pool.mig_profiles = {"MIG3g", "MIG3g"};
  pool.gpus_per_node = 4;
  r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/gpu", 8}}));
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/gpu", 16}}));
}

TEST(AdvertiseTest, NoneAdvertisesWholeGpus) {
  GpuNodePool pool = Pool(MigStrategy::kNone, {});
  pool.gpus_per_node = 8;
  pool.nodes = 5;
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->per_node, (ResourceMap{{"nvidia.com/gpu", 8}}));
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/gpu", 40}}));
}

TEST(AdvertiseTest, ZeroNodesKeepsTheResourceNames) {
  GpuNodePool pool = Pool(MigStrategy::kMixed, {"MIG4g", "MIG3g"});
  pool.nodes = 0;
  absl::StatusOr<AdvertisedResources> r = Advertise(pool);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->total, (ResourceMap{{"nvidia.com/mig-4g.40gb", 0}, {"nvidia.com/mig-3g.40gb", 0}}));
}

TEST(AdvertiseTest, InvalidPoolsAreInvalidArgument) {
  EXPECT_THAT(Advertise(Pool(MigStrategy::kMixed, {"MIG4g", "MIG4g"})),
              StatusIs(absl::StatusCode::kInvalidArgument, "spec.migProfiles: Invalid value"));
  GpuNodePool pool = Pool(MigStrategy::kNone, {});
  pool.gpus_per_node = 0;
  EXPECT_THAT(Advertise(pool), StatusIs(absl::StatusCode::kInvalidArgument, "spec.gpusPerNode"));
}

// ---- Decoding -----------------------------------------------------------------------------------

json Parse(const char* text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

constexpr char kSeedManifest[] = R"json({
  "apiVersion": "gangkeeper.io/v1alpha1",
  "kind": "GPUNodePool",
  "metadata": {"name": "a100-mig", "labels": {"team": "ml"}},
  "spec": {
    "flavor": "a100-mig-mixed",
    "gpu": "A100-80GB",
    "gpusPerNode": 1,
    "nodes": 2,
    "migStrategy": "mixed",
    "migProfiles": ["MIG3g", "MIG2g", "MIG1g", "MIG1g"]
  }
})json";

TEST(DecodeGpuNodePoolTest, SeedManifest) {
  GpuNodePool pool;
  FieldErrors errors;
  DecodeAndValidateGpuNodePool(Parse(kSeedManifest), FieldPath(), &pool, &errors);
  ASSERT_TRUE(errors.empty()) << Dump(errors);
  EXPECT_EQ(pool.name, "a100-mig");
  EXPECT_EQ(pool.flavor, "a100-mig-mixed");
  EXPECT_EQ(pool.gpu, GpuModel::kA100_80GB);
  EXPECT_EQ(pool.gpus_per_node, 1);
  EXPECT_EQ(pool.nodes, 2);
  EXPECT_EQ(pool.mig_strategy, MigStrategy::kMixed);
  EXPECT_THAT(pool.mig_profiles, ElementsAreArray(kSeedLayout));
}

// Replaces spec fields of the seed manifest (null removes the field).
json SeedWith(const json& spec_patch) {
  json j = Parse(kSeedManifest);
  for (auto it = spec_patch.begin(); it != spec_patch.end(); ++it) {
    if (it->is_null()) {
      j["spec"].erase(it.key());
    } else {
      j["spec"][it.key()] = *it;
    }
  }
  return j;
}

TEST(DecodeGpuNodePoolTest, AcceptedShapes) {
  struct Case {
    std::string name;
    json manifest;
    int64_t want_gpus_per_node;
    int64_t want_nodes;
  };
  const Case cases[] = {
      {"integers as strings of digits", SeedWith({{"gpusPerNode", "8"}, {"nodes", "3"}}), 8, 3},
      {"whole-valued floats", SeedWith({{"gpusPerNode", 4.0}, {"nodes", 0.0}}), 4, 0},
      {"negative string decodes (validation refuses it)", SeedWith({{"nodes", "-3"}}), 1, -3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GpuNodePool pool;
    FieldErrors errors;
    DecodeGpuNodePool(c.manifest, FieldPath(), &pool, &errors);
    ASSERT_TRUE(errors.empty()) << Dump(errors);
    EXPECT_EQ(pool.gpus_per_node, c.want_gpus_per_node);
    EXPECT_EQ(pool.nodes, c.want_nodes);
  }
}

TEST(DecodeGpuNodePoolTest, OptionalFieldsDefault) {
  json j = Parse(R"json({"apiVersion": "gangkeeper.io/v1alpha1", "kind": "GPUNodePool",
      "metadata": {"name": "h100"},
      "spec": {"flavor": "h100", "gpu": "H100-80GB", "gpusPerNode": 8, "nodes": 4,
               "migProfiles": null}})json");
  GpuNodePool pool;
  pool.mig_profiles = {"stale"};
  FieldErrors errors;
  DecodeAndValidateGpuNodePool(j, FieldPath(), &pool, &errors);
  ASSERT_TRUE(errors.empty()) << Dump(errors);
  EXPECT_EQ(pool.mig_strategy, MigStrategy::kNone);
  EXPECT_TRUE(pool.mig_profiles.empty());
  EXPECT_EQ(pool.gpu, GpuModel::kH100_80GB);
}

TEST(DecodeGpuNodePoolTest, RefusedShapes) {
  struct Case {
    std::string name;
    json manifest;
    std::vector<std::string> want_paths;
    std::string want_detail;  // substring of the first error
  };
  json no_name = Parse(kSeedManifest);
  no_name["metadata"].erase("name");
  json no_metadata = Parse(kSeedManifest);
  no_metadata.erase("metadata");
  json bad_name = Parse(kSeedManifest);
  bad_name["metadata"]["name"] = "My_Pool";
  json wrong_kind = Parse(kSeedManifest);
  wrong_kind["kind"] = "ResourceFlavor";
  json wrong_version = Parse(kSeedManifest);
  wrong_version["apiVersion"] = "gangkeeper.io/v1";
  json no_spec = Parse(kSeedManifest);
  no_spec.erase("spec");
  json list_spec = Parse(kSeedManifest);
  list_spec["spec"] = json::array();
  json invalid_utf8 = SeedWith({{"nodes", std::string("\xff\xfe")}});

  const std::vector<Case> cases = {
      {"nodes as a word", SeedWith({{"nodes", "two"}}), {"spec.nodes"},
       "must be an integer, got string \"two\""},
      {"nodes as a fraction", SeedWith({{"nodes", 1.5}}), {"spec.nodes"}, "whole number"},
      {"nodes as a boolean", SeedWith({{"nodes", true}}), {"spec.nodes"}, "got boolean"},
      {"nodes beyond int64 as a string", SeedWith({{"nodes", "99999999999999999999"}}),
       {"spec.nodes"}, "out of range"},
      {"nodes beyond int64 as a number", SeedWith({{"nodes", UINT64_MAX}}), {"spec.nodes"},
       "out of range"},
      {"digits with a plus sign or spaces", SeedWith({{"gpusPerNode", " 8"}}),
       {"spec.gpusPerNode"}, "must be an integer"},
      {"invalid UTF-8 does not throw", invalid_utf8, {"spec.nodes"}, "must be an integer"},
      {"migProfiles as a single string", SeedWith({{"migProfiles", "MIG3g"}}),
       {"spec.migProfiles"}, "must be a list"},
      {"a number inside migProfiles", SeedWith({{"migProfiles", {"MIG3g", 3}}}),
       {"spec.migProfiles[1]"}, "must be a string"},
      {"gpu not a string", SeedWith({{"gpu", 100}}), {"spec.gpu"}, "must be a string"},
      {"unknown gpu model", SeedWith({{"gpu", "A100"}}), {"spec.gpu"}, "supported: A100-40GB"},
      {"strategy in the wrong case", SeedWith({{"migStrategy", "Mixed"}}), {"spec.migStrategy"},
       "did you mean mixed?"},
      {"typo of gpusPerNode",
       SeedWith({{"gpusPerNode", nullptr}, {"gpuPerNode", 1}}),
       {"spec.gpuPerNode", "spec.gpusPerNode"},
       "unknown field \"gpuPerNode\": did you mean \"gpusPerNode\"?"},
      {"an unrelated unknown field", SeedWith({{"region", "westeurope"}}), {"spec.region"},
       "supported fields: flavor, gpu, gpusPerNode, nodes, migStrategy, migProfiles"},
      {"missing required spec fields",
       SeedWith({{"flavor", nullptr}, {"gpu", nullptr}, {"gpusPerNode", nullptr},
                 {"nodes", nullptr}}),
       {"spec.flavor", "spec.gpu", "spec.gpusPerNode", "spec.nodes"}, "ResourceFlavor"},
      {"missing metadata.name", no_name, {"metadata.name"}, "needs a name"},
      {"missing metadata", no_metadata, {"metadata.name"}, "needs a name"},
      {"name not a DNS subdomain", bad_name, {"metadata.name"}, "My_Pool"},
      {"wrong kind", wrong_kind, {"kind"}, "must be GPUNodePool"},
      {"wrong apiVersion", wrong_version, {"apiVersion"}, "gangkeeper.io/v1alpha1"},
      {"missing spec", no_spec, {"spec"}, "spec.flavor"},
      {"spec not an object", list_spec, {"spec"}, "must be an object"},
      {"not an object at all", Parse(R"json(["GPUNodePool"])json"), {""}, "must be an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GpuNodePool pool;
    FieldErrors errors;
    DecodeGpuNodePool(c.manifest, FieldPath(), &pool, &errors);
    EXPECT_THAT(Paths(errors), ElementsAreArray(c.want_paths)) << Dump(errors);
    if (!errors.empty()) {
      EXPECT_THAT(errors.errors()[0].detail, HasSubstr(c.want_detail));
    }
  }
}

TEST(DecodeGpuNodePoolTest, ErrorTypes) {
  GpuNodePool pool;
  FieldErrors errors;
  json j = SeedWith({{"gpusPerNode", nullptr}, {"gpuPerNode", 1}, {"nodes", "two"}});
  j["metadata"].erase("name");
  DecodeGpuNodePool(j, FieldPath(), &pool, &errors);
  std::map<std::string, FieldErrorType> types;
  for (const base::FieldError& e : errors.errors()) types[e.path] = e.type;
  EXPECT_EQ(types, (std::map<std::string, FieldErrorType>{
                       {"metadata.name", FieldErrorType::kRequired},
                       {"spec.gpuPerNode", FieldErrorType::kNotSupported},
                       {"spec.gpusPerNode", FieldErrorType::kRequired},
                       {"spec.nodes", FieldErrorType::kInvalid}}));
}

TEST(DecodeGpuNodePoolTest, PathsFollowTheGivenRoot) {
  GpuNodePool pool;
  FieldErrors errors;
  DecodeGpuNodePool(SeedWith({{"nodes", "two"}}), FieldPath("documents").Index(2), &pool,
                    &errors);
  EXPECT_THAT(Paths(errors), ElementsAre("documents[2].spec.nodes"));
}

TEST(DecodeAndValidateGpuNodePoolTest, ValidatesOnlyCleanDecodes) {
  {
    GpuNodePool pool;
    FieldErrors errors;
    DecodeAndValidateGpuNodePool(SeedWith({{"migProfiles", {"MIG4g", "MIG4g"}}}), FieldPath(),
                                 &pool, &errors);
    EXPECT_THAT(Paths(errors), ElementsAre("spec.migProfiles"));
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_THAT(errors.errors()[0].detail, HasSubstr("does not fit one A100-80GB"));
  }
  {
    GpuNodePool pool;
    FieldErrors errors;
    DecodeAndValidateGpuNodePool(SeedWith({{"nodes", "-3"}}), FieldPath(), &pool, &errors);
    EXPECT_THAT(Paths(errors), ElementsAre("spec.nodes"));
  }
  {
    // A decode error stops validation: no follow-up layout error against a guessed GPU model.
    GpuNodePool pool;
    FieldErrors errors;
    DecodeAndValidateGpuNodePool(
        SeedWith({{"gpu", "B200"}, {"migProfiles", {"MIG4g", "MIG4g"}}}), FieldPath(), &pool,
        &errors);
    EXPECT_THAT(Paths(errors), ElementsAre("spec.gpu"));
  }
}

TEST(IsDnsSubdomainTest, KubernetesObjectNames) {
  const std::string longest(253, 'a');
  for (const char* ok : {"a", "a100-mig", "a100.mig-1", "0"}) {
    EXPECT_TRUE(IsDnsSubdomain(ok)) << ok;
  }
  EXPECT_TRUE(IsDnsSubdomain(longest));
  for (const char* bad : {"", "A100", "a_b", "-a", "a-", "a..b", ".a", "a.", "a/b"}) {
    EXPECT_FALSE(IsDnsSubdomain(bad)) << bad;
  }
  EXPECT_FALSE(IsDnsSubdomain(std::string(254, 'a')));
}

}  // namespace
}  // namespace gangkeeper::model
