// gangkeeper monitoring tests: see promql_probe.h.
#include "test/monitoring/promql_probe.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace gangkeeper::monitoring_test {

std::string WithBoolComparisons(absl::string_view expr) {
  std::string out;
  int braces = 0;
  char quote = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    const char ch = expr[i];
    if (quote != 0) {  // inside a string: copy, honouring escapes
      out += ch;
      if (ch == '\\' && i + 1 < expr.size()) {
        out += expr[++i];
      } else if (ch == quote) {
        quote = 0;
      }
      continue;
    }
    if (ch == '"' || ch == '\'' || ch == '`') {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch == '{') ++braces;
    if (ch == '}') --braces;
    const bool two = i + 1 < expr.size() && expr[i + 1] == '=' && (ch == '>' || ch == '<' || ch == '=' || ch == '!');
    const bool one = ch == '>' || ch == '<';
    if (braces > 0 || (!two && !one)) {
      out += ch;
      continue;
    }
    out += ch;
    if (two) out += expr[++i];
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(expr.substr(i + 1));
    if (absl::StartsWith(rest, "bool")) continue;
    out += " bool";
    if (i + 1 < expr.size() && !absl::ascii_isspace(static_cast<unsigned char>(expr[i + 1]))) out += ' ';
  }
  return out;
}

std::string GrafanaToPromql(absl::string_view expr) {
  return absl::StrReplaceAll(expr, {{"${cluster_queue}", ".*"},
                                    {"${flavor}", ".*"},
                                    {"${resource}", ".*"},
                                    {"$cluster_queue", ".*"},
                                    {"$flavor", ".*"},
                                    {"$resource", ".*"},
                                    {"$__rate_interval", "1m"}});
}

absl::StatusOr<std::string> LabelValuesSelector(absl::string_view query) {
  absl::string_view q = absl::StripAsciiWhitespace(query);
  if (!absl::ConsumePrefix(&q, "label_values(") || !absl::ConsumeSuffix(&q, ")")) {
    return absl::InvalidArgumentError(absl::StrCat("not label_values(SELECTOR, label): ", query));
  }
  const size_t comma = q.rfind(',');
  if (comma == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("label_values without a selector: ", query));
  }
  return std::string(absl::StripAsciiWhitespace(q.substr(0, comma)));
}

}  // namespace gangkeeper::monitoring_test
