// gangkeeper: checked RapidJSON reads (see json_access.h).
#include "src/workload/json_access.h"

#include <charconv>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gangkeeper::workload {
namespace {

using base::FieldErrors;
using base::FieldErrorType;

// The JSON number as text that ParseQuantity and messages understand.
// Integers print exactly; other numbers print as the shortest text that reads
// back as the same double ("0.5", "1e+30").
std::string NumberText(const rapidjson::Value& value) {
  if (value.IsInt64()) return absl::StrCat(value.GetInt64());
  if (value.IsUint64()) return absl::StrCat(value.GetUint64());
  if (!value.IsDouble()) return "?";
  char buf[64];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value.GetDouble());
  if (r.ec != std::errc()) return "?";
  return std::string(buf, r.ptr);
}

absl::string_view StringView(const rapidjson::Value& value) {
  return absl::string_view(value.GetString(), value.GetStringLength());
}

std::string Quoted(absl::string_view text) {
  constexpr size_t kMaxShown = 64;
  if (text.size() <= kMaxShown) return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxShown)), "\"...");
}

void WrongType(const base::FieldPath& path, const rapidjson::Value& value, absl::string_view want,
               FieldErrors* errors) {
  errors->Add(path, FieldErrorType::kInvalid, absl::StrCat("must be ", want, ", got ", JsonTypeName(value)));
}

void WrongType(const JsonNode& node, absl::string_view want, FieldErrors* errors) {
  WrongType(node.path(), node.value(), want, errors);
}

void MissingField(const JsonNode& parent, absl::string_view name, absl::string_view what, FieldErrors* errors) {
  errors->Add(parent.path().Child(name), FieldErrorType::kRequired, absl::StrCat("required (", what, ")"));
}

// Member `name` of `object` (its key and value): null when `object` is not
// an object, or the member is absent or JSON null. No path is built:
// readers of scalars need one only for an error.
const rapidjson::Value::Member* PresentMember(const rapidjson::Value& object, absl::string_view name) {
  if (!object.IsObject() || name.empty()) return nullptr;
  const rapidjson::Value key(rapidjson::StringRef(name.data(), name.size()));
  rapidjson::Value::ConstMemberIterator it = object.FindMember(key);
  if (it == object.MemberEnd() || it->value.IsNull()) return nullptr;
  return &*it;
}

const rapidjson::Value* MemberValue(const rapidjson::Value& object, absl::string_view name) {
  const rapidjson::Value::Member* m = PresentMember(object, name);
  return m == nullptr ? nullptr : &m->value;
}

// The member's value, type-checked by `is_type`, without a node: its path
// is rendered only for an error. See StringField.
template <typename IsType>
const rapidjson::Value* TypedValue(const JsonNode& parent, absl::string_view name, absl::string_view want,
                                   IsType is_type, FieldErrors* errors, Presence presence) {
  const rapidjson::Value* member = MemberValue(parent.value(), name);
  if (member == nullptr) {
    if (presence == Presence::kRequired) MissingField(parent, name, want, errors);
    return nullptr;
  }
  if (!is_type(*member)) {
    WrongType(parent.path().Child(name), *member, want, errors);
    return nullptr;
  }
  return member;
}

// The member as a node (with its path), type-checked by `is_type`; see
// ObjectField. One optional is returned on every path, so that it is built
// in place (a node carries its path inline).
template <typename IsType>
std::optional<JsonNode> TypedField(const JsonNode& parent, absl::string_view name, absl::string_view want,
                                   IsType is_type, FieldErrors* errors, Presence presence) {
  std::optional<JsonNode> member = Member(parent, name);
  if (!member.has_value()) {
    if (presence == Presence::kRequired) MissingField(parent, name, want, errors);
  } else if (!is_type(member->value())) {
    WrongType(*member, want, errors);
    member.reset();
  }
  return member;
}

// The path of an object's member for an error (see ForEachEntryValue).
base::FieldPath EntryPath(const JsonNode& object, absl::string_view key) { return object.path().KeyRef(key); }

