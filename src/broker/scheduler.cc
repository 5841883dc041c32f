// gangkeeper broker: Scheduler (see scheduler.h) — construction, restore
// and the reads the Broker copies into its snapshots. The events are in
// events.cc, the scheduling cycle in cycle.cc, the invariant check in
// invariants.cc; the parts they share in queues.h and holds.h.
#include "gangkeeper/broker/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "src/broker/queues.h"
#include "src/broker/scheduler_state.h"

namespace gangkeeper::broker {

// The broker holds one WorkloadInfo and one Workload per tracked workload,
// each in one allocation with its shared_ptr control block (16 bytes).
// With these sizes they fill jemalloc's 768- and 512-byte size classes
// (and glibc's chunks without waste); a field more would put each in the
// next class, 128 bytes up, ~25 MB at 100,000 workloads (BM_Memory100k,
// DESIGN §10: < 250 MB). Group new small fields with the others, or make
// room first.
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(WorkloadInfo) <= 752, "WorkloadInfo grew past its size class: see the comment above");
static_assert(sizeof(workload::Workload) <= 496, "Workload grew past its size class: see the comment above");
#endif

namespace {

using quantity::Quantity;

constexpr char kFairSharingLabel[] = "gangkeeper.io/fair-sharing";

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending: return "pending";
    case Phase::kReserved: return "reserved";
    case Phase::kRunning: return "running";
    case Phase::kEvicting: return "evicting";
    case Phase::kFinished: return "finished";
  }
  return "pending";
}

WorkloadState StateOf(Phase phase) {
  switch (phase) {
    case Phase::kPending: return WorkloadState::kPending;
    case Phase::kFinished: return WorkloadState::kFinished;
    default: return WorkloadState::kAdmitted;
  }
}

const char* PendingReasonCodeName(PendingReason::Code code) {
  switch (code) {
    case PendingReason::Code::kQueued: return "Queued";
    case PendingReason::Code::kWaitingForQuota: return "WaitingForQuota";
    case PendingReason::Code::kExceedsMaxQuota: return "ExceedsMaxQuota";
    case PendingReason::Code::kNoMatchingFlavor: return "NoMatchingFlavor";
    case PendingReason::Code::kWaitingForPreemption: return "WaitingForPreemptedWorkloads";
    case PendingReason::Code::kPreemptionNoCandidates: return "PreemptionNoCandidates";
    case PendingReason::Code::kBlockedByHead: return "BlockedByHead";
    case PendingReason::Code::kStopped: return "Stopped";
    case PendingReason::Code::kInactive: return "Inactive";
    case PendingReason::Code::kNamespaceMismatch: return "NamespaceMismatch";
    case PendingReason::Code::kIncompletePodGroup: return "IncompletePodGroup";
    case PendingReason::Code::kReleaseFailed: return "ReleaseFailed";
    case PendingReason::Code::kRequeueBackoff: return "RequeueBackoff";
    case PendingReason::Code::kDeactivated: return "Deactivated";
    case PendingReason::Code::kUnconfirmed: return "Unconfirmed";
  }
  return "Queued";
}

const char* StateChangeTypeName(StateChange::Type type) {
  switch (type) {
    case StateChange::Type::kRegistered: return "registered";
    case StateChange::Type::kUpdated: return "updated";
    case StateChange::Type::kRemoved: return "removed";
    case StateChange::Type::kAdmitted: return "admitted";
    case StateChange::Type::kReleased: return "released";
    case StateChange::Type::kReleaseFailed: return "release_failed";
    case StateChange::Type::kEvicted: return "evicted";
    case StateChange::Type::kRequeued: return "requeued";
    case StateChange::Type::kFinished: return "finished";
    case StateChange::Type::kPoliciesChanged: return "policies_changed";
    case StateChange::Type::kReviewed: return "reviewed";
  }
  return "registered";
}

bool Scheduler::State::FairSharingFor(const model::ClusterQueueName& cq) const {
  if (options.fair_sharing || policies->configuration.fair_sharing) return true;
  const int node = tree.ClusterQueueNode(cq);
  if (node < 0 || tree.Parent(node) < 0) return false;
  auto c = policies->cohorts.find(tree.NodeName(tree.Root(node)));
  if (c == policies->cohorts.end()) return false;
  auto l = c->second.meta.labels.find(kFairSharingLabel);
  return l != c->second.meta.labels.end() && l->second == "true";
}

