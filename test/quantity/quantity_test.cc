// gangkeeper: tests for quantity/quantity.h — the accepted grammar, exact
// values and rounding, rejection codes, arithmetic overflow, ordering,
// canonical formatting and the Format/Parse round trip.
#include "gangkeeper/quantity/quantity.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::quantity {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::Not;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

absl::int128 Pow(int64_t base, int exponent) {
  absl::int128 result = 1;
  for (int i = 0; i < exponent; ++i) result *= base;
  return result;
}

// n * 10^exponent as a 128-bit integer (for expected milli-unit values).
absl::int128 E10(int64_t n, int exponent) { return absl::int128(n) * Pow(10, exponent); }
// n * 2^exponent * 1000: milli-units of n binary-suffixed units.
absl::int128 BinMilli(int64_t n, int exponent) { return absl::int128(n) * Pow(2, exponent) * 1000; }

std::string Str(absl::int128 v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

MATCHER_P(IsOkAndHolds, want, "is OK and holds " + ::testing::PrintToString(want)) {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  *result_listener << "holds " << ::testing::PrintToString(*arg);
  return *arg == want;
}

Quantity MustParse(absl::string_view text) {
  absl::StatusOr<Quantity> q = ParseQuantity(text);
  EXPECT_THAT(q, IsOk()) << text;
  return q.ok() ? *q : Quantity();
}

struct AcceptCase {
  const char* name;
  std::string input;
  absl::int128 want_milli;
};

void ExpectAccepted(const std::vector<AcceptCase>& cases) {
  for (const AcceptCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.name, ": \"", c.input, "\""));
    absl::StatusOr<Quantity> q = ParseQuantity(c.input);
    ASSERT_THAT(q, IsOk());
    EXPECT_EQ(Str(q->milli()), Str(c.want_milli));
  }
}

TEST(ParseQuantityTest, PlainNumbersAndSigns) {
  ExpectAccepted({
      {"zero", "0", 0},
      {"negative zero is zero", "-0", 0},
      {"positive zero", "+0", 0},
      {"several zeros", "000", 0},
      {"zero with a fraction of zeros", "0.000", 0},
      {"whole number from the issue", "4", 4000},
      {"explicit plus sign", "+4", 4000},
      {"negative number", "-4", -4000},
      {"leading zeros are ignored", "007", 7000},
      {"a number not divisible by anything", "1000001", 1000001000},
      {"many leading zeros", std::string(200, '0') + "1", 1000},
  });
}

TEST(ParseQuantityTest, DecimalFractions) {
  ExpectAccepted({
      {"one and a half from the issue", "1.5", 1500},
      {"one tenth from the issue", "0.1", 100},
      {"no integer part", ".5", 500},
      {"trailing decimal point", "5.", 5000},
      {"negative without integer part", "-.5", -500},
      {"exactly one milli", "0.001", 1},
      {"half a milli rounds up", "0.0005", 1},
      {"one and a half milli rounds up", "0.0015", 2},
      {"a tenth of a milli over a whole milli", "1.0001", 1001},
      {"negative sub-milli rounds away from zero", "-0.0005", -1},
      {"negative fraction rounds away from zero", "-1.0001", -1001},
      {"trailing fraction zeros are exact", "1.500000000000000000000000000000", 1500},
      {"very long fraction rounds up", "0." + std::string(5000, '0') + "1", 1},
      {"long fraction that is exact after zeros", "2." + std::string(5000, '0'), 2000},
  });
}

TEST(ParseQuantityTest, DecimalSiSuffixes) {
  ExpectAccepted({
      {"nano rounds up to a milli", "1n", 1},
      {"a million nano is one milli", "1000000n", 1},
      {"just over a milli in nano rounds up", "1000001n", 2},
      {"two milli in nano", "2000000n", 2},
      {"micro rounds up to a milli", "1u", 1},
      {"a thousand micro is one milli", "1000u", 1},
      {"one and a half milli in micro", "1500u", 2},
      {"milli from the issue", "500m", 500},
      {"one milli", "1m", 1},
      {"zero milli", "0m", 0},
      {"negative milli", "-250m", -250},
      {"fractional milli rounds up", "0.5m", 1},
      {"fractional milli above one rounds up", "1.5m", 2},
      {"negative fractional milli rounds away from zero", "-1.5m", -2},
      {"kilo", "1k", E10(1, 6)},
      {"fractional kilo", "1.5k", E10(15, 5)},
      {"mega", "1M", E10(1, 9)},
      {"giga", "2.5G", E10(25, 11)},
      {"tera", "1T", E10(1, 15)},
      {"peta", "1P", E10(1, 18)},
      {"exa from the issue exceeds 64-bit milli", "1E", E10(1, 21)},
      {"nine exa is in range", "9E", E10(9, 21)},
      {"decimal point before a suffix", "5.G", E10(5, 12)},
  });
}

