// gangkeeper fuzzing: seed inputs built from the repository's fixtures.
//
// The fuzz targets start from real payloads: the captured AdmissionReviews
// of test/fixtures/admission, the seed manifests of test/fixtures/seed,
// Kueue's examples in test/fixtures/kueue, the example policies/, and a few
// hand-written objects and manifests in test/fuzz/seeds/. YAML is
// converted to JSON the way the API server types it (test/testing/
// yaml_json.h). scripts/fuzz.sh writes a set into a corpus directory with
// gangkeeper_fuzz_seed_tool; the regression tests replay it. Pure functions
// of the files; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::fuzz {

struct Seed {
  std::string name;  // a file name: "<fixture>.<document>.<variant>.json"
  std::string data;
};

// The seed set `set` from the fixtures under `source_dir` (the repository):
//   reviews    the captured reviews, and every fixture object wrapped in a
//              CREATE, an UPDATE (old object = object) and a DELETE review;
//   objects    every fixture object with a spec, as JSON, the hand-written
//              objects of test/fuzz/seeds/objects (kinds no fixture has),
//              and the objects inside the captured reviews;
//   manifests  every fixture, policy and test/fuzz/seeds/manifests file
//              unchanged, and each one's documents as one JSON array;
//   none       nothing.
// InvalidArgument for another set or a fixture that does not parse;
// NotFound when a fixture directory or file cannot be read.
[[nodiscard]] absl::StatusOr<std::vector<Seed>> BuildSeeds(absl::string_view set, const std::string& source_dir);

}  // namespace gangkeeper::fuzz
