// gangkeeper tests: the strict Prometheus text format parser (one failing input
// per rule, plus what it must accept) and the registry's real exposition read
// back through it.
#include "test/metrics/prom_text.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/metrics/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;

constexpr double kInf = std::numeric_limits<double>::infinity();

// An OK StatusOr<double> holding exactly `expected`.
MATCHER_P(IsOkAndHolds, expected, "is OK and holds " + ::testing::PrintToString(expected)) {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  *result_listener << "value is " << *arg;
  return *arg == expected;
}

// The family named `name`, or nullptr.
const PromFamily* FindFamily(const std::vector<PromFamily>& fams, const std::string& name) {
  for (const PromFamily& family : fams) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// What the format allows

TEST(ParsePromTextTest, EmptyTextHasNoFamilies) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("");
  ASSERT_THAT(fams, IsOk());
  EXPECT_THAT(*fams, IsEmpty());
}

TEST(ParsePromTextTest, ReadsFamiliesWithHelpTypeLabelsAndTimestamps) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "# HELP http_requests_total Requests served.\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\"} 3 1395066363000\n"
      "# TYPE queue_depth gauge\n"
      "# HELP queue_depth Pending items.\n"
      "queue_depth -2.5\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 2u);

  const PromFamily& requests = (*fams)[0];
  EXPECT_EQ(requests.name, "http_requests_total");
  EXPECT_EQ(requests.type, "counter");
  EXPECT_EQ(requests.help, "Requests served.");
  ASSERT_EQ(requests.samples.size(), 2u);
  EXPECT_EQ(requests.samples[0].name, "http_requests_total");
  EXPECT_THAT(requests.samples[0].labels, ElementsAre(Pair("code", "200"), Pair("method", "post")));
  EXPECT_EQ(requests.samples[0].value, 1027);
  EXPECT_EQ(requests.samples[0].timestamp_ms, 1395066363000);

  const PromFamily& depth = (*fams)[1];
  EXPECT_EQ(depth.name, "queue_depth");
  EXPECT_EQ(depth.type, "gauge");
  EXPECT_EQ(depth.help, "Pending items.");
  ASSERT_EQ(depth.samples.size(), 1u);
  EXPECT_THAT(depth.samples[0].labels, IsEmpty());
  EXPECT_EQ(depth.samples[0].value, -2.5);
  EXPECT_EQ(depth.samples[0].timestamp_ms, std::nullopt);
}

TEST(ParsePromTextTest, FamilyWithoutTypeLineIsUntypedAndNamedBySample) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("some_value 1\nsome_value{a=\"x\"} 2\nother 3\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 2u);
  EXPECT_EQ((*fams)[0].name, "some_value");
  EXPECT_EQ((*fams)[0].type, "untyped");
  EXPECT_EQ((*fams)[0].help, "");
  EXPECT_EQ((*fams)[0].samples.size(), 2u);
  EXPECT_EQ((*fams)[1].name, "other");
}

TEST(ParsePromTextTest, FamilyWithoutSamplesIsKept) {
  absl::StatusOr<std::vector<PromFamily>> fams =
      ParsePromText("# HELP idle_total Nothing yet.\n# TYPE idle_total counter\n# TYPE next gauge\nnext 1\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 2u);
  EXPECT_EQ((*fams)[0].name, "idle_total");
  EXPECT_THAT((*fams)[0].samples, IsEmpty());
}

TEST(ParsePromTextTest, CounterNameNeedNotEndInTotal) {
  EXPECT_THAT(ParsePromText("# TYPE restarts counter\nrestarts 4\n"), IsOk());
}

TEST(ParsePromTextTest, EmptyAndBlankLinesAreAllowedAnywhere) {
  absl::StatusOr<std::vector<PromFamily>> fams =
      ParsePromText("\n# TYPE a gauge\n\n \t\na 1\n\n# TYPE b gauge\nb 2\n\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 2u);
  EXPECT_THAT(PromValue(*fams, "a"), IsOk());
}

TEST(ParsePromTextTest, BlanksAndTabsMaySeparateTokensAndSurroundALine) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "  #  TYPE \t x   gauge  \n"
      "\t x \t{ a = \"1\" ,\tb=\"2\", } \t 7 \t 12 \t\n"
      "x{a=\"3\"}8\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 1u);
  EXPECT_EQ((*fams)[0].type, "gauge");
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "1"}, {"b", "2"}}), IsOkAndHolds(7));
  EXPECT_EQ((*fams)[0].samples[0].timestamp_ms, 12);
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "3"}}), IsOkAndHolds(8));
}

