// gangkeeper node: ClusterFeeds (see cluster_feeds.h).
#include "src/node/cluster_feeds.h"

#include <utility>

#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::node {

std::shared_ptr<const broker::Snapshot> ClusterFeeds::LateView::snapshot() const {
  GK_CHECK_MSG(view != nullptr, "ClusterFeeds: Events read the broker before Connect");
  return view->snapshot();
}

absl::StatusOr<std::unique_ptr<ClusterFeeds>> ClusterFeeds::Create(const kube::ClusterConfig& config,
                                                                    Options options) {
  GK_CHECK_MSG(options.clock != nullptr, "ClusterFeeds::Options::clock is required");
  std::unique_ptr<ClusterFeeds> f(new ClusterFeeds());
  // Events are best effort: a short retry budget, so a struggling API
  // server delays them by seconds, not minutes.
  kube::ClientOptions events_client;
  events_client.clock = options.clock;
  events_client.retry.max_attempts = 4;
  events_client.retry.max_total = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<kube::Client>> ec = kube::Client::Create(config, events_client);
  if (!ec.ok()) return ec.status();
  f->events_client_ = *std::move(ec);
  kube::EventRecorderOptions ro;
  ro.clock = options.clock;
  ro.instance = options.instance.empty() ? "gangkeeper" : options.instance;
  f->recorder_ = std::make_unique<kube::EventRecorder>(f->events_client_.get(), ro);
  kube::EventPublisherOptions po;
  po.leading = std::move(options.leading);
  f->publisher_ = std::make_unique<kube::EventPublisher>(f->recorder_.get(), &f->view_, po);

  kube::ClientOptions ns_client;
  ns_client.clock = options.clock;
  absl::StatusOr<std::unique_ptr<kube::Client>> nc = kube::Client::Create(config, ns_client);
  if (!nc.ok()) return nc.status();
  f->namespaces_client_ = *std::move(nc);
  ClusterFeeds* self = f.get();
  f->namespaces_ = std::make_unique<kube::NamespaceWatcher>(
      f->namespaces_client_.get(),
      [self](std::shared_ptr<const kube::NamespaceLabels> labels) { self->OnNamespaces(std::move(labels)); });
  f->namespaces_->Start();
  if (!f->namespaces_->WaitSynced(options.namespace_wait)) {
    base::GetLogger("kube")->warn(
        "namespaces: no list within {}; starting with the policy files' namespaces (not ready until listed)",
        absl::FormatDuration(options.namespace_wait));
  }
  return f;
}

ClusterFeeds::~ClusterFeeds() { Stop(); }

void ClusterFeeds::Seed(model::PolicyStore* store) {
  if (!namespaces_->synced()) return;
  absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> set =
      store->SetClusterNamespaces(namespaces_->current(), nullptr);
  if (!set.ok()) base::GetLogger("kube")->warn("namespaces: not applied: {}", set.status().message());
}

void ClusterFeeds::Connect(model::PolicyStore* store, broker::EventQueue* events, const broker::SnapshotSource* view) {
  view_.view = view;
  {
    absl::MutexLock lock(&mu_);
    store_ = store;
    events_ = events;
  }
  // Labels that came between Seed and now.
  if (namespaces_->synced()) OnNamespaces(namespaces_->current());
  recorder_->Start();
  publisher_->Start();
}

void ClusterFeeds::OnNamespaces(std::shared_ptr<const kube::NamespaceLabels> labels) {
  absl::MutexLock lock(&mu_);
  if (store_ == nullptr) return;  // Seed applies them
  absl::MutexLock publication(&store_->publication());
  const uint64_t before = store_->current()->version;
  absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> set = store_->SetClusterNamespaces(labels, nullptr);
  if (!set.ok()) {
    base::GetLogger("kube")->warn("namespaces: not applied: {}", set.status().message());
    return;
  }
  if ((*set)->version == before) return;  // the labels in effect already
  base::GetLogger("kube")->info("namespaces: labels changed ({} namespaces); ClusterQueue selectors re-evaluated",
                                labels != nullptr ? labels->size() : 0);
  broker::Event e =
      broker::Event::Policies((*set)->policies, (*set)->overlay, "gangkeeper", "namespace labels changed in the cluster");
  e.policies_version = (*set)->version;
  events_->Submit(std::move(e));
}

absl::Status ClusterFeeds::RegisterMetrics(metrics::Registry& registry) {
  return registry.AddCallbackCounter(
      "gangkeeper_events_total",
      "Kubernetes Events about managed objects by outcome: created, series (a repeat counted on an earlier "
      "Event), dropped_queue_full, failed (refused by the API server after retries).",
      {"outcome"}, [this] {
        const kube::EventRecorderStats s = recorder_->stats();
        return std::vector<metrics::Sample>{
            {{"created"}, static_cast<double>(s.created)},
            {{"series"}, static_cast<double>(s.series_updates)},
            {{"dropped_queue_full"}, static_cast<double>(s.dropped_full)},
            {{"failed"}, static_cast<double>(s.failed)}};
      });
}

void ClusterFeeds::Stop() {
  if (namespaces_ != nullptr) namespaces_->Stop();
  if (publisher_ != nullptr) publisher_->Stop();
  if (recorder_ != nullptr) recorder_->Stop();
}

}  // namespace gangkeeper::node
