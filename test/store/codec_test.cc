#include "gangkeeper/store/codec.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::store {
namespace {

using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CodecTest, RoundTripsEveryType) {
  std::string buf;
  Encoder e(&buf);
  const uint64_t unsigned_values[] = {0, 1, 127, 128, 300, 16383, 16384, uint64_t{1} << 35,
                                      std::numeric_limits<uint64_t>::max()};
  const int64_t signed_values[] = {0, 1, -1, 63, -64, 64, -65, std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  for (uint64_t v : unsigned_values) e.PutVarint(v);
  for (int64_t v : signed_values) e.PutSigned(v);
  e.PutFixed32(0xDEADBEEF);
  e.PutFixed64(0x0123456789ABCDEFull);
  e.PutBool(true);
  e.PutBool(false);
  e.PutU8(200);
  e.PutString("");
  e.PutString(std::string("with\0nul", 8));

  Decoder d(buf, "test");
  for (uint64_t v : unsigned_values) {
    uint64_t got = 0;
    ASSERT_TRUE(d.GetVarint(&got));
    EXPECT_EQ(got, v);
  }
  for (int64_t v : signed_values) {
    int64_t got = 0;
    ASSERT_TRUE(d.GetSigned(&got));
    EXPECT_EQ(got, v);
  }
  uint32_t f32 = 0;
  uint64_t f64 = 0;
  bool b1 = false;
  bool b2 = true;
  uint8_t u8 = 0;
  std::string s1 = "x";
  std::string s2;
  EXPECT_TRUE(d.GetFixed32(&f32));
  EXPECT_TRUE(d.GetFixed64(&f64));
  EXPECT_TRUE(d.GetBool(&b1));
  EXPECT_TRUE(d.GetBool(&b2));
  EXPECT_TRUE(d.GetU8(&u8));
  EXPECT_TRUE(d.GetString(&s1));
  EXPECT_TRUE(d.GetString(&s2));
  EXPECT_EQ(f32, 0xDEADBEEFu);
  EXPECT_EQ(f64, 0x0123456789ABCDEFull);
  EXPECT_TRUE(b1);
  EXPECT_FALSE(b2);
  EXPECT_EQ(u8, 200);
  EXPECT_EQ(s1, "");
  EXPECT_EQ(s2, std::string("with\0nul", 8));
  EXPECT_TRUE(d.done());
  EXPECT_TRUE(d.status().ok());
}

TEST(CodecTest, FixedWidthIsLittleEndian) {
  std::string buf;
  Encoder(&buf).PutFixed32(0x04030201);
  EXPECT_EQ(buf, std::string("\x01\x02\x03\x04", 4));
}

TEST(CodecTest, ReadingPastTheEndFailsOnceAndNamesTheOffset) {
  std::string buf;
  Encoder e(&buf);
  e.PutVarint(5);
  e.PutString("abcdefgh");
  buf.resize(buf.size() - 3);  // the string is cut short
  Decoder d(buf, "journal record 9");
  uint64_t v = 0;
  std::string s;
  EXPECT_TRUE(d.GetVarint(&v));
  EXPECT_FALSE(d.GetString(&s));
  EXPECT_FALSE(d.GetVarint(&v));  // sticky
  EXPECT_THAT(d.status(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("journal record 9"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("at byte 1"));
}

TEST(CodecTest, RejectsOverlongVarintsAndBadBooleans) {
  {
    const std::string data(11, '\x80');
    Decoder d(data, "x");
    uint64_t v = 0;
    EXPECT_FALSE(d.GetVarint(&v));
    EXPECT_THAT(d.status(), StatusIs(absl::StatusCode::kDataLoss));
  }
  {
    const std::string data("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x02", 10);
    Decoder d(data, "x");
    uint64_t v = 0;
    EXPECT_FALSE(d.GetVarint(&v));  // more than 64 bits
  }
  {
    const std::string data("\x02", 1);
    Decoder d(data, "x");
    bool b = false;
    EXPECT_FALSE(d.GetBool(&b));
  }
  {
    std::string buf;
    Encoder(&buf).PutVarint(1000);
    Decoder d(buf, "x");
    uint64_t v = 0;
    EXPECT_FALSE(d.GetBounded(999, &v));
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("exceeds its limit"));
  }
}

}  // namespace
}  // namespace gangkeeper::store
