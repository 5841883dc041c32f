// gangkeeper store: the binary encoding of record payloads
// (src/store/FORMAT.md §4): little-endian fixed-width integers, LEB128
// varints, zigzag for signed values, length-prefixed byte strings.
//
// Encoder appends to a std::string. Decoder reads a byte range; a read past
// the end, a varint longer than 10 bytes or a length beyond the remaining
// bytes fails it: every later read fails too and status() names the first
// failure with its byte offset, so a caller checks once at the end.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::store {

class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}

  void PutU8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void PutBool(bool v) { PutU8(v ? 1 : 0); }
  void PutFixed32(uint32_t v);
  void PutFixed64(uint64_t v);
  void PutVarint(uint64_t v);
  void PutSigned(int64_t v) { PutVarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void PutString(absl::string_view s);
  std::string* out() { return out_; }

 private:
  std::string* out_;
};

class Decoder {
 public:
  // `what` names the thing decoded in error messages ("snapshot", "journal
  // record 17"). `data` must outlive the decoder.
  Decoder(absl::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

  bool GetU8(uint8_t* v);
  bool GetBool(bool* v);
  bool GetFixed32(uint32_t* v);
  bool GetFixed64(uint64_t* v);
  bool GetVarint(uint64_t* v);
  bool GetSigned(int64_t* v);
  // A varint that must fit `limit` (counts, enum values).
  bool GetBounded(uint64_t limit, uint64_t* v);
  bool GetString(std::string* s);
  bool GetStringView(absl::string_view* s);

  // Fails the decoder with `why` (a semantic check by the caller).
  void Fail(absl::string_view why);
  bool ok() const { return error_.empty(); }
  bool done() const { return pos_ == data_.size(); }
  size_t position() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  // OK, or DataLoss naming what, where and why.
  absl::Status status() const;

 private:
  bool Need(size_t n);

  absl::string_view data_;
  size_t pos_ = 0;
  std::string what_;
  std::string error_;
};

}  // namespace gangkeeper::store
