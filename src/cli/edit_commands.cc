// gangkeeper CLI: the subcommands that change quota objects through the
// API: `apply -f` (with --dry-run, a diff against what is in effect), and
// `stop`/`resume` of a ClusterQueue or LocalQueue (spec.stopPolicy).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "nlohmann/json.hpp"
#include "src/cli/client.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

// The manifests of -f FILE|DIR (each), as one multi-document bundle.
std::optional<std::string> EditReadBundle(const std::vector<std::string>& given) {
  std::vector<std::string> files;
  for (const std::string& file : given) {
    std::error_code ec;
    if (!std::filesystem::is_directory(file, ec)) {
      files.push_back(file);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(file, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        found.push_back(entry.path().string());
      }
    }
    if (found.empty()) {
      Complain(2, absl::StrCat("-f ", file, ": no *.yaml, *.yml or *.json file in it"));
      return std::nullopt;
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  std::string bundle;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      Complain(2, absl::StrCat("-f ", path, ": cannot read it"));
      return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    // JSON documents go in as they are: YAML is a superset of JSON.
    absl::StrAppend(&bundle, bundle.empty() ? "" : "\n---\n", text.str());
  }
  return bundle;
}

// An object without the fields the server sets (for comparing).
json EditComparable(json object) {
  if (object.contains("metadata") && object["metadata"].is_object()) {
    for (const char* k : {"resourceVersion", "generation", "uid", "creationTimestamp", "managedFields"}) {
      object["metadata"].erase(k);
    }
  }
  object.erase("status");
  return object;
}

std::string EditDisplay(const json& object) {
  const json meta = object.value("metadata", json::object());
  const std::string ns = Field(meta, "namespace");
  return absl::StrCat(Field(object, "kind"), " ", ns, ns.empty() ? "" : "/", Field(meta, "name"));
}

// --dry-run: each object of the bundle against the one in effect, in the
// API's own encoding of both; nothing is written.
int EditDryRun(ApiClient& client, const std::string& bundle) {
  model::PolicySet decoded;
  model::Diagnostics diagnostics;
  model::DecodeManifests(bundle, "-f", &decoded, &diagnostics);
  if (diagnostics.HasErrors()) return Complain(1, diagnostics.ErrorSummary());
  const json list = json::parse(model::EncodeManifests(decoded), nullptr, false);
  int objects = 0;
  for (const json& item : Member(list, "items")) {
    const json meta = item.value("metadata", json::object());
    const std::optional<std::string> path = QuotaPath(Field(item, "kind"), Field(meta, "namespace"), Field(meta, "name"));
    if (!path.has_value()) continue;
    ++objects;
    const json after = EditComparable(item);
    absl::StatusOr<json> now = client.Get(*path);
    if (!now.ok() && !absl::IsNotFound(now.status())) return Complain(1, std::string(now.status().message()));
    if (!now.ok()) {
      std::printf("%s created (dry run)\n%s", EditDisplay(item).c_str(), LineDiff("", FormatYaml(after)).c_str());
      continue;
    }
    const json before = EditComparable(*now);
    if (before == after) {
      std::printf("%s unchanged\n", EditDisplay(item).c_str());
      continue;
    }
    std::printf("%s configured (dry run)\n%s", EditDisplay(item).c_str(),
                LineDiff(FormatYaml(before), FormatYaml(after)).c_str());
  }
  if (objects == 0) return Complain(1, "the manifests hold no quota object");
  return 0;
}

// The kind and path of the queue a stop/resume names; prints the problem.
struct EditQueue {
  std::string kind;  // clusterqueue or localqueue
  std::string name;
  std::string path;
};

std::optional<EditQueue> EditQueueOf(const std::string& verb, std::vector<std::string> what, const std::string& ns) {
  if (what.size() == 1 && what[0].find('/') != std::string::npos) {
    const size_t slash = what[0].find('/');
    what = {what[0].substr(0, slash), what[0].substr(slash + 1)};
  }
  const std::optional<std::string> kind = what.empty() ? std::nullopt : ResourceKind(what[0]);
  if (what.size() != 2 || (kind != "clusterqueues" && kind != "localqueues") || what[1].empty()) {
    Complain(2, absl::StrCat("usage: gangkeeper ", verb, " clusterqueue NAME | localqueue NAME [-n NAMESPACE]; see "
                             "gangkeeper ", verb, " --help"));
    return std::nullopt;
  }
  EditQueue q;
  q.kind = *kind == "clusterqueues" ? "clusterqueue" : "localqueue";
  q.name = what[1];
  q.path = *QuotaPath(q.kind, q.kind == "localqueue" ? (ns.empty() ? "default" : ns) : "", q.name);
  return q;
}

// Sets spec.stopPolicy with GET + PUT (again on a conflict); no write when
// it already has that value.
int EditSetStopPolicy(const std::string& verb, const std::vector<std::string>& args) {
  ClientFlags f;
  std::string ns;
  bool drain = false;
  const bool stop = verb == "stop";
  FlagSet flags(verb, stop ? "Stops admitting workloads to a ClusterQueue or LocalQueue (spec.stopPolicy Hold; "
                             "with --drain, HoldAndDrain: admitted workloads are evicted too)."
                           : "Lets a stopped ClusterQueue or LocalQueue admit workloads again (spec.stopPolicy None).");
  flags.Synopsis(absl::StrCat("gangkeeper ", verb, " clusterqueue NAME", stop ? " [--drain]" : "", " [flags]\n",
                              "       gangkeeper ", verb, " localqueue NAME -n NAMESPACE", stop ? " [--drain]" : "",
                              " [flags]"));
  AddClientFlags(flags, &f);
  flags.String("n,namespace", &ns, "the LocalQueue's namespace (default: default)");
  if (stop) flags.Bool("drain", &drain, "evict the admitted workloads too (stopPolicy HoldAndDrain)");
  flags.Examples(stop ? "  gangkeeper stop clusterqueue team-a-gpu\n"
                        "  gangkeeper stop lq gpu-queue -n team-a --drain"
                      : "  gangkeeper resume clusterqueue team-a-gpu\n"
                        "  gangkeeper resume localqueue/gpu-queue -n team-a");
  std::vector<std::string> what;
  if (std::optional<int> done = flags.ParseOrExit(args, &what)) return *done;
  std::optional<EditQueue> q = EditQueueOf(verb, what, ns);
  if (!q.has_value()) return 2;
  const std::string policy = !stop ? "None" : drain ? "HoldAndDrain" : "Hold";
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<json> object = client->Get(q->path);
    if (!object.ok()) return Complain(1, std::string(object.status().message()));
    const std::string now = Field((*object).value("spec", json::object()), "stopPolicy");
    if (now == policy || (now.empty() && policy == "None")) {
      std::printf("%s/%s unchanged: stopPolicy is already %s\n", q->kind.c_str(), q->name.c_str(), policy.c_str());
      return 0;
    }
    (*object)["spec"]["stopPolicy"] = policy;
    absl::StatusOr<json> put = client->Put(q->path, *object);
    if (put.ok()) {
      std::printf("%s/%s %s: stopPolicy %s%s\n", q->kind.c_str(), q->name.c_str(), stop ? "stopped" : "resumed",
                  policy.c_str(),
                  !stop ? "" : drain ? " (admitted workloads are evicted)" : " (admitted workloads keep running)");
      return 0;
    }
    last = put.status();
    if (!absl::IsAborted(last)) break;  // a conflict: read it again
  }
  return Complain(1, std::string(last.message()));
}

}  // namespace

