// gangkeeper store: CRC-32C (Castagnoli), the checksum of every journal,
// audit and snapshot record (src/store/FORMAT.md).
//
// Uses the SSE 4.2 crc32 instruction when the CPU has it, else a
// slicing-by-8 table. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace gangkeeper::store {

// The CRC-32C of `data` continuing from `crc` (the CRC of what came
// before; 0 to start). Extend(Extend(0, a), b) == Extend(0, a + b).
uint32_t Crc32cExtend(uint32_t crc, const char* data, size_t n);

inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

namespace internal {
// The table implementation alone (tests compare it with the instruction).
uint32_t Crc32cSoftware(uint32_t crc, const char* data, size_t n);
}  // namespace internal

}  // namespace gangkeeper::store
