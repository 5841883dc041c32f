// gangkeeper broker: the interfaces the broker consumes (DESIGN §2, STYLE
// §6.1: store and kube implement them) and the orders it gives through them.
//
//   Actuator        carries out releases and suspensions in the cluster
//   StateSink       makes a batch of state changes durable
//   ChangeObserver  sees every durable batch (counters, metrics)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::broker {

// What the actuator must do to let an admitted gang run: unsuspend it (or
// remove the scheduling gate) with, per pod set, the node labels and
// tolerations of the flavors it was given.
struct ReleaseOrder {
  WorkloadKey key;
  std::string uid;
  std::shared_ptr<const workload::Workload> workload;
  Assignment assignment;
  // When the quota was reserved: recorded on the object (the
  // gangkeeper.io/admitted-flavors annotation) so that an adoption after a
  // restart keeps it.
  absl::Time admitted_at;
  struct PodSetPlacement {
    std::string name;
    std::map<std::string, std::string> node_selector;  // the flavors' nodeLabels
    std::vector<model::Toleration> tolerations;        // the flavors' tolerations
  };
  std::vector<PodSetPlacement> placements;  // one per pod set, in order
};

// Suspend (or re-gate) a whole gang: preempted, or its queue is drained.
struct SuspendOrder {
  WorkloadKey key;
  std::string uid;
  std::shared_ptr<const workload::Workload> workload;
  std::string reason;   // InClusterQueue, InCohortReclamation, ..., Stopped
  std::string message;  // for events and the audit log
  WorkloadKey preemptor;
};

// Carries out admissions and preemptions in the cluster (kube::KubeActuator
// does it on the Kubernetes API). Called on the broker thread; must not
// block: do the work elsewhere and answer with Event::ReleaseResult /
// Event::Stopped (broker/event.h). When an order is given, the broker's
// published snapshot already shows the change that gave it (the instance
// reserved, or evicting), so an actuator may check an order against the
// newest snapshot before it carries it out. The broker does not give an
// order again while it runs (only after a restart or a change of leader):
// an order left unanswered must be one whose answer it would ignore.
class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual void Release(const ReleaseOrder& order) = 0;
  virtual void Suspend(const SuspendOrder& order) = 0;
};

// Makes state changes durable (implemented by the store module: the journal
// in --data-dir, the journal in etcd). The broker acknowledges no event, and
// actuates nothing, before Append returned OK for the batch.
class StateSink {
 public:
  virtual ~StateSink() = default;
  // Durable, in order, when this returns OK: the position of the batch in
  // the sink (a journal record number; 0 for sinks without positions).
  [[nodiscard]] virtual absl::StatusOr<uint64_t> Append(const DurableBatch& batch) = 0;
  // Called on the broker's thread after an Append that returned OK, once
  // the batch's orders went out and before its events are acknowledged:
  // for what the batch needs done before it is acknowledged but what its
  // orders do not wait for (the file journal's audit events, which the next
  // start rebuilds from the journal if the process dies first). Default:
  // nothing.
  virtual void Complete() {}
};

// Sees the state-change stream: every batch of changes once it is durable
// (a leader's alone; a follower makes nothing durable). Called on the
// broker's thread after the batch's snapshot is published (`after`: the
// workloads as the changes left them, those that just finished in
// Snapshot::finished()) and before the batch is acknowledged. Must not
// block.
class ChangeObserver {
 public:
  virtual ~ChangeObserver() = default;
  virtual void OnDurable(const std::vector<StateChange>& changes, const Snapshot& after) = 0;
};

}  // namespace gangkeeper::broker
