// gangkeeper broker: the published Snapshot (see snapshot.h): its lookups,
// and Broker::Impl's side that builds it (Publish, the pending orders, the
// durable batches).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "src/broker/broker_impl.h"

namespace gangkeeper::broker {
namespace {

size_t ShardOf(const std::string& key) { return absl::HashOf(key) % Snapshot::kShards; }

// The snapshot's key of a workload: a byte for the kind and one for a pod
// group, then "ns/name" (short, so that most fit in the string itself: a
// snapshot of 100,000 workloads holds 100,000 of them).
std::string SnapshotKey(const WorkloadKey& k) {
  std::string out;
  out.reserve(3 + k.namespace_name.size() + k.name.size());
  out.push_back(static_cast<char>('a' + static_cast<int>(k.kind)));
  out.push_back(k.pod_group ? 'g' : '-');
  absl::StrAppend(&out, k.namespace_name, "/", k.name);
  return out;
}

}  // namespace

// --- Snapshot reads. ---

const std::shared_ptr<const Snapshot::Older>& Snapshot::EmptyOlder() {
  static const auto* empty = new std::shared_ptr<const Older>(std::make_shared<const Older>());
  return *empty;
}

const std::shared_ptr<const Snapshot::ClusterQueueMap>& Snapshot::EmptyQueues() {
  static const auto* empty = new std::shared_ptr<const ClusterQueueMap>(std::make_shared<const ClusterQueueMap>());
  return *empty;
}

const std::shared_ptr<const Snapshot::CohortMap>& Snapshot::EmptyCohorts() {
  static const auto* empty = new std::shared_ptr<const CohortMap>(std::make_shared<const CohortMap>());
  return *empty;
}

const std::shared_ptr<const Snapshot::Finished>& Snapshot::EmptyFinished() {
  static const auto* empty = new std::shared_ptr<const Finished>(std::make_shared<const Finished>());
  return *empty;
}

const WorkloadInfo* Snapshot::Find(const WorkloadKey& key) const {
  if (shards_ == nullptr) return nullptr;
  const std::string k = SnapshotKey(key);
  const Shard& shard = *(*shards_)[ShardOf(k)];
  auto it = shard.find(k);
  if (it == shard.end()) return nullptr;
  // The newest the API server confirmed, as Scheduler::Find.
  if (it->second->workload->unconfirmed && !older_->empty()) {
    if (auto o = older_->find(k); o != older_->end()) {
      for (auto w = o->second.rbegin(); w != o->second.rend(); ++w) {
        if (!(*w)->workload->unconfirmed) return w->get();
      }
    }
  }
  return it->second.get();
}

std::vector<const WorkloadInfo*> Snapshot::Instances(const WorkloadKey& key) const {
  std::vector<const WorkloadInfo*> out;
  if (shards_ == nullptr) return out;
  const std::string k = SnapshotKey(key);
  const Shard& shard = *(*shards_)[ShardOf(k)];
  auto it = shard.find(k);
  if (it == shard.end()) return out;
  if (auto o = older_->find(k); o != older_->end()) {
    for (const auto& w : o->second) out.push_back(w.get());
  }
  out.push_back(it->second.get());
  return out;
}

const WorkloadInfo* Snapshot::FindInstance(const WorkloadKey& key, const std::string& uid) const {
  for (const WorkloadInfo* w : Instances(key)) {
    if (key.pod_group || (w->workload != nullptr && w->workload->uid == uid)) return w;
  }
  return nullptr;
}

std::optional<QueuePosition> Snapshot::Position(const WorkloadKey& key) const {
  const WorkloadInfo* w = Find(key);
  if (w == nullptr || w->phase != Phase::kPending) return std::nullopt;
  const ClusterQueueView* q = FindClusterQueue(w->cluster_queue);
  if (q == nullptr) return std::nullopt;
  QueuePosition pos;
  for (const PendingOrder::Item& item : q->pending->items) {
    ++pos.cluster_queue;
    if (item.key().namespace_name == key.namespace_name && item.local_queue() == w->local_queue) ++pos.local_queue;
    if (item.key() == key) return pos;
  }
  return std::nullopt;
}

std::map<WorkloadKey, QueuePosition> Snapshot::Positions(const model::ClusterQueueName& cq) const {
  std::map<WorkloadKey, QueuePosition> out;
  const ClusterQueueView* q = FindClusterQueue(cq);
  if (q == nullptr) return out;
  std::map<std::pair<std::string, std::string>, int64_t> per_local_queue;
  int64_t n = 0;
  for (const PendingOrder::Item& item : q->pending->items) {
    out[item.key()] = QueuePosition{++n, ++per_local_queue[{item.key().namespace_name, item.local_queue()}]};
  }
  return out;
}

const ClusterQueueView* Snapshot::FindClusterQueue(const model::ClusterQueueName& cq) const {
  auto it = queues_->find(cq);
  return it == queues_->end() ? nullptr : it->second.get();
}

std::optional<WorkloadRecord> Snapshot::Record(const WorkloadKey& key) const {
  const WorkloadInfo* info = Find(key);
  if (info == nullptr) return std::nullopt;
  WorkloadRecord r;
  r.workload = *info->workload;
  r.cluster_queue = info->cluster_queue;
  r.state = StateOf(info->phase);
  r.pod_group_members = info->pod_group_members;
  return r;
}

int64_t Snapshot::PendingIn(const model::ClusterQueueName& cq) const {
  const ClusterQueueView* q = FindClusterQueue(cq);
  return q == nullptr ? 0 : q->status.pending;
}

std::map<model::ResourceName, quantity::Quantity> Snapshot::AdmittedUsage(const model::ClusterQueueName& cq) const {
  const ClusterQueueView* q = FindClusterQueue(cq);
  return q == nullptr ? std::map<model::ResourceName, quantity::Quantity>{} : q->admitted_usage;
}

void Snapshot::ForEachWorkload(const std::function<void(const WorkloadInfo&)>& f) const {
  ForEachShared([&](const std::shared_ptr<const WorkloadInfo>& w) { f(*w); });
}

void Snapshot::ForEachShared(const std::function<void(const std::shared_ptr<const WorkloadInfo>&)>& f) const {
  for (const auto& [key, instances] : *older_) {
    for (const auto& w : instances) f(w);
  }
  if (shards_ == nullptr) return;
  for (const auto& shard : *shards_) {
    for (const auto& [key, newest] : *shard) f(newest);
  }
}

// --- The broker. ---

std::shared_ptr<const PendingOrder> Broker::Impl::BuildOrder(const model::ClusterQueueName& cq) const {
  auto order = std::make_shared<PendingOrder>();
  std::vector<std::shared_ptr<const WorkloadInfo>> pending = scheduler->SharePendingInQueueOrder(cq);
  order->items.reserve(pending.size());
  for (std::shared_ptr<const WorkloadInfo>& w : pending) order->items.push_back(PendingOrder::Item{std::move(w)});
  return order;
}

DurableBatch Broker::Impl::MakeDurableBatch(const std::vector<StateChange>& changes) const {
  DurableBatch batch;
  batch.changes = changes;
  std::set<InstanceKey> seen;
  bool policies_changed = false;
  for (const StateChange& c : changes) {
    if (c.type == StateChange::Type::kPoliciesChanged) {
      policies_changed = true;
      continue;
    }
    if (c.type == StateChange::Type::kReviewed) continue;  // no workload changed
    const InstanceKey instance = InstanceOf(c.key, c.uid);
    if (seen.insert(instance).second) batch.workloads.emplace_back(instance, scheduler->ShareInstance(instance));
  }
  if (policies_changed) {
    batch.policies = scheduler->shared_policies();
    batch.terminating = scheduler->Terminating();
    batch.overlay = overlay;
  }
  return batch;
}

// The snapshot's workloads after the changes to `keys`: copy-on-write per
// shard, and of the side table of older instances; the shard table itself
// is copied only when a key changed.
void Broker::Impl::PublishWorkloads(const std::vector<WorkloadKey>& keys, Snapshot* snap) const {
  if (keys.empty()) return;
  std::map<size_t, std::shared_ptr<Snapshot::Shard>> copies;
  std::shared_ptr<Snapshot::Older> older;  // a copy, once one changes
  for (const WorkloadKey& key : keys) {
    const std::string k = SnapshotKey(key);
    const size_t shard = ShardOf(k);
    auto& copy = copies[shard];
    if (copy == nullptr) copy = std::make_shared<Snapshot::Shard>(*(*snap->shards_)[shard]);
    std::vector<std::shared_ptr<const WorkloadInfo>> instances = scheduler->Instances(key);
    if (instances.empty()) {
      copy->erase(k);
    } else {
      (*copy)[k] = std::move(instances.back());
      instances.pop_back();
    }
    // The older instances: the side table changes only when this key has
    // or had more than one.
    if (!instances.empty() || snap->older_->contains(k)) {
      if (older == nullptr) older = std::make_shared<Snapshot::Older>(*snap->older_);
      if (instances.empty()) {
        older->erase(k);
      } else {
        (*older)[k] = std::move(instances);
      }
    }
  }
  auto table = std::make_shared<Snapshot::ShardTable>(*snap->shards_);
  for (auto& [shard, copy] : copies) (*table)[shard] = std::move(copy);
  snap->shards_ = std::move(table);
  if (older != nullptr) snap->older_ = std::move(older);
}

void Broker::Impl::Publish(absl::Time now) {
  std::shared_ptr<const Snapshot> old = current.load();
  auto snap = std::make_shared<Snapshot>();
  snap->version_ = old->version_ + 1;
  snap->time_ = now;
  snap->durable_position_ = durable_position;
  snap->durable_ = unsynced.empty();
  snap->terminating_ = scheduler->Terminating();
  snap->overlay_ = overlay;
  snap->policies_ = scheduler->shared_policies();
  snap->shards_ = old->shards_;
  snap->older_ = old->older_;
  snap->queues_ = old->queues_;
  snap->cohorts_ = old->cohorts_;
  std::vector<WorkloadKey> keys;
  std::vector<model::ClusterQueueName> dirty_queues;
  bool all = false;
  scheduler->TakeDirty(&keys, &dirty_queues, &all);
  PublishWorkloads(keys, snap.get());
  stats.workloads_published += keys.size();
  snap->stats_ = stats;
  snap->workload_count_ = scheduler->size();
  snap->unconfirmed_count_ = scheduler->unconfirmed();
  // Finished workloads: the newest, bounded by count and age.
  std::vector<std::shared_ptr<const WorkloadInfo>> ended = scheduler->TakeFinished();
  const bool expired = !finished.empty() && now - finished.front()->finished_at > options.keep_finished_for;
  if (!ended.empty() || expired || finished.size() > options.keep_finished) {
    for (auto& w : ended) finished.push_back(std::move(w));
    while (!finished.empty() &&
           (finished.size() > options.keep_finished || now - finished.front()->finished_at > options.keep_finished_for)) {
      finished.pop_front();
    }
    snap->finished_ = std::make_shared<const Snapshot::Finished>(finished.begin(), finished.end());
  } else {
    snap->finished_ = old->finished_;
  }
  // ClusterQueues: a new status for every queue of a tree in which
  // something changed; a new pending order where the queue changed (for
  // long queues at most every kOrderRefresh, so that a burst of arrivals
  // does not rebuild a 10,000-entry order per batch).
  const int64_t now_ms = absl::ToInt64Milliseconds(since_start.Elapsed());
  std::map<model::ClusterQueueName, std::shared_ptr<const ClusterQueueView>> queues;
  std::vector<model::ClusterQueueName> refresh;
  if (all) {
    tree_members.clear();
    tree_of.clear();
    stale_orders.clear();
    for (const ClusterQueueStatus& st : scheduler->ClusterQueues()) {
      const std::string tree = scheduler->TreeOf(st.name);
      tree_of[st.name] = tree;
      tree_members[tree.empty() ? "/" + st.name : tree].push_back(st.name);
      refresh.push_back(st.name);
    }
  } else {
    std::set<std::string> trees;
    for (const model::ClusterQueueName& q : dirty_queues) {
      auto t = tree_of.find(q);
      if (t == tree_of.end()) continue;
      trees.insert(t->second.empty() ? "/" + q : t->second);
      stale_orders.insert(q);
    }
    for (const std::string& t : trees) {
      for (const std::string& q : tree_members[t]) refresh.push_back(q);
    }
    for (const std::string& q : stale_orders) refresh.push_back(q);
    std::sort(refresh.begin(), refresh.end());
    refresh.erase(std::unique(refresh.begin(), refresh.end()), refresh.end());
    // Nothing to refresh: the views stay shared with the last snapshot.
    if (refresh.empty()) {
      current.store(std::move(snap));
      return;
    }
    queues = *old->queues_;
  }
  for (const model::ClusterQueueName& name : refresh) {
    std::optional<ClusterQueueStatus> st = scheduler->ClusterQueue(name);
    if (!st.has_value()) {
      queues.erase(name);
      stale_orders.erase(name);
      continue;
    }
    auto old_view = queues.find(name);
    auto view = std::make_shared<ClusterQueueView>();
    const bool due = all || old_view == queues.end() || st->pending <= kSmallQueue ||
                     now_ms - order_built_ms[name] >= absl::ToInt64Milliseconds(kOrderRefresh);
    if (due && (all || stale_orders.count(name) != 0 || old_view == queues.end())) {
      view->pending = BuildOrder(name);
      order_built_ms[name] = now_ms;
      stale_orders.erase(name);
    } else {
      view->pending = old_view->second->pending;
    }
    for (const auto& [fr, r] : st->resources) {
      view->admitted_usage[fr.resource] = view->admitted_usage[fr.resource].SaturatingAdd(r.usage);
    }
    view->status = *std::move(st);
    queues[name] = std::move(view);
  }
  snap->queues_ = std::make_shared<const Snapshot::ClusterQueueMap>(std::move(queues));
  // Cohorts: whenever a ClusterQueue view was refreshed (usage or policies
  // changed somewhere in a tree).
  Snapshot::CohortMap cohorts;
  for (CohortStatus& c : scheduler->Cohorts()) cohorts.emplace(c.name, std::move(c));
  snap->cohorts_ = std::make_shared<const Snapshot::CohortMap>(std::move(cohorts));
  current.store(std::move(snap));
}

}  // namespace gangkeeper::broker
