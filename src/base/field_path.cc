// gangkeeper: field paths and error lists (see the header).
#include "gangkeeper/base/field_path.h"

#include "absl/strings/str_cat.h"

namespace gangkeeper::base {

FieldPath FieldPath::Child(absl::string_view name) const {
  FieldPath p;
  p.path_ = path_.empty() ? std::string(name) : absl::StrCat(path_, ".", name);
  return p;
}

FieldPath FieldPath::Index(size_t i) const {
  FieldPath p;
  p.path_ = absl::StrCat(path_, "[", i, "]");
  return p;
}

FieldPath FieldPath::Key(absl::string_view key) const {
  FieldPath p;
  p.path_ = absl::StrCat(path_, "[", key, "]");
  return p;
}

absl::string_view FieldErrorTypeName(FieldErrorType type) {
  switch (type) {
    case FieldErrorType::kRequired: return "Required value";
    case FieldErrorType::kInvalid: return "Invalid value";
    case FieldErrorType::kNotSupported: return "Unsupported value";
    case FieldErrorType::kDuplicate: return "Duplicate value";
    case FieldErrorType::kForbidden: return "Forbidden";
    case FieldErrorType::kTooMany: return "Too many";
  }
  return "Invalid value";
}

void FieldErrors::Add(const FieldPath& path, FieldErrorType type, absl::string_view detail) {
  errors_.push_back(FieldError{path.str(), type, std::string(detail)});
}

void FieldErrors::Append(const FieldErrors& other) {
  errors_.insert(errors_.end(), other.errors_.begin(), other.errors_.end());
}

absl::Status ToStatus(const FieldErrors& errors) {
  if (errors.empty()) return absl::OkStatus();
  std::string msg;
  for (const FieldError& e : errors.errors()) {
    if (!msg.empty()) msg += "; ";
    absl::StrAppend(&msg, e.path, ": ", FieldErrorTypeName(e.type), ": ", e.detail);
  }
  return absl::InvalidArgumentError(msg);
}

}  // namespace gangkeeper::base
