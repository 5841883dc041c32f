// gangkeeper: Kubernetes resource quantities as exact integers.
//
// Every resource amount gangkeeper reads ("500m", "16Gi", "1.5", "2e3") is
// parsed once by ParseQuantity into a Quantity: an exact count of milli-units
// with no floating point anywhere. Model, workload and broker code compare,
// sum and multiply Quantities and print them back with Format(). The semantic
// reference is Kubernetes' resource.Quantity; this is an independent, smaller
// implementation. Quantity is a value type; ParseQuantity is a pure function.
// Both are thread-compatible (no shared state).
#pragma once

#include <compare>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::quantity {

// An exact amount of a resource, stored as a whole number of milli-units
// (1 unit = 1000 milli-units; "1" CPU = 1000m, "1Ki" bytes = 1024000m).
//
// Range: from -2^63 to 2^63-1 whole units inclusive (about ±9.2E), i.e. every
// value whose CeilUnits() fits in int64_t. "1E" and "8E" are representable;
// "10E" and "8Ei" are not. Milli-units need more than 64 bits at the top of
// that range, so milli() is a 128-bit integer.
//
// Format (canonical, deterministic, and ParseQuantity(q.Format()) == q):
//   1. not a whole number of units -> milli-units + "m":  "500m", "1500m", "-1m"
//   2. zero                        -> "0"
//   3. otherwise the shortest of three exact spellings of the whole number:
//        binary:  largest binary suffix that divides it (Ki Mi Gi Ti Pi Ei)
//        decimal: largest decimal suffix that divides it (k M G T P E)
//        plain:   the integer itself
//      ties prefer binary, then decimal. "16Gi", "1Ki", "1536Mi", "1024k"
//      (not "1000Ki"), "9875Ki" (not "10112k"), "2k", "10G" (not
//      "9765625Ki"), "1E", "4", "1023".
// The input's spelling is not kept: "1024", "1Ki" and "1.024k" all format as
// "1Ki"; "0.5" formats as "500m".
//
// Thread-compatible.
class Quantity {
 public:
  // Zero.
  constexpr Quantity() = default;

  static constexpr Quantity FromMilli(int64_t milli) { return Quantity(absl::int128(milli)); }
  // Every int64_t unit count is in range, so this cannot fail.
  static Quantity FromUnits(int64_t units) { return Quantity(absl::int128(units) * 1000); }
  // The largest (2^63-1 units) and smallest (-2^63 units) representable values.
  static Quantity Max();
  static Quantity Min();

  // The exact value in milli-units.
  absl::int128 milli() const { return milli_; }
  // The exact value in milli-units as int64_t. Returns OutOfRange when it does
  // not fit (magnitude above about 9.2e15 units, e.g. "10P").
  [[nodiscard]] absl::StatusOr<int64_t> MilliInt64() const;
  // The value in whole units with any fraction rounded away from zero, like
  // Kubernetes' Value(): 1500m -> 2, 1m -> 1, -1500m -> -2. Always fits.
  int64_t CeilUnits() const;

  bool IsZero() const { return milli_ == 0; }
  bool IsNegative() const { return milli_ < 0; }

  // Exact sum / difference / product. Return OutOfRange (naming both operands)
  // when the result is outside [Min(), Max()]; nothing saturates silently.
  [[nodiscard]] absl::StatusOr<Quantity> Add(Quantity other) const;
  [[nodiscard]] absl::StatusOr<Quantity> Sub(Quantity other) const;
  // `count` copies of this quantity (pod count × per-pod request).
  [[nodiscard]] absl::StatusOr<Quantity> MultiplyBy(int64_t count) const;
  // The sum clamped to [Min(), Max()], for totals where "too large to count"
  // means unlimited (Kueue's saturating sums).
  [[nodiscard]] Quantity SaturatingAdd(Quantity other) const;

  // The canonical spelling described in the class comment.
  std::string Format() const;

  friend bool operator==(Quantity a, Quantity b) { return a.milli_ == b.milli_; }
  friend std::strong_ordering operator<=>(Quantity a, Quantity b) {
    if (a.milli_ < b.milli_) return std::strong_ordering::less;
    if (b.milli_ < a.milli_) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
  }
  template <typename H>
  friend H AbslHashValue(H h, Quantity q) {
    return H::combine(std::move(h), q.milli_);
  }

 private:
  friend absl::StatusOr<Quantity> ParseQuantity(absl::string_view text);
  explicit constexpr Quantity(absl::int128 milli) : milli_(milli) {}

  absl::int128 milli_ = 0;
};

// Parses a Kubernetes quantity string exactly:
//   [+-] digits [. digits] [suffix]     (at least one digit; "5." and ".5" are fine)
//   suffix: n u m k M G T P E  (powers of 1000)   Ki Mi Gi Ti Pi Ei  (powers of 1024)
//           or an exponent e|E [+-] digits        ("2e3", "1E+2", "5e-1")
// "1E" is exa (10^18); "1E3" is 1000. No whitespace anywhere. The suffixes are
// case-sensitive: "1K", "1ki" and "1Gb" are rejected.
//
// Rounding: a value with a fraction of a milli-unit ("1n", "0.0001", "1e-9")
// is rounded away from zero to the next whole milli-unit, as Kubernetes'
// MilliValue() does, so a tiny request counts as 1m and is never dropped.
// "-0" and "0e99" are zero. Negative values parse; callers that require a
// non-negative amount check IsNegative().
//
// Returns InvalidArgument (naming the input and the accepted forms) for
// malformed text, and OutOfRange when the value lies outside
// [Quantity::Min(), Quantity::Max()].
[[nodiscard]] absl::StatusOr<Quantity> ParseQuantity(absl::string_view text);

// Writes q.Format() (for logs and test failure messages).
std::ostream& operator<<(std::ostream& os, Quantity q);

}  // namespace gangkeeper::quantity
