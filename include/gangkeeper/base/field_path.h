// gangkeeper: field paths and field-error lists for validation messages.
//
// Validation collects every problem with the path of the offending field
// (`spec.resourceGroups[0].flavors[1].name`) and converts the list to one
// InvalidArgument at the module seam. Value types; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::base {

// An immutable path into a document: FieldPath().Child("spec").Index(0).
class FieldPath {
 public:
  FieldPath() = default;
  explicit FieldPath(absl::string_view root) : path_(root) {}

  [[nodiscard]] FieldPath Child(absl::string_view name) const;
  [[nodiscard]] FieldPath Index(size_t i) const;
  // A map key, rendered as `path[key]`.
  [[nodiscard]] FieldPath Key(absl::string_view key) const;

  const std::string& str() const { return path_; }
  bool empty() const { return path_.empty(); }

 private:
  std::string path_;
};

// What kind of problem a field has (the Kueue/Kubernetes field.ErrorType set).
enum class FieldErrorType { kRequired, kInvalid, kNotSupported, kDuplicate, kForbidden, kTooMany };

absl::string_view FieldErrorTypeName(FieldErrorType type);

struct FieldError {
  std::string path;
  FieldErrorType type = FieldErrorType::kInvalid;
  // Human-readable: what is wrong and how to fix it.
  std::string detail;
};

// An ordered list of field errors.
class FieldErrors {
 public:
  void Add(const FieldPath& path, FieldErrorType type, absl::string_view detail);
  void Append(const FieldErrors& other);

  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<FieldError>& errors() const { return errors_; }

 private:
  std::vector<FieldError> errors_;
};

// OK if `errors` is empty, else InvalidArgument whose message lists every
// error as "path: Type: detail" separated by "; ".
[[nodiscard]] absl::Status ToStatus(const FieldErrors& errors);

}  // namespace gangkeeper::base