TEST(ParsePromTextTest, PlainCommentsAreIgnored) {
  absl::StatusOr<std::vector<PromFamily>> fams =
      ParsePromText("#\n# just a comment\n# help is not HELP\n#HELPER x\nx 1\n# x 2 {\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 1u);
  EXPECT_EQ((*fams)[0].help, "");
  EXPECT_EQ((*fams)[0].samples.size(), 1u);
}

TEST(ParsePromTextTest, HelpLineWithoutDocstringIsEmptyHelp) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("# HELP x\n# TYPE x gauge\nx 1\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_EQ((*fams)[0].help, "");
  fams = ParsePromText("# HELP x \nx 1\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_EQ((*fams)[0].help, "");
}

TEST(ParsePromTextTest, UnescapesHelpAndLabelValues) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "# HELP x Line one\\nline \"two\" with a \\\\ backslash.\n"
      "x{path=\"C:\\\\dir\\\\\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",utf8=\"gr\xC3\xBC\xC3\x9F \xE2\x9C\x93\"} 1\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_EQ((*fams)[0].help, "Line one\nline \"two\" with a \\ backslash.");
  EXPECT_THAT((*fams)[0].samples[0].labels,
              ElementsAre(Pair("nl", "a\nb"), Pair("path", "C:\\dir\\"), Pair("quote", "say \"hi\""),
                          Pair("utf8", "gr\xC3\xBC\xC3\x9F \xE2\x9C\x93")));
}

TEST(ParsePromTextTest, ReadsEveryValueSpelling) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "v{k=\"int\"} 42\n"
      "v{k=\"neg\"} -7\n"
      "v{k=\"plus\"} +7\n"
      "v{k=\"frac\"} 0.25\n"
      "v{k=\"lead_dot\"} .5\n"
      "v{k=\"trail_dot\"} 5.\n"
      "v{k=\"exp\"} 1e-05\n"
      "v{k=\"exp_upper\"} 2.5E+06\n"
      "v{k=\"max\"} 1.7976931348623157e+308\n"
      "v{k=\"uint64\"} 18446744073709551615\n"
      "v{k=\"underflow\"} 1e-400\n"
      "v{k=\"pinf\"} +Inf\n"
      "v{k=\"minf\"} -Inf\n"
      "v{k=\"nan\"} NaN\n"
      "v{k=\"ts_neg\"} 1 -5\n"
      "v{k=\"ts_plus\"} 1 +5\n");
  ASSERT_THAT(fams, IsOk());
  auto value = [&](const std::string& k) { return PromValue(*fams, "v", {{"k", k}}).value_or(-1); };
  EXPECT_EQ(value("int"), 42);
  EXPECT_EQ(value("neg"), -7);
  EXPECT_EQ(value("plus"), 7);
  EXPECT_EQ(value("frac"), 0.25);
  EXPECT_EQ(value("lead_dot"), 0.5);
  EXPECT_EQ(value("trail_dot"), 5);
  EXPECT_EQ(value("exp"), 1e-05);
  EXPECT_EQ(value("exp_upper"), 2.5e6);
  EXPECT_EQ(value("max"), std::numeric_limits<double>::max());
  EXPECT_EQ(value("uint64"), 18446744073709551615.0);
  EXPECT_EQ(value("underflow"), 0);
  EXPECT_EQ(value("pinf"), kInf);
  EXPECT_EQ(value("minf"), -kInf);
  EXPECT_TRUE(std::isnan(value("nan")));
  EXPECT_EQ((*fams)[0].samples[14].timestamp_ms, -5);
  EXPECT_EQ((*fams)[0].samples[15].timestamp_ms, 5);
}

TEST(ParsePromTextTest, LabelOrderDoesNotMatter) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("x{b=\"2\",a=\"1\"} 5\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "1"}, {"b", "2"}}), IsOkAndHolds(5));
}

