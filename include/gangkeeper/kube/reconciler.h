// gangkeeper: keeps the broker in step with the cluster (DESIGN §2).
//
// One thread per managed kind lists the kind (all namespaces, objects with
// the queue label), then watches from the list's resourceVersion; a watch
// that ends is resumed from the last resourceVersion seen, and one that
// expired (the ERROR event with code 410) starts over with a list. From
// each object it learns what the webhook could not see:
//   - objects created while gangkeeper was down are registered (pending);
//   - objects found running are adopted: released by gangkeeper before a
//     restart (their gangkeeper.io/admitted-flavors annotation gives the
//     flavors back), or unsuspended by someone else (logged as a warning and
//     counted against the quota all the same);
//   - ended objects (Job Complete/Failed, Kubeflow Succeeded/Failed, JobSet
//     Completed/Failed, RayJob jobDeploymentStatus Complete/Failed, every pod
//     of a group Succeeded/Failed) and deleted ones free their quota; a
//     relist also frees what the broker holds for objects no longer there,
//     compared by uid (a list is authoritative: an object recreated under
//     its name is a new workload, the old one's quota goes);
//   - workloads the webhook registered from a review are confirmed (DESIGN
//     §2 trust model: a review is a hint) when their object shows up in a
//     list or a watch event with the same uid, and take the pod sets,
//     priority and queue of the stored object; a pending workload whose
//     stored object changes takes the change. One still unconfirmed after
//     `confirm_grace` is looked up with a list of its kind: found, it is
//     confirmed; not found (the API server never stored it, or a forged
//     review) it is dropped, having held nothing.
// A kind the API server does not serve (its CRD is not installed: 404) is
// checked again every minute. synced() turns true once every kind has been
// listed once (or found not served): /readyz waits for it.
// Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/held_objects.h"
#include "gangkeeper/workload/trainjob.h"

namespace gangkeeper::kube {

struct ReconcilerOptions {
  // Watch every object of the managed kinds, not only those with the queue
  // label (--manage-jobs-without-queue-name).
  bool manage_jobs_without_queue_name = false;
  int64_t watch_timeout_seconds = 300;
  absl::Duration not_served_recheck = absl::Minutes(1);
  absl::Duration error_backoff = absl::Seconds(1);
  // A full list again this often, even when the watch is healthy.
  absl::Duration resync = absl::Minutes(10);
  // A pending workload registered less than this before a list that does
  // not show it is not declared gone by that list (its create may still be
  // on its way to storage); the watch that follows confirms it.
  absl::Duration list_grace = absl::Seconds(30);
  // A workload known only from a review for longer than this is looked up
  // (checked every confirm_check).
  absl::Duration confirm_grace = absl::Seconds(30);
  absl::Duration confirm_check = absl::Seconds(5);
  // Required: when a list was taken and how long reviews wait. Must
  // outlive the reconciler.
  const base::Clock* clock = nullptr;
  // The Kubeflow Trainer runtimes (TrainingRuntimeCache::Find): a TrainJob
  // is registered only once its runtime is known; RereadTrainJobs reads
  // the TrainJobs again when one shows or changes.
  workload::TrainingRuntimeLookup training_runtime;
  // Where the held job objects' text is kept for the actuator's releases
  // (HeldObjects); may be null. Must outlive the reconciler.
  HeldObjects* held_objects = nullptr;
};

class Reconciler {
 public:
  // What the cluster says goes to `events`; the broker's state is read from
  // `view`. `client`, `events` and `view` must outlive the reconciler.
  Reconciler(Client* client, broker::EventQueue* events, const broker::SnapshotSource* view,
             ReconcilerOptions options);
  ~Reconciler();  // Stop()
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  void Start();
  // Ends the watches (through the client) and joins the threads.
  void Stop();
  bool synced() const;
  // A Kubeflow Trainer runtime was added or changed (the runtime cache's
  // callback; any thread, returns at once): the reconciler lists the
  // TrainJobs again, so that those waiting for it are registered and
  // pending ones take the new pod sets.
  void RereadTrainJobs();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::kube
