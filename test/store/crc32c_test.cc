#include "gangkeeper/store/crc32c.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace gangkeeper::store {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // The check value of CRC-32C and the iSCSI test patterns (RFC 3720 B.4).
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, InstructionAndTableAgreeAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(7);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng() & 0xFF);
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; start + n <= data.size(); n += 7) {
      EXPECT_EQ(Crc32cExtend(0, data.data() + start, n), internal::Crc32cSoftware(0, data.data() + start, n))
          << "start " << start << " length " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsOneShot) {
  const std::string a = "gangkeeper journal ";
  const std::string b = "record payload";
  EXPECT_EQ(Crc32cExtend(Crc32c(a), b.data(), b.size()), Crc32c(a + b));
}

TEST(Crc32cTest, DetectsEveryOneBitFlip) {
  std::string data = "an acknowledged append must survive";
  const uint32_t good = Crc32c(data);
  for (size_t i = 0; i < data.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      data[i] = static_cast<char>(data[i] ^ (1 << bit));
      EXPECT_NE(Crc32c(data), good);
      data[i] = static_cast<char>(data[i] ^ (1 << bit));
    }
  }
}

}  // namespace
}  // namespace gangkeeper::store
