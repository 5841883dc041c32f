// gangkeeper: the API's routes (see api.h).
#include "gangkeeper/api/api.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/api/policy_editor.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/validate.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/api/scope.h"

namespace gangkeeper::api {
namespace {

using nlohmann::json;

// An error answer through the server's one Status->HTTP table, its code
// spelled as the Kubernetes API does (server/http.h).
server::HttpResponse Error(const absl::Status& status, absl::string_view field = "") {
  return server::ErrorResponse(status, field, server::ErrorNames::kKubernetes);
}

server::HttpResponse Ok(const json& body) {
  server::HttpResponse r;
  r.body = body.dump();
  return r;
}

std::string Time(absl::Time t) {
  if (t == absl::Time() || t == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

json Quantities(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

const char* ApiState(broker::Phase p) {
  switch (p) {
    case broker::Phase::kPending: return "pending";
    case broker::Phase::kFinished: return "finished";
    default: return "admitted";
  }
}

json WorkloadJson(const broker::WorkloadInfo& w, const std::optional<broker::QueuePosition>& position) {
  json j;
  j["namespace"] = w.key.namespace_name;
  j["name"] = w.key.name;
  // The identity (DESIGN §4): kind + API group + namespace + name, and the
  // object's uid; `ref` is the unambiguous KIND/NS/NAME the CLI and
  // /v1/workloads/KIND/NS/NAME take.
  j["kind"] = broker::KindName(w.key);
  j["apiGroup"] = broker::KindGroup(w.key);
  j["ref"] = broker::KeyString(w.key);
  if (w.workload != nullptr) {
    j["uid"] = w.workload->uid;
    j["apiVersion"] = w.workload->api_version;
    json pod_sets = json::array();
    for (const workload::PodSet& ps : w.workload->pod_sets) {
      pod_sets.push_back({{"name", ps.name}, {"count", ps.count}, {"requests", Quantities(ps.requests)}});
    }
    j["podSets"] = pod_sets;
    if (!w.workload->pod_group_name.empty()) {
      j["podGroup"] = {{"name", w.workload->pod_group_name},
                       {"totalCount", w.workload->pod_group_total_count},
                       {"members", w.pod_group_members}};
    }
    j["priorityClass"] = w.workload->priority_class;
  }
  j["clusterQueue"] = w.cluster_queue;
  j["localQueue"] = w.local_queue;
  j["state"] = ApiState(w.phase);
  j["phase"] = broker::PhaseName(w.phase);
  j["priority"] = w.priority;
  j["created"] = Time(w.created_at);
  j["queued"] = Time(w.queued_at);
  if (w.phase != broker::Phase::kPending && w.admissions > 0) j["admitted"] = Time(w.admitted_at);
  if (w.phase == broker::Phase::kFinished) j["finished"] = Time(w.finished_at);
  j["admissions"] = w.admissions;
  j["evictions"] = w.evictions;
  if (w.admission.has_value()) {
    json a;
    a["clusterQueue"] = w.admission->cluster_queue;
    json ps = json::array();
    for (const broker::PodSetAssignment& p : w.admission->pod_sets) {
      json flavors = json::object();
      for (const auto& [res, flavor] : p.flavors) flavors[res] = flavor;
      ps.push_back({{"name", p.name}, {"count", p.count}, {"flavors", flavors}, {"usage", Quantities(p.usage)}});
    }
    a["podSets"] = ps;
    j["assignment"] = a;
  }
  if (w.phase == broker::Phase::kPending) {
    const broker::PendingReason& r = w.reason;
    json reason = {{"code", broker::PendingReasonCodeName(r.code)}, {"message", r.message}};
    if (!r.resource.empty()) {
      reason["podSet"] = r.pod_set;
      reason["flavor"] = r.flavor;
      reason["resource"] = r.resource;
      reason["requested"] = r.requested.Format();
      reason["available"] = r.available.Format();
      reason["nominal"] = r.nominal.Format();
      reason["used"] = r.used.Format();
      reason["usedBy"] = r.used_by;
      if (r.borrowing_limit.has_value()) reason["borrowingLimit"] = r.borrowing_limit->Format();
    }
    j["reason"] = reason;
    if (position.has_value()) {
      j["position"] = {{"clusterQueue", position->cluster_queue}, {"localQueue", position->local_queue}};
    }
  }
  if (w.phase == broker::Phase::kEvicting) j["evictionReason"] = w.eviction_reason;
  if (!w.actuation.empty()) j["actuation"] = w.actuation;
  return j;
}

json QueueJson(const broker::ClusterQueueView& v) {
  const broker::ClusterQueueStatus& s = v.status;
  json resources = json::array();
  for (const auto& [fr, r] : s.resources) {
    json x = {{"flavor", fr.flavor},       {"resource", fr.resource},   {"nominal", r.nominal.Format()},
              {"usage", r.usage.Format()}, {"borrowed", r.borrowed.Format()}, {"lent", r.lent.Format()},
              {"available", r.available.Format()}};
    if (r.borrowing_limit.has_value()) x["borrowingLimit"] = r.borrowing_limit->Format();
    if (r.lending_limit.has_value()) x["lendingLimit"] = r.lending_limit->Format();
    resources.push_back(std::move(x));
  }
  return {{"name", s.name},       {"cohort", s.cohort},     {"active", s.active},
          {"pending", s.pending}, {"admitted", s.admitted}, {"weightedShare", s.weighted_share},
          {"resources", resources}};
}

// A quota object (or a kind of them) named by a Kubernetes-style path.
struct ObjectRef {
  std::string api_version;  // of the path: kueue.x-k8s.io/v1beta1, scheduling.k8s.io/v1
  std::string kind;
  std::string namespace_name;  // LocalQueues
  std::string name;            // "" for the whole kind
  std::string Display() const { return namespace_name.empty() ? name : absl::StrCat(namespace_name, "/", name); }
};

// /apis/kueue.x-k8s.io/v1beta1/{resourceflavors,clusterqueues,cohorts,workloadpriorityclasses}[/NAME],
// /apis/kueue.x-k8s.io/v1beta1/namespaces/NS/localqueues[/NAME],
// /apis/scheduling.k8s.io/v1/priorityclasses[/NAME],
// /apis/gangkeeper.io/v1alpha1/gpunodepools[/NAME].
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
  if (ref->api_version != "kueue.x-k8s.io/v1beta1") return false;
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

std::vector<json> ObjectsOf(const model::PolicySet& p, const ObjectRef& ref) {
  std::vector<json> out;
  Visit(p, ref, [&](const auto& object) { out.push_back(model::EncodeObject(object)); });
  return out;
}

std::string CurrentVersion(const model::PolicySet& p, const ObjectRef& ref) {
  std::string v;
  Visit(p, ref, [&](const auto& object) { v = VersionOf(object); });
  return v;
}

// Why a change sent with resourceVersion `sent` ("": no check) may not be
// made to `ref` as it is in `now`, or nothing when it may.
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

// Copies the object `ref` names from `from` into `to`, at `version`.
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

absl::Status MayWrite(const Principal& who, const ObjectRef& ref) {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  if (who.role == Role::kTeamAdmin && ref.kind == "LocalQueue" && who.MayRead(ref.namespace_name)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("change ", ref.kind, " ", ref.Display()));
}

// 422 with every error, the first one's field path as `field`.
server::HttpResponse Invalid(const model::Diagnostics& d) {
  std::string field;
  for (const model::Diagnostic& x : d.items) {
    if (x.severity == model::Diagnostic::Severity::kError) {
      field = x.path;
      break;
    }
  }
  // A body that is not YAML or JSON at all has no path inside an object.
  return server::ErrorResponse(422, d.ErrorSummary(), field.empty() ? "body" : field);
}

server::HttpResponse Forbidden(const Principal& who, const std::string& what) {
  return Error(absl::PermissionDeniedError(
      absl::StrCat("token \"", who.name, "\" (role ", RoleName(who.role), ") may not ", what)));
}

// Authenticates `req` (401, or 429 for an address over its limit of
// failures), then answers with `f` for the principal.
server::HttpResponse Authenticated(TokenStore* tokens, const base::Clock* clock, const server::HttpRequest& req,
                                   const std::function<server::HttpResponse(const Principal&)>& f) {
  absl::StatusOr<Principal> who = tokens->Authenticate(req.Header("authorization"), req.remote_addr, clock->Now());
  if (!who.ok()) {
    if (absl::IsResourceExhausted(who.status())) {
      server::HttpResponse r = Error(who.status());
      r.headers.emplace_back("Retry-After", "60");
      return r;
    }
    server::HttpResponse r = Error(absl::UnauthenticatedError(who.status().message()));
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  return f(*who);
}

class Api {
 public:
  Api(broker::Broker* broker, TokenStore* tokens, const base::Clock* clock, const audit::AuditLog* audit,
      std::shared_ptr<const model::PolicySet> base, PolicyEditor* editor)
      : broker_(broker), tokens_(tokens), clock_(clock), audit_(audit), base_(std::move(base)), editor_(editor) {
    if (base_ == nullptr) base_ = std::make_shared<const model::PolicySet>();
    if (editor_ == nullptr) {
      local_editor_ = LocalPolicyEditor(broker_);
      editor_ = local_editor_.get();
    }
  }

  // --- Quota objects (Kubernetes-style paths). ---

  // GET list or one: a list holds what `who` may read; one object outside
  // that is 403 whether or not it exists (auth.h).
  server::HttpResponse GetObjects(const Principal& who, const ObjectRef& ref) const {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const ReadScope scope(who, snap->policies());
    if (!scope.ReadsQuota()) return Forbidden(who, absl::StrCat("read ", ref.kind, " objects"));
    if (!ref.namespace_name.empty() && !scope.Namespace(ref.namespace_name)) {
      return Forbidden(who, absl::StrCat("read ", ref.kind, " objects in ", ref.namespace_name));
    }
    if (!ref.name.empty() && !scope.Object(ref.kind, ref.namespace_name, ref.name)) {
      return Forbidden(who, absl::StrCat("read ", ref.kind, " ", ref.Display()));
    }
    std::vector<json> items;
    Visit(snap->policies(), ref, [&](const auto& object) {
      if (scope.Object(ref.kind, NamespaceOf(object), NameOf(object))) items.push_back(model::EncodeObject(object));
    });
    if (ref.name.empty()) return Ok({{"apiVersion", ref.api_version}, {"kind", ref.kind + "List"}, {"items", items}});
    if (items.empty()) {
      return Error(absl::NotFoundError(absl::StrCat(ref.kind, " \"", ref.Display(), "\" does not exist")));
    }
    return Ok(items[0]);
  }

  // PUT (create or replace) and DELETE of one object; POST /v1/apply of a bundle.
  server::HttpResponse Change(const Principal& who, const ObjectRef& ref, const std::string& method,
                              const std::string& body) {
    if (absl::Status may = MayWrite(who, ref); !may.ok()) return Forbidden(who, std::string(may.message()));
    const bool remove = method == "DELETE";
    model::PolicySet decoded;
    std::string sent_version;
    if (!remove) {
      model::Diagnostics diagnostics;
      model::DecodeManifests(body, "request body", &decoded, &diagnostics);
      if (diagnostics.HasErrors()) return Invalid(diagnostics);
      std::vector<json> got = ObjectsOf(decoded, ObjectRef{ref.api_version, ref.kind, ref.namespace_name, ""});
      if (got.size() != 1 || CountObjects(decoded) != 1) {
        return Error(absl::InvalidArgumentError(absl::StrCat("the body must hold exactly one ", ref.kind, " (it holds ",
                                                             CountObjects(decoded), " object(s), ", got.size(),
                                                             " of that kind)")),
                     "kind");
      }
      const json& object = got[0];
      const std::string name = object["metadata"].value("name", "");
      if (name != ref.name) {
        return Error(absl::InvalidArgumentError(
                         absl::StrCat("metadata.name \"", name, "\" does not match the path's \"", ref.name, "\"")),
                     "metadata.name");
      }
      sent_version = object["metadata"].value("resourceVersion", "");
    }
    const std::string id = model::ObjectId(ref.kind, ref.namespace_name, ref.name);
    int status = 200;
    return Edit(
        who,
        [&](const model::PolicySet& now, model::PolicyOverlay* overlay,
            std::string* what) -> std::optional<server::HttpResponse> {
          const bool exists = !ObjectsOf(now, ref).empty();
          if (remove) {
            if (!exists) {
              return Error(absl::NotFoundError(absl::StrCat(ref.kind, " \"", ref.Display(), "\" does not exist")));
            }
            EraseObject(&overlay->put, ref);
            overlay->deleted.insert(id);
            *what = absl::StrCat("DELETE ", ref.kind, " ", ref.Display());
            return std::nullopt;
          }
          if (std::optional<std::string> stale = Stale(now, ref, sent_version)) {
            return Error(absl::AbortedError(absl::StrCat(*stale, ": GET it again and apply your change to that")),
                         "metadata.resourceVersion");
          }
          PutObject(decoded, ref, absl::StrCat(overlay->generation), &overlay->put);
          overlay->deleted.erase(id);
          *what = absl::StrCat("PUT ", ref.kind, " ", ref.Display());
          status = exists ? 200 : 201;
          return std::nullopt;
        },
        [&](const model::PolicySet& effective) {
          json answer;
          if (remove) {
            answer = {{"kind", "Status"}, {"status", "Success"}, {"details", {{"kind", ref.kind}, {"name", ref.name}}}};
          } else {
            std::vector<json> now = ObjectsOf(effective, ref);
            if (!now.empty()) answer = now[0];
          }
          server::HttpResponse r = Ok(answer);
          r.status = status;
          return r;
        });
  }

  server::HttpResponse Apply(const Principal& who, const std::string& body) {
    model::PolicySet decoded;
    model::Diagnostics diagnostics;
    model::DecodeManifests(body, "request body", &decoded, &diagnostics);
    if (diagnostics.HasErrors()) return Invalid(diagnostics);
    std::vector<ObjectRef> refs = RefsOf(decoded);
    if (refs.empty()) return Error(absl::InvalidArgumentError("the bundle holds no quota object"), "items");
    for (const ObjectRef& ref : refs) {
      if (absl::Status may = MayWrite(who, ref); !may.ok()) return Forbidden(who, std::string(may.message()));
    }
    json applied = json::array();
    return Edit(
        who,
        [&](const model::PolicySet& now, model::PolicyOverlay* overlay,
            std::string* what) -> std::optional<server::HttpResponse> {
          applied = json::array();
          // Like PUT: an object sent with a resourceVersion must still be at
          // it; one stale object and nothing is applied.
          std::vector<std::string> stale;
          for (const ObjectRef& ref : refs) {
            if (std::optional<std::string> s = Stale(now, ref, CurrentVersion(decoded, ref))) stale.push_back(*s);
          }
          if (!stale.empty()) {
            return Error(absl::AbortedError(
                             absl::StrCat(absl::StrJoin(stale, "; "),
                                          ": nothing was applied; GET them again and apply your changes to those")),
                         "metadata.resourceVersion");
          }
          for (const ObjectRef& ref : refs) {
            const bool exists = !ObjectsOf(now, ref).empty();
            PutObject(decoded, ref, absl::StrCat(overlay->generation), &overlay->put);
            overlay->deleted.erase(model::ObjectId(ref.kind, ref.namespace_name, ref.name));
            applied.push_back({{"kind", ref.kind}, {"namespace", ref.namespace_name}, {"name", ref.name},
                               {"action", exists ? "configured" : "created"}});
          }
          *what = absl::StrCat("apply of ", refs.size(), " object(s)");
          return std::nullopt;
        },
        [&](const model::PolicySet&) { return Ok({{"applied", applied}}); });
  }

  // One change of the overlay: read what is in effect, let `change` edit a
  // copy of the overlay (or answer early: 404, 409), validate the result
  // with every other object, write it if nothing changed meanwhile, and
  // answer with `answer` (given the set now in effect). A change that lost
  // a race with another replica's is made again on the newer state.
  server::HttpResponse Edit(
      const Principal& who,
      const std::function<std::optional<server::HttpResponse>(const model::PolicySet&, model::PolicyOverlay*,
                                                              std::string*)>& change,
      const std::function<server::HttpResponse(const model::PolicySet&)>& answer) {
    constexpr int kAttempts = 8;
    absl::MutexLock lock(&edit_mu_);
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      absl::StatusOr<PolicyEditor::Current> now = editor_->Read();
      if (!now.ok()) {
        return Error(absl::UnavailableError(absl::StrCat(
            "cannot read the quota objects in effect: ", now.status().message(), "; nothing changed, retry")));
      }
      auto overlay = std::make_shared<model::PolicyOverlay>(now->overlay != nullptr ? *now->overlay
                                                                                     : model::PolicyOverlay{});
      ++overlay->generation;
      std::string what;
      if (std::optional<server::HttpResponse> early = change(*now->policies, overlay.get(), &what)) return *early;
      auto effective = std::make_shared<const model::PolicySet>(model::ApplyOverlay(*base_, *overlay));
      model::Diagnostics problems;
      model::ValidatePolicySet(*effective, &problems);
      if (problems.HasErrors()) return Invalid(problems);
      absl::Status set = editor_->Write(*now, overlay, effective, who.name, what);
      if (absl::IsAborted(set)) continue;  // another replica's change came first
      if (absl::IsInvalidArgument(set)) return server::ErrorResponse(422, set.message());
      if (!set.ok()) return Error(absl::UnavailableError(absl::StrCat(set.message(), "; retry")));
      return answer(*effective);
    }
    return Error(absl::AbortedError(absl::StrCat("the quota objects changed ", kAttempts,
                                                 " times while this change was being made; nothing changed, retry")));
  }

  // The audit query of `req`, checked against `who`'s role; or the error
  // to answer with.
  std::optional<server::HttpResponse> AuditQuery(const Principal& who, const server::HttpRequest& req,
                                                 audit::Query* q) const {
    q->namespace_name = req.QueryParam("namespace");
    q->name = req.QueryParam("name");
    q->kind = req.QueryParam("kind");
    q->action = req.QueryParam("action");
    q->actor = req.QueryParam("actor");
    q->cluster_queue = req.QueryParam("clusterQueue");
    if (!who.MayReadAudit()) {
      if (who.role != Role::kTeamAdmin) return Forbidden(who, "read the audit log");
      if (q->namespace_name.empty() || !who.MayRead(q->namespace_name)) {
        return Forbidden(who, "read the audit log outside its namespaces (give namespace=)");
      }
    }
    if (audit_ == nullptr) return Error(absl::UnavailableError("this server keeps no audit log"));
    for (const char* field : {"since", "until"}) {
      const std::string v = req.QueryParam(field);
      if (v.empty()) continue;
      absl::Time t;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, v, &t, &err)) {
        return Error(absl::InvalidArgumentError(absl::StrCat(field, "=", v, ": not an RFC 3339 time (", err, ")")),
                     field);
      }
      (std::string(field) == "since" ? q->since : q->until) = t;
    }
    if (const std::string v = req.QueryParam("limit"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &q->limit) || q->limit < 1 || q->limit > 1000) {
        return Error(absl::InvalidArgumentError(absl::StrCat("limit=", v, ": use 1 to 1000")), "limit");
      }
    }
    if (const std::string v = req.QueryParam("cursor"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &q->after)) {
        return Error(absl::InvalidArgumentError(absl::StrCat("cursor=", v, ": use the `next` of the previous page")),
                     "cursor");
      }
    }
    return std::nullopt;
  }

