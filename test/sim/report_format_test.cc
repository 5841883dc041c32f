// The simulate reports as people read them: durations and numbers rounded,
// time axes in s/min/h ending at the makespan, value axes with round steps,
// the verdict of a comparison, the comparison's JSON shape and its HTML
// (both runs, one y-scale per resource, nothing in scientific notation).
#include "src/sim/report_format.h"

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gangkeeper/sim/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(HumanDurationTest, RoundsToTheUnitAPersonWouldSay) {
  EXPECT_EQ(HumanDuration(0), "0");
  EXPECT_EQ(HumanDuration(0.4), "0");
  EXPECT_EQ(HumanDuration(250), "250 ms");
  EXPECT_EQ(HumanDuration(1000), "1 s");
  EXPECT_EQ(HumanDuration(4500), "4.5 s");
  EXPECT_EQ(HumanDuration(20'000), "20 s");
  EXPECT_EQ(HumanDuration(59'400), "59 s");
  EXPECT_EQ(HumanDuration(450'000), "7.5 min");
  EXPECT_EQ(HumanDuration(72'000), "1.2 min");
  EXPECT_EQ(HumanDuration(1'050'000), "18 min");
  EXPECT_EQ(HumanDuration(35 * 60'000), "35 min");
  EXPECT_EQ(HumanDuration(3'600'000), "1 h");
  EXPECT_EQ(HumanDuration(30'000'000), "8 h 20 min");
  EXPECT_EQ(HumanDuration(32'100'000), "8 h 55 min");
  EXPECT_EQ(HumanDuration(50 * 3'600'000.0), "50 h");
  EXPECT_EQ(HumanDuration(-2'100'000), "-35 min");
}

TEST(HumanDurationTest, NeverPrintsMillisecondDigitsOrExponents) {
  // Generative: any duration from 1 ms to 100 days reads as at most three
  // digits and a unit (or hours and minutes), never "30000.000 s" or "3e+04".
  std::mt19937_64 rng(27);
  const std::regex shape(R"(^(\d{1,3}( ms| s| min| h)|\d\.\d (s|min)|\d{1,2} h \d{1,2} min|\d+ h)$)");
  for (int i = 0; i < 5000; ++i) {
    const double ms = std::exp(std::uniform_real_distribution<double>(0, std::log(8.64e9))(rng));
    const std::string s = HumanDuration(ms);
    EXPECT_TRUE(std::regex_match(s, shape)) << ms << " ms -> " << s;
  }
}

TEST(RoundedNumberTest, ThreeSignificantDigitsWithoutExponent) {
  EXPECT_EQ(RoundedNumber(0), "0");
  EXPECT_EQ(RoundedNumber(0.125), "0.125");
  EXPECT_EQ(RoundedNumber(0.1234), "0.123");
  EXPECT_EQ(RoundedNumber(7.5), "7.5");
  EXPECT_EQ(RoundedNumber(7.0), "7");
  EXPECT_EQ(RoundedNumber(42.04), "42");
  EXPECT_EQ(RoundedNumber(99.96), "100");
  EXPECT_EQ(RoundedNumber(1234.4), "1,234");
  EXPECT_EQ(RoundedNumber(30000), "30,000");
  EXPECT_EQ(RoundedNumber(1.5e9), "1,500,000,000");
  EXPECT_EQ(RoundedNumber(-2.5), "-2.5");
  EXPECT_EQ(RoundedNumber(1e-9), "0");
  EXPECT_EQ(RoundedPercent(0.7012), "70.1%");
  EXPECT_EQ(RoundedPercent(1.0), "100%");
  EXPECT_EQ(RoundedPercent(0), "0%");
}

std::vector<std::string> Labels(const std::vector<Tick>& ticks) {
  std::vector<std::string> out;
  for (const Tick& t : ticks) out.push_back(t.label);
  return out;
}

TEST(TimeAxisTest, UnitFollowsTheMakespanAndTheAxisEndsThere) {
  const TimeAxis day = ChooseTimeAxis(32'100'000);  // 8 h 55 min
  EXPECT_EQ(day.unit, "h");
  EXPECT_EQ(day.end_ms, 32'100'000);
  EXPECT_THAT(Labels(day.ticks), ElementsAre("0", "2 h", "4 h", "6 h", "8 h"));
  const TimeAxis hour = ChooseTimeAxis(50 * 60'000);
  EXPECT_EQ(hour.unit, "min");
  EXPECT_THAT(Labels(hour.ticks), ElementsAre("0", "10 min", "20 min", "30 min", "40 min", "50 min"));
  const TimeAxis kueue = ChooseTimeAxis(76'800);  // Kueue's baseline: 76.8 s
  EXPECT_EQ(kueue.unit, "s");
  EXPECT_THAT(Labels(kueue.ticks), ElementsAre("0", "10 s", "20 s", "30 s", "40 s", "50 s", "60 s", "70 s"));
  const TimeAxis short_run = ChooseTimeAxis(17'000);
  EXPECT_THAT(Labels(short_run.ticks), ElementsAre("0", "5 s", "10 s", "15 s"));
  const TimeAxis tiny = ChooseTimeAxis(350);
  EXPECT_THAT(Labels(tiny.ticks), ElementsAre("0", "0.05 s", "0.1 s", "0.15 s", "0.2 s", "0.25 s", "0.3 s", "0.35 s"));
  EXPECT_EQ(ChooseTimeAxis(0).end_ms, 1000);  // nothing ran: one second, not a division by zero
}

TEST(TimeAxisTest, EveryAxisHasRoundTicksInsideIt) {
  std::mt19937_64 rng(5);
  const std::regex label(R"(^(0|\d{1,3}(\.\d{1,3})? (s|min|h)|\d{1,3}(,\d{3})+ h)$)");
  for (int i = 0; i < 2000; ++i) {
    const double end = std::exp(std::uniform_real_distribution<double>(std::log(10.0), std::log(1e10))(rng));
    const TimeAxis axis = ChooseTimeAxis(end);
    ASSERT_GE(axis.ticks.size(), 2u) << end;
    EXPECT_LE(axis.ticks.size(), 9u) << end;
    EXPECT_EQ(axis.end_ms, end);
    EXPECT_LE(axis.ticks.back().value, end * (1 + 1e-9));
    // The last tick is within two steps of the end: the axis is not padded.
    const double step = axis.ticks[1].value;
    EXPECT_GT(axis.ticks.back().value + step, end * (1 - 1e-9)) << end;
    for (const Tick& t : axis.ticks) EXPECT_TRUE(std::regex_match(t.label, label)) << end << ": " << t.label;
  }
}

TEST(ValueAxisTest, RoundMaximumAndSteps) {
  const ValueAxis gpus = ChooseValueAxis(6, false);
  EXPECT_EQ(gpus.max, 6);
  EXPECT_THAT(Labels(gpus.ticks), ElementsAre("0", "2", "4", "6"));
  const ValueAxis share = ChooseValueAxis(1.0, true);
  EXPECT_THAT(Labels(share.ticks), ElementsAre("0%", "20%", "40%", "60%", "80%", "100%"));
  const ValueAxis cpu = ChooseValueAxis(117, false);
  EXPECT_EQ(cpu.max, 125);
  EXPECT_THAT(Labels(cpu.ticks), ElementsAre("0", "25", "50", "75", "100", "125"));
  EXPECT_EQ(ChooseValueAxis(0, false).max, 1);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const double v = std::exp(std::uniform_real_distribution<double>(std::log(1e-3), std::log(1e7))(rng));
    const ValueAxis axis = ChooseValueAxis(v, false);
    EXPECT_GE(axis.max, v * (1 - 1e-9));
    EXPECT_LE(axis.max, v * 2.5 + 1e-9) << v;
    EXPECT_GE(axis.ticks.size(), 2u);
    EXPECT_LE(axis.ticks.size(), 6u);
    for (const Tick& t : axis.ticks) EXPECT_THAT(t.label, Not(HasSubstr("e"))) << v;
  }
  const AmountScale mem = ChooseAmountScale("memory", 256.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(mem.suffix, "Gi");
  EXPECT_EQ(ChooseAmountScale("memory", 512.0 * 1024 * 1024).suffix, "Mi");
  EXPECT_EQ(ChooseAmountScale("nvidia.com/gpu", 8).suffix, "");
}

// A report with one ClusterQueue holding GPUs and the given classes' mean waits.
Report MakeReport(const std::string& policies, int64_t makespan_ms,
                  const std::vector<std::pair<std::string, double>>& mean_waits_ms, int64_t preemptions,
                  double gpu_utilization, const std::vector<double>& series) {
  Report r;
  r.workload_file = "trace.csv";
  r.trace_format = "csv";
  r.policies = policies;
  r.workloads = 10;
  r.finished = 10;
  r.end_ms = makespan_ms;
  r.makespan_ms = makespan_ms;
  r.preemptions = preemptions;
  r.lost_work_ms = preemptions * 300'000;
  r.utilization["nvidia.com/gpu"] = gpu_utilization;
  for (const auto& [name, mean] : mean_waits_ms) {
    ClassFigures& c = r.classes[name];
    c.workloads = 5;
    c.admitted = 5;
    c.finished = 5;
    c.time_to_admission.count = 5;
    c.time_to_admission.mean_ms = mean;
    c.time_to_admission.p90_ms = static_cast<int64_t>(mean * 2);
    c.time_to_admission.max_ms = static_cast<int64_t>(mean * 3);
    c.waits_ms = {0, 0, static_cast<int64_t>(mean), static_cast<int64_t>(mean * 2), static_cast<int64_t>(mean * 3)};
  }
  r.interval_ms = makespan_ms / static_cast<int64_t>(series.size());
  r.buckets = static_cast<int64_t>(series.size());
  ClusterQueueFigures& q = r.cluster_queues["team-a-gpu"];
  q.cohort = "gpu-shared";
  ResourceFigures& gpu = q.resources[broker::FlavorResource{"nvidia-gpu", "nvidia.com/gpu"}];
  gpu.nominal = quantity::Quantity::FromUnits(4);
  gpu.peak = quantity::Quantity::FromUnits(4);
  gpu.utilization = gpu_utilization;
  gpu.series = series;
  return r;
}

Comparison LendGpus() {
  return Comparison{
      MakeReport("before/", 32'100'000, {{"team-a", 450'000}, {"team-b", 0}}, 0, 0.701, {0.5, 1.0, 0.75}),
      MakeReport("after/", 30'000'000, {{"team-a", 72'000}, {"team-b", 20'000}}, 2, 0.752, {0.5, 1.5, 1.25})};
}

TEST(VerdictTest, SaysWhatChangesForWhomInWords) {
  const Comparison c = LendGpus();
  EXPECT_THAT(Verdict(c.before, c.after),
              ElementsAre("team-a's mean wait drops from 7.5 min to 1.2 min; team-b's rises from 0 to 20 s.",
                          "The last workload finishes 35 min earlier (8 h 20 min instead of 8 h 55 min).",
                          "Preemptions rise from 0 to 2 (work thrown away: 0 before, 10 min after).",
                          "Use of nominal quota: nvidia.com/gpu rises from 70.1% to 75.2%."));
}

TEST(VerdictTest, ChangesTooSmallToShowStayTheSame) {
  Report before = MakeReport("a", 60'000, {{"x", 450'000}}, 0, 0.5, {0.5});
  Report after = MakeReport("b", 60'010, {{"x", 451'000}}, 0, 0.50001, {0.5});
  after.unadmitted_count = 3;
  EXPECT_THAT(Verdict(before, after),
              ElementsAre("x's mean wait stays at 7.5 min.", "The last workload finishes at the same time (1 min).",
                          "No preemptions in either run.", "Use of nominal quota: nvidia.com/gpu stays at 50%.",
                          "Never admitted: 0 before, 3 after."));
}

TEST(VerdictTest, ManyClassesShowTheLargestChanges) {
  std::vector<std::pair<std::string, double>> b, a;
  for (int i = 0; i < 10; ++i) {
    b.emplace_back("c" + std::to_string(i), 60'000);
    a.emplace_back("c" + std::to_string(i), 60'000 + i * 60'000);
  }
  const std::vector<std::string> v = Verdict(MakeReport("a", 1000, b, 0, 0, {0}), MakeReport("b", 1000, a, 0, 0, {0}));
  ASSERT_FALSE(v.empty());
  EXPECT_THAT(v[0], HasSubstr("c4's mean wait rises from 1 min to 5 min"));
  EXPECT_THAT(v[0], HasSubstr("c9's rises from 1 min to 10 min"));
  EXPECT_THAT(v[0], Not(HasSubstr("c3's")));
  EXPECT_THAT(v[0], HasSubstr("(4 more classes change less; see the table)"));
}

TEST(VerdictTest, UnfinishedRunsSayHowManyFinished) {
  Report before = MakeReport("a", 3'600'000, {{"x", 0}}, 0, 0.5, {0.5});
  Report after = before;
  after.makespan_ms.reset();
  after.finished = 7;
  after.end_ms = 7'200'000;
  EXPECT_THAT(Verdict(before, after)[1], "Workloads finished: all 10 by 1 h before, 7 of 10 by 2 h after.");
}

TEST(ComparisonJsonTest, BothRunsTheVerdictAndTheChanges) {
  const nlohmann::json j = nlohmann::json::parse(ComparisonJson(LendGpus()), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["format"], "gangkeeper-simulate-compare/v1");
  ASSERT_TRUE(j["verdict"].is_array());
  EXPECT_EQ(j["verdict"][0], "team-a's mean wait drops from 7.5 min to 1.2 min; team-b's rises from 0 to 20 s.");
  // Each run is a whole single-run report.
  for (const char* run : {"before", "after"}) {
    ASSERT_TRUE(j.contains(run)) << run;
    EXPECT_EQ(j[run]["format"], "gangkeeper-simulate/v1");
    for (const char* key : {"input", "model", "summary", "lower_bounds", "classes", "cluster_queues", "unadmitted",
                            "timeseries"}) {
      EXPECT_TRUE(j[run].contains(key)) << run << "." << key;
    }
  }
  EXPECT_EQ(j["before"]["input"]["policies"], "before/");
  EXPECT_EQ(j["after"]["input"]["policies"], "after/");
  const nlohmann::json& ch = j["changes"];
  EXPECT_EQ(ch["makespan_s"], nlohmann::json({{"before", 32100.0}, {"after", 30000.0}, {"change", -2100.0}}));
  EXPECT_EQ(ch["preemptions"]["change"], 2);
  EXPECT_EQ(ch["lost_work_s"]["after"], 600.0);
  EXPECT_EQ(ch["utilization"]["nvidia.com/gpu"]["change"], 0.051);
  EXPECT_EQ(ch["mean_time_to_admission_s"]["team-a"],
            nlohmann::json({{"before", 450.0}, {"after", 72.0}, {"change", -378.0}}));
  EXPECT_EQ(ch["p90_time_to_admission_s"]["team-b"]["after"], 40.0);
  // Keys in a fixed order: the same comparison gives the same bytes.
  EXPECT_EQ(ComparisonJson(LendGpus()), ComparisonJson(LendGpus()));
}

TEST(ComparisonHtmlTest, SideBySideOnOneScaleWithRoundedNumbers) {
  const std::string html = ComparisonHtml(LendGpus());
  EXPECT_THAT(html, HasSubstr("team-a&#39;s mean wait drops from 7.5 min to 1.2 min"));
  EXPECT_THAT(html, HasSubstr("before: team-a-gpu, nominal 4"));
  EXPECT_THAT(html, HasSubstr("after: team-a-gpu, nominal 4"));
  // Charts sized for a 1,400 px page, two to a row.
  EXPECT_THAT(html, HasSubstr("<svg class=\"chart\" width=\"660\" height=\"230\""));
  // The time axis in hours ends at the longer makespan; no exponents, no
  // millisecond digits in what a reader sees.
  EXPECT_THAT(html, HasSubstr(">8 h<"));
  EXPECT_THAT(html, HasSubstr(">8 h 55 min<"));
  const std::string text = std::regex_replace(html, std::regex("<[^>]*>"), " ");
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(\d\.\d{3}|\de[+-]\d)"))) << text;
  // One y-scale for the resource in both runs: after peaks at 6 GPUs (1.5 x
  // 4), so both charts run to 6.
  const std::regex y_top(R"(class="ya">6<)");
  EXPECT_EQ(std::distance(std::sregex_iterator(html.begin(), html.end(), y_top), std::sregex_iterator()), 2);
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
}

TEST(ReportHtmlTest, OneRunUsesTheSameAxesAndRounding) {
  const std::string html = ReportHtml(LendGpus().before);
  EXPECT_THAT(html, HasSubstr("team-a-gpu, nominal 4"));
  EXPECT_THAT(html, HasSubstr(">8 h 55 min<"));
  EXPECT_THAT(html, HasSubstr(">7.5 min<"));
  EXPECT_THAT(html, Not(HasSubstr("32100.000")));
  EXPECT_THAT(html, HasSubstr("width=\"1332\""));  // the distribution spans the page
}

TEST(ReportSummaryTest, RoundedForATerminal) {
  const Comparison c = LendGpus();
  const std::string one = ReportSummary(c.before);
  EXPECT_THAT(one, HasSubstr("makespan        8 h 55 min\n"));
  EXPECT_THAT(one, HasSubstr("nvidia.com/gpu 70.1% of nominal quota"));
  const std::string both = ComparisonSummary(c);
  EXPECT_THAT(both, HasSubstr("  before: before/\n  after:  after/\n"));
  EXPECT_THAT(both, HasSubstr("8 h 55 min"));
  EXPECT_THAT(both, HasSubstr("verdict\n  team-a's mean wait drops from 7.5 min to 1.2 min"));
}

}  // namespace
}  // namespace gangkeeper::sim
