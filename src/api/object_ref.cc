// gangkeeper api: quota objects by path (see object_ref.h).
#include "src/api/object_ref.h"

#include <map>
#include <utility>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/model/encode.h"

namespace gangkeeper::api {

using nlohmann::json;

bool ParseQuotaPath(absl::string_view path, ObjectRef* ref) {
  std::vector<std::string> parts = absl::StrSplit(absl::StripSuffix(path, "/"), '/');
  // "", "apis", group, version, ...
  if (parts.size() < 5 || !parts[0].empty() || parts[1] != "apis") return false;
  ref->api_version = absl::StrCat(parts[2], "/", parts[3]);
  std::vector<std::string> rest(parts.begin() + 4, parts.end());
  if (ref->api_version == "gangkeeper.io/v1alpha1") {
    if (rest[0] != "gpunodepools" || rest.size() > 2) return false;
    ref->kind = "GPUNodePool";
    ref->name = rest.size() == 2 ? rest[1] : "";
    return true;
  }
  if (ref->api_version == "scheduling.k8s.io/v1") {
    if (rest[0] != "priorityclasses" || rest.size() > 2) return false;
    ref->kind = "PriorityClass";
    ref->name = rest.size() == 2 ? rest[1] : "";
    return true;
  }
  // Kueue's objects are served at both versions it serves (the answer
  // carries the version of the path: EncodeAt).
  if (ref->api_version != "kueue.x-k8s.io/v1beta1" && ref->api_version != "kueue.x-k8s.io/v1beta2") return false;
  if (rest[0] == "namespaces") {
    if (rest.size() < 3 || rest.size() > 4 || rest[2] != "localqueues" || rest[1].empty()) return false;
    ref->kind = "LocalQueue";
    ref->namespace_name = rest[1];
    ref->name = rest.size() == 4 ? rest[3] : "";
    return true;
  }
  static const std::map<std::string, std::string> kKinds = {{"resourceflavors", "ResourceFlavor"},
                                                            {"clusterqueues", "ClusterQueue"},
                                                            {"cohorts", "Cohort"},
                                                            {"workloadpriorityclasses", "WorkloadPriorityClass"},
                                                            {"localqueues", "LocalQueue"}};
  auto k = kKinds.find(rest[0]);
  if (k == kKinds.end() || rest.size() > 2) return false;
  ref->kind = k->second;
  if (ref->kind == "LocalQueue" && rest.size() == 2) return false;  // one LocalQueue needs its namespace
  ref->name = rest.size() == 2 ? rest[1] : "";
  return true;
}

std::vector<json> ObjectsOf(const model::PolicySet& p, const ObjectRef& ref) {
  std::vector<json> out;
  Visit(p, ref, [&](const auto& object) { out.push_back(EncodeAt(object, ref.api_version)); });
  return out;
}

std::string CurrentVersion(const model::PolicySet& p, const ObjectRef& ref) {
  std::string v;
  Visit(p, ref, [&](const auto& object) { v = VersionOf(object); });
  return v;
}

std::optional<std::string> Stale(const model::PolicySet& now, const ObjectRef& ref, const std::string& sent) {
  if (sent.empty()) return std::nullopt;
  if (ObjectsOf(now, ref).empty()) {
    return absl::StrCat(ref.kind, " \"", ref.Display(), "\" does not exist (any more), yet resourceVersion \"", sent,
                        "\" was sent");
  }
  const std::string current = CurrentVersion(now, ref);
  if (current == sent) return std::nullopt;
  return absl::StrCat(ref.kind, " \"", ref.Display(), "\" is at resourceVersion \"", current, "\", not \"", sent, "\"");
}

size_t CountObjects(const model::PolicySet& p) {
  return p.flavors.size() + p.cluster_queues.size() + p.local_queues.size() + p.cohorts.size() +
         p.workload_priority_classes.size() + p.priority_classes.size() + p.namespaces.size() +
         p.gpu_node_pools.size();
}

std::vector<ObjectRef> RefsOf(const model::PolicySet& p) {
  std::vector<ObjectRef> out;
  for (const char* kind : {"Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort",
                           "WorkloadPriorityClass", "PriorityClass", "GPUNodePool"}) {
    ObjectRef all{"", kind, "", ""};
    Visit(p, all, [&](const auto& object) { out.push_back(ObjectRef{"", kind, NamespaceOf(object), NameOf(object)}); });
  }
  return out;
}

void EraseObject(model::PolicySet* p, const ObjectRef& ref) {
  auto erase = [&](auto& m) {
    for (auto it = m.begin(); it != m.end();) {
      if (NameOf(it->second) == ref.name && NamespaceOf(it->second) == ref.namespace_name) {
        it = m.erase(it);
      } else {
        ++it;
      }
    }
  };
  if (ref.kind == "ResourceFlavor") erase(p->flavors);
  if (ref.kind == "ClusterQueue") erase(p->cluster_queues);
  if (ref.kind == "LocalQueue") erase(p->local_queues);
  if (ref.kind == "Cohort") erase(p->cohorts);
  if (ref.kind == "WorkloadPriorityClass") erase(p->workload_priority_classes);
  if (ref.kind == "PriorityClass") erase(p->priority_classes);
  if (ref.kind == "GPUNodePool") erase(p->gpu_node_pools);
}

void PutObject(const model::PolicySet& from, const ObjectRef& ref, const std::string& version, model::PolicySet* to) {
  auto put = [&](const auto& src, auto& dst) {
    for (const auto& [key, object] : src) {
      if (NameOf(object) != ref.name || NamespaceOf(object) != ref.namespace_name) continue;
      auto copy = object;
      VersionOf(copy) = version;
      if constexpr (requires { copy.meta.source; }) copy.meta.source = model::SourceRef{"API", 0};
      dst.insert_or_assign(key, std::move(copy));
    }
  };
  if (ref.kind == "ResourceFlavor") put(from.flavors, to->flavors);
  if (ref.kind == "ClusterQueue") put(from.cluster_queues, to->cluster_queues);
  if (ref.kind == "LocalQueue") put(from.local_queues, to->local_queues);
  if (ref.kind == "Cohort") put(from.cohorts, to->cohorts);
  if (ref.kind == "WorkloadPriorityClass") put(from.workload_priority_classes, to->workload_priority_classes);
  if (ref.kind == "PriorityClass") put(from.priority_classes, to->priority_classes);
  if (ref.kind == "GPUNodePool") put(from.gpu_node_pools, to->gpu_node_pools);
  if (ref.kind == "Namespace") put(from.namespaces, to->namespaces);
}

absl::Status MayWrite(const Principal& who, const ObjectRef& ref, const std::string& verb) {
  if (who.authorizer != nullptr) {
    if (who.authorizer->Allowed(KindAttributes(ref.kind, verb, ref.namespace_name, ref.name))) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(verb, " ", ref.kind, " ", ref.Display()));
  }
  if (who.role == Role::kAdmin) return absl::OkStatus();
  if (who.role == Role::kTeamAdmin && ref.kind == "LocalQueue" && who.MayRead(ref.namespace_name)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("change ", ref.kind, " ", ref.Display()));
}

}  // namespace gangkeeper::api
