// gangkeeper tests: QuotaWorld (see quota_world.h).
#include "test/broker/quota_world.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/model/manifest.h"

namespace gangkeeper::broker {
namespace {

using quantity::Quantity;

absl::Time At(int seconds) { return absl::FromUnixSeconds(1'700'000'000 + seconds); }

}  // namespace

std::string Flavor(const std::string& name, const std::string& spec) {
  return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: ", name, "}\n",
                      spec.empty() ? "" : absl::StrCat("spec:\n", spec));
}

std::string CohortDoc(const std::string& name, const std::string& parent) {
  return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: ", name, "}\nspec: {",
                      parent.empty() ? "" : absl::StrCat("parentName: ", parent), "}\n");
}

std::string Cq(const std::string& name, const std::string& spec, const std::vector<std::string>& groups) {
  return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: ", name,
                      "}\nspec:\n  namespaceSelector: {}\n", spec, "  resourceGroups:\n", absl::StrJoin(groups, ""));
}

std::string Group(const std::vector<std::string>& resources, const std::vector<std::string>& flavors) {
  std::string out = absl::StrCat("  - coveredResources: [", absl::StrJoin(resources, ", "), "]\n    flavors:\n");
  for (const std::string& f : flavors) {
    std::vector<std::string> parts = absl::StrSplit(f, absl::MaxSplits(", ", 1));
    std::vector<std::string> nv = absl::StrSplit(parts[0], ": ");
    std::vector<std::string> quotas;
    for (const std::string& r : resources) {
      quotas.push_back(absl::StrCat("{name: ", r, ", nominalQuota: ", nv[1],
                                    parts.size() > 1 ? absl::StrCat(", ", parts[1]) : "", "}"));
    }
    absl::StrAppend(&out, "    - {name: ", nv[0], ", resources: [", absl::StrJoin(quotas, ", "), "]}\n");
  }
  return out;
}

std::string GpuGroup(const std::vector<std::string>& flavors) { return Group({kGpu}, flavors); }

std::string Docs(const std::vector<std::string>& docs) { return absl::StrJoin(docs, "---\n"); }

std::vector<workload::PodSet> PodSets(const std::vector<PodSetSpec>& specs) {
  std::vector<workload::PodSet> out;
  for (const PodSetSpec& s : specs) {
    workload::PodSet ps;
    ps.name = s.name;
    ps.count = s.count;
    for (const auto& [res, units] : s.requests) ps.requests[res] = Quantity::FromUnits(units);
    ps.tolerations = s.tolerations;
    ps.node_selector = s.node_selector;
    out.push_back(std::move(ps));
  }
  return out;
}

namespace {

std::shared_ptr<model::PolicySet> Decode(const std::string& yaml, std::string* error) {
  auto p = std::make_shared<model::PolicySet>();
  model::Diagnostics d;
  model::DecodeManifests(yaml, "world.yaml", p.get(), &d);
  if (d.HasErrors()) {
    absl::StrAppend(error, d.ErrorSummary());
  }
  return p;
}

ResourceTree BuildTree(const model::PolicySet& p, std::string* error) {
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(p);
  if (!tree.ok()) {
    absl::StrAppend(error, tree.status().ToString());
    return ResourceTree();
  }
  return *std::move(tree);
}

}  // namespace

QuotaWorld::QuotaWorld(const std::string& yaml, bool anti_churn_guard)
    : policies_(Decode(yaml, &error_)),
      tree_(BuildTree(*policies_, &error_)),
      guard_(tree_, anti_churn_guard),
      preemptor_(tree_, queues_, queue_by_node_, entries_, guard_) {
  preemptor_.UseConfiguration(&policies_->configuration);
  for (const auto& [name, cq] : policies_->cluster_queues) queues_[name];
  queue_by_node_.assign(static_cast<size_t>(tree_.node_count()), nullptr);
  for (auto& [name, q] : queues_) {
    const int node = tree_.ClusterQueueNode(name);
    if (node >= 0) queue_by_node_[static_cast<size_t>(node)] = &q;
  }
}