int RunApply(const std::vector<std::string>& args) {
  ClientFlags f;
  std::vector<std::string> files;
  bool dry_run = false;
  FlagSet flags("apply", "Applies Kueue manifests through the API, all or nothing. Each object is reported as "
                         "created, configured or unchanged; unchanged objects are not written (nor audited).");
  flags.Synopsis("gangkeeper apply -f FILE|DIR [-f ...] [--dry-run] [flags]");
  AddClientFlags(flags, &f, "output format: text or json (the API's answer)");
  flags.Strings("f,filename", &files, "a manifest file, or a directory of *.yaml, *.yml and *.json (repeatable)");
  flags.Bool("dry-run", &dry_run, "show what would change, as a diff against the objects in effect; write nothing");
  flags.Examples(
      "  gangkeeper apply -f policies/\n"
      "  gangkeeper apply -f team-b.yaml --dry-run      what would change?");
  std::vector<std::string> rest;
  if (std::optional<int> done = flags.ParseOrExit(args, &rest)) return *done;
  if (files.empty() || !rest.empty()) return Complain(2, "usage: gangkeeper apply -f FILE|DIR [--dry-run]");
  std::optional<std::string> bundle = EditReadBundle(files);
  if (!bundle.has_value()) return 2;
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  if (dry_run) return EditDryRun(*client, *bundle);
  absl::StatusOr<json> answer = client->Post("/v1/apply", *bundle, "application/yaml");
  if (!answer.ok()) return Complain(1, std::string(answer.status().message()));
  if (f.output == "json") {
    std::printf("%s\n", answer->dump(2).c_str());
    return 0;
  }
  for (const json& a : Member(*answer, "applied")) {
    const std::string ns = Field(a, "namespace");
    std::printf("%s %s%s%s %s\n", Field(a, "kind").c_str(), ns.c_str(), ns.empty() ? "" : "/", Field(a, "name").c_str(),
                Field(a, "action").c_str());
  }
  return 0;
}

int RunStop(const std::vector<std::string>& args) { return EditSetStopPolicy("stop", args); }
int RunResume(const std::vector<std::string>& args) { return EditSetStopPolicy("resume", args); }

}  // namespace gangkeeper::cli
