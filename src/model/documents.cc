// gangkeeper model: YAML/JSON documents (see documents.h).
#include "src/model/documents.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/base/field_path.h"

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

// A place in the whole text, 1-based.
struct Position {
  int line = 0;
  int column = 0;
};

// Finds keys written twice in one map. YAML (a walk over yaml-cpp's nodes,
// which keep every pair) and JSON (nlohmann's SAX parser, which sees every
// key) describe a document as the same events, so one finder serves both.
// Linear: one hash map per open map, reused between siblings. At most
// kMaxReported duplicates are listed per text, so a hostile text cannot make
// the answer huge.
class DuplicateKeys {
 public:
  struct Found {
    size_t item = 0;   // the index in the root list when its items are documents, else 0
    std::string path;  // the key's path in its document
    std::string message;
  };

  // With `root_list_holds_documents`, the items of a root list are separate
  // documents (a JSON array of manifests): paths start inside the item.
  explicit DuplicateKeys(bool root_list_holds_documents) : root_list_holds_documents_(root_list_holds_documents) {}

  void BeginMap() { Begin(true); }
  void BeginList() { Begin(false); }
  // Ends the innermost map or list.
  void End() {
    if (depth_ == 0) return;
    --depth_;
    ElementDone();
  }
  void Scalar() { ElementDone(); }
  // A key of the innermost map, at `at`.
  void Key(const std::string& key, Position at) {
    if (depth_ == 0 || !frames_[depth_ - 1].map) return;
    Frame& f = frames_[depth_ - 1];
    f.key.assign(key);
    auto [it, inserted] = f.keys.try_emplace(key, at);
    if (!inserted) Report(key, it->second, at);
  }

  const std::vector<Found>& found() const { return found_; }

 private:
  static constexpr size_t kMaxReported = 20;

  struct Frame {
    bool map = false;
    size_t index = 0;  // lists: the item being read
    std::string key;   // maps: the key being read
    absl::flat_hash_map<std::string, Position> keys;
  };

  void Begin(bool map) {
    if (depth_ == frames_.size()) frames_.emplace_back();
    Frame& f = frames_[depth_++];
    f.map = map;
    f.index = 0;
    f.key.clear();
    f.keys.clear();
  }

  void ElementDone() {
    if (depth_ > 0 && !frames_[depth_ - 1].map) ++frames_[depth_ - 1].index;
  }

  void Report(const std::string& key, Position first, Position again) {
    if (found_.size() > kMaxReported) return;
    // A map reached again through a YAML alias repeats what was found.
    if (!reported_.insert({first.line, first.column, again.line, again.column}).second) return;
    const bool in_item = root_list_holds_documents_ && !frames_[0].map;
    Found found;
    found.item = in_item ? frames_[0].index : 0;
    if (found_.size() == kMaxReported) {
      found.message = absl::StrCat("more keys are written twice (only the first ", kMaxReported,
                                   " are listed); fix those and check again");
      found_.push_back(std::move(found));
      return;
    }
    base::FieldPath path;
    auto append = [&path](const std::string& name) {
      // Keys like "nvidia.com/gpu" or "" go in brackets, so the path stays readable.
      const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '_' || c == '-';
      });
      path = plain ? path.Child(name) : path.Key(name);
    };
    for (size_t i = in_item ? 1 : 0; i + 1 < depth_; ++i) {
      const Frame& f = frames_[i];
      if (f.map) {
        append(f.key);
      } else {
        path = path.Index(f.index);
      }
    }
    append(key);
    found.path = path.str();
    found.message = absl::StrCat("key \"", key, "\" is written twice in the same map: first at line ", first.line,
                                 ", column ", first.column, ", again at line ", again.line, ", column ", again.column,
                                 "; only one value would be kept, so remove one of them");
    found_.push_back(std::move(found));
  }

  const bool root_list_holds_documents_;
  std::vector<Frame> frames_;  // frames_[0, depth_) are open
  size_t depth_ = 0;
  std::set<std::tuple<int, int, int, int>> reported_;
  std::vector<Found> found_;
};

struct Converter {
  explicit Converter(int line) : first_line(line) {}

