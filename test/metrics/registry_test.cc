// gangkeeper tests: metric families, registration rules and the Prometheus
// text exposition (golden strings), plus concurrent updates.
#include "gangkeeper/metrics/registry.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "gangkeeper/base/check.h"
#include "src/metrics/exposition.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::metrics {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(RegistryTest, ContentTypeIsTextFormat004) {
  EXPECT_EQ(kPrometheusContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(RegistryTest, EmptyRegistryExposesNothing) {
  Registry registry;
  EXPECT_EQ(registry.ExposePrometheus(), "");
}

TEST(RegistryTest, UnlabeledCounterExposesZeroBeforeFirstUse) {
  Registry registry;
  absl::StatusOr<CounterFamily*> things = registry.AddCounter("gangkeeper_things_total", "Things done.");
  ASSERT_THAT(things, IsOk());
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP gangkeeper_things_total Things done.\n"
            "# TYPE gangkeeper_things_total counter\n"
            "gangkeeper_things_total 0\n");

  (*things)->WithLabels().Increment();
  (*things)->WithLabels().Increment(41);
  EXPECT_EQ((*things)->WithLabels().value(), 42u);
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP gangkeeper_things_total Things done.\n"
            "# TYPE gangkeeper_things_total counter\n"
            "gangkeeper_things_total 42\n");
}

TEST(RegistryTest, CounterPrintsFullUint64WithoutExponent) {
  Registry registry;
  absl::StatusOr<CounterFamily*> big = registry.AddCounter("big_total", "Big.");
  ASSERT_THAT(big, IsOk());
  (*big)->WithLabels().Increment(std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(registry.ExposePrometheus(), HasSubstr("\nbig_total 18446744073709551615\n"));
}

TEST(RegistryTest, LabeledCounterChildrenSortedByLabelValues) {
  Registry registry;
  absl::StatusOr<CounterFamily*> requests = registry.AddCounter(
      "gangkeeper_http_requests_total", "HTTP requests served.", {"listener", "path", "code"});
  ASSERT_THAT(requests, IsOk());
  // Created out of order; exposed in label-value order.
  (*requests)->WithLabels({"webhook", "/validate", "200"}).Increment(2);
  (*requests)->WithLabels({"api", "/metrics", "200"}).Increment();
  (*requests)->WithLabels({"webhook", "/mutate", "500"}).Increment(3);
  (*requests)->WithLabels({"webhook", "/mutate", "200"}).Increment(7);

  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP gangkeeper_http_requests_total HTTP requests served.\n"
            "# TYPE gangkeeper_http_requests_total counter\n"
            "gangkeeper_http_requests_total{listener=\"api\",path=\"/metrics\",code=\"200\"} 1\n"
            "gangkeeper_http_requests_total{listener=\"webhook\",path=\"/mutate\",code=\"200\"} 7\n"
            "gangkeeper_http_requests_total{listener=\"webhook\",path=\"/mutate\",code=\"500\"} 3\n"
            "gangkeeper_http_requests_total{listener=\"webhook\",path=\"/validate\",code=\"200\"} 2\n");
}

TEST(RegistryTest, LabelValueOrderIsPerLabelNotPerJoinedString) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family = registry.AddCounter("pairs_total", "Pairs.", {"a", "b"});
  ASSERT_THAT(family, IsOk());
  // Joined with a separator these would sort the other way round.
  (*family)->WithLabels({"x-y", "1"}).Increment();
  (*family)->WithLabels({"x", "z"}).Increment();
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP pairs_total Pairs.\n"
            "# TYPE pairs_total counter\n"
            "pairs_total{a=\"x\",b=\"z\"} 1\n"
            "pairs_total{a=\"x-y\",b=\"1\"} 1\n");
}

TEST(RegistryTest, LabeledFamilyWithoutChildrenShowsOnlyHeader) {
  Registry registry;
  ASSERT_THAT(registry.AddGauge("queue_length", "Pending items.", {"queue"}), IsOk());
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP queue_length Pending items.\n"
            "# TYPE queue_length gauge\n");
}

