// gangkeeper: the only way src/workload reads a parsed RapidJSON tree.
//
// RapidJSON's accessors assert on a wrong type (GetString() on a number
// aborts in debug builds and is undefined behaviour with NDEBUG), so every
// read in this module goes through these helpers (STYLE §6.3). Each helper
// checks the type first and, when the document does not have the shape the
// Kubernetes API promises, adds a FieldError naming the field's path
// (`spec.template.spec.containers[0].resources.requests[cpu]`) and returns
// "nothing" (std::nullopt / an empty list), so one extraction reports every
// problem of an object at once. Absent members and JSON null mean "not set",
// as in the Kubernetes API. Lists and maps longer than kMaxItems are
// rejected, which bounds the work one admission request can cause.
//
// Pure functions over borrowed nodes; a JsonNode must not outlive the
// document it points into. Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/quantity/quantity.h"
#include "rapidjson/document.h"

namespace gangkeeper::workload {

// The longest list or map (containers, tolerations, worker groups, resource
// maps, ...) extraction accepts.
inline constexpr size_t kMaxItems = 1000;

// A JSON value and the path it was reached by. Cheap to copy (a pointer and
// an inline FieldPath, no heap); borrows the value, and its path borrows the
// document's keys, so neither may outlive the document.
class JsonNode {
 public:
  JsonNode(const rapidjson::Value& value, base::FieldPath path) : value_(&value), path_(std::move(path)) {}

  const rapidjson::Value& value() const { return *value_; }
  const base::FieldPath& path() const { return path_; }

 private:
  const rapidjson::Value* value_;
  base::FieldPath path_;
};

enum class Presence { kOptional, kRequired };

// "string", "number", "object", "list", "bool" or "null", for messages.
absl::string_view JsonTypeName(const rapidjson::Value& value);

// A short rendering of `value` for messages: strings quoted and escaped (cut
// at 64 bytes), numbers as written, other values by type name.
std::string DescribeJson(const rapidjson::Value& value);

// The member `name` of `object`, or nullopt when `object` is not an object,
// or the member is absent or null. No type check on the member.
std::optional<JsonNode> Member(const JsonNode& object, absl::string_view name);

// Checks `node` is an object / a list of at most kMaxItems items; on failure
// adds an error at node's path and returns false.
bool ExpectObject(const JsonNode& node, base::FieldErrors* errors);
bool ExpectList(const JsonNode& node, base::FieldErrors* errors);

// The member `name` of `parent` when it is an object / a list. nullopt when
// absent or null (plus a Required error when `presence` is kRequired) or of
// the wrong type (plus an error).
std::optional<JsonNode> ObjectField(const JsonNode& parent, absl::string_view name, base::FieldErrors* errors,
                                    Presence presence = Presence::kOptional);
std::optional<JsonNode> ListField(const JsonNode& parent, absl::string_view name, base::FieldErrors* errors,
                                  Presence presence = Presence::kOptional);

// The items of a list node checked by ExpectList/ListField, with paths
// `path[i]`. Empty when `list` is not a list.
std::vector<JsonNode> Items(const JsonNode& list);

// The members of an object node, with paths `path[key]`, in document order.
// Empty (plus an error) when `object` is not an object or has more than
// kMaxItems members.
std::vector<std::pair<std::string, JsonNode>> Entries(const JsonNode& object, base::FieldErrors* errors);

// Calls fn(key, node) for each member of an object node, as Entries lists
// them, without building the list (the map readers below, once per
// container per review).
template <typename Fn>
void ForEachEntry(const JsonNode& object, base::FieldErrors* errors, Fn&& fn);
// The same without a node per member: fn(key, value), for readers that
// need a member's path only to name an error (object.path().KeyRef(key)).
template <typename Fn>
void ForEachEntryValue(const JsonNode& object, base::FieldErrors* errors, Fn&& fn);

// The node itself as a string / bool; nullopt plus an error when it is not.
std::optional<std::string> AsString(const JsonNode& node, base::FieldErrors* errors);

// Typed members: nullopt when absent or null (plus a Required error when
// `presence` is kRequired) or of the wrong type (plus an error).
std::optional<std::string> StringField(const JsonNode& parent, absl::string_view name, base::FieldErrors* errors,
                                       Presence presence = Presence::kOptional);
std::optional<bool> BoolField(const JsonNode& parent, absl::string_view name, base::FieldErrors* errors);
// An integer member in [min, max]. A fractional number ("2.5"), a number
// written as a string ("2"), and an integer outside the range are errors.
std::optional<int64_t> IntField(const JsonNode& parent, absl::string_view name, int64_t min, int64_t max,
                                base::FieldErrors* errors);

// A map of strings (labels, annotations, nodeSelector). Empty when absent;
// entries whose value is not a string are errors and left out.
std::map<std::string, std::string> StringMapField(const JsonNode& parent, absl::string_view name,
                                                  base::FieldErrors* errors);
// The same, keeping only the entries whose key `keep` accepts (every
// entry's value is still checked).
std::map<std::string, std::string> StringMapField(const JsonNode& parent, absl::string_view name,
                                                  base::FieldErrors* errors, bool (*keep)(absl::string_view key));

// A non-negative resource quantity written as a JSON string ("4", "16Gi",
// "500m") or a JSON number (1, 0.5, 2e3). nullopt plus an error otherwise.
std::optional<quantity::Quantity> AsQuantity(const JsonNode& node, base::FieldErrors* errors);

// A map of resource name to quantity (resources.requests, spec.overhead).
// Empty when absent; bad entries are errors and left out.
std::map<std::string, quantity::Quantity> ResourceMapField(const JsonNode& parent, absl::string_view name,
                                                          base::FieldErrors* errors);

// Implementation details.
namespace json_access_internal {
// Checks `object` for ForEachEntry (as Entries does); false after adding
// the error.
bool ExpectEntries(const JsonNode& object, base::FieldErrors* errors);
// The error for a member whose key is not a string.
void AddNonStringKey(const JsonNode& object, base::FieldErrors* errors);
}  // namespace json_access_internal

template <typename Fn>
void ForEachEntryValue(const JsonNode& object, base::FieldErrors* errors, Fn&& fn) {
  if (!json_access_internal::ExpectEntries(object, errors)) return;
  const rapidjson::Value& v = object.value();
  for (rapidjson::Value::ConstMemberIterator it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    if (!it->name.IsString()) {
      json_access_internal::AddNonStringKey(object, errors);
      continue;
    }
    fn(absl::string_view(it->name.GetString(), it->name.GetStringLength()), it->value);
  }
}

template <typename Fn>
void ForEachEntry(const JsonNode& object, base::FieldErrors* errors, Fn&& fn) {
  ForEachEntryValue(object, errors, [&](absl::string_view key, const rapidjson::Value& value) {
    fn(key, JsonNode(value, object.path().KeyRef(key)));
  });
}

}  // namespace gangkeeper::workload
