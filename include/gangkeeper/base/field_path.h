// gangkeeper: field paths and field-error lists for validation messages.
//
// Validation collects every problem with the path of the offending field
// (`spec.resourceGroups[0].flavors[1].name`) and converts the list to one
// InvalidArgument at the module seam. Value types; thread-compatible.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::base {

// An immutable path into a document: FieldPath().Child("spec").Index(0).
//
// Paths are built far more often than they are read: a decoder makes one for
// every field it visits and reads it only when the field is wrong. So a path
// is rendered lazily: the last few segments are kept inline (short names
// copied in place, no heap allocation), and only a path deeper than that
// renders its head to one shared string. str() renders the whole path.
class FieldPath {
 public:
  FieldPath() = default;
  explicit FieldPath(absl::string_view root);
  // Copies only the segments in use (a decoder copies paths all the time).
  FieldPath(const FieldPath& other) : head_(other.head_), count_(other.count_) { CopySegments(other); }
  FieldPath& operator=(const FieldPath& other) {
    if (this != &other) {
      head_ = other.head_;
      count_ = other.count_;
      CopySegments(other);
    }
    return *this;
  }
  // A move takes the rendered head without touching its reference count
  // (the inline segments are copied all the same).
  FieldPath(FieldPath&& other) noexcept : head_(std::move(other.head_)), count_(other.count_) {
    CopySegments(other);
  }
  FieldPath& operator=(FieldPath&& other) noexcept {
    if (this != &other) {
      head_ = std::move(other.head_);
      count_ = other.count_;
      CopySegments(other);
    }
    return *this;
  }

  [[nodiscard]] FieldPath Child(absl::string_view name) const;
  [[nodiscard]] FieldPath Index(size_t i) const;
  // A map key, rendered as `path[key]`.
  [[nodiscard]] FieldPath Key(absl::string_view key) const;

  // As Child and Key, but the name is borrowed, not copied: it must outlive
  // this path and every path made from it (a string literal, or a key inside
  // a parsed document that outlives the paths into it).
  [[nodiscard]] FieldPath ChildRef(absl::string_view name) const;
  [[nodiscard]] FieldPath KeyRef(absl::string_view key) const;

  // The rendered path: `spec.containers[0].resources.requests[cpu]`.
  std::string str() const;
  bool empty() const;

 private:
  enum class Kind : uint8_t { kChild, kIndex, kKey };
  // Names up to this long are copied into the segment itself.
  static constexpr size_t kInlineText = 19;
  // A pod template's container fields are 8 to 10 deep in a Job
  // (spec.template.spec.containers[0].resources.requests[cpu]); a path
  // deeper than this renders its head to a string.
  static constexpr size_t kInlineSegments = 12;

  // Only the first count_ segments are ever written or read: the rest stay
  // uninitialized (zeroing them cost more than the rest of an Append).
  struct Segment {
    const char* borrowed;  // the name when it lives elsewhere, else null
    uint32_t size;         // the name's length
    Kind kind;
    char text[kInlineText];  // the name when copied; the index for kIndex
  };

  FieldPath Append(Kind kind, absl::string_view name, bool borrow) const;
  void AppendTo(std::string* out) const;
  void CopySegments(const FieldPath& other) {
    if (count_ > 0) std::memcpy(segments_.data(), other.segments_.data(), count_ * sizeof(Segment));
  }

  // The rendered head of a deep path (null when the path fits inline).
  std::shared_ptr<const std::string> head_;
  std::array<Segment, kInlineSegments> segments_;
  uint8_t count_ = 0;
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
