// gangkeeper: field paths and error lists (see the header).
#include "gangkeeper/base/field_path.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gangkeeper::base {

FieldPath::FieldPath(absl::string_view root) {
  if (!root.empty()) *this = Child(root);
}

FieldPath FieldPath::Append(Kind kind, absl::string_view name, bool borrow) const {
  FieldPath p;
  if (count_ < kInlineSegments) {
    p.head_ = head_;
    p.count_ = count_;
    p.CopySegments(*this);
  } else {
    // Too deep to keep inline: render everything so far once, shared by the
    // paths made from this one.
    std::string head;
    AppendTo(&head);
    p.head_ = std::make_shared<const std::string>(std::move(head));
  }
  if (name.size() > kInlineText && (!borrow || name.size() > UINT32_MAX)) {
    // A long name that must be copied: the whole path becomes the head.
    std::string head;
    p.AppendTo(&head);
    if (kind == Kind::kKey) {
      absl::StrAppend(&head, "[", name, "]");
    } else {
      absl::StrAppend(&head, head.empty() ? "" : ".", name);
    }
    FieldPath q;
    q.head_ = std::make_shared<const std::string>(std::move(head));
    return q;
  }
  Segment& s = p.segments_[p.count_++];
  s.kind = kind;
  s.size = static_cast<uint32_t>(name.size());
  s.borrowed = nullptr;
  if (borrow) {
    s.borrowed = name.data();
  } else if (!name.empty()) {
    std::memcpy(s.text, name.data(), name.size());
  }
  return p;
}

FieldPath FieldPath::Child(absl::string_view name) const { return Append(Kind::kChild, name, false); }
FieldPath FieldPath::ChildRef(absl::string_view name) const { return Append(Kind::kChild, name, true); }
FieldPath FieldPath::Key(absl::string_view key) const { return Append(Kind::kKey, key, false); }
FieldPath FieldPath::KeyRef(absl::string_view key) const { return Append(Kind::kKey, key, true); }

FieldPath FieldPath::Index(size_t i) const {
  FieldPath p = Append(Kind::kIndex, absl::string_view(), false);
  static_assert(sizeof(size_t) <= kInlineText);
  std::memcpy(p.segments_[p.count_ - 1].text, &i, sizeof(i));
  return p;
}

void FieldPath::AppendTo(std::string* out) const {
  if (head_ != nullptr) out->append(*head_);
  for (uint8_t k = 0; k < count_; ++k) {
    const Segment& s = segments_[k];
    switch (s.kind) {
      case Kind::kChild: {
        if (!out->empty()) out->push_back('.');
        out->append(s.borrowed != nullptr ? s.borrowed : s.text, s.size);
        break;
      }
      case Kind::kIndex: {
        size_t i = 0;
        std::memcpy(&i, s.text, sizeof(i));
        absl::StrAppend(out, "[", i, "]");
        break;
      }
      case Kind::kKey: {
        out->push_back('[');
        out->append(s.borrowed != nullptr ? s.borrowed : s.text, s.size);
        out->push_back(']');
        break;
      }
    }
  }
}

std::string FieldPath::str() const {
  std::string out;
  AppendTo(&out);
  return out;
}

bool FieldPath::empty() const {
  if (head_ != nullptr && !head_->empty()) return false;
  for (uint8_t k = 0; k < count_; ++k) {
    if (segments_[k].kind != Kind::kChild || segments_[k].size != 0) return false;
  }
  return true;
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