Scheduler::Scheduler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(std::shared_ptr<const model::PolicySet> policies,
                                                             SchedulerOptions options) {
  if (policies == nullptr) policies = std::make_shared<const model::PolicySet>();
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(*policies);
  if (!tree.ok()) return tree.status();
  auto state = std::make_unique<State>(options);
  state->policies = std::move(policies);
  state->tree = *std::move(tree);
  for (const auto& [name, cq] : state->policies->cluster_queues) state->queues[name];
  state->IndexQueues();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(state)));
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Restore(
    std::shared_ptr<const model::PolicySet> policies, const std::vector<model::ClusterQueue>& terminating,
    std::vector<std::shared_ptr<const WorkloadInfo>> workloads, SchedulerOptions options) {
  if (policies == nullptr) policies = std::make_shared<const model::PolicySet>();
  std::map<model::ClusterQueueName, model::ClusterQueue> kept;
  for (const model::ClusterQueue& cq : terminating) {
    if (policies->cluster_queues.count(cq.meta.name) == 0) kept.emplace(cq.meta.name, cq);
  }
  model::PolicySet with_terminating;
  if (!kept.empty()) {
    with_terminating = *policies;
    for (const auto& [name, cq] : kept) with_terminating.cluster_queues.emplace(name, cq);
  }
  absl::StatusOr<ResourceTree> tree = ResourceTree::Build(kept.empty() ? *policies : with_terminating);
  if (!tree.ok()) return tree.status();
  auto state = std::make_unique<State>(options);
  State& s = *state;
  s.policies = std::move(policies);
  s.tree = *std::move(tree);
  s.terminating = std::move(kept);
  for (const auto& [name, cq] : s.policies->cluster_queues) s.queues[name];
  for (const auto& [name, cq] : s.terminating) s.queues[name];
  s.IndexQueues();
  // Registration order (the last tie-break of queue order): creation time,
  // then name, so that a restore is deterministic.
  workloads.erase(std::remove_if(workloads.begin(), workloads.end(),
                                 [](const std::shared_ptr<const WorkloadInfo>& w) {
                                   return w == nullptr || w->workload == nullptr || w->phase == Phase::kFinished;
                                 }),
                  workloads.end());
  std::sort(workloads.begin(), workloads.end(), [](const auto& a, const auto& b) {
    if (a->created_at != b->created_at) return a->created_at < b->created_at;
    if (a->key != b->key) return a->key < b->key;
    return a->workload->uid < b->workload->uid;
  });
  for (const std::shared_ptr<const WorkloadInfo>& info : workloads) {
    const InstanceKey instance = InstanceOf(info->key, info->workload->uid);
    if (FindEntry(s, instance) != nullptr) continue;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    e->seq = s.next_seq++;
    e->dirty = &s.dirty_workloads;
    // The caller hands over its images: one held nowhere else is taken as
    // it is (it was built mutable by the decoder), others are copied.
    std::shared_ptr<WorkloadInfo> mine = info.use_count() == 1 ? std::const_pointer_cast<WorkloadInfo>(info)
                                                               : std::make_shared<WorkloadInfo>(*info);
    mine->reason = PendingReason{};
    // Partial admission: the durable state keeps a Job's annotation, not
    // its minimum count.
    if (mine->workload->annotations.count(std::string(workload::kJobMinParallelismAnnotation)) != 0) {
      if (workload::Workload copy = *mine->workload; workload::RestoreMinCounts(&copy)) {
        mine->workload = std::make_shared<const workload::Workload>(std::move(copy));
      }
    }
    e->info_ptr = std::move(mine);
    const workload::Workload& w = *e->cinfo().workload;
    if (!w.pod_group_name.empty()) {
      e->group = std::make_unique<Entry::Group>();
      if (e->cinfo().pod_group != nullptr) {
        e->group->pod_sets = e->cinfo().pod_group->pod_sets;
        e->group->pods.insert(e->cinfo().pod_group->pods.begin(), e->cinfo().pod_group->pods.end());
      } else {
        e->group->pod_sets = w.pod_sets;
        for (size_t i = 0; i < e->group->pod_sets.size(); ++i) e->group->pod_sets[i].name = absl::StrCat("group-", i);
        e->group->pods.insert(w.name);
        SyncPodGroup(e);
      }
    }
    e->SetOrderKey();
    s.dirty_workloads.insert(e->cinfo().key);
    s.entries[instance.key].push_back(std::move(entry));
    ++s.instance_count;
    if (e->cinfo().workload->unconfirmed) ++s.unconfirmed_count;
    if (HoldsQuota(e->cinfo().phase) && e->cinfo().admission.has_value()) {
      const Assignment& a = *e->cinfo().admission;
      absl::Status held = s.queues.count(a.cluster_queue) != 0 ? s.tree.AddUsage(a.cluster_queue, a.usage)
                                                                 : absl::NotFoundError(absl::StrCat(
                                                                       "ClusterQueue ", a.cluster_queue, " is gone"));
      if (held.ok()) {
        s.queues[a.cluster_queue].admitted.insert(e);
        // Its readiness is not journaled: a restored gang counts as ready
        // (a drop from here on waits recoveryTimeout).
        e->info().pods_ready = true;
        e->info().was_ready = true;
        continue;
      }
      e->info().actuation = absl::StrCat("its quota could not be restored after a restart (", held.message(),
                                         "); queued again");
      e->info().admission.reset();
    }
    e->info().phase = Phase::kPending;
    if (RestorePodsReadyBackoff(s, e)) continue;  // deactivated, or backing off (pods_ready.cc)
    Enqueue(s, e);
  }
  NoteOverQuota(s);
  s.all_queues_dirty = true;
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(state)));
}

