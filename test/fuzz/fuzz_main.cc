// gangkeeper fuzzing: the libFuzzer entry point every fuzz binary shares.
// It passes each input to the target's FuzzOneInput (fuzz_target.h) and
// aborts on a broken invariant, so libFuzzer keeps the input as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "test/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status =
      gangkeeper::fuzz::FuzzOneInput(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) {
    std::fprintf(stderr, "fuzz target %s: %s\n", GK_FUZZ_TARGET, std::string(status.message()).c_str());
    std::abort();
  }
  return 0;
}
