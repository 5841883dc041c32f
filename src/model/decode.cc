// gangkeeper model: decoding manifests into policy objects (see manifest.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/validate.h"
#include "src/model/configuration_codec.h"
#include "src/model/documents.h"
#include "src/model/gpu_pool_decode.h"
#include "src/model/reader.h"

namespace gangkeeper::model {
namespace {

using base::FieldErrors;
using base::FieldErrorType;
using base::FieldPath;
using nlohmann::json;

constexpr char kKueueV1beta1[] = "kueue.x-k8s.io/v1beta1";
constexpr char kKueueV1beta2[] = "kueue.x-k8s.io/v1beta2";

// The set of errors and warnings one object collects while decoding.
struct Problems {
  FieldErrors errors;
  FieldErrors warnings;
};

ObjectMeta ReadMeta(ObjectReader& top, const std::string& api_version, bool namespaced, const SourceRef& source) {
  ObjectMeta meta;
  meta.api_version = api_version;
  meta.source = source;
  ObjectReader m = top.Object("metadata");
  if (!m.valid()) {
    top.errors()->Add(FieldPath("metadata"), FieldErrorType::kRequired, "metadata.name must be set");
    return meta;
  }
  meta.name = m.String("name", /*required=*/true);
  if (!meta.name.empty() && !IsDnsSubdomain(meta.name)) {
    m.errors()->Add(m.path().Child("name"), FieldErrorType::kInvalid,
                    absl::StrCat("\"", meta.name,
                                 "\" is not a valid name (lower-case letters, digits, '-' and '.', starting and "
                                 "ending with a letter or digit)"));
  }
  meta.namespace_name = m.String("namespace");
  if (namespaced && meta.namespace_name.empty()) {
    m.errors()->Add(m.path().Child("namespace"), FieldErrorType::kRequired,
                    "this kind lives in a namespace: set metadata.namespace");
  }
  if (!namespaced && !meta.namespace_name.empty()) {
    m.warnings()->Add(m.path().Child("namespace"), FieldErrorType::kForbidden,
                      "this kind is cluster-scoped; the namespace is ignored");
    meta.namespace_name.clear();
  }
  meta.labels = m.StringMap("labels");
  meta.resource_version = m.String("resourceVersion");
  for (const char* k : {"annotations", "uid", "generation", "creationTimestamp", "managedFields", "finalizers",
                        "ownerReferences", "generateName", "deletionTimestamp", "deletionGracePeriodSeconds",
                        "selfLink"}) {
    m.Ignore(k);
  }
  m.Finish();
  return meta;
}

StopPolicy ReadStopPolicy(ObjectReader& spec) {
  std::string s = spec.Enum("stopPolicy", {"None", "Hold", "HoldAndDrain"});
  if (s == "Hold") return StopPolicy::kHold;
  if (s == "HoldAndDrain") return StopPolicy::kHoldAndDrain;
  return StopPolicy::kNone;
}

std::optional<double> ReadWeight(ObjectReader& spec) {
  ObjectReader fs = spec.Object("fairSharing");
  std::optional<double> w = fs.Double("weight");
  if (w.has_value() && (*w < 0 || (*w != 0 && *w < 1e-9))) {
    fs.errors()->Add(fs.path().Child("weight"), FieldErrorType::kInvalid,
                     "must be 0 (infinite share) or a positive number above 1e-9");
    w.reset();
  }
  fs.Finish();
  return w;
}

std::vector<ResourceGroup> ReadResourceGroups(ObjectReader& spec) {
  std::vector<ResourceGroup> groups;
  spec.List("resourceGroups", [&](const json& g, const FieldPath& gp) {
    ObjectReader group(&g, gp, spec.errors(), spec.warnings());
    ResourceGroup rg;
    rg.covered_resources = group.StringList("coveredResources");
    group.List("flavors", [&](const json& f, const FieldPath& fp) {
      ObjectReader flavor(&f, fp, spec.errors(), spec.warnings());
      FlavorQuotas fq;
      fq.name = flavor.String("name", /*required=*/true);
      flavor.List("resources", [&](const json& r, const FieldPath& rp) {
        ObjectReader res(&r, rp, spec.errors(), spec.warnings());
        ResourceQuota q;
        q.name = res.String("name", /*required=*/true);
        std::optional<quantity::Quantity> nominal = res.Quantity("nominalQuota", /*required=*/true);
        if (nominal.has_value()) q.nominal = *nominal;
        q.borrowing_limit = res.Quantity("borrowingLimit", false);
        q.lending_limit = res.Quantity("lendingLimit", false);
        res.Finish();
        fq.resources.push_back(std::move(q));
      });
      if (!flavor.Has("resources") && flavor.valid()) {
        spec.errors()->Add(fp.Child("resources"), FieldErrorType::kRequired,
                           "list a quota for each of the group's coveredResources");
      }
      flavor.Finish();
      rg.flavors.push_back(std::move(fq));
    });
    if (group.valid() && rg.covered_resources.empty() && !rg.flavors.empty() && !group.Has("coveredResources")) {
      // Kueue requires coveredResources; some published manifests leave it
      // out. Use the first flavor's resources (the validator then checks
      // that every flavor lists the same ones) and say so.
      for (const ResourceQuota& q : rg.flavors.front().resources) rg.covered_resources.push_back(q.name);
      spec.warnings()->Add(gp.Child("coveredResources"), FieldErrorType::kRequired,
                           absl::StrCat("not set; using [", absl::StrJoin(rg.covered_resources, ", "),
                                        "] from the flavors (Kueue itself requires this field, so add it)"));
    }
    if (group.valid() && rg.flavors.empty()) {
      spec.errors()->Add(gp.Child("flavors"), FieldErrorType::kRequired, "a resource group needs at least one flavor");
    }
    group.Finish();
    groups.push_back(std::move(rg));
  });
  return groups;
}

std::optional<LabelSelector> ReadSelector(ObjectReader& spec, const std::string& key) {
  if (!spec.Has(key)) {
    spec.Get(key);
    return std::nullopt;
  }
  ObjectReader sel = spec.Object(key);
  if (!sel.valid()) return std::nullopt;
  LabelSelector out;
  out.match_labels = sel.StringMap("matchLabels");
  sel.List("matchExpressions", [&](const json& e, const FieldPath& ep) {
    ObjectReader expr(&e, ep, spec.errors(), spec.warnings());
    LabelSelectorRequirement r;
    r.key = expr.String("key", /*required=*/true);
    std::string op = expr.String("operator", /*required=*/true);
    r.values = expr.StringList("values");
    if (op == "In") {
      r.op = LabelSelectorRequirement::Operator::kIn;
    } else if (op == "NotIn") {
      r.op = LabelSelectorRequirement::Operator::kNotIn;
    } else if (op == "Exists") {
      r.op = LabelSelectorRequirement::Operator::kExists;
    } else if (op == "DoesNotExist") {
      r.op = LabelSelectorRequirement::Operator::kDoesNotExist;
    } else if (!op.empty()) {
      spec.errors()->Add(ep.Child("operator"), FieldErrorType::kNotSupported,
                         absl::StrCat("\"", op, "\" is not a selector operator (use In, NotIn, Exists or DoesNotExist)"));
    }
    bool wants_values = r.op == LabelSelectorRequirement::Operator::kIn || r.op == LabelSelectorRequirement::Operator::kNotIn;
    if (!op.empty() && wants_values && r.values.empty()) {
      spec.errors()->Add(ep.Child("values"), FieldErrorType::kRequired,
                         absl::StrCat("operator ", op, " needs at least one value"));
    }
    if (!op.empty() && !wants_values && !r.values.empty()) {
      spec.errors()->Add(ep.Child("values"), FieldErrorType::kForbidden,
                         absl::StrCat("operator ", op, " takes no values; remove them"));
    }
    expr.Finish();
    out.match_expressions.push_back(std::move(r));
  });
  sel.Finish();
  return out;
}

FungibilityPolicy ReadFungibility(ObjectReader& f, const std::string& key, bool v1beta2, const std::string& legacy) {
  std::vector<std::string> allowed = {"MayStopSearch", "TryNextFlavor"};
  if (!v1beta2) allowed.push_back(legacy);
  std::string s = f.String(key);
  if (s.empty()) return key == "whenCanBorrow" ? FungibilityPolicy::kMayStopSearch : FungibilityPolicy::kTryNextFlavor;
  if (s == "TryNextFlavor") return FungibilityPolicy::kTryNextFlavor;
  if (s == "MayStopSearch" || (!v1beta2 && s == legacy)) return FungibilityPolicy::kMayStopSearch;
  std::string fix = v1beta2 && s == legacy
                        ? absl::StrCat("\"", legacy, "\" was removed in v1beta2; use MayStopSearch")
                        : absl::StrCat("\"", s, "\" is not supported (use ", absl::StrJoin(allowed, " or "), ")");
  f.errors()->Add(f.path().Child(key), FieldErrorType::kNotSupported, fix);
  return FungibilityPolicy::kMayStopSearch;
}

void DecodeClusterQueue(ObjectReader& spec, bool v1beta2, ClusterQueue* cq) {
  const std::string cohort_key = v1beta2 ? "cohortName" : "cohort";
  const std::string other_key = v1beta2 ? "cohort" : "cohortName";
  cq->cohort = spec.String(cohort_key);
  if (spec.Has(other_key)) {
    spec.Get(other_key);
    spec.errors()->Add(spec.path().Child(other_key), FieldErrorType::kNotSupported,
                       absl::StrCat(v1beta2 ? "v1beta2 renamed spec.cohort to spec.cohortName"
                                            : "spec.cohortName is v1beta2; in v1beta1 the field is spec.cohort",
                                    ": use ", cohort_key));
  }
  cq->namespace_selector = ReadSelector(spec, "namespaceSelector");
  std::string strategy = spec.Enum("queueingStrategy", {"StrictFIFO", "BestEffortFIFO"});
  cq->queueing_strategy = strategy == "StrictFIFO" ? QueueingStrategy::kStrictFIFO : QueueingStrategy::kBestEffortFIFO;
  cq->resource_groups = ReadResourceGroups(spec);

  ObjectReader fung = spec.Object("flavorFungibility");
  cq->flavor_fungibility.when_can_borrow = ReadFungibility(fung, "whenCanBorrow", v1beta2, "Borrow");
  cq->flavor_fungibility.when_can_preempt = ReadFungibility(fung, "whenCanPreempt", v1beta2, "Preempt");
  std::string pref = fung.Enum("preference", {"BorrowingOverPreemption", "PreemptionOverBorrowing"});
  if (!pref.empty()) {
    cq->flavor_fungibility.preference = pref == "BorrowingOverPreemption" ? FungibilityPreference::kBorrowingOverPreemption
                                                                          : FungibilityPreference::kPreemptionOverBorrowing;
    if (cq->flavor_fungibility.when_can_borrow != FungibilityPolicy::kTryNextFlavor ||
        cq->flavor_fungibility.when_can_preempt != FungibilityPolicy::kTryNextFlavor) {
      fung.errors()->Add(fung.path().Child("preference"), FieldErrorType::kForbidden,
                         absl::StrCat("preference ", pref,
                                      " requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"));
    }
  }
  fung.Finish();

  ObjectReader pre = spec.Object("preemption");
  std::string within = pre.Enum("withinClusterQueue", {"Never", "LowerPriority", "LowerOrNewerEqualPriority"});
  cq->preemption.within_cluster_queue = within == "LowerPriority" ? WithinClusterQueuePolicy::kLowerPriority
                                        : within == "LowerOrNewerEqualPriority"
                                            ? WithinClusterQueuePolicy::kLowerOrNewerEqualPriority
                                            : WithinClusterQueuePolicy::kNever;
  std::string reclaim = pre.Enum("reclaimWithinCohort", {"Never", "LowerPriority", "Any"});
  cq->preemption.reclaim_within_cohort = reclaim == "LowerPriority" ? ReclaimWithinCohortPolicy::kLowerPriority
                                         : reclaim == "Any"          ? ReclaimWithinCohortPolicy::kAny
                                                                     : ReclaimWithinCohortPolicy::kNever;
  ObjectReader borrow = pre.Object("borrowWithinCohort");
  std::string bpolicy = borrow.Enum("policy", {"Never", "LowerPriority"});
  cq->preemption.borrow_within_cohort =
      bpolicy == "LowerPriority" ? BorrowWithinCohortPolicy::kLowerPriority : BorrowWithinCohortPolicy::kNever;
  if (std::optional<int64_t> t = borrow.Int("maxPriorityThreshold", false, INT32_MIN, INT32_MAX)) {
    cq->preemption.borrow_max_priority_threshold = static_cast<int32_t>(*t);
  }
  borrow.Finish();
  if (cq->preemption.reclaim_within_cohort == ReclaimWithinCohortPolicy::kNever &&
      cq->preemption.borrow_within_cohort != BorrowWithinCohortPolicy::kNever) {
    pre.errors()->Add(pre.path().Child("borrowWithinCohort").Child("policy"), FieldErrorType::kForbidden,
                      "borrowWithinCohort needs reclaimWithinCohort other than Never; set reclaimWithinCohort to "
                      "LowerPriority or Any, or borrowWithinCohort.policy to Never");
  }
  pre.Finish();

  if (std::optional<double> w = ReadWeight(spec)) cq->fair_sharing_weight = *w;
  cq->stop_policy = ReadStopPolicy(spec);
  spec.Unsupported("admissionChecks",
                   "admission checks are not supported by gangkeeper; remove them (workloads would otherwise be "
                   "admitted without the checks)");
  spec.Unsupported("admissionChecksStrategy",
                   "admission checks are not supported by gangkeeper; remove them (workloads would otherwise be "
                   "admitted without the checks)");
  spec.Unenforced("admissionScope", "admission fair sharing within the ClusterQueue is not enforced; ignored");
  spec.Unenforced("concurrentAdmissionPolicy", "concurrent admission (flavor migration) is not enforced; ignored");
}

void DecodeLocalQueue(ObjectReader& spec, LocalQueue* lq) {
  lq->cluster_queue = spec.String("clusterQueue", /*required=*/true);
  lq->stop_policy = ReadStopPolicy(spec);
  spec.Unenforced("fairSharing", "admission fair sharing between LocalQueues is not enforced; ignored");
}

void DecodeCohort(ObjectReader& spec, bool v1alpha1, Cohort* co) {
  co->parent = spec.String("parentName");
  if (v1alpha1 && co->parent.empty()) co->parent = spec.String("parent");
  co->resource_groups = ReadResourceGroups(spec);
  if (std::optional<double> w = ReadWeight(spec)) co->fair_sharing_weight = *w;
}

// The map key of an object: its name, or {namespace, name} for LocalQueues.
template <typename Obj>
std::string KeyOf(const Obj& object) {
  return object.meta.name;
}
std::pair<std::string, std::string> KeyOf(const LocalQueue& lq) { return {lq.meta.namespace_name, lq.meta.name}; }

template <typename Obj>
std::string DisplayName(const Obj& object) {
  return object.meta.namespace_name.empty() ? object.meta.name
                                            : absl::StrCat(object.meta.namespace_name, "/", object.meta.name);
}

// Whether a second definition can be merged into the first. Only
// Namespaces merge (bundles of jobs each carry their Namespace, like
// repeated `kubectl apply`s): labels are unioned; the same label with two
// values does not merge.
template <typename Obj>
bool MergeInto(Obj&, const Obj&) {
  return false;
}
bool MergeInto(Namespace& first, const Namespace& again) {
  for (const auto& [k, v] : again.meta.labels) {
    auto it = first.meta.labels.find(k);
    if (it != first.meta.labels.end() && it->second != v) return false;
  }
  for (const auto& [k, v] : again.meta.labels) first.meta.labels[k] = v;
  return true;
}

// Adds `object` to `map` unless the name is taken; a duplicate is an error
// pointing at the first definition.
template <typename Map, typename Obj>
void Insert(Map& map, Obj object, const std::string& kind, Diagnostics* d) {
  auto key = KeyOf(object);
  auto [it, inserted] = map.try_emplace(std::move(key), std::move(object));  // no move when taken
  if (inserted) return;
  if (MergeInto(it->second, object)) {
    d->Add(Diagnostic::Severity::kNote, object.meta.source, absl::StrCat(kind, " ", DisplayName(object)), "",
           absl::StrCat("merged with the definition in ", it->second.meta.source.ToString()));
    return;
  }
  d->Add(Diagnostic::Severity::kError, object.meta.source, absl::StrCat(kind, " ", DisplayName(object)),
         "metadata.name",
         absl::StrCat("duplicate ", kind, " \"", DisplayName(object), "\" (first defined in ",
                      it->second.meta.source.ToString(), "); rename or remove one"));
}

void AddProblems(const Problems& p, const SourceRef& source, const std::string& object, Diagnostics* d) {
  for (const base::FieldError& e : p.errors.errors()) {
    d->Add(Diagnostic::Severity::kError, source, object, e.path, e.detail);
  }
  for (const base::FieldError& e : p.warnings.errors()) {
    d->Add(Diagnostic::Severity::kWarning, source, object, e.path, e.detail);
  }
}

// The string member `key` of `object`, or "".
std::string StringMember(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "Kind name" of a manifest, as far as it says ("Kind", or "" for none).
std::string ObjectLabel(const json& doc) {
  if (!doc.is_object()) return "";
  const std::string kind = StringMember(doc, "kind");
  auto md = doc.find("metadata");
  const std::string name = md != doc.end() && md->is_object() ? StringMember(*md, "name") : "";
  return absl::StrCat(kind, kind.empty() || name.empty() ? "" : " ", name);
}

// A GPUNodePool manifest (gangkeeper's own kind, no Kubernetes metadata).
void DecodePoolDocument(const json& doc, const SourceRef& source, PolicySet* policies, Diagnostics* d) {
  Problems p;
  GpuNodePool gp;
  DecodeGpuNodePool(doc, FieldPath(), &gp, &p.errors);
  const std::string object = absl::StrCat("GPUNodePool ", gp.name);
  AddProblems(p, source, object, d);
  if (!p.errors.empty()) return;
  auto [it, inserted] = policies->gpu_node_pools.emplace(gp.name, gp);
  if (!inserted) {
    d->Add(Diagnostic::Severity::kError, source, object, "metadata.name",
           absl::StrCat("duplicate GPUNodePool \"", gp.name, "\"; rename or remove one"));
  } else {
    policies->gpu_node_pool_sources[gp.name] = source;
  }
}

// ResourceFlavor's spec: node labels, taints and tolerations (topologyName
// is warned about and ignored).
void DecodeFlavorSpec(ObjectReader& spec, Problems& p, ResourceFlavor* rf) {
  rf->node_labels = spec.StringMap("nodeLabels");
  spec.List("nodeTaints", [&](const json& t, const FieldPath& tp) {
    ObjectReader r(&t, tp, &p.errors, &p.warnings);
    Taint taint;
    taint.key = r.String("key", true);
    taint.value = r.String("value");
    taint.effect = r.Enum("effect", {"NoSchedule", "PreferNoSchedule", "NoExecute"});
    if (r.valid() && !r.Has("effect")) p.errors.Add(tp.Child("effect"), FieldErrorType::kRequired, "must be set");
    r.Ignore("timeAdded");
    r.Finish();
    rf->node_taints.push_back(taint);
  });
  spec.List("tolerations", [&](const json& t, const FieldPath& tp) {
    ObjectReader r(&t, tp, &p.errors, &p.warnings);
    Toleration tol;
    tol.key = r.String("key");
    std::string op = r.Enum("operator", {"Equal", "Exists"});
    if (!op.empty()) tol.op = op;
    tol.value = r.String("value");
    tol.effect = r.Enum("effect", {"NoSchedule", "PreferNoSchedule", "NoExecute"});
    if (auto s = r.Int("tolerationSeconds", false, INT64_MIN, INT64_MAX)) tol.toleration_seconds = *s;
    if (tol.op == "Exists" && !tol.value.empty()) {
      p.errors.Add(tp.Child("value"), FieldErrorType::kForbidden, "operator Exists takes no value; remove it");
    }
    r.Finish();
    rf->tolerations.push_back(tol);
  });
  rf->topology_name = spec.String("topologyName");
  if (!rf->topology_name.empty()) {
    p.warnings.Add(spec.path().Child("topologyName"), FieldErrorType::kNotSupported,
                   "topology-aware scheduling is not enforced by gangkeeper; ignored");
  }
}

// A PriorityClass's fields after its metadata.
PriorityClass ReadPriorityClass(ObjectReader& top, const ObjectMeta& meta) {
  PriorityClass pc;
  pc.meta = meta;
  // Kubernetes limits user classes to 1e9; system classes go to 2e9.
  if (auto v = top.Int("value", /*required=*/true, -2147483648LL, 2000001000LL)) pc.value = static_cast<int32_t>(*v);
  std::string policy = top.Enum("preemptionPolicy", {"PreemptLowerPriority", "Never"});
  pc.preemption_policy = policy == "Never" ? PreemptionPolicy::kNever : PreemptionPolicy::kPreemptLowerPriority;
  pc.global_default = top.Bool("globalDefault").value_or(false);
  pc.description = top.String("description");
  return pc;
}

// A ClusterQueue's recorded inactive_reason: the string annotation
// kInactiveReasonAnnotation (encode.h) when there is one, else "".
std::string InactiveReason(const json& doc) {
  if (!doc.is_object()) return "";
  auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) return "";
  auto annotations = meta->find("annotations");
  if (annotations == meta->end() || !annotations->is_object()) return "";
  auto reason = annotations->find(std::string(kInactiveReasonAnnotation));
  if (reason == annotations->end() || !reason->is_string()) return "";
  return reason->get<std::string>();
}

// A Kueue quota object, a PriorityClass or a Namespace, its apiVersion and
// kind already checked.
void DecodeQuotaObject(const json& doc, const std::string& api_version, const std::string& kind,
                       bool v1alpha1_cohort, const SourceRef& source, PolicySet* policies, Diagnostics* d) {
  Problems p;
  ObjectReader top(&doc, FieldPath(), &p.errors, &p.warnings);
  top.Get("apiVersion");
  top.Get("kind");
  top.Ignore("status");
  const bool namespaced = kind == "LocalQueue";
  ObjectMeta meta = ReadMeta(top, api_version, namespaced, source);
  const std::string object = absl::StrCat(kind, " ", meta.name.empty() ? "<unnamed>" : meta.name);
  const bool v1beta2 = api_version == kKueueV1beta2;

  if (kind == "PriorityClass") {
    PriorityClass pc = ReadPriorityClass(top, meta);
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->priority_classes, std::move(pc), kind, d);
    return;
  }
  if (kind == "Namespace") {
    Namespace n;
    n.meta = meta;
    top.Ignore("spec");
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->namespaces, std::move(n), kind, d);
    return;
  }
  if (kind == "WorkloadPriorityClass") {
    WorkloadPriorityClass w;
    w.meta = meta;
    if (auto v = top.Int("value", /*required=*/true, INT32_MIN, INT32_MAX)) w.value = static_cast<int32_t>(*v);
    w.description = top.String("description");
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->workload_priority_classes, std::move(w), kind, d);
    return;
  }

  ObjectReader spec = top.Object("spec");
  if (kind == "ResourceFlavor") {
    ResourceFlavor rf;
    rf.meta = meta;
    DecodeFlavorSpec(spec, p, &rf);
    spec.Finish();
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->flavors, std::move(rf), kind, d);
  } else if (kind == "ClusterQueue") {
    ClusterQueue cq;
    cq.meta = meta;
    cq.inactive_reason = InactiveReason(doc);
    DecodeClusterQueue(spec, v1beta2, &cq);
    spec.Finish();
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->cluster_queues, std::move(cq), kind, d);
  } else if (kind == "LocalQueue") {
    LocalQueue lq;
    lq.meta = meta;
    if (!spec.valid()) p.errors.Add(FieldPath("spec").Child("clusterQueue"), FieldErrorType::kRequired, "must be set");
    DecodeLocalQueue(spec, &lq);
    spec.Finish();
    top.Finish();
    const std::string lq_object = absl::StrCat("LocalQueue ", meta.namespace_name, "/", meta.name);
    AddProblems(p, source, lq_object, d);
    if (p.errors.empty()) {
      Insert(policies->local_queues, std::move(lq), kind, d);
    }
  } else if (kind == "Cohort") {
    Cohort co;
    co.meta = meta;
    DecodeCohort(spec, v1alpha1_cohort, &co);
    spec.Finish();
    top.Finish();
    AddProblems(p, source, object, d);
    if (p.errors.empty()) Insert(policies->cohorts, std::move(co), kind, d);
  }
}

