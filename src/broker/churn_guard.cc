// gangkeeper broker: ChurnGuard (see churn_guard.h).
#include "src/broker/churn_guard.h"

#include "absl/strings/str_cat.h"

namespace gangkeeper::broker {

std::string ChurnGuard::TreeKey(const model::ClusterQueueName& cq) const {
  if (cq.empty()) return "";
  const int node = tree_.ClusterQueueNode(cq);
  if (node < 0) return absl::StrCat("cq:", cq);
  return tree_.Parent(node) < 0 ? absl::StrCat("cq:", cq) : tree_.NodeName(tree_.Root(node));
}

void ChurnGuard::WorldChanged(const model::ClusterQueueName& cq) {
  const std::string tree = TreeKey(cq);
  if (!tree.empty()) last_change_[tree] = ++seq_;
}

bool ChurnGuard::Guarded(const Entry& candidate) const {
  if (!enabled_ || !candidate.preempted_once || candidate.cinfo().phase == Phase::kEvicting) return false;
  if (last_policy_change_ > candidate.preempted_seq) return false;
  if (!candidate.cinfo().admission.has_value()) return false;
  auto it = last_change_.find(TreeKey(candidate.cinfo().admission->cluster_queue));
  if (it != last_change_.end() && it->second > candidate.preempted_seq) return false;
  ++guarded_;
  return true;
}

}  // namespace gangkeeper::broker