TEST(ParseQuantityTest, BinarySiSuffixes) {
  ExpectAccepted({
      {"kibi", "1Ki", 1024000},
      {"gibi from the issue", "16Gi", BinMilli(16, 30)},
      {"mebi", "1Mi", BinMilli(1, 20)},
      {"tebi", "1Ti", BinMilli(1, 40)},
      {"pebi", "1Pi", BinMilli(1, 50)},
      {"exbi", "1Ei", BinMilli(1, 60)},
      {"seven exbi is in range", "7Ei", BinMilli(7, 60)},
      {"negative eight exbi is the minimum", "-8Ei", BinMilli(-8, 60)},
      {"half a kibi", "0.5Ki", 512000},
      {"one and a half gibi", "1.5Gi", BinMilli(3, 29)},
      {"a thousandth of a kibi is exact in milli", "0.001Ki", 1024},
      {"a ten-thousandth of a kibi rounds up", "0.0001Ki", 103},
      {"negative binary fraction rounds away from zero", "-0.0001Ki", -103},
      {"decimal point before a binary suffix", "5.Gi", BinMilli(5, 30)},
  });
}

TEST(ParseQuantityTest, DecimalExponents) {
  ExpectAccepted({
      {"lower-case exponent from the issue", "2e3", E10(2, 6)},
      {"upper-case E with digits is an exponent, not exa", "1E3", E10(1, 6)},
      {"zero exponent", "1e0", 1000},
      {"explicit positive exponent", "1E+2", 100000},
      {"plus zero exponent", "1e+0", 1000},
      {"negative exponent to one milli", "1e-3", 1},
      {"negative exponent below a milli rounds up", "1e-4", 1},
      {"negative exponent to a half", "5e-1", 500},
      {"fraction with exponent", "1.5e3", E10(15, 5)},
      {"negative value with exponent", "-2e3", -E10(2, 6)},
      {"exponent with leading zero", "1e03", E10(1, 6)},
      {"exponent reaching exa", "1e18", E10(1, 21)},
      {"fraction times negative exponent", "123e-2", 1230},
      {"zero with a huge exponent is zero", "0e400", 0},
      {"a huge negative exponent rounds up to a milli", "1e-400", 1},
      {"an exponent too large for 64 bits on zero", "0e99999999999999999999999", 0},
      {"an exponent too small for 64 bits rounds up", "1e-99999999999999999999999", 1},
      {"long mantissa scaled down", "1" + std::string(29, '0') + "e-20", E10(1, 12)},
      {"tiny mantissa scaled up", "0." + std::string(29, '0') + "1e30", 1000},
  });
}

TEST(ParseQuantityTest, RangeEdges) {
  ExpectAccepted({
      {"largest whole value", "9223372036854775807", absl::int128(kInt64Max) * 1000},
      {"smallest whole value", "-9223372036854775808", absl::int128(kInt64Min) * 1000},
      {"largest value in milli", "9223372036854775807000m", absl::int128(kInt64Max) * 1000},
      {"largest value with a decimal suffix", "9.223372036854775807E",
       absl::int128(kInt64Max) * 1000},
      {"a fraction that rounds up to the maximum", "9223372036854775806.9995",
       absl::int128(kInt64Max) * 1000},
      {"just below the maximum", "9223372036854775806.999", absl::int128(kInt64Max) * 1000 - 1},
  });
}

struct RejectCase {
  const char* name;
  std::string input;
  absl::StatusCode want_code;
};

void ExpectRejected(const std::vector<RejectCase>& cases) {
  for (const RejectCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.name, ": \"", c.input, "\""));
    EXPECT_THAT(ParseQuantity(c.input), StatusIs(c.want_code));
  }
}