  const int first_line;  // of the document in the whole text
  size_t nodes = 0;
  std::string error;
  DuplicateKeys keys{/*root_list_holds_documents=*/false};

  // yaml-cpp passes invalid bytes (and "\ud800" escapes) through; such a
  // string could not be written back as JSON by the journal or the API, and
  // kubectl refuses it too.
  bool CheckUtf8(const YAML::Node& node, const std::string& s) {
    if (IsUtf8(s)) return true;
    error = absl::StrCat("line ", first_line + node.Mark().line, ": text is not valid UTF-8; save the file as UTF-8");
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
        keys.Scalar();
        return nullptr;
      case YAML::NodeType::Scalar: {
        keys.Scalar();
        const std::string& s = node.Scalar();
        if (node.Tag() != "!" && (s == "null" || s == "~" || s == "Null" || s == "NULL")) return nullptr;
        if (!CheckUtf8(node, s)) return nullptr;
        return s;
      }
      case YAML::NodeType::Sequence: {
        nlohmann::json arr = nlohmann::json::array();
        keys.BeginList();
        for (const YAML::Node& item : node) arr.push_back(Convert(item, depth + 1));
        keys.End();
        return arr;
      }
      case YAML::NodeType::Map: {
        nlohmann::json obj = nlohmann::json::object();
        keys.BeginMap();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            error = absl::StrCat("line ", first_line + kv.first.Mark().line, ": map keys must be plain strings");
            return nullptr;
          }
          if (!CheckUtf8(kv.first, kv.first.Scalar())) return nullptr;
          const YAML::Mark mark = kv.first.Mark();
          keys.Key(kv.first.Scalar(), Position{first_line + mark.line, mark.column + 1});
          obj[kv.first.Scalar()] = Convert(kv.second, depth + 1);
        }
        keys.End();
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
        if (!rest.empty() && rest[0] != '#') {
          absl::StrAppend(&pieces.back().text, rest, "\n");
          pieces.back().first_line = line_no;
        }
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
      Converter c(p.first_line);
      d.value = c.Convert(node, 0);
      if (!c.error.empty()) {
        d.errors.push_back({"", c.error});
        d.value = nullptr;
      } else {
        for (const DuplicateKeys::Found& f : c.keys.found()) d.errors.push_back({f.path, f.message});
      }
    } catch (const YAML::Exception& e) {
      d.errors.push_back({"", absl::StrCat("YAML syntax error at line ", p.first_line + e.mark.line, ", column ",
                                           e.mark.column + 1, ": ", e.msg)});
      d.value = nullptr;
    } catch (const std::exception& e) {
      d.errors.push_back({"", absl::StrCat("cannot parse YAML: ", e.what())});
      d.value = nullptr;
    }
    docs.push_back(std::move(d));
  }
  return docs;
}

// How far the JSON parser has read: the next character and its line.
struct ReadState {
  const char* at;
  const char* line_start;
  int line;
};

// A const char* iterator that keeps a ReadState up to date, so that the
// SAX handler can tell where the key it is handed was written.
class TrackingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackingIterator(const char* p, ReadState* state) : p_(p), state_(state) {}
  reference operator*() const { return *p_; }
  TrackingIterator& operator++() {
    if (*p_ == '\n') {
      ++state_->line;
      state_->line_start = p_ + 1;
    }
    state_->at = ++p_;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackingIterator& other) const { return p_ == other.p_; }
  bool operator!=(const TrackingIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  ReadState* state_;
};

// Where the key whose closing quote the parser has just read begins: back
// over the key to the first quote not escaped by an odd run of backslashes.
// JSON strings hold no raw line breaks, so the key is on the current line.
Position KeyStart(const ReadState& state, const char* begin) {
  const char* q = state.at - 2;  // the character before the closing quote
  while (q > begin) {
    if (*q == '"') {
      const char* b = q;
      while (b > begin && b[-1] == '\\') --b;
      if ((q - b) % 2 == 0) break;
    }
    --q;
  }
  return Position{state.line, static_cast<int>(q - state.line_start) + 1};
}

// nlohmann's SAX interface: builds the same tree as json::parse and tells
// `keys` about every map, list, key and scalar on the way. (The parser's
// callback interface would do too, but costs about three times the parse;
// this costs a quarter more.) Never throws.
class JsonBuilder {
 public:
  using json = nlohmann::json;

