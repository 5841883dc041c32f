// gangkeeper model: checked JSON reads (see reader.h).
#include "src/model/reader.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gangkeeper::model {
namespace {

using base::FieldErrorType;

std::string TypeName(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::null: return "null";
    default: return "a number";
  }
}

// Scalars as text: strings as they are, numbers printed back.
std::optional<std::string> ScalarText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
    return v.dump();
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return std::nullopt;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string QuantityHint(const std::string& text) {
  static const char* kWords[] = {"zero", "one", "two",   "three", "four", "five",   "six",
                                 "seven", "eight", "nine", "ten", "eleven", "twelve"};
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  for (size_t i = 0; i < sizeof(kWords) / sizeof(kWords[0]); ++i) {
    if (lower == kWords[i]) return absl::StrCat("use \"", i, "\"");
  }
  // Common suffix slips: "16GB" -> "16Gi" (or "16G"), "500 m" -> "500m".
  std::string compact;
  for (char c : text) {
    if (!absl::ascii_isspace(c)) compact += c;
  }
  for (const auto& [bad, good] : std::vector<std::pair<std::string, std::string>>{
           {"GB", "Gi"}, {"MB", "Mi"}, {"KB", "Ki"}, {"TB", "Ti"}, {"gb", "Gi"}, {"mb", "Mi"}, {"Gb", "Gi"}}) {
    if (compact.size() > bad.size() && compact.compare(compact.size() - bad.size(), bad.size(), bad) == 0) {
      return absl::StrCat("use \"", compact.substr(0, compact.size() - bad.size()), good, "\" for binary units");
    }
  }
  if (compact != text && quantity::ParseQuantity(compact).ok()) return absl::StrCat("use \"", compact, "\"");
  return "use a number with an optional suffix, e.g. \"4\", \"500m\", \"1.5\", \"16Gi\"";
}

ObjectReader::ObjectReader(const nlohmann::json* value, base::FieldPath path, base::FieldErrors* errors,
                           base::FieldErrors* warnings)
    : object_(nullptr), path_(std::move(path)), errors_(errors), warnings_(warnings) {
  if (value == nullptr || value->is_null()) return;
  if (!value->is_object()) {
    errors_->Add(path_, FieldErrorType::kInvalid, absl::StrCat("must be an object, not ", TypeName(*value)));
    return;
  }
  object_ = value;
}

const nlohmann::json* ObjectReader::Get(const std::string& key) {
  known_.insert(key);
  if (object_ == nullptr) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool ObjectReader::Has(const std::string& key) {
  if (object_ == nullptr) return false;
  auto it = object_->find(key);
  return it != object_->end() && !it->is_null();
}

std::string ObjectReader::String(const std::string& key, bool required) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) {
    if (required && object_ != nullptr) errors_->Add(path_.Child(key), FieldErrorType::kRequired, "must be set");
    return "";
  }
  std::optional<std::string> s = ScalarText(*v);
  if (!s.has_value()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid, absl::StrCat("must be a string, not ", TypeName(*v)));
    return "";
  }
  if (required && s->empty()) errors_->Add(path_.Child(key), FieldErrorType::kRequired, "must not be empty");
  return *s;
}

std::optional<int64_t> ObjectReader::Int(const std::string& key, bool required, int64_t min, int64_t max) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) {
    if (required && object_ != nullptr) errors_->Add(path_.Child(key), FieldErrorType::kRequired, "must be set");
    return std::nullopt;
  }
  std::optional<std::string> s = ScalarText(*v);
  int64_t out = 0;
  if (!s.has_value() || v->is_boolean() || !absl::SimpleAtoi(*s, &out)) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid,
                 absl::StrCat(s.has_value() ? absl::StrCat("\"", *s, "\"") : TypeName(*v),
                              " is not an integer (use a whole number such as 10000)"));
    return std::nullopt;
  }
  if (out < min || out > max) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid,
                 absl::StrCat(out, " is out of range (must be between ", min, " and ", max, ")"));
    return std::nullopt;
  }
  return out;
}

std::optional<double> ObjectReader::Double(const std::string& key) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  std::optional<std::string> s = ScalarText(*v);
  if (v->is_number()) return v->get<double>();
  // Kubernetes writes weights as quantities ("1", "0.5", "500m").
  if (s.has_value()) {
    absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(*s);
    if (q.ok()) return static_cast<double>(q->milli()) / 1000.0;
  }
  errors_->Add(path_.Child(key), FieldErrorType::kInvalid,
               absl::StrCat(s.has_value() ? absl::StrCat("\"", *s, "\"") : TypeName(*v),
                            " is not a number (use e.g. \"1\" or \"0.5\")"));
  return std::nullopt;
}

