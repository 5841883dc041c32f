// gangkeeper model: YAML/JSON documents (see documents.h).
#include "src/model/documents.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gangkeeper::model {
namespace {

constexpr int kMaxDepth = 128;
constexpr size_t kMaxNodes = 1 << 20;  // after alias expansion

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), the same rule nlohmann applies when it
// writes JSON.
bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const unsigned char ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

struct Converter {
  size_t nodes = 0;
  std::string error;

  // yaml-cpp passes invalid bytes (and "\ud800" escapes) through; such a
  // string could not be written back as JSON by the journal or the API, and
  // kubectl refuses it too.
  bool CheckUtf8(const YAML::Node& node, const std::string& s) {
    if (IsUtf8(s)) return true;
    error = absl::StrCat("line ", node.Mark().line + 1, ": text is not valid UTF-8; save the file as UTF-8");
    return false;
  }

  nlohmann::json Convert(const YAML::Node& node, int depth) {
    if (!error.empty()) return nullptr;
    if (++nodes > kMaxNodes) {
      error = "document too large (over a million nodes after expanding aliases)";
      return nullptr;
    }
    if (depth > kMaxDepth) {
      error = absl::StrCat("document nested deeper than ", kMaxDepth, " levels");
      return nullptr;
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return nullptr;
      case YAML::NodeType::Scalar: {
        const std::string& s = node.Scalar();
        if (node.Tag() != "!" && (s == "null" || s == "~" || s == "Null" || s == "NULL")) return nullptr;
        if (!CheckUtf8(node, s)) return nullptr;
        return s;
      }
      case YAML::NodeType::Sequence: {
        nlohmann::json arr = nlohmann::json::array();
        for (const YAML::Node& item : node) arr.push_back(Convert(item, depth + 1));
        return arr;
      }
      case YAML::NodeType::Map: {
        nlohmann::json obj = nlohmann::json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            error = absl::StrCat("line ", kv.first.Mark().line + 1, ": map keys must be plain strings");
            return nullptr;
          }
          if (!CheckUtf8(kv.first, kv.first.Scalar())) return nullptr;
          obj[kv.first.Scalar()] = Convert(kv.second, depth + 1);
        }
        return obj;
      }
    }
    return nullptr;
  }
};

// A line that starts a new YAML document: "---" alone, or followed by a
// space or comment. "..." ends a document.
bool IsSeparator(absl::string_view line, bool* end_marker) {
  absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(line);
  *end_marker = trimmed == "...";
  if (*end_marker) return true;
  if (!absl::StartsWith(trimmed, "---")) return false;
  return trimmed.size() == 3 || trimmed[3] == ' ' || trimmed[3] == '\t' || trimmed[3] == '#';
}

std::vector<Document> ParseYaml(absl::string_view text) {
  // Split at separators ourselves so a syntax error in one document does not
  // lose the others; keep each piece's first line for error positions.
  struct Piece {
    std::string text;
    int first_line;
  };
  std::vector<Piece> pieces;
  pieces.push_back({"", 1});
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    bool end_marker = false;
    if (IsSeparator(line, &end_marker)) {
      pieces.push_back({"", line_no + 1});
      if (!end_marker) {
        // Content after "--- " on the same line belongs to the new document.
        absl::string_view rest = absl::StripLeadingAsciiWhitespace(line.substr(3));
        if (!rest.empty() && rest[0] != '#') absl::StrAppend(&pieces.back().text, rest, "\n");
      }
      continue;
    }
    absl::StrAppend(&pieces.back().text, line, "\n");
  }
  std::vector<Document> docs;
  int index = 0;
  for (const Piece& p : pieces) {
    bool blank = true;
    for (absl::string_view line : absl::StrSplit(p.text, '\n')) {
      absl::string_view t = absl::StripAsciiWhitespace(line);
      if (!t.empty() && t[0] != '#' && !absl::StartsWith(t, "%")) blank = false;
    }
    if (blank) continue;  // comments or directives only: not a document
    Document d;
    d.index = ++index;
    try {
      YAML::Node node = YAML::Load(p.text);
      Converter c;
      d.value = c.Convert(node, 0);
      if (!c.error.empty()) d.error = c.error;
    } catch (const YAML::Exception& e) {
      d.error = absl::StrCat("YAML syntax error at line ", p.first_line + e.mark.line, ", column ", e.mark.column + 1,
                             ": ", e.msg);
      d.value = nullptr;
    } catch (const std::exception& e) {
      d.error = absl::StrCat("cannot parse YAML: ", e.what());
      d.value = nullptr;
    }
    docs.push_back(std::move(d));
  }
  return docs;
}

// The deepest [ / { nesting in `text`. Both parsers recurse per level, so
// hostile input is refused before them. With `json_strings`, brackets inside
// JSON strings ("...", backslash escapes) are skipped: that is exact for JSON
// and never below the nesting nlohmann reaches before it rejects a text, since
// its lexer delimits strings the same way. Without it, quotes are ignored (an
// over-estimate, needed for YAML, whose quoting rules differ).
int FlowDepth(absl::string_view text, bool json_strings) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (json_strings && c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

std::vector<Document> TooDeep() {
  return {Document{1, nullptr,
                   absl::StrCat("brackets nested deeper than ", kMaxDepth,
                                " levels; policy manifests are never that deep")}};
}

}  // namespace

std::vector<Document> ParseDocuments(absl::string_view text) {
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && (trimmed[0] == '{' || trimmed[0] == '[')) {
    // Strings are skipped here so that brackets in a description do not make
    // an encoded policy set (encode.h) unreadable.
    if (FlowDepth(trimmed, /*json_strings=*/true) > kMaxDepth) return TooDeep();
    nlohmann::json parsed = nlohmann::json::parse(trimmed.begin(), trimmed.end(), nullptr, false);
    if (!parsed.is_discarded()) {
      std::vector<Document> docs;
      if (parsed.is_array()) {
        int i = 0;
        for (auto& item : parsed) docs.push_back(Document{++i, std::move(item), ""});
      } else {
        docs.push_back(Document{1, std::move(parsed), ""});
      }
      return docs;
    }
    // Not strict JSON: YAML flow style is a superset, try that.
  }
  if (FlowDepth(text, /*json_strings=*/false) > kMaxDepth) return TooDeep();
  return ParseYaml(text);
}

}  // namespace gangkeeper::model