  server::HttpResponse Audit(const Principal& who, const server::HttpRequest& req) const {
    audit::Query q;
    if (std::optional<server::HttpResponse> refused = AuditQuery(who, req, &q)) return *refused;
    absl::StatusOr<audit::Page> page = audit_->Find(q);
    if (!page.ok()) return Error(absl::InternalError(page.status().message()));
    json items = json::array();
    for (const audit::Event& e : page->events) items.push_back(json::parse(audit::EncodeEvent(e), nullptr, false));
    json out = {{"items", items}};
    if (page->next != 0) out["next"] = absl::StrCat(page->next);
    return Ok(out);
  }

  // The newest audit record and its chain value, for an external system to
  // anchor (src/audit/FORMAT.md §5).
  server::HttpResponse AuditHead(const Principal& who) const {
    if (!who.MayReadAudit()) return Forbidden(who, "read the audit log's head");
    if (audit_ == nullptr) return Error(absl::UnavailableError("this server keeps no audit log"));
    const audit::AuditHead h = audit_->head();
    json out = {{"seq", h.seq}, {"chain", h.chain}, {"time", h.seq == 0 ? json(nullptr) : json(Time(h.time))}};
    if (!h.hmac.empty()) out["hmac"] = h.hmac;
    return Ok(out);
  }

