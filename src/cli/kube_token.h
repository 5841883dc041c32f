// gangkeeper CLI: the bearer token client commands send when no --token
// (or GANGKEEPER_TOKEN) is given: the current kubeconfig context's, as
// kubectl would send it, for an API with --api-auth kubernetes|both.
#pragma once

#include <string>

namespace gangkeeper::cli {

// The token of the current context of `kubeconfig`, or (empty) of the
// first file named by KUBECONFIG, else ~/.kube/config. "" when there is no
// such file or its user has no token (client certificates, exec plugins).
std::string KubeconfigApiToken(const std::string& kubeconfig = "");

}  // namespace gangkeeper::cli
