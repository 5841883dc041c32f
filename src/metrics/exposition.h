// gangkeeper: the Prometheus text format 0.0.4, line by line (private to
// src/metrics). Registry::ExposePrometheus() builds its output with these
// helpers; tests use them to check number formatting and escaping directly.
//
// Thread contract: pure functions of their arguments; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gangkeeper/metrics/registry.h"

namespace gangkeeper::metrics {

// A sample or `le` value Prometheus parses back exactly, formatted like the
// Go client (strconv 'g', shortest): "3", "0.25", "0.0001", "1e-05",
// "1e+06", "1.7976931348623157e+308", or "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// HELP text escaping: backslash → \\, newline → \n.
std::string EscapeHelp(absl::string_view help);
// Label value escaping: backslash → \\, double quote → \", newline → \n.
std::string EscapeLabelValue(absl::string_view value);

// Appends "# HELP name help\n# TYPE name type\n".
void AppendHeader(std::string* out, absl::string_view name, absl::string_view help, MetricType type);

// Appends `name{l1="v1",l2="v2"} value\n`. `label_names` and `label_values`
// have equal sizes. A non-empty `le` adds le="<le>" as the last label. With no
// labels at all the braces are left out.
void AppendSample(std::string* out, absl::string_view name, absl::Span<const std::string> label_names,
                  absl::Span<const std::string> label_values, absl::string_view value,
                  absl::string_view le = {});

}  // namespace gangkeeper::metrics