TEST(ParsePromTextTest, GroupsHistogramSeriesUnderTheFamily) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "# HELP latency_seconds Latency.\n"
      "# TYPE latency_seconds histogram\n"
      "latency_seconds_bucket{op=\"read\",le=\"0.1\"} 1\n"
      "latency_seconds_bucket{op=\"read\",le=\"1\"} 3\n"
      "latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
      "latency_seconds_sum{op=\"read\"} 7.5\n"
      "latency_seconds_count{op=\"read\"} 4\n"
      "latency_seconds_bucket{op=\"write\",le=\"0.1\"} 0\n"
      "latency_seconds_bucket{op=\"write\",le=\"1\"} 0\n"
      "latency_seconds_bucket{op=\"write\",le=\"+Inf\"} 0\n"
      "latency_seconds_sum{op=\"write\"} 0\n"
      "latency_seconds_count{op=\"write\"} 0\n"
      "# TYPE latency_seconds_total counter\n"
      "latency_seconds_total 0\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 2u);
  EXPECT_EQ((*fams)[0].name, "latency_seconds");
  EXPECT_EQ((*fams)[0].type, "histogram");
  EXPECT_EQ((*fams)[0].samples.size(), 10u);
  EXPECT_THAT(PromValue(*fams, "latency_seconds_bucket", {{"op", "read"}, {"le", "1"}}), IsOkAndHolds(3));
  EXPECT_THAT(PromValue(*fams, "latency_seconds_sum", {{"op", "read"}}), IsOkAndHolds(7.5));
  EXPECT_THAT(PromValue(*fams, "latency_seconds_count", {{"op", "read"}}), IsOkAndHolds(4));
}

TEST(ParsePromTextTest, GroupsSummarySeriesUnderTheFamily) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(
      "# TYPE rpc_seconds summary\n"
      "rpc_seconds{quantile=\"0\"} 0.01\n"
      "rpc_seconds{quantile=\"0.5\"} 0.05\n"
      "rpc_seconds{quantile=\"1\"} NaN\n"
      "rpc_seconds_sum 17\n"
      "rpc_seconds_count 200\n");
  ASSERT_THAT(fams, IsOk());
  ASSERT_EQ(fams->size(), 1u);
  EXPECT_EQ((*fams)[0].type, "summary");
  EXPECT_EQ((*fams)[0].samples.size(), 5u);
  EXPECT_THAT(PromValue(*fams, "rpc_seconds", {{"quantile", "0.5"}}), IsOkAndHolds(0.05));
}

// ---------------------------------------------------------------------------
// What the format rejects: one failing input per rule.

struct RejectCase {
  const char* name;
  std::string text;
  int want_line;
  const char* want_message;  // a substring of the error after "line N: "
};