  // Authenticates, then runs `f` with the principal.
  server::HttpResponse Guard(const server::HttpRequest& req,
                             const std::function<server::HttpResponse(const Principal&)>& f) const {
    return Authenticated(tokens_, clock_, req, f);
  }

  server::HttpResponse ClusterQueues(const Principal& who) const {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const ReadScope scope(who, snap->policies());
    if (!scope.ReadsQuota()) return Forbidden(who, "read ClusterQueues");
    json items = json::array();
    for (const auto& [name, view] : snap->cluster_queues()) {
      if (!scope.ClusterQueue(name)) continue;
      items.push_back(QueueJson(*view));
    }
    return Ok({{"items", items}});
  }

  server::HttpResponse ClusterQueueStatus(const Principal& who, const std::string& name) const {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const ReadScope scope(who, snap->policies());
    if (!scope.ReadsQuota() || !scope.ClusterQueue(name)) {
      return Forbidden(who, absl::StrCat("read ClusterQueue ", name));
    }
    const broker::ClusterQueueView* view = snap->FindClusterQueue(name);
    if (view == nullptr) return Error(absl::NotFoundError(absl::StrCat("ClusterQueue \"", name, "\" does not exist")));
    return Ok(QueueJson(*view));
  }

  server::HttpResponse Workloads(const Principal& who, const server::HttpRequest& req) const {
    if (!who.MayReadQuota()) return Forbidden(who, "read workloads");
    const std::string ns = req.QueryParam("namespace");
    const std::string cq = req.QueryParam("clusterQueue");
    std::string state = req.QueryParam("state");
    if (state.empty()) state = "all";
    if (state != "pending" && state != "admitted" && state != "finished" && state != "all") {
      return Error(
          absl::InvalidArgumentError(absl::StrCat("state=", state, ": use pending, admitted, finished or all")),
          "state");
    }
    if (!ns.empty() && !who.MayRead(ns)) return Forbidden(who, absl::StrCat("read workloads in ", ns));
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    std::vector<const broker::WorkloadInfo*> found;
    auto consider = [&](const broker::WorkloadInfo& w) {
      if (!ns.empty() && w.key.namespace_name != ns) return;
      if (!cq.empty() && w.cluster_queue != cq) return;
      if (state != "all" && state != ApiState(w.phase)) return;
      if (!who.MayRead(w.key.namespace_name)) return;
      found.push_back(&w);
    };
    snap->ForEachWorkload(consider);
    // The most recently finished ones, as the broker keeps them.
    if (state == "finished" || state == "all") {
      for (const auto& w : snap->finished()) consider(*w);
    }
    std::stable_sort(found.begin(), found.end(), [](const broker::WorkloadInfo* a, const broker::WorkloadInfo* b) {
      if (a->key != b->key) return a->key < b->key;
      if (a->phase != b->phase) return a->phase == broker::Phase::kFinished ? false : b->phase == broker::Phase::kFinished;
      return a->created_at < b->created_at;
    });
    // Positions of each ClusterQueue's pending workloads, worked out once.
    std::map<std::string, std::map<broker::WorkloadKey, broker::QueuePosition>> positions;
    json items = json::array();
    for (const broker::WorkloadInfo* w : found) {
      std::optional<broker::QueuePosition> pos;
      if (w->phase == broker::Phase::kPending && !w->cluster_queue.empty()) {
        auto it = positions.find(w->cluster_queue);
        if (it == positions.end()) it = positions.emplace(w->cluster_queue, snap->Positions(w->cluster_queue)).first;
        auto p = it->second.find(w->key);
        if (p != it->second.end()) pos = p->second;
      }
      items.push_back(WorkloadJson(*w, pos));
    }
    return Ok({{"items", items}});
  }

