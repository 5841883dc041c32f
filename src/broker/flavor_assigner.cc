// gangkeeper broker: FlavorAssigner (see flavor_assigner.h),
// KUEUE-SEMANTICS.md §3.5.
//
// Deliberate difference: Kueue resumes the flavor scan where the previous
// cycle stopped (FlavorFungibilityPreserveScanProgress); gangkeeper scans
// from the first flavor every time it tries a workload, because it only
// retries after something changed, and the first flavor is the preferred one.
#include "src/broker/flavor_assigner.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;
using Totals = std::map<model::ResourceName, Quantity>;

bool Tolerates(const model::Toleration& t, const model::Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (t.key.empty()) return t.op == "Exists";
  if (t.key != taint.key) return false;
  return t.op == "Exists" || t.value == taint.value;
}

// Why `flavor` cannot host pod set `ps`, or "" when it can.
std::string FlavorMismatch(const model::ResourceFlavor& flavor, const workload::PodSet& ps) {
  for (const model::Taint& taint : flavor.node_taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    bool ok = false;
    for (const model::Toleration& t : ps.tolerations) ok = ok || Tolerates(t, taint);
    for (const model::Toleration& t : flavor.tolerations) ok = ok || Tolerates(t, taint);
    if (!ok) {
      return absl::StrCat("flavor ", flavor.meta.name, " has taint ", taint.key,
                          taint.value.empty() ? "" : "=", taint.value, ":", taint.effect,
                          " that pod set ", ps.name, " does not tolerate");
    }
  }
  for (const auto& [key, value] : ps.node_selector) {
    auto it = flavor.node_labels.find(key);
    if (it != flavor.node_labels.end() && it->second != value) {
      return absl::StrCat("flavor ", flavor.meta.name, " has node label ", key, "=", it->second,
                          " but pod set ", ps.name, " selects ", key, "=", value);
    }
  }
  return "";
}

// Kueue's isPreferred: is (a_mode, a_borrow) better than (b_mode, b_borrow)?
bool Preferred(FitMode a, int a_borrow, FitMode b, int b_borrow,
               model::FungibilityPreference pref) {
  if (a == FitMode::kNoFit) return false;
  if (b == FitMode::kNoFit) return true;
  if (a == FitMode::kNoCandidates) return false;
  if (b == FitMode::kNoCandidates) return true;
  if (pref == model::FungibilityPreference::kPreemptionOverBorrowing) {
    if (a_borrow != b_borrow) return a_borrow < b_borrow;
    return a > b;
  }
  if (a != b) return a > b;
  return a_borrow < b_borrow;
}

bool TryNextFlavor(FitMode mode, int borrow, const model::FlavorFungibility& f) {
  if (mode == FitMode::kNoFit || mode == FitMode::kNoCandidates) return true;
  if ((mode == FitMode::kPreempt || mode == FitMode::kReclaim) &&
      f.when_can_preempt == model::FungibilityPolicy::kTryNextFlavor) {
    return true;
  }
  return borrow > 0 && f.when_can_borrow == model::FungibilityPolicy::kTryNextFlavor;
}

int Severity(PendingReason::Code c) {
  switch (c) {
    case PendingReason::Code::kNoMatchingFlavor: return 3;
    case PendingReason::Code::kExceedsMaxQuota: return 2;
    case PendingReason::Code::kWaitingForQuota: return 1;
    default: return 0;
  }
}

// One flavor's answer for one resource group of a pod set.
struct Candidate {
  FitMode mode = FitMode::kNoFit;
  int borrow = 0;
  const model::FlavorQuotas* flavor = nullptr;
  std::set<FlavorResource> need_preemption;
  std::vector<Target> targets;  // the oracle's, for need_preemption's one FlavorResource
  PendingReason reason;
};

// What one Assign call carries from pod set to pod set.
struct Scan {
  const ResourceTree& tree;
  const std::map<std::string, model::ResourceFlavor>& flavors;
  const model::ClusterQueue& cq;
  const int cq_node;
  const bool fair_sharing;
  PreemptionOracle oracle;
  ResourceAmounts assumed;  // quota taken by the earlier pod sets
};

