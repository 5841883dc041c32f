// gangkeeper: the cluster's Kubeflow Trainer runtimes, for TrainJobs
// (issue #25 item 5).
//
// A TrainJob has no pod templates: its pods are what the runtime it names
// describes (workload/trainjob.h computes them from the two objects). This
// cache keeps every ClusterTrainingRuntime (cluster-scoped) and every
// TrainingRuntime (namespaced, all namespaces) of trainer.kubeflow.org/
// v1alpha1, one kube::ListThenWatch per collection (list_then_watch.h:
// list, then watch from the list's resourceVersion; an expired watch, 410,
// lists again; a full list every `resync`). A collection the API does not
// serve (404: the Trainer is not installed) counts as listed and empty,
// and is asked again every `absent_retry`.
//
// Only a runtime's spec is kept, as JSON text ({"spec": ...}), which is what
// workload::TrainJobPodSets reads. `on_change` runs (on a watcher thread)
// for each runtime added, deleted or whose spec changed, so the caller can
// read again the TrainJobs that wait for it. synced() turns true once both
// collections were listed and the changes of those lists announced. RBAC: list and watch on trainingruntimes and
// clustertrainingruntimes (deploy/).
//
// The node creates one (its own client) and hands Find to the webhook and
// the reconciler; see docs/internals.md ("TrainJob").
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/list_then_watch.h"
#include "gangkeeper/workload/trainjob.h"

namespace gangkeeper::kube {

struct TrainingRuntimeWatchOptions {
  int64_t watch_timeout_seconds = 300;
  absl::Duration error_backoff = absl::Seconds(1);
  // How often a collection the API does not serve is asked for again.
  absl::Duration absent_retry = absl::Seconds(60);
  // A full list again this often, even when the watch is healthy.
  absl::Duration resync = absl::Minutes(10);
};

// Which runtime changed: kind "ClusterTrainingRuntime" (namespace empty) or
// "TrainingRuntime".
struct TrainingRuntimeId {
  std::string kind;
  std::string namespace_name;
  std::string name;

  friend bool operator==(const TrainingRuntimeId&, const TrainingRuntimeId&) = default;
  friend auto operator<=>(const TrainingRuntimeId&, const TrainingRuntimeId&) = default;
};

class TrainingRuntimeCache {
 public:
  using OnChange = std::function<void(const TrainingRuntimeId&)>;

  // `client` must outlive the cache and serve no one else (Stop shuts it
  // down to end the watches).
  TrainingRuntimeCache(Client* client, OnChange on_change, TrainingRuntimeWatchOptions options = {});
  ~TrainingRuntimeCache();  // Stop()
  TrainingRuntimeCache(const TrainingRuntimeCache&) = delete;
  TrainingRuntimeCache& operator=(const TrainingRuntimeCache&) = delete;

  void Start();
  // Ends the watches (through the client) and joins the threads.
  void Stop();
  bool synced() const;
  // Waits up to `timeout` for both first lists; synced().
  bool WaitSynced(absl::Duration timeout) const;

  // The runtime `ref` names for a TrainJob in namespace `namespace_name`
  // ({"spec": ...} as JSON text), or nullopt when it is not known (yet).
  std::optional<std::string> Find(const workload::TrainingRuntimeRef& ref, absl::string_view namespace_name) const;

 private:
  struct Collection {
    std::string kind;
    bool listed = false;
  };
  bool SyncedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets (or, with `deleted`, erases) one runtime of collection `index`;
  // calls on_change when its spec changed.
  void Apply(size_t index, const nlohmann::json& object, bool deleted);
  // Replaces every runtime of collection `index` by those of `list`,
  // calling on_change for each one that differs; then marks the collection
  // listed.
  void Replace(size_t index, const ListResult& list);

  Client* const client_;
  const OnChange on_change_;
  mutable absl::Mutex mu_;
  bool stop_flag_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Collection> collections_ ABSL_GUARDED_BY(mu_);
  std::map<TrainingRuntimeId, std::string> runtimes_ ABSL_GUARDED_BY(mu_);  // -> {"spec": ...}
  // One per collection, in the order of collections_.
  std::vector<std::unique_ptr<ListThenWatch>> loops_;
};

}  // namespace gangkeeper::kube
