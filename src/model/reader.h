// gangkeeper model: checked reads from a JSON object with field paths.
//
// ObjectReader reads the members of one object, records every problem as a
// FieldError at the member's path, and at Finish() reports members nobody
// asked for (typos) with the closest known name. Numbers may be JSON numbers
// or strings (YAML plain scalars arrive as strings). Never throws.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "gangkeeper/base/field_path.h"
#include "gangkeeper/quantity/quantity.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::model {

// The fix for a quantity that does not parse, e.g. for "four": use "4".
std::string QuantityHint(const std::string& text);

class ObjectReader {
 public:
  // `value` must outlive the reader. A non-object value is an error at
  // `path` (unless null and `allow_null`); the reader then reads nothing.
  ObjectReader(const nlohmann::json* value, base::FieldPath path, base::FieldErrors* errors,
               base::FieldErrors* warnings);

  bool valid() const { return object_ != nullptr; }
  const base::FieldPath& path() const { return path_; }
  base::FieldErrors* errors() const { return errors_; }
  base::FieldErrors* warnings() const { return warnings_; }

  // The member, or nullptr when absent or null. Marks it as known.
  const nlohmann::json* Get(const std::string& key);
  bool Has(const std::string& key);

  std::string String(const std::string& key, bool required = false);
  std::optional<int64_t> Int(const std::string& key, bool required, int64_t min, int64_t max);
  std::optional<double> Double(const std::string& key);
  std::optional<bool> Bool(const std::string& key);
  std::optional<quantity::Quantity> Quantity(const std::string& key, bool required);
  // One of `allowed`; "" when absent (the caller applies the default).
  std::string Enum(const std::string& key, const std::vector<std::string>& allowed);
  std::map<std::string, std::string> StringMap(const std::string& key);
  std::vector<std::string> StringList(const std::string& key);
  // Calls `each(item, item_path)` for every element of the array `key`.
  void List(const std::string& key, const std::function<void(const nlohmann::json&, const base::FieldPath&)>& each);
  // A nested object reader (invalid when absent).
  ObjectReader Object(const std::string& key);

  // Known members that are accepted and not used (status, description, ...).
  void Ignore(const std::string& key);
  // A member we understand but do not enforce: a warning naming it.
  void Unenforced(const std::string& key, const std::string& why);
  // A member whose meaning we cannot honour: an error naming it.
  void Unsupported(const std::string& key, const std::string& why);

  // Reports every member that was never asked for.
  void Finish();

 private:
  const nlohmann::json* object_;
  base::FieldPath path_;
  base::FieldErrors* errors_;
  base::FieldErrors* warnings_;
  std::set<std::string> known_;
};

}  // namespace gangkeeper::model
