// gangkeeper node: what the node writes to Kueue's own API (issue #24
// items 2-4), whatever the policy source: ClusterQueue and LocalQueue
// .status (kube::StatusWriter) and Workload objects
// (kube::WorkloadPublisher, an observer of the leader's broker), each
// writing from the leader only, and neither while Kueue's own controller
// manager runs ("never two brains": checked at start and every
// `detect_every`, said in a log line and as a /readyz note; readiness does
// not fail for it, as gangkeeper's webhook and broker work on, only the
// publishing stops). It has a Kubernetes client of its own.
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/kube/kueue_objects.h"
#include "gangkeeper/kube/status_writer.h"
#include "gangkeeper/kube/workload_publisher.h"
#include "gangkeeper/metrics/registry.h"

namespace gangkeeper::node {

// What "auto" means for --publish-kueue-status and --publish-workloads: on
// when the policies come from the cluster (--policy-source cluster, chosen or
// the default), which serves Kueue's CRDs.
bool PublishToKueueByDefault(bool kueue_served, bool policy_source_cluster);

class KueuePublishing {
 public:
  struct Options {
    const base::Clock* clock = nullptr;  // required
    std::function<bool()> leading;       // null: always (the file journal)
    std::string status = "auto";         // --publish-kueue-status: auto | true | false
    std::string workloads = "auto";      // --publish-workloads: auto | true | false
    bool policy_source_cluster = false;  // --policy-source cluster was chosen (auto's answer)
    // kube::DiscoverKueue's answer when ChoosePolicySource already asked
    // (PolicySourceChoice::discovery); unset: Create asks.
    std::optional<absl::StatusOr<kube::KueueVersion>> served;
    absl::Duration detect_every = absl::Seconds(30);
    kube::KueueDetectionOptions detection;
  };

  // Asks the cluster which of Kueue's versions it serves (unless
  // `served` says) and whether Kueue's controller runs (logged). nullptr when nothing is to be
  // published; InvalidArgument for a bad flag value, or a flag set to
  // true on a cluster without Kueue's CRDs.
  static absl::StatusOr<std::unique_ptr<KueuePublishing>> Create(const kube::ClusterConfig& config, Options options);
  ~KueuePublishing();  // Stop()

  // For BrokerOptions::observers (the Workloads' evictions and removals);
  // null when Workloads are not published.
  broker::ChangeObserver* observer() { return workloads_.get(); }
  // Starts the writers on `view` (the leader's state).
  void Connect(const broker::SnapshotSource* view);
  // "" while publishing is allowed; else why not. Rechecks the cluster when
  // `detect_every` has passed (on a writer's thread; /readyz reads the
  // last answer with last_refusal()).
  std::string Refusal();
  std::string last_refusal() const;
  // gangkeeper_kueue_writes_total{object, outcome}.
  absl::Status RegisterMetrics(metrics::Registry& registry);
  void Stop();

 private:
  KueuePublishing() = default;
  std::string Detect();

  // The view the writers read, set by Connect (their threads start then).
  struct LateView : broker::SnapshotSource {
    std::shared_ptr<const broker::Snapshot> snapshot() const override;
    std::atomic<const broker::SnapshotSource*> view{nullptr};
  };

  Options options_;
  LateView view_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::StatusWriter> status_;
  std::unique_ptr<kube::WorkloadPublisher> workloads_;
  mutable absl::Mutex mu_;
  std::string refusal_ ABSL_GUARDED_BY(mu_);
  absl::Time checked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::node
