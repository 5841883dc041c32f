// gangkeeper: Kubernetes resource quantities (see the header for the grammar,
// the range, the rounding rule and the canonical format).
//
// Parsing is exact for inputs of any length: the mantissa digits are kept as a
// decimal digit string, multiplied by 2^(10k) for a binary suffix, and only
// converted to a 128-bit integer once the value is known to be in range.
// Pure functions; thread-compatible.
#include "gangkeeper/quantity/quantity.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gangkeeper::quantity {
namespace {

// (2^63 - 1) * 1000 and -2^63 * 1000: the milli-unit bounds of the range.
constexpr absl::int128 kMaxMilli = absl::MakeInt128(499, 18446744073709550616u);
constexpr absl::int128 kMinMilli = absl::MakeInt128(-500, 0);
// Decimal digits of kMaxMilli (and of |kMinMilli|); anything longer is out of range.
constexpr int64_t kMaxMilliDigits = 22;
// Decimal exponents are clamped to this magnitude while parsing. Any input
// shorter than this many characters gets the same result as with the exact
// exponent: out of range, 1m, or zero.
constexpr int64_t kExponentClamp = int64_t{1} << 52;

constexpr absl::string_view kAcceptedForms =
    "expected an optional sign, digits with at most one decimal point, and an optional "
    "suffix: n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3 "
    "or E-2 (for example \"500m\", \"16Gi\", \"1.5\", \"2e3\")";

constexpr absl::string_view kRange =
    "quantities must be between -9223372036854775808 and 9223372036854775807 whole units "
    "(about -9.2E to 9.2E)";

struct Suffix {
  absl::string_view text;
  int decimal_exponent;  // value = mantissa * 10^decimal_exponent * 2^binary_exponent
  int binary_exponent;
};

constexpr Suffix kSuffixes[] = {
    {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
    {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};

// Format's suffixes, largest first.
constexpr absl::string_view kBinaryFormatSuffixes[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
constexpr absl::string_view kDecimalFormatSuffixes[] = {"E", "P", "T", "G", "M", "k"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The input as it appears in error messages: escaped, and cut at 64 bytes.
std::string Quoted(absl::string_view text) {
  constexpr size_t kMaxShown = 64;
  if (text.size() <= kMaxShown) return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxShown)), "\"... (", text.size(),
                      " bytes)");
}

absl::Status Invalid(absl::string_view text, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("quantity ", Quoted(text), " is not valid: ", reason, "; ", kAcceptedForms));
}

absl::Status OutOfRange(absl::string_view text) {
  return absl::OutOfRangeError(
      absl::StrCat("quantity ", Quoted(text), " is out of range: ", kRange));
}

std::string Int128ToString(absl::int128 value) {
  absl::uint128 magnitude = value < 0 ? -absl::uint128(value) : absl::uint128(value);
  std::string reversed;
  do {
    reversed.push_back(static_cast<char>('0' + absl::Uint128Low64(magnitude % 10)));
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0) reversed.push_back('-');
  return std::string(reversed.rbegin(), reversed.rend());
}

// Multiplies the decimal digit string `digits` (most significant first) by
// `factor` in place.
void MultiplyDigits(std::string& digits, uint32_t factor) {
  uint32_t carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    const uint32_t v = static_cast<uint32_t>(*it - '0') * factor + carry;
    *it = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  std::string head;
  for (; carry != 0; carry /= 10) head.insert(head.begin(), static_cast<char>('0' + carry % 10));
  digits.insert(0, head);
}

// Parses the exponent of an "e3" / "E-2" suffix (without the letter), clamped
// to ±kExponentClamp. Returns false if `text` is not [+-]digits.
bool ParseExponent(absl::string_view text, int64_t& exponent) {
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) return false;
  int64_t value = 0;
  for (char c : text) {
    if (!IsDigit(c)) return false;
    if (value < kExponentClamp) value = value * 10 + (c - '0');
  }
  if (value > kExponentClamp) value = kExponentClamp;
  exponent = negative ? -value : value;
  return true;
}

// Explains why `suffix` is not one of the accepted suffixes.
std::string SuffixProblem(absl::string_view suffix) {
  if (suffix[0] == '.') return "it has more than one decimal point";
  for (char c : suffix) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return "it contains whitespace";
  }
  if (suffix[0] == 'e' || suffix[0] == 'E') {
    return absl::StrCat("exponent ", Quoted(suffix), " must be e or E followed by an integer");
  }
  return absl::StrCat("unknown suffix ", Quoted(suffix));
}

}  // namespace

Quantity Quantity::Max() { return Quantity(kMaxMilli); }
Quantity Quantity::Min() { return Quantity(kMinMilli); }

absl::StatusOr<int64_t> Quantity::MilliInt64() const {
  if (milli_ > std::numeric_limits<int64_t>::max() ||
      milli_ < std::numeric_limits<int64_t>::min()) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity ", Format(), " does not fit in a 64-bit count of milli-units"));
  }
  return static_cast<int64_t>(milli_);
}

int64_t Quantity::CeilUnits() const {
  absl::int128 units = milli_ / 1000;  // truncates toward zero
  const absl::int128 rest = milli_ % 1000;
  if (rest > 0) units += 1;
  if (rest < 0) units -= 1;
  return static_cast<int64_t>(units);
}

absl::StatusOr<Quantity> Quantity::Add(Quantity other) const {
  const absl::int128 sum = milli_ + other.milli_;  // |each| < 2^73: no 128-bit overflow
  if (sum > kMaxMilli || sum < kMinMilli) {
    return absl::OutOfRangeError(absl::StrCat("quantity overflow: ", Format(), " + ",
                                              other.Format(), " is out of range; ", kRange));
  }
  return Quantity(sum);
}

