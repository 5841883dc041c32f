// gangkeeper node: the bearer token of a kubeconfig's context, for the CLI's
// client commands (an API started with --api-auth kubernetes|both checks
// it with a TokenReview). The CLI may not read kubeconfigs itself
// (scripts/layering.txt: kube is below node), so node lends it kube's reader.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gangkeeper::node {

// The token (or the current content of its tokenFile) of `context` (""
// = current-context) in the kubeconfig at `path`. NotFound when the
// context's user has none (client certificates, exec plugins); the
// reader's error when the file cannot be read or parsed.
[[nodiscard]] absl::StatusOr<std::string> KubeconfigToken(const std::string& path, const std::string& context = "");

}  // namespace gangkeeper::node
