// gangkeeper broker: WorkloadCounters, an observer of the durable
// state-change stream that counts admissions, finishes, evictions and
// preemptions by ClusterQueue (Kueue's metric label sets) and reports how
// long each admitted gang waited.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/ports.h"

namespace gangkeeper::broker {

// Counters by ClusterQueue for metrics, with Kueue's label sets: labels are
// ClusterQueues, priority classes and reasons, never workload names.
struct BrokerCounters {
  // (cluster_queue, priority_class)
  std::map<std::pair<std::string, std::string>, uint64_t> admitted;
  std::map<std::pair<std::string, std::string>, uint64_t> finished;
  // (cluster_queue, reason, underlying_cause, priority_class)
  std::map<std::vector<std::string>, uint64_t> evicted;
  // (preempting_cluster_queue, reason)
  std::map<std::pair<std::string, std::string>, uint64_t> preempted;
};

// Thread-safe: the broker's thread writes, metric collectors read.
class WorkloadCounters final : public ChangeObserver {
 public:
  // Called on the broker's thread once an admission is durable, with how
  // long the gang waited since it was created or last requeued (Kueue's
  // admission wait time). Must not block.
  using OnAdmitted = std::function<void(const model::ClusterQueueName& cluster_queue,
                                        const std::string& priority_class, absl::Duration waited)>;

  explicit WorkloadCounters(OnAdmitted on_admitted = nullptr) : on_admitted_(std::move(on_admitted)) {}

  void OnDurable(const std::vector<StateChange>& changes, const Snapshot& after) override;

  BrokerCounters counters() const;

 private:
  const OnAdmitted on_admitted_;
  // When each requeued gang went back to waiting (the broker's thread).
  std::map<WorkloadKey, absl::Time> requeued_at_;
  mutable absl::Mutex mu_;
  BrokerCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::broker
