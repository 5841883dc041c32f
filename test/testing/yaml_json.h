// gangkeeper tests: YAML manifests as JSON text, typed like the API server.
//
// Tests feed real YAML manifests (test/fixtures/seed, Kueue samples) to code
// that reads JSON (RapidJSON on the admission path). Plain scalars are typed
// as the API server's YAML decoder would: integers and floats become JSON
// numbers, true/false (any case) bools, null/~/empty null, everything else a
// string; quoted and block scalars always stay strings. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::testing {

// One JSON text per YAML document of `yaml` (empty documents are skipped).
// InvalidArgument with the line and column on a YAML syntax error, or when
// a mapping key is not a scalar.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> YamlToJson(absl::string_view yaml);

// YamlToJson of the file at `path`; NotFound when it cannot be read.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> YamlFileToJson(const std::string& path);

}  // namespace gangkeeper::testing
