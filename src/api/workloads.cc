// gangkeeper api: the ClusterQueues' status and the workloads, from the
// broker's snapshot and, for a workload's history and for workloads that
// ended, the audit log (see handlers.h).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"
#include "src/api/scope.h"
#include "src/api/views.h"

namespace gangkeeper::api {
namespace {

using nlohmann::json;

// The times the audit history holds and the broker does not keep: the
// last release, the end; creation and admission when the broker forgot.
void AddTimestamps(const json& history, json* j) {
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
std::vector<broker::WorkloadKey> KeysNamed(const broker::Snapshot& snap, const std::string& ns,
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

json Gone(const std::string& ns, const std::string& name, json history) {
  const std::string last = history.back().value("action", "");
  json j = {{"namespace", ns}, {"name", name},
            {"state", last == "workload.finished" ? "finished" : last == "workload.deleted" ? "deleted" : "unknown"}};
  AddTimestamps(history, &j);
  j["history"] = std::move(history);
  return j;
}

}  // namespace

server::HttpResponse Api::ClusterQueues(const Principal& who) const {
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

server::HttpResponse Api::ClusterQueueStatus(const Principal& who, const std::string& name) const {
  std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
  const ReadScope scope(who, snap->policies());
  if (!scope.ReadsQuota() || !scope.ClusterQueue(name)) {
    return Forbidden(who, absl::StrCat("read ClusterQueue ", name));
  }
  const broker::ClusterQueueView* view = snap->FindClusterQueue(name);
  if (view == nullptr) return Error(absl::NotFoundError(absl::StrCat("ClusterQueue \"", name, "\" does not exist")));
  return Ok(QueueJson(*view));
}

server::HttpResponse Api::Workloads(const Principal& who, const server::HttpRequest& req) const {
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
  // One check for all namespaces when the caller reads them all.
  const bool every_namespace = ns.empty() && who.MayReadAll("Workload");
  auto consider = [&](const broker::WorkloadInfo& w) {
    if (!ns.empty() && w.key.namespace_name != ns) return;
    if (!cq.empty() && w.cluster_queue != cq) return;
    if (state != "all" && state != ApiState(w.phase)) return;
    if (!every_namespace && !who.MayRead(w.key.namespace_name)) return;
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

// GET /v1/workloads/NS/NAME (any kind; 409 when two kinds share the
// name) and /v1/workloads/KIND/NS/NAME.
server::HttpResponse Api::Workload(const Principal& who, const std::optional<std::string>& kind_ref,
                                   const std::string& ns, const std::string& name) const {
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

// The audit events of one workload, oldest first (the last 100).
// `kind` "" takes every workload kind. Events from before kinds were
// recorded (kind "Workload") belong to any kind of that name.
json Api::History(const std::string& ns, const std::string& name, const std::string& kind) const {
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

}  // namespace gangkeeper::api
