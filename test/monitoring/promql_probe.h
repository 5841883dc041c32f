// gangkeeper monitoring tests: PromQL of the shipped dashboard and alerts,
// made into queries that return a series whenever the metrics they read
// exist (see prometheus_test.cc, "the method").
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::monitoring_test {

// Every comparison operator outside label matchers and strings (>, <, >=,
// <=, ==, !=) gets the `bool` modifier, so thresholds give 0/1 instead of
// filtering series out: `x > 0` becomes `x > bool 0`. Operators that
// already have it are left alone.
std::string WithBoolComparisons(absl::string_view expr);

// A Grafana target's expr as plain PromQL: the dashboard's variables
// ($cluster_queue, $flavor, $resource, also as ${name}) match everything
// (`.*`), the rate interval is 1m.
std::string GrafanaToPromql(absl::string_view expr);

// The selector of a `label_values(SELECTOR, label)` variable query;
// InvalidArgument for any other form.
absl::StatusOr<std::string> LabelValuesSelector(absl::string_view query);

}  // namespace gangkeeper::monitoring_test
