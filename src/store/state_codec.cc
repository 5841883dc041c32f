// gangkeeper store: the byte encoding of the broker's durable state (see
// state_codec.h; FORMAT.md §4-5).
#include "gangkeeper/store/state_codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_digest.h"
#include "gangkeeper/store/codec.h"

namespace gangkeeper::store {

// The broker's durable types this file encodes.
using broker::Assignment;
using broker::DurableBatch;
using broker::DurableKey;
using broker::DurableState;
using broker::FlavorResource;
using broker::InstanceKey;
using broker::InstanceOf;
using broker::KeyOf;
using broker::Phase;
using broker::PodGroupState;
using broker::PodSetAssignment;
using broker::StateChange;
using broker::WorkloadInfo;
using broker::WorkloadKey;

namespace {

using quantity::Quantity;

// Version 2 names a workload by kind as well as namespace and name, and an
// image by its instance (uid); version 1 records, written when a name meant
// one workload, are read and migrated (FORMAT.md §6). Version 3 (this
// release) adds whether a workload is known only from a review and whether
// its submitter is only claimed (workloads and changes); older records
// read as confirmed, with the submitter as recorded. Batch version 4 and
// state version 3 record the policies' digest (model/policy_digest.h) with
// them; older ones get it computed from the recorded manifests. Image
// version 4 adds the waitForPodsReady requeue state (requeue count, the
// backoff's end, deactivation, an eviction for a PodsReady timeout); older
// images read as never requeued, active.
constexpr uint8_t kBatchVersion = 4;
constexpr uint8_t kStateVersion = 3;
constexpr uint8_t kBatchDigestVersion = 4;  // the first that records it
constexpr uint8_t kStateDigestVersion = 3;
constexpr uint8_t kInfoVersion = 4;
constexpr uint8_t kInfoRequeueVersion = 4;  // the first with the requeue state
constexpr uint8_t kOldestVersion = 1;

// --- Encoding ---

void PutTime(Encoder& e, absl::Time t) { e.PutSigned(absl::ToUnixMicros(t)); }

void PutQuantity(Encoder& e, Quantity q) {
  absl::StatusOr<int64_t> milli = q.MilliInt64();
  if (milli.ok()) {
    e.PutU8(0);
    e.PutSigned(*milli);
  } else {
    e.PutU8(1);  // beyond int64 milli-units: its exact spelling
    e.PutString(q.Format());
  }
}

void PutStringMap(Encoder& e, const std::map<std::string, std::string>& m) {
  e.PutVarint(m.size());
  for (const auto& [k, v] : m) {
    e.PutString(k);
    e.PutString(v);
  }
}

void PutQuantityMap(Encoder& e, const std::map<std::string, Quantity>& m) {
  e.PutVarint(m.size());
  for (const auto& [k, v] : m) {
    e.PutString(k);
    PutQuantity(e, v);
  }
}

void PutKey(Encoder& e, const WorkloadKey& k) {
  e.PutString(k.namespace_name);
  e.PutString(k.name);
  e.PutU8(static_cast<uint8_t>(k.kind));
  e.PutBool(k.pod_group);
}

void PutToleration(Encoder& e, const model::Toleration& t) {
  e.PutString(t.key);
  e.PutString(t.op);
  e.PutString(t.value);
  e.PutString(t.effect);
  e.PutBool(t.toleration_seconds.has_value());
  if (t.toleration_seconds.has_value()) e.PutSigned(*t.toleration_seconds);
}

void PutPodSet(Encoder& e, const workload::PodSet& ps) {
  e.PutString(ps.name);
  e.PutSigned(ps.count);
  PutQuantityMap(e, ps.requests);
  PutQuantityMap(e, ps.limits);
  e.PutString(ps.priority_class_name);
  PutStringMap(e, ps.node_selector);
  e.PutVarint(ps.tolerations.size());
  for (const model::Toleration& t : ps.tolerations) PutToleration(e, t);
  e.PutBool(ps.has_persistent_volume);
  e.PutString(ps.template_pointer);
}

void PutWorkload(Encoder& e, const workload::Workload& w) {
  e.PutU8(static_cast<uint8_t>(w.kind));
  e.PutString(w.api_version);
  e.PutString(w.namespace_name);
  e.PutString(w.name);
  e.PutString("");  // was generateName: not kept since 2026-12 (the format keeps its place)
  e.PutString(w.uid);
  e.PutBool(w.creation_timestamp != absl::InfinitePast());
  if (w.creation_timestamp != absl::InfinitePast()) PutTime(e, w.creation_timestamp);
  PutStringMap(e, w.labels);
  PutStringMap(e, w.annotations);
  e.PutString(w.queue_name);
  e.PutSigned(w.priority);
  e.PutString(w.priority_class);
  e.PutString(w.priority_class_source);
  e.PutU8(static_cast<uint8_t>(w.preemption_policy));
  e.PutString(w.pod_priority_class);
  e.PutVarint(w.pod_sets.size());
  for (const workload::PodSet& ps : w.pod_sets) PutPodSet(e, ps);
  e.PutBool(w.suspended);
  e.PutString(w.pod_group_name);
  e.PutSigned(w.pod_group_total_count);
  e.PutBool(w.owned_by_managed_object);
  e.PutString(w.submitted_by);
  e.PutBool(w.submitter_claimed);
  e.PutBool(w.unconfirmed);
}

void PutAssignment(Encoder& e, const Assignment& a) {
  e.PutString(a.cluster_queue);
  e.PutVarint(a.pod_sets.size());
  for (const PodSetAssignment& ps : a.pod_sets) {
    e.PutString(ps.name);
    e.PutSigned(ps.count);
    PutStringMap(e, ps.flavors);
    PutQuantityMap(e, ps.usage);
  }
  e.PutVarint(a.usage.size());
  for (const auto& [fr, q] : a.usage) {
    e.PutString(fr.flavor);
    e.PutString(fr.resource);
    PutQuantity(e, q);
  }
  e.PutSigned(a.borrowing_level);
}

void PutInfo(Encoder& e, const WorkloadInfo& info) {
  e.PutU8(kInfoVersion);
  PutKey(e, info.key);
  PutWorkload(e, *info.workload);
  e.PutString(info.cluster_queue);
  e.PutString(info.local_queue);
  e.PutU8(static_cast<uint8_t>(info.phase));
  e.PutSigned(info.priority);
  e.PutBool(info.can_preempt);
  PutTime(e, info.created_at);
  PutTime(e, info.queued_at);
  PutTime(e, info.admitted_at);
  e.PutBool(info.admission.has_value());
  if (info.admission.has_value()) PutAssignment(e, *info.admission);
  e.PutString(info.eviction_reason);
  e.PutSigned(info.admissions);
  e.PutSigned(info.evictions);
  e.PutSigned(info.pod_group_members);
  e.PutString(info.actuation);
  e.PutBool(info.pod_group != nullptr);
  if (info.pod_group != nullptr) {
    e.PutVarint(info.pod_group->pods.size());
    for (const std::string& p : info.pod_group->pods) e.PutString(p);
    e.PutVarint(info.pod_group->pod_sets.size());
    for (const workload::PodSet& ps : info.pod_group->pod_sets) PutPodSet(e, ps);
  }
  // Version 4: waitForPodsReady's requeue state.
  e.PutSigned(info.requeue_count);
  if (info.requeue_at == absl::InfinitePast()) {
    e.PutU8(0);
  } else if (info.requeue_at == absl::InfiniteFuture()) {
    e.PutU8(2);
  } else {
    e.PutU8(1);
    PutTime(e, info.requeue_at);
  }
  e.PutBool(info.active);
  e.PutBool(info.pods_ready_timeout);
}

void PutChange(Encoder& e, const StateChange& c) {
  e.PutU8(static_cast<uint8_t>(c.type));
  PutTime(e, c.time);
  PutKey(e, c.key);
  e.PutString(c.uid);
  e.PutString(c.cluster_queue);
  e.PutBool(c.assignment.has_value());
  if (c.assignment.has_value()) PutAssignment(e, *c.assignment);
  e.PutString(c.reason);
  e.PutString(c.message);
  PutKey(e, c.preemptor);
  e.PutString(c.actor);
  e.PutBool(c.actor_claimed);
  e.PutBool(c.unconfirmed);
}

// The policies' digest (their identity: the set's own, computed once when
// it was sealed), the policies as Kueue manifests (the model's own
// encoding), and the terminating ClusterQueues as a second manifest list.
void PutPolicies(Encoder& e, const model::PolicySet* policies, const std::vector<model::ClusterQueue>& terminating,
                 const model::PolicyOverlay* overlay) {
  e.PutBool(policies != nullptr);
  if (policies == nullptr) return;
  e.PutString(model::DigestOf(*policies).bytes());
  e.PutString(model::EncodeManifests(*policies));
  model::PolicySet t;
  for (const model::ClusterQueue& cq : terminating) t.cluster_queues.emplace(cq.meta.name, cq);
  e.PutString(model::EncodeManifests(t));
  e.PutBool(overlay != nullptr);
  if (overlay == nullptr) return;
  e.PutString(model::EncodeManifests(overlay->put));
  e.PutVarint(overlay->deleted.size());
  for (const std::string& id : overlay->deleted) e.PutString(id);
  e.PutVarint(overlay->generation);
}

// --- Decoding ---

bool GetTime(Decoder& d, absl::Time* t) {
  int64_t us = 0;
  if (!d.GetSigned(&us)) return false;
  *t = absl::FromUnixMicros(us);
  return true;
}

bool GetQuantity(Decoder& d, Quantity* q) {
  uint8_t tag = 0;
  if (!d.GetU8(&tag)) return false;
  if (tag == 0) {
    int64_t milli = 0;
    if (!d.GetSigned(&milli)) return false;
    *q = Quantity::FromMilli(milli);
    return true;
  }
  if (tag != 1) {
    d.Fail(absl::StrCat("a quantity has tag ", tag));
    return false;
  }
  std::string text;
  if (!d.GetString(&text)) return false;
  absl::StatusOr<Quantity> parsed = quantity::ParseQuantity(text);
  if (!parsed.ok()) {
    d.Fail(absl::StrCat("a quantity does not parse: ", parsed.status().message()));
    return false;
  }
  *q = *parsed;
  return true;
}

// Counts are bounded by the bytes left (every element takes at least one);
// containers grow as elements decode, so a corrupt count cannot make a
// large allocation.
bool GetCount(Decoder& d, uint64_t* n) { return d.GetBounded(d.remaining(), n); }

bool GetStringMap(Decoder& d, std::map<std::string, std::string>* m) {
  uint64_t n = 0;
  if (!GetCount(d, &n)) return false;
  m->clear();
  for (uint64_t i = 0; i < n; ++i) {
    std::string k;
    std::string v;
    if (!d.GetString(&k) || !d.GetString(&v)) return false;
    (*m)[std::move(k)] = std::move(v);
  }
  return true;
}

bool GetQuantityMap(Decoder& d, std::map<std::string, Quantity>* m) {
  uint64_t n = 0;
  if (!GetCount(d, &n)) return false;
  m->clear();
  for (uint64_t i = 0; i < n; ++i) {
    std::string k;
    Quantity q;
    if (!d.GetString(&k) || !GetQuantity(d, &q)) return false;
    (*m)[std::move(k)] = q;
  }
  return true;
}

template <typename Enum>
bool GetEnum(Decoder& d, Enum last, Enum* out) {
  uint8_t v = 0;
  if (!d.GetU8(&v)) return false;
  if (v > static_cast<uint8_t>(last)) {
    d.Fail(absl::StrCat("an enum value ", v, " is out of range"));
    return false;
  }
  *out = static_cast<Enum>(v);
  return true;
}

// A version 1 key is namespace and name only; its kind is filled in later
// from the workload it names (MigrateKey), Job until then.
bool GetKey(Decoder& d, int version, WorkloadKey* k) {
  if (!d.GetString(&k->namespace_name) || !d.GetString(&k->name)) return false;
  if (version < 2) {
    k->kind = workload::Kind::kJob;
    k->pod_group = false;
    return true;
  }
  return GetEnum(d, workload::kLastKind, &k->kind) && d.GetBool(&k->pod_group);
}

bool GetInt32(Decoder& d, int32_t* v) {
  int64_t x = 0;
  if (!d.GetSigned(&x)) return false;
  if (x < INT32_MIN || x > INT32_MAX) {
    d.Fail(absl::StrCat("a 32-bit value is ", x));
    return false;
  }
  *v = static_cast<int32_t>(x);
  return true;
}

bool GetToleration(Decoder& d, model::Toleration* t) {
  bool has_seconds = false;
  if (!d.GetString(&t->key) || !d.GetString(&t->op) || !d.GetString(&t->value) || !d.GetString(&t->effect) ||
      !d.GetBool(&has_seconds)) {
    return false;
  }
  if (has_seconds) {
    int64_t s = 0;
    if (!d.GetSigned(&s)) return false;
    t->toleration_seconds = s;
  }
  return true;
}

bool GetPodSet(Decoder& d, workload::PodSet* ps) {
  uint64_t n = 0;
  if (!d.GetString(&ps->name) || !d.GetSigned(&ps->count) || !GetQuantityMap(d, &ps->requests) ||
      !GetQuantityMap(d, &ps->limits) || !d.GetString(&ps->priority_class_name) ||
      !GetStringMap(d, &ps->node_selector) || !GetCount(d, &n)) {
    return false;
  }
  ps->tolerations.clear();
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetToleration(d, &ps->tolerations.emplace_back())) return false;
  }
  return d.GetBool(&ps->has_persistent_volume) && d.GetString(&ps->template_pointer);
}