const RejectCase kRejectCases[] = {
    // Metric and label names.
    {"metric name starting with a digit", "1x 1\n", 1, "invalid metric name \"1x\""},
    {"metric name with a dash", "foo-bar 1\n", 1, "invalid character \"-\" after metric name foo"},
    {"metric name with a dot", "foo.bar 1\n", 1, "invalid character \".\" after metric name foo"},
    {"label name with a colon", "x{a:b=\"1\"} 1\n", 1, "invalid label name \"a:b\""},
    {"label name starting with a digit", "x{1a=\"1\"} 1\n", 1, "invalid label name \"1a\""},
    {"label name with the reserved __ prefix", "x{__meta=\"1\"} 1\n", 1, "\"__meta\" starts with \"__\""},
    {"label name given twice", "x{a=\"1\",a=\"2\"} 1\n", 1, "label a appears twice"},
    {"empty label set", "x{} 1\n", 1, "empty label set"},
    {"label set with only a comma", "x{,} 1\n", 1, "expected a label name"},
    {"labels without a comma", "x{a=\"1\" b=\"2\"} 1\n", 1, "expected ',' or '}' after the value of label a"},
    {"label without '='", "x{a \"1\"} 1\n", 1, "expected '=' after label name a"},
    {"unquoted label value", "x{a=1} 1\n", 1, "expected '\"' to open the value of label a"},
    {"label set without '}'", "x{a=\"1\" 1\n", 1, "expected ',' or '}'"},
    {"HELP with an invalid metric name", "# HELP 9x text\n", 1, "HELP line: invalid metric name \"9x\""},
    {"TYPE with an invalid metric name", "# TYPE x-y gauge\n", 1, "TYPE line: invalid metric name \"x-y\""},

    // Label value escaping.
    {"label value with \\t escape", "x{a=\"1\\t2\"} 1\n", 1, "invalid escape sequence \"\\\\t\" in the value of label a"},
    {"label value with a lone trailing backslash", "x{a=\"1\\\"} 1\n", 1, "value of label a has no closing"},
    {"unterminated label value", "x{a=\"1} 1\n", 1, "value of label a has no closing"},
    {"label value that is not UTF-8", "x{a=\"\xFF\"} 1\n", 1, "value of label a is not valid UTF-8"},
    {"label value with an overlong UTF-8 form", "x{a=\"\xC0\xAF\"} 1\n", 1, "not valid UTF-8"},

    // Values and timestamps.
    {"missing value", "x\n", 1, "sample x has no value"},
    {"missing value after labels", "x{a=\"1\"}\n", 1, "sample x{a=\"1\"} has no value"},
    {"word as value", "x abc\n", 1, "\"abc\" is not a number"},
    {"Inf without sign", "x Inf\n", 1, "\"Inf\" is not a number"},
    {"lower-case inf", "x +inf\n", 1, "\"+inf\" is not a number"},
    {"lower-case nan", "x nan\n", 1, "\"nan\" is not a number"},
    {"Infinity spelled out", "x +Infinity\n", 1, "\"+Infinity\" is not a number"},
    {"hexadecimal float", "x 0x1p3\n", 1, "\"0x1p3\" is not a number"},
    {"underscore in a number", "x 1_000\n", 1, "\"1_000\" is not a number"},
    {"exponent without digits", "x 1e\n", 1, "\"1e\" is not a number"},
    {"lone dot", "x .\n", 1, "\".\" is not a number"},
    {"value too large for a double", "x 1e400\n", 1, "\"1e400\" is out of the range of a 64-bit float"},
    {"fractional timestamp", "x 1 1.5\n", 1, "timestamp \"1.5\" is not an integer"},
    {"timestamp beyond int64", "x 1 9223372036854775808\n", 1, "out of the range of int64"},
    {"text after the timestamp", "x 1 2 3\n", 1, "unexpected \"3\" after the timestamp"},
    {"carriage return before the newline", "x 1\r\n", 1, "\"1\\r\" is not a number"},

    // HELP and TYPE lines.
    {"HELP with a \\\" escape", "# HELP x say \\\"hi\\\"\n", 1, "invalid escape sequence \"\\\\\\\"\" in HELP text"},
    {"HELP ending in a lone backslash", "# HELP x text\\\n", 1, "lone backslash"},
    {"HELP that is not UTF-8", "# HELP x \xE2\x9C\n", 1, "HELP text is not valid UTF-8"},
    {"HELP without a metric name", "# HELP\n", 1, "HELP line without a metric name"},
    {"second HELP line", "# HELP x one\n# HELP x two\nx 1\n", 2, "second HELP line for x (the first is line 1)"},
    {"second TYPE line", "# TYPE x gauge\n# TYPE x gauge\nx 1\n", 2, "second TYPE line for x (the first is line 1)"},
    {"unknown type", "# TYPE x timer\n", 1, "unknown type \"timer\""},
    {"upper-case type", "# TYPE x Counter\n", 1, "unknown type \"Counter\""},
    {"TYPE without a type", "# TYPE x\n", 1, "TYPE line for x without a type"},
    {"TYPE with an extra token", "# TYPE x gauge extra\n", 1, "unexpected \"extra\" after the type"},
    {"TYPE after the family's first sample", "x 1\n# TYPE x gauge\n", 2, "TYPE line for x after its first sample (line 1)"},
    {"HELP after the family's first sample", "# TYPE x gauge\nx 1\n# HELP x late\n", 3,
     "HELP line for x after its first sample (line 2)"},

    // One group per family, one line per series.
    {"family interleaved with another", "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n", 5,
     "sample a of family a, which appeared earlier"},
    {"untyped family interleaved with another", "a 1\nb 1\na{x=\"1\"} 2\n", 3, "sample a of family a, which appeared earlier"},
    {"family's TYPE appearing again later", "# TYPE a gauge\na 1\nb 1\n# TYPE a gauge\n", 4,
     "TYPE line for a, whose family appeared earlier"},
    {"HELP for a finished family", "a 1\nb 1\n# HELP a late\n", 3, "HELP line for a, whose family appeared earlier"},
    {"duplicate series", "x{a=\"1\"} 1\nx{a=\"1\"} 2\n", 2, "series x{a=\"1\"} appears twice (first on line 1)"},
    {"duplicate series with labels reordered", "x{a=\"1\",b=\"2\"} 1\nx{b=\"2\",a=\"1\"} 2\n", 2,
     "series x{a=\"1\",b=\"2\"} appears twice"},
    {"duplicate series without labels", "x 1\nx 1\n", 2, "series x appears twice"},

    // Counters.
    {"negative counter", "# TYPE c counter\nc -1\n", 2, "counter c is -1; it must be >= 0"},
    {"negative infinite counter", "# TYPE c counter\nc -Inf\n", 2, "counter c is -inf; it must be >= 0"},
    {"NaN counter", "# TYPE c counter\nc NaN\n", 2, "counter c is nan; it must be >= 0"},

    // Histograms.
    {"histogram bucket without le", "# TYPE h histogram\nh_bucket 1\n", 2, "histogram sample h_bucket has no le label"},
    {"histogram le that is not a number", "# TYPE h histogram\nh_bucket{le=\"big\"} 1\n", 2,
     "h_bucket{le=\"big\"}: le \"big\" is not a number"},
    {"histogram le NaN", "# TYPE h histogram\nh_bucket{le=\"NaN\"} 1\n", 2, "le is NaN"},
    {"histogram _sum with le", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum{le=\"+Inf\"} 1\nh_count 1\n", 3,
     "histogram sample h_sum{le=\"+Inf\"} must not have the label le"},
    {"histogram _count with le", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count{le=\"+Inf\"} 1\n", 4,
     "must not have the label le"},
    {"histogram sample under the bare family name", "# TYPE h histogram\nh 1\n", 2,
     "histogram h has no sample name h (only h_bucket, h_sum and h_count)"},
    {"negative histogram bucket", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} -1\n", 2, "bucket h_bucket{le=\"+Inf\"} is -1"},
    {"NaN histogram count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count NaN\n", 4, "count h_count is nan"},
    {"histogram buckets that decrease",
     "# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"2\"} 4\nh_bucket{le=\"+Inf\"} 5\nh_sum 1\nh_count 5\n", 3,
     "histogram h: bucket le=\"2\" counts 4, less than 5 in le=\"1\"; buckets are cumulative"},
    {"histogram buckets out of le order",
     "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", 3,
     "bucket le=\"1\" follows le=\"2\"; buckets must be in increasing le order"},
    {"histogram buckets with equal le spelled differently",
     "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"1.0\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", 3,
     "bucket le=\"1.0\" follows le=\"1\""},
    {"histogram without a +Inf bucket", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", 2,
     "histogram h has no le=\"+Inf\" bucket"},
    {"histogram with only _sum and _count", "# TYPE h histogram\nh_sum{a=\"x\"} 1\nh_count{a=\"x\"} 1\n", 3,
     "histogram h{a=\"x\"} has no le=\"+Inf\" bucket"},
    {"histogram whose +Inf bucket differs from _count",
     "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", 5,
     "histogram h: h_count is 3 but the le=\"+Inf\" bucket is 2"},
    {"histogram without _count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n", 3, "histogram h has no h_count sample"},
    {"histogram without _sum", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n", 3, "histogram h has no h_sum sample"},
    {"histogram label set missing _sum",
     "# TYPE h histogram\nh_bucket{a=\"x\",le=\"+Inf\"} 0\nh_sum{a=\"x\"} 0\nh_count{a=\"x\"} 0\n"
     "h_bucket{a=\"y\",le=\"+Inf\"} 0\nh_count{a=\"y\"} 0\n",
     6, "histogram h{a=\"y\"} has no h_sum sample"},
    {"histogram whose _count was already a family", "# TYPE h_count gauge\nh_count 1\n# TYPE h histogram\n", 3,
     "histogram h needs the sample name h_count, which family h_count already uses"},
    {"TYPE for a histogram's series", "# TYPE h histogram\n# TYPE h_bucket counter\n", 2,
     "TYPE line for h_bucket, which is a sample name of family h"},
    {"histogram series after the histogram ended",
     "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\nother 1\nh_bucket{a=\"1\",le=\"+Inf\"} 1\n", 6,
     "sample h_bucket of family h, which appeared earlier"},

    // Summaries.
    {"summary quantile above 1", "# TYPE s summary\ns{quantile=\"1.5\"} 1\ns_sum 1\ns_count 1\n", 2,
     "s{quantile=\"1.5\"}: quantile 1.5 is outside [0, 1]"},
    {"summary quantile below 0", "# TYPE s summary\ns{quantile=\"-0.1\"} 1\ns_sum 1\ns_count 1\n", 2,
     "quantile -0.1 is outside [0, 1]"},
    {"summary quantile that is not a number", "# TYPE s summary\ns{quantile=\"half\"} 1\n", 2,
     "quantile \"half\" is not a number"},
    {"summary sample without quantile", "# TYPE s summary\ns 1\n", 2, "summary sample s has no quantile label"},
    {"summary _sum with quantile", "# TYPE s summary\ns_sum{quantile=\"0.5\"} 1\n", 2, "must not have the label quantile"},
    {"summary quantiles out of order",
     "# TYPE s summary\ns{quantile=\"0.9\"} 1\ns{quantile=\"0.5\"} 1\ns_sum 1\ns_count 1\n", 3,
     "quantile=\"0.5\" follows quantile=\"0.9\""},
    {"summary without _count", "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\n", 3, "summary s has no s_count sample"},
    {"summary with a negative _count", "# TYPE s summary\ns_sum 1\ns_count -2\n", 3, "count s_count is -2"},

    // The end of the text.
    {"text without a final newline", "# TYPE x gauge\nx 1", 2, "the text does not end with a newline"},
    {"text of one line without a newline", "x 1", 1, "the text does not end with a newline"},
};

TEST(ParsePromTextTest, RejectsEveryRuleViolation) {
  for (const RejectCase& c : kRejectCases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(c.text);
    EXPECT_THAT(fams, StatusIs(absl::StatusCode::kInvalidArgument));
    std::string message(fams.status().message());
    EXPECT_THAT(message, StartsWith(absl::StrCat("line ", c.want_line, ": ")));
    EXPECT_THAT(message, HasSubstr(c.want_message));
  }
}

// ---------------------------------------------------------------------------
// PromValue

TEST(PromValueTest, FindsTheSampleWithExactlyTheseLabels) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("x{a=\"1\",b=\"2\"} 3\nx{a=\"1\"} 4\ny 5\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "1"}, {"b", "2"}}), IsOkAndHolds(3));
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "1"}}), IsOkAndHolds(4));
  EXPECT_THAT(PromValue(*fams, "y"), IsOkAndHolds(5));
}

