// gangkeeper fuzzing: helpers shared by the targets (see fuzz_target.h).
#include "test/fuzz/fuzz_target.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace gangkeeper::fuzz {

absl::Status ExpectCleanError(const absl::Status& status, absl::string_view what) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    return absl::InternalError(absl::StrCat(what, ": want InvalidArgument, got ", status.ToString()));
  }
  if (status.message().empty()) return absl::InternalError(absl::StrCat(what, ": InvalidArgument without a message"));
  return absl::OkStatus();
}

absl::Status Expect(bool ok, absl::string_view what, absl::string_view detail) {
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat(what, ": ", detail));
}

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (text.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const uint8_t cc = static_cast<uint8_t>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace gangkeeper::fuzz
