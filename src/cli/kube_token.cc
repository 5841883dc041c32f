// gangkeeper CLI: a kubeconfig's token for client commands (see kube_token.h).
#include "src/cli/kube_token.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/node/kube_token.h"

namespace gangkeeper::cli {

std::string KubeconfigApiToken(const std::string& kubeconfig) {
  std::string path = kubeconfig;
  if (path.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
      // kubectl merges a list; the first file is where the current context usually is.
      std::vector<std::string> files = absl::StrSplit(env, ':', absl::SkipEmpty());
      if (!files.empty()) path = files.front();
    } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
      path = std::string(home) + "/.kube/config";
    }
  }
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return "";
  absl::StatusOr<std::string> token = node::KubeconfigToken(path);
  return token.ok() ? *token : "";
}

}  // namespace gangkeeper::cli
