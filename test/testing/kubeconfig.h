// gangkeeper tests: a kubeconfig for a FakeKubeApi, written once here
// instead of in every fixture that starts gangkeeper with --kube.
#pragma once

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "test/testing/fake_kube_api.h"

namespace gangkeeper::testing {

// Writes `dir`/`file_name`: one context ("test", current) for `api` at
// https://127.0.0.1:PORT, trusting `ca_file` (absolute, or relative to
// `dir`), with the bearer token `token` (the fake's default). Returns the
// file's path.
inline std::string WriteKubeconfigFor(const FakeKubeApi& api, const std::string& dir,
                                      const std::string& ca_file = "certs/ca.crt",
                                      const std::string& token = "fake-token",
                                      const std::string& file_name = "kubeconfig") {
  const std::string path = absl::StrCat(dir, "/", file_name);
  std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                      << "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:" << api.port()
                      << "\n    certificate-authority: " << ca_file << "\n"
                      << "users:\n- name: gk\n  user:\n    token: " << token << "\n"
                      << "contexts:\n- name: test\n  context:\n    cluster: fake\n    user: gk\n";
  return path;
}

}  // namespace gangkeeper::testing