  // The times the audit history holds and the broker does not keep: the
  // last release, the end; creation and admission when the broker forgot.
  static void AddTimestamps(const json& history, json* j) {
    for (const json& e : history) {
      const std::string action = e.value("action", "");
      const std::string time = e.value("time", "");
      if (action == "workload.pending" && !j->contains("created")) (*j)["created"] = time;
      if (action == "workload.admitted" && !j->contains("admitted")) (*j)["admitted"] = time;
      if (action == "workload.released") (*j)["released"] = time;
      if (action == "workload.finished" || action == "workload.deleted") (*j)["finished"] = time;
    }
  }

  // The keys of every kind with this namespace and name that the broker
  // tracks or finished recently.
  static std::vector<broker::WorkloadKey> KeysNamed(const broker::Snapshot& snap, const std::string& ns,
                                                    const std::string& name) {
    std::vector<broker::WorkloadKey> keys;
    std::vector<broker::WorkloadKey> candidates;
    for (const workload::KindInfo& k : workload::ManagedKinds()) candidates.push_back({ns, name, k.kind, false});
    candidates.push_back({ns, name, workload::Kind::kPod, true});
    for (const broker::WorkloadKey& key : candidates) {
      bool known = snap.Find(key) != nullptr;
      for (const auto& w : snap.finished()) known = known || w->key == key;
      if (known) keys.push_back(key);
    }
    return keys;
  }

