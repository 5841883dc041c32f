// gangkeeper sim: trace fields shared by every format, and reading a trace
// file (see trace.h).
#include "gangkeeper/sim/trace.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gangkeeper/quantity/quantity.h"
#include "src/sim/trace_fields.h"

namespace gangkeeper::sim {
namespace {

// About 31 years: far beyond any trace, far from overflowing sums of times.
constexpr int64_t kMaxDurationMs = int64_t{1'000'000'000'000};
constexpr int64_t kMaxPodsPerSet = 1'000'000;

const char kDurationHelp[] = "write seconds (90, 0.25) or a duration with units (250ms, 90s, 1h30m)";

bool IsDecimal(absl::string_view s) {
  bool digit = false, dot = false;
  for (char c : s) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      return false;
    }
  }
  return digit;
}

// A resource or pod-set name: no spaces and none of the form's separators.
bool IsPlainName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '[' || c == ']' || c == ';' || c == '=' ||
        c == '+' || c == ':' || c == ',') {
      return false;
    }
  }
  return true;
}

}  // namespace

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kCsv: return "csv";
    case TraceFormat::kJsonLines: return "jsonl";
    case TraceFormat::kKueueGenerator: return "kueue-generator";
  }
  return "csv";
}

absl::StatusOr<int64_t> ParseTraceDuration(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("empty duration: ", kDurationHelp));
  int64_t ms = 0;
  if (IsDecimal(text)) {
    // Seconds, exactly: integer part and up to three decimals.
    std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('.', 1));
    int64_t seconds = 0;
    if (!parts[0].empty() && (parts[0].size() > 12 || !absl::SimpleAtoi(parts[0], &seconds))) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too long a duration"));
    }
    int64_t fraction = 0;
    if (parts.size() == 2) {
      std::string digits(parts[1]);
      while (digits.size() > 3 && digits.back() == '0') digits.pop_back();
      if (digits.size() > 3) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", text, "\" is not a whole number of milliseconds: round it to 3 decimals"));
      }
      digits.resize(3, '0');
      if (!absl::SimpleAtoi(digits, &fraction)) fraction = 0;
    }
    ms = seconds * 1000 + fraction;
  } else {
    absl::Duration d;
    if (!absl::ParseDuration(text, &d) || d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a duration: ", kDurationHelp));
    }
    if (d < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is negative: times and durations are >= 0"));
    }
    if (d > absl::Milliseconds(kMaxDurationMs)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too long a duration"));
    }
    ms = absl::ToInt64Milliseconds(d);
    if (absl::Milliseconds(ms) != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\" is not a whole number of milliseconds: round it to 1ms"));
    }
  }
  if (ms > kMaxDurationMs) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too long a duration"));
  return ms;
}

