// gangkeeper model: cross-object validation and the capacity check (see
// validate.h).
#include "gangkeeper/model/validate.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/model/extended_resource.h"

namespace gangkeeper::model {
namespace {

using Severity = Diagnostic::Severity;

// `q` as a decimal number of units ("0.5", "2.25"): how a fractional amount
// is usually written. Format()'s "500m" for values out of int64 milli range.
std::string Decimal(quantity::Quantity q) {
  absl::StatusOr<int64_t> milli = q.MilliInt64();
  if (!milli.ok() || *milli < 0) return q.Format();
  std::string fraction = absl::StrFormat("%03d", *milli % 1000);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return fraction.empty() ? absl::StrCat(*milli / 1000) : absl::StrCat(*milli / 1000, ".", fraction);
}

// Extended resources (GPUs, MIG slices, example.com/foo) are counted in whole
// units by Kubernetes: a fractional quota could never be used exactly, and
// the broker would admit against capacity that no pod can request.
void CheckWholeUnits(const ResourceQuota& q, const std::string& qpath, const SourceRef& source,
                     const std::string& object, Diagnostics* d) {
  if (!IsExtendedResource(q.name)) return;
  auto check = [&](const char* field, const std::optional<quantity::Quantity>& value) {
    if (!value.has_value() || value->milli() % 1000 == 0) return;
    const int64_t up = value->CeilUnits();
    d->Add(Severity::kError, source, object, absl::StrCat(qpath, ".", field),
           absl::StrCat(q.name, " is an extended resource and must be a whole number, not \"", Decimal(*value),
                        "\" (use \"", up, "\" or \"", up - 1, "\")"));
  };
  check("nominalQuota", q.nominal);
  check("borrowingLimit", q.borrowing_limit);
  check("lendingLimit", q.lending_limit);
}

// The borrowing and lending limits of one quota: only under a parent
// (`parent_field`), and lending at most the nominal quota when
// `check_lending`.
void CheckLimits(const ResourceQuota& q, const std::string& qpath, const ObjectMeta& meta, const std::string& object,
                 bool has_parent, const char* parent_field, bool check_lending, Diagnostics* d) {
  if (q.borrowing_limit.has_value() && !has_parent) {
    d->Add(Severity::kError, meta.source, object, qpath + ".borrowingLimit",
           absl::StrCat("a borrowingLimit needs ", parent_field, " to be set; set it or remove the limit"));
  }
  if (q.lending_limit.has_value() && !has_parent) {
    d->Add(Severity::kError, meta.source, object, qpath + ".lendingLimit",
           absl::StrCat("a lendingLimit needs ", parent_field, " to be set; set it or remove the limit"));
  }
  if (check_lending && q.lending_limit.has_value() && *q.lending_limit > q.nominal) {
    d->Add(Severity::kError, meta.source, object, qpath + ".lendingLimit",
           absl::StrCat("lendingLimit ", q.lending_limit->Format(), " is above nominalQuota ", q.nominal.Format(),
                        "; a queue can lend at most its nominal quota, so lower it to ", q.nominal.Format(),
                        " or less"));
  }
}

// Checks one object's resource groups: groups and flavors well formed,
// flavors exist, limits allowed.
void CheckResourceGroups(const std::vector<ResourceGroup>& groups, const PolicySet& policies, const ObjectMeta& meta,
                         const std::string& object, bool has_parent, const char* parent_field, bool check_lending,
                         Diagnostics* d) {
  std::map<std::string, size_t> resource_group;  // resource -> first group index
  std::map<std::string, size_t> flavor_group;
  for (size_t g = 0; g < groups.size(); ++g) {
    const ResourceGroup& rg = groups[g];
    const std::string gpath = absl::StrCat("spec.resourceGroups[", g, "]");
    if (rg.covered_resources.empty()) {
      d->Add(Severity::kError, meta.source, object, gpath + ".coveredResources",
             "list the resources this group covers (e.g. [\"cpu\", \"memory\", \"nvidia.com/gpu\"])");
    }
    std::set<std::string> covered;
    for (size_t r = 0; r < rg.covered_resources.size(); ++r) {
      const std::string& res = rg.covered_resources[r];
      const std::string rpath = absl::StrCat(gpath, ".coveredResources[", r, "]");
      if (!covered.insert(res).second) {
        d->Add(Severity::kError, meta.source, object, rpath, absl::StrCat("\"", res, "\" is listed twice; remove one"));
        continue;
      }
      auto [it, inserted] = resource_group.emplace(res, g);
      if (!inserted) {
        d->Add(Severity::kError, meta.source, object, rpath,
               absl::StrCat("\"", res, "\" is already covered by spec.resourceGroups[", it->second,
                            "]; a resource may be in one resource group only, so remove it here or there"));
      }
    }
    for (size_t f = 0; f < rg.flavors.size(); ++f) {
      const FlavorQuotas& fq = rg.flavors[f];
      const std::string fpath = absl::StrCat(gpath, ".flavors[", f, "]");
      if (!fq.name.empty() && policies.flavors.find(fq.name) == policies.flavors.end()) {
        d->Add(Severity::kError, meta.source, object, fpath + ".name",
               absl::StrCat("ResourceFlavor \"", fq.name, "\" does not exist; define it or fix the name"));
      }
      auto [fit, finserted] = flavor_group.emplace(fq.name, g);
      if (!finserted) {
        d->Add(Severity::kError, meta.source, object, fpath + ".name",
               fit->second == g ? absl::StrCat("flavor \"", fq.name, "\" is listed twice in this group; remove one")
                                : absl::StrCat("flavor \"", fq.name, "\" is already used by spec.resourceGroups[",
                                               fit->second, "]; a flavor may be in one resource group only"));
      }
      std::set<std::string> listed;
      for (size_t r = 0; r < fq.resources.size(); ++r) {
        const ResourceQuota& q = fq.resources[r];
        const std::string qpath = absl::StrCat(fpath, ".resources[", r, "]");
        if (!listed.insert(q.name).second) {
          d->Add(Severity::kError, meta.source, object, qpath + ".name",
                 absl::StrCat("\"", q.name, "\" is listed twice; remove one"));
        } else if (covered.count(q.name) == 0) {
          d->Add(Severity::kError, meta.source, object, qpath + ".name",
                 absl::StrCat("\"", q.name, "\" is not in this group's coveredResources [",
                              absl::StrJoin(rg.covered_resources, ", "), "]; add it there or remove it here"));
        }
        CheckWholeUnits(q, qpath, meta.source, object, d);
        CheckLimits(q, qpath, meta, object, has_parent, parent_field, check_lending, d);
      }
      std::vector<std::string> missing;
      for (const std::string& c : rg.covered_resources) {
        if (listed.count(c) == 0) missing.push_back(c);
      }
      if (!missing.empty()) {
        d->Add(Severity::kError, meta.source, object, fpath + ".resources",
               absl::StrCat("flavor \"", fq.name, "\" has no quota for ", absl::StrJoin(missing, ", "),
                            "; every flavor of a group must list each covered resource (use nominalQuota: 0 to give "
                            "none)"));
      }
    }
  }
}

void CheckCohortCycles(const PolicySet& policies, Diagnostics* d) {
  std::set<std::string> reported;
  for (const auto& [name, cohort] : policies.cohorts) {
    std::vector<std::string> chain = {name};
    std::set<std::string> seen = {name};
    std::string cur = cohort.parent;
    while (!cur.empty()) {
      if (seen.count(cur) != 0) {
        if (cur == name && reported.count(name) == 0) {
          chain.push_back(cur);
          for (const std::string& c : chain) reported.insert(c);
          d->Add(Severity::kError, cohort.meta.source, absl::StrCat("Cohort ", name), "spec.parentName",
                 absl::StrCat("cohort cycle ", absl::StrJoin(chain, " -> "),
                              "; every member is disabled while it lasts, so remove one parentName"));
        }
        break;
      }
      seen.insert(cur);
      chain.push_back(cur);
      auto it = policies.cohorts.find(cur);
      if (it == policies.cohorts.end()) break;  // an implicit root cohort
      cur = it->second.parent;
    }
  }
}

// Sums nominal quota per (flavor, resource) over ClusterQueues and Cohorts
// and compares it with what the flavor's GPU node pools advertise.
void CheckCapacity(const PolicySet& policies, Diagnostics* d) {
  std::map<std::string, std::map<std::string, int64_t>> advertised;  // flavor -> resource -> count
  std::map<std::string, std::vector<std::string>> pools_of;
  for (const auto& [name, pool] : policies.gpu_node_pools) {
    absl::StatusOr<AdvertisedResources> adv = Advertise(pool);
    if (!adv.ok()) continue;  // reported by the pool check
    pools_of[pool.flavor].push_back(name);
    for (const auto& [res, count] : adv->total) advertised[pool.flavor][res] += count;
  }
  auto is_gpu = [](const std::string& r) { return r == "nvidia.com/gpu" || absl::StartsWith(r, "nvidia.com/mig-"); };
  std::map<std::pair<std::string, std::string>, std::pair<quantity::Quantity, std::vector<std::string>>> nominal;
  auto add = [&](const std::vector<ResourceGroup>& groups, const std::string& who, const SourceRef& source) {
    for (const ResourceGroup& rg : groups) {
      for (const FlavorQuotas& fq : rg.flavors) {
        auto pools = pools_of.find(fq.name);
        if (pools == pools_of.end()) continue;  // no pool describes this flavor: capacity unknown
        for (const ResourceQuota& q : fq.resources) {
          if (!is_gpu(q.name) || q.nominal.IsZero()) continue;
          auto& [sum, owners] = nominal[{fq.name, q.name}];
          sum = sum.SaturatingAdd(q.nominal);
          owners.push_back(who);
          if (advertised[fq.name].count(q.name) == 0) {
            d->Add(Severity::kWarning, source, who, "",
                   absl::StrCat("has ", q.nominal.Format(), " ", q.name, " in flavor ", fq.name,
                                " but no GPUNodePool of that flavor advertises ", q.name, " (",
                                absl::StrJoin(pools->second, ", "), " advertise ",
                                absl::StrJoin(advertised[fq.name], ", ",
                                              [](std::string* out, const auto& kv) {
                                                absl::StrAppend(out, kv.second, " ", kv.first);
                                              }),
                                "); workloads asking for it will wait forever: fix the quota or the pool's "
                                "migProfiles"));
          }
        }
      }
    }
  };
  for (const auto& [name, cq] : policies.cluster_queues) add(cq.resource_groups, "ClusterQueue " + name, cq.meta.source);
  for (const auto& [name, co] : policies.cohorts) add(co.resource_groups, "Cohort " + name, co.meta.source);
  for (const auto& [key, value] : nominal) {
    const auto& [flavor, resource] = key;
    const auto& [sum, owners] = value;
    auto it = advertised[flavor].find(resource);
    if (it == advertised[flavor].end()) continue;  // reported above
    const quantity::Quantity capacity = quantity::Quantity::FromUnits(it->second);
    if (sum > capacity) {
      d->Add(Severity::kWarning, SourceRef{}, absl::StrCat("ResourceFlavor ", flavor), "",
             absl::StrCat("nominal quota for ", resource, " adds up to ", sum.Format(), " (",
                          absl::StrJoin(owners, ", "), ") but the GPUNodePools of this flavor (",
                          absl::StrJoin(pools_of[flavor], ", "), ") advertise ", it->second,
                          "; quota above capacity is over-committed and admitted gangs may not all find nodes"));
    }
  }
}

}  // namespace

void ValidatePolicySet(const PolicySet& policies, Diagnostics* d) {
  for (const auto& [name, cq] : policies.cluster_queues) {
    const std::string object = "ClusterQueue " + name;
    CheckResourceGroups(cq.resource_groups, policies, cq.meta, object, !cq.cohort.empty(),
                        cq.meta.api_version == "kueue.x-k8s.io/v1beta1" ? "spec.cohort" : "spec.cohortName",
                        /*check_lending=*/true, d);
    if (!cq.namespace_selector.has_value()) {
      d->Add(Severity::kWarning, cq.meta.source, object, "spec.namespaceSelector",
             "not set, so no namespace can use this ClusterQueue; use {} to match all namespaces");
    }
  }
  for (const auto& [name, co] : policies.cohorts) {
    CheckResourceGroups(co.resource_groups, policies, co.meta, "Cohort " + name, !co.parent.empty(),
                        "spec.parentName", /*check_lending=*/false, d);
  }
  CheckCohortCycles(policies, d);
  for (const auto& [key, lq] : policies.local_queues) {
    if (policies.cluster_queues.find(lq.cluster_queue) == policies.cluster_queues.end()) {
      d->Add(Severity::kError, lq.meta.source, absl::StrCat("LocalQueue ", key.first, "/", key.second),
             "spec.clusterQueue",
             absl::StrCat("ClusterQueue \"", lq.cluster_queue, "\" does not exist; define it or fix the name"));
    }
  }
  std::vector<std::string> defaults;
  for (const auto& [name, pc] : policies.priority_classes) {
    if (pc.global_default) defaults.push_back(name);
    auto wpc = policies.workload_priority_classes.find(name);
    if (wpc != policies.workload_priority_classes.end() && wpc->second.value != pc.value) {
      d->Add(Severity::kWarning, wpc->second.meta.source, "WorkloadPriorityClass " + name, "value",
             absl::StrCat(wpc->second.value, " differs from PriorityClass ", name, " (", pc.value,
                          "); queue order and pod preemption would disagree, so use the same value"));
    }
  }
  if (defaults.size() > 1) {
    d->Add(Severity::kError, policies.priority_classes.at(defaults[1]).meta.source, "PriorityClass " + defaults[1],
           "globalDefault",
           absl::StrCat("several PriorityClasses are globalDefault (", absl::StrJoin(defaults, ", "),
                        "); Kubernetes allows one, so keep globalDefault on one of them"));
  }
  for (const auto& [name, pool] : policies.gpu_node_pools) {
    auto src = policies.gpu_node_pool_sources.find(name);
    const SourceRef source = src != policies.gpu_node_pool_sources.end() ? src->second : SourceRef{};
    base::FieldErrors errors;
    ValidateGpuNodePool(pool, base::FieldPath("spec"), &errors);
    for (const base::FieldError& e : errors.errors()) {
      d->Add(Severity::kError, source, "GPUNodePool " + name, e.path, e.detail);
    }
    if (!pool.flavor.empty() && policies.flavors.find(pool.flavor) == policies.flavors.end()) {
      d->Add(Severity::kError, source, "GPUNodePool " + name, "spec.flavor",
             absl::StrCat("ResourceFlavor \"", pool.flavor, "\" does not exist; define it or fix the name"));
    }
  }
  CheckCapacity(policies, d);
}

}  // namespace gangkeeper::model