TEST(ParseQuantityTest, RejectsMalformedText) {
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  ExpectRejected({
      {"a word from the issue", "four", kInvalid},
      {"the empty string from the issue", "", kInvalid},
      {"two decimal points from the issue", "1.5.3", kInvalid},
      {"a lone minus from the issue", "-", kInvalid},
      {"a lone plus", "+", kInvalid},
      {"a lone decimal point", ".", kInvalid},
      {"a sign and a decimal point", "-.", kInvalid},
      {"a trailing second decimal point", "1.2.", kInvalid},
      {"byte unit suffix", "1Gb", kInvalid},
      {"space before the suffix", "1 Gi", kInvalid},
      {"leading space", " 1", kInvalid},
      {"trailing space", "1 ", kInvalid},
      {"trailing newline", "1\n", kInvalid},
      {"embedded NUL", std::string("1\0", 2), kInvalid},
      {"exponent without digits", "1e", kInvalid},
      {"exponent with only a plus sign", "1e+", kInvalid},
      {"exponent with only a minus sign", "1E-", kInvalid},
      {"exponent with two signs", "1e+-3", kInvalid},
      {"exponent with a fraction", "1e1.5", kInvalid},
      {"exponent followed by a suffix", "1e3Gi", kInvalid},
      {"doubled exponent letter", "1ee3", kInvalid},
      {"fraction then a bare exponent letter", "1.5e", kInvalid},
      {"hexadecimal", "0x10", kInvalid},
      {"digits after a binary suffix", "1Gi3", kInvalid},
      {"digits after a decimal suffix", "1k3", kInvalid},
      {"binary suffix then exponent", "1E3Ki", kInvalid},
      {"doubled minus", "--1", kInvalid},
      {"plus then minus", "+-1", kInvalid},
      {"lower-case k with i", "1ki", kInvalid},
      {"upper-case K alone", "1K", kInvalid},
      {"upper-case binary suffix", "1GI", kInvalid},
      {"lower-case binary suffix", "1gi", kInvalid},
      {"milli with i", "0.1mi", kInvalid},
      {"a bare i", "1i", kInvalid},
      {"byte suffix after binary", "1KiB", kInvalid},
      {"two suffixes", "1mE3", kInvalid},
      {"micro sign", "1\xC2\xB5", kInvalid},
      {"thousands separator", "1,000", kInvalid},
      {"digit group underscore", "1_000", kInvalid},
      {"suffix without a number", "Gi", kInvalid},
      {"exponent without a number", "e3", kInvalid},
      {"infinity", "inf", kInvalid},
      {"not a number", "NaN", kInvalid},
  });
}

TEST(ParseQuantityTest, RejectsValuesOutOfRange) {
  constexpr absl::StatusCode kOutOfRange = absl::StatusCode::kOutOfRange;
  ExpectRejected({
      {"ten exa", "10E", kOutOfRange},
      {"one over the largest whole value", "9223372036854775808", kOutOfRange},
      {"one under the smallest whole value", "-9223372036854775809", kOutOfRange},
      {"a fraction above the largest whole value", "9223372036854775807.0001", kOutOfRange},
      {"a milli above the largest value", "9223372036854775807001m", kOutOfRange},
      {"eight exbi", "8Ei", kOutOfRange},
      {"just beyond minus eight exbi", "-8.0000000001Ei", kOutOfRange},
      {"huge binary multiple", "99999999999999999999999Ki", kOutOfRange},
      {"huge exponent", "1e400", kOutOfRange},
      {"exponent just past the range", "1e19", kOutOfRange},
      {"ten thousand peta", "10000P", kOutOfRange},
      {"an exponent too large for 64 bits", "1e99999999999999999999999", kOutOfRange},
      {"a thousand nines", std::string(1000, '9'), kOutOfRange},
      {"a negative thousand nines", "-" + std::string(1000, '9'), kOutOfRange},
  });
}