TEST(PromValueTest, MissingSampleIsNotFound) {
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText("x{a=\"1\",b=\"2\"} 3\n");
  ASSERT_THAT(fams, IsOk());
  EXPECT_THAT(PromValue(*fams, "x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(PromValue(*fams, "x", {{"a", "1"}}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(PromValue(*fams, "z", {{"a", "1"}, {"b", "2"}}), StatusIs(absl::StatusCode::kNotFound));
}

TEST(PromValueTest, AmbiguousSampleIsFailedPrecondition) {
  std::vector<PromFamily> fams = {
      {.name = "x", .type = "gauge", .help = "", .samples = {{.name = "x", .labels = {}, .value = 1, .timestamp_ms = {}}}},
      {.name = "x", .type = "gauge", .help = "", .samples = {{.name = "x", .labels = {}, .value = 2, .timestamp_ms = {}}}},
  };
  EXPECT_THAT(PromValue(fams, "x"), StatusIs(absl::StatusCode::kFailedPrecondition));
}

// ---------------------------------------------------------------------------
// The registry's real exposition

TEST(RegistryExpositionTest, ParsesStrictlyAndReadsBackWhatWasRecorded) {
  metrics::Registry registry;
  const std::string awkward = "say \"hi\" \\ then\nnext line";

  absl::StatusOr<metrics::CounterFamily*> requests = registry.AddCounter(
      "gk_test_requests_total", "Requests served.\nSecond line with a \\ backslash and \"quotes\".",
      {"path", "code"});
  ASSERT_THAT(requests, IsOk());
  (*requests)->WithLabels({awkward, "200"}).Increment(3);
  (*requests)->WithLabels({"/ok", "500"}).Increment();
  (*requests)->WithLabels({"", "204"});  // exposed as 0

  absl::StatusOr<metrics::GaugeFamily*> temperature =
      registry.AddGauge("gk_test_temperature_celsius", "Temperature.", {"zone"});
  ASSERT_THAT(temperature, IsOk());
  (*temperature)->WithLabels({"a"}).Set(-3.5);
  (*temperature)->WithLabels({"b"}).Set(1e-05);
  (*temperature)->WithLabels({"c"}).Set(kInf);
  (*temperature)->WithLabels({"d"}).Set(std::numeric_limits<double>::quiet_NaN());
  (*temperature)->WithLabels({awkward}).Set(0.1 + 0.2);

  const std::vector<double> bounds = {0.001, 0.01, 0.1, 1, 2.5};
  absl::StatusOr<metrics::HistogramFamily*> latency =
      registry.AddHistogram("gk_test_latency_seconds", "Latency.", {"op"}, bounds);
  ASSERT_THAT(latency, IsOk());
  metrics::Histogram& read = (*latency)->WithLabels({"read"});
  for (double v : {0.0005, 0.001, 0.005, 0.05, 0.05, 0.5, 2.5, 7.0}) read.Observe(v);
  metrics::Histogram& odd = (*latency)->WithLabels({awkward});
  odd.Observe(0.02);
  (*latency)->WithLabels({"idle"});  // no observations

  absl::StatusOr<metrics::HistogramFamily*> unlabeled =
      registry.AddHistogram("gk_test_batch_size", "Batch sizes.", {}, metrics::ExponentialBuckets(1, 2, 4));
  ASSERT_THAT(unlabeled, IsOk());
  (*unlabeled)->WithLabels().Observe(3);

  ASSERT_THAT(registry.AddCallbackGauge("gk_test_queue_length", "Queue length.", {"queue"},
                                        [] {
                                          return std::vector<metrics::Sample>{{{"b"}, 2}, {{"a"}, 1}};
                                        }),
              IsOk());
  ASSERT_THAT(registry.AddCallbackCounter("gk_test_evictions_total", "Evictions.", {},
                                          [] { return std::vector<metrics::Sample>{{{}, 9}}; }),
              IsOk());
  ASSERT_THAT(registry.AddCallbackGauge("gk_test_empty", "No samples.", {"x"},
                                        [] { return std::vector<metrics::Sample>{}; }),
              IsOk());
  ASSERT_THAT(metrics::RegisterProcessMetrics(registry), IsOk());

  const std::string text = registry.ExposePrometheus();
  absl::StatusOr<std::vector<PromFamily>> fams = ParsePromText(text);
  ASSERT_THAT(fams, IsOk()) << text;

  // Families, types and HELP texts.
  const PromFamily* family = FindFamily(*fams, "gk_test_requests_total");
  ASSERT_NE(family, nullptr) << text;
  EXPECT_EQ(family->type, "counter");
  EXPECT_EQ(family->help, "Requests served.\nSecond line with a \\ backslash and \"quotes\".");
  EXPECT_EQ(family->samples.size(), 3u);
  family = FindFamily(*fams, "gk_test_temperature_celsius");
  ASSERT_NE(family, nullptr) << text;
  EXPECT_EQ(family->type, "gauge");
  family = FindFamily(*fams, "gk_test_latency_seconds");
  ASSERT_NE(family, nullptr) << text;
  EXPECT_EQ(family->type, "histogram");
  EXPECT_EQ(family->samples.size(), 3 * (bounds.size() + 3)) << text;
  family = FindFamily(*fams, "gk_test_empty");
  ASSERT_NE(family, nullptr) << text;
  EXPECT_EQ(family->type, "gauge");
  EXPECT_THAT(family->samples, IsEmpty());
  family = FindFamily(*fams, "gk_test_evictions_total");
  ASSERT_NE(family, nullptr) << text;
  EXPECT_EQ(family->type, "counter");
  for (const char* name : {"process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"}) {
    EXPECT_NE(FindFamily(*fams, name), nullptr) << name << "\n" << text;
  }

  // Counters.
  EXPECT_THAT(PromValue(*fams, "gk_test_requests_total", {{"path", awkward}, {"code", "200"}}), IsOkAndHolds(3));
  EXPECT_THAT(PromValue(*fams, "gk_test_requests_total", {{"path", "/ok"}, {"code", "500"}}), IsOkAndHolds(1));
  EXPECT_THAT(PromValue(*fams, "gk_test_requests_total", {{"path", ""}, {"code", "204"}}), IsOkAndHolds(0));
  EXPECT_THAT(PromValue(*fams, "gk_test_evictions_total"), IsOkAndHolds(9));

  // Gauges, exactly (the registry prints shortest round-trip digits).
  EXPECT_THAT(PromValue(*fams, "gk_test_temperature_celsius", {{"zone", "a"}}), IsOkAndHolds(-3.5));
  EXPECT_THAT(PromValue(*fams, "gk_test_temperature_celsius", {{"zone", "b"}}), IsOkAndHolds(1e-05));
  EXPECT_THAT(PromValue(*fams, "gk_test_temperature_celsius", {{"zone", "c"}}), IsOkAndHolds(kInf));
  absl::StatusOr<double> nan = PromValue(*fams, "gk_test_temperature_celsius", {{"zone", "d"}});
  ASSERT_THAT(nan, IsOk());
  EXPECT_TRUE(std::isnan(*nan));
  EXPECT_THAT(PromValue(*fams, "gk_test_temperature_celsius", {{"zone", awkward}}), IsOkAndHolds(0.1 + 0.2));
  EXPECT_THAT(PromValue(*fams, "gk_test_queue_length", {{"queue", "a"}}), IsOkAndHolds(1));
  EXPECT_THAT(PromValue(*fams, "gk_test_queue_length", {{"queue", "b"}}), IsOkAndHolds(2));

  // Histograms: every bucket, the sum and the count, per label set.
  const std::vector<std::string> le_text = {"0.001", "0.01", "0.1", "1", "2.5", "+Inf"};
  for (const std::string& op : {std::string("read"), awkward, std::string("idle")}) {
    SCOPED_TRACE(op);
    const metrics::Histogram& h = (*latency)->WithLabels({op});
    std::vector<uint64_t> cumulative = h.CumulativeCounts();
    ASSERT_EQ(cumulative.size(), le_text.size());
    for (size_t i = 0; i < le_text.size(); ++i) {
      EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", op}, {"le", le_text[i]}}),
                  IsOkAndHolds(static_cast<double>(cumulative[i])))
          << "le=" << le_text[i];
    }
    EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_sum", {{"op", op}}), IsOkAndHolds(h.sum()));
    EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_count", {{"op", op}}),
                IsOkAndHolds(static_cast<double>(h.count())));
  }
  // The recorded values themselves, not only the registry's view of them.
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", "read"}, {"le", "0.001"}}), IsOkAndHolds(2));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", "read"}, {"le", "0.1"}}), IsOkAndHolds(5));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", "read"}, {"le", "2.5"}}), IsOkAndHolds(7));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", "read"}, {"le", "+Inf"}}), IsOkAndHolds(8));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_count", {{"op", "read"}}), IsOkAndHolds(8));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_sum", {{"op", "read"}}),
              IsOkAndHolds(0.0005 + 0.001 + 0.005 + 0.05 + 0.05 + 0.5 + 2.5 + 7.0));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", awkward}, {"le", "0.01"}}), IsOkAndHolds(0));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_bucket", {{"op", awkward}, {"le", "0.1"}}), IsOkAndHolds(1));
  EXPECT_THAT(PromValue(*fams, "gk_test_latency_seconds_count", {{"op", "idle"}}), IsOkAndHolds(0));
  EXPECT_THAT(PromValue(*fams, "gk_test_batch_size_bucket", {{"le", "2"}}), IsOkAndHolds(0));
  EXPECT_THAT(PromValue(*fams, "gk_test_batch_size_bucket", {{"le", "4"}}), IsOkAndHolds(1));
  EXPECT_THAT(PromValue(*fams, "gk_test_batch_size_bucket", {{"le", "+Inf"}}), IsOkAndHolds(1));
  EXPECT_THAT(PromValue(*fams, "gk_test_batch_size_sum"), IsOkAndHolds(3));
}

}  // namespace
}  // namespace gangkeeper::testing
