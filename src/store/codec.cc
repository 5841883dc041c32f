// gangkeeper store: binary encoding (see codec.h).
#include "gangkeeper/store/codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace gangkeeper::store {

void Encoder::PutFixed32(uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out_->append(b, 4);
}

void Encoder::PutFixed64(uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  out_->append(b, 8);
}

void Encoder::PutVarint(uint64_t v) {
  char b[10];
  int n = 0;
  while (v >= 0x80) {
    b[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  b[n++] = static_cast<char>(v);
  out_->append(b, static_cast<size_t>(n));
}

void Encoder::PutString(absl::string_view s) {
  PutVarint(s.size());
  out_->append(s.data(), s.size());
}

bool Decoder::Need(size_t n) {
  if (!ok()) return false;
  if (remaining() < n) {
    Fail(absl::StrCat("needs ", n, " more byte(s), ", remaining(), " left"));
    return false;
  }
  return true;
}

void Decoder::Fail(absl::string_view why) {
  if (error_.empty()) error_ = absl::StrCat(why, " at byte ", pos_);
}

bool Decoder::GetU8(uint8_t* v) {
  if (!Need(1)) return false;
  *v = static_cast<uint8_t>(data_[pos_++]);
  return true;
}

bool Decoder::GetBool(bool* v) {
  uint8_t b = 0;
  if (!GetU8(&b)) return false;
  if (b > 1) {
    --pos_;
    Fail(absl::StrCat("a boolean byte is ", b));
    return false;
  }
  *v = b == 1;
  return true;
}

bool Decoder::GetFixed32(uint32_t* v) {
  if (!Need(4)) return false;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
  pos_ += 4;
  *v = r;
  return true;
}

bool Decoder::GetFixed64(uint64_t* v) {
  if (!Need(8)) return false;
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
  pos_ += 8;
  *v = r;
  return true;
}

bool Decoder::GetVarint(uint64_t* v) {
  if (!ok()) return false;
  const size_t start = pos_;
  auto fail = [&](absl::string_view why) {
    pos_ = start;  // errors name where the value starts
    Fail(why);
    return false;
  };
  uint64_t r = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos_ >= data_.size()) return fail("a varint runs past the end");
    const auto b = static_cast<uint8_t>(data_[pos_++]);
    if (i == 9 && b > 1) return fail("a varint overflows 64 bits");
    r |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) {
      *v = r;
      return true;
    }
  }
  return fail("a varint is longer than 10 bytes");
}

bool Decoder::GetSigned(int64_t* v) {
  uint64_t u = 0;
  if (!GetVarint(&u)) return false;
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

bool Decoder::GetBounded(uint64_t limit, uint64_t* v) {
  const size_t start = pos_;
  if (!GetVarint(v)) return false;
  if (*v > limit) {
    pos_ = start;
    Fail(absl::StrCat("value ", *v, " exceeds its limit ", limit));
    return false;
  }
  return true;
}

bool Decoder::GetStringView(absl::string_view* s) {
  const size_t start = pos_;
  uint64_t n = 0;
  if (!GetVarint(&n)) return false;
  if (n > remaining()) {
    pos_ = start;
    Fail(absl::StrCat("a string of ", n, " byte(s) runs past the end (", remaining(), " left)"));
    return false;
  }
  *s = data_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return true;
}

bool Decoder::GetString(std::string* s) {
  absl::string_view v;
  if (!GetStringView(&v)) return false;
  s->assign(v.data(), v.size());
  return true;
}

absl::Status Decoder::status() const {
  if (ok()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what_, ": ", error_));
}

}  // namespace gangkeeper::store
