// gangkeeper sim: CSV and JSON Lines traces (formats in trace.h).
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/sim/trace.h"
#include "nlohmann/json.hpp"
#include "src/sim/trace_fields.h"

namespace gangkeeper::sim {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxTraceWorkloads = 10'000'000;

// Lines of `text` with their 1-based numbers, without a trailing "\r";
// blank and `#` lines left out.
std::vector<std::pair<int, absl::string_view>> ContentLines(absl::string_view text) {
  std::vector<std::pair<int, absl::string_view>> out;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || absl::StartsWith(stripped, "#")) continue;
    out.emplace_back(number, line);
  }
  return out;
}

// Splits one CSV line (RFC 4180 quoting within the line). False when a
// quote is not closed.
bool SplitCsvLine(absl::string_view line, std::vector<std::string>* fields) {
  fields->clear();
  std::string field;
  bool quoted = false;
  bool was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
    } else if (c == '"' && absl::StripAsciiWhitespace(field).empty() && !was_quoted) {
      field.clear();
      quoted = true;
      was_quoted = true;
    } else if (c == ',') {
      fields->push_back(was_quoted ? field : std::string(absl::StripAsciiWhitespace(field)));
      field.clear();
      was_quoted = false;
    } else {
      if (!was_quoted || !absl::ascii_isspace(static_cast<unsigned char>(c))) field += c;
    }
  }
  if (quoted) return false;
  fields->push_back(was_quoted ? field : std::string(absl::StripAsciiWhitespace(field)));
  return true;
}

std::string KnownFields() { return absl::StrJoin(TraceFieldNames(), ", "); }

absl::StatusOr<Trace> Finish(Trace trace, const std::vector<int>& lines, TraceErrors& errors) {
  if (errors.empty() && trace.workloads.empty()) {
    errors.Add(0, "", "the trace has no workloads");
  }
  CheckUniqueNames(trace.workloads, lines, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return trace;
}

// A JSON scalar as the text a CSV field would hold: strings as they are,
// numbers as JSON writes them, true/false; null -> nullopt.
std::optional<std::string> ScalarText(const json& v, bool* ok) {
  *ok = true;
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get_ref<const std::string&>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) {
      *ok = false;
      return std::nullopt;
    }
    return v.dump();
  }
  *ok = false;
  return std::nullopt;
}