std::unique_ptr<Entry> QuotaWorld::MakeEntry(const std::string& name, int32_t priority,
                                             std::vector<workload::PodSet> pod_sets, absl::Time queued_at) {
  auto w = std::make_shared<workload::Workload>();
  w->namespace_name = "team";
  w->name = name;
  w->uid = absl::StrCat(name, "-uid");
  w->queue_name = "q";
  w->priority = priority;
  w->pod_sets = std::move(pod_sets);
  auto e = std::make_unique<Entry>();
  WorkloadInfo& info = e->info();
  info.key = WorkloadKey{.namespace_name = "team", .name = name};
  info.workload = std::move(w);
  info.priority = priority;
  info.created_at = queued_at;
  info.queued_at = queued_at;
  e->seq = seq_++;
  e->SetOrderKey();
  return e;
}

Entry& QuotaWorld::Admit(const AdmittedSpec& spec) {
  std::unique_ptr<Entry> owned = MakeEntry(spec.name, spec.priority, {}, At(spec.queued_s));
  Entry& e = *owned;
  WorkloadInfo& info = e.info();
  Assignment a;
  a.cluster_queue = spec.cq;
  for (const Holding& h : spec.holds) {
    Quantity& q = a.usage[FlavorResource{h.flavor, h.resource}];
    q = q.SaturatingAdd(Quantity::FromUnits(h.units));
  }
  if (absl::Status s = tree_.AddUsage(spec.cq, a.usage); !s.ok()) absl::StrAppend(&error_, s.ToString());
  info.cluster_queue = spec.cq;
  info.admission = std::move(a);
  info.admitted_at = At(spec.admitted_s);
  info.phase = spec.evicting ? Phase::kEvicting : Phase::kRunning;
  if (spec.preempted_before) {
    e.preempted_once = true;
    e.preempted_seq = guard_.seq();
  }
  queues_[spec.cq].admitted.insert(&e);
  entries_[info.key].push_back(std::move(owned));
  return e;
}

Entry& QuotaWorld::Pending(const std::string& name, int32_t priority, std::vector<workload::PodSet> pod_sets,
                           int queued_s, bool can_preempt) {
  pending_.push_back(MakeEntry(name, priority, std::move(pod_sets), At(queued_s)));
  Entry& e = *pending_.back();
  e.info().can_preempt = can_preempt;
  return e;
}

const model::ClusterQueue& QuotaWorld::cluster_queue(const std::string& name) const {
  return policies_->cluster_queues.at(name);
}

AssignmentResult QuotaWorld::Assign(const Entry& in, const std::string& cq, bool fair_sharing) {
  const model::ClusterQueue& q = cluster_queue(cq);
  const FlavorAssigner assigner(tree_, policies_->flavors, policies_->configuration);
  return assigner.Assign(in.PodSets(), q, fair_sharing,
                         [&](const FlavorResource& fr, Quantity amount, bool* only_other_queues,
                             std::vector<Target>* targets) {
                           return preemptor_.CanPreemptFor(in, q, fair_sharing, fr, amount, only_other_queues,
                                                           targets);
                         });
}

std::vector<Target> QuotaWorld::FindTargets(const Entry& in, const std::string& cq, const FlavorResource& fr,
                                            int64_t units, bool fair_sharing) {
  const ResourceAmounts request{{fr, Quantity::FromUnits(units)}};
  return preemptor_.FindTargets(in, cluster_queue(cq), fair_sharing, request, {fr});
}

std::string FlavorsOf(const Assignment& a) {
  std::vector<std::string> sets;
  for (const PodSetAssignment& ps : a.pod_sets) {
    std::vector<std::string> flavors;
    for (const auto& [res, flavor] : ps.flavors) flavors.push_back(absl::StrCat(res, "=", flavor));
    sets.push_back(absl::StrCat(ps.name, ": ", absl::StrJoin(flavors, ", ")));
  }
  return absl::StrJoin(sets, "; ");
}

std::vector<std::string> Victims(const std::vector<Target>& targets) {
  std::vector<std::string> out;
  for (const Target& t : targets) out.push_back(absl::StrCat(t.entry->cinfo().key.name, " ", t.reason));
  return out;
}

const char* FitModeName(FitMode mode) {
  switch (mode) {
    case FitMode::kNoFit: return "NoFit";
    case FitMode::kNoCandidates: return "NoCandidates";
    case FitMode::kPreempt: return "Preempt";
    case FitMode::kReclaim: return "Reclaim";
    case FitMode::kFit: return "Fit";
  }
  return "?";
}

}  // namespace gangkeeper::broker