// A quantity written as a JSON string or number; `path()` names the value
// for an error (rendered only then). See AsQuantity.
template <typename PathFn>
std::optional<quantity::Quantity> QuantityOf(const rapidjson::Value& v, PathFn path, FieldErrors* errors) {
  std::string number;  // a JSON number's text
  absl::string_view text;
  if (v.IsString()) {
    text = StringView(v);
  } else if (v.IsNumber()) {
    number = NumberText(v);
    text = number;
  } else {
    errors->Add(path(), FieldErrorType::kInvalid,
                absl::StrCat("must be a quantity (a string such as \"500m\" or \"16Gi\", or a number), got ",
                             JsonTypeName(v)));
    return std::nullopt;
  }
  absl::StatusOr<quantity::Quantity> q = quantity::ParseQuantity(text);
  if (!q.ok()) {
    if (q.status().code() == absl::StatusCode::kOutOfRange) {
      errors->Add(path(), FieldErrorType::kInvalid,
                  absl::StrCat(Quoted(text), " is out of range for a quantity (at most about 9.2E)"));
    } else {
      errors->Add(path(), FieldErrorType::kInvalid,
                  absl::StrCat(Quoted(text), " is not a quantity (write e.g. 500m, 4, 1.5 or 16Gi)"));
    }
    return std::nullopt;
  }
  if (q->IsNegative()) {
    errors->Add(path(), FieldErrorType::kInvalid, absl::StrCat(Quoted(text), " must not be negative"));
    return std::nullopt;
  }
  return *q;
}

}  // namespace

absl::string_view JsonTypeName(const rapidjson::Value& value) {
  switch (value.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "bool";
    case rapidjson::kObjectType: return "object";
    case rapidjson::kArrayType: return "list";
    case rapidjson::kStringType: return "string";
    case rapidjson::kNumberType: return "number";
  }
  return "unknown";
}

std::string DescribeJson(const rapidjson::Value& value) {
  if (value.IsString()) return Quoted(StringView(value));
  if (value.IsNumber()) return NumberText(value);
  if (value.IsBool()) return value.GetBool() ? "true" : "false";
  return std::string(JsonTypeName(value));
}

std::optional<JsonNode> Member(const JsonNode& object, absl::string_view name) {
  std::optional<JsonNode> out;
  const rapidjson::Value::Member* m = PresentMember(object.value(), name);
  if (m == nullptr) return out;
  // The path borrows the document's own key, which lives as long as the
  // node; the node is built in place (its path is inline, not cheap to move).
  out.emplace(m->value, object.path().ChildRef(StringView(m->name)));
  return out;
}

bool ExpectObject(const JsonNode& node, FieldErrors* errors) {
  if (node.value().IsObject()) return true;
  WrongType(node, "an object", errors);
  return false;
}

bool ExpectList(const JsonNode& node, FieldErrors* errors) {
  if (!node.value().IsArray()) {
    WrongType(node, "a list", errors);
    return false;
  }
  if (node.value().Size() > kMaxItems) {
    errors->Add(node.path(), FieldErrorType::kTooMany,
                absl::StrCat("has ", node.value().Size(), " items; at most ", kMaxItems, " are supported"));
    return false;
  }
  return true;
}

std::optional<JsonNode> ObjectField(const JsonNode& parent, absl::string_view name, FieldErrors* errors,
                                    Presence presence) {
  return TypedField(
      parent, name, "an object", [](const rapidjson::Value& v) { return v.IsObject(); }, errors, presence);
}

std::optional<JsonNode> ListField(const JsonNode& parent, absl::string_view name, FieldErrors* errors,
                                  Presence presence) {
  std::optional<JsonNode> list = TypedField(
      parent, name, "a list", [](const rapidjson::Value& v) { return v.IsArray(); }, errors, presence);
  if (list.has_value() && !ExpectList(*list, errors)) return std::nullopt;
  return list;
}

std::vector<JsonNode> Items(const JsonNode& list) {
  std::vector<JsonNode> out;
  const rapidjson::Value& v = list.value();
  if (!v.IsArray()) return out;
  out.reserve(v.Size());
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) out.emplace_back(v[i], list.path().Index(i));
  return out;
}

namespace json_access_internal {

bool ExpectEntries(const JsonNode& object, FieldErrors* errors) {
  if (!ExpectObject(object, errors)) return false;
  const rapidjson::Value& v = object.value();
  if (v.MemberCount() > kMaxItems) {
    errors->Add(object.path(), FieldErrorType::kTooMany,
                absl::StrCat("has ", v.MemberCount(), " entries; at most ", kMaxItems, " are supported"));
    return false;
  }
  return true;
}

void AddNonStringKey(const JsonNode& object, FieldErrors* errors) {
  errors->Add(object.path(), FieldErrorType::kInvalid, "has a key that is not a string");
}

}  // namespace json_access_internal

