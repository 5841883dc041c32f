// gangkeeper CLI: output formats (output.h).
#include "src/cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/quantity/quantity.h"
#include "yaml-cpp/yaml.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

// A string a YAML 1.1 or 1.2 reader would not read back as a string.
bool YamlNeedsQuotes(const std::string& v) {
  static const char* kWords[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
  if (v.empty()) return true;
  for (const char* w : kWords) {
    if (absl::EqualsIgnoreCase(v, w)) return true;
  }
  double d = 0;
  if (absl::SimpleAtod(v, &d)) return true;
  return v.front() == ' ' || v.back() == ' ' || v.front() == '0';
}

void EmitYaml(const json& j, YAML::Emitter& out) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key;
      if (YamlNeedsQuotes(k)) out << YAML::DoubleQuoted;
      out << k << YAML::Value;
      EmitYaml(v, out);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const json& v : j) EmitYaml(v, out);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (YamlNeedsQuotes(s)) out << YAML::DoubleQuoted;
    out << s;
  } else if (j.is_boolean()) {
    out << (j.get<bool>() ? "true" : "false");
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();
  }
}

}  // namespace

std::string FormatTable(const TableRows& rows, size_t gutter) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + gutter, ' ');
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

void PrintTable(const TableRows& rows, size_t gutter) { std::fputs(FormatTable(rows, gutter).c_str(), stdout); }

std::string FormatYaml(const json& j) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out.SetMapFormat(YAML::Block);
  EmitYaml(j, out);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') text += "\n";
  return text;
}

bool PrintStructured(const json& j, const std::string& output) {
  if (output == "json") {
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return true;
  }
  if (output == "yaml") {
    std::fputs(FormatYaml(j).c_str(), stdout);
    return true;
  }
  return false;
}

std::string HumanQuantity(const std::string& text) {
  absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(text);
  if (!q.ok()) return text;
  const std::string canonical = q->Format();
  if (canonical.size() <= 6 || q->IsNegative()) return canonical;
  static const char* kBinary[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  double v = static_cast<double>(q->CeilUnits());
  int suffix = -1;
  while (v >= 1024 && suffix + 1 < 6) {
    v /= 1024;
    ++suffix;
  }
  if (suffix < 0) return canonical;
  std::string digits = absl::StrFormat(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  if (absl::StrContains(digits, '.')) {
    digits = std::string(absl::StripSuffix(absl::StripSuffix(absl::StripSuffix(digits, "0"), "0"), "."));
  }
  return absl::StrCat(digits, kBinary[suffix]);
}

std::string LineDiff(const std::string& before, const std::string& after) {
  if (before == after) return "";
  std::vector<std::string> a = absl::StrSplit(before, '\n'), b = absl::StrSplit(after, '\n');
  // The longest common subsequence of lines (manifests are short).
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;) {
    for (size_t k = b.size(); k-- > 0;) {
      lcs[i][k] = a[i] == b[k] ? lcs[i + 1][k + 1] + 1 : std::max(lcs[i + 1][k], lcs[i][k + 1]);
    }
  }
  std::string out;
  size_t i = 0, k = 0;
  while (i < a.size() || k < b.size()) {
    if (i < a.size() && k < b.size() && a[i] == b[k]) {
      if (!a[i].empty()) absl::StrAppend(&out, "  ", a[i], "\n");
      ++i, ++k;
    } else if (i < a.size() && (k == b.size() || lcs[i + 1][k] >= lcs[i][k + 1])) {
      absl::StrAppend(&out, "- ", a[i++], "\n");
    } else {
      absl::StrAppend(&out, "+ ", b[k++], "\n");
    }
  }
  // Only the changes and three lines around each.
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  std::vector<bool> keep(lines.size(), false);
  for (size_t n = 0; n < lines.size(); ++n) {
    if (lines[n][0] == ' ') continue;
    for (size_t m = n >= 3 ? n - 3 : 0; m < lines.size() && m <= n + 3; ++m) keep[m] = true;
  }
  std::string shown;
  bool skipped = false;
  for (size_t n = 0; n < lines.size(); ++n) {
    if (!keep[n]) {
      skipped = true;
      continue;
    }
    if (skipped && !shown.empty()) shown += "  ...\n";
    skipped = false;
    absl::StrAppend(&shown, lines[n], "\n");
  }
  return shown;
}

}  // namespace gangkeeper::cli
