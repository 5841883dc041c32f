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

struct Converter {
  size_t nodes = 0;
  std::string error;

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

// The deepest [ / { nesting in `text` (quotes ignored: an over-estimate).
// Both parsers recurse per level, so hostile input is refused before them.
int FlowDepth(absl::string_view text) {
  int depth = 0, max_depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

std::vector<Document> ParseDocuments(absl::string_view text) {
  if (FlowDepth(text) > kMaxDepth) {
    return {Document{1, nullptr,
                     absl::StrCat("brackets nested deeper than ", kMaxDepth,
                                  " levels; policy manifests are never that deep")}};
  }
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && (trimmed[0] == '{' || trimmed[0] == '[')) {
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
  return ParseYaml(text);
}

}  // namespace gangkeeper::model