bool GetPodSets(Decoder& d, std::vector<workload::PodSet>* out) {
  uint64_t n = 0;
  if (!GetCount(d, &n)) return false;
  out->clear();
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetPodSet(d, &out->emplace_back())) return false;
  }
  return true;
}

bool GetWorkload(Decoder& d, int version, workload::Workload* w) {
  std::string generate_name;  // no longer kept
  if (!GetEnum(d, workload::kLastKind, &w->kind) || !d.GetString(&w->api_version) ||
      !d.GetString(&w->namespace_name) || !d.GetString(&w->name) || !d.GetString(&generate_name) ||
      !d.GetString(&w->uid)) {
    return false;
  }
  if (version >= 2) {
    bool has_creation = false;
    if (!d.GetBool(&has_creation)) return false;
    if (has_creation && !GetTime(d, &w->creation_timestamp)) return false;
  }
  if (!GetStringMap(d, &w->labels) || !GetStringMap(d, &w->annotations) ||
      !d.GetString(&w->queue_name) || !GetInt32(d, &w->priority) || !d.GetString(&w->priority_class) ||
      !d.GetString(&w->priority_class_source) ||
      !GetEnum(d, model::PreemptionPolicy::kNever, &w->preemption_policy) ||
      !d.GetString(&w->pod_priority_class) || !GetPodSets(d, &w->pod_sets) || !d.GetBool(&w->suspended) ||
      !d.GetString(&w->pod_group_name) || !d.GetSigned(&w->pod_group_total_count) ||
      !d.GetBool(&w->owned_by_managed_object) || !d.GetString(&w->submitted_by)) {
    return false;
  }
  if (version >= 3 && (!d.GetBool(&w->submitter_claimed) || !d.GetBool(&w->unconfirmed))) return false;
  return true;
}