std::vector<std::pair<std::string, JsonNode>> Entries(const JsonNode& object, FieldErrors* errors) {
  std::vector<std::pair<std::string, JsonNode>> out;
  if (object.value().IsObject()) out.reserve(std::min<size_t>(object.value().MemberCount(), kMaxItems));
  ForEachEntry(object, errors,
               [&out](absl::string_view key, JsonNode value) { out.emplace_back(std::string(key), std::move(value)); });
  return out;
}

std::optional<std::string> AsString(const JsonNode& node, FieldErrors* errors) {
  if (!node.value().IsString()) {
    WrongType(node, "a string", errors);
    return std::nullopt;
  }
  return std::string(StringView(node.value()));
}

std::optional<std::string> StringField(const JsonNode& parent, absl::string_view name, FieldErrors* errors,
                                       Presence presence) {
  const rapidjson::Value* member = TypedValue(
      parent, name, "a string", [](const rapidjson::Value& v) { return v.IsString(); }, errors, presence);
  if (member == nullptr) return std::nullopt;
  return std::string(StringView(*member));
}

std::optional<bool> BoolField(const JsonNode& parent, absl::string_view name, FieldErrors* errors) {
  const rapidjson::Value* member = TypedValue(
      parent, name, "true or false", [](const rapidjson::Value& v) { return v.IsBool(); }, errors,
      Presence::kOptional);
  if (member == nullptr) return std::nullopt;
  return member->GetBool();
}

std::optional<int64_t> IntField(const JsonNode& parent, absl::string_view name, int64_t min, int64_t max,
                                FieldErrors* errors) {
  const rapidjson::Value* member = MemberValue(parent.value(), name);
  if (member == nullptr) return std::nullopt;
  const rapidjson::Value& v = *member;
  if (v.IsInt64() && v.GetInt64() >= min && v.GetInt64() <= max) return v.GetInt64();
  const std::string want = absl::StrCat("an integer from ", min, " to ", max);
  if (!v.IsNumber()) {
    errors->Add(parent.path().Child(name), FieldErrorType::kInvalid,
                absl::StrCat("must be ", want, ", got ", JsonTypeName(v), " ", DescribeJson(v)));
    return std::nullopt;
  }
  errors->Add(parent.path().Child(name), FieldErrorType::kInvalid,
              absl::StrCat("must be ", want, ", got ", DescribeJson(v)));
  return std::nullopt;
}

std::map<std::string, std::string> StringMapField(const JsonNode& parent, absl::string_view name,
                                                  FieldErrors* errors) {
  return StringMapField(parent, name, errors, nullptr);
}

std::map<std::string, std::string> StringMapField(const JsonNode& parent, absl::string_view name,
                                                  FieldErrors* errors, bool (*keep)(absl::string_view key)) {
  std::map<std::string, std::string> out;
  std::optional<JsonNode> map = ObjectField(parent, name, errors);
  if (!map.has_value()) return out;
  ForEachEntryValue(*map, errors, [&](absl::string_view key, const rapidjson::Value& value) {
    if (!value.IsString()) {
      WrongType(EntryPath(*map, key), value, "a string", errors);
      return;
    }
    if (keep != nullptr && !keep(key)) return;
    out.insert_or_assign(std::string(key), std::string(StringView(value)));
  });
  return out;
}

std::optional<quantity::Quantity> AsQuantity(const JsonNode& node, FieldErrors* errors) {
  return QuantityOf(node.value(), [&node] { return node.path(); }, errors);
}

std::map<std::string, quantity::Quantity> ResourceMapField(const JsonNode& parent, absl::string_view name,
                                                          FieldErrors* errors) {
  std::map<std::string, quantity::Quantity> out;
  std::optional<JsonNode> map = ObjectField(parent, name, errors);
  if (!map.has_value()) return out;
  ForEachEntryValue(*map, errors, [&](absl::string_view resource, const rapidjson::Value& value) {
    const auto path = [&] { return EntryPath(*map, resource); };
    if (resource.empty()) {
      errors->Add(path(), FieldErrorType::kInvalid, "a resource name must not be empty");
      return;
    }
    std::optional<quantity::Quantity> q = QuantityOf(value, path, errors);
    if (q.has_value()) out.insert_or_assign(std::string(resource), *q);
  });
  return out;
}

}  // namespace gangkeeper::workload