// The resources pod set `ps` requests, by the index of the resource group
// that covers each. False, with the reason, when one is covered by none.
bool GroupResources(const workload::PodSet& ps, const model::ClusterQueue& cq, const Totals& totals,
                    std::map<size_t, std::vector<model::ResourceName>>* by_group, PendingReason* reason) {
  for (const auto& [res, total] : totals) {
    // A resource the pods do not request needs no flavor (Kueue #8079);
    // one they do request gets a flavor even when the pod set has no pods
    // (count 0: nothing to hold, but the placement is decided).
    auto per_pod = ps.requests.find(res);
    const bool requested = res == "pods" || (per_pod != ps.requests.end() && !per_pod->second.IsZero());
    if (total.IsZero() && !requested) continue;
    bool found = false;
    for (size_t g = 0; g < cq.resource_groups.size() && !found; ++g) {
      const auto& covered = cq.resource_groups[g].covered_resources;
      if (std::find(covered.begin(), covered.end(), res) != covered.end()) {
        (*by_group)[g].push_back(res);
        found = true;
      }
    }
    if (!found) {
      reason->code = PendingReason::Code::kNoMatchingFlavor;
      reason->pod_set = ps.name;
      reason->resource = res;
      reason->requested = total;
      reason->message = absl::StrCat("resource ", res, " unavailable in ClusterQueue ", cq.meta.name,
                                     " (pod set ", ps.name, " requests ", total.Format(),
                                     "): no resource group covers it");
      return false;
    }
  }
  return true;
}

// Kueue considers preemption only when it can make room: the request fits
// in the nominal quota, or in a subtree below the root, or borrowing while
// preempting is allowed, or fair sharing may reclaim.
bool MayPreempt(const Scan& scan, const FlavorResource& fr, Quantity nominal, Quantity val) {
  const model::ClusterQueuePreemption& p = scan.cq.preemption;
  bool may_preempt = nominal >= val || p.borrow_within_cohort != model::BorrowWithinCohortPolicy::kNever ||
                     (scan.fair_sharing && p.reclaim_within_cohort != model::ReclaimWithinCohortPolicy::kNever);
  const ResourceTree& tree = scan.tree;
  for (int n = scan.cq_node >= 0 ? tree.Parent(scan.cq_node) : -1; !may_preempt && n != -1 && tree.Parent(n) != -1;
       n = tree.Parent(n)) {
    may_preempt = tree.SubtreeQuotaAt(n, fr) >= val;
  }
  return may_preempt;
}

// Checks `fr` of candidate `c` for `val` (the pod set's total plus what the
// earlier pod sets took): a fit raises its borrowing level; otherwise its
// mode and reason take the worst of their own and this resource's. False
// once the flavor cannot take the pod set at all (no fit).
bool CheckResource(Scan& scan, const workload::PodSet& ps, const FlavorResource& fr, Quantity val, Candidate* c) {
  const ResourceTree& tree = scan.tree;
  const int cq_node = scan.cq_node;
  const Quantity max = tree.PotentialAvailable(cq_node, fr);
  const Quantity avail = tree.Available(cq_node, fr);
  if (val <= avail && val <= max) {
    c->borrow = std::max(c->borrow, tree.BorrowingHeight(cq_node, fr, val));
    return true;  // fits: nothing to explain
  }
  PendingReason r;
  r.pod_set = ps.name;
  r.flavor = fr.flavor;
  r.resource = fr.resource;
  r.requested = val;
  r.available = avail;
  r.max_capacity = max;
  r.nominal = tree.QuotaAt(cq_node, fr).nominal;
  r.used = tree.UsageAt(cq_node, fr);
  r.borrowing_limit = tree.QuotaAt(cq_node, fr).borrowing_limit;
  FitMode m = FitMode::kNoFit;
  if (val > max) {
    r.code = PendingReason::Code::kExceedsMaxQuota;
  } else {  // val > avail: a fit was handled above
    r.code = PendingReason::Code::kWaitingForQuota;
    if (MayPreempt(scan, fr, r.nominal, val)) {
      bool only_other_queues = false;
      if (scan.oracle(fr, val, &only_other_queues, &c->targets)) {
        m = only_other_queues ? FitMode::kReclaim : FitMode::kPreempt;
        c->need_preemption.insert(fr);
        if (r.nominal < val) c->borrow = std::max(c->borrow, tree.BorrowingHeight(cq_node, fr, val));
      } else {
        m = FitMode::kNoCandidates;
        r.code = PendingReason::Code::kPreemptionNoCandidates;
      }
    }
  }
  if (m < c->mode) {
    c->mode = m;
    c->reason = r;
  } else if (m != FitMode::kFit && c->reason.resource.empty()) {
    c->reason = r;
  }
  return c->mode != FitMode::kNoFit;
}