bool GetAssignment(Decoder& d, Assignment* a) {
  uint64_t n = 0;
  if (!d.GetString(&a->cluster_queue) || !GetCount(d, &n)) return false;
  a->pod_sets.clear();
  for (uint64_t i = 0; i < n; ++i) {
    PodSetAssignment& ps = a->pod_sets.emplace_back();
    if (!d.GetString(&ps.name) || !d.GetSigned(&ps.count) || !GetStringMap(d, &ps.flavors) ||
        !GetQuantityMap(d, &ps.usage)) {
      return false;
    }
  }
  if (!GetCount(d, &n)) return false;
  for (uint64_t i = 0; i < n; ++i) {
    FlavorResource fr;
    Quantity q;
    if (!d.GetString(&fr.flavor) || !d.GetString(&fr.resource) || !GetQuantity(d, &q)) return false;
    a->usage[fr] = q;
  }
  int64_t level = 0;
  if (!d.GetSigned(&level)) return false;
  a->borrowing_level = static_cast<int>(std::clamp<int64_t>(level, 0, 1 << 20));
  return true;
}

bool GetInfo(Decoder& d, WorkloadInfo* info) {
  uint8_t version = 0;
  if (!d.GetU8(&version)) return false;
  if (version < kOldestVersion || version > kInfoVersion) {
    d.Fail(absl::StrCat("a workload image has version ", version, "; this gangkeeper reads versions ",
                        kOldestVersion, " to ", kInfoVersion));
    return false;
  }
  auto w = std::make_shared<workload::Workload>();
  bool has_admission = false;
  if (!GetKey(d, version, &info->key) || !GetWorkload(d, version, w.get()) || !d.GetString(&info->cluster_queue) ||
      !d.GetString(&info->local_queue) || !GetEnum(d, Phase::kFinished, &info->phase) ||
      !GetInt32(d, &info->priority) || !d.GetBool(&info->can_preempt) || !GetTime(d, &info->created_at) ||
      !GetTime(d, &info->queued_at) || !GetTime(d, &info->admitted_at) || !d.GetBool(&has_admission)) {
    return false;
  }
  // Version 1: the key had no kind; the workload says what it is.
  if (version < 2) info->key = KeyOf(*w);
  info->workload = std::move(w);
  if (has_admission) {
    Assignment a;
    if (!GetAssignment(d, &a)) return false;
    info->admission = std::move(a);
  }
  bool has_group = false;
  if (!d.GetString(&info->eviction_reason) || !GetInt32(d, &info->admissions) || !GetInt32(d, &info->evictions) ||
      !GetInt32(d, &info->pod_group_members) || !d.GetString(&info->actuation) || !d.GetBool(&has_group)) {
    return false;
  }
  if (has_group) {
    auto g = std::make_shared<PodGroupState>();
    uint64_t n = 0;
    if (!GetCount(d, &n)) return false;
    for (uint64_t i = 0; i < n; ++i) {
      if (!d.GetString(&g->pods.emplace_back())) return false;
    }
    if (!GetPodSets(d, &g->pod_sets)) return false;
    info->pod_group = std::move(g);
  }
  if (version < kInfoRequeueVersion) return true;  // never requeued, active
  uint8_t requeue_at = 0;
  if (!GetInt32(d, &info->requeue_count) || !d.GetU8(&requeue_at)) return false;
  if (info->requeue_count < 0) {
    d.Fail(absl::StrCat("a workload image has requeue count ", info->requeue_count, "; it is never negative"));
    return false;
  }
  switch (requeue_at) {
    case 0: info->requeue_at = absl::InfinitePast(); break;
    case 1:
      if (!GetTime(d, &info->requeue_at)) return false;
      break;
    case 2: info->requeue_at = absl::InfiniteFuture(); break;
    default:
      d.Fail(absl::StrCat("a workload image's requeue time has tag ", requeue_at, "; 0, 1 or 2 expected"));
      return false;
  }
  return d.GetBool(&info->active) && d.GetBool(&info->pods_ready_timeout);
}