std::optional<bool> ObjectReader::Bool(const std::string& key) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  errors_->Add(path_.Child(key), FieldErrorType::kInvalid, "must be true or false");
  return std::nullopt;
}

std::optional<quantity::Quantity> ObjectReader::Quantity(const std::string& key, bool required) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) {
    if (required && object_ != nullptr) errors_->Add(path_.Child(key), FieldErrorType::kRequired, "must be set");
    return std::nullopt;
  }
  std::optional<std::string> s = ScalarText(*v);
  if (!s.has_value() || v->is_boolean()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid,
                 absl::StrCat(TypeName(*v), " is not a quantity (use e.g. \"4\" or \"16Gi\")"));
    return std::nullopt;
  }
  absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(*s);
  if (!q.ok()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid,
                 absl::StrCat("\"", *s, "\" is not a quantity (", QuantityHint(*s), ")"));
    return std::nullopt;
  }
  if (q->IsNegative()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid, absl::StrCat("\"", *s, "\" must not be negative"));
    return std::nullopt;
  }
  return *q;
}

std::string ObjectReader::Enum(const std::string& key, const std::vector<std::string>& allowed) {
  std::string s = String(key);
  if (s.empty()) return "";
  for (const std::string& a : allowed) {
    if (a == s) return s;
  }
  errors_->Add(path_.Child(key), FieldErrorType::kNotSupported,
               absl::StrCat("\"", s, "\" is not supported (use one of ", absl::StrJoin(allowed, ", "), ")"));
  return "";
}

std::map<std::string, std::string> ObjectReader::StringMap(const std::string& key) {
  std::map<std::string, std::string> out;
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return out;
  if (!v->is_object()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid, absl::StrCat("must be a map, not ", TypeName(*v)));
    return out;
  }
  for (auto it = v->begin(); it != v->end(); ++it) {
    std::optional<std::string> s = it->is_null() ? std::optional<std::string>("") : ScalarText(*it);
    if (!s.has_value()) {
      errors_->Add(path_.Child(key).Key(it.key()), FieldErrorType::kInvalid, "must be a string");
      continue;
    }
    out[it.key()] = *s;
  }
  return out;
}

std::vector<std::string> ObjectReader::StringList(const std::string& key) {
  std::vector<std::string> out;
  List(key, [&](const nlohmann::json& item, const base::FieldPath& p) {
    std::optional<std::string> s = ScalarText(item);
    if (!s.has_value()) {
      errors_->Add(p, FieldErrorType::kInvalid, absl::StrCat("must be a string, not ", TypeName(item)));
      return;
    }
    out.push_back(*s);
  });
  return out;
}

void ObjectReader::List(const std::string& key,
                        const std::function<void(const nlohmann::json&, const base::FieldPath&)>& each) {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    errors_->Add(path_.Child(key), FieldErrorType::kInvalid, absl::StrCat("must be a list, not ", TypeName(*v)));
    return;
  }
  size_t i = 0;
  for (const nlohmann::json& item : *v) each(item, path_.Child(key).Index(i++));
}

ObjectReader ObjectReader::Object(const std::string& key) {
  return ObjectReader(Get(key), path_.Child(key), errors_, warnings_);
}

void ObjectReader::Ignore(const std::string& key) { known_.insert(key); }

void ObjectReader::Unenforced(const std::string& key, const std::string& why) {
  if (Get(key) != nullptr) warnings_->Add(path_.Child(key), FieldErrorType::kNotSupported, why);
}

void ObjectReader::Unsupported(const std::string& key, const std::string& why) {
  if (Get(key) != nullptr) errors_->Add(path_.Child(key), FieldErrorType::kNotSupported, why);
}

void ObjectReader::Finish() {
  if (object_ == nullptr) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (known_.count(it.key()) != 0) continue;
    std::string best;
    size_t best_distance = 4;
    for (const std::string& k : known_) {
      size_t d = EditDistance(it.key(), k);
      if (d < best_distance) {
        best_distance = d;
        best = k;
      }
    }
    std::string detail = best.empty()
                             ? absl::StrCat("unknown field \"", it.key(), "\"; remove it")
                             : absl::StrCat("unknown field \"", it.key(), "\"; did you mean \"", best, "\"?");
    errors_->Add(path_.Child(it.key()), FieldErrorType::kNotSupported, detail);
  }
}

}  // namespace gangkeeper::model