// What gangkeeper does not do for a Kueue kind it skips (the warning's
// second half).
std::string NotEnforced(const std::string& kind) {
  if (kind == "AdmissionCheck") {
    return "admission checks are not run: a ClusterQueue's workloads are admitted on quota alone, and the "
           "ClusterQueue's spec.admissionChecks is ignored";
  }
  if (kind == "ProvisioningRequestConfig") {
    return "no ProvisioningRequests are created: gangkeeper does not ask the cluster autoscaler for nodes before "
           "it admits";
  }
  if (kind == "Topology") {
    return "topology-aware scheduling is not done: pod sets are not placed by topology levels, and "
           "ResourceFlavor spec.topologyName is not enforced";
  }
  if (kind == "MultiKueueConfig" || kind == "MultiKueueCluster") {
    return "MultiKueue is not done: workloads are admitted and run in this cluster only, never dispatched to "
           "worker clusters";
  }
  if (kind == "Workload") {
    return "Workload objects are not read: gangkeeper builds each workload from its job";
  }
  return "gangkeeper does not implement this Kueue kind, so nothing it says is enforced";
}

void DecodeObject(const json& doc, const SourceRef& source, PolicySet* policies, Diagnostics* d) {
  if (!doc.is_object()) {
    d->Add(Diagnostic::Severity::kError, source, "", "",
           "a manifest must be an object with apiVersion and kind; fix the indentation or remove the document");
    return;
  }
  const std::string api_version = StringMember(doc, "apiVersion");
  const std::string kind = StringMember(doc, "kind");
  if (kind.empty() || api_version.empty()) {
    d->Add(Diagnostic::Severity::kError, source, "", kind.empty() ? "kind" : "apiVersion",
           "every manifest needs apiVersion and kind");
    return;
  }
  if (kind == "List" || absl::EndsWith(kind, "List")) {
    auto items = doc.find("items");
    if (items == doc.end() || !items->is_array()) {
      d->Add(Diagnostic::Severity::kError, source, kind, "items", "a List needs an items array");
      return;
    }
    for (const json& item : *items) DecodeObject(item, source, policies, d);
    return;
  }
  const std::string group = api_version.find('/') == std::string::npos ? "" : api_version.substr(0, api_version.find('/'));
  const bool kueue = group == "kueue.x-k8s.io";
  static const std::vector<std::string> kKueueKinds = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort",
                                                       "WorkloadPriorityClass"};
  const bool kueue_kind = kueue && std::find(kKueueKinds.begin(), kKueueKinds.end(), kind) != kKueueKinds.end();
  const bool v1alpha1_cohort = kind == "Cohort" && api_version == "kueue.x-k8s.io/v1alpha1";
  if (kueue_kind && api_version != kKueueV1beta1 && api_version != kKueueV1beta2 && !v1alpha1_cohort) {
    d->Add(Diagnostic::Severity::kError, source, kind, "apiVersion",
           absl::StrCat("apiVersion ", api_version, " is not supported for ", kind, "; use ", kKueueV1beta2, " or ",
                        kKueueV1beta1));
    return;
  }
  const bool priority_class = kind == "PriorityClass" && group == "scheduling.k8s.io";
  const bool ns = kind == "Namespace" && api_version == "v1";
  const bool pool = kind == "GPUNodePool" && group == "gangkeeper.io";
  if (IsConfigurationDocument(api_version, kind)) {
    DecodeConfigurationDocument(doc, api_version, source, policies, d);
    return;
  }
  if (kueue && !kueue_kind) {
    // Kueue's other kinds: read by Kueue, not enforced here. A warning (not
    // a note that --quiet hides), saying what does not happen.
    d->Add(Diagnostic::Severity::kWarning, source, ObjectLabel(doc), "",
           absl::StrCat("not enforced: ", api_version, " ", kind, " is skipped; ", NotEnforced(kind)));
    return;
  }
  if (!kueue_kind && !priority_class && !ns && !pool) {
    d->Add(Diagnostic::Severity::kNote, source, ObjectLabel(doc), "",
           absl::StrCat("skipped: ", api_version, " ", kind, " is not a policy object"));
    return;
  }
  if (pool) {
    DecodePoolDocument(doc, source, policies, d);
    return;
  }
  DecodeQuotaObject(doc, api_version, kind, v1alpha1_cohort, source, policies, d);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return ss.str();
}

}  // namespace

