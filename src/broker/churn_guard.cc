// gangkeeper broker: ChurnGuard (see churn_guard.h).
#include "src/broker/churn_guard.h"

namespace gangkeeper::broker {

int ChurnGuard::RootOf(const model::ClusterQueueName& cq) const {
  const int node = tree_.ClusterQueueNode(cq);
  return node < 0 ? -1 : tree_.Root(node);
}

void ChurnGuard::WorldChanged(const model::ClusterQueueName& cq) {
  if (cq.empty()) return;
  const int root = RootOf(cq);
  if (root < 0) {
    outside_[cq] = ++seq_;
    return;
  }
  if (static_cast<size_t>(root) >= by_root_.size()) by_root_.resize(static_cast<size_t>(tree_.node_count()), 0);
  by_root_[static_cast<size_t>(root)] = ++seq_;
}

bool ChurnGuard::Guarded(const Entry& candidate) const {
  if (!enabled_ || !candidate.preempted_once || candidate.cinfo().phase == Phase::kEvicting) return false;
  if (last_policy_change_ > candidate.preempted_seq) return false;
  if (!candidate.cinfo().admission.has_value()) return false;
  const model::ClusterQueueName& cq = candidate.cinfo().admission->cluster_queue;
  uint64_t last_change = 0;
  if (const int root = RootOf(cq); root >= 0) {
    if (static_cast<size_t>(root) < by_root_.size()) last_change = by_root_[static_cast<size_t>(root)];
  } else if (!cq.empty()) {
    if (auto it = outside_.find(cq); it != outside_.end()) last_change = it->second;
  }
  if (last_change > candidate.preempted_seq) return false;
  ++guarded_;
  return true;
}

}  // namespace gangkeeper::broker