absl::StatusOr<std::vector<workload::PodSet>> ParsePodSets(absl::string_view text) {
  const char kForm[] = "write COUNTx[RESOURCE=QUANTITY;...], several joined with +, e.g. 4x[nvidia.com/gpu=1;cpu=8]";
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("no pod sets: ", kForm));
  std::vector<workload::PodSet> out;
  std::set<std::string> names;
  std::vector<absl::string_view> parts = absl::StrSplit(text, '+');
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::string_view part = absl::StripAsciiWhitespace(parts[i]);
    const std::string where = parts.size() > 1 ? absl::StrCat("pod set ", i + 1, " (\"", part, "\")")
                                               : absl::StrCat("\"", part, "\"");
    workload::PodSet ps;
    if (size_t colon = part.find(':'); colon != absl::string_view::npos) {
      ps.name = std::string(absl::StripAsciiWhitespace(part.substr(0, colon)));
      if (!IsPlainName(ps.name)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": the pod set name before ':' is empty or malformed"));
      }
      part = absl::StripAsciiWhitespace(part.substr(colon + 1));
    }
    const size_t x = part.find('x');
    const size_t open = part.find('[');
    if (x == absl::string_view::npos || open == absl::string_view::npos || open < x || part.back() != ']') {
      return absl::InvalidArgumentError(absl::StrCat(where, " is not a pod set: ", kForm));
    }
    absl::string_view count_text = absl::StripAsciiWhitespace(part.substr(0, x));
    if (!absl::SimpleAtoi(count_text, &ps.count) || ps.count <= 0 || ps.count > kMaxPodsPerSet) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the pod count \"", count_text, "\" must be a whole number from 1 to ",
                       kMaxPodsPerSet));
    }
    if (!absl::StripAsciiWhitespace(part.substr(x + 1, open - x - 1)).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is not a pod set: ", kForm));
    }
    absl::string_view body = part.substr(open + 1, part.size() - open - 2);
    for (absl::string_view req : absl::StrSplit(body, ';', absl::SkipWhitespace())) {
      std::vector<absl::string_view> kv = absl::StrSplit(req, absl::MaxSplits('=', 1));
      absl::string_view resource = absl::StripAsciiWhitespace(kv[0]);
      if (kv.size() != 2 || !IsPlainName(resource)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"", absl::StripAsciiWhitespace(req), "\" is not RESOURCE=QUANTITY"));
      }
      absl::string_view qty_text = absl::StripAsciiWhitespace(kv[1]);
      absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(qty_text);
      if (!q.ok() || q->IsNegative()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", resource, "=", qty_text,
                                                       ": not a non-negative quantity (write 1, 500m, 16Gi)"));
      }
      if (!ps.requests.emplace(std::string(resource), *q).second) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", resource, " is requested twice"));
      }
    }
    if (ps.requests.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " requests nothing: name at least one resource"));
    }
    ps.limits = ps.requests;
    out.push_back(std::move(ps));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].name.empty()) out[i].name = out.size() == 1 ? "main" : absl::StrCat("podset-", i);
    if (!names.insert(out[i].name).second) {
      return absl::InvalidArgumentError(absl::StrCat("pod set name \"", out[i].name, "\" is used twice"));
    }
  }
  return out;
}

// --- Fields shared by CSV and JSON Lines. ---

const std::vector<std::string>& TraceFieldNames() {
  static const auto* names = new std::vector<std::string>{"time",     "namespace",  "queue", "podsets", "runtime",
                                                          "priority", "checkpoint", "name",  "class"};
  return *names;
}

bool IsRequiredTraceField(const std::string& name) {
  return name == "time" || name == "namespace" || name == "queue" || name == "podsets" || name == "runtime";
}

void TraceErrors::Add(int line, const std::string& field, const std::string& message) {
  if (full()) {
    ++dropped_;
    return;
  }
  std::string where = line > 0 ? absl::StrCat(file_, ":", line) : file_;
  messages_.push_back(field.empty() ? absl::StrCat(where, ": ", message)
                                    : absl::StrCat(where, ": field ", field, ": ", message));
}

absl::Status TraceErrors::ToStatus() const {
  if (messages_.empty()) return absl::OkStatus();
  std::string text = absl::StrJoin(messages_, "\n");
  if (dropped_ > 0) absl::StrAppend(&text, "\n(", dropped_, " more problems not shown)");
  return absl::InvalidArgumentError(text);
}

