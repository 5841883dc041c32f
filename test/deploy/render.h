// gangkeeper deploy tests: rendering the kustomizations with kubectl.
//
// Kustomize() runs `kubectl kustomize DIR` as a child process (bounded in
// time, offline: KUBECONFIG points nowhere) and returns the rendered objects
// typed as the API server's YAML decoder would type them. kubectl is
// $GK_KUBECTL when set, else the first `kubectl` on the PATH; kustomize v2.0.3
// (kubectl 1.20) and v5 both render deploy/. PrepareSelfManaged() makes a
// copy of the three kustomization trees (deploy/, policies/, webhook/) with
// certificates from `gangkeeper certs`, so that the self-managed overlay can
// render without touching the source tree. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::deploy_test {

// The repository's root (set by CMake).
std::string SourceDir();

// The kubectl to use, as an absolute path; empty when there is none.
std::string Kubectl();

struct Rendering {
  std::vector<nlohmann::json> objects;
  std::string warnings;  // kubectl's stderr (v5 warns about v2-style fields)
};

// FailedPrecondition with kubectl's stderr when it fails.
[[nodiscard]] absl::StatusOr<Rendering> Kustomize(const std::string& dir);

// Copies deploy/, policies/ and webhook/ into `dest` (leaving out
// certificates made before), runs deploy/overlays/self-managed/make-certs.sh
// there with the gangkeeper binary under test and CERT_DIR `dest`/certs.
// Returns the overlay's directory in the copy.
[[nodiscard]] absl::StatusOr<std::string> PrepareSelfManaged(const std::string& dest);

// The objects of `kind` (every name), and the one named `name` (null when
// absent).
std::vector<const nlohmann::json*> OfKind(const std::vector<nlohmann::json>& objects, const std::string& kind);
const nlohmann::json* Find(const std::vector<nlohmann::json>& objects, const std::string& kind,
                           const std::string& name);

// `object` at JSON pointer `pointer`; null when absent.
const nlohmann::json* At(const nlohmann::json& object, const std::string& pointer);

// The file's bytes; empty when it cannot be read.
std::string ReadFile(const std::string& path);

}  // namespace gangkeeper::deploy_test
