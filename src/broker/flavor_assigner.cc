// gangkeeper broker: flavor assignment (KUEUE-SEMANTICS.md §3.5).
//
// Pod sets are placed in order; quota taken by earlier pod sets counts
// against later ones. For each resource group a pod set uses, the flavors
// are tried in the order the ClusterQueue lists them: a flavor whose taints
// the pod set does not tolerate, or whose node labels contradict its node
// selector, is skipped; otherwise every resource of the group is checked
// against Available (fit), the maximum capacity (no fit ever) and the
// preemption oracle (preempt / reclaim / no candidates). flavorFungibility
// decides whether to stop at a flavor that borrows or needs preemption.
// The gang's mode is the worst of its pod sets: one pod set that cannot be
// placed leaves the whole workload unplaced.
//
// Deliberate difference: Kueue resumes the flavor scan where the previous
// cycle stopped (FlavorFungibilityPreserveScanProgress); gangkeeper scans
// from the first flavor every time it tries a workload, because it only
// retries after something changed, and the first flavor is the preferred one.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

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

}  // namespace

std::map<model::ResourceName, Quantity> PodSetTotals(const workload::PodSet& ps,
                                                     const model::ClusterQueue& cq) {
  std::map<model::ResourceName, Quantity> totals;
  for (const auto& [res, per_pod] : ps.requests) {
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

AssignmentResult Scheduler::State::AssignFlavors(const Entry& e,
                                                 const model::ClusterQueue& cq) const {
  AssignmentResult out;
  out.mode = FitMode::kFit;
  out.assignment.cluster_queue = cq.meta.name;
  const int cq_node = tree.ClusterQueueNode(cq.meta.name);
  ResourceAmounts assumed;  // quota taken by the earlier pod sets
  std::vector<Target> last_targets;

  auto fail = [&out](PendingReason reason) {
    out.mode = FitMode::kNoFit;
    out.reason = std::move(reason);
    out.need_preemption.clear();
    return out;
  };

  for (const workload::PodSet& ps : e.PodSets()) {
    PodSetAssignment psa;
    psa.name = ps.name;
    psa.count = ps.count;
    const std::map<model::ResourceName, Quantity> totals = PodSetTotals(ps, cq);
    // Requested resources by the resource group that covers them.
    std::map<size_t, std::vector<model::ResourceName>> by_group;
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
          by_group[g].push_back(res);
          found = true;
        }
      }
      if (!found) {
        PendingReason r;
        r.code = PendingReason::Code::kNoMatchingFlavor;
        r.pod_set = ps.name;
        r.resource = res;
        r.requested = total;
        r.message = absl::StrCat("resource ", res, " unavailable in ClusterQueue ", cq.meta.name,
                                 " (pod set ", ps.name, " requests ", total.Format(),
                                 "): no resource group covers it");
        return fail(std::move(r));
      }
    }

    for (const auto& [g, resources] : by_group) {
      const model::ResourceGroup& group = cq.resource_groups[g];
      struct Candidate {
        FitMode mode = FitMode::kNoFit;
        int borrow = 0;
        const model::FlavorQuotas* flavor = nullptr;
        std::set<FlavorResource> need_preemption;
        std::vector<Target> targets;  // the oracle's, for need_preemption's one FlavorResource
        PendingReason reason;
      };
      Candidate best;
      bool have_best = false;
      PendingReason group_reason;  // the least severe failure over flavors
      bool have_reason = false;
      std::vector<std::string> mismatches;
      std::vector<std::string> notes;  // why each flavor tried could not take it
      for (const model::FlavorQuotas& fq : group.flavors) {
        Candidate c;
        c.flavor = &fq;
        c.mode = FitMode::kFit;
        auto flavor = policies->flavors.find(fq.name);
        std::string mismatch =
            flavor == policies->flavors.end()
                ? absl::StrCat("ResourceFlavor ", fq.name, " does not exist")
                : FlavorMismatch(flavor->second, ps);
        if (!mismatch.empty()) {
          c.mode = FitMode::kNoFit;
          c.reason.code = PendingReason::Code::kNoMatchingFlavor;
          c.reason.pod_set = ps.name;
          c.reason.flavor = fq.name;
          mismatches.push_back(mismatch);
          if (group.flavors.size() > 1) notes.push_back(mismatch);
        } else {
          for (const model::ResourceName& res : resources) {
            FlavorResource fr{fq.name, res};
            Quantity val = totals.at(res);
            if (auto a = assumed.find(fr); a != assumed.end()) val = val.SaturatingAdd(a->second);
            const Quantity max = tree.PotentialAvailable(cq_node, fr);
            const Quantity avail = tree.Available(cq_node, fr);
            if (val <= avail && val <= max) {
              c.borrow = std::max(c.borrow, tree.BorrowingHeight(cq_node, fr, val));
              continue;  // fits: nothing to explain
            }
            PendingReason r;
            r.pod_set = ps.name;
            r.flavor = fq.name;
            r.resource = res;
            r.requested = val;
            r.available = avail;
            r.max_capacity = max;
            r.nominal = tree.QuotaAt(cq_node, fr).nominal;
            r.used = tree.UsageAt(cq_node, fr);
            r.borrowing_limit = tree.QuotaAt(cq_node, fr).borrowing_limit;
            FitMode m;
            if (val > max) {
              m = FitMode::kNoFit;
              r.code = PendingReason::Code::kExceedsMaxQuota;
            } else {  // val > avail: a fit was handled above
              r.code = PendingReason::Code::kWaitingForQuota;
              m = FitMode::kNoFit;
              // Kueue considers preemption only when it can make room: the
              // request fits in the nominal quota, or in a subtree below the
              // root, or borrowing while preempting is allowed, or fair
              // sharing may reclaim.
              bool may_preempt =
                  r.nominal >= val ||
                  cq.preemption.borrow_within_cohort != model::BorrowWithinCohortPolicy::kNever ||
                  (FairSharingFor(cq.meta.name) &&
                   cq.preemption.reclaim_within_cohort != model::ReclaimWithinCohortPolicy::kNever);
              for (int n = cq_node >= 0 ? tree.Parent(cq_node) : -1; !may_preempt && n != -1 && tree.Parent(n) != -1;
                   n = tree.Parent(n)) {
                may_preempt = tree.SubtreeQuotaAt(n, fr) >= val;
              }
              if (may_preempt) {
                bool only_other_queues = false;
                // The oracle mutates the tree while searching and restores it.
                auto* self = const_cast<Scheduler::State*>(this);
                if (self->CanPreemptFor(e, cq, fr, val, &only_other_queues, &c.targets)) {
                  m = only_other_queues ? FitMode::kReclaim : FitMode::kPreempt;
                  c.need_preemption.insert(fr);
                  if (r.nominal < val) c.borrow = std::max(c.borrow, tree.BorrowingHeight(cq_node, fr, val));
                } else {
                  m = FitMode::kNoCandidates;
                  r.code = PendingReason::Code::kPreemptionNoCandidates;
                }
              }
            }
            if (m < c.mode) {
              c.mode = m;
              c.reason = r;
            } else if (m != FitMode::kFit && c.reason.resource.empty()) {
              c.reason = r;
            }
            if (c.mode == FitMode::kNoFit) break;
          }
        }
        if (c.mode != FitMode::kFit && mismatch.empty() && !c.reason.resource.empty() && group.flavors.size() > 1) {
          const PendingReason& r = c.reason;
          absl::StatusOr<Quantity> more = r.requested.Sub(r.available);
          if (r.code == PendingReason::Code::kExceedsMaxQuota) {
            notes.push_back(absl::StrCat("flavor ", fq.name, ": ", r.requested.Format(), " ", r.resource,
                                         " exceeds what it can ever provide (", r.max_capacity.Format(), ")"));
          } else if (c.mode == FitMode::kPreempt || c.mode == FitMode::kReclaim) {
            notes.push_back(absl::StrCat("flavor ", fq.name, ": ", more.ok() ? more->Format() : r.requested.Format(),
                                         " more ", r.resource, " needed; fits by preempting"));
          } else {
            notes.push_back(absl::StrCat("flavor ", fq.name, ": insufficient unused quota for ", r.resource, ", ",
                                         more.ok() ? more->Format() : r.requested.Format(), " more needed",
                                         c.mode == FitMode::kNoCandidates ? " and nothing it may preempt" : ""));
          }
        }
        if (c.mode != FitMode::kFit) {
          if (!have_reason || Severity(c.reason.code) < Severity(group_reason.code) ||
              (c.mode == FitMode::kNoCandidates && group_reason.code != PendingReason::Code::kPreemptionNoCandidates &&
               Severity(c.reason.code) <= Severity(group_reason.code))) {
            group_reason = c.reason;
            have_reason = true;
          }
        }
        const bool try_next = TryNextFlavor(c.mode, c.borrow, cq.flavor_fungibility);
        if (!have_best || Preferred(c.mode, c.borrow, best.mode, best.borrow, cq.flavor_fungibility.preference)) {
          best = std::move(c);
          have_best = true;
        }
        if (!try_next) break;
      }
      if (!have_best || best.mode == FitMode::kNoFit || best.mode == FitMode::kNoCandidates) {
        PendingReason r = have_reason ? group_reason : best.reason;
        if (r.code == PendingReason::Code::kNoMatchingFlavor) {
          r.message = absl::StrCat("no flavor of ClusterQueue ", cq.meta.name, " can host pod set ",
                                   ps.name, ": ", absl::StrJoin(mismatches, "; "));
        }
        // Each flavor's own reason, as Kueue states them, when there were
        // several.
        if (group.flavors.size() > 1) r.flavors = notes;
        if (have_best && best.mode == FitMode::kNoCandidates) {
          out.mode = FitMode::kNoCandidates;
          out.reason = best.reason;
          if (group.flavors.size() > 1) out.reason.flavors = notes;
          out.need_preemption.clear();
          return out;
        }
        return fail(std::move(r));
      }
      for (const model::ResourceName& res : resources) {
        FlavorResource fr{best.flavor->name, res};
        const Quantity total = totals.at(res);
        psa.flavors[res] = best.flavor->name;
        psa.usage[res] = total;
        if (!total.IsZero()) assumed[fr] = assumed[fr].SaturatingAdd(total);
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
  out.assignment.usage = std::move(assumed);
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