TEST(ParseQuantityTest, InvalidMessageNamesInputAndAcceptedForms) {
  absl::StatusOr<Quantity> q = ParseQuantity("1Gb");
  EXPECT_THAT(q, StatusIs(absl::StatusCode::kInvalidArgument, "\"1Gb\""));
  EXPECT_THAT(q, StatusIs(absl::StatusCode::kInvalidArgument, "Ki, Mi, Gi"));
  EXPECT_THAT(q, StatusIs(absl::StatusCode::kInvalidArgument, "\"16Gi\""));
  EXPECT_THAT(ParseQuantity("1\n"), StatusIs(absl::StatusCode::kInvalidArgument, "\"1\\n\""));
}

TEST(ParseQuantityTest, OutOfRangeMessageNamesInputAndMaximum) {
  EXPECT_THAT(ParseQuantity("10E"), StatusIs(absl::StatusCode::kOutOfRange, "\"10E\""));
  EXPECT_THAT(ParseQuantity("10E"), StatusIs(absl::StatusCode::kOutOfRange, "9223372036854775807"));
}

TEST(ParseQuantityTest, MessageForHugeInputIsTruncated) {
  const std::string huge(100000, 'x');
  absl::StatusOr<Quantity> q = ParseQuantity(huge);
  ASSERT_THAT(q, StatusIs(absl::StatusCode::kInvalidArgument, "(100000 bytes)"));
  EXPECT_LT(q.status().message().size(), 1000u);
}

// An independent statement of the grammar: ParseQuantity accepts a string
// (possibly with OutOfRange) exactly when this regex matches it.
TEST(ParseQuantityTest, GrammarMatchesReferenceRegexOnRandomStrings) {
  const std::regex grammar(
      R"(^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)?$)");
  const std::string alphabet = "0123456789.+-eEinumkKMGTP ";
  std::mt19937_64 rng(20240601);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    const size_t length = 1 + rng() % 7;
    std::string s;
    for (size_t j = 0; j < length; ++j) s.push_back(alphabet[rng() % alphabet.size()]);
    const bool want_valid = std::regex_match(s, grammar);
    absl::StatusOr<Quantity> q = ParseQuantity(s);
    if (want_valid) {
      EXPECT_THAT(q, Not(StatusIs(absl::StatusCode::kInvalidArgument))) << '"' << s << '"';
    } else {
      EXPECT_THAT(q, StatusIs(absl::StatusCode::kInvalidArgument)) << '"' << s << '"';
    }
    if (q.ok()) {
      ++accepted;
      EXPECT_EQ(MustParse(q->Format()), *q) << '"' << s << "\" formatted as " << q->Format();
    }
  }
  EXPECT_GT(accepted, 1000);  // the sample exercised the accepting paths
}

// Computes the expected value of "<sign><whole>.<frac digits><suffix>" by
// ceiling division, independently of the parser's digit-string arithmetic.
TEST(ParseQuantityTest, RandomDecimalsMatchExactRationalArithmetic) {
  struct Suffix {
    const char* text;
    int decimal_exponent;
    int binary_exponent;
  };
  const Suffix suffixes[] = {
      {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},     {"m", -3, 0},  {"k", 3, 0},    {"M", 6, 0},
      {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},     {"E", 18, 0},  {"Ki", 0, 10},  {"Mi", 0, 20},
      {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},    {"Ei", 0, 60}, {"e-7", -7, 0}, {"e2", 2, 0},
      {"E5", 5, 0},  {"e+1", 1, 0}, {"e-12", -12, 0},
  };
  const absl::int128 max_milli = absl::int128(kInt64Max) * 1000;
  const absl::int128 min_milli = absl::int128(kInt64Min) * 1000;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50000; ++i) {
    const bool negative = rng() % 3 == 0;
    const int64_t whole = static_cast<int64_t>(rng() % 10'000'000);
    const int frac_len = static_cast<int>(rng() % 6);
    const uint64_t frac_limit = static_cast<uint64_t>(Pow(10, frac_len));
    const int64_t frac = static_cast<int64_t>(rng() % frac_limit);
    const Suffix& suffix = suffixes[rng() % std::size(suffixes)];
    std::string frac_text = absl::StrCat(frac);
    frac_text.insert(
        0, static_cast<size_t>(frac_len) - std::min<size_t>(frac_text.size(), frac_len), '0');
    const std::string text = absl::StrCat(negative ? "-" : "", whole, frac_len > 0 ? "." : "",
                                          frac_len > 0 ? frac_text : "", suffix.text);

    absl::int128 numerator =
        (absl::int128(whole) * Pow(10, frac_len) + frac) * 1000 * Pow(2, suffix.binary_exponent);
    absl::int128 denominator = Pow(10, frac_len);
    if (suffix.decimal_exponent >= 0) {
      numerator *= Pow(10, suffix.decimal_exponent);
    } else {
      denominator *= Pow(10, -suffix.decimal_exponent);
    }
    absl::int128 magnitude = (numerator + denominator - 1) / denominator;
    const absl::int128 want = negative ? -magnitude : magnitude;

    SCOPED_TRACE(text);
    absl::StatusOr<Quantity> q = ParseQuantity(text);
    if (want > max_milli || want < min_milli) {
      EXPECT_THAT(q, StatusIs(absl::StatusCode::kOutOfRange));
    } else {
      ASSERT_THAT(q, IsOk());
      EXPECT_EQ(Str(q->milli()), Str(want));
    }
  }
}

