// gangkeeper admission: validation rules, warnings and registration.
//
// Phases of a CREATE (DESIGN §2): 1 extract the workload; 2 resolve its
// LocalQueue and ClusterQueue; 3 deny what can never run (namespace not
// selected, uncovered resources, a gang above what the ClusterQueue can ever
// hold, a pod above what one node offers, invalid extended resources,
// inconsistent pod groups); 4 warn about what will happen; 5 register (not
// for dryRun) before answering. DecideReview does 1-4 and names the write
// of 5; the caller does it (at once or asynchronously) and then
// ConcludeReview gives the answer.
#include "src/admission/validate.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/model/extended_resource.h"
#include "gangkeeper/workload/extract.h"
#include "gangkeeper/workload/observe.h"
#include "src/admission/json.h"
#include "src/admission/queue_facts.h"

namespace gangkeeper::admission {
namespace {

using quantity::Quantity;
using workload::Workload;

Response Allow(const Review& review) {
  Response r;
  r.uid = review.uid;
  r.allowed = true;
  return r;
}

Response Deny(const Review& review, int code, absl::string_view reason, std::string message) {
  Response r;
  r.uid = review.uid;
  r.allowed = false;
  r.code = code;
  r.reason = std::string(reason);
  r.message = std::move(message);
  return r;
}

std::string ObjectName(const Workload& w) {
  return absl::StrCat(w.namespace_name, "/", w.name.empty() ? "<name not yet generated>" : w.name);
}

// Total request of every resource over the gang.
// As the quota charges them: through the Configuration's resource
// transformations.
std::map<std::string, Quantity> GangTotals(const Workload& w, const model::KueueConfiguration& config) {
  std::map<std::string, Quantity> totals;
  std::map<std::string, Quantity> transformed;
  for (const workload::PodSet& ps : w.pod_sets) {
    for (const auto& [res, q] : model::QuotaRequestsOf(config, ps.requests, &transformed)) {
      absl::StatusOr<Quantity> all = q.MultiplyBy(ps.count);
      totals[res] = totals[res].SaturatingAdd(all.ok() ? *all : Quantity::Max());
    }
  }
  return totals;
}

// The gang's total per resource with the ClusterQueue's capacities for it,
// computed once per review (both the checks and the warnings read it).
struct Demand {
  Quantity total;
  // Empty when the ClusterQueue does not cover it. Borrowed from the
  // queue's facts (FactsOf), valid for the review.
  const std::vector<Capacity>* capacities = nullptr;
};

std::map<std::string, Demand> DemandOf(const Workload& w, const model::PolicySet& p, const QueueFacts& facts) {
  static const std::vector<Capacity> kNone;
  std::map<std::string, Demand> out;
  for (auto& [res, total] : GangTotals(w, p.configuration)) {
    Demand& d = out[res];
    d.total = total;
    d.capacities = total.IsZero() ? &kNone : &facts.CapacitiesOf(res);
  }
  return out;
}

std::string Explain(const model::ClusterQueue& cq, const Capacity& c) {
  if (cq.cohort.empty()) return absl::StrCat("nominal ", c.nominal.Format(), ", no cohort to borrow from");
  if (c.borrowing_limited) {
    return absl::StrCat("nominal ", c.nominal.Format(), " + borrowing limit ", c.borrowable.Format());
  }
  return absl::StrCat("nominal ", c.nominal.Format(), " + ", c.borrowable.Format(), " lendable in cohort ", cq.cohort);
}

// `w`'s name and pod sets, every pod set at its minimum count (partial
// admission): what the queue checks read (not the labels and annotations,
// which can be kilobytes and are copied per review otherwise).
Workload LeastOf(const Workload& w) {
  Workload least;
  least.namespace_name = w.namespace_name;
  least.name = w.name;
  least.pod_sets = w.pod_sets;
  for (workload::PodSet& ps : least.pod_sets) ps.count = ps.MinCount();
  return least;
}

// The pods of LeastOf(w), without the copy.
int64_t LeastPods(const Workload& w) {
  int64_t total = 0;
  for (const workload::PodSet& ps : w.pod_sets) total += ps.MinCount();
  return total;
}

// Denials that need the ClusterQueue: coverage, size, per-node MIG fit.
std::optional<std::string> CheckAgainstQueue(const Workload& w, const model::PolicySet& p,
                                             const model::ClusterQueue& cq, const QueueFacts& facts,
                                             const std::map<std::string, Demand>& demand) {
  // Named only in a refusal: most reviews pass every check.
  auto who = [&w] { return ObjectName(w); };
  const std::set<std::string>& covered = facts.covered;
  std::map<std::string, Quantity> transformed;
  for (const workload::PodSet& ps : w.pod_sets) {
    for (const auto& [res, q] : model::QuotaRequestsOf(p.configuration, ps.requests, &transformed)) {
      if (q.IsZero() || covered.count(res) != 0) continue;
      // Kueue ignores requests of resources no ClusterQueue covers unless
      // they are GPUs; a GPU/MIG resource without quota can never run.
      if (!IsGpu(res) && !model::IsExtendedResource(res)) continue;
      return absl::StrCat(who(), " requests ", res, " (pod set ", ps.name, "), but ClusterQueue ", cq.meta.name,
                          " has no quota for it (it covers ", absl::StrJoin(covered, ", "),
                          "): request a covered resource or ask your platform team for quota");
    }
  }
  for (const auto& [res, d] : demand) {
    const Quantity& total = d.total;
    const std::vector<Capacity>& caps = *d.capacities;
    if (total.IsZero() || covered.count(res) == 0 || caps.empty()) continue;
    Quantity sum;
    const Capacity* best = &caps[0];
    for (const Capacity& c : caps) {
      sum = sum.SaturatingAdd(c.Max());
      if (c.Max() > best->Max()) best = &c;
    }
    if (total > sum) {
      std::string how = caps.size() == 1 ? Explain(cq, *best)
                                         : absl::StrCat("over ", caps.size(), " flavors; the largest: ", best->flavor,
                                                        " with ", Explain(cq, *best));
      return absl::StrCat(who(), " needs ", total.Format(), " ", res, "; ClusterQueue ", cq.meta.name,
                          " can hold at most ", sum.Format(), " (", how, "): lower parallelism or ask for quota");
    }
    for (const workload::PodSet& ps : w.pod_sets) {
      const std::map<std::string, Quantity>& charged = model::QuotaRequestsOf(p.configuration, ps.requests, &transformed);
      auto it = charged.find(res);
      if (it == charged.end()) continue;
      absl::StatusOr<Quantity> need = it->second.MultiplyBy(ps.count);
      if (need.ok() && *need > best->Max()) {
        return absl::StrCat(who(), " pod set ", ps.name, " needs ", need->Format(), " ", res,
                            " in one flavor; ClusterQueue ", cq.meta.name, " can hold at most ", best->Max().Format(),
                            " in any one flavor (", best->flavor, ": ", Explain(cq, *best),
                            "): lower the replicas or ask for quota");
      }
    }
  }
  // One pod must fit one node: compare GPU/MIG requests per pod with what a
  // node of the pools behind the ClusterQueue's flavors advertises.
  for (const workload::PodSet& ps : w.pod_sets) {
    for (const auto& [res, q] : ps.requests) {
      if (!IsGpu(res) || q.IsZero()) continue;
      const NodeFit& fit = facts.NodeFitOf(res);
      if (fit.best_per_node >= 0 && q > Quantity::FromUnits(fit.best_per_node)) {
        return absl::StrCat(who(), " pod set ", ps.name, ": one pod needs ", q.Format(), " ", res,
                            " but no node of the GPU pools behind ClusterQueue ", cq.meta.name, " has that many (",
                            absl::StrJoin(fit.pools, ", ",
                                          [](std::string* out, const std::pair<std::string, int64_t>& pool) {
                                            absl::StrAppend(out, pool.first, ": ", pool.second, " per node");
                                          }),
                            "): split the work over more pods with fewer ", res,
                            " each");
      }
    }
  }
  return std::nullopt;
}

// Extended resources must be whole numbers with requests equal to limits.
std::optional<std::string> CheckExtendedResources(const Workload& w) {
  for (const workload::PodSet& ps : w.pod_sets) {
    for (const auto& [res, q] : ps.requests) {
      if (!model::IsExtendedResource(res)) continue;
      if (q.milli() % 1000 != 0) {
        return absl::StrCat(ObjectName(w), " pod set ", ps.name, " requests ", q.Format(), " ", res,
                            "; extended resources are counted in whole units: use a whole number");
      }
      auto lim = ps.limits.find(res);
      if (lim != ps.limits.end() && !(lim->second == q)) {
        return absl::StrCat(ObjectName(w), " pod set ", ps.name, " requests ", q.Format(), " ", res, " but limits ",
                            lim->second.Format(), "; extended resources cannot be overcommitted: make requests "
                                                  "equal limits");
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> Warnings(const Workload& w, const model::PolicySet& p, const model::LocalQueue& lq,
                                  const model::ClusterQueue& cq, const std::map<std::string, Demand>& demand,
                                  int64_t ahead, const std::map<std::string, Quantity>& used) {
  std::vector<std::string> out;
  out.push_back(absl::StrCat("gangkeeper: ", ObjectName(w), " (", w.TotalPods(), " pod", w.TotalPods() == 1 ? "" : "s",
                             ") is suspended and queued in LocalQueue ", lq.meta.name, " -> ClusterQueue ",
                             cq.meta.name, cq.cohort.empty() ? "" : absl::StrCat(" (cohort ", cq.cohort, ")"), "; ",
                             ahead, " workload", ahead == 1 ? "" : "s", " ahead; ",
                             LeastPods(w) < w.TotalPods()
                                 ? absl::StrCat("it starts with as many of its pods as fit, at least ",
                                                LeastPods(w), " (partial admission)")
                                 : "it starts as a whole gang when it fits"));
  for (const auto& [res, d] : demand) {
    if (!IsGpu(res)) continue;
    const Quantity& total = d.total;
    const std::vector<Capacity>& caps = *d.capacities;
    Quantity nominal;
    for (const Capacity& c : caps) nominal = nominal.SaturatingAdd(c.nominal);
    auto in_use = used.find(res);
    const Quantity using_now = in_use == used.end() ? Quantity() : in_use->second;
    if (!caps.empty()) {
      // What it waits for, in numbers.
      absl::StatusOr<Quantity> after = using_now.Add(total);
      out.push_back(absl::StrCat("gangkeeper: ", cq.meta.name, " uses ", using_now.Format(), " of ", nominal.Format(),
                                 " ", res, "; this gang needs ", total.Format(),
                                 after.ok() && *after <= nominal
                                     ? ", which fits within nominal quota once it is its turn"
                                     : ", more than is free within nominal quota, so it waits for quota to be released "
                                       "or borrowed",
                                 "; ", ahead, " workload", ahead == 1 ? "" : "s", " ahead"));
    }
    if (!caps.empty() && total > nominal) {
      out.push_back(absl::StrCat("gangkeeper: needs ", total.Format(), " ", res, ", above ClusterQueue ", cq.meta.name,
                                 "'s nominal ", nominal.Format(), ": it waits until the rest can be borrowed in cohort ",
                                 cq.cohort, " and may be preempted when the lenders reclaim it"));
    }
  }
  bool has_pv = std::any_of(w.pod_sets.begin(), w.pod_sets.end(),
                            [](const workload::PodSet& ps) { return ps.has_persistent_volume; });
  bool preemptible = w.preemption_policy == model::PreemptionPolicy::kNever;
  std::string higher;
  for (const auto& [name, pc] : p.priority_classes) {
    if (pc.preemption_policy == model::PreemptionPolicy::kPreemptLowerPriority && pc.value > w.priority) {
      preemptible = true;
      higher = name;
    }
  }
  if (preemptible && !has_pv) {
    out.push_back(absl::StrCat("gangkeeper: priority ", w.priority,
                               w.priority_class.empty() ? "" : absl::StrCat(" (", w.priority_class, ")"),
                               " can be preempted", higher.empty() ? "" : absl::StrCat(" by ", higher),
                               ", and no pod mounts a PersistentVolumeClaim: write checkpoints to persistent storage "
                               "so a preempted run resumes instead of starting over"));
  }
  if (w.priority_class_source == "WorkloadPriorityClass" && !w.pod_priority_class.empty()) {
    auto pc = p.priority_classes.find(w.pod_priority_class);
    if (pc != p.priority_classes.end() && pc->second.value != w.priority) {
      out.push_back(absl::StrCat("gangkeeper: queue priority ", w.priority, " (WorkloadPriorityClass ",
                                 w.priority_class, ") disagrees with the pods' PriorityClass ", w.pod_priority_class,
                                 " (", pc->second.value,
                                 "): admission order and pod preemption would rank this job differently; use classes "
                                 "with the same value"));
    }
  }
  return out;
}

// Finished according to the status (Job/JobSet/Kubeflow conditions, Pod
// phase, RayJob deployment status).
// Whether an allowed CREATE registers its workload, marking it unconfirmed
// when reviews are not trusted (DESIGN §2). Then the API server's stored
// object is what counts, and the reconciler registers it from the watch in
// any case: registering from the review only shows it sooner. So a pod of
// a pod group registers nothing (its members are counted from the pods the
// API server stores), nor does anything past options.max_unconfirmed.
bool Registers(Workload& w, const broker::WorkloadRegistry& registry, const WebhookOptions& options) {
  if (options.trust_reviews) return true;
  if (!w.pod_group_name.empty()) return false;
  if (registry.UnconfirmedCount() >= options.max_unconfirmed) return false;
  w.unconfirmed = true;
  return true;
}

// The verdicts of the checks: an answer with no write.
Verdict Decided(Response r) { return Verdict{std::move(r), RegistryWrite{}}; }

Verdict ValidateCreate(const Review& review, const workload::KindInfo& info, const model::PolicySet& p,
                       const broker::WorkloadRegistry& registry, const WebhookOptions& options) {
  workload::ExtractOptions extract_options;
  extract_options.manage_jobs_without_queue_name = options.manage_jobs_without_queue_name;
  extract_options.training_runtime = options.training_runtime;
  absl::StatusOr<Workload> extracted = workload::ExtractWorkload(*review.object, info, p, extract_options);
  if (workload::IsRuntimeUnknown(extracted.status())) {
    // A TrainJob whose runtime is not known (yet): its pods cannot be
    // judged, which is no reason to refuse it. It stays suspended, and the
    // reconciler queues it once the runtime shows.
    Response r = Allow(review);
    r.warnings.push_back(absl::StrCat("gangkeeper: ", review.namespace_name, "/", review.name, ": ",
                                      extracted.status().message()));
    return Decided(std::move(r));
  }
  if (!extracted.ok()) {
    return Decided(Deny(review, 422, "Invalid",
                       absl::StrCat("gangkeeper: ", review.namespace_name, "/", review.name, ": ",
                                    extracted.status().message())));
  }
  Workload w = *std::move(extracted);
  if (w.namespace_name.empty()) w.namespace_name = review.namespace_name;
  w.submitted_by = review.username;
  w.submitter_claimed = !options.reviews_authenticated;
  if (w.name.empty()) w.name = review.name;
  if (w.owned_by_managed_object || w.queue_name.empty()) return Decided(Allow(review));  // not ours

  // 1. LocalQueue and ClusterQueue.
  auto lq = p.local_queues.find({w.namespace_name, w.queue_name});
  if (lq == p.local_queues.end()) {
    std::vector<std::string> there;
    for (const auto& [key, q] : p.local_queues) {
      if (key.first == w.namespace_name) there.push_back(key.second);
    }
    return Decided(Deny(review, 403, "Forbidden",
                       absl::StrCat("gangkeeper: ", ObjectName(w), ": LocalQueue \"", w.queue_name,
                                    "\" does not exist in namespace ", w.namespace_name, " (",
                                    there.empty() ? "it has no LocalQueues; ask your platform team for one"
                                                  : absl::StrCat("its LocalQueues: ", absl::StrJoin(there, ", ")),
                                    "): fix the label ", workload::kQueueNameLabel)));
  }
  auto cq = p.cluster_queues.find(lq->second.cluster_queue);
  if (cq == p.cluster_queues.end()) {
    return Decided(Deny(review, 403, "Forbidden",
                       absl::StrCat("gangkeeper: ", ObjectName(w), ": LocalQueue ", w.queue_name,
                                    " points at ClusterQueue \"", lq->second.cluster_queue,
                                    "\", which does not exist: ask your platform team")));
  }
  const model::ClusterQueue& queue = cq->second;
  if (!queue.namespace_selector.has_value() || !queue.namespace_selector->Matches(p.NamespaceLabels(w.namespace_name))) {
    return Decided(Deny(review, 403, "Forbidden",
                       absl::StrCat("gangkeeper: ", ObjectName(w), ": ClusterQueue ", queue.meta.name,
                                    "'s namespaceSelector does not select namespace ", w.namespace_name,
                                    ", so LocalQueue ", w.queue_name, " cannot use it: ask your platform team")));
  }
  // 2. What can never run.
  if (std::optional<std::string> why = CheckExtendedResources(w)) {
    return Decided(Deny(review, 403, "Forbidden", "gangkeeper: " + *why));
  }
  const QueueFacts& facts = FactsOf(p, queue);
  const std::map<std::string, Demand> demand = DemandOf(w, p, facts);
  // Partial admission: it can never run only if its minimum cannot. (Most
  // workloads have no minimum below their count: no copy for them.)
  std::optional<std::string> never;
  if (LeastPods(w) == w.TotalPods()) {
    never = CheckAgainstQueue(w, p, queue, facts, demand);
  } else {
    const Workload least = LeastOf(w);
    never = CheckAgainstQueue(least, p, queue, facts, DemandOf(least, p, facts));
  }
  if (never.has_value()) return Decided(Deny(review, 403, "Forbidden", "gangkeeper: " + *never));
  if (!w.pod_group_name.empty()) {
    std::optional<broker::WorkloadRecord> group = registry.Find(broker::KeyOf(w));
    if (group.has_value() && group->workload.pod_group_total_count != w.pod_group_total_count) {
      return Decided(Deny(review, 403, "Forbidden",
                         absl::StrCat("gangkeeper: pod ", ObjectName(w), " says pod group ", w.pod_group_name,
                                      " has ", w.pod_group_total_count, " pods (",
                                      workload::kPodGroupTotalCountAnnotation, ") but its other pods say ",
                                      group->workload.pod_group_total_count,
                                      ": give every pod of the group the same total")));
    }
  }
  // 3. Warnings, 4. registration (done by the caller, before it answers).
  Verdict v = Decided(Allow(review));
  v.response.warnings = Warnings(w, p, lq->second, queue, demand, registry.PendingIn(queue.meta.name),
                                 registry.AdmittedUsage(queue.meta.name));
  if (!review.dry_run && Registers(w, registry, options)) {
    v.write.op = RegistryWrite::Op::kRegister;
    v.write.cluster_queue = queue.meta.name;
    v.write.workload = std::move(w);
  }
  return v;
}

Verdict ValidateUpdate(const Review& review, const workload::KindInfo& info, const model::PolicySet& p,
                       const broker::WorkloadRegistry& registry, const WebhookOptions& options) {
  if (review.old_object == nullptr) return Decided(Allow(review));
  workload::ExtractOptions extract_options;
  extract_options.manage_jobs_without_queue_name = options.manage_jobs_without_queue_name;
  extract_options.training_runtime = options.training_runtime;
  absl::StatusOr<Workload> now = workload::ExtractWorkload(*review.object, info, p, extract_options);
  absl::StatusOr<Workload> before = workload::ExtractWorkload(*review.old_object, info, p, extract_options);
  if (!now.ok() || !before.ok()) return Decided(Allow(review));  // not ours to judge; CREATE checked it
  if (now->namespace_name.empty()) now->namespace_name = review.namespace_name;
  now->submitted_by = review.username;
  now->submitter_claimed = !options.reviews_authenticated;
  if (before->namespace_name.empty()) before->namespace_name = review.namespace_name;
  if (before->queue_name.empty() && now->queue_name.empty()) return Decided(Allow(review));
  std::optional<broker::WorkloadRecord> record = registry.Find(broker::KeyOf(*before));
  const bool admitted = record.has_value() && record->state == broker::WorkloadState::kAdmitted;
  const bool is_controller = review.username == options.controller_username;
  if (before->suspended && !now->suspended && !admitted && !is_controller) {
    const std::string state = record.has_value() ? absl::StrCat("it is ", broker::WorkloadStateName(record->state),
                                                                " in ClusterQueue ", record->cluster_queue)
                                                 : std::string("gangkeeper does not know it");
    const std::string hold =
        info.hold.method == workload::HoldMethod::kGate
            ? absl::StrCat("gated (", workload::kSchedulingGate, ")")
            : info.hold.method == workload::HoldMethod::kReplicas
                  ? absl::StrCat("at 0 replicas (the count it asks for is kept in ", workload::kHeldReplicasAnnotation,
                                 ")")
                  : std::string("suspended");
    return Decided(Deny(review, 403, "Forbidden",
                       absl::StrCat("gangkeeper: ", ObjectName(*now), " has not been admitted (", state,
                                    "); leave it ", hold, ": gangkeeper releases the whole gang when it fits")));
  }
  if (admitted && !is_controller) {
    if (before->queue_name != now->queue_name) {
      return Decided(Deny(review, 403, "Forbidden",
                         absl::StrCat("gangkeeper: ", ObjectName(*now), " is admitted; its queue (",
                                      workload::kQueueNameLabel,
                                      ") cannot change while it runs: delete and recreate it, or suspend it first")));
    }
    bool same = before->pod_sets.size() == now->pod_sets.size();
    for (size_t i = 0; same && i < now->pod_sets.size(); ++i) {
      same = before->pod_sets[i].count == now->pod_sets[i].count &&
             before->pod_sets[i].requests == now->pod_sets[i].requests;
    }
    if (!same) {
      return Decided(Deny(review, 403, "Forbidden",
                         absl::StrCat("gangkeeper: ", ObjectName(*now),
                                      " is admitted; its pod sets (counts and requests) cannot change while it "
                                      "holds quota: suspend it first")));
    }
  }
  // A pending workload's new shape: from the review when reviews are
  // trusted; else the reconciler reads it from the stored object.
  Verdict v = Decided(Allow(review));
  if (!admitted && record.has_value() && !review.dry_run && options.trust_reviews) {
    v.write.op = RegistryWrite::Op::kUpdate;
    v.write.workload = *std::move(now);
  }
  return v;
}

}  // namespace

Verdict DecideReview(const Review& review, const model::PolicySet& policies, const broker::WorkloadRegistry& registry,
                     const WebhookOptions& options) {
  const workload::KindInfo* info = workload::FindKind(review.group, review.kind);
  if (info == nullptr) return Decided(Allow(review));
  if (review.operation == "DELETE") {
    const rapidjson::Value* meta = Get(review.old_object, "metadata");
    std::string group = Str(Get(Get(meta, "labels"), workload::kPodGroupNameLabel.data()));
    // Untrusted, a DELETE review says only that someone asked: the watch
    // says when the object is gone (its pods may still run until then).
    Verdict v = Decided(Allow(review));
    if (!review.dry_run && group.empty() && options.trust_reviews) {
      v.write.op = RegistryWrite::Op::kRemove;  // unknown is fine
      v.write.key = broker::WorkloadKey{review.namespace_name,
                                        review.name.empty() ? Str(Get(meta, "name")) : review.name, info->kind, false};
      v.write.uid = Str(Get(meta, "uid"));
    }
    return v;
  }
  if (review.operation == "UPDATE" && review.sub_resource == "status") {
    Verdict v = Decided(Allow(review));
    if (!review.dry_run && options.trust_reviews && review.object != nullptr &&
        workload::IsFinishedObject(*review.object)) {
      const rapidjson::Value* meta = Get(review.object, "metadata");
      std::string group = Str(Get(Get(meta, "labels"), workload::kPodGroupNameLabel.data()));
      // One pod of a group ending does not end the group: the reconciler
      // frees its quota once every pod has ended.
      if (group.empty()) {
        v.write.op = RegistryWrite::Op::kFinish;
        v.write.key = broker::WorkloadKey{review.namespace_name, Str(Get(meta, "name")), info->kind, false};
        v.write.uid = Str(Get(meta, "uid"));
      }
    }
    return v;
  }
  if (review.operation == "CREATE" && review.sub_resource.empty()) {
    return ValidateCreate(review, *info, policies, registry, options);
  }
  if (review.operation == "UPDATE" && review.sub_resource.empty()) {
    return ValidateUpdate(review, *info, policies, registry, options);
  }
  return Decided(Allow(review));
}

Response ConcludeReview(const Review& review, Verdict verdict, const absl::Status& written) {
  if (written.ok()) return std::move(verdict.response);
  switch (verdict.write.op) {
    case RegistryWrite::Op::kRegister:
      return Deny(review, 503, "ServiceUnavailable",
                  absl::StrCat("gangkeeper: could not record ", ObjectName(verdict.write.workload), " (",
                               written.message(), "); retry"));
    case RegistryWrite::Op::kUpdate:
      if (absl::IsNotFound(written)) break;
      return Deny(review, 503, "ServiceUnavailable", absl::StrCat("gangkeeper: ", written.message(), "; retry"));
    case RegistryWrite::Op::kNone:
    case RegistryWrite::Op::kRemove:  // unknown is fine; the watch catches up
    case RegistryWrite::Op::kFinish:
      break;
  }
  return std::move(verdict.response);
}

RegistryWrite TakeWrite(Verdict* verdict) {
  RegistryWrite out = std::move(verdict->write);
  RegistryWrite& left = verdict->write;
  left = RegistryWrite();
  left.op = out.op;
  left.workload.namespace_name = out.workload.namespace_name;  // ObjectName()
  left.workload.name = out.workload.name;
  return out;
}

absl::Status WriteNow(const RegistryWrite& write, broker::WorkloadRegistry& registry) {
  switch (write.op) {
    case RegistryWrite::Op::kNone: return absl::OkStatus();
    case RegistryWrite::Op::kRegister: return registry.Register(write.workload, write.cluster_queue);
    case RegistryWrite::Op::kUpdate: return registry.Update(write.workload);
    case RegistryWrite::Op::kRemove: return registry.Remove(write.key, write.uid);
    case RegistryWrite::Op::kFinish: return registry.Finish(write.key, write.uid);
  }
  return absl::OkStatus();
}

void WriteAsync(RegistryWrite write, broker::WorkloadRegistry& registry, const broker::BlockingRunner& blocking,
                broker::WriteDone done) {
  switch (write.op) {
    case RegistryWrite::Op::kNone: break;
    case RegistryWrite::Op::kRegister:
      registry.RegisterAsync(std::move(write.workload), write.cluster_queue, blocking, std::move(done));
      return;
    case RegistryWrite::Op::kUpdate:
      registry.UpdateAsync(std::move(write.workload), blocking, std::move(done));
      return;
    case RegistryWrite::Op::kRemove: registry.RemoveAsync(write.key, write.uid, blocking, std::move(done)); return;
    case RegistryWrite::Op::kFinish: registry.FinishAsync(write.key, write.uid, blocking, std::move(done)); return;
  }
  done(absl::OkStatus());
}

Response ValidateReview(const Review& review, const model::PolicySet& policies, broker::WorkloadRegistry& registry,
                        const WebhookOptions& options) {
  Verdict v = DecideReview(review, policies, registry, options);
  const absl::Status written = WriteNow(v.write, registry);
  return ConcludeReview(review, std::move(v), written);
}

}  // namespace gangkeeper::admission
