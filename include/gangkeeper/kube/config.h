// gangkeeper: where the Kubernetes API server is and how to log in to it.
//
// Two sources, as client-go has them: the pod's service account
// (in-cluster) and a kubeconfig file. TLS verification is always on: a
// configuration without a CA to trust, or one that asks to skip
// verification, is refused. Thread-compatible value types.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gangkeeper::kube {

struct ClusterConfig {
  std::string host;         // DNS name or IP address (IPv6 without brackets)
  int port = 443;
  std::string base_path;    // a path prefix of the server URL, usually ""
  std::string tls_server_name;  // verify the certificate for this name instead of host
  std::string ca_pem;       // the CA certificates to trust (PEM)
  std::string token;        // a static bearer token
  std::string token_file;   // a bearer token re-read whenever the file changes (bound tokens rotate)
  std::string client_cert_pem;  // client certificate authentication
  std::string client_key_pem;
  std::string namespace_name;   // the context's namespace (informational)
  std::string source;           // where this came from, for messages
};

// The service-account configuration of a pod: KUBERNETES_SERVICE_HOST and
// _PORT from the environment, token and ca.crt from `account_dir`.
// FailedPrecondition when not running in a pod.
[[nodiscard]] absl::StatusOr<ClusterConfig> InClusterConfig(
    const std::string& account_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Reads a kubeconfig file: the named context (or current-context), its
// cluster (server, certificate-authority[-data], tls-server-name) and user
// (token, tokenFile, client-certificate[-data], client-key[-data]). Relative
// file names are relative to the kubeconfig's directory. InvalidArgument
// naming the field when something is missing or unsupported (exec and
// auth-provider plugins, insecure-skip-tls-verify).
[[nodiscard]] absl::StatusOr<ClusterConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

}  // namespace gangkeeper::kube