  // GET /v1/workloads/NS/NAME (any kind; 409 when two kinds share the
  // name) and /v1/workloads/KIND/NS/NAME.
  server::HttpResponse Workload(const Principal& who, const std::optional<std::string>& kind_ref, const std::string& ns,
                                const std::string& name) const {
    if (!who.MayRead(ns)) return Forbidden(who, absl::StrCat("read workloads in ", ns));
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    broker::WorkloadKey key;
    if (kind_ref.has_value()) {
      std::optional<broker::WorkloadKey> parsed = broker::ParseKindRef(*kind_ref, ns, name);
      if (!parsed.has_value()) {
        return Error(absl::InvalidArgumentError(absl::StrCat(
                         "\"", *kind_ref, "\" is not a kind gangkeeper manages (use job, pytorchjob, tfjob, ",
                         "mpijob, xgboostjob, paddlejob, jobset, rayjob, raycluster, pod or podgroup, ",
                         "optionally with .GROUP)")),
                     "kind");
      }
      key = *parsed;
    } else {
      std::vector<broker::WorkloadKey> keys = KeysNamed(*snap, ns, name);
      if (keys.size() > 1) {
        std::vector<std::string> refs;
        for (const broker::WorkloadKey& k : keys) refs.push_back(broker::KeyString(k));
        return Error(absl::AlreadyExistsError(absl::StrCat("several workloads are named ", ns, "/", name, ": ",
                                                           absl::StrJoin(refs, ", "),
                                                           "; name one as /v1/workloads/KIND/NAMESPACE/NAME")));
      }
      key = keys.empty() ? broker::WorkloadKey{ns, name} : keys.front();
      if (keys.empty()) {
        // Not tracked: the audit log may still know it (finished or deleted).
        json history = History(ns, name, "");
        if (history.empty()) {
          return Error(absl::NotFoundError(absl::StrCat("workload ", ns, "/", name, " is not tracked")));
        }
        return Ok(Gone(ns, name, std::move(history)));
      }
    }
    json history = History(ns, name, broker::KindName(key));
    std::vector<const broker::WorkloadInfo*> instances = snap->Instances(key);
    const broker::WorkloadInfo* w = instances.empty() ? nullptr : instances.back();
    if (w == nullptr) {
      for (const auto& f : snap->finished()) {
        if (f->key == key) w = f.get();
      }
    }
    if (w == nullptr) {
      if (history.empty()) {
        return Error(absl::NotFoundError(absl::StrCat("workload ", broker::KeyString(key), " is not tracked")));
      }
      json j = Gone(ns, name, std::move(history));
      j["kind"] = broker::KindName(key);
      j["ref"] = broker::KeyString(key);
      return Ok(j);
    }
    json j = WorkloadJson(*w, snap->Position(key));
    if (instances.size() > 1) {
      // An older object under the same name still holds quota until its end
      // is seen.
      json older = json::array();
      for (size_t i = 0; i + 1 < instances.size(); ++i) {
        older.push_back(WorkloadJson(*instances[i], std::nullopt));
      }
      j["olderInstances"] = std::move(older);
    }
    AddTimestamps(history, &j);
    if (!history.empty()) j["history"] = std::move(history);
    return Ok(j);
  }