std::optional<TraceWorkload> BuildTraceWorkload(const TraceRecord& record, int index, TraceErrors* errors) {
  TraceWorkload w;
  bool ok = true;
  auto get = [&](const std::string& f) -> const std::string* {
    auto it = record.fields.find(f);
    return it == record.fields.end() ? nullptr : &it->second;
  };
  for (const std::string& f : TraceFieldNames()) {
    if (!IsRequiredTraceField(f) || get(f) != nullptr) continue;
    if (f == "podsets" && record.pod_sets.has_value()) continue;
    errors->Add(record.line, f, "required, but empty or missing");
    ok = false;
  }
  auto name_field = [&](const std::string& f, std::string* out) {
    const std::string* v = get(f);
    if (v == nullptr) return;
    if (v->find('/') != std::string::npos || v->find(' ') != std::string::npos) {
      errors->Add(record.line, f, absl::StrCat("\"", *v, "\" is not a Kubernetes name (no '/' or spaces)"));
      ok = false;
      return;
    }
    *out = *v;
  };
  name_field("namespace", &w.namespace_name);
  name_field("queue", &w.queue);
  name_field("name", &w.name);
  if (w.name.empty()) w.name = absl::StrCat("wl-", index);
  auto duration = [&](const std::string& f, int64_t* out) {
    const std::string* v = get(f);
    if (v == nullptr) return;
    absl::StatusOr<int64_t> d = ParseTraceDuration(*v);
    if (!d.ok()) {
      errors->Add(record.line, f, std::string(d.status().message()));
      ok = false;
      return;
    }
    *out = *d;
  };
  duration("time", &w.arrival_ms);
  duration("runtime", &w.runtime_ms);
  duration("checkpoint", &w.checkpoint_ms);
  if (get("runtime") != nullptr && ok && w.runtime_ms == 0) {
    errors->Add(record.line, "runtime", "must be more than 0");
    ok = false;
  }
  if (const std::string* p = get("priority")) {
    int32_t value = 0;
    if (absl::SimpleAtoi(*p, &value)) {
      w.priority = value;
    } else if (!p->empty() && (absl::ascii_isdigit(static_cast<unsigned char>((*p)[0])) || (*p)[0] == '-' ||
                               (*p)[0] == '+')) {
      errors->Add(record.line, "priority",
                  absl::StrCat("\"", *p, "\" is not a 32-bit integer (or a priority class name)"));
      ok = false;
    } else {
      w.priority_class = *p;
    }
  }
  if (const std::string* c = get("class")) {
    w.class_name = *c;
  } else if (const std::string* p = get("priority")) {
    w.class_name = *p;
  } else {
    w.class_name = "0";
  }
  if (record.pod_sets.has_value()) {
    w.pod_sets = *record.pod_sets;
  } else if (const std::string* ps = get("podsets")) {
    absl::StatusOr<std::vector<workload::PodSet>> sets = ParsePodSets(*ps);
    if (!sets.ok()) {
      errors->Add(record.line, "podsets", std::string(sets.status().message()));
      ok = false;
    } else {
      w.pod_sets = *std::move(sets);
    }
  }
  w.source = absl::StrCat(errors->file(), ":", record.line);
  if (!ok) return std::nullopt;
  return w;
}

void CheckUniqueNames(const std::vector<TraceWorkload>& workloads, const std::vector<int>& lines,
                      TraceErrors* errors) {
  std::map<std::pair<std::string, std::string>, int> seen;
  for (size_t i = 0; i < workloads.size(); ++i) {
    auto [it, inserted] = seen.emplace(std::make_pair(workloads[i].namespace_name, workloads[i].name), lines[i]);
    if (!inserted) {
      errors->Add(lines[i], "name",
                  absl::StrCat("workload ", workloads[i].namespace_name, "/", workloads[i].name,
                               " is already named on line ", it->second, ": names are unique in a namespace"));
    }
  }
}

// --- Files. ---

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is a directory: --workload names one trace file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot be read"));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::string ext = absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (ext == ".csv") return ParseCsvTrace(text, path);
  if (ext == ".jsonl" || ext == ".ndjson") return ParseJsonLinesTrace(text, path);
  if (ext == ".yaml" || ext == ".yml") return ParseKueueGenerator(text, path);
  // By content: the first line that is not blank or a comment.
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    if (absl::StartsWith(line, "{")) return ParseJsonLinesTrace(text, path);
    if (absl::StartsWith(line, "cohorts:") || absl::StartsWith(line, "resourceFlavor:")) {
      return ParseKueueGenerator(text, path);
    }
    break;
  }
  return ParseCsvTrace(text, path);
}

}  // namespace gangkeeper::sim