// Flavor `fq` for the resources `resources` of pod set `ps`; `mismatch`
// gets why the flavor cannot host the pod set at all ("" when it can).
Candidate TryFlavor(Scan& scan, const workload::PodSet& ps, const model::FlavorQuotas& fq,
                    const std::vector<model::ResourceName>& resources, const Totals& totals, std::string* mismatch) {
  Candidate c;
  c.flavor = &fq;
  c.mode = FitMode::kFit;
  auto flavor = scan.flavors.find(fq.name);
  *mismatch = flavor == scan.flavors.end() ? absl::StrCat("ResourceFlavor ", fq.name, " does not exist")
                                           : FlavorMismatch(flavor->second, ps);
  if (!mismatch->empty()) {
    c.mode = FitMode::kNoFit;
    c.reason.code = PendingReason::Code::kNoMatchingFlavor;
    c.reason.pod_set = ps.name;
    c.reason.flavor = fq.name;
    return c;
  }
  for (const model::ResourceName& res : resources) {
    FlavorResource fr{fq.name, res};
    Quantity val = totals.at(res);
    if (auto a = scan.assumed.find(fr); a != scan.assumed.end()) val = val.SaturatingAdd(a->second);
    if (!CheckResource(scan, ps, fr, val, &c)) break;
  }
  return c;
}

// Why flavor `c` could not take the pod set, in the words Kueue uses per
// flavor.
std::string FlavorNote(const Candidate& c) {
  const PendingReason& r = c.reason;
  const std::string& flavor = c.flavor->name;
  absl::StatusOr<Quantity> more = r.requested.Sub(r.available);
  if (r.code == PendingReason::Code::kExceedsMaxQuota) {
    return absl::StrCat("flavor ", flavor, ": ", r.requested.Format(), " ", r.resource,
                        " exceeds what it can ever provide (", r.max_capacity.Format(), ")");
  }
  if (c.mode == FitMode::kPreempt || c.mode == FitMode::kReclaim) {
    return absl::StrCat("flavor ", flavor, ": ", more.ok() ? more->Format() : r.requested.Format(), " more ",
                        r.resource, " needed; fits by preempting");
  }
  return absl::StrCat("flavor ", flavor, ": insufficient unused quota for ", r.resource, ", ",
                      more.ok() ? more->Format() : r.requested.Format(), " more needed",
                      c.mode == FitMode::kNoCandidates ? " and nothing it may preempt" : "");
}

// The scan over one resource group's flavors for one pod set.
struct GroupScan {
  Candidate best;
  bool have_best = false;
  PendingReason group_reason;  // the least severe failure over flavors
  bool have_reason = false;
  std::vector<std::string> mismatches;
  std::vector<std::string> notes;  // why each flavor tried could not take it
};

// Tries the flavors of `group` in order until flavorFungibility says stop;
// the best one tried wins (ties keep the earlier).
GroupScan ScanFlavors(Scan& scan, const workload::PodSet& ps, const model::ResourceGroup& group,
                      const std::vector<model::ResourceName>& resources, const Totals& totals) {
  GroupScan g;
  for (const model::FlavorQuotas& fq : group.flavors) {
    std::string mismatch;
    Candidate c = TryFlavor(scan, ps, fq, resources, totals, &mismatch);
    if (!mismatch.empty()) {
      g.mismatches.push_back(mismatch);
      if (group.flavors.size() > 1) g.notes.push_back(mismatch);
    }
    if (c.mode != FitMode::kFit && mismatch.empty() && !c.reason.resource.empty() && group.flavors.size() > 1) {
      g.notes.push_back(FlavorNote(c));
    }
    if (c.mode != FitMode::kFit) {
      if (!g.have_reason || Severity(c.reason.code) < Severity(g.group_reason.code) ||
          (c.mode == FitMode::kNoCandidates && g.group_reason.code != PendingReason::Code::kPreemptionNoCandidates &&
           Severity(c.reason.code) <= Severity(g.group_reason.code))) {
        g.group_reason = c.reason;
        g.have_reason = true;
      }
    }
    const bool try_next = TryNextFlavor(c.mode, c.borrow, scan.cq.flavor_fungibility);
    if (!g.have_best ||
        Preferred(c.mode, c.borrow, g.best.mode, g.best.borrow, scan.cq.flavor_fungibility.preference)) {
      g.best = std::move(c);
      g.have_best = true;
    }
    if (!try_next) break;
  }
  return g;
}