  static json Gone(const std::string& ns, const std::string& name, json history) {
    const std::string last = history.back().value("action", "");
    json j = {{"namespace", ns}, {"name", name},
              {"state", last == "workload.finished" ? "finished" : last == "workload.deleted" ? "deleted" : "unknown"}};
    AddTimestamps(history, &j);
    j["history"] = std::move(history);
    return j;
  }

  // The audit events of one workload, oldest first (the last 100).
  // `kind` "" takes every workload kind. Events from before kinds were
  // recorded (kind "Workload") belong to any kind of that name.
  json History(const std::string& ns, const std::string& name, const std::string& kind) const {
    json out = json::array();
    if (audit_ == nullptr) return out;
    audit::Query q;
    q.namespace_name = ns;
    q.name = name;
    q.limit = 1000;
    std::vector<audit::Event> events;
    for (int page = 0; page < 100; ++page) {  // bounded: 100,000 events of one workload
      absl::StatusOr<audit::Page> p = audit_->Find(q);
      if (!p.ok()) break;
      for (const audit::Event& e : p->events) {
        if (e.kind == "PolicySet") continue;
        if (!kind.empty() && e.kind != kind && e.kind != "Workload") continue;
        events.push_back(e);
      }
      if (events.size() > 100) events.erase(events.begin(), events.end() - 100);
      if (p->next == 0) break;
      q.after = p->next;
    }
    for (const audit::Event& e : events) {
      json item = {{"seq", e.seq}, {"time", Time(e.time)}, {"action", e.action}, {"actor", e.actor}};
      if (!e.reason.empty()) item["reason"] = e.reason;
      json details = json::parse(e.details, nullptr, false);
      if (details.is_object() && details.contains("message")) item["message"] = details["message"];
      out.push_back(std::move(item));
    }
    return out;
  }