TEST(QuantityTest, ConstructorsAndAccessors) {
  EXPECT_TRUE(Quantity().IsZero());
  EXPECT_EQ(Quantity::FromUnits(4), MustParse("4"));
  EXPECT_EQ(Quantity::FromMilli(1500), MustParse("1.5"));
  EXPECT_EQ(Quantity::FromMilli(-1), MustParse("-1m"));
  EXPECT_EQ(Quantity::FromUnits(kInt64Min), Quantity::Min());
  EXPECT_EQ(Quantity::FromUnits(kInt64Max), Quantity::Max());
  EXPECT_EQ(Str(Quantity::Max().milli()), "9223372036854775807000");
  EXPECT_EQ(Str(Quantity::Min().milli()), "-9223372036854775808000");
  EXPECT_EQ(Quantity::FromMilli(kInt64Min).milli(), absl::int128(kInt64Min));

  EXPECT_TRUE(MustParse("0m").IsZero());
  EXPECT_FALSE(MustParse("1n").IsZero());
  EXPECT_TRUE(MustParse("-1n").IsNegative());
  EXPECT_FALSE(MustParse("-0").IsNegative());
  EXPECT_FALSE(MustParse("1").IsNegative());
}

TEST(QuantityTest, MilliInt64) {
  EXPECT_THAT(MustParse("500m").MilliInt64(), IsOkAndHolds(500));
  EXPECT_EQ(*MustParse("16Gi").MilliInt64(), (int64_t{16} << 30) * 1000);
  EXPECT_EQ(*MustParse("9223372036854775807m").MilliInt64(), kInt64Max);
  EXPECT_EQ(*Quantity::FromMilli(kInt64Min).MilliInt64(), kInt64Min);
  EXPECT_THAT(MustParse("9223372036854775808m").MilliInt64(),
              StatusIs(absl::StatusCode::kOutOfRange, "9223372036854775808m"));
  EXPECT_THAT(MustParse("-9223372036854775809m").MilliInt64(),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(MustParse("1E").MilliInt64(), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(QuantityTest, CeilUnitsRoundsAwayFromZero) {
  struct Case {
    const char* input;
    int64_t want;
  } cases[] = {
      {"0", 0},
      {"1m", 1},
      {"999m", 1},
      {"1000m", 1},
      {"1001m", 2},
      {"1500m", 2},
      {"1n", 1},
      {"-1m", -1},
      {"-1500m", -2},
      {"-2", -2},
      {"16Gi", int64_t{16} << 30},
      {"1E", 1'000'000'000'000'000'000},
      {"9223372036854775806.001", kInt64Max},
      {"9223372036854775807", kInt64Max},
      {"-9223372036854775807.001", kInt64Min},
      {"-9223372036854775808", kInt64Min},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.input);
    EXPECT_EQ(MustParse(c.input).CeilUnits(), c.want);
  }
}

TEST(QuantityTest, AddAndSubAreExact) {
  EXPECT_THAT(MustParse("1Gi").Add(MustParse("512Mi")), IsOkAndHolds(MustParse("1.5Gi")));
  EXPECT_THAT(MustParse("1").Sub(MustParse("500m")), IsOkAndHolds(MustParse("0.5")));
  EXPECT_THAT(MustParse("1").Sub(MustParse("2")), IsOkAndHolds(MustParse("-1")));
  EXPECT_THAT(MustParse("1E").Add(MustParse("1E")), IsOkAndHolds(MustParse("2E")));
  EXPECT_THAT(Quantity::Max().Add(Quantity::Min()), IsOkAndHolds(Quantity::FromUnits(-1)));
  EXPECT_THAT(Quantity().Sub(Quantity::Max()), IsOkAndHolds(Quantity::FromUnits(-kInt64Max)));
  EXPECT_THAT(Quantity::Max().Add(Quantity()), IsOkAndHolds(Quantity::Max()));
}

TEST(QuantityTest, AddAndSubDetectOverflow) {
  const Quantity one_milli = Quantity::FromMilli(1);
  EXPECT_THAT(Quantity::Max().Add(one_milli), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Min().Add(Quantity::FromMilli(-1)),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Min().Sub(one_milli), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Max().Sub(Quantity::Min()), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity().Sub(Quantity::Min()), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(MustParse("9E").Add(MustParse("1E")),
              StatusIs(absl::StatusCode::kOutOfRange, "9E + 1E"));
  EXPECT_THAT(MustParse("-9E").Sub(MustParse("1E")),
              StatusIs(absl::StatusCode::kOutOfRange, "-9E - 1E"));
}

TEST(QuantityTest, MultiplyBy) {
  EXPECT_THAT(MustParse("500m").MultiplyBy(8), IsOkAndHolds(MustParse("4")));
  EXPECT_THAT(MustParse("500m").MultiplyBy(-3), IsOkAndHolds(MustParse("-1500m")));
  EXPECT_THAT(MustParse("16Gi").MultiplyBy(64), IsOkAndHolds(MustParse("1Ti")));
  EXPECT_THAT(Quantity::Max().MultiplyBy(0), IsOkAndHolds(Quantity()));
  EXPECT_THAT(Quantity::Max().MultiplyBy(1), IsOkAndHolds(Quantity::Max()));
  EXPECT_THAT(Quantity::Max().MultiplyBy(-1), IsOkAndHolds(Quantity::FromUnits(-kInt64Max)));
  EXPECT_THAT(Quantity::FromUnits(1).MultiplyBy(kInt64Min), IsOkAndHolds(Quantity::Min()));
  EXPECT_THAT(Quantity::FromMilli(1).MultiplyBy(kInt64Max),
              IsOkAndHolds(Quantity::FromMilli(kInt64Max)));
  EXPECT_THAT(Quantity::FromMilli(-1).MultiplyBy(kInt64Min),
              IsOkAndHolds(MustParse("9223372036854775808m")));
  EXPECT_THAT(MustParse("1Ei").MultiplyBy(7), IsOkAndHolds(MustParse("7Ei")));
}

TEST(QuantityTest, MultiplyByDetectsOverflow) {
  EXPECT_THAT(Quantity::Max().MultiplyBy(2), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Min().MultiplyBy(-1), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::FromUnits(2).MultiplyBy(kInt64Max),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Max().MultiplyBy(kInt64Max), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(Quantity::Min().MultiplyBy(kInt64Min), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(MustParse("1Ei").MultiplyBy(8), StatusIs(absl::StatusCode::kOutOfRange, "1Ei * 8"));
  // 2^63 units is one past Max, -2^63 units is exactly Min.
  EXPECT_THAT(Quantity::FromUnits(-1).MultiplyBy(kInt64Min),
              StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(QuantityTest, SaturatingAdd) {
  EXPECT_EQ(MustParse("1").SaturatingAdd(MustParse("2")), MustParse("3"));
  EXPECT_EQ(Quantity::Max().SaturatingAdd(Quantity::FromMilli(1)), Quantity::Max());
  EXPECT_EQ(Quantity::Max().SaturatingAdd(Quantity::Max()), Quantity::Max());
  EXPECT_EQ(Quantity::Min().SaturatingAdd(Quantity::FromMilli(-1)), Quantity::Min());
  EXPECT_EQ(Quantity::Max().SaturatingAdd(Quantity::FromMilli(-1)),
            Quantity::FromMilli(-1).SaturatingAdd(Quantity::Max()));
  EXPECT_LT(Quantity::Max().SaturatingAdd(Quantity::FromMilli(-1)), Quantity::Max());
}

TEST(QuantityTest, ComparesAcrossSpellings) {
  EXPECT_EQ(MustParse("1Gi"), MustParse("1073741824"));
  EXPECT_EQ(MustParse("1k"), MustParse("1000"));
  EXPECT_EQ(MustParse("0.5"), MustParse("500m"));
  EXPECT_EQ(MustParse("1E3"), MustParse("1k"));
  EXPECT_EQ(MustParse("1e-3"), MustParse("1m"));
  EXPECT_EQ(MustParse("1n"), MustParse("1m"));  // rounded up at parse time
  EXPECT_EQ(MustParse("2e3"), MustParse("2000"));
  EXPECT_NE(MustParse("1E"), MustParse("1E3"));
  EXPECT_LT(MustParse("1Ki"), MustParse("1025"));
  EXPECT_GT(MustParse("1Ki"), MustParse("1k"));
  EXPECT_LT(MustParse("1G"), MustParse("1Gi"));
  EXPECT_LT(MustParse("-1"), MustParse("0"));
  EXPECT_LT(MustParse("999m"), MustParse("1"));
  EXPECT_LT(MustParse("1P"), MustParse("1E"));  // beyond 64-bit milli
  EXPECT_LE(MustParse("1"), MustParse("1000m"));
  EXPECT_GE(MustParse("1"), MustParse("1000m"));
  EXPECT_EQ(MustParse("1Gi") <=> MustParse("1073741824"), std::strong_ordering::equal);
  EXPECT_EQ(MustParse("1") <=> MustParse("2"), std::strong_ordering::less);
  EXPECT_EQ(MustParse("2") <=> MustParse("1"), std::strong_ordering::greater);

  std::vector<Quantity> values = {MustParse("1Gi"),  MustParse("-1"), MustParse("1E"),
                                  MustParse("500m"), MustParse("1G"), MustParse("0")};
  std::sort(values.begin(), values.end());
  std::vector<std::string> formatted;
  for (const Quantity& q : values) formatted.push_back(q.Format());
  EXPECT_THAT(formatted, ::testing::ElementsAre("-1", "0", "500m", "1G", "1Gi", "1E"));
}

TEST(QuantityTest, FormatIsCanonical) {
  struct Case {
    const char* name;
    Quantity value;
    const char* want;
  };
  const Case cases[] = {
      {"zero", Quantity(), "0"},
      {"half a unit in milli", Quantity::FromMilli(500), "500m"},
      {"a fractional value stays in milli", Quantity::FromMilli(1500), "1500m"},
      {"negative milli", Quantity::FromMilli(-1), "-1m"},
      {"a small whole number is plain", Quantity::FromUnits(4), "4"},
      {"just below a kibi is plain", Quantity::FromUnits(1023), "1023"},
      {"a kibi", Quantity::FromUnits(1024), "1Ki"},
      {"two kibi", Quantity::FromUnits(2048), "2Ki"},
      {"negative kibi", Quantity::FromUnits(-1024), "-1Ki"},
      {"a thousand is kilo", Quantity::FromUnits(1000), "1k"},
      {"two thousand is kilo", Quantity::FromUnits(2000), "2k"},
      {"largest exact decimal suffix only", Quantity::FromUnits(1'500'000), "1500k"},
      {"a million is mega", Quantity::FromUnits(1'000'000), "1M"},
      {"decimal wins when shorter", Quantity::FromUnits(1'024'000), "1024k"},
      {"binary wins a tie with decimal (10112k)", Quantity::FromUnits(10'112'000), "9875Ki"},
      {"decimal wins when shorter than binary", MustParse("10G"), "10G"},
      {"binary wins when shorter than decimal", Quantity::FromUnits(1'048'576'000), "1000Mi"},
      {"decimal wins when shorter than binary", Quantity::FromUnits(1'024'000'000), "1024M"},
      {"a binary suffix beats plain", Quantity::FromUnits(11264), "11Ki"},
      {"largest exact binary suffix", MustParse("1.5Gi"), "1536Mi"},
      {"gibi from the issue", MustParse("16Gi"), "16Gi"},
      {"peta", MustParse("1P"), "1P"},
      {"exa", MustParse("1E"), "1E"},
      {"exbi", MustParse("1Ei"), "1Ei"},
      {"not divisible by anything", Quantity::FromUnits(1'000'001), "1000001"},
      {"the maximum is plain", Quantity::Max(), "9223372036854775807"},
      {"the minimum is minus eight exbi", Quantity::Min(), "-8Ei"},
      {"milli beyond 64 bits", MustParse("9223372036854775806.5"), "9223372036854775806500m"},
      {"negative milli beyond 64 bits", MustParse("-9223372036854775807.5"),
       "-9223372036854775807500m"},
      {"rounded nano", MustParse("1n"), "1m"},
      {"a decimal fraction", MustParse("0.1"), "100m"},
      {"kilo spelling of a kibi", MustParse("1.024k"), "1Ki"},
      {"exponent spelling", MustParse("2e3"), "2k"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.value.Format(), c.want);
  }
}

TEST(QuantityTest, StreamsFormat) {
  std::ostringstream os;
  os << MustParse("16Gi") << " " << MustParse("0.5");
  EXPECT_EQ(os.str(), "16Gi 500m");
}

// Checks ParseQuantity(q.Format()) == q and that formatting is stable.
void ExpectRoundTrip(Quantity q) {
  const std::string text = q.Format();
  absl::StatusOr<Quantity> parsed = ParseQuantity(text);
  ASSERT_THAT(parsed, IsOk()) << text;
  EXPECT_EQ(*parsed, q) << text;
  EXPECT_EQ(parsed->Format(), text);
}

TEST(QuantityTest, FormatRoundTripsOverGeneratedValues) {
  std::vector<Quantity> values = {Quantity(),
                                  Quantity::Max(),
                                  Quantity::Min(),
                                  *Quantity::Max().Sub(Quantity::FromMilli(1)),
                                  *Quantity::Min().Add(Quantity::FromMilli(1)),
                                  Quantity::FromMilli(kInt64Max),
                                  Quantity::FromMilli(kInt64Min)};
  for (int64_t m = -3000; m <= 3000; ++m) values.push_back(Quantity::FromMilli(m));
  for (int64_t k = -1100; k <= 1100; k += 7) {
    for (int j = 0; j <= 6; ++j) {
      for (int64_t base : {int64_t{1000}, int64_t{1024}}) {
        absl::StatusOr<Quantity> q =
            Quantity::FromUnits(k).MultiplyBy(static_cast<int64_t>(Pow(base, j)));
        if (q.ok()) values.push_back(*q);
      }
    }
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(Quantity::FromMilli(static_cast<int64_t>(rng())));
    values.push_back(Quantity::FromUnits(static_cast<int64_t>(rng())));
    // Whole units with many trailing binary or decimal zeros.
    values.push_back(Quantity::FromUnits(static_cast<int64_t>(rng() >> 30) << (rng() % 30)));
    const absl::StatusOr<Quantity> big =
        Quantity::FromUnits(static_cast<int64_t>(rng()) / 1000)
            .MultiplyBy(1000)
            .value()
            .Add(Quantity::FromMilli(static_cast<int64_t>(rng() % 1'000'000)));
    if (big.ok()) values.push_back(*big);
  }
  for (const Quantity& q : values) {
    SCOPED_TRACE(Str(q.milli()));
    ExpectRoundTrip(q);
  }
}

TEST(QuantityTest, FormatIsTheSameForEverySpellingOfAValue) {
  const std::vector<std::vector<const char*>> groups = {
      {"1024", "1Ki", "1.024k", "1024000m", "1.024e3", "0.0009765625Mi"},
      {"1500m", "1.5", "1500000u", "15e-1", ".0015k"},
      {"16Gi", "17179869184", "16384Mi", "0.015625Ti"},
      {"1E", "1e18", "1000P", "1000000000000000000"},
      {"0", "-0", "0.000", "0Ei", "0e-99"},
  };
  for (const auto& group : groups) {
    const std::string want = MustParse(group[0]).Format();
    for (const char* spelling : group) {
      SCOPED_TRACE(spelling);
      EXPECT_EQ(MustParse(spelling).Format(), want);
    }
  }
}

}  // namespace
}  // namespace gangkeeper::quantity