TEST(RegistryTest, AllWithLabelsOverloadsReachTheSameChild) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family = registry.AddCounter("c_total", "C.", {"a", "b"});
  ASSERT_THAT(family, IsOk());
  Counter& from_list = (*family)->WithLabels({"1", "2"});
  std::vector<std::string> strings = {"1", "2"};
  std::vector<absl::string_view> views = {"1", "2"};
  EXPECT_EQ(&(*family)->WithLabels(strings), &from_list);
  EXPECT_EQ(&(*family)->WithLabels(views), &from_list);
  EXPECT_NE(&(*family)->WithLabels({"2", "1"}), &from_list);
}

TEST(RegistryTest, GaugeSetAddSubAndFormatting) {
  Registry registry;
  absl::StatusOr<GaugeFamily*> temps = registry.AddGauge("temperature_celsius", "Temperature.", {"room"});
  ASSERT_THAT(temps, IsOk());
  Gauge& a = (*temps)->WithLabels({"a"});
  a.Set(10);
  a.Add(2.5);
  a.Sub(14);
  EXPECT_EQ(a.value(), -1.5);
  Gauge& b = (*temps)->WithLabels({"b"});
  b.Add(0.1);
  b.Add(0.2);
  (*temps)->WithLabels({"c"}).Set(kInf);
  (*temps)->WithLabels({"d"}).Set(-kInf);
  (*temps)->WithLabels({"e"}).Set(kNaN);
  (*temps)->WithLabels({"f"}).Set(1e-5);
  (*temps)->WithLabels({"g"}).Set(3e20);

  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP temperature_celsius Temperature.\n"
            "# TYPE temperature_celsius gauge\n"
            "temperature_celsius{room=\"a\"} -1.5\n"
            "temperature_celsius{room=\"b\"} 0.30000000000000004\n"
            "temperature_celsius{room=\"c\"} +Inf\n"
            "temperature_celsius{room=\"d\"} -Inf\n"
            "temperature_celsius{room=\"e\"} NaN\n"
            "temperature_celsius{room=\"f\"} 1e-05\n"
            "temperature_celsius{room=\"g\"} 3e+20\n");
}

TEST(RegistryTest, HistogramWithLabelsCumulativeBucketsGolden) {
  Registry registry;
  absl::StatusOr<HistogramFamily*> latency =
      registry.AddHistogram("gangkeeper_http_request_duration_seconds", "Request latency.",
                            {"listener", "path"}, {0.005, 0.1, 1});
  ASSERT_THAT(latency, IsOk());
  Histogram& mutate = (*latency)->WithLabels({"webhook", "/mutate"});
  mutate.Observe(0.001);  // le=0.005
  mutate.Observe(0.005);  // on the bound: le=0.005 (inclusive)
  mutate.Observe(0.25);   // le=1
  mutate.Observe(3);      // +Inf only
  Histogram& metrics = (*latency)->WithLabels({"api", "/metrics"});
  metrics.Observe(0.5);

  EXPECT_EQ(mutate.count(), 4u);
  EXPECT_DOUBLE_EQ(mutate.sum(), 3.256);
  EXPECT_THAT(mutate.CumulativeCounts(), ElementsAre(2, 2, 3, 4));

  std::string text = registry.ExposePrometheus();
  std::string mutate_sum = FormatValue(0.001 + 0.005 + 0.25 + 3);
  EXPECT_EQ(text, absl::StrCat(
                      "# HELP gangkeeper_http_request_duration_seconds Request latency.\n"
                      "# TYPE gangkeeper_http_request_duration_seconds histogram\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"api\",path=\"/metrics\",le=\"0.005\"} 0\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"api\",path=\"/metrics\",le=\"0.1\"} 0\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"api\",path=\"/metrics\",le=\"1\"} 1\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"api\",path=\"/metrics\",le=\"+Inf\"} 1\n"
                      "gangkeeper_http_request_duration_seconds_sum{listener=\"api\",path=\"/metrics\"} 0.5\n"
                      "gangkeeper_http_request_duration_seconds_count{listener=\"api\",path=\"/metrics\"} 1\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"webhook\",path=\"/mutate\",le=\"0.005\"} 2\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"webhook\",path=\"/mutate\",le=\"0.1\"} 2\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"webhook\",path=\"/mutate\",le=\"1\"} 3\n"
                      "gangkeeper_http_request_duration_seconds_bucket{listener=\"webhook\",path=\"/mutate\",le=\"+Inf\"} 4\n"
                      "gangkeeper_http_request_duration_seconds_sum{listener=\"webhook\",path=\"/mutate\"} ",
                      mutate_sum,
                      "\n"
                      "gangkeeper_http_request_duration_seconds_count{listener=\"webhook\",path=\"/mutate\"} 4\n"));
}

