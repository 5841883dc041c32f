// gangkeeper: the API's routes table (see api.h); the handlers are in
// handlers.h.
#include "gangkeeper/api/api.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/metrics/registry.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"

namespace gangkeeper::api {
namespace {

// Authenticates `req` (401, 429 for an address over its limit of
// failures, 503 when the API server could not check the identity), then
// answers with `f` for the principal. A Kubernetes identity's check that
// failed during `f` turns the answer into a 503: never an allow, and no
// 403 or partial list that would be wrong.
server::HttpResponse Authenticated(Authenticator* tokens, const base::Clock* clock, const server::HttpRequest& req,
                                   const std::function<server::HttpResponse(const Principal&)>& f) {
  absl::StatusOr<Principal> who = tokens->Authenticate(req.Header("authorization"), req.remote_addr, clock->Now());
  if (!who.ok()) {
    if (absl::IsUnavailable(who.status())) return Error(who.status());
    if (absl::IsResourceExhausted(who.status())) {
      server::HttpResponse r = Error(who.status());
      r.headers.emplace_back("Retry-After", "60");
      return r;
    }
    server::HttpResponse r = Error(absl::UnauthenticatedError(who.status().message()));
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  server::HttpResponse answer = f(*who);
  if (who->authorizer != nullptr) {
    if (absl::Status failed = who->authorizer->error(); !failed.ok()) return Error(failed);
  }
  return answer;
}

server::Route Get(const std::string& path, bool prefix, server::Handler h) {
  server::Route r;
  r.listener = server::Listener::kApi;
  r.method = "GET";
  r.path = path;
  r.prefix = prefix;
  r.handler = std::move(h);
  return r;
}

using ApiHandler = std::function<server::HttpResponse(Api&, const Principal&, const server::HttpRequest&)>;

// A route on the API listener whose handler `f` answers for the
// authenticated principal (Api::Guard).
server::Route Guarded(const char* method, const std::string& path, bool prefix, std::shared_ptr<Api> api,
                      ApiHandler f) {
  server::Route r = Get(path, prefix, [api = std::move(api), f = std::move(f)](const server::HttpRequest& req) {
    return api->Guard(req, [&](const Principal& who) { return f(*api, who, req); });
  });
  r.method = method;
  return r;
}

// /apis/GROUP/VERSION/...: GET of a quota object or a kind of them, PUT
// and DELETE of one (object_ref.h names the paths).
server::HttpResponse QuotaObject(Api& api, const Principal& who, const std::string& method,
                                 const server::HttpRequest& req) {
  ObjectRef ref;
  if (!ParseQuotaPath(req.path, &ref)) {
    return Error(absl::NotFoundError(
        absl::StrCat(req.path, ": use /apis/kueue.x-k8s.io/v1beta2/{resourceflavors,clusterqueues,",
                     "cohorts,workloadpriorityclasses}[/NAME], /apis/kueue.x-k8s.io/v1beta2/",
                     "namespaces/NS/localqueues[/NAME], /apis/scheduling.k8s.io/v1/priorityclasses[/NAME] "
                     "or /apis/gangkeeper.io/v1alpha1/gpunodepools[/NAME] (Kueue's objects at v1beta1 too)")));
  }
  if (method == "GET") return api.GetObjects(who, ref);
  if (ref.name.empty()) {
    return server::ErrorResponse(405, absl::StrCat(method, " needs one object: add /NAME to the path"));
  }
  return api.Change(who, ref, method, req.body);
}

// /v1/clusterqueues/NAME/status
server::HttpResponse OneClusterQueue(Api& api, const Principal& who, const server::HttpRequest& req) {
  absl::string_view rest = req.path;
  absl::ConsumePrefix(&rest, "/v1/clusterqueues/");
  if (!absl::ConsumeSuffix(&rest, "/status") || rest.empty() || absl::StrContains(rest, "/")) {
    return Error(absl::NotFoundError(absl::StrCat(req.path, ": use /v1/clusterqueues/NAME/status")));
  }
  return api.ClusterQueueStatus(who, std::string(rest));
}

// /v1/workloads/[KIND/]NAMESPACE/NAME
server::HttpResponse OneWorkload(Api& api, const Principal& who, const server::HttpRequest& req) {
  absl::string_view rest = req.path;
  absl::ConsumePrefix(&rest, "/v1/workloads/");
  std::vector<std::string> parts = absl::StrSplit(rest, '/');
  const bool named = (parts.size() == 2 || parts.size() == 3) &&
                     std::none_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  if (!named) return Error(absl::NotFoundError(absl::StrCat(req.path, ": use /v1/workloads/[KIND/]NAMESPACE/NAME")));
  if (parts.size() == 2) return api.Workload(who, std::nullopt, parts[0], parts[1]);
  return api.Workload(who, parts[0], parts[1], parts[2]);
}

}  // namespace

Api::Api(broker::EventQueue* events, const broker::SnapshotSource* broker, Authenticator* tokens, const base::Clock* clock, const audit::AuditLog* audit,
         model::PolicyStore* policies, PolicyEditor* editor, ClusterPolicyWriter* cluster)
    : broker_(broker),
      tokens_(tokens),
      clock_(clock),
      audit_(audit),
      policies_(policies),
      editor_(editor),
      cluster_(cluster) {
  if (policies_ == nullptr) {
    own_policies_ = std::make_unique<model::PolicyStore>(nullptr);
    policies_ = own_policies_.get();
  }
  if (editor_ == nullptr) {
    local_editor_ = LocalPolicyEditor(events, broker_, policies_);
    editor_ = local_editor_.get();
  }
}

// Authenticates, then runs `f` with the principal.
server::HttpResponse Api::Guard(const server::HttpRequest& req,
                                const std::function<server::HttpResponse(const Principal&)>& f) const {
  return Authenticated(tokens_, clock_, req, f);
}

std::vector<server::Route> Routes(broker::EventQueue* events, const broker::SnapshotSource* broker, Authenticator* tokens, const base::Clock* clock,
                                  const audit::AuditLog* audit, model::PolicyStore* policies,
                                  PolicyEditor* editor, ClusterPolicyWriter* cluster) {
  auto api = std::make_shared<Api>(events, broker, tokens, clock, audit, policies, editor, cluster);
  std::vector<server::Route> routes;
  for (const char* prefix : {"/apis/kueue.x-k8s.io/", "/apis/scheduling.k8s.io/", "/apis/gangkeeper.io/"}) {
    for (const char* method : {"GET", "PUT", "DELETE"}) {
      routes.push_back(Guarded(method, prefix, true, api,
                               [m = std::string(method)](Api& a, const Principal& who, const server::HttpRequest& req) {
                                 return QuotaObject(a, who, m, req);
                               }));
    }
  }
  routes.push_back(Guarded("POST", "/v1/apply", false, api, [](Api& a, const Principal& who, const auto& req) {
    return a.Apply(who, req.body);
  }));
  routes.push_back(Guarded("GET", "/v1/audit/export", false, api,
                           [](Api& a, const Principal& who, const auto& req) { return a.Export(who, req); }));
  routes.push_back(Guarded("GET", "/v1/audit/head", false, api,
                           [](Api& a, const Principal& who, const auto&) { return a.AuditHead(who); }));
  routes.push_back(Guarded("GET", "/v1/audit", false, api,
                           [](Api& a, const Principal& who, const auto& req) { return a.Audit(who, req); }));
  routes.push_back(Guarded("GET", "/v1/clusterqueues", false, api,
                           [](Api& a, const Principal& who, const auto&) { return a.ClusterQueues(who); }));
  routes.push_back(Guarded("GET", "/v1/clusterqueues/", true, api, OneClusterQueue));
  routes.push_back(Guarded("GET", "/v1/workloads", false, api,
                           [](Api& a, const Principal& who, const auto& req) { return a.Workloads(who, req); }));
  routes.push_back(Guarded("GET", "/v1/workloads/", true, api, OneWorkload));
  return routes;
}

server::Route MetricsRoute(const metrics::Registry* registry, Authenticator* tokens, const base::Clock* clock) {
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