// Fills `out` for a gang one of whose pod sets no flavor of `group` can
// take now: no candidates (preemption would be needed but finds nobody) or
// no fit, with the reason.
void FailGroup(const GroupScan& g, const workload::PodSet& ps, const model::ResourceGroup& group,
               const model::ClusterQueue& cq, AssignmentResult* out) {
  out->need_preemption.clear();
  if (g.have_best && g.best.mode == FitMode::kNoCandidates) {
    out->mode = FitMode::kNoCandidates;
    out->reason = g.best.reason;
    if (group.flavors.size() > 1) out->flavors_tried = g.notes;
    return;
  }
  PendingReason r = g.have_reason ? g.group_reason : g.best.reason;
  if (r.code == PendingReason::Code::kNoMatchingFlavor) {
    r.message = absl::StrCat("no flavor of ClusterQueue ", cq.meta.name, " can host pod set ", ps.name, ": ",
                             absl::StrJoin(g.mismatches, "; "));
  }
  // Each flavor's own reason, as Kueue states them, when there were several.
  if (group.flavors.size() > 1) out->flavors_tried = g.notes;
  out->mode = FitMode::kNoFit;
  out->reason = std::move(r);
}

}  // namespace

std::map<model::ResourceName, Quantity> PodSetTotals(const workload::PodSet& ps, const model::ClusterQueue& cq,
                                                     const model::KueueConfiguration& config) {
  std::map<model::ResourceName, Quantity> totals;
  std::map<model::ResourceName, Quantity> transformed;
  for (const auto& [res, per_pod] : model::QuotaRequestsOf(config, ps.requests, &transformed)) {
    absl::StatusOr<Quantity> total = per_pod.MultiplyBy(ps.count);
    totals[res] = total.ok() ? *total : Quantity::Max();
  }
  for (const model::ResourceGroup& rg : cq.resource_groups) {
    for (const model::ResourceName& r : rg.covered_resources) {
      if (r == "pods") totals["pods"] = Quantity::FromUnits(ps.count);
    }
  }
  return totals;
}

AssignmentResult FlavorAssigner::Assign(const std::vector<workload::PodSet>& pod_sets,
                                        const model::ClusterQueue& cq, bool fair_sharing,
                                        PreemptionOracle oracle) const {
  AssignmentResult out;
  out.mode = FitMode::kFit;
  out.assignment.cluster_queue = cq.meta.name;
  Scan scan{tree_, flavors_, cq, tree_.ClusterQueueNode(cq.meta.name), fair_sharing, oracle, {}};
  std::vector<Target> last_targets;
  for (const workload::PodSet& ps : pod_sets) {
    PodSetAssignment psa;
    psa.name = ps.name;
    psa.count = ps.count;
    const Totals totals = PodSetTotals(ps, cq, config_);
    std::map<size_t, std::vector<model::ResourceName>> by_group;
    if (PendingReason r; !GroupResources(ps, cq, totals, &by_group, &r)) {
      out.mode = FitMode::kNoFit;
      out.reason = std::move(r);
      out.need_preemption.clear();
      return out;
    }
    for (const auto& [g, resources] : by_group) {
      const model::ResourceGroup& group = cq.resource_groups[g];
      GroupScan chosen = ScanFlavors(scan, ps, group, resources, totals);
      Candidate& best = chosen.best;
      if (!chosen.have_best || best.mode == FitMode::kNoFit || best.mode == FitMode::kNoCandidates) {
        FailGroup(chosen, ps, group, cq, &out);
        return out;
      }
      for (const model::ResourceName& res : resources) {
        FlavorResource fr{best.flavor->name, res};
        const Quantity total = totals.at(res);
        psa.flavors[res] = best.flavor->name;
        psa.usage[res] = total;
        if (!total.IsZero()) scan.assumed[fr] = scan.assumed[fr].SaturatingAdd(total);
      }
      if (best.mode < out.mode) {
        out.mode = best.mode;
        out.reason = best.reason;
      }
      out.need_preemption.insert(best.need_preemption.begin(), best.need_preemption.end());
      if (best.need_preemption.size() == 1) last_targets = std::move(best.targets);
      out.assignment.borrowing_level = std::max(out.assignment.borrowing_level, best.borrow);
    }
    out.assignment.pod_sets.push_back(std::move(psa));
  }
  out.assignment.usage = std::move(scan.assumed);
  if (out.mode == FitMode::kFit) out.need_preemption.clear();
  // The oracle already ran FindTargets' search when the gang's usage is
  // exactly the one FlavorResource it searched for.
  if ((out.mode == FitMode::kPreempt || out.mode == FitMode::kReclaim) && out.need_preemption.size() == 1 &&
      out.assignment.usage.size() == 1 && out.assignment.usage.begin()->first == *out.need_preemption.begin() &&
      !last_targets.empty()) {
    out.targets = std::move(last_targets);
  }
  return out;
}

}  // namespace gangkeeper::broker
