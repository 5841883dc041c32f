// gangkeeper node: KueuePublishing (see kueue_publishing.h).
#include "src/node/kueue_publishing.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::node {
namespace {

absl::StatusOr<bool> Decide(const std::string& flag, const std::string& value, bool by_default) {
  if (value == "auto" || value.empty()) return by_default;
  if (value == "true") return true;
  if (value == "false") return false;
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", value, ": use auto, true or false"));
}

}  // namespace

bool PublishToKueueByDefault(bool kueue_served, bool policy_source_cluster) {
  return kueue_served && policy_source_cluster;
}

absl::StatusOr<std::unique_ptr<KueuePublishing>> KueuePublishing::Create(const kube::ClusterConfig& config,
                                                                          Options options) {
  GK_CHECK_MSG(options.clock != nullptr, "KueuePublishing::Options::clock is required");
  auto log = base::GetLogger("kube");
  if (options.status == "false" && options.workloads == "false") {
    log->info("kueue: not publishing status or Workloads (--publish-kueue-status=false, --publish-workloads=false)");
    return nullptr;
  }
  std::unique_ptr<KueuePublishing> p(new KueuePublishing());
  kube::ClientOptions co;
  co.clock = options.clock;
  co.retry.max_attempts = 4;
  co.retry.max_total = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<kube::Client>> c = kube::Client::Create(config, co);
  if (!c.ok()) return c.status();
  p->client_ = *std::move(c);
  const absl::StatusOr<kube::KueueVersion> discovered =
      options.served.has_value() ? *options.served : kube::DiscoverKueue(*p->client_);
  std::optional<kube::KueueVersion> served;
  if (discovered.ok()) {
    served = *discovered;
  } else if (!absl::IsNotFound(discovered.status())) {
    log->warn("kueue: cannot tell whether Kueue's CRDs are served ({}); taking them as absent",
              discovered.status().message());
  }
  const bool by_default = PublishToKueueByDefault(served.has_value(), options.policy_source_cluster);
  absl::StatusOr<bool> status_on = Decide("publish-kueue-status", options.status, by_default);
  if (!status_on.ok()) return status_on.status();
  absl::StatusOr<bool> workloads_on = Decide("publish-workloads", options.workloads, by_default);
  if (!workloads_on.ok()) return workloads_on.status();
  if ((*status_on || *workloads_on) && !served.has_value()) {
    return absl::InvalidArgumentError(
        "--publish-kueue-status / --publish-workloads true: the cluster serves no kueue.x-k8s.io v1beta2 or v1beta1 "
        "ClusterQueues; install Kueue's CRDs (README: Replacing Kueue's controller) or set them to auto");
  }
  if (!*status_on && !*workloads_on) {
    log->info("kueue: Kueue's CRDs are not served: no status or Workloads are published");
    return nullptr;
  }
  p->options_ = std::move(options);
  kube::KueueWriterOptions wo;
  wo.clock = p->options_.clock;
  wo.version = *served;
  wo.leading = p->options_.leading;
  KueuePublishing* self = p.get();
  wo.refused = [self] { return self->Refusal(); };
  if (*status_on) p->status_ = std::make_unique<kube::StatusWriter>(p->client_.get(), &p->view_, wo);
  if (*workloads_on) p->workloads_ = std::make_unique<kube::WorkloadPublisher>(p->client_.get(), &p->view_, wo);
  log->info("kueue: publishing {}{}{} at kueue.x-k8s.io/{} (from the leader only)",
            *status_on ? "ClusterQueue and LocalQueue status" : "", *status_on && *workloads_on ? " and " : "",
            *workloads_on ? "Workload objects" : "", kube::KueueVersionName(*served));
  (void)p->Refusal();  // the first check, logged
  return p;
}

KueuePublishing::~KueuePublishing() { Stop(); }

std::shared_ptr<const broker::Snapshot> KueuePublishing::LateView::snapshot() const {
  const broker::SnapshotSource* v = view.load();
  GK_CHECK_MSG(v != nullptr, "KueuePublishing: a writer read the broker before Connect");
  return v->snapshot();
}

std::string KueuePublishing::Detect() {
  absl::StatusOr<std::string> found = kube::DetectKueueController(*client_, options_.detection);
  if (!found.ok()) return std::string(found.status().message());
  return *found;
}

std::string KueuePublishing::Refusal() {
  const absl::Time now = options_.clock->Now();
  {
    absl::MutexLock lock(&mu_);
    if (checked_ != absl::Time() && now - checked_ < options_.detect_every) return refusal_;
  }
  std::string found = Detect();
  absl::MutexLock lock(&mu_);
  const bool first = checked_ == absl::Time();
  checked_ = now;
  if (found != refusal_ || first) {
    auto log = base::GetLogger("kube");
    if (!found.empty()) {
      log->warn("kueue: not publishing status or Workloads: {}", found);
    } else if (!first) {
      log->info("kueue: Kueue's own controller is gone; publishing status and Workloads");
    }
  }
  refusal_ = std::move(found);
  return refusal_;
}

std::string KueuePublishing::last_refusal() const {
  absl::MutexLock lock(&mu_);
  return refusal_;
}

void KueuePublishing::Connect(const broker::SnapshotSource* view) {
  // The writers were built before the broker; they read `view` from now on.
  view_.view.store(view);
  if (status_ != nullptr) status_->Start();
  if (workloads_ != nullptr) workloads_->Start();
}

absl::Status KueuePublishing::RegisterMetrics(metrics::Registry& registry) {
  return registry.AddCallbackCounter(
      "gangkeeper_kueue_writes_total",
      "Writes to Kueue's API (ClusterQueue and LocalQueue status, Workload objects) by outcome: written, failed "
      "(retried on the next pass), refused_passes (passes skipped while Kueue's own controller runs).",
      {"object", "outcome"}, [this] {
        std::vector<metrics::Sample> out;
        auto add = [&out](const char* object, const kube::KueueWriterStats& s) {
          out.push_back({{object, "written"}, static_cast<double>(s.writes)});
          out.push_back({{object, "failed"}, static_cast<double>(s.failures)});
          out.push_back({{object, "refused_passes"}, static_cast<double>(s.refused)});
        };
        if (status_ != nullptr) add("queue_status", status_->stats());
        if (workloads_ != nullptr) add("workload", workloads_->stats());
        return out;
      });
}

void KueuePublishing::Stop() {
  if (status_ != nullptr) status_->Stop();
  if (workloads_ != nullptr) workloads_->Stop();
}

}  // namespace gangkeeper::node