bool GetChange(Decoder& d, int version, StateChange* c) {
  bool has_assignment = false;
  if (!GetEnum(d, StateChange::Type::kReviewed, &c->type) || !GetTime(d, &c->time) || !GetKey(d, version, &c->key) ||
      !d.GetString(&c->uid) || !d.GetString(&c->cluster_queue) || !d.GetBool(&has_assignment)) {
    return false;
  }
  if (has_assignment) {
    Assignment a;
    if (!GetAssignment(d, &a)) return false;
    c->assignment = std::move(a);
  }
  return d.GetString(&c->reason) && d.GetString(&c->message) && GetKey(d, version, &c->preemptor) &&
         d.GetString(&c->actor) && (version < 3 || (d.GetBool(&c->actor_claimed) && d.GetBool(&c->unconfirmed)));
}

// Version 1 keys name namespace/name only: the kind of the workload the
// state tracks under that name (there was at most one), else Job.
WorkloadKey MigrateKey(const DurableState& state, const WorkloadKey& v1) {
  for (const auto& [id, info] : state.workloads) {
    if (info != nullptr && info->key.namespace_name == v1.namespace_name && info->key.name == v1.name) return info->key;
  }
  return v1;
}

absl::Status DecodePolicies(absl::string_view text, const std::string& what, model::PolicySet* out) {
  model::Diagnostics diagnostics;
  model::DecodeManifests(text, what, out, &diagnostics);
  if (diagnostics.HasErrors()) {
    return absl::DataLossError(absl::StrCat(what, ": the recorded policies do not decode: ",
                                            diagnostics.ErrorSummary()));
  }
  return absl::OkStatus();
}