  // Every matching event as JSON lines (at most 100,000 per answer; the
  // X-Gangkeeper-Next-Cursor header says where to go on).
  server::HttpResponse Export(const Principal& who, const server::HttpRequest& req) const {
    audit::Query q;
    if (std::optional<server::HttpResponse> refused = AuditQuery(who, req, &q)) return *refused;
    q.limit = 1000;
    server::HttpResponse r;
    r.content_type = "application/x-ndjson";
    size_t n = 0;
    while (n < 100'000) {
      absl::StatusOr<audit::Page> p = audit_->Find(q);
      if (!p.ok()) return Error(absl::InternalError(p.status().message()));
      for (const audit::Event& e : p->events) absl::StrAppend(&r.body, audit::EncodeEvent(e), "\n");
      n += p->events.size();
      if (p->next == 0) return r;
      q.after = p->next;
    }
    r.headers.emplace_back("X-Gangkeeper-Next-Cursor", absl::StrCat(q.after));
    return r;
  }

 private:
  broker::Broker* broker_;
  TokenStore* tokens_;
  const base::Clock* clock_;
  const audit::AuditLog* audit_;
  std::shared_ptr<const model::PolicySet> base_;  // the policy files
  PolicyEditor* editor_;
  std::unique_ptr<PolicyEditor> local_editor_;  // when none was given
  absl::Mutex edit_mu_;  // one quota change at a time on this replica
};

server::Route Get(const std::string& path, bool prefix, server::Handler h) {
  server::Route r;
  r.listener = server::Listener::kApi;
  r.method = "GET";
  r.path = path;
  r.prefix = prefix;
  r.handler = std::move(h);
  return r;
}

}  // namespace

