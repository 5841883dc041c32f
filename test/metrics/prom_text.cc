// gangkeeper tests: the strict Prometheus text format 0.0.4 parser (see
// prom_text.h). Lines are read one at a time into the open family; the rules
// that span lines (histogram buckets against _count, summary quantile order)
// are checked when the family closes.
#include "test/metrics/prom_text.h"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gangkeeper::testing {
namespace {

using Labels = std::map<std::string, std::string>;

constexpr absl::string_view kTypes[] = {"counter", "gauge", "histogram", "summary", "untyped"};
constexpr absl::string_view kHistogramSuffixes[] = {"_bucket", "_sum", "_count"};
constexpr absl::string_view kSummarySuffixes[] = {"_sum", "_count"};

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsMetricNameChar(char c) { return IsLetter(c) || IsDigit(c) || c == '_' || c == ':'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(absl::string_view name) {
  if (name.empty() || IsDigit(name[0])) return false;
  for (char c : name) {
    if (!IsMetricNameChar(c)) return false;
  }
  return true;
}

// [a-zA-Z_][a-zA-Z0-9_]*
bool IsValidLabelName(absl::string_view name) {
  if (name.empty() || IsDigit(name[0])) return false;
  for (char c : name) {
    if (!IsLetter(c) && !IsDigit(c) && c != '_') return false;
  }
  return true;
}

// Well-formed UTF-8: no stray continuation bytes, overlong forms, surrogates
// or code points above U+10FFFF.
bool IsValidUtf8(absl::string_view s) {
  static constexpr uint32_t kMinCodePoint[] = {0, 0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    unsigned char lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t code_point = 0;
    if ((lead & 0xE0) == 0xC0) {
      len = 2;
      code_point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      len = 3;
      code_point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      len = 4;
      code_point = lead & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char next = static_cast<unsigned char>(s[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3F);
    }
    if (code_point < kMinCodePoint[len] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

// `s` in double quotes for an error message, non-printable bytes C-escaped.
std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }
std::string Quote(char c) { return Quote(absl::string_view(&c, 1)); }

// `name{a="1",b="2"}` (label values escaped as in the text format) for error
// messages; just `name` without labels.
std::string Series(absl::string_view name, const Labels& labels) {
  std::string out(name);
  if (labels.empty()) return out;
  out.push_back('{');
  bool first = true;
  for (const auto& [label, value] : labels) {
    if (!first) out.push_back(',');
    first = false;
    absl::StrAppend(&out, label, "=\"");
    for (char c : value) {
      if (c == '\\' || c == '"') {
        out.push_back('\\');
        out.push_back(c);
      } else if (c == '\n') {
        out.append("\\n");
      } else {
        out.push_back(c);
      }
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

Labels Without(const Labels& labels, absl::string_view label) {
  Labels out = labels;
  out.erase(std::string(label));
  return out;
}

absl::Status Error(absl::string_view what) { return absl::InvalidArgumentError(what); }

absl::Status AtLine(int line, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", status.message()));
}
absl::Status AtLine(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// Whether the decimal number `digits` (mantissa of digits with at most one
// '.', then optionally e[+-]digits) that std::from_chars found out of range is
// too large (true) or too small (false) for a double.
bool Overflows(absl::string_view digits, size_t mantissa_end) {
  absl::string_view mantissa = digits.substr(0, mantissa_end);
  size_t dot = mantissa.find('.');
  if (dot == absl::string_view::npos) dot = mantissa.size();
  size_t first = mantissa.find_first_not_of("0.");
  if (first == absl::string_view::npos) return false;  // zero
  // Decimal exponent of the first significant digit.
  int64_t lead = first < dot ? static_cast<int64_t>(dot - first - 1) : -static_cast<int64_t>(first - dot);
  if (mantissa_end == digits.size()) return lead >= 0;
  absl::string_view exp_text = digits.substr(mantissa_end + 1);
  bool exp_negative = exp_text[0] == '-';
  if (exp_text[0] == '+' || exp_text[0] == '-') exp_text.remove_prefix(1);
  int64_t exponent = 0;
  std::from_chars_result r = std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  if (r.ec != std::errc()) return !exp_negative;  // an exponent beyond int64 decides alone
  return lead + (exp_negative ? -exponent : exponent) >= 0;
}

// A sample value, `le` or `quantile`: decimal notation
// [+-](digits[.digits] | .digits)[(e|E)[+-]digits], or exactly +Inf, -Inf, NaN.
absl::StatusOr<double> ParseFloat(absl::string_view text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  absl::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  auto count_digits = [&](size_t from) {
    size_t n = 0;
    while (from + n < digits.size() && IsDigit(digits[from + n])) ++n;
    return n;
  };
  size_t i = count_digits(0);
  size_t mantissa_digits = i;
  if (i < digits.size() && digits[i] == '.') {
    size_t fraction = count_digits(i + 1);
    mantissa_digits += fraction;
    i += 1 + fraction;
  }
  bool ok = mantissa_digits > 0;
  size_t mantissa_end = i;
  if (ok && i < digits.size() && (digits[i] == 'e' || digits[i] == 'E')) {
    ++i;
    if (i < digits.size() && (digits[i] == '+' || digits[i] == '-')) ++i;
    size_t exponent_digits = count_digits(i);
    ok = exponent_digits > 0;
    i += exponent_digits;
  }
  if (!ok || i != digits.size()) {
    return Error(absl::StrCat(Quote(text), " is not a number (want decimal notation, +Inf, -Inf or NaN)"));
  }
  double value = 0;
  std::from_chars_result r = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (r.ec == std::errc::result_out_of_range) {
    if (Overflows(digits, mantissa_end)) {
      return Error(absl::StrCat(Quote(text), " is out of the range of a 64-bit float"));
    }
    value = 0;  // underflow reads as zero, as in Go's ParseFloat
  } else if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
    return Error(absl::StrCat(Quote(text), " is not a number"));
  }
  return negative ? -value : value;
}

// An int64 in decimal, optionally signed (Go's ParseInt(s, 10, 64)).
absl::StatusOr<int64_t> ParseTimestamp(absl::string_view text) {
  absl::string_view digits = text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  absl::string_view unsigned_digits = digits;
  if (!unsigned_digits.empty() && unsigned_digits[0] == '-') unsigned_digits.remove_prefix(1);
  bool ok = !unsigned_digits.empty();
  for (char c : unsigned_digits) ok = ok && IsDigit(c);
  int64_t value = 0;
  if (ok) {
    std::from_chars_result r = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (r.ec == std::errc::result_out_of_range) {
      return Error(absl::StrCat("timestamp ", Quote(text), " is out of the range of int64"));
    }
    ok = r.ec == std::errc() && r.ptr == digits.data() + digits.size();
  }
  if (!ok) return Error(absl::StrCat("timestamp ", Quote(text), " is not an integer (milliseconds)"));
  return value;
}

// HELP text: \\ and \n are the only escapes.
absl::StatusOr<std::string> UnescapeHelp(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 1 == text.size()) return Error("HELP text ends in a lone backslash");
    char escaped = text[++i];
    if (escaped == '\\') {
      out.push_back('\\');
    } else if (escaped == 'n') {
      out.push_back('\n');
    } else {
      return Error(absl::StrCat("invalid escape sequence ", Quote(absl::StrCat("\\", std::string(1, escaped))),
                                " in HELP text (only \\\\ and \\n)"));
    }
  }
  if (!IsValidUtf8(out)) return Error("HELP text is not valid UTF-8");
  return out;
}

// A position in one line (without its '\n').
class Cursor {
 public:
  explicit Cursor(absl::string_view line) : line_(line) {}

  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return line_[pos_]; }
  void Advance() { ++pos_; }
  absl::string_view Rest() const { return line_.substr(pos_); }

  // Skips blanks and tabs; returns whether there were any.
  bool SkipBlanks() {
    size_t start = pos_;
    while (!AtEnd() && IsBlank(Peek())) ++pos_;
    return pos_ > start;
  }
  // Reads up to the next blank, tab or the end of the line.
  absl::string_view Token() {
    size_t start = pos_;
    while (!AtEnd() && !IsBlank(Peek())) ++pos_;
    return line_.substr(start, pos_ - start);
  }
  absl::string_view NameChars() {
    size_t start = pos_;
    while (!AtEnd() && IsMetricNameChar(Peek())) ++pos_;
    return line_.substr(start, pos_ - start);
  }

 private:
  absl::string_view line_;
  size_t pos_ = 0;
};

// Reads a label value after its opening quote, through its closing quote.
absl::Status ReadLabelValue(Cursor& c, absl::string_view label, std::string* value) {
  while (true) {
    if (c.AtEnd()) return Error(absl::StrCat("value of label ", label, " has no closing '\"'"));
    char ch = c.Peek();
    c.Advance();
    if (ch == '"') break;
    if (ch != '\\') {
      value->push_back(ch);
      continue;
    }
    if (c.AtEnd()) return Error(absl::StrCat("value of label ", label, " has no closing '\"'"));
    char escaped = c.Peek();
    c.Advance();
    if (escaped == '\\') {
      value->push_back('\\');
    } else if (escaped == '"') {
      value->push_back('"');
    } else if (escaped == 'n') {
      value->push_back('\n');
    } else {
      return Error(absl::StrCat("invalid escape sequence ", Quote(absl::StrCat("\\", std::string(1, escaped))),
                                " in the value of label ", label, " (only \\\\, \\\" and \\n)"));
    }
  }
  if (!IsValidUtf8(*value)) return Error(absl::StrCat("value of label ", label, " is not valid UTF-8"));
  return absl::OkStatus();
}

// Reads `a="1",b="2"}` after the opening brace: at least one label, an
// optional trailing comma.
absl::Status ReadLabels(Cursor& c, Labels* labels) {
  while (true) {
    c.SkipBlanks();
    if (c.AtEnd()) return Error("label set has no closing '}'");
    if (c.Peek() == '}') {
      c.Advance();
      if (labels->empty()) return Error("empty label set \"{}\" (leave the braces out)");
      return absl::OkStatus();
    }
    absl::string_view label = c.NameChars();
    if (label.empty()) return Error(absl::StrCat("expected a label name, found ", Quote(c.Peek())));
    if (!IsValidLabelName(label)) {
      return Error(absl::StrCat("invalid label name ", Quote(label), " (must match [a-zA-Z_][a-zA-Z0-9_]*)"));
    }
    if (absl::StartsWith(label, "__")) {
      return Error(absl::StrCat("label name ", Quote(label), " starts with \"__\", which is reserved"));
    }
    c.SkipBlanks();
    if (c.AtEnd() || c.Peek() != '=') return Error(absl::StrCat("expected '=' after label name ", label));
    c.Advance();
    c.SkipBlanks();
    if (c.AtEnd() || c.Peek() != '"') {
      return Error(absl::StrCat("expected '\"' to open the value of label ", label));
    }
    c.Advance();
    std::string value;
    if (absl::Status s = ReadLabelValue(c, label, &value); !s.ok()) return s;
    if (!labels->emplace(std::string(label), std::move(value)).second) {
      return Error(absl::StrCat("label ", label, " appears twice in one sample"));
    }
    c.SkipBlanks();
    if (c.AtEnd()) return Error("label set has no closing '}'");
    if (c.Peek() == ',') {
      c.Advance();
    } else if (c.Peek() != '}') {
      return Error(absl::StrCat("expected ',' or '}' after the value of label ", label, ", found ", Quote(c.Peek())));
    }
  }
}

// name [{labels}] value [timestamp], leading and trailing blanks removed.
absl::StatusOr<PromSample> ParseSampleLine(absl::string_view line) {
  Cursor c(line);
  PromSample sample;
  absl::string_view name = c.NameChars();
  if (name.empty()) return Error(absl::StrCat("expected a metric name, found ", Quote(c.Peek())));
  if (!IsValidMetricName(name)) {
    return Error(absl::StrCat("invalid metric name ", Quote(name), " (must match [a-zA-Z_:][a-zA-Z0-9_:]*)"));
  }
  sample.name = std::string(name);
  bool blank = c.SkipBlanks();
  if (!c.AtEnd() && c.Peek() == '{') {
    c.Advance();
    if (absl::Status s = ReadLabels(c, &sample.labels); !s.ok()) {
      return Error(absl::StrCat("sample ", name, ": ", s.message()));
    }
    c.SkipBlanks();
  } else if (!c.AtEnd() && !blank) {
    return Error(absl::StrCat("invalid character ", Quote(c.Peek()), " after metric name ", name));
  }
  std::string series = Series(name, sample.labels);
  if (c.AtEnd()) return Error(absl::StrCat("sample ", series, " has no value"));
  absl::StatusOr<double> value = ParseFloat(c.Token());
  if (!value.ok()) return Error(absl::StrCat("sample ", series, ": value ", value.status().message()));
  sample.value = *value;
  c.SkipBlanks();
  if (c.AtEnd()) return sample;
  absl::StatusOr<int64_t> timestamp = ParseTimestamp(c.Token());
  if (!timestamp.ok()) return Error(absl::StrCat("sample ", series, ": ", timestamp.status().message()));
  sample.timestamp_ms = *timestamp;
  c.SkipBlanks();
  if (!c.AtEnd()) {
    return Error(absl::StrCat("sample ", series, ": unexpected ", Quote(c.Rest()), " after the timestamp"));
  }
  return sample;
}

// Whether a sample named `sample` is a series of `family`.
bool IsSeriesOf(const PromFamily& family, absl::string_view sample) {
  if (family.type == "histogram" || family.type == "summary") {
    if (family.type == "summary" && sample == family.name) return true;
    if (!absl::StartsWith(sample, family.name)) return false;
    absl::string_view suffix = sample.substr(family.name.size());
    for (absl::string_view s : family.type == "histogram" ? absl::MakeConstSpan(kHistogramSuffixes)
                                                          : absl::MakeConstSpan(kSummarySuffixes)) {
      if (suffix == s) return true;
    }
    return false;
  }
  return sample == family.name;
}

std::string SeriesNamesOf(const PromFamily& family) {
  if (family.type == "histogram") return absl::StrCat(family.name, "_bucket, ", family.name, "_sum and ", family.name, "_count");
  if (family.type == "summary") return absl::StrCat(family.name, ", ", family.name, "_sum and ", family.name, "_count");
  return family.name;
}

// The family being read and what the checks at its end need.
struct OpenFamily {
  PromFamily family;
  int first_line = 0;
  int help_line = 0;  // 0 until a HELP line was read
  int type_line = 0;  // 0 until a TYPE line was read
  std::vector<int> sample_lines;  // parallel to family.samples
  std::map<std::pair<std::string, Labels>, int> series_lines;
};

class Parser {
 public:
  absl::StatusOr<std::vector<PromFamily>> Parse(absl::string_view text);

 private:
  absl::Status OnComment(int line, absl::string_view after_hash);
  absl::Status OnSample(int line, absl::string_view text);
  absl::Status CheckSample(int line, const PromSample& sample);
  // The open family named `name` for a HELP or TYPE line, started if new.
  absl::StatusOr<OpenFamily*> FamilyForMetadata(int line, absl::string_view name, absl::string_view keyword);
  absl::Status StartFamily(int line, absl::string_view name);
  absl::Status CloseFamily();
  absl::Status CheckHistogram(const OpenFamily& open) const;
  absl::Status CheckSummary(const OpenFamily& open) const;

  std::vector<PromFamily> done_;
  std::optional<OpenFamily> open_;
  // Every sample name a family has taken (its own name; a histogram's or
  // summary's _bucket, _sum, _count) → that family's name.
  std::map<std::string, std::string, std::less<>> owners_;
};

absl::StatusOr<std::vector<PromFamily>> Parser::Parse(absl::string_view text) {
  int line = 0;
  size_t start = 0;
  while (start < text.size()) {
    ++line;
    size_t end = text.find('\n', start);
    if (end == absl::string_view::npos) return AtLine(line, "the text does not end with a newline");
    absl::string_view content = text.substr(start, end - start);
    start = end + 1;
    while (!content.empty() && IsBlank(content.front())) content.remove_prefix(1);
    while (!content.empty() && IsBlank(content.back())) content.remove_suffix(1);
    if (content.empty()) continue;
    absl::Status s = content[0] == '#' ? OnComment(line, content.substr(1)) : OnSample(line, content);
    if (!s.ok()) return s;
  }
  if (open_) {
    if (absl::Status s = CloseFamily(); !s.ok()) return s;
  }
  return std::move(done_);
}

absl::Status Parser::OnComment(int line, absl::string_view after_hash) {
  Cursor c(after_hash);
  c.SkipBlanks();
  absl::string_view keyword = c.Token();
  if (keyword != "HELP" && keyword != "TYPE") return absl::OkStatus();  // a plain comment
  c.SkipBlanks();
  absl::string_view name = c.Token();
  if (name.empty()) return AtLine(line, absl::StrCat(keyword, " line without a metric name"));
  if (!IsValidMetricName(name)) {
    return AtLine(line, absl::StrCat(keyword, " line: invalid metric name ", Quote(name),
                                     " (must match [a-zA-Z_:][a-zA-Z0-9_:]*)"));
  }
  c.SkipBlanks();
  if (keyword == "HELP") {
    absl::StatusOr<std::string> help = UnescapeHelp(c.Rest());
    if (!help.ok()) return AtLine(line, absl::StrCat("HELP line for ", name, ": ", help.status().message()));
    absl::StatusOr<OpenFamily*> open = FamilyForMetadata(line, name, keyword);
    if (!open.ok()) return open.status();
    if ((*open)->help_line != 0) {
      return AtLine(line, absl::StrCat("second HELP line for ", name, " (the first is line ", (*open)->help_line, ")"));
    }
    (*open)->help_line = line;
    (*open)->family.help = *std::move(help);
    return absl::OkStatus();
  }
  absl::string_view type = c.Token();
  if (type.empty()) return AtLine(line, absl::StrCat("TYPE line for ", name, " without a type"));
  c.SkipBlanks();
  if (!c.AtEnd()) {
    return AtLine(line, absl::StrCat("TYPE line for ", name, ": unexpected ", Quote(c.Rest()), " after the type"));
  }
  bool known = false;
  for (absl::string_view t : kTypes) known = known || t == type;
  if (!known) {
    return AtLine(line, absl::StrCat("TYPE line for ", name, ": unknown type ", Quote(type),
                                     " (counter, gauge, histogram, summary or untyped)"));
  }
  absl::StatusOr<OpenFamily*> open = FamilyForMetadata(line, name, keyword);
  if (!open.ok()) return open.status();
  if ((*open)->type_line != 0) {
    return AtLine(line, absl::StrCat("second TYPE line for ", name, " (the first is line ", (*open)->type_line, ")"));
  }
  (*open)->type_line = line;
  (*open)->family.type = std::string(type);
  absl::Span<const absl::string_view> suffixes;
  if (type == "histogram") suffixes = kHistogramSuffixes;
  if (type == "summary") suffixes = kSummarySuffixes;
  for (absl::string_view suffix : suffixes) {
    std::string series = absl::StrCat(name, suffix);
    auto it = owners_.find(series);
    if (it != owners_.end()) {
      return AtLine(line, absl::StrCat(type, " ", name, " needs the sample name ", series,
                                       ", which family ", it->second, " already uses"));
    }
    owners_.emplace(series, std::string(name));
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenFamily*> Parser::FamilyForMetadata(int line, absl::string_view name, absl::string_view keyword) {
  if (open_ && open_->family.name == name) {
    if (!open_->family.samples.empty()) {
      return AtLine(line, absl::StrCat(keyword, " line for ", name, " after its first sample (line ",
                                       open_->sample_lines.front(), "); HELP and TYPE come first"));
    }
    return &*open_;
  }
  auto it = owners_.find(name);
  if (it != owners_.end()) {
    if (it->second == name) {
      return AtLine(line, absl::StrCat(keyword, " line for ", name,
                                       ", whose family appeared earlier; a family's lines must form one group"));
    }
    return AtLine(line, absl::StrCat(keyword, " line for ", name, ", which is a sample name of family ", it->second));
  }
  if (absl::Status s = StartFamily(line, name); !s.ok()) return s;
  return &*open_;
}

absl::Status Parser::StartFamily(int line, absl::string_view name) {
  if (open_) {
    if (absl::Status s = CloseFamily(); !s.ok()) return s;
  }
  open_.emplace();
  open_->family.name = std::string(name);
  open_->family.type = "untyped";
  open_->first_line = line;
  owners_.emplace(std::string(name), std::string(name));
  return absl::OkStatus();
}

absl::Status Parser::OnSample(int line, absl::string_view text) {
  absl::StatusOr<PromSample> sample = ParseSampleLine(text);
  if (!sample.ok()) return AtLine(line, sample.status());
  if (!open_ || !IsSeriesOf(open_->family, sample->name)) {
    auto it = owners_.find(sample->name);
    if (it != owners_.end()) {
      if (open_ && it->second == open_->family.name) {
        return AtLine(line, absl::StrCat(open_->family.type, " ", open_->family.name, " has no sample name ",
                                         sample->name, " (only ", SeriesNamesOf(open_->family), ")"));
      }
      return AtLine(line, absl::StrCat("sample ", sample->name, " of family ", it->second,
                                       ", which appeared earlier; a family's lines must form one group"));
    }
    if (absl::Status s = StartFamily(line, sample->name); !s.ok()) return s;
  }
  if (absl::Status s = CheckSample(line, *sample); !s.ok()) return s;
  auto [it, inserted] = open_->series_lines.emplace(std::make_pair(sample->name, sample->labels), line);
  if (!inserted) {
    return AtLine(line, absl::StrCat("series ", Series(sample->name, sample->labels),
                                     " appears twice (first on line ", it->second, ")"));
  }
  open_->family.samples.push_back(*std::move(sample));
  open_->sample_lines.push_back(line);
  return absl::OkStatus();
}

// The checks one sample line allows on its own.
absl::Status Parser::CheckSample(int line, const PromSample& sample) {
  const PromFamily& family = open_->family;
  std::string series = Series(sample.name, sample.labels);
  auto require_count = [&](absl::string_view what) -> absl::Status {
    if (sample.value >= 0) return absl::OkStatus();
    return AtLine(line, absl::StrCat(what, " ", series, " is ", sample.value, "; it must be >= 0"));
  };
  auto forbid_label = [&](absl::string_view label) -> absl::Status {
    if (sample.labels.count(std::string(label)) == 0) return absl::OkStatus();
    return AtLine(line, absl::StrCat(family.type, " sample ", series, " must not have the label ", label));
  };
  // The value of `label` as a number, or an error.
  auto numeric_label = [&](absl::string_view label) -> absl::StatusOr<double> {
    auto it = sample.labels.find(std::string(label));
    if (it == sample.labels.end()) {
      return AtLine(line, absl::StrCat(family.type, " sample ", series, " has no ", label, " label"));
    }
    absl::StatusOr<double> value = ParseFloat(it->second);
    if (!value.ok()) return AtLine(line, absl::StrCat(series, ": ", label, " ", value.status().message()));
    if (std::isnan(*value)) return AtLine(line, absl::StrCat(series, ": ", label, " is NaN"));
    return value;
  };

  if (family.type == "counter") return require_count("counter");
  if (family.type == "histogram") {
    if (sample.name == family.name + "_bucket") {
      absl::StatusOr<double> le = numeric_label("le");
      if (!le.ok()) return le.status();
      return require_count("bucket");
    }
    if (absl::Status s = forbid_label("le"); !s.ok()) return s;
    if (sample.name == family.name + "_count") return require_count("count");
    return absl::OkStatus();
  }
  if (family.type == "summary") {
    if (sample.name == family.name) {
      absl::StatusOr<double> quantile = numeric_label("quantile");
      if (!quantile.ok()) return quantile.status();
      if (*quantile < 0 || *quantile > 1) {
        return AtLine(line, absl::StrCat(series, ": quantile ", *quantile, " is outside [0, 1]"));
      }
      return absl::OkStatus();
    }
    if (absl::Status s = forbid_label("quantile"); !s.ok()) return s;
    if (sample.name == family.name + "_count") return require_count("count");
  }
  return absl::OkStatus();
}

absl::Status Parser::CloseFamily() {
  OpenFamily open = *std::move(open_);
  open_.reset();
  if (open.family.type == "histogram") {
    if (absl::Status s = CheckHistogram(open); !s.ok()) return s;
  }
  if (open.family.type == "summary") {
    if (absl::Status s = CheckSummary(open); !s.ok()) return s;
  }
  done_.push_back(std::move(open.family));
  return absl::OkStatus();
}

// One label set (without `le` or `quantile`) of a histogram or summary.
struct Group {
  struct Point {
    double bound;  // le or quantile
    std::string bound_text;
    double value;
    int line;
  };
  Labels labels;
  std::vector<Point> points;  // buckets or quantiles, in text order
  std::optional<std::pair<double, int>> sum;  // value, line
  std::optional<std::pair<double, int>> count;
  int last_line = 0;
};

// Splits a histogram's or summary's samples by label set, in order of first
// appearance. `bound_label` is "le" or "quantile"; CheckSample() made sure it
// parses.
std::vector<Group> GroupSamples(const OpenFamily& open, absl::string_view point_name, absl::string_view bound_label) {
  const PromFamily& family = open.family;
  std::vector<Group> groups;
  std::map<Labels, size_t> index;
  for (size_t i = 0; i < family.samples.size(); ++i) {
    const PromSample& sample = family.samples[i];
    int line = open.sample_lines[i];
    Labels labels = Without(sample.labels, bound_label);
    auto [it, inserted] = index.emplace(labels, groups.size());
    if (inserted) groups.push_back(Group{.labels = std::move(labels)});
    Group& group = groups[it->second];
    group.last_line = line;
    if (sample.name == point_name) {
      const std::string& text = sample.labels.at(std::string(bound_label));
      group.points.push_back({ParseFloat(text).value_or(0), text, sample.value, line});
    } else if (sample.name == family.name + "_sum") {
      group.sum = std::make_pair(sample.value, line);
    } else {
      group.count = std::make_pair(sample.value, line);
    }
  }
  return groups;
}

absl::Status Parser::CheckHistogram(const OpenFamily& open) const {
  const std::string& name = open.family.name;
  for (const Group& group : GroupSamples(open, name + "_bucket", "le")) {
    std::string where = absl::StrCat("histogram ", Series(name, group.labels));
    const std::vector<Group::Point>& buckets = group.points;
    for (size_t i = 1; i < buckets.size(); ++i) {
      const Group::Point& prev = buckets[i - 1];
      const Group::Point& cur = buckets[i];
      if (!(prev.bound < cur.bound)) {
        return AtLine(cur.line, absl::StrCat(where, ": bucket le=\"", cur.bound_text, "\" follows le=\"",
                                             prev.bound_text, "\"; buckets must be in increasing le order"));
      }
      if (cur.value < prev.value) {
        return AtLine(cur.line, absl::StrCat(where, ": bucket le=\"", cur.bound_text, "\" counts ", cur.value,
                                             ", less than ", prev.value, " in le=\"", prev.bound_text,
                                             "\"; buckets are cumulative"));
      }
    }
    if (buckets.empty() || buckets.back().bound != std::numeric_limits<double>::infinity()) {
      return AtLine(buckets.empty() ? group.last_line : buckets.back().line,
                    absl::StrCat(where, " has no le=\"+Inf\" bucket"));
    }
    if (!group.sum) return AtLine(group.last_line, absl::StrCat(where, " has no ", name, "_sum sample"));
    if (!group.count) return AtLine(group.last_line, absl::StrCat(where, " has no ", name, "_count sample"));
    if (group.count->first != buckets.back().value) {
      return AtLine(group.count->second, absl::StrCat(where, ": ", name, "_count is ", group.count->first,
                                                      " but the le=\"+Inf\" bucket is ", buckets.back().value,
                                                      "; they must be equal"));
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::CheckSummary(const OpenFamily& open) const {
  const std::string& name = open.family.name;
  for (const Group& group : GroupSamples(open, name, "quantile")) {
    std::string where = absl::StrCat("summary ", Series(name, group.labels));
    for (size_t i = 1; i < group.points.size(); ++i) {
      const Group::Point& prev = group.points[i - 1];
      const Group::Point& cur = group.points[i];
      if (!(prev.bound < cur.bound)) {
        return AtLine(cur.line, absl::StrCat(where, ": quantile=\"", cur.bound_text, "\" follows quantile=\"",
                                             prev.bound_text, "\"; quantiles must be in increasing order"));
      }
    }
    if (!group.sum) return AtLine(group.last_line, absl::StrCat(where, " has no ", name, "_sum sample"));
    if (!group.count) return AtLine(group.last_line, absl::StrCat(where, " has no ", name, "_count sample"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<PromFamily>> ParsePromText(std::string_view text) {
  return Parser().Parse(absl::string_view(text.data(), text.size()));
}

absl::StatusOr<double> PromValue(const std::vector<PromFamily>& fams, std::string_view sample_name,
                                 const std::map<std::string, std::string>& labels) {
  const PromSample* found = nullptr;
  for (const PromFamily& family : fams) {
    for (const PromSample& sample : family.samples) {
      if (sample.name != sample_name || sample.labels != labels) continue;
      if (found != nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("more than one sample ", Series(absl::string_view(sample_name.data(), sample_name.size()), labels)));
      }
      found = &sample;
    }
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no sample ", Series(absl::string_view(sample_name.data(), sample_name.size()), labels)));
  }
  return found->value;
}

}  // namespace gangkeeper::testing