  JsonBuilder(const ReadState* state, const char* begin, DuplicateKeys* keys)
      : state_(state), begin_(begin), keys_(keys) {}

  json& root() { return root_; }

  bool null() { return Scalar(nullptr); }
  bool boolean(bool v) { return Scalar(v); }
  bool number_integer(json::number_integer_t v) { return Scalar(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Scalar(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return Scalar(v); }
  bool string(json::string_t& v) { return Scalar(std::move(v)); }
  bool binary(json::binary_t&) { return false; }  // JSON text has none
  bool start_object(std::size_t) {
    open_.push_back(Add(json::value_t::object));
    keys_->BeginMap();
    return true;
  }
  bool key(json::string_t& k) {
    keys_->Key(k, KeyStart(*state_, begin_));
    member_ = &(*open_.back())[k];
    return true;
  }
  bool end_object() { return End(); }
  bool start_array(std::size_t) {
    open_.push_back(Add(json::value_t::array));
    keys_->BeginList();
    return true;
  }
  bool end_array() { return End(); }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }

 private:
  template <typename V>
  json* Add(V&& v) {
    if (open_.empty()) {
      root_ = json(std::forward<V>(v));
      return &root_;
    }
    if (open_.back()->is_array()) {
      open_.back()->emplace_back(std::forward<V>(v));
      return &open_.back()->back();
    }
    *member_ = json(std::forward<V>(v));
    return member_;
  }
  template <typename V>
  bool Scalar(V&& v) {
    Add(std::forward<V>(v));
    keys_->Scalar();
    return true;
  }
  bool End() {
    open_.pop_back();
    keys_->End();
    return true;
  }

  const ReadState* state_;
  const char* begin_;
  DuplicateKeys* keys_;
  json root_;
  std::vector<json*> open_;  // the maps and lists being filled, innermost last
  json* member_ = nullptr;   // in the innermost map: the value of the last key
};

// `json_text` (the rest of `text` after leading white space) as strict JSON:
// one document, or one per item of a root array. Empty when it is not JSON.
std::optional<std::vector<Document>> ParseJson(absl::string_view text, absl::string_view json_text) {
  ReadState state{json_text.data(), text.data(), 1};
  for (const char* c = text.data(); c < json_text.data(); ++c) {
    if (*c == '\n') {
      ++state.line;
      state.line_start = c + 1;
    }
  }
  DuplicateKeys keys(/*root_list_holds_documents=*/true);
  const char* begin = json_text.data();
  const char* end = begin + json_text.size();
  JsonBuilder builder(&state, begin, &keys);
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(TrackingIterator(begin, &state), TrackingIterator(end, &state), &builder);
  } catch (const nlohmann::json::exception&) {
    parsed = false;
  }
  if (!parsed) return std::nullopt;
  nlohmann::json& root = builder.root();
  std::vector<Document> docs;
  if (root.is_array()) {
    int i = 0;
    for (auto& item : root) docs.push_back(Document{++i, std::move(item), {}});
  } else {
    docs.push_back(Document{1, std::move(root), {}});
  }
  for (const DuplicateKeys::Found& f : keys.found()) {
    if (f.item < docs.size()) docs[f.item].errors.push_back({f.path, f.message});
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
  return {Document{1,
                   nullptr,
                   {{"", absl::StrCat("brackets nested deeper than ", kMaxDepth,
                                      " levels; policy manifests are never that deep")}}}};
}

}  // namespace

std::vector<Document> ParseDocuments(absl::string_view text) {
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && (trimmed[0] == '{' || trimmed[0] == '[')) {
    // Strings are skipped here so that brackets in a description do not make
    // an encoded policy set (encode.h) unreadable.
    if (FlowDepth(trimmed, /*json_strings=*/true) > kMaxDepth) return TooDeep();
    if (std::optional<std::vector<Document>> docs = ParseJson(text, trimmed)) return *std::move(docs);
    // Not strict JSON: YAML flow style is a superset, try that.
  }
  if (FlowDepth(text, /*json_strings=*/false) > kMaxDepth) return TooDeep();
  return ParseYaml(text);
}

}  // namespace gangkeeper::model
