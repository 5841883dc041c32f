// gangkeeper: the broker's Actuator on the Kubernetes API (DESIGN §2).
//
// Release of an admitted gang:
//   - a job kind (Job, Kubeflow, JobSet, RayJob, RayCluster): one JSON patch
//     that tests the object's uid, adds the flavors' nodeSelector entries
//     and tolerations to the pod template of every assigned pod set, writes
//     the annotation gangkeeper.io/admitted-flavors (flavors and exactly what
//     was added) and sets suspend to false;
//   - Pods (a pod group or a single pod): first every pod gets the
//     nodeSelector and tolerations while it is still gated (allowed on a
//     gated pod), then the gangkeeper.io/admission gate is removed pod by
//     pod. A failure in the first phase leaves every pod gated. The API
//     server never lets a gate be added back, so a failure in the second
//     phase deletes the pods already ungated (their owner recreates them,
//     gated by the webhook) and the release is reported failed.
// Suspend of a preempted gang:
//   - a job kind: suspend=true; for a Job whose status.startTime is set,
//     clear it through /status (the template is immutable until then); then
//     take out of the templates exactly what release added, and the
//     annotation. Reported stopped once all three went through.
//   - Pods: deleted (a running pod cannot be gated again).
// Every patch starts with a `test` of metadata.uid, so a deleted and
// recreated object of the same name is never touched; a release of a
// released gang and a suspend of a suspended one change nothing.
//
// With dry_run (--kube none) nothing is sent: the actuator works out what it
// would send from the workload alone, reports success, and that text is
// kept with the workload (API) and the audit log.
//
// Orders are carried out on worker threads, in order per workload.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/kube/client.h"

namespace gangkeeper::kube {

// One order carried out (or given up), for metrics.
struct ActuationOutcome {
  const char* action = "release";  // release, suspend
  std::string kind;                // the workload's kind: Job, PyTorchJob, Pod, ...
  bool ok = true;
  absl::Duration took;             // from the order to the API's last answer
};

struct ActuatorOptions {
  bool dry_run = false;
  int workers = 2;
  // Re-reads and re-patches when a `test` fails because the object changed
  // under us (422), at most this many times per order.
  int max_conflicts = 4;
  // A release that finds no object (the webhook registered it, the API
  // server has not stored it yet, usually a few milliseconds later) looks
  // again this many times before it fails: first after a tenth of
  // `not_found_wait`, the waits doubling up to `not_found_wait`.
  int not_found_retries = 12;
  absl::Duration not_found_wait = absl::Milliseconds(200);
  // Called on a worker thread after each attempt at an order; may be empty.
  std::function<void(const ActuationOutcome&)> observe;
  // Several replicas (etcd): asked before each order and each write to the
  // API server; while false nothing is sent and the order is dropped
  // unanswered (this replica no longer leads; the new leader sends again
  // what was not confirmed). Empty: always send.
  std::function<bool()> may_send;
  // Required: times each order for `observe`. Must outlive the actuator.
  const base::Clock* clock = nullptr;
};

// Where the actuator's answers go (Bind(Broker*) wires them to the broker).
struct ActuatorCallbacks {
  std::function<void(const broker::WorkloadKey& key, const std::string& uid, absl::Status result,
                     const std::string& detail)>
      released;
  std::function<void(const broker::WorkloadKey& key, const std::string& uid, const std::string& detail)> stopped;
};

class KubeActuator final : public broker::Actuator {
 public:
  // `client` may be null with dry_run; it must outlive the actuator.
  KubeActuator(Client* client, ActuatorOptions options);
  ~KubeActuator() override;  // Stop()
  KubeActuator(const KubeActuator&) = delete;
  KubeActuator& operator=(const KubeActuator&) = delete;

  // Where the answers go. Call before the broker starts.
  void Bind(broker::EventQueue* events);
  void Bind(ActuatorCallbacks callbacks);
  void Release(const broker::ReleaseOrder& order) override;
  void Suspend(const broker::SuspendOrder& order) override;
  // Finishes the order in hand, drops the rest, joins the workers.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::kube