// The array form of `podsets`.
std::optional<std::vector<workload::PodSet>> JsonPodSets(const json& v, int line, TraceErrors* errors) {
  std::vector<workload::PodSet> out;
  if (v.empty()) {
    errors->Add(line, "podsets", "an empty array: give at least one pod set");
    return std::nullopt;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& p = v[i];
    const std::string field = absl::StrCat("podsets[", i, "]");
    if (!p.is_object()) {
      errors->Add(line, field, "must be an object {\"name\", \"count\", \"requests\"}");
      return std::nullopt;
    }
    workload::PodSet ps;
    for (const auto& [key, value] : p.items()) {
      if (key != "name" && key != "count" && key != "requests") {
        errors->Add(line, absl::StrCat(field, ".", key), "unknown key: a pod set has name, count and requests");
        return std::nullopt;
      }
    }
    if (p.contains("name")) {
      if (!p["name"].is_string() || p["name"].get_ref<const std::string&>().empty()) {
        errors->Add(line, field + ".name", "must be a non-empty string");
        return std::nullopt;
      }
      ps.name = p["name"].get<std::string>();
    }
    if (!p.contains("count") || !p["count"].is_number_integer() || p["count"].get<int64_t>() <= 0 ||
        p["count"].get<int64_t>() > 1'000'000) {
      errors->Add(line, field + ".count", "must be a whole number of pods from 1 to 1000000");
      return std::nullopt;
    }
    ps.count = p["count"].get<int64_t>();
    if (!p.contains("requests") || !p["requests"].is_object() || p["requests"].empty()) {
      errors->Add(line, field + ".requests",
                  "must be an object of resource -> quantity, e.g. {\"nvidia.com/gpu\": 1, \"cpu\": \"500m\"}");
      return std::nullopt;
    }
    for (const auto& [resource, q] : p["requests"].items()) {
      bool scalar_ok = true;
      std::optional<std::string> text = ScalarText(q, &scalar_ok);
      absl::StatusOr<quantity::Quantity> parsed =
          text.has_value() ? quantity::ParseQuantity(*text) : absl::InvalidArgumentError("missing");
      if (!scalar_ok || !parsed.ok() || parsed->IsNegative()) {
        errors->Add(line, absl::StrCat(field, ".requests[", resource, "]"),
                    absl::StrCat(q.dump(), " is not a non-negative quantity (write 1, \"500m\", \"16Gi\")"));
        return std::nullopt;
      }
      ps.requests[resource] = *parsed;
    }
    ps.limits = ps.requests;
    out.push_back(std::move(ps));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].name.empty()) out[i].name = out.size() == 1 ? "main" : absl::StrCat("podset-", i);
    if (!names.insert(out[i].name).second) {
      errors->Add(line, "podsets", absl::StrCat("pod set name \"", out[i].name, "\" is used twice"));
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Trace> ParseCsvTrace(absl::string_view text, absl::string_view file) {
  Trace trace;
  trace.format = TraceFormat::kCsv;
  trace.file = std::string(file);
  TraceErrors errors(trace.file);
  std::vector<std::pair<int, absl::string_view>> lines = ContentLines(text);
  if (lines.empty()) {
    errors.Add(0, "", absl::StrCat("no header line: start the file with the column names, e.g. ",
                                   "time,namespace,queue,priority,podsets,runtime"));
    return errors.ToStatus();
  }
  std::vector<std::string> header;
  if (!SplitCsvLine(lines[0].second, &header)) {
    errors.Add(lines[0].first, "", "a quote is not closed");
    return errors.ToStatus();
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string& name = header[i];
    const auto& known = TraceFieldNames();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      errors.Add(lines[0].first, "",
                 absl::StrCat("column ", i + 1, " \"", name, "\" is not a trace column; columns are ", KnownFields()));
    } else if (!seen.insert(name).second) {
      errors.Add(lines[0].first, "", absl::StrCat("column \"", name, "\" appears twice in the header"));
    }
  }
  for (const std::string& f : TraceFieldNames()) {
    if (IsRequiredTraceField(f) && seen.count(f) == 0) {
      errors.Add(lines[0].first, "", absl::StrCat("the header has no \"", f, "\" column (required: ",
                                                  "time, namespace, queue, podsets, runtime)"));
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  if (lines.size() - 1 > kMaxTraceWorkloads) {
    errors.Add(0, "", absl::StrCat("more than ", kMaxTraceWorkloads, " workloads: split the trace"));
    return errors.ToStatus();
  }
  std::vector<int> record_lines;
  std::vector<std::string> fields;
  for (size_t i = 1; i < lines.size() && !errors.full(); ++i) {
    const int line = lines[i].first;
    if (!SplitCsvLine(lines[i].second, &fields)) {
      errors.Add(line, "", "a quote is not closed (quoted fields end on the same line)");
      continue;
    }
    if (fields.size() != header.size()) {
      errors.Add(line, "", absl::StrCat(fields.size(), " fields, but the header names ", header.size(),
                                        " columns: give every column (empty for the default)"));
      continue;
    }
    TraceRecord record;
    record.line = line;
    for (size_t c = 0; c < header.size(); ++c) {
      if (!fields[c].empty()) record.fields[header[c]] = fields[c];
    }
    std::optional<TraceWorkload> w = BuildTraceWorkload(record, static_cast<int>(i), &errors);
    if (w.has_value()) {
      trace.workloads.push_back(*std::move(w));
      record_lines.push_back(line);
    }
  }
  return Finish(std::move(trace), record_lines, errors);
}

absl::StatusOr<Trace> ParseJsonLinesTrace(absl::string_view text, absl::string_view file) {
  Trace trace;
  trace.format = TraceFormat::kJsonLines;
  trace.file = std::string(file);
  TraceErrors errors(trace.file);
  std::vector<std::pair<int, absl::string_view>> lines = ContentLines(text);
  if (lines.size() > kMaxTraceWorkloads) {
    errors.Add(0, "", absl::StrCat("more than ", kMaxTraceWorkloads, " workloads: split the trace"));
    return errors.ToStatus();
  }
  std::vector<int> record_lines;
  int index = 0;
  for (const auto& [line, content] : lines) {
    if (errors.full()) break;
    ++index;
    json v = json::parse(content.begin(), content.end(), nullptr, false);
    if (v.is_discarded() || !v.is_object()) {
      errors.Add(line, "", "not a JSON object: write one object per line, e.g. {\"time\": 0, \"namespace\": ...}");
      continue;
    }
    TraceRecord record;
    record.line = line;
    bool ok = true;
    for (const auto& [key, value] : v.items()) {
      const auto& known = TraceFieldNames();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        errors.Add(line, key, absl::StrCat("unknown key; keys are ", KnownFields()));
        ok = false;
        continue;
      }
      if (key == "podsets" && value.is_array()) {
        record.pod_sets = JsonPodSets(value, line, &errors);
        ok = ok && record.pod_sets.has_value();
        continue;
      }
      bool scalar_ok = true;
      std::optional<std::string> t = ScalarText(value, &scalar_ok);
      if (!scalar_ok) {
        errors.Add(line, key, absl::StrCat(value.dump(), " must be a string or a number"));
        ok = false;
        continue;
      }
      if (t.has_value() && !t->empty()) record.fields[key] = *t;
    }
    if (!ok) continue;
    std::optional<TraceWorkload> w = BuildTraceWorkload(record, index, &errors);
    if (w.has_value()) {
      trace.workloads.push_back(*std::move(w));
      record_lines.push_back(line);
    }
  }
  return Finish(std::move(trace), record_lines, errors);
}

}  // namespace gangkeeper::sim
