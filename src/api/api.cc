// gangkeeper: the API's routes (see api.h).
#include "gangkeeper/api/api.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::api {
namespace {

using nlohmann::json;

server::HttpResponse Error(int status, const std::string& code, const std::string& message,
                           const std::string& field = "") {
  server::HttpResponse r;
  r.status = status;
  json e = {{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  r.body = json{{"error", e}}.dump();
  return r;
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
  if (w.workload != nullptr) {
    j["uid"] = w.workload->uid;
    j["kind"] = workload::InfoFor(w.workload->kind).name;
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
  if (w.phase != broker::Phase::kPending) j["admitted"] = Time(w.admitted_at);
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

// The namespaces whose LocalQueues point at `cq`.
std::set<std::string> NamespacesOf(const model::PolicySet& p, const std::string& cq) {
  std::set<std::string> out;
  for (const auto& [key, lq] : p.local_queues) {
    if (lq.cluster_queue == cq) out.insert(key.first);
  }
  return out;
}

bool MayReadQueue(const Principal& who, const model::PolicySet& p, const std::string& cq) {
  if (who.role != Role::kTeamAdmin) return who.MayRead("");
  for (const std::string& ns : NamespacesOf(p, cq)) {
    if (who.MayRead(ns)) return true;
  }
  return false;
}

class Api {
 public:
  Api(broker::Broker* broker, TokenStore* tokens, const base::Clock* clock, const audit::AuditLog* audit)
      : broker_(broker), tokens_(tokens), clock_(clock), audit_(audit) {}

  server::HttpResponse Audit(const Principal& who, const server::HttpRequest& req) const {
    audit::Query q;
    q.namespace_name = req.QueryParam("namespace");
    q.name = req.QueryParam("name");
    q.kind = req.QueryParam("kind");
    q.action = req.QueryParam("action");
    q.actor = req.QueryParam("actor");
    q.cluster_queue = req.QueryParam("clusterQueue");
    if (!who.MayReadAudit()) {
      if (who.role != Role::kTeamAdmin) return Forbidden(who, "read the audit log");
      if (q.namespace_name.empty() || !who.MayRead(q.namespace_name)) {
        return Forbidden(who, "read the audit log outside its namespaces (give namespace=)");
      }
    }
    if (audit_ == nullptr) return Error(503, "Unavailable", "this server keeps no audit log");
    for (const char* field : {"since", "until"}) {
      const std::string v = req.QueryParam(field);
      if (v.empty()) continue;
      absl::Time t;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, v, &t, &err)) {
        return Error(400, "BadRequest", absl::StrCat(field, "=", v, ": not an RFC 3339 time (", err, ")"), field);
      }
      (std::string(field) == "since" ? q.since : q.until) = t;
    }
    if (const std::string v = req.QueryParam("limit"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &q.limit) || q.limit < 1 || q.limit > 1000) {
        return Error(400, "BadRequest", absl::StrCat("limit=", v, ": use 1 to 1000"), "limit");
      }
    }
    if (const std::string v = req.QueryParam("cursor"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &q.after)) {
        return Error(400, "BadRequest", absl::StrCat("cursor=", v, ": use the `next` of the previous page"), "cursor");
      }
    }
    absl::StatusOr<audit::Page> page = audit_->Find(q);
    if (!page.ok()) return Error(500, "Internal", std::string(page.status().message()));
    json items = json::array();
    for (const audit::Event& e : page->events) items.push_back(json::parse(audit::EncodeEvent(e), nullptr, false));
    json out = {{"items", items}};
    if (page->next != 0) out["next"] = absl::StrCat(page->next);
    return Ok(out);
  }

  // Authenticates, then runs `f` with the principal.
  server::HttpResponse Guard(const server::HttpRequest& req,
                             const std::function<server::HttpResponse(const Principal&)>& f) const {
    absl::StatusOr<Principal> who = tokens_->Authenticate(req.Header("authorization"), req.remote_addr, clock_->Now());
    if (!who.ok()) {
      if (absl::IsResourceExhausted(who.status())) {
        server::HttpResponse r = Error(429, "TooManyRequests", std::string(who.status().message()));
        r.headers.emplace_back("Retry-After", "60");
        return r;
      }
      server::HttpResponse r = Error(401, "Unauthorized", std::string(who.status().message()));
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    return f(*who);
  }

  server::HttpResponse ClusterQueues(const Principal& who) const {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    if (who.role == Role::kAuditor) return Forbidden(who, "read ClusterQueues");
    json items = json::array();
    for (const auto& [name, view] : snap->cluster_queues()) {
      if (!MayReadQueue(who, snap->policies(), name)) continue;
      items.push_back(QueueJson(*view));
    }
    return Ok({{"items", items}});
  }

  server::HttpResponse ClusterQueueStatus(const Principal& who, const std::string& name) const {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const broker::ClusterQueueView* view = snap->FindClusterQueue(name);
    if (who.role == Role::kAuditor || (view != nullptr && !MayReadQueue(who, snap->policies(), name))) {
      return Forbidden(who, absl::StrCat("read ClusterQueue ", name));
    }
    if (view == nullptr) return Error(404, "NotFound", absl::StrCat("ClusterQueue \"", name, "\" does not exist"));
    return Ok(QueueJson(*view));
  }

  server::HttpResponse Workloads(const Principal& who, const server::HttpRequest& req) const {
    if (who.role == Role::kAuditor) return Forbidden(who, "read workloads");
    const std::string ns = req.QueryParam("namespace");
    const std::string cq = req.QueryParam("clusterQueue");
    std::string state = req.QueryParam("state");
    if (state.empty()) state = "all";
    if (state != "pending" && state != "admitted" && state != "finished" && state != "all") {
      return Error(400, "BadRequest", absl::StrCat("state=", state, ": use pending, admitted, finished or all"),
                   "state");
    }
    if (!ns.empty() && !who.MayRead(ns)) return Forbidden(who, absl::StrCat("read workloads in ", ns));
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    std::vector<const broker::WorkloadInfo*> found;
    snap->ForEachWorkload([&](const broker::WorkloadInfo& w) {
      if (!ns.empty() && w.key.namespace_name != ns) return;
      if (!cq.empty() && w.cluster_queue != cq) return;
      if (state != "all" && state != ApiState(w.phase)) return;
      if (!who.MayRead(w.key.namespace_name)) return;
      found.push_back(&w);
    });
    std::sort(found.begin(), found.end(),
              [](const broker::WorkloadInfo* a, const broker::WorkloadInfo* b) { return a->key < b->key; });
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

  server::HttpResponse Workload(const Principal& who, const std::string& ns, const std::string& name) const {
    if (!who.MayRead(ns)) return Forbidden(who, absl::StrCat("read workloads in ", ns));
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const broker::WorkloadKey key{ns, name};
    const broker::WorkloadInfo* w = snap->Find(key);
    if (w == nullptr) return Error(404, "NotFound", absl::StrCat("workload ", ns, "/", name, " is not tracked"));
    return Ok(WorkloadJson(*w, snap->Position(key)));
  }

 private:
  static server::HttpResponse Forbidden(const Principal& who, const std::string& what) {
    return Error(403, "Forbidden",
                 absl::StrCat("token \"", who.name, "\" (role ", RoleName(who.role), ") may not ", what));
  }

  broker::Broker* broker_;
  TokenStore* tokens_;
  const base::Clock* clock_;
  const audit::AuditLog* audit_;
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
                                  const audit::AuditLog* audit) {
  auto api = std::make_shared<Api>(broker, tokens, clock, audit);
  std::vector<server::Route> routes;
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
        return Error(404, "NotFound", absl::StrCat(req.path, ": use /v1/clusterqueues/NAME/status"));
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
      if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
        return Error(404, "NotFound", absl::StrCat(req.path, ": use /v1/workloads/NAMESPACE/NAME"));
      }
      return api->Workload(who, parts[0], parts[1]);
    });
  }));
  return routes;
}

}  // namespace gangkeeper::api