// Reads the policies part written by PutPolicies; `has_digest`: the
// record's version has the digest (else it is computed: the migration).
// The policies come back sealed with it.
absl::Status GetPolicies(Decoder& d, const std::string& what, bool has_digest, bool* present,
                         std::shared_ptr<const model::PolicySet>* policies,
                         std::vector<model::ClusterQueue>* terminating,
                         std::shared_ptr<const model::PolicyOverlay>* overlay) {
  std::string digest;
  std::string manifests;
  std::string terminating_manifests;
  if (!d.GetBool(present)) return d.status();
  if (!*present) return absl::OkStatus();
  if ((has_digest && !d.GetString(&digest)) || !d.GetString(&manifests) || !d.GetString(&terminating_manifests)) {
    return d.status();
  }
  model::PolicySet p;
  if (absl::Status s = DecodePolicies(manifests, what, &p); !s.ok()) return s;
  if (has_digest) {
    absl::StatusOr<model::PolicyDigest> recorded = model::PolicyDigest::FromBytes(digest);
    if (!recorded.ok()) return absl::DataLossError(absl::StrCat(what, ": ", recorded.status().message()));
    *policies = model::Seal(std::move(p), *std::move(recorded));
  } else {
    *policies = model::Seal(std::move(p));
  }
  model::PolicySet t;
  if (absl::Status s = DecodePolicies(terminating_manifests, what, &t); !s.ok()) return s;
  terminating->clear();
  for (const auto& [name, cq] : t.cluster_queues) terminating->push_back(cq);
  bool has_overlay = false;
  if (!d.GetBool(&has_overlay)) return d.status();
  overlay->reset();
  if (!has_overlay) return absl::OkStatus();
  auto o = std::make_shared<model::PolicyOverlay>();
  std::string put;
  uint64_t n = 0;
  if (!d.GetString(&put) || !GetCount(d, &n)) return d.status();
  for (uint64_t i = 0; i < n; ++i) {
    std::string id;
    if (!d.GetString(&id)) return d.status();
    o->deleted.insert(std::move(id));
  }
  if (!d.GetVarint(&o->generation)) return d.status();
  if (absl::Status s = DecodePolicies(put, what, &o->put); !s.ok()) return s;
  *overlay = std::move(o);
  return absl::OkStatus();
}

}  // namespace