std::vector<server::Route> Routes(broker::Broker* broker, TokenStore* tokens, const base::Clock* clock,
                                  const audit::AuditLog* audit, std::shared_ptr<const model::PolicySet> base_policies,
                                  PolicyEditor* editor) {
  auto api = std::make_shared<Api>(broker, tokens, clock, audit, std::move(base_policies), editor);
  std::vector<server::Route> routes;
  for (const char* prefix : {"/apis/kueue.x-k8s.io/", "/apis/scheduling.k8s.io/", "/apis/gangkeeper.io/"}) {
    for (const char* method : {"GET", "PUT", "DELETE"}) {
      server::Route r = Get(prefix, true, [api, m = std::string(method)](const server::HttpRequest& req) {
        return api->Guard(req, [&](const Principal& who) {
          ObjectRef ref;
          if (!ParseQuotaPath(req.path, &ref)) {
            return Error(absl::NotFoundError(
                absl::StrCat(req.path, ": use /apis/kueue.x-k8s.io/v1beta1/{resourceflavors,clusterqueues,",
                             "cohorts,workloadpriorityclasses}[/NAME], /apis/kueue.x-k8s.io/v1beta1/",
                             "namespaces/NS/localqueues[/NAME], /apis/scheduling.k8s.io/v1/priorityclasses[/NAME] "
                             "or /apis/gangkeeper.io/v1alpha1/gpunodepools[/NAME]")));
          }
          if (m == "GET") return api->GetObjects(who, ref);
          if (ref.name.empty()) {
            return server::ErrorResponse(405, absl::StrCat(m, " needs one object: add /NAME to the path"));
          }
          return api->Change(who, ref, m, req.body);
        });
      });
      r.method = method;
      routes.push_back(std::move(r));
    }
  }
  {
    server::Route r = Get("/v1/apply", false, [api](const server::HttpRequest& req) {
      return api->Guard(req, [&](const Principal& who) { return api->Apply(who, req.body); });
    });
    r.method = "POST";
    routes.push_back(std::move(r));
  }
  routes.push_back(Get("/v1/audit/export", false, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return api->Export(who, req); });
  }));
  routes.push_back(Get("/v1/audit/head", false, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return api->AuditHead(who); });
  }));
  routes.push_back(Get("/v1/audit", false, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return api->Audit(who, req); });
  }));
  routes.push_back(Get("/v1/clusterqueues", false, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return api->ClusterQueues(who); });
  }));
  routes.push_back(Get("/v1/clusterqueues/", true, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) {
      absl::string_view rest = req.path;
      absl::ConsumePrefix(&rest, "/v1/clusterqueues/");
      if (!absl::ConsumeSuffix(&rest, "/status") || rest.empty() || absl::StrContains(rest, "/")) {
        return Error(absl::NotFoundError(absl::StrCat(req.path, ": use /v1/clusterqueues/NAME/status")));
      }
      return api->ClusterQueueStatus(who, std::string(rest));
    });
  }));
  routes.push_back(Get("/v1/workloads", false, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return api->Workloads(who, req); });
  }));
  routes.push_back(Get("/v1/workloads/", true, [api](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) {
      absl::string_view rest = req.path;
      absl::ConsumePrefix(&rest, "/v1/workloads/");
      std::vector<std::string> parts = absl::StrSplit(rest, '/');
      for (const std::string& p : parts) {
        if (p.empty()) {
          return Error(absl::NotFoundError(absl::StrCat(req.path, ": use /v1/workloads/[KIND/]NAMESPACE/NAME")));
        }
      }
      if (parts.size() == 2) return api->Workload(who, std::nullopt, parts[0], parts[1]);
      if (parts.size() == 3) return api->Workload(who, parts[0], parts[1], parts[2]);
      return Error(absl::NotFoundError(absl::StrCat(req.path, ": use /v1/workloads/[KIND/]NAMESPACE/NAME")));
    });
  }));
  return routes;
}

server::Route MetricsRoute(const metrics::Registry* registry, TokenStore* tokens, const base::Clock* clock) {
  return Get("/metrics", false, [registry, tokens, clock](const server::HttpRequest& req) {
    return Authenticated(tokens, clock, req, [&](const Principal& who) {
      if (!who.MayReadMetrics()) return Forbidden(who, "read /metrics (roles admin, viewer and metrics may)");
      server::HttpResponse r;
      r.content_type = std::string(metrics::kPrometheusContentType);
      r.body = registry->ExposePrometheus();
      return r;
    });
  });
}

}  // namespace gangkeeper::api
