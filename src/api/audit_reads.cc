// gangkeeper api: reads of the audit log: a page of events, the head, and
// the export as JSON lines (see handlers.h).
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"
#include "src/api/views.h"

namespace gangkeeper::api {

using nlohmann::json;

// The audit query of `req`, checked against `who`'s role; or the error
// to answer with.
std::optional<server::HttpResponse> Api::AuditQuery(const Principal& who, const server::HttpRequest& req,
                                               audit::Query* q) const {
  q->namespace_name = req.QueryParam("namespace");
  q->name = req.QueryParam("name");
  q->kind = req.QueryParam("kind");
  q->action = req.QueryParam("action");
  q->actor = req.QueryParam("actor");
  q->cluster_queue = req.QueryParam("clusterQueue");
  if (!who.MayReadAudit()) {
    if (who.authorizer == nullptr && who.role != Role::kTeamAdmin) return Forbidden(who, "read the audit log");
    if (!who.MayReadNamespaceAudit(q->namespace_name)) {
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

server::HttpResponse Api::Audit(const Principal& who, const server::HttpRequest& req) const {
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
server::HttpResponse Api::AuditHead(const Principal& who) const {
  if (!who.MayReadAudit()) return Forbidden(who, "read the audit log's head");
  if (audit_ == nullptr) return Error(absl::UnavailableError("this server keeps no audit log"));
  const audit::AuditHead h = audit_->head();
  json out = {{"seq", h.seq}, {"chain", h.chain}, {"time", h.seq == 0 ? json(nullptr) : json(Time(h.time))}};
  if (!h.hmac.empty()) out["hmac"] = h.hmac;
  return Ok(out);
}

// Every matching event as JSON lines (at most 100,000 per answer; the
// X-Gangkeeper-Next-Cursor header says where to go on).
server::HttpResponse Api::Export(const Principal& who, const server::HttpRequest& req) const {
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

}  // namespace gangkeeper::api