std::vector<model::ClusterQueue> Scheduler::Terminating() const {
  std::vector<model::ClusterQueue> out;
  for (const auto& [name, cq] : state_->terminating) {
    auto q = state_->queues.find(name);
    if (q != state_->queues.end() && !q->second.admitted.empty()) out.push_back(cq);
  }
  return out;
}

size_t Scheduler::stale_reasons() const { return state_->stale_reasons.size(); }

size_t Scheduler::RefreshReasons() { return broker::RefreshReasons(*state_); }

void Scheduler::TakeDirty(std::vector<WorkloadKey>* workloads, std::vector<model::ClusterQueueName>* queues,
                          bool* all_queues) {
  State& s = *state_;
  workloads->assign(s.dirty_workloads.begin(), s.dirty_workloads.end());
  queues->assign(s.dirty_queues.begin(), s.dirty_queues.end());
  *all_queues = s.all_queues_dirty;
  s.dirty_workloads.clear();
  s.dirty_queues.clear();
  s.all_queues_dirty = false;
}

std::vector<StateChange> Scheduler::TakeChanges() {
  std::vector<StateChange> out;
  out.swap(state_->changes);
  return out;
}

std::vector<std::shared_ptr<const WorkloadInfo>> Scheduler::TakeFinished() {
  std::vector<std::shared_ptr<const WorkloadInfo>> out;
  out.swap(state_->finished);
  return out;
}

int64_t Scheduler::guarded_total() const { return state_->churn.guarded(); }

const model::PolicySet& Scheduler::policies() const { return *state_->policies; }
std::shared_ptr<const model::PolicySet> Scheduler::shared_policies() const { return state_->policies; }

std::vector<std::shared_ptr<const WorkloadInfo>> Scheduler::Instances(const WorkloadKey& key) const {
  std::vector<std::shared_ptr<const WorkloadInfo>> out;
  auto it = state_->entries.find(key);
  if (it == state_->entries.end()) return out;
  out.reserve(it->second.size());
  for (const std::unique_ptr<Entry>& e : it->second) out.push_back(e->info_ptr);
  return out;
}

std::shared_ptr<const WorkloadInfo> Scheduler::ShareInstance(const InstanceKey& instance) const {
  const Entry* e = FindEntry(*state_, instance);
  return e == nullptr ? nullptr : e->info_ptr;
}

const WorkloadInfo* Scheduler::Find(const WorkloadKey& key) const {
  const Entry* e = Newest(*state_, key);
  return e == nullptr ? nullptr : &e->cinfo();
}

const WorkloadInfo* Scheduler::FindInstance(const InstanceKey& instance) const {
  const Entry* e = FindEntry(*state_, instance);
  return e == nullptr ? nullptr : &e->cinfo();
}

std::vector<const WorkloadInfo*> Scheduler::Workloads() const {
  std::vector<const WorkloadInfo*> out;
  out.reserve(state_->instance_count);
  ForEachEntry(*state_, [&](const Entry* e) { out.push_back(&e->cinfo()); });
  return out;
}

size_t Scheduler::size() const { return state_->instance_count; }
size_t Scheduler::unconfirmed() const { return state_->unconfirmed_count; }

namespace {

// Calls `f` with the pending entries of `cq`, active and inadmissible
// together, in queue order.
template <typename F>
void ForEachPendingInOrder(const State& s, const model::ClusterQueueName& cq, F f) {
  auto q = s.queues.find(cq);
  if (q == s.queues.end()) return;
  auto a = q->second.active.begin();
  auto b = q->second.inadmissible.begin();
  QueueOrder before;
  while (a != q->second.active.end() || b != q->second.inadmissible.end()) {
    if (b == q->second.inadmissible.end() || (a != q->second.active.end() && before(*a, *b))) {
      f(**a++);
    } else {
      f(**b++);
    }
  }
}

}  // namespace