std::string EncodeWorkloadInfo(const WorkloadInfo& info) {
  std::string out;
  Encoder e(&out);
  PutInfo(e, info);
  return out;
}

absl::StatusOr<WorkloadInfo> DecodeWorkloadInfo(absl::string_view data) {
  Decoder d(data, "workload image");
  WorkloadInfo info;
  if (!GetInfo(d, &info)) return d.status();
  if (!d.done()) return absl::DataLossError(absl::StrCat("workload image: ", d.remaining(), " byte(s) left over"));
  return info;
}

std::string EncodeBatch(const DurableBatch& batch) {
  std::string out;
  Encoder e(&out);
  e.PutU8(kBatchVersion);
  e.PutVarint(batch.changes.size());
  for (const StateChange& c : batch.changes) PutChange(e, c);
  e.PutVarint(batch.workloads.size());
  for (const auto& [instance, info] : batch.workloads) {
    PutKey(e, instance.key);
    e.PutString(instance.uid);
    e.PutBool(info != nullptr && info->workload != nullptr);
    if (info != nullptr && info->workload != nullptr) PutInfo(e, *info);
  }
  PutPolicies(e, batch.policies.get(), batch.terminating, batch.overlay.get());
  return out;
}

absl::Status ApplyBatch(absl::string_view payload, uint64_t seq, DurableState* state,
                        std::vector<StateChange>* changes) {
  const std::string what = absl::StrCat("journal record ", seq);
  Decoder d(payload, what);
  uint8_t version = 0;
  if (!d.GetU8(&version)) return d.status();
  if (version < kOldestVersion || version > kBatchVersion) {
    return absl::DataLossError(absl::StrCat(what, ": version ", version, "; this gangkeeper reads versions ",
                                            kOldestVersion, " to ", kBatchVersion));
  }
  uint64_t n = 0;
  if (!GetCount(d, &n)) return d.status();
  std::vector<StateChange> decoded;
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetChange(d, version, &decoded.emplace_back())) return d.status();
  }
  if (!GetCount(d, &n)) return d.status();
  struct Image {
    InstanceKey instance;
    std::shared_ptr<const WorkloadInfo> info;  // null: no longer tracked
  };
  std::vector<Image> images;
  for (uint64_t i = 0; i < n; ++i) {
    WorkloadKey key;
    std::string uid;
    bool present = false;
    if (!GetKey(d, version, &key) || (version >= 2 && !d.GetString(&uid)) || !d.GetBool(&present)) return d.status();
    std::shared_ptr<WorkloadInfo> info;
    if (present) {
      info = std::make_shared<WorkloadInfo>();
      if (!GetInfo(d, info.get())) return d.status();
      if (version < 2) {
        key = info->key;
        uid = info->workload->uid;
      }
    }
    images.push_back(Image{InstanceOf(key, uid), std::move(info)});
  }
  bool has_policies = false;
  std::shared_ptr<const model::PolicySet> policies;
  std::vector<model::ClusterQueue> terminating;
  std::shared_ptr<const model::PolicyOverlay> overlay;
  if (absl::Status s = GetPolicies(d, what, version >= kBatchDigestVersion, &has_policies, &policies, &terminating,
                                   &overlay);
      !s.ok()) {
    return s;
  }
  if (!d.done()) return absl::DataLossError(absl::StrCat(what, ": ", d.remaining(), " byte(s) left over"));
  // Decoded whole: now fold it in.
  if (version < 2) {
    // The kind of a version 1 key: from this record's images, else from
    // what the state tracks under that name.
    auto migrate = [&](const WorkloadKey& v1) {
      for (const Image& image : images) {
        if (image.info != nullptr && image.instance.key.namespace_name == v1.namespace_name &&
            image.instance.key.name == v1.name) {
          return image.instance.key;
        }
      }
      return MigrateKey(*state, v1);
    };
    for (StateChange& c : decoded) {
      c.key = migrate(c.key);
      if (!c.preemptor.name.empty()) c.preemptor = migrate(c.preemptor);
    }
  }
  for (Image& image : images) {
    if (image.info != nullptr) {
      state->workloads[DurableKey(image.instance)] = std::move(image.info);
    } else if (version >= 2) {
      state->workloads.erase(DurableKey(image.instance));
    } else {
      // Version 1 "gone" named namespace/name: whatever is tracked there.
      for (auto it = state->workloads.begin(); it != state->workloads.end();) {
        const WorkloadInfo* w = it->second.get();
        if (w != nullptr && w->key.namespace_name == image.instance.key.namespace_name &&
            w->key.name == image.instance.key.name) {
          state->workloads.erase(it++);
        } else {
          ++it;
        }
      }
    }
  }
  if (has_policies) {
    state->policies = std::move(policies);
    state->terminating = std::move(terminating);
    state->overlay = std::move(overlay);
  }
  state->position = std::max(state->position, seq);
  if (changes != nullptr) {
    changes->insert(changes->end(), std::make_move_iterator(decoded.begin()), std::make_move_iterator(decoded.end()));
  }
  return absl::OkStatus();
}

