// gangkeeper node: what the node reads from and writes to the cluster
// besides the managed kinds (issue #23): the namespaces' labels, which
// ClusterQueue namespaceSelectors read (kube::NamespaceWatcher -> the
// policy store -> a policies event for the broker), and Events about the
// broker's decisions (kube::EventPublisher, an observer of the leader's
// broker, through a bounded, rate-limited kube::EventRecorder). Each has a
// Kubernetes client of its own: stopping one does not cut the others.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/kube/event_publisher.h"
#include "gangkeeper/kube/events.h"
#include "gangkeeper/kube/namespaces.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/model/policy_store.h"

namespace gangkeeper::node {

class ClusterFeeds {
 public:
  struct Options {
    const base::Clock* clock = nullptr;  // required
    std::string instance;                // the Events' reportingInstance
    std::function<bool()> leading;       // null: always (the file journal)
    // How long Create waits for the first namespace list, so that the
    // broker starts with the cluster's labels (readiness waits in any case).
    absl::Duration namespace_wait = absl::Seconds(10);
  };

  // Starts the namespace watch and waits (bounded) for its first list.
  static absl::StatusOr<std::unique_ptr<ClusterFeeds>> Create(const kube::ClusterConfig& config, Options options);
  ~ClusterFeeds();  // Stop()

  // For BrokerOptions::observers, before the broker is built.
  broker::ChangeObserver* observer() { return publisher_.get(); }
  // Lays the namespaces known now over `store`'s files (no event: the
  // broker is not built yet).
  void Seed(model::PolicyStore* store);
  // From now on namespace changes republish `store` and send the policies
  // to `events`; Events read the pending reasons from `view`. Starts the
  // Events' threads.
  void Connect(model::PolicyStore* store, broker::EventQueue* events, const broker::SnapshotSource* view);
  bool namespaces_synced() const { return namespaces_->synced(); }
  kube::EventRecorderStats event_stats() const { return recorder_->stats(); }
  // gangkeeper_events_total{outcome}: what became of each Event (written,
  // counted on an earlier one, dropped because the queue was full, refused).
  absl::Status RegisterMetrics(metrics::Registry& registry);
  void Stop();

 private:
  ClusterFeeds() = default;
  void OnNamespaces(std::shared_ptr<const kube::NamespaceLabels> labels);

  // The view the publisher reads, set by Connect.
  struct LateView : broker::SnapshotSource {
    std::shared_ptr<const broker::Snapshot> snapshot() const override;
    const broker::SnapshotSource* view = nullptr;
  };

  LateView view_;
  std::unique_ptr<kube::Client> events_client_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::unique_ptr<kube::EventPublisher> publisher_;
  absl::Mutex mu_;
  model::PolicyStore* store_ ABSL_GUARDED_BY(mu_) = nullptr;
  broker::EventQueue* events_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<kube::Client> namespaces_client_;
  std::unique_ptr<kube::NamespaceWatcher> namespaces_;
};

}  // namespace gangkeeper::node
