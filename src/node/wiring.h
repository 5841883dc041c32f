// gangkeeper node: the small adapters the composition root wires between
// modules (metrics observers, the webhook routes, flag-named error hints).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/api/metrics.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/counters.h"
#include "gangkeeper/kube/actuator.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/server/server.h"

namespace gangkeeper::node {

// --kube: auto = in-cluster when KUBERNETES_SERVICE_HOST is set (and a
// service account token is mounted), else none. No config for none.
absl::StatusOr<std::optional<kube::ClusterConfig>> KubeConfigFor(const std::string& mode, const std::string& context);

struct WebhookMetrics {
  metrics::CounterFamily* reviews;
  metrics::HistogramFamily* durations;
};
absl::StatusOr<WebhookMetrics> RegisterWebhookMetrics(metrics::Registry& registry);

// gangkeeper_release_* from the actuator's outcomes (sets actuator->observe),
// Kueue's admission attempts from the broker's scheduling passes (sets
// broker->on_schedule) and its admission wait histograms from the broker's
// admissions (sets *on_admitted, for broker::WorkloadCounters), labelled
// with `role` at the time. Labels are bounded: never workload names.
absl::Status RegisterFlowMetrics(metrics::Registry& registry, kube::ActuatorOptions* actuator,
                                 broker::BrokerOptions* broker, broker::WorkloadCounters::OnAdmitted* on_admitted,
                                 api::ReplicaRole role);

// What this binary is, for kueue_build_info (set by the build).
api::BuildInfo BuildInfo();

// Where a webhook's denials are audited, with the caller's address.
using DenialRecorder = std::function<absl::Status(const audit::Event&, const std::string& source)>;

// A webhook listener route: the body goes to `handle`, the outcome is
// counted, and a denial is recorded (when `record` is set) before the
// answer goes out. A request the webhook refused (WebhookResult::error) is
// answered by server::ErrorResponse, like every other HTTP-level error.
// `clock` times the reviews and stamps denials; it must outlive the route.
server::Route WebhookRoute(const std::string& path, const WebhookMetrics& m, const base::Clock* clock,
                           std::function<admission::WebhookResult(absl::string_view)> handle,
                           DenialRecorder record = nullptr);

// The same for a webhook that answers later (admission::Webhook::
// ValidateAsync): an asynchronous route. The review is decoded and checked
// on the event loop; the registration's durable acknowledgement resumes
// the answer; registry calls that can only block, and the audit record of
// a denial, run on the server's worker pool, never on the loop. The
// duration metric runs to the answer.
using AsyncReview = std::function<void(absl::string_view body, const broker::BlockingRunner& blocking,
                                       absl::AnyInvocable<void(admission::WebhookResult)> done)>;
server::Route AsyncWebhookRoute(const std::string& path, const WebhookMetrics& m, const base::Clock* clock,
                                AsyncReview handle, DenialRecorder record = nullptr);

// The etcd client's words for its TLS options as the flags that set them.
std::string InEtcdFlags(absl::string_view message);
// For a first read of etcd that failed: which flag to look at.
std::string EtcdTlsHint(absl::string_view error, const std::string& ca, const std::string& cert);

}  // namespace gangkeeper::node