absl::StatusOr<Quantity> Quantity::Sub(Quantity other) const {
  const absl::int128 difference = milli_ - other.milli_;
  if (difference > kMaxMilli || difference < kMinMilli) {
    return absl::OutOfRangeError(absl::StrCat("quantity overflow: ", Format(), " - ",
                                              other.Format(), " is out of range; ", kRange));
  }
  return Quantity(difference);
}

absl::StatusOr<Quantity> Quantity::MultiplyBy(int64_t count) const {
  const absl::uint128 magnitude = milli_ < 0 ? -absl::uint128(milli_) : absl::uint128(milli_);
  const absl::uint128 factor =
      count < 0 ? -absl::uint128(absl::int128(count)) : absl::uint128(absl::int128(count));
  // Bounds |product| by |kMinMilli| (< 2^73) before multiplying, so the
  // 128-bit product itself cannot overflow.
  const absl::uint128 limit = -absl::uint128(kMinMilli);
  if (factor != 0 && magnitude > limit / factor) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity overflow: ", Format(), " * ", count, " is out of range; ", kRange));
  }
  const absl::int128 product = milli_ * absl::int128(count);
  if (product > kMaxMilli || product < kMinMilli) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity overflow: ", Format(), " * ", count, " is out of range; ", kRange));
  }
  return Quantity(product);
}

Quantity Quantity::SaturatingAdd(Quantity other) const {
  const absl::int128 sum = milli_ + other.milli_;
  if (sum > kMaxMilli) return Max();
  if (sum < kMinMilli) return Min();
  return Quantity(sum);
}

std::string Quantity::Format() const {
  if (milli_ % 1000 != 0) return absl::StrCat(Int128ToString(milli_), "m");
  const int64_t units = static_cast<int64_t>(milli_ / 1000);
  if (units == 0) return "0";
  std::string best = absl::StrCat(units);
  auto consider = [&best](std::string candidate) {
    if (candidate.size() <= best.size()) best = std::move(candidate);
  };
  // Candidates in reverse order of preference, so that ties go to the later one.
  int64_t divisor = 1'000'000'000'000'000'000;
  for (int i = 0; i < 6; ++i, divisor /= 1000) {
    if (units % divisor == 0) {
      consider(absl::StrCat(units / divisor, kDecimalFormatSuffixes[i]));
      break;
    }
  }
  for (int i = 0; i < 6; ++i) {
    divisor = int64_t{1} << (10 * (6 - i));
    if (units % divisor == 0) {
      consider(absl::StrCat(units / divisor, kBinaryFormatSuffixes[i]));
      break;
    }
  }
  return best;
}

std::ostream& operator<<(std::ostream& os, Quantity q) { return os << q.Format(); }

absl::StatusOr<Quantity> ParseQuantity(absl::string_view text) {
  if (text.empty()) return Invalid(text, "it is empty");

  // 1. Sign, integer digits, optional '.', fraction digits; the rest is the suffix.
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  const size_t int_start = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  const absl::string_view int_digits = text.substr(int_start, pos - int_start);
  absl::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_start = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    frac_digits = text.substr(frac_start, pos - frac_start);
  }
  if (int_digits.empty() && frac_digits.empty()) return Invalid(text, "it has no digits");
  const absl::string_view suffix_text = text.substr(pos);

  // 2. The suffix: a fixed unit, or an exponent.
  int64_t decimal_exponent = 0;
  int binary_exponent = 0;
  bool known = false;
  for (const Suffix& s : kSuffixes) {
    if (suffix_text == s.text) {
      decimal_exponent = s.decimal_exponent;
      binary_exponent = s.binary_exponent;
      known = true;
      break;
    }
  }
  if (!known) {
    const bool exponent_form = suffix_text[0] == 'e' || suffix_text[0] == 'E';
    if (!exponent_form || !ParseExponent(suffix_text.substr(1), decimal_exponent)) {
      return Invalid(text, SuffixProblem(suffix_text));
    }
  }

  // 3. value in milli-units = digits * 10^exponent, where digits is the
  // mantissa without its decimal point (times 2^binary_exponent).
  std::string digits = absl::StrCat(int_digits, frac_digits);
  int64_t exponent = 3 + decimal_exponent - static_cast<int64_t>(frac_digits.size());
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return Quantity();  // "0", "-0.00", "0e99"
  digits.erase(0, first_nonzero);
  for (int i = 0; i < binary_exponent; i += 10) MultiplyDigits(digits, 1024);
  const size_t last_nonzero = digits.find_last_not_of('0');
  exponent += static_cast<int64_t>(digits.size() - 1 - last_nonzero);
  digits.erase(last_nonzero + 1);

  // 4. Integer part (the fraction, if any, is non-zero: its last digit is),
  // rounded away from zero.
  const int64_t num_digits = static_cast<int64_t>(digits.size());
  const int64_t int_len = num_digits + exponent;  // digits before the decimal point
  if (int_len > kMaxMilliDigits) return OutOfRange(text);
  absl::int128 magnitude = 0;
  if (exponent >= 0) {
    for (char c : digits) magnitude = magnitude * 10 + (c - '0');
    for (int64_t i = 0; i < exponent; ++i) magnitude *= 10;
  } else {
    for (int64_t i = 0; i < int_len; ++i) magnitude = magnitude * 10 + (digits[i] - '0');
    magnitude += 1;
  }
  const absl::int128 milli = negative ? -magnitude : magnitude;
  if (milli > kMaxMilli || milli < kMinMilli) return OutOfRange(text);
  return Quantity(milli);
}

}  // namespace gangkeeper::quantity
