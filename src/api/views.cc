// gangkeeper api: the JSON views of the broker's state (see views.h).
#include "src/api/views.h"

#include <map>
#include <string>
#include <utility>

#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::api {
namespace {

using nlohmann::json;

json Quantities(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

}  // namespace

std::string Time(absl::Time t) {
  if (t == absl::Time() || t == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
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
  // waitForPodsReady: how far an admitted gang's pods are, and its requeues.
  if (w.phase == broker::Phase::kReserved || w.phase == broker::Phase::kRunning) {
    j["readyPods"] = w.ready_pods;
    j["podsReady"] = w.pods_ready;
  }
  if (w.requeue_count > 0) j["requeueCount"] = w.requeue_count;
  if (!w.active) j["active"] = false;
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
  json out = {{"name", s.name},       {"cohort", s.cohort},     {"active", s.active},
              {"pending", s.pending}, {"admitted", s.admitted}, {"weightedShare", s.weighted_share},
              {"resources", resources}};
  if (!s.active) out["inactiveReason"] = s.inactive_reason;
  return out;
}

}  // namespace gangkeeper::api
