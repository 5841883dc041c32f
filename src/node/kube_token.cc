// gangkeeper node: a kubeconfig's bearer token (see kube_token.h).
#include "gangkeeper/node/kube_token.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/kube/config.h"

namespace gangkeeper::node {

absl::StatusOr<std::string> KubeconfigToken(const std::string& path, const std::string& context) {
  absl::StatusOr<kube::ClusterConfig> c = kube::LoadKubeconfig(path, context);
  if (!c.ok()) return c.status();
  if (!c->token.empty()) return c->token;
  if (!c->token_file.empty()) {
    std::ifstream in(c->token_file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    std::string token(absl::StripAsciiWhitespace(text.str()));
    if (!token.empty()) return token;
  }
  return absl::NotFoundError(absl::StrCat(path, ": the context's user has no bearer token"));
}

}  // namespace gangkeeper::node