std::vector<const WorkloadInfo*> Scheduler::PendingInQueueOrder(const model::ClusterQueueName& cq) const {
  std::vector<const WorkloadInfo*> out;
  ForEachPendingInOrder(*state_, cq, [&](const Entry& e) { out.push_back(&e.cinfo()); });
  return out;
}

std::vector<std::shared_ptr<const WorkloadInfo>> Scheduler::SharePendingInQueueOrder(
    const model::ClusterQueueName& cq) const {
  std::vector<std::shared_ptr<const WorkloadInfo>> out;
  ForEachPendingInOrder(*state_, cq, [&](const Entry& e) { out.push_back(e.info_ptr); });
  return out;
}

std::optional<ClusterQueueStatus> Scheduler::ClusterQueue(const model::ClusterQueueName& name) const {
  const State& s = *state_;
  auto q = s.queues.find(name);
  if (q == s.queues.end()) return std::nullopt;
  ClusterQueueStatus st;
  st.name = name;
  const int node = s.tree.ClusterQueueNode(name);
  if (const model::ClusterQueue* cq = LiveClusterQueue(s, name)) st.cohort = cq->cohort;
  if (std::optional<PendingReason> blocked = ClusterQueueBlocked(s, name)) {
    st.active = false;
    st.inactive_reason = blocked->message;
  }
  st.pending = static_cast<int64_t>(q->second.active.size() + q->second.inadmissible.size());
  st.pending_inadmissible = static_cast<int64_t>(q->second.inadmissible.size());
  st.admitted = static_cast<int64_t>(q->second.admitted.size());
  if (node >= 0) {
    for (const FlavorResource& fr : s.tree.FlavorResources(node)) {
      FlavorResourceStatus& r = st.resources[fr];
      const Quota& quota = s.tree.QuotaAt(node, fr);
      r.nominal = quota.nominal;
      r.borrowing_limit = quota.borrowing_limit;
      r.lending_limit = quota.lending_limit;
      r.usage = s.tree.UsageAt(node, fr);
      r.borrowed = s.tree.Borrowing(name, fr);
      r.available = s.tree.Available(name, fr);
      absl::StatusOr<Quantity> idle = r.nominal.Sub(r.usage);
      // Lent: idle nominal quota that other queues of the cohort use now.
      if (idle.ok() && !idle->IsNegative() && s.tree.Parent(node) >= 0) {
        // What the other ClusterQueues of the tree borrow, walked down from the root.
        Quantity others_borrow;
        std::vector<int> stack{s.tree.Root(node)};
        while (!stack.empty()) {
          const int n = stack.back();
          stack.pop_back();
          if (s.tree.IsClusterQueue(n)) {
            if (n == node) continue;
            absl::StatusOr<Quantity> b = s.tree.UsageAt(n, fr).Sub(s.tree.QuotaAt(n, fr).nominal);
            if (b.ok() && !b->IsNegative()) others_borrow = others_borrow.SaturatingAdd(*b);
            continue;
          }
          for (int c : s.tree.Children(n)) stack.push_back(c);
        }
        r.lent = std::min(*idle, others_borrow);
      }
    }
    st.weighted_share = static_cast<double>(s.tree.DominantResourceShare(node, {}));
  }
  return st;
}

std::vector<CohortStatus> Scheduler::Cohorts() const {
  const ResourceTree& tree = state_->tree;
  std::vector<CohortStatus> out;
  for (int n = 0; n < tree.node_count(); ++n) {
    if (tree.IsClusterQueue(n)) continue;
    CohortStatus c;
    c.name = tree.NodeName(n);
    if (tree.Parent(n) >= 0) c.parent = tree.NodeName(tree.Parent(n));
    c.weighted_share = static_cast<double>(tree.DominantResourceShare(n, {}));
    out.push_back(std::move(c));
  }
  return out;
}

std::string Scheduler::TreeOf(const model::ClusterQueueName& cq) const {
  const int node = state_->tree.ClusterQueueNode(cq);
  if (node < 0 || state_->tree.Parent(node) < 0) return "";
  return state_->tree.NodeName(state_->tree.Root(node));
}

std::vector<ClusterQueueStatus> Scheduler::ClusterQueues() const {
  std::vector<ClusterQueueStatus> out;
  for (const auto& [name, q] : state_->queues) {
    if (std::optional<ClusterQueueStatus> st = ClusterQueue(name)) out.push_back(*std::move(st));
  }
  return out;
}

}  // namespace gangkeeper::broker
