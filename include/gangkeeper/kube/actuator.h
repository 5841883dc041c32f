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
// A release reads the object first (GET) unless the reconciler kept the
// held object's text (ActuatorOptions::held_objects); either way the patch
// is built from one stored version and guarded by it.
// Every patch starts with a `test` of metadata.uid, so a deleted and
// recreated object of the same name is never touched; a release of a
// released gang and a suspend of a suspended one change nothing.
//
// With dry_run (--kube none) nothing is sent: the actuator works out what it
// would send from the workload alone, reports success, and that text is
// kept with the workload (API) and the audit log.
//
// Orders are carried out on worker threads (ActuatorOptions::workers), one
// at a time per workload and in the order given for it; unrelated workloads
// go on while one of them waits for a slow API server. An order is not sent
// when something given later makes it pointless, or when the broker no
// longer wants it (see Queue and drop rules below).
//
// Queue and drop rules, per workload (namespace/name) and uid:
//   - a suspend given while releases of the same uid are still queued (not
//     yet in hand) takes their place: those releases are never sent. The
//     object was never released, so the suspend finds it suspended and
//     changes nothing (see above); the broker, which evicted the gang,
//     waits only for the suspend's answer.
//   - a newer release replaces a queued release, and a newer suspend a
//     queued suspend, of the same uid: one is sent, with the newer content.
//   - right before an order is carried out, `release_wanted` /
//     `suspend_wanted` are asked; an order they refuse (its workload
//     finished, was deleted, or its phase moved on) is dropped unanswered.
//   Orders of other uids and other workloads keep their places, so what is
//   sent for a workload is always a subsequence of what was given for it.
//
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
#include "gangkeeper/kube/held_objects.h"

namespace gangkeeper::kube {

// One order carried out (or given up, or dropped unsent), for metrics.
struct ActuationOutcome {
  const char* action = "release";  // release, suspend
  std::string kind;                // the workload's kind: Job, PyTorchJob, Pod, ...
  bool ok = true;
  absl::Duration took;             // from the order to the API's last answer
  // Set when nothing was sent for the order: "stale" (the broker no longer
  // wanted it) or "superseded" (a later order for the same object took its
  // place in the queue). `ok` and `took` then mean nothing.
  const char* dropped = nullptr;
};

// What the actuator did with the orders it was given, since it started.
struct ActuatorStats {
  uint64_t given = 0;             // orders given (Release and Suspend calls)
  uint64_t carried_out = 0;       // attempts made (a retried suspend counts each time)
  uint64_t stale_releases = 0;    // dropped before sending: release_wanted said no
  uint64_t stale_suspends = 0;    // dropped before sending: suspend_wanted said no
  uint64_t coalesced_releases = 0;  // queued releases a later suspend took the place of
  uint64_t merged = 0;            // queued orders a newer one of the same kind replaced
  // Release patches built from the object the reconciler read last
  // (HeldObjects) instead of a GET, and those of them the API server
  // refused because the object had changed since (then read and sent again).
  uint64_t unread_releases = 0;
  uint64_t unread_misses = 0;
};

struct ActuatorOptions {
  bool dry_run = false;
  // Threads that carry out orders. Each waits for the API server while it
  // holds an order, so this many workloads can wait on a slow server before
  // the others queue behind them; orders of one workload never run at
  // once, whatever the count. At the end of Kueue's baseline shape ~1,500
  // releases a second come due at once; with 8 workers they queued behind
  // each other for p50 16 / p99 120 ms (each a PATCH round trip on a busy
  // machine), with 24 for p50 7 / p99 57 ms.
  int workers = 24;
  // Re-reads and re-patches when a `test` fails because the object changed
  // under us (422), at most this many times per order.
  int max_conflicts = 4;
  // A release that finds no object (the webhook registered it, the API
  // server has not stored it yet, usually a few milliseconds later) looks
  // again this many times before it fails: first after a tenth of
  // `not_found_wait`, the waits doubling up to `not_found_wait`.
  int not_found_retries = 12;
  absl::Duration not_found_wait = absl::Milliseconds(200);
  // Called on a worker thread after each attempt at an order and for each
  // stale order dropped; for an order superseded in the queue, on the
  // thread that gave the later order (the broker's). Must not block; may be
  // empty.
  std::function<void(const ActuationOutcome&)> observe;
  // Several replicas (etcd): asked before each order and each write to the
  // API server; while false nothing is sent and the order is dropped
  // unanswered (this replica no longer leads; the new leader sends again
  // what was not confirmed). Empty: always send.
  std::function<bool()> may_send;
  // Asked on a worker thread right before an order is carried out (after
  // may_send; again before each retry of a suspend): false drops the order
  // unanswered and sends nothing for it. The caller answers from the
  // broker's state (see OrderWanted); an empty function wants every order.
  // Dropping unanswered is safe only for an order whose answer the broker
  // would ignore: a release of an instance that is not reserved, a
  // suspension of one that is not evicting (Scheduler::ReleaseSucceeded /
  // ReleaseFailed / Stopped drop answers for other phases as stale), since
  // the broker never sends an order again while it runs.
  std::function<bool(const broker::ReleaseOrder&)> release_wanted;
  std::function<bool(const broker::SuspendOrder&)> suspend_wanted;
  // Required: times each order for `observe`. Must outlive the actuator.
  const base::Clock* clock = nullptr;
  // The held job objects as the reconciler read them last: a release of
  // one kept there is built from it and sent without a GET, under the same
  // uid and resourceVersion guards (a 422 reads the object and goes on as
  // usual). May be null (every release reads first). Must outlive the
  // actuator.
  HeldObjects* held_objects = nullptr;
};

// Where the actuator's answers go (Bind(Broker*) wires them to the broker).
struct ActuatorCallbacks {
  std::function<void(const broker::WorkloadKey& key, const std::string& uid, absl::Status result,
                     const std::string& detail)>
      released;
  std::function<void(const broker::WorkloadKey& key, const std::string& uid, const std::string& detail)> stopped;
};

// Whether the broker whose state `snapshot` is still wants an order for
// instance `uid` of `key` carried out: a release while that instance holds
// its reservation (reserved, or running for a re-release of a replaced
// member), a suspension while it is evicting (the only phase in which the
// broker waits for Stopped). A finished, deleted or replaced instance wants
// neither. Relies on the broker publishing a change's snapshot before it
// gives the change's orders (broker/ports.h, Actuator).
bool OrderWanted(const broker::Snapshot& snapshot, const broker::WorkloadKey& key, const std::string& uid,
                 bool release);

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
  // Finishes the orders in hand, drops the rest, joins the workers.
  void Stop();
  ActuatorStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::kube
