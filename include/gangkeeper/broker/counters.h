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
  // Per LocalQueue: (name, namespace, priority_class)
  std::map<std::vector<std::string>, uint64_t> local_admitted;
  std::map<std::vector<std::string>, uint64_t> local_finished;
  // (name, namespace, reason, underlying_cause, priority_class)
  std::map<std::vector<std::string>, uint64_t> local_evicted;
  // Admissions in each cohort's subtree: (cohort, priority_class), counted
  // for every cohort above the ClusterQueue when the admission was made.
  std::map<std::pair<std::string, std::string>, uint64_t> cohort_admitted;
};

// An admission made durable, for the wait-time histograms.
struct AdmittedGang {
  model::ClusterQueueName cluster_queue;
  std::string namespace_name;
  std::string local_queue;
  std::string priority_class;
  absl::Duration waited;  // since creation or the last requeue
};

// Thread-safe: the broker's thread writes, metric collectors read.
class WorkloadCounters final : public ChangeObserver {
 public:
  // Called on the broker's thread once an admission is durable, with how
  // long the gang waited since it was created or last requeued (Kueue's
  // admission wait time). Must not block.
  using OnAdmitted = std::function<void(const AdmittedGang& gang)>;

  explicit WorkloadCounters(OnAdmitted on_admitted = nullptr) : on_admitted_(std::move(on_admitted)) {}

  void OnDurable(const std::vector<StateChange>& changes, const Snapshot& after) override;

  BrokerCounters counters() const;

 private:
  // Counts `c` of a workload of `priority_class` in `local_queue`.
  void Count(const StateChange& c, const std::string& priority_class, const std::string& local_queue,
             const Snapshot& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OnAdmitted on_admitted_;
  // When each requeued gang went back to waiting (the broker's thread).
  std::map<WorkloadKey, absl::Time> requeued_at_;
  mutable absl::Mutex mu_;
  BrokerCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::broker
