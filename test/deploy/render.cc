// gangkeeper deploy tests: rendering the kustomizations (see render.h).
#include "test/deploy/render.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "test/testing/process.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::deploy_test {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

}  // namespace

std::string SourceDir() { return GK_SOURCE_DIR; }

std::string Kubectl() {
  const char* set = std::getenv("GK_KUBECTL");
  if (set != nullptr && *set != '\0') return set;
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/kubectl");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<Rendering> Kustomize(const std::string& dir) {
  const std::string kubectl = Kubectl();
  if (kubectl.empty()) {
    return absl::FailedPreconditionError("no kubectl on the PATH (scripts/deps.sh test installs one) and no GK_KUBECTL");
  }
  // Offline: no kubeconfig to read, nothing to contact.
  absl::StatusOr<testing::CommandResult> r = testing::RunCommand(
      {"/usr/bin/env", "KUBECONFIG=/nonexistent/kubeconfig", kubectl, "kustomize", dir}, absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kubectl, " kustomize ", dir, " exited ", r->exit_code, ": ", r->err));
  }
  absl::StatusOr<std::vector<std::string>> docs = testing::YamlToJson(r->out);
  if (!docs.ok()) return docs.status();
  Rendering out;
  out.warnings = r->err;
  for (const std::string& d : *docs) {
    json j = json::parse(d, nullptr, false);
    if (j.is_discarded()) return absl::InternalError("YamlToJson gave invalid JSON");
    out.objects.push_back(std::move(j));
  }
  if (out.objects.empty()) return absl::FailedPreconditionError(absl::StrCat(dir, " rendered nothing"));
  return out;
}

absl::StatusOr<std::string> PrepareSelfManaged(const std::string& dest) {
  const fs::path src(SourceDir());
  std::error_code ec;
  for (const char* dir : {"deploy", "policies", "webhook"}) {
    fs::copy(src / dir, fs::path(dest) / dir, fs::copy_options::recursive, ec);
    if (ec) return absl::InternalError(absl::StrCat("copying ", dir, ": ", ec.message()));
  }
  const fs::path overlay = fs::path(dest) / "deploy/overlays/self-managed";
  fs::remove_all(overlay / "tls", ec);  // certificates made in the source tree before
  absl::StatusOr<testing::CommandResult> r = testing::RunCommand(
      {"/usr/bin/env", "GANGKEEPER=" + testing::GangkeeperBinary(), "bash", (overlay / "make-certs.sh").string(),
       (fs::path(dest) / "certs").string()},
      absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat("make-certs.sh exited ", r->exit_code, ": ", r->err));
  }
  return overlay.string();
}

std::vector<const json*> OfKind(const std::vector<json>& objects, const std::string& kind) {
  std::vector<const json*> out;
  for (const json& o : objects) {
    if (o.value("kind", "") == kind) out.push_back(&o);
  }
  return out;
}

const json* Find(const std::vector<json>& objects, const std::string& kind, const std::string& name) {
  for (const json* o : OfKind(objects, kind)) {
    const json* n = At(*o, "/metadata/name");
    if (n != nullptr && n->is_string() && n->get<std::string>() == name) return o;
  }
  return nullptr;
}

const json* At(const json& object, const std::string& pointer) {
  const json::json_pointer p(pointer);
  return object.contains(p) ? &object.at(p) : nullptr;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gangkeeper::deploy_test
