// gangkeeper: Prometheus text format 0.0.4 helpers (see exposition.h).
#include "src/metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"

namespace gangkeeper::metrics {
namespace {

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Appends `text` escaping backslash and newline, and double quote if
// `escape_quote`.
void AppendEscaped(std::string* out, absl::string_view text, bool escape_quote) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        if (escape_quote) {
          out->append("\\\"");
        } else {
          out->push_back(c);
        }
        break;
      default:
        out->push_back(c);
    }
  }
}

}  // namespace

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Go's strconv.FormatFloat(v, 'g', -1, 64), which the Prometheus client
  // libraries use, so `le` label values match theirs ("0.0001", not "1e-04"):
  // shortest round-trip digits, in exponent form iff the decimal exponent is
  // < -4 or >= 6.
  char buf[64];
  std::to_chars_result sci = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  GK_CHECK(sci.ec == std::errc());
  absl::string_view text(buf, static_cast<size_t>(sci.ptr - buf));
  int exponent = 0;
  size_t e = text.rfind('e');
  GK_CHECK(e != absl::string_view::npos);
  std::from_chars_result parsed = std::from_chars(
      text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0), text.data() + text.size(), exponent);
  GK_CHECK(parsed.ec == std::errc());
  if (exponent < -4 || exponent >= 6) return std::string(text);
  std::to_chars_result fixed = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
  GK_CHECK(fixed.ec == std::errc());
  return std::string(buf, fixed.ptr);
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  out.reserve(help.size());
  AppendEscaped(&out, help, /*escape_quote=*/false);
  return out;
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  AppendEscaped(&out, value, /*escape_quote=*/true);
  return out;
}

void AppendHeader(std::string* out, absl::string_view name, absl::string_view help, MetricType type) {
  absl::StrAppend(out, "# HELP ", name, " ");
  AppendEscaped(out, help, /*escape_quote=*/false);
  absl::StrAppend(out, "\n# TYPE ", name, " ", TypeName(type), "\n");
}

void AppendSample(std::string* out, absl::string_view name, absl::Span<const std::string> label_names,
                  absl::Span<const std::string> label_values, absl::string_view value, absl::string_view le) {
  GK_CHECK(label_names.size() == label_values.size());
  out->append(name.data(), name.size());
  if (!label_names.empty() || !le.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) out->push_back(',');
      absl::StrAppend(out, label_names[i], "=\"");
      AppendEscaped(out, label_values[i], /*escape_quote=*/true);
      out->push_back('"');
    }
    if (!le.empty()) {
      if (!label_names.empty()) out->push_back(',');
      absl::StrAppend(out, "le=\"", le, "\"");
    }
    out->push_back('}');
  }
  absl::StrAppend(out, " ", value, "\n");
}

}  // namespace gangkeeper::metrics
