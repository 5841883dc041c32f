// gangkeeper tests: a strict parser for the Prometheus text exposition format
// 0.0.4, so tests can check that GET /metrics output is well formed and read
// values back from it without golden strings.
//
// ParsePromText() accepts exactly the text format described at
// https://prometheus.io/docs/instrumenting/exposition_formats/ and rejects
// everything that format leaves undefined or that Prometheus would misread:
//   - metric names [a-zA-Z_:][a-zA-Z0-9_:]*; label names [a-zA-Z_][a-zA-Z0-9_]*
//     not starting with "__"; no label name twice in one sample;
//   - label values escaped with \\, \" and \n only; HELP text with \\ and \n
//     only; both valid UTF-8;
//   - values in decimal notation (Go ParseFloat's decimal subset: no hex
//     floats, no underscores) or exactly "+Inf", "-Inf", "NaN"; a value too
//     large for a double is an error, one too small for a double reads as 0
//     (as in Go); an optional int64 timestamp in milliseconds;
//   - "# HELP name text" and "# TYPE name counter|gauge|histogram|summary|untyped":
//     at most one of each per family, both before the family's first sample;
//     any other line starting with '#' is a comment;
//   - all lines of a family form one group: a family never appears twice and
//     never interleaves with another; no series (sample name + label set,
//     label order ignored) appears twice;
//   - counter values are >= 0 (not NaN); a counter's name need not end in
//     "_total";
//   - histogram x: only samples x_bucket (with an `le` label), x_sum and x_count
//     (without `le`); per label set (without `le`) buckets in strictly
//     increasing `le` order with non-decreasing counts, a le="+Inf" bucket equal
//     to x_count, and exactly one x_sum and x_count;
//   - summary x: samples x (with a `quantile` label in [0, 1], increasing per
//     label set), x_sum and x_count (without `quantile`), the last two present
//     for every label set;
//   - bucket counts and _count values are >= 0 (not NaN);
//   - non-empty text ends with "\n"; empty and blank lines are allowed
//     anywhere; blanks and tabs may separate tokens and lead or trail a line
//     (trailing ones are not part of a HELP text); '\r' is not whitespace.
//
// Thread contract: pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gangkeeper::testing {

// One sample line. `labels` holds every label as written, unescaped, including
// `le` on histogram buckets and `quantile` on summary quantiles (as the
// exposed text, e.g. "+Inf" or "0.25").
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  std::optional<int64_t> timestamp_ms;
};

// A metric family: its HELP/TYPE name (or the sample name of an untyped family
// without HELP/TYPE lines), its type ("untyped" without a TYPE line), its
// unescaped HELP text ("" without a HELP line), and its samples in text order.
// A histogram's or summary's _bucket, _sum and _count samples belong to it.
struct PromFamily {
  std::string name;
  std::string type;
  std::string help;
  std::vector<PromSample> samples;
};

// Parses `text` under the rules above, returning the families in text order.
// Returns InvalidArgument naming the first offending line ("line 7: ...") and
// what is wrong with it; for a rule that spans lines (a histogram's buckets
// against its _count) the line named is the one where the rule first fails.
[[nodiscard]] absl::StatusOr<std::vector<PromFamily>> ParsePromText(std::string_view text);

// Returns the value of the one sample named `sample_name` (e.g. "x_bucket")
// whose label set is exactly `labels` (label values compared as written, so
// le="1" does not match le="1.0"). Returns NotFound if there is none and
// FailedPrecondition if there are several (impossible for ParsePromText
// output).
[[nodiscard]] absl::StatusOr<double> PromValue(const std::vector<PromFamily>& fams, std::string_view sample_name,
                                               const std::map<std::string, std::string>& labels = {});

}  // namespace gangkeeper::testing