TEST(RegistryTest, UnlabeledHistogramExposesZeroBuckets) {
  Registry registry;
  ASSERT_THAT(registry.AddHistogram("cycle_seconds", "Cycle time.", {}, {0.25, 2.5}), IsOk());
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP cycle_seconds Cycle time.\n"
            "# TYPE cycle_seconds histogram\n"
            "cycle_seconds_bucket{le=\"0.25\"} 0\n"
            "cycle_seconds_bucket{le=\"2.5\"} 0\n"
            "cycle_seconds_bucket{le=\"+Inf\"} 0\n"
            "cycle_seconds_sum 0\n"
            "cycle_seconds_count 0\n");
}

TEST(RegistryTest, HistogramNanGoesToInfBucketAndNegativeToFirst) {
  Registry registry;
  absl::StatusOr<HistogramFamily*> h = registry.AddHistogram("h", "H.", {}, {0, 1});
  ASSERT_THAT(h, IsOk());
  Histogram& child = (*h)->WithLabels();
  child.Observe(-5);
  EXPECT_THAT(child.CumulativeCounts(), ElementsAre(1, 1, 1));
  child.Observe(kNaN);
  EXPECT_THAT(child.CumulativeCounts(), ElementsAre(1, 1, 2));
  EXPECT_TRUE(std::isnan(child.sum()));
  EXPECT_THAT(registry.ExposePrometheus(), HasSubstr("\nh_sum NaN\nh_count 2\n"));
}

TEST(RegistryTest, FamiliesSortedByNameAcrossTypes) {
  Registry registry;
  ASSERT_THAT(registry.AddGauge("zeta", "Z."), IsOk());
  ASSERT_THAT(registry.AddHistogram("mu", "M.", {}, {1}), IsOk());
  ASSERT_THAT(registry.AddCounter("alpha_total", "A."), IsOk());
  ASSERT_THAT(registry.AddCallbackGauge("beta", "B.", {}, [] { return std::vector<Sample>{{{}, 2}}; }), IsOk());
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP alpha_total A.\n"
            "# TYPE alpha_total counter\n"
            "alpha_total 0\n"
            "# HELP beta B.\n"
            "# TYPE beta gauge\n"
            "beta 2\n"
            "# HELP mu M.\n"
            "# TYPE mu histogram\n"
            "mu_bucket{le=\"1\"} 0\n"
            "mu_bucket{le=\"+Inf\"} 0\n"
            "mu_sum 0\n"
            "mu_count 0\n"
            "# HELP zeta Z.\n"
            "# TYPE zeta gauge\n"
            "zeta 0\n");
}

TEST(RegistryTest, EscapesHelpAndLabelValues) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family =
      registry.AddCounter("escaped_total", "Line one\nback\\slash \"quoted\" stays.", {"value"});
  ASSERT_THAT(family, IsOk());
  (*family)->WithLabels({"a\\b\"c\nd"}).Increment();
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP escaped_total Line one\\nback\\\\slash \"quoted\" stays.\n"
            "# TYPE escaped_total counter\n"
            "escaped_total{value=\"a\\\\b\\\"c\\nd\"} 1\n");
}

