// gangkeeper api: quota objects named by their Kubernetes-style paths, and
// the reads and edits of a PolicySet by such a name that the quota
// handlers (quota.cc, apply.cc) make. Values and pure functions;
// thread-compatible. Private to the module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/match.h"
#include "gangkeeper/api/auth.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/objects.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::api {

// A quota object (or a kind of them) named by a Kubernetes-style path.
struct ObjectRef {
  std::string api_version;  // of the path: kueue.x-k8s.io/v1beta1, scheduling.k8s.io/v1
  std::string kind;
  std::string namespace_name;  // LocalQueues
  std::string name;            // "" for the whole kind
  std::string Display() const { return namespace_name.empty() ? name : absl::StrCat(namespace_name, "/", name); }
};

// /apis/kueue.x-k8s.io/{v1beta1,v1beta2}/{resourceflavors,clusterqueues,cohorts,workloadpriorityclasses}[/NAME],
// /apis/kueue.x-k8s.io/{v1beta1,v1beta2}/namespaces/NS/localqueues[/NAME],
// /apis/scheduling.k8s.io/v1/priorityclasses[/NAME],
// /apis/gangkeeper.io/v1alpha1/gpunodepools[/NAME].
bool ParseQuotaPath(absl::string_view path, ObjectRef* ref);

// Name, namespace and resourceVersion of any policy object (a GPUNodePool,
// gangkeeper's own kind, keeps only a name and a version).
template <typename T>
const std::string& NameOf(const T& o) {
  if constexpr (requires { o.meta; }) {
    return o.meta.name;
  } else {
    return o.name;
  }
}
template <typename T>
std::string NamespaceOf(const T& o) {
  if constexpr (requires { o.meta; }) {
    return o.meta.namespace_name;
  } else {
    return "";
  }
}
template <typename T>
decltype(auto) VersionOf(T& o) {
  if constexpr (requires { o.meta; }) {
    return (o.meta.resource_version);
  } else {
    return (o.resource_version);
  }
}

template <typename Map, typename F>
void ForKind(Map& m, const ObjectRef& ref, F f) {
  for (auto& [key, object] : m) {
    if (!ref.name.empty() && NameOf(object) != ref.name) continue;
    if (!ref.namespace_name.empty() && NamespaceOf(object) != ref.namespace_name) continue;
    f(object);
  }
}

// Calls f(object) for every object `ref` names (or every object of its kind).
template <typename Set, typename F>
void Visit(Set& p, const ObjectRef& ref, F f) {
  if (ref.kind == "ResourceFlavor") ForKind(p.flavors, ref, f);
  if (ref.kind == "ClusterQueue") ForKind(p.cluster_queues, ref, f);
  if (ref.kind == "LocalQueue") ForKind(p.local_queues, ref, f);
  if (ref.kind == "Cohort") ForKind(p.cohorts, ref, f);
  if (ref.kind == "WorkloadPriorityClass") ForKind(p.workload_priority_classes, ref, f);
  if (ref.kind == "PriorityClass") ForKind(p.priority_classes, ref, f);
  if (ref.kind == "GPUNodePool") ForKind(p.gpu_node_pools, ref, f);
  if (ref.kind == "Namespace") ForKind(p.namespaces, ref, f);  // only /v1/apply names them
}

// `object` encoded as the API answers a request at `api_version` (the
// path's): a Kueue object is written at that version (a v1beta2 path gets
// spec.cohortName, a v1beta1 path spec.cohort), whatever version it was
// stored with; other kinds, and "" (no path), as they were written.
template <typename T>
nlohmann::json EncodeAt(const T& object, const std::string& api_version) {
  if constexpr (requires { object.meta.api_version; }) {
    if (absl::StartsWith(api_version, "kueue.x-k8s.io/") && object.meta.api_version != api_version) {
      T copy = object;
      copy.meta.api_version = api_version;
      return model::EncodeObject(copy);
    }
  }
  return model::EncodeObject(object);
}

// Every object `ref` names, encoded as the API answers it.
std::vector<nlohmann::json> ObjectsOf(const model::PolicySet& p, const ObjectRef& ref);
// The resourceVersion of the object `ref` names ("" when none).
std::string CurrentVersion(const model::PolicySet& p, const ObjectRef& ref);
// Why a change sent with resourceVersion `sent` ("": no check) may not be
// made to `ref` as it is in `now`, or nothing when it may.
std::optional<std::string> Stale(const model::PolicySet& now, const ObjectRef& ref, const std::string& sent);
// How many objects of every kind `p` holds.
size_t CountObjects(const model::PolicySet& p);
// One ref per object of `p`, Namespaces first.
std::vector<ObjectRef> RefsOf(const model::PolicySet& p);
// Removes the object `ref` names from `p`.
void EraseObject(model::PolicySet* p, const ObjectRef& ref);
// Copies the object `ref` names from `from` into `to`, at `version`.
void PutObject(const model::PolicySet& from, const ObjectRef& ref, const std::string& version, model::PolicySet* to);
// OK when `who` may change `ref`; PermissionDenied naming the change.
absl::Status MayWrite(const Principal& who, const ObjectRef& ref, const std::string& verb);

}  // namespace gangkeeper::api
