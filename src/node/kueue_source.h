// gangkeeper node: Kueue's objects from the cluster as the policy source
// (--policy-source cluster; issue #24 item 1).
//
// ChoosePolicySource decides where ResourceFlavors, ClusterQueues,
// LocalQueues, Cohorts and WorkloadPriorityClasses come from: the policy
// files (and the API's overlay over them), or the cluster, when --kube
// names one and the API server serves kueue.x-k8s.io (discovery). With the
// cluster, KueueSource runs a kube::KueueObjectWatcher whose every change
// is published by the node's model::PolicyStore (SetClusterObjects) and
// handed to the broker as a policies event, ordered with the namespace
// watch's by the store's publication lock and Event::policies_version, as
// ClusterFeeds does for namespace labels. Every replica watches; the
// events go to the node's front port, so only the leader's broker acts.
// writer() is the API's api::ClusterPolicyWriter: PUT, DELETE and
// /v1/apply of Kueue objects become creates, replaces and deletes in the
// cluster, which the watch brings back. GPUNodePools and PriorityClasses
// keep coming from the files. Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/api/cluster_policy.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/kube/kueue_objects.h"
#include "gangkeeper/kube/kueue_watch.h"
#include "gangkeeper/model/policy_store.h"

namespace gangkeeper::node {

struct PolicySourceChoice {
  bool cluster = false;
  kube::KueueVersion version = kube::KueueVersion::kV1beta2;  // to read, with cluster
  // kube::DiscoverKueue's answer when it was asked (not with
  // --policy-source files or --kube none), for KueuePublishing, which then
  // does not ask again.
  std::optional<absl::StatusOr<kube::KueueVersion>> discovery;
  std::string why;  // for the log line at start
};

// `flag` is --policy-source: "" (auto), "files" or "cluster". `client` is
// --kube's (null with --kube none). InvalidArgument for a bad flag, for
// cluster without a cluster, and for cluster when the API server does not
// serve Kueue's group.
[[nodiscard]] absl::StatusOr<PolicySourceChoice> ChoosePolicySource(const std::string& flag, kube::Client* client);

class KueueSource {
 public:
  struct Options {
    const base::Clock* clock = nullptr;  // required
    kube::KueueVersion version = kube::KueueVersion::kV1beta2;
    // How long Create waits for the first lists, so that the broker starts
    // with the cluster's quota (readiness waits in any case).
    absl::Duration sync_wait = absl::Seconds(10);
    kube::KueueWatchOptions watch;  // version is set from above
  };

  // Starts the watches and waits (bounded) for their first lists.
  static absl::StatusOr<std::unique_ptr<KueueSource>> Create(const kube::ClusterConfig& config, Options options);
  ~KueueSource();  // Stop()

  // Lays the objects known now over `store`'s files (no event: the broker
  // is not built yet). Before the first list (the API server down at
  // start), the Kueue objects of `recorded` (the policies the journal last
  // recorded; may be null) stand for the cluster's until it comes: a
  // restart during an outage keeps the cluster's quota instead of falling
  // back to the files'.
  void Seed(model::PolicyStore* store, const model::PolicySet* recorded);
  // From now on every change republishes `store` and goes to `events`.
  void Connect(model::PolicyStore* store, broker::EventQueue* events);
  bool synced() const { return watcher_->synced(); }
  api::ClusterPolicyWriter* writer() { return writer_.get(); }
  kube::KueueWatchStats stats() const { return watcher_->stats(); }
  void Stop();

 private:
  KueueSource() = default;
  void OnChange(std::shared_ptr<const model::ClusterKueueObjects> objects);

  absl::Mutex mu_;
  model::PolicyStore* store_ ABSL_GUARDED_BY(mu_) = nullptr;
  broker::EventQueue* events_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<kube::Client> watch_client_;
  std::unique_ptr<kube::Client> write_client_;
  std::unique_ptr<kube::KueueObjectWatcher> watcher_;
  std::unique_ptr<api::ClusterPolicyWriter> writer_;
};

// The API's writer to the cluster at `version` through `client` (must
// outlive it). Exposed for tests.
std::unique_ptr<api::ClusterPolicyWriter> NewKubePolicyWriter(kube::Client* client, kube::KueueVersion version);

}  // namespace gangkeeper::node