TEST(ExpositionTest, FormatValue) {
  struct Case {
    double value;
    const char* want;
  };
  const Case cases[] = {
      {0, "0"},
      {1, "1"},
      {-3, "-3"},
      {0.25, "0.25"},
      {0.1, "0.1"},
      {-0.0, "-0"},
      {1e-5, "1e-05"},
      {0.0001, "0.0001"},
      {0.00025, "0.00025"},
      {1.5e-7, "1.5e-07"},
      {100000, "100000"},
      {999999.5, "999999.5"},
      {1e6, "1e+06"},
      {1234567, "1.234567e+06"},
      {123456789012, "1.23456789012e+11"},
      {1e21, "1e+21"},
      {1e100, "1e+100"},
      {5e-324, "5e-324"},
      {std::numeric_limits<double>::max(), "1.7976931348623157e+308"},
      {kInf, "+Inf"},
      {-kInf, "-Inf"},
      {kNaN, "NaN"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    EXPECT_EQ(FormatValue(c.value), c.want);
  }
}

TEST(ExpositionTest, Escaping) {
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(RegistryTest, BucketHelpers) {
  EXPECT_THAT(LatencyBuckets(), ElementsAre(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1, 0.25, 0.5, 1, 2.5, 5, 10));
  EXPECT_THAT(ExponentialBuckets(1, 2, 4), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(ExponentialBuckets(0.5, 10, 3), ElementsAre(0.5, 5, 50));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 4).empty());
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());

  Registry registry;
  EXPECT_THAT(registry.AddHistogram("latency_seconds", "L.", {}, LatencyBuckets()), IsOk());
  // `le` values are spelled like the Go client's, so series line up in
  // dashboards shared with other exporters.
  const std::string text = registry.ExposePrometheus();
  EXPECT_THAT(text, HasSubstr("latency_seconds_bucket{le=\"0.0001\"} 0\n"
                              "latency_seconds_bucket{le=\"0.00025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("latency_seconds_bucket{le=\"10\"} 0\n"
                              "latency_seconds_bucket{le=\"+Inf\"} 0\n"));
  EXPECT_THAT(registry.AddHistogram("bad_seconds", "B.", {}, ExponentialBuckets(1, 0.5, 3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------
// Registration rules

TEST(RegistryTest, MetricNameRules) {
  struct Case {
    const char* name;
    bool valid;
  };
  const Case cases[] = {
      {"gangkeeper_http_requests_total", true},
      {"_leading_underscore", true},
      {":colon:ok", true},
      {"a1_B2:c3", true},
      {"", false},
      {"1starts_with_digit", false},
      {"has-dash", false},
      {"has space", false},
      {"has.dot", false},
      {"caf\xc3\xa9", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Registry registry;
    if (c.valid) {
      EXPECT_THAT(registry.AddCounter(c.name, "h"), IsOk());
      EXPECT_THAT(registry.AddCallbackGauge(absl::StrCat(c.name, "_cb"), "h", {},
                                            [] { return std::vector<Sample>(); }),
                  IsOk());
    } else {
      EXPECT_THAT(registry.AddCounter(c.name, "h"), StatusIs(absl::StatusCode::kInvalidArgument, "metric name"));
      EXPECT_THAT(registry.AddGauge(c.name, "h"), StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(registry.AddHistogram(c.name, "h", {}, {1}), StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(registry.AddCallbackCounter(c.name, "h", {}, [] { return std::vector<Sample>(); }),
                  StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_EQ(registry.ExposePrometheus(), "");
    }
  }
}

TEST(RegistryTest, LabelNameRules) {
  struct Case {
    const char* name;
    std::vector<std::string> labels;
    bool valid_for_counter;
    bool valid_for_histogram;
  };
  const Case cases[] = {
      {"plain labels are fine", {"listener", "path", "code"}, true, true},
      {"single underscore prefix is fine", {"_private"}, true, true},
      {"le is fine outside histograms", {"le"}, true, false},
      {"empty label name", {""}, false, false},
      {"leading digit", {"1a"}, false, false},
      {"dash", {"a-b"}, false, false},
      {"colon is not allowed in label names", {"a:b"}, false, false},
      {"double underscore is reserved", {"__name"}, false, false},
      {"repeated label", {"a", "b", "a"}, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Registry registry;
    absl::StatusOr<CounterFamily*> counter = registry.AddCounter("c_total", "C.", c.labels);
    absl::StatusOr<HistogramFamily*> histogram = registry.AddHistogram("h_seconds", "H.", c.labels, {1});
    absl::Status callback = registry.AddCallbackGauge("g", "G.", c.labels, [] { return std::vector<Sample>(); });
    if (c.valid_for_counter) {
      EXPECT_THAT(counter, IsOk());
      EXPECT_THAT(callback, IsOk());
    } else {
      EXPECT_THAT(counter, StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(callback, StatusIs(absl::StatusCode::kInvalidArgument));
    }
    if (c.valid_for_histogram) {
      EXPECT_THAT(histogram, IsOk());
    } else {
      EXPECT_THAT(histogram, StatusIs(absl::StatusCode::kInvalidArgument));
    }
  }
}

TEST(RegistryTest, BucketBoundRules) {
  struct Case {
    const char* name;
    std::vector<double> bounds;
    bool valid;
  };
  const Case cases[] = {
      {"one bound", {1}, true},
      {"negative bounds are fine", {-1, 0, 1}, true},
      {"empty", {}, false},
      {"decreasing", {1, 0.5}, false},
      {"repeated", {1, 1}, false},
      {"explicit +Inf (it is implicit)", {1, kInf}, false},
      {"NaN", {1, kNaN}, false},
      {"-Inf", {-kInf, 1}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Registry registry;
    if (c.valid) {
      EXPECT_THAT(registry.AddHistogram("h_seconds", "H.", {}, c.bounds), IsOk());
    } else {
      EXPECT_THAT(registry.AddHistogram("h_seconds", "H.", {}, c.bounds),
                  StatusIs(absl::StatusCode::kInvalidArgument, "h_seconds"));
    }
  }
}

TEST(RegistryTest, SameDefinitionReturnsExistingFamily) {
  Registry registry;
  absl::StatusOr<CounterFamily*> first = registry.AddCounter("c_total", "C.", {"a"});
  absl::StatusOr<CounterFamily*> second = registry.AddCounter("c_total", "C.", {"a"});
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(*first, *second);

  absl::StatusOr<HistogramFamily*> h1 = registry.AddHistogram("h_seconds", "H.", {"a"}, {1, 2});
  absl::StatusOr<HistogramFamily*> h2 = registry.AddHistogram("h_seconds", "H.", {"a"}, {1, 2});
  ASSERT_THAT(h1, IsOk());
  ASSERT_THAT(h2, IsOk());
  EXPECT_EQ(*h1, *h2);

  absl::StatusOr<GaugeFamily*> g1 = registry.AddGauge("g", "G.");
  absl::StatusOr<GaugeFamily*> g2 = registry.AddGauge("g", "G.");
  ASSERT_THAT(g1, IsOk());
  ASSERT_THAT(g2, IsOk());
  EXPECT_EQ(*g1, *g2);
  (*g1)->WithLabels().Set(4);
  EXPECT_EQ((*g2)->WithLabels().value(), 4);
}

TEST(RegistryTest, ConflictingDefinitionsAreRejected) {
  Registry registry;
  ASSERT_THAT(registry.AddCounter("c_total", "C.", {"a"}), IsOk());
  ASSERT_THAT(registry.AddHistogram("h_seconds", "H.", {"a"}, {1, 2}), IsOk());
  ASSERT_THAT(registry.AddCallbackGauge("cb", "CB.", {}, [] { return std::vector<Sample>(); }), IsOk());
  ASSERT_THAT(registry.AddCounter("x_sum", "X.", {}), IsOk());
  const std::string before = registry.ExposePrometheus();

  const absl::StatusCode kExists = absl::StatusCode::kAlreadyExists;
  EXPECT_THAT(registry.AddGauge("c_total", "C.", {"a"}), StatusIs(kExists, "c_total"));
  EXPECT_THAT(registry.AddCounter("c_total", "C.", {"b"}), StatusIs(kExists));
  EXPECT_THAT(registry.AddCounter("c_total", "C.", {"a", "b"}), StatusIs(kExists));
  EXPECT_THAT(registry.AddCounter("c_total", "Other help.", {"a"}), StatusIs(kExists));
  EXPECT_THAT(registry.AddHistogram("c_total", "C.", {"a"}, {1}), StatusIs(kExists));
  EXPECT_THAT(registry.AddCallbackCounter("c_total", "C.", {"a"}, [] { return std::vector<Sample>(); }),
              StatusIs(kExists));
  EXPECT_THAT(registry.AddHistogram("h_seconds", "H.", {"a"}, {1, 3}), StatusIs(kExists));
  EXPECT_THAT(registry.AddHistogram("h_seconds", "H.", {"a"}, {1}), StatusIs(kExists));
  // A callback family is never "the same definition": neither a second
  // callback nor a plain gauge may take its name.
  EXPECT_THAT(registry.AddCallbackGauge("cb", "CB.", {}, [] { return std::vector<Sample>(); }),
              StatusIs(kExists));
  EXPECT_THAT(registry.AddGauge("cb", "CB."), StatusIs(kExists));
  // Histogram series names.
  EXPECT_THAT(registry.AddCounter("h_seconds_count", "N."), StatusIs(kExists, "h_seconds"));
  EXPECT_THAT(registry.AddGauge("h_seconds_bucket", "N."), StatusIs(kExists));
  EXPECT_THAT(registry.AddGauge("h_seconds_sum", "N."), StatusIs(kExists));
  EXPECT_THAT(registry.AddHistogram("x", "X.", {}, {1}), StatusIs(kExists, "x_sum"));

  EXPECT_EQ(registry.ExposePrometheus(), before);
}

TEST(RegistryTest, SuffixNamesAreFineWithoutAHistogram) {
  Registry registry;
  EXPECT_THAT(registry.AddCounter("requests_count", "N."), IsOk());
  EXPECT_THAT(registry.AddGauge("requests", "N."), IsOk());
}

TEST(RegistryDeathTest, WrongNumberOfLabelValuesAborts) {
  Registry registry;
  absl::StatusOr<CounterFamily*> counter = registry.AddCounter("c_total", "C.", {"a", "b"});
  absl::StatusOr<GaugeFamily*> gauge = registry.AddGauge("g", "G.");
  absl::StatusOr<HistogramFamily*> histogram = registry.AddHistogram("h", "H.", {"a"}, {1});
  ASSERT_THAT(counter, IsOk());
  ASSERT_THAT(gauge, IsOk());
  ASSERT_THAT(histogram, IsOk());
  EXPECT_DEATH((*counter)->WithLabels({"only-one"}), "wrong number of label values");
  EXPECT_DEATH((*counter)->WithLabels(), "wrong number of label values");
  EXPECT_DEATH((*gauge)->WithLabels({"unexpected"}), "wrong number of label values");
  EXPECT_DEATH((*histogram)->WithLabels({"a", "b"}), "wrong number of label values");
}

// ---------------------------------------------------------------------------
// Callback families

TEST(RegistryTest, CallbackGaugeRunsOnEveryScrapeAndSortsSamples) {
  Registry registry;
  std::atomic<int> calls{0};
  ASSERT_THAT(registry.AddCallbackGauge("kueue_pending_workloads", "Pending workloads.",
                                        {"cluster_queue", "status"},
                                        [&calls] {
                                          int n = ++calls;
                                          return std::vector<Sample>{
                                              {{"team-b", "active"}, 2.0 * n},
                                              {{"team-a", "inadmissible"}, 1},
                                              {{"team-a", "active"}, 0.5},
                                          };
                                        }),
              IsOk());
  const char* kFirst =
      "# HELP kueue_pending_workloads Pending workloads.\n"
      "# TYPE kueue_pending_workloads gauge\n"
      "kueue_pending_workloads{cluster_queue=\"team-a\",status=\"active\"} 0.5\n"
      "kueue_pending_workloads{cluster_queue=\"team-a\",status=\"inadmissible\"} 1\n"
      "kueue_pending_workloads{cluster_queue=\"team-b\",status=\"active\"} 2\n";
  EXPECT_EQ(registry.ExposePrometheus(), kFirst);
  EXPECT_THAT(registry.ExposePrometheus(),
              HasSubstr("kueue_pending_workloads{cluster_queue=\"team-b\",status=\"active\"} 4\n"));
  EXPECT_EQ(calls.load(), 2);
}

TEST(RegistryTest, CallbackCounterAndEmptyCallback) {
  Registry registry;
  ASSERT_THAT(registry.AddCallbackCounter("bugs_total", "Bugs.", {}, [] { return std::vector<Sample>{{{}, 3}}; }),
              IsOk());
  ASSERT_THAT(registry.AddCallbackGauge("nothing", "Nothing yet.", {"x"}, [] { return std::vector<Sample>(); }),
              IsOk());
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP bugs_total Bugs.\n"
            "# TYPE bugs_total counter\n"
            "bugs_total 3\n"
            "# HELP nothing Nothing yet.\n"
            "# TYPE nothing gauge\n");
  EXPECT_THAT(registry.AddCallbackGauge("null_callback", "N.", {}, SampleCallback()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RegistryTest, CallbackMayUseTheRegistry) {
  // Callbacks run without the registry lock, so one may read (or even
  // register) metrics without deadlocking.
  Registry registry;
  absl::StatusOr<CounterFamily*> counter = registry.AddCounter("seen_total", "Seen.");
  ASSERT_THAT(counter, IsOk());
  (*counter)->WithLabels().Increment(5);
  ASSERT_THAT(registry.AddCallbackGauge("derived", "Derived.", {},
                                        [&registry, c = *counter] {
                                          (void)registry.AddGauge("late", "Registered during a scrape.");
                                          return std::vector<Sample>{
                                              {{}, static_cast<double>(c->WithLabels().value()) * 2}};
                                        }),
              IsOk());
  EXPECT_THAT(registry.ExposePrometheus(), HasSubstr("\nderived 10\n"));
  EXPECT_THAT(registry.ExposePrometheus(), HasSubstr("\nlate 0\n"));
}

TEST(RegistryTest, MalformedCallbackSamplesAreDropped) {
  Registry registry;
  ASSERT_THAT(registry.AddCallbackGauge("g", "G.", {"a"},
                                        [] {
                                          return std::vector<Sample>{
                                              {{"x", "extra"}, 1},
                                              {{"y"}, 2},
                                              {{"y"}, 3},
                                          };
                                        }),
              IsOk());
#ifdef NDEBUG
  // GK_BUG logs and counts in release builds; the bad samples are left out.
  uint64_t bugs_before = base::BugCount();
  EXPECT_EQ(registry.ExposePrometheus(),
            "# HELP g G.\n"
            "# TYPE g gauge\n"
            "g{a=\"y\"} 2\n");
  EXPECT_EQ(base::BugCount(), bugs_before + 2);
#else
  EXPECT_DEATH(registry.ExposePrometheus(), "wrong number of label values");
#endif
}

// ---------------------------------------------------------------------------
// Stability and concurrency

TEST(RegistryTest, ChildReferencesStayValidAcrossManyInsertions) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family = registry.AddCounter("many_total", "Many.", {"id"});
  ASSERT_THAT(family, IsOk());
  constexpr int kChildren = 2000;
  std::vector<Counter*> children;
  for (int i = 0; i < kChildren; ++i) {
    Counter& c = (*family)->WithLabels({absl::StrCat(i)});
    c.Increment(i);
    children.push_back(&c);
  }
  for (int i = 0; i < kChildren; ++i) {
    Counter& again = (*family)->WithLabels({absl::StrCat(i)});
    ASSERT_EQ(&again, children[i]) << i;
    ASSERT_EQ(again.value(), static_cast<uint64_t>(i));
  }
  // Families registered later do not disturb earlier families either.
  for (int i = 0; i < 200; ++i) ASSERT_THAT(registry.AddGauge(absl::StrCat("g", i), "G."), IsOk());
  absl::StatusOr<CounterFamily*> same = registry.AddCounter("many_total", "Many.", {"id"});
  ASSERT_THAT(same, IsOk());
  EXPECT_EQ(*same, *family);
  EXPECT_EQ(&(*same)->WithLabels({"1999"}), children[1999]);
}

TEST(RegistryTest, ConcurrentUpdatesAreExact) {
  Registry registry;
  absl::StatusOr<CounterFamily*> counter = registry.AddCounter("c_total", "C.", {"thread_group"});
  absl::StatusOr<GaugeFamily*> gauge = registry.AddGauge("g", "G.");
  absl::StatusOr<HistogramFamily*> histogram = registry.AddHistogram("h", "H.", {}, {0.5, 1});
  ASSERT_THAT(counter, IsOk());
  ASSERT_THAT(gauge, IsOk());
  ASSERT_THAT(histogram, IsOk());

  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one child, the rest another; every thread
      // looks its child up itself, racing to create it.
      Counter& c = (*counter)->WithLabels({t % 2 == 0 ? "even" : "odd"});
      Gauge& g = (*gauge)->WithLabels();
      Histogram& h = (*histogram)->WithLabels();
      for (int i = 0; i < kIterations; ++i) {
        c.Increment();
        g.Add(1);
        g.Sub(0.5);
        h.Observe(i % 2 == 0 ? 0.25 : 0.75);
      }
    });
  }
  // Scrape concurrently with the updates (must not crash or deadlock).
  for (int i = 0; i < 20; ++i) EXPECT_THAT(registry.ExposePrometheus(), HasSubstr("# TYPE h histogram"));
  for (std::thread& t : threads) t.join();

  const uint64_t per_group = uint64_t{kThreads / 2} * kIterations;
  EXPECT_EQ((*counter)->WithLabels({"even"}).value(), per_group);
  EXPECT_EQ((*counter)->WithLabels({"odd"}).value(), per_group);
  EXPECT_EQ((*gauge)->WithLabels().value(), 0.5 * kThreads * kIterations);
  Histogram& h = (*histogram)->WithLabels();
  const uint64_t total = uint64_t{kThreads} * kIterations;
  EXPECT_EQ(h.count(), total);
  EXPECT_THAT(h.CumulativeCounts(), ElementsAre(total / 2, total, total));
  EXPECT_EQ(h.sum(), 0.5 * static_cast<double>(total));  // every partial sum is exact in binary
  EXPECT_THAT(registry.ExposePrometheus(),
              HasSubstr(absl::StrCat("c_total{thread_group=\"even\"} ", per_group, "\n")));
}

TEST(RegistryTest, ConcurrentChildCreationYieldsOneChildPerLabelSet) {
  Registry registry;
  absl::StatusOr<CounterFamily*> family = registry.AddCounter("c_total", "C.", {"id"});
  ASSERT_THAT(family, IsOk());
  constexpr int kThreads = 6;
  constexpr int kIds = 300;
  std::vector<std::vector<Counter*>> seen(kThreads, std::vector<Counter*>(kIds));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIds; ++i) {
        Counter& c = (*family)->WithLabels({absl::StrCat(i)});
        c.Increment();
        seen[t][i] = &c;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kIds; ++i) {
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(seen[t][i], seen[0][i]) << "id " << i;
    ASSERT_EQ(seen[0][i]->value(), static_cast<uint64_t>(kThreads)) << "id " << i;
  }
}

}  // namespace
}  // namespace gangkeeper::metrics