std::string SourceRef::ToString() const {
  if (document <= 0) return file;
  return absl::StrCat(file, "#", document);
}

bool LabelSelector::Matches(const Labels& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const LabelSelectorRequirement& r : match_expressions) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool in = has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    switch (r.op) {
      case LabelSelectorRequirement::Operator::kIn:
        if (!in) return false;
        break;
      case LabelSelectorRequirement::Operator::kNotIn:
        if (in) return false;
        break;
      case LabelSelectorRequirement::Operator::kExists:
        if (!has) return false;
        break;
      case LabelSelectorRequirement::Operator::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

Labels PolicySet::NamespaceLabels(const std::string& namespace_name) const {
  Labels labels;
  auto it = namespaces.find(namespace_name);
  if (it != namespaces.end()) labels = it->second.meta.labels;
  labels["kubernetes.io/metadata.name"] = namespace_name;
  return labels;
}

std::vector<std::string> PolicySet::CohortsAbove(const std::string& cohort) const {
  std::vector<std::string> out;
  std::string at = cohort;
  while (!at.empty() && out.size() <= cohorts.size() && std::find(out.begin(), out.end(), at) == out.end()) {
    out.push_back(at);
    auto it = cohorts.find(at);
    at = it != cohorts.end() ? it->second.parent : "";
  }
  return out;
}

const char* QueueingStrategyName(QueueingStrategy s) {
  return s == QueueingStrategy::kStrictFIFO ? "StrictFIFO" : "BestEffortFIFO";
}

const char* StopPolicyName(StopPolicy s) {
  switch (s) {
    case StopPolicy::kHold: return "Hold";
    case StopPolicy::kHoldAndDrain: return "HoldAndDrain";
    default: return "None";
  }
}

std::string Diagnostic::ToString() const {
  const char* sev = severity == Severity::kError ? "error" : severity == Severity::kWarning ? "warning" : "note";
  std::string out = absl::StrCat(source.ToString(), source.file.empty() ? "" : ": ", sev, ": ");
  if (!object.empty()) absl::StrAppend(&out, object, ": ");
  if (!path.empty()) absl::StrAppend(&out, path, ": ");
  absl::StrAppend(&out, message);
  return out;
}

bool Diagnostics::HasErrors() const { return Count(Diagnostic::Severity::kError) > 0; }

int Diagnostics::Count(Diagnostic::Severity severity) const {
  return static_cast<int>(
      std::count_if(items.begin(), items.end(), [&](const Diagnostic& d) { return d.severity == severity; }));
}

void Diagnostics::Add(Diagnostic::Severity severity, const SourceRef& source, std::string object, std::string path,
                      std::string message) {
  items.push_back(Diagnostic{severity, source, std::move(object), std::move(path), std::move(message)});
}

std::string Diagnostics::ErrorSummary() const {
  std::vector<std::string> lines;
  for (const Diagnostic& d : items) {
    if (d.severity == Diagnostic::Severity::kError) lines.push_back(d.ToString());
  }
  return absl::StrJoin(lines, "\n");
}

void DecodeManifests(absl::string_view text, absl::string_view file, PolicySet* policies, Diagnostics* diagnostics) {
  for (const Document& doc : ParseDocuments(text)) {
    SourceRef source{std::string(file), doc.index};
    if (!doc.errors.empty()) {
      const std::string object = ObjectLabel(doc.value);
      for (const DocumentError& e : doc.errors) {
        diagnostics->Add(Diagnostic::Severity::kError, source, object, e.path, e.message);
      }
      continue;
    }
    if (doc.value.is_null()) continue;
    DecodeObject(doc.value, source, policies, diagnostics);
  }
}

absl::StatusOr<LoadResult> LoadPolicies(const std::string& path) {
  LoadResult result;
  std::error_code ec;
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path, ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      // Hidden entries are skipped: a mounted ConfigMap holds every file
      // twice, once in a "..2026_..." directory its "..data" link names.
      if (it->path().filename().string().starts_with(".")) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        files.push_back(it->path().string());
      }
    }
    if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", path, ": ", ec.message()));
    std::sort(files.begin(), files.end());
  } else if (std::filesystem::exists(path, ec)) {
    files.push_back(path);
  } else {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  for (const std::string& f : files) {
    absl::StatusOr<std::string> text = ReadFile(f);
    if (!text.ok()) return text.status();
    DecodeManifests(*text, f, &result.policies, &result.diagnostics);
    ++result.files;
  }
  ValidatePolicySet(result.policies, &result.diagnostics);
  return result;
}

}  // namespace gangkeeper::model
