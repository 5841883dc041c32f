// gangkeeper fuzzing: the contract between a fuzz target and its two drivers.
//
// Each test/fuzz/<name>_fuzz.cc defines FuzzOneInput for one entry point.
// fuzz_main.cc hands it libFuzzer's inputs and aborts when it reports a
// broken invariant; regression_test.cc hands it the fixture seeds and every
// file of test/fuzz/regressions/<name>/ in the normal test build. Crashes,
// sanitizer reports and escaping exceptions fail both drivers by themselves;
// the status is for what only the target can judge (a wrong error code, an
// answer that is not JSON). Targets start no threads and open no sockets.
// Thread-compatible.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::fuzz {

// Runs the entry point on `data`. OK when the input was handled cleanly:
// accepted, or refused with the documented error. Otherwise Internal,
// naming the broken invariant.
[[nodiscard]] absl::Status FuzzOneInput(absl::string_view data);

// OK when `status` is the clean refusal every decoder here promises:
// InvalidArgument with a message. Internal (mentioning `what`) otherwise.
[[nodiscard]] absl::Status ExpectCleanError(const absl::Status& status, absl::string_view what);

// Internal "`what`: `detail`" unless `ok`.
[[nodiscard]] absl::Status Expect(bool ok, absl::string_view what, absl::string_view detail);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
// code points above U+10FFFF).
bool IsValidUtf8(absl::string_view text);

}  // namespace gangkeeper::fuzz
