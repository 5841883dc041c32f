// gangkeeper tests: YAML manifests as JSON text (see yaml_json.h).
#include "test/testing/yaml_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "yaml-cpp/yaml.h"

namespace gangkeeper::testing {
namespace {

constexpr int kMaxDepth = 100;

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

// The JSON for a plain (unquoted) scalar: a number, a bool, null, or a string.
std::string PlainScalarJson(const std::string& s) {
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (s == "true" || s == "True" || s == "TRUE") return "true";
  if (s == "false" || s == "False" || s == "FALSE") return "false";
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return "null";
  if (std::regex_match(s, kInt)) {
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    int64_t v = 0;
    std::from_chars_result r = std::from_chars(begin, s.data() + s.size(), v);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return absl::StrCat(v);
  }
  if (std::regex_match(s, kInt) || std::regex_match(s, kFloat)) {
    const double d = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(d)) {
      char buf[64];
      std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), d);
      if (r.ec == std::errc()) return std::string(buf, r.ptr);
    }
  }
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

absl::Status ToJson(const YAML::Node& node, int depth, std::string* out) {
  if (depth > kMaxDepth) return absl::InvalidArgumentError("YAML nested too deeply");
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out += "null";
      return absl::OkStatus();
    case YAML::NodeType::Scalar:
      // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
      if (node.Tag() == "?") {
        *out += PlainScalarJson(node.Scalar());
      } else {
        AppendJsonString(node.Scalar(), out);
      }
      return absl::OkStatus();
    case YAML::NodeType::Sequence: {
      out->push_back('[');
      bool first = true;
      for (const YAML::Node& item : node) {
        if (!first) out->push_back(',');
        first = false;
        if (absl::Status s = ToJson(item, depth + 1, out); !s.ok()) return s;
      }
      out->push_back(']');
      return absl::OkStatus();
    }
    case YAML::NodeType::Map: {
      out->push_back('{');
      bool first = true;
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat("line ", entry.first.Mark().line + 1,
                                                         ": a mapping key is not a scalar"));
        }
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(entry.first.Scalar(), out);
        out->push_back(':');
        if (absl::Status s = ToJson(entry.second, depth + 1, out); !s.ok()) return s;
      }
      out->push_back('}');
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("unknown YAML node type");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> YamlToJson(absl::string_view yaml) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("YAML error at line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  std::vector<std::string> out;
  try {
    for (const YAML::Node& doc : docs) {
      if (doc.IsNull()) continue;
      std::string json;
      if (absl::Status s = ToJson(doc, 0, &json); !s.ok()) return s;
      out.push_back(std::move(json));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("YAML error: ", e.msg));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> YamlFileToJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return YamlToJson(buf.str());
}

}  // namespace gangkeeper::testing