std::string EncodeState(const DurableState& state) {
  std::string out;
  Encoder e(&out);
  e.PutU8(kStateVersion);
  PutPolicies(e, state.policies.get(), state.terminating, state.overlay.get());
  // Sorted by key: the same state always encodes to the same bytes.
  std::vector<const std::pair<const std::string, std::shared_ptr<const WorkloadInfo>>*> sorted;
  sorted.reserve(state.workloads.size());
  for (const auto& kv : state.workloads) {
    if (kv.second != nullptr && kv.second->workload != nullptr) sorted.push_back(&kv);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  e.PutVarint(sorted.size());
  for (const auto* kv : sorted) PutInfo(e, *kv->second);
  return out;
}

absl::StatusOr<DurableState> DecodeState(absl::string_view payload, uint64_t position) {
  const std::string what = absl::StrCat("snapshot ", position);
  Decoder d(payload, what);
  uint8_t version = 0;
  if (!d.GetU8(&version)) return d.status();
  if (version < kOldestVersion || version > kStateVersion) {
    return absl::DataLossError(absl::StrCat(what, ": version ", version, "; this gangkeeper reads versions ",
                                            kOldestVersion, " to ", kStateVersion));
  }
  DurableState state;
  state.position = position;
  bool has_policies = false;
  if (absl::Status s = GetPolicies(d, what, version >= kStateDigestVersion, &has_policies, &state.policies,
                                   &state.terminating, &state.overlay);
      !s.ok()) {
    return s;
  }
  uint64_t n = 0;
  if (!GetCount(d, &n)) return d.status();
  for (uint64_t i = 0; i < n; ++i) {
    auto info = std::make_shared<WorkloadInfo>();
    if (!GetInfo(d, info.get())) return d.status();
    std::string key = DurableKey(*info);
    state.workloads[std::move(key)] = std::move(info);
  }
  if (!d.done()) return absl::DataLossError(absl::StrCat(what, ": ", d.remaining(), " byte(s) left over"));
  return state;
}

}  // namespace gangkeeper::store
