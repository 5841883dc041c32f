// gangkeeper: Kueue's objects as gangkeeper writes them (see kueue_objects.h).
#include "gangkeeper/kube/kueue_objects.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;

std::string Rfc3339(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone()); }

std::string Sha1Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha1(), nullptr) != 1) return "00000";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

// [{name: flavor, resources: [{name, total[, borrowed]}]}], flavors and
// resources in name order.
json FlavorUsage(const std::map<std::string, std::map<std::string, std::pair<quantity::Quantity, quantity::Quantity>>>&
                     by_flavor,
                 bool with_borrowed) {
  json out = json::array();
  for (const auto& [flavor, resources] : by_flavor) {
    json rs = json::array();
    for (const auto& [name, q] : resources) {
      json r = {{"name", name}, {"total", q.first.Format()}};
      if (with_borrowed) r["borrowed"] = q.second.Format();
      rs.push_back(std::move(r));
    }
    out.push_back({{"name", flavor}, {"resources", std::move(rs)}});
  }
  return out;
}

json Requests(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

json AdmissionJson(const broker::Assignment& a) {
  json sets = json::array();
  for (const broker::PodSetAssignment& ps : a.pod_sets) {
    json flavors = json::object();
    for (const auto& [res, flavor] : ps.flavors) flavors[res] = flavor;
    sets.push_back(
        {{"name", ps.name}, {"flavors", flavors}, {"resourceUsage", Requests(ps.usage)}, {"count", ps.count}});
  }
  return {{"clusterQueue", a.cluster_queue}, {"podSetAssignments", std::move(sets)}};
}

const KueueCondition* FindCondition(const std::vector<KueueCondition>& cs, const std::string& type) {
  for (const KueueCondition& c : cs) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

void Put(std::vector<KueueCondition>* cs, KueueCondition c) {
  for (KueueCondition& have : *cs) {
    if (have.type == c.type) {
      have = std::move(c);
      return;
    }
  }
  cs->push_back(std::move(c));
}

// Why the broker holds `name` inactive, in the words its pending workloads
// are told (broker/queues.cc ClusterQueueBlocked, checked in the same
// order), with a Kueue-style reason.
KueueCondition InactiveCondition(const std::string& name, const model::PolicySet& policies) {
  auto cq = policies.cluster_queues.find(name);
  if (cq == policies.cluster_queues.end()) {
    return {"Active", "False", "Terminating", absl::StrCat("ClusterQueue ", name, " does not exist")};
  }
  if (cq->second.stop_policy != model::StopPolicy::kNone) {
    return {"Active", "False", "Stopped",
            absl::StrCat("ClusterQueue ", name, " is stopped (stopPolicy ", model::StopPolicyName(cq->second.stop_policy),
                         ")")};
  }
  for (const model::ResourceGroup& rg : cq->second.resource_groups) {
    for (const model::FlavorQuotas& fq : rg.flavors) {
      if (policies.flavors.count(fq.name) == 0) {
        return {"Active", "False", "FlavorNotFound",
                absl::StrCat("ClusterQueue ", name, " uses ResourceFlavor ", fq.name, ", which does not exist")};
      }
    }
  }
  return {"Active", "False", "CohortCycle",
          absl::StrCat("ClusterQueue ", name, " is in cohort ", cq->second.cohort,
                       ", which is on a cycle of parent cohorts")};
}

// The broker's DRS as Kueue's int64 weightedShare (INT64_MAX saturates).
int64_t WeightedShare(double share) {
  if (share >= static_cast<double>(std::numeric_limits<int64_t>::max())) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(share);
}

}  // namespace

const char* KueueVersionName(KueueVersion v) { return v == KueueVersion::kV1beta2 ? "v1beta2" : "v1beta1"; }

std::string KueuePath(KueueVersion v, absl::string_view resource, absl::string_view namespace_name,
                      absl::string_view name) {
  std::string p = absl::StrCat("/apis/", kKueueGroup, "/", KueueVersionName(v));
  if (!namespace_name.empty()) absl::StrAppend(&p, "/namespaces/", namespace_name);
  absl::StrAppend(&p, "/", resource);
  if (!name.empty()) absl::StrAppend(&p, "/", name);
  return p;
}

std::string KueueWorkloadName(absl::string_view kind, absl::string_view group, absl::string_view owner_name,
                              absl::string_view owner_uid) {
  constexpr size_t kHashLength = 5;
  constexpr size_t kMaxPrefix = 253 - 1 - kHashLength;
  std::string prefix = absl::StrCat(absl::AsciiStrToLower(kind), "-", owner_name);
  if (prefix.size() > kMaxPrefix) prefix.resize(kMaxPrefix);
  const std::string hash = Sha1Hex(absl::StrCat(kind, "\n", group, "\n", owner_name, "\n", owner_uid));
  return absl::StrCat(prefix, "-", hash.substr(0, kHashLength));
}

std::string JsonString(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

json JsonField(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it != o.end() ? *it : json(nullptr);
}

json JsonObject(const json& o, const char* key) {
  json f = JsonField(o, key);
  return f.is_object() ? f : json::object();
}

json JsonArray(const json& o, const char* key) {
  json f = JsonField(o, key);
  return f.is_array() ? f : json::array();
}

KueueStatus ObservedStatus(const json& status, const std::vector<std::string>& keys) {
  KueueStatus s;
  for (const std::string& k : keys) {
    s.fields[k] = status.is_object() && status.contains(k) ? status[k] : json(nullptr);
  }
  if (status.is_object() && status.contains("conditions") && status["conditions"].is_array()) {
    for (const json& c : status["conditions"]) {
      if (!c.is_object()) continue;
      KueueCondition kc;
      kc.type = JsonString(c, "type");
      kc.status = JsonString(c, "status");
      kc.reason = JsonString(c, "reason");
      kc.message = JsonString(c, "message");
      s.conditions.push_back(std::move(kc));
    }
  }
  return s;
}

json ConditionsJson(const std::vector<KueueCondition>& want, const json& previous, absl::Time now) {
  json out = json::array();
  for (const KueueCondition& c : want) {
    std::string when = Rfc3339(now);
    if (previous.is_array()) {
      for (const json& p : previous) {
        if (p.is_object() && JsonString(p, "type") == c.type && JsonString(p, "status") == c.status &&
            p.contains("lastTransitionTime") && p["lastTransitionTime"].is_string()) {
          when = p["lastTransitionTime"].get<std::string>();
        }
      }
    }
    out.push_back({{"type", c.type},
                   {"status", c.status},
                   {"reason", c.reason},
                   {"message", c.message},
                   {"lastTransitionTime", when}});
  }
  return out;
}

json StatusJson(const KueueStatus& s, const json& previous_conditions, absl::Time now) {
  json out = s.fields;
  if (s.conditions.empty() && (!previous_conditions.is_array() || previous_conditions.empty())) return out;
  out["conditions"] = ConditionsJson(s.conditions, previous_conditions, now);
  return out;
}

// ---- ClusterQueue and LocalQueue ----

const std::vector<std::string>& ClusterQueueStatusKeys() {
  static const std::vector<std::string> kKeys = {"pendingWorkloads",   "reservingWorkloads", "admittedWorkloads",
                                                 "flavorsReservation", "flavorsUsage",       "fairSharing"};
  return kKeys;
}

std::vector<std::string> LocalQueueStatusKeys(KueueVersion v) {
  return {"pendingWorkloads", "reservingWorkloads", "admittedWorkloads", "flavorsReservation",
          v == KueueVersion::kV1beta2 ? "flavorsUsage" : "flavorUsage"};
}

KueueStatus ClusterQueueStatusOf(const broker::ClusterQueueView& view, const model::PolicySet& policies) {
  const broker::ClusterQueueStatus& s = view.status;
  KueueStatus out;
  out.fields["pendingWorkloads"] = s.pending;
  // No admission checks: a workload holding quota is admitted.
  out.fields["reservingWorkloads"] = s.admitted;
  out.fields["admittedWorkloads"] = s.admitted;
  std::map<std::string, std::map<std::string, std::pair<quantity::Quantity, quantity::Quantity>>> by_flavor;
  for (const auto& [fr, r] : s.resources) by_flavor[fr.flavor][fr.resource] = {r.usage, r.borrowed};
  out.fields["flavorsReservation"] = FlavorUsage(by_flavor, true);
  out.fields["flavorsUsage"] = FlavorUsage(by_flavor, true);
  out.fields["fairSharing"] = {{"weightedShare", WeightedShare(s.weighted_share)}};
  if (s.active) {
    out.conditions.push_back({"Active", "True", "Ready", "Can admit new workloads"});
  } else {
    out.conditions.push_back(InactiveCondition(s.name, policies));
  }
  return out;
}

std::map<std::pair<std::string, std::string>, KueueStatus> LocalQueueStatusesOf(const broker::Snapshot& snap,
                                                                                 KueueVersion v) {
  struct Counts {
    int64_t pending = 0, admitted = 0;
    std::map<std::string, std::map<std::string, std::pair<quantity::Quantity, quantity::Quantity>>> usage;
  };
  std::map<std::pair<std::string, std::string>, Counts> counts;
  for (const auto& [key, lq] : snap.policies().local_queues) counts[key];
  snap.ForEachWorkload([&counts](const broker::WorkloadInfo& w) {
    if (w.local_queue.empty() || w.workload == nullptr) return;
    auto it = counts.find({w.key.namespace_name, w.local_queue});
    if (it == counts.end()) return;
    Counts& c = it->second;
    if (w.phase == broker::Phase::kPending) ++c.pending;
    if (!w.admission.has_value()) return;
    ++c.admitted;
    for (const broker::PodSetAssignment& ps : w.admission->pod_sets) {
      for (const auto& [res, flavor] : ps.flavors) {
        auto used = ps.usage.find(res);
        if (used == ps.usage.end()) continue;
        quantity::Quantity& sum = c.usage[flavor][res].first;
        sum = sum.SaturatingAdd(used->second);
      }
    }
  });
  std::map<std::pair<std::string, std::string>, KueueStatus> out;
  for (const auto& [key, c] : counts) {
    KueueStatus s;
    s.fields["pendingWorkloads"] = c.pending;
    s.fields["reservingWorkloads"] = c.admitted;
    s.fields["admittedWorkloads"] = c.admitted;
    s.fields["flavorsReservation"] = FlavorUsage(c.usage, false);
    s.fields[v == KueueVersion::kV1beta2 ? "flavorsUsage" : "flavorUsage"] = FlavorUsage(c.usage, false);
    const model::LocalQueue& lq = snap.policies().local_queues.at(key);
    const broker::ClusterQueueView* cq = snap.FindClusterQueue(lq.cluster_queue);
    if (lq.stop_policy != model::StopPolicy::kNone) {
      s.conditions.push_back({"Active", "False", "Stopped", "The LocalQueue is stopped"});
    } else if (cq == nullptr) {
      s.conditions.push_back({"Active", "False", "ClusterQueueDoesNotExist",
                              absl::StrCat("ClusterQueue ", lq.cluster_queue, " does not exist")});
    } else if (!cq->status.active) {
      s.conditions.push_back({"Active", "False", "ClusterQueueIsInactive",
                              absl::StrCat("ClusterQueue ", lq.cluster_queue, " is inactive: ",
                                           InactiveCondition(lq.cluster_queue, snap.policies()).message)});
    } else {
      s.conditions.push_back({"Active", "True", "Ready", "Can submit new workloads to localQueue"});
    }
    out.emplace(key, std::move(s));
  }
  return out;
}

// ---- Cohort ----

const std::vector<std::string>& CohortStatusKeys() {
  static const std::vector<std::string> kKeys = {"fairSharing"};
  return kKeys;
}

KueueStatus CohortStatusOf(const broker::CohortStatus& cohort) {
  KueueStatus out;
  out.fields["fairSharing"] = {{"weightedShare", WeightedShare(cohort.weighted_share)}};
  return out;
}

// ---- Workload ----

bool PublishesWorkload(const broker::WorkloadInfo& w) {
  return w.workload != nullptr && (w.key.pod_group || !w.workload->uid.empty()) && !w.workload->unconfirmed &&
         !w.key.name.empty();
}

std::string KueueWorkloadNameFor(const broker::WorkloadKey& key, absl::string_view uid) {
  if (key.pod_group) return key.name;
  const workload::KindInfo& kind = workload::InfoFor(key.kind);
  return KueueWorkloadName(kind.name, kind.group, key.name, uid);
}

std::string KueueWorkloadNameOf(const broker::WorkloadInfo& w) {
  return KueueWorkloadNameFor(w.key, w.workload != nullptr ? w.workload->uid : "");
}

json PodOwnerReferences(const std::vector<PodOwner>& pods) {
  json refs = json::array();
  for (const PodOwner& p : pods) {
    refs.push_back({{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", p.name}, {"uid", p.uid}});
  }
  return refs;
}

json WorkloadSpec(const broker::WorkloadInfo& w, KueueVersion v) {
  json spec = json::object();
  json sets = json::array();
  // A pod group: its members' pod sets merged by shape (what is placed).
  const std::vector<workload::PodSet>& pod_sets = w.pod_group != nullptr && !w.pod_group->pod_sets.empty()
                                                      ? w.pod_group->pod_sets
                                                      : w.workload->pod_sets;
  for (const workload::PodSet& ps : pod_sets) {
    json pod = {{"containers", json::array({{{"name", "main"}, {"resources", {{"requests", Requests(ps.requests)}}}}})}};
    if (!ps.node_selector.empty()) pod["nodeSelector"] = ps.node_selector;
    if (!ps.priority_class_name.empty()) pod["priorityClassName"] = ps.priority_class_name;
    json set = {{"name", ps.name}, {"count", ps.count}, {"template", {{"spec", std::move(pod)}}}};
    if (ps.min_count.has_value()) set["minCount"] = ps.MinCount();
    sets.push_back(std::move(set));
  }
  spec["podSets"] = std::move(sets);
  spec["queueName"] = w.local_queue.empty() ? w.workload->queue_name : w.local_queue;
  spec["priority"] = w.priority;
  const std::string& pc = w.workload->priority_class;
  if (!pc.empty()) {
    const bool kueue_class = w.workload->priority_class_source == "WorkloadPriorityClass";
    if (v == KueueVersion::kV1beta2) {
      spec["priorityClassRef"] = {{"group", kueue_class ? "kueue.x-k8s.io" : "scheduling.k8s.io"},
                                  {"kind", kueue_class ? "WorkloadPriorityClass" : "PriorityClass"},
                                  {"name", pc}};
    } else {
      spec["priorityClassName"] = pc;
      spec["priorityClassSource"] =
          kueue_class ? "kueue.x-k8s.io/workloadpriorityclass" : "scheduling.k8s.io/priorityclass";
    }
  }
  return spec;
}

json WorkloadObject(const broker::WorkloadInfo& w, KueueVersion v, const std::vector<PodOwner>& pods) {
  if (w.key.pod_group) {
    json meta = {{"name", KueueWorkloadNameOf(w)},
                 {"namespace", w.key.namespace_name},
                 {"labels", {{kManagedByLabel, kManagedByValue}}},
                 {"annotations", {{kIsGroupWorkloadAnnotation, "true"}}},
                 {"ownerReferences", PodOwnerReferences(pods)}};
    return {{"apiVersion", absl::StrCat(kKueueGroup, "/", KueueVersionName(v))},
            {"kind", "Workload"},
            {"metadata", std::move(meta)},
            {"spec", WorkloadSpec(w, v)}};
  }
  const workload::KindInfo& kind = workload::InfoFor(w.key.kind);
  std::string owner_api = w.workload->api_version;
  if (owner_api.empty()) {
    owner_api = kind.group.empty() ? std::string(kind.version) : absl::StrCat(kind.group, "/", kind.version);
  }
  json meta = {{"name", KueueWorkloadNameOf(w)},
               {"namespace", w.key.namespace_name},
               {"labels", {{kManagedByLabel, kManagedByValue}, {kJobUidLabel, w.workload->uid}}},
               {"ownerReferences", json::array({{{"apiVersion", owner_api},
                                                 {"kind", std::string(kind.name)},
                                                 {"name", w.key.name},
                                                 {"uid", w.workload->uid},
                                                 {"controller", true}}})}};
  return {{"apiVersion", absl::StrCat(kKueueGroup, "/", KueueVersionName(v))},
          {"kind", "Workload"},
          {"metadata", std::move(meta)},
          {"spec", WorkloadSpec(w, v)}};
}

const std::vector<std::string>& WorkloadStatusKeys() {
  static const std::vector<std::string> kKeys = {"admission"};
  return kKeys;
}

const char* QuotaReservedReason(broker::PendingReason::Code code) {
  using Code = broker::PendingReason::Code;
  switch (code) {
    case Code::kWaitingForQuota: return "WaitingForQuota";
    case Code::kExceedsMaxQuota: return "ExceedsMaxQuota";
    case Code::kNoMatchingFlavor: return "NoMatchingFlavor";
    case Code::kWaitingForPreemption: return "WaitingForPreemptedWorkloads";
    case Code::kInactive:
    case Code::kStopped:
    case Code::kNamespaceMismatch: return "Inadmissible";
    default: return "Pending";
  }
}

KueueStatus WorkloadStatusOf(const broker::WorkloadInfo& w, const KueueStatus* previous,
                             const std::optional<EvictionNote>& eviction) {
  KueueStatus s;
  s.fields["admission"] = nullptr;
  // Evicted / Preempted / Requeued: from the change stream, else as before.
  std::vector<KueueCondition> history;
  if (previous != nullptr) {
    for (const char* t : {"Evicted", "Preempted", "Requeued"}) {
      if (const KueueCondition* c = FindCondition(previous->conditions, t)) history.push_back(*c);
    }
  }
  if (w.phase == broker::Phase::kFinished) {
    // Kept as they were when it ran; Finished added.
    if (previous != nullptr) {
      s = *previous;
      if (!s.fields.contains("admission")) s.fields["admission"] = nullptr;
    }
    Put(&s.conditions, {"Finished", "True", "Finished",
                        "The job finished (completed or failed); its quota is free"});
    return s;
  }
  const std::string cq = w.cluster_queue;
  if (w.phase == broker::Phase::kPending) {
    // Not tried since the broker started (a restart, a new leader): the
    // reason the cluster shows stands until the first cycle gives one, or
    // every restart would write "waiting" and then the same reason again.
    const KueueCondition* shown = previous != nullptr ? FindCondition(previous->conditions, "QuotaReserved") : nullptr;
    if (w.reason.message.empty() && shown != nullptr && shown->status == "False") {
      s.conditions.push_back(*shown);
    } else {
      std::string message = w.reason.message.empty() ? "waiting for a scheduling cycle" : w.reason.message;
      if (!cq.empty()) message = absl::StrCat("ClusterQueue ", cq, ": ", message);
      s.conditions.push_back({"QuotaReserved", "False", QuotaReservedReason(w.reason.code), message});
    }
    s.conditions.push_back({"Admitted", "False", "NoReservation", "The workload has no reservation"});
  } else {
    const std::string in = w.admission.has_value() ? w.admission->cluster_queue : cq;
    s.conditions.push_back({"QuotaReserved", "True", "QuotaReserved", absl::StrCat("Quota reserved in ClusterQueue ", in)});
    s.conditions.push_back({"Admitted", "True", "Admitted", "The workload is admitted"});
    if (w.admission.has_value()) s.fields["admission"] = AdmissionJson(*w.admission);
  }
  if (w.evictions == 0) return s;
  if (eviction.has_value()) {
    const std::string reason = eviction->preempted ? "Preempted" : (eviction->reason.empty() ? "Evicted" : eviction->reason);
    history.clear();
    history.push_back({"Evicted", "True", reason, eviction->message});
    if (eviction->preempted) {
      history.push_back({"Preempted", "True", eviction->reason.empty() ? "InClusterQueue" : eviction->reason,
                         eviction->message});
    }
  }
  const bool admitted_again = w.phase == broker::Phase::kReserved || w.phase == broker::Phase::kRunning;
  for (KueueCondition c : history) {
    if (c.type == "Requeued") continue;
    if (admitted_again && c.status == "True") {
      c.status = "False";
      c.reason = "QuotaReserved";
      c.message = "Admitted again after the eviction";
    }
    s.conditions.push_back(std::move(c));
  }
  if (w.phase == broker::Phase::kPending || admitted_again) {
    const KueueCondition* evicted = FindCondition(history, "Evicted");
    s.conditions.push_back({"Requeued", "True", evicted != nullptr ? evicted->reason : "Evicted",
                            "Stopped after the eviction and queued again; its quota was freed"});
  }
  return s;
}

// ---- Questions to the cluster ----

absl::StatusOr<KueueVersion> DiscoverKueue(Client& client) {
  absl::StatusOr<json> group = client.Get(absl::StrCat("/apis/", kKueueGroup));
  if (!group.ok()) {
    if (absl::IsNotFound(group.status())) {
      return absl::NotFoundError(absl::StrCat("the API server does not serve ", kKueueGroup,
                                              " (Kueue's CRDs are not installed)"));
    }
    return group.status();
  }
  bool v1beta1 = false, v1beta2 = false;
  for (const json& v : JsonArray(*group, "versions")) {
    const std::string version = JsonString(v, "version");
    v1beta1 = v1beta1 || version == "v1beta1";
    v1beta2 = v1beta2 || version == "v1beta2";
  }
  if (v1beta2) return KueueVersion::kV1beta2;
  if (v1beta1) return KueueVersion::kV1beta1;
  return absl::NotFoundError(absl::StrCat("the API server serves ", kKueueGroup,
                                          " but neither v1beta2 nor v1beta1 (install Kueue's CRDs of v0.9 or later)"));
}

absl::StatusOr<std::string> DetectKueueController(Client& client, const KueueDetectionOptions& options) {
  std::vector<std::string> found;
  for (const char* kind : {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}) {
    absl::StatusOr<ListResult> list =
        client.List(absl::StrCat("/apis/admissionregistration.k8s.io/v1/", kind));
    if (!list.ok()) {
      return absl::Status(list.status().code(),
                          absl::StrCat("cannot tell whether Kueue's controller runs: ", list.status().message(),
                                       " (RBAC: list ", kind, ")"));
    }
    for (const json& item : list->items) {
      const std::string name = item.contains("metadata") ? JsonString(item["metadata"], "name") : "";
      bool kueue = absl::StrContains(name, "kueue") && absl::EndsWith(name, "webhook-configuration");
      if (item.contains("webhooks") && item["webhooks"].is_array()) {
        for (const json& h : item["webhooks"]) {
          const std::string hook = h.is_object() ? JsonString(h, "name") : "";
          if (hook == "mclusterqueue.kb.io" || hook == "vclusterqueue.kb.io") kueue = true;
        }
      }
      if (kueue) found.push_back(absl::StrCat("webhook configuration ", name));
    }
  }
  absl::StatusOr<json> lease = client.Get(absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/",
                                                       QueryEscape(options.kueue_namespace), "/leases/",
                                                       QueryEscape(options.lease_name)));
  if (lease.ok()) {
    const json holder = lease->contains("spec") ? JsonField((*lease)["spec"], "holderIdentity") : json(nullptr);
    if (holder.is_string() && !holder.get<std::string>().empty()) {
      found.push_back(absl::StrCat("leader Lease ", options.kueue_namespace, "/", options.lease_name, " held by ",
                                   holder.get<std::string>()));
    }
  } else if (HttpCode(lease.status()) != 404) {
    return absl::Status(lease.status().code(),
                        absl::StrCat("cannot tell whether Kueue's controller runs: ", lease.status().message(),
                                     " (RBAC: get leases in ", options.kueue_namespace, ")"));
  }
  if (found.empty()) return std::string();
  return absl::StrCat("Kueue's own controller manager runs (", absl::StrJoin(found, ", "),
                      "): gangkeeper writes no Kueue status or Workloads while it does (never two brains); "
                      "uninstall Kueue's controller manager, keeping its CRDs, to let gangkeeper publish");
}

}  // namespace gangkeeper::kube
