// gangkeeper node: adapters between modules (see wiring.h).
#include "src/node/wiring.h"

#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::node {

absl::StatusOr<std::optional<kube::ClusterConfig>> KubeConfigFor(const std::string& mode, const std::string& context) {
  if (mode == "none") return std::optional<kube::ClusterConfig>();
  if (mode == "auto" || mode == "in-cluster") {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    if (mode == "auto" && (host == nullptr || *host == '\0')) return std::optional<kube::ClusterConfig>();
    // In a container of a pod without a service account token mounted
    // (automountServiceAccountToken: false), auto means none as well.
    std::error_code ec;
    if (mode == "auto" && !std::filesystem::exists("/var/run/secrets/kubernetes.io/serviceaccount/token", ec)) {
      return std::optional<kube::ClusterConfig>();
    }
    absl::StatusOr<kube::ClusterConfig> c = kube::InClusterConfig();
    if (!c.ok()) return c.status();
    return std::optional<kube::ClusterConfig>(*std::move(c));
  }
  absl::StatusOr<kube::ClusterConfig> c = kube::LoadKubeconfig(mode, context);
  if (!c.ok()) return c.status();
  return std::optional<kube::ClusterConfig>(*std::move(c));
}

api::BuildInfo BuildInfo() {
  return api::BuildInfo{GK_VERSION, GK_GIT_COMMIT, GK_BUILD_DATE, GK_COMPILER, GK_PLATFORM};
}

absl::StatusOr<WebhookMetrics> RegisterWebhookMetrics(metrics::Registry& registry) {
  absl::StatusOr<metrics::CounterFamily*> reviews = registry.AddCounter(
      "gangkeeper_webhook_reviews_total",
      "AdmissionReviews answered, by webhook, workload kind (or other), operation and decision "
      "(allowed, patched, denied, bad_request).",
      {"webhook", "kind", "operation", "decision"});
  if (!reviews.ok()) return reviews.status();
  absl::StatusOr<metrics::HistogramFamily*> durations = registry.AddHistogram(
      "gangkeeper_webhook_review_duration_seconds",
      "Time to decide an AdmissionReview (decode, decide, durable registration, encode), by webhook, kind and "
      "operation.",
      {"webhook", "kind", "operation"}, metrics::LatencyBuckets());
  if (!durations.ok()) return durations.status();
  return WebhookMetrics{*reviews, *durations};
}

absl::Status RegisterFlowMetrics(metrics::Registry& registry, kube::ActuatorOptions* actuator,
                                 broker::BrokerOptions* broker, broker::WorkloadCounters::OnAdmitted* on_admitted,
                                 api::ReplicaRole role) {
  absl::StatusOr<metrics::CounterFamily*> actuations = registry.AddCounter(
      "gangkeeper_release_actuations_total",
      "Releases (unsuspend, gate removal) and suspensions carried out or attempted, by action and workload kind.",
      {"action", "kind"});
  if (!actuations.ok()) return actuations.status();
  absl::StatusOr<metrics::CounterFamily*> failures = registry.AddCounter(
      "gangkeeper_release_failures_total",
      "Releases and suspensions the Kubernetes API refused or that did not go through (suspensions are retried).",
      {"action", "kind"});
  if (!failures.ok()) return failures.status();
  absl::StatusOr<metrics::HistogramFamily*> took = registry.AddHistogram(
      "gangkeeper_release_duration_seconds",
      "From the durable decision to the Kubernetes API's last answer for a release or suspension.",
      {"action", "kind"}, metrics::LatencyBuckets());
  if (!took.ok()) return took.status();
  absl::StatusOr<metrics::CounterFamily*> dropped = registry.AddCounter(
      "gangkeeper_actuations_dropped_total",
      "Releases and suspensions not sent, by action and reason: stale (the workload finished, went, or its phase "
      "moved on before the order's turn) or superseded (a later order for the same object took its place).",
      {"action", "reason"});
  if (!dropped.ok()) return dropped.status();
  actuator->observe = [a = *actuations, fl = *failures, t = *took, d = *dropped](const kube::ActuationOutcome& o) {
    if (o.dropped != nullptr) {
      d->WithLabels({o.action, o.dropped}).Increment();
      return;
    }
    a->WithLabels({o.action, o.kind}).Increment();
    if (!o.ok) fl->WithLabels({o.action, o.kind}).Increment();
    t->WithLabels({o.action, o.kind}).Observe(absl::ToDoubleSeconds(o.took));
  };
  // 5 ms to about 3 hours. Kueue's names and labels, replica_role included.
  const std::vector<double> wait_buckets = metrics::ExponentialBuckets(0.005, 2, 22);
  const std::vector<std::string> cq = {"cluster_queue", "priority_class", "replica_role"};
  const std::vector<std::string> lq = {"name", "namespace", "priority_class", "replica_role"};
  struct Wait {
    const char* name;
    const char* help;
    bool local;
  };
  static constexpr Wait kWaits[] = {
      {"kueue_admission_wait_time_seconds",
       "Time from a workload's creation or last requeue to its admission, by ClusterQueue and priority class.", false},
      {"kueue_quota_reserved_wait_time_seconds",
       "Time from a workload's creation or last requeue to its quota reservation (gangkeeper reserves and admits "
       "at once), by ClusterQueue and priority class.",
       false},
      {"kueue_local_queue_admission_wait_time_seconds",
       "Time from a workload's creation or last requeue to its admission, by LocalQueue and priority class.", true},
      {"kueue_local_queue_quota_reserved_wait_time_seconds",
       "Time from a workload's creation or last requeue to its quota reservation, by LocalQueue and priority class.",
       true},
  };
  std::vector<std::pair<metrics::HistogramFamily*, bool>> families;
  for (const Wait& w : kWaits) {
    absl::StatusOr<metrics::HistogramFamily*> f = registry.AddHistogram(w.name, w.help, w.local ? lq : cq, wait_buckets);
    if (!f.ok()) return f.status();
    families.emplace_back(*f, w.local);
  }
  // Kueue's admission attempts: scheduling passes that had something to
  // decide; "success" when one admitted at least one gang.
  absl::StatusOr<metrics::CounterFamily*> attempts = registry.AddCounter(
      "kueue_admission_attempts_total",
      "Scheduling passes that had pending gangs to try, by result (success: at least one admitted; inadmissible: "
      "none).",
      {"result", "replica_role"});
  if (!attempts.ok()) return attempts.status();
  absl::StatusOr<metrics::HistogramFamily*> attempt_took = registry.AddHistogram(
      "kueue_admission_attempt_duration_seconds", "Time a scheduling pass with pending gangs took, by result.",
      {"result", "replica_role"}, metrics::LatencyBuckets());
  if (!attempt_took.ok()) return attempt_took.status();
  broker->on_schedule = [a = *attempts, t = *attempt_took, role](const broker::ScheduleStats& stats,
                                                                 absl::Duration elapsed) {
    const std::string result = stats.admitted > 0 ? "success" : "inadmissible";
    const std::string r = role ? role() : "standalone";
    a->WithLabels({result, r}).Increment();
    t->WithLabels({result, r}).Observe(absl::ToDoubleSeconds(elapsed));
  };
  *on_admitted = [families, role = std::move(role)](const broker::AdmittedGang& gang) {
    const double seconds = absl::ToDoubleSeconds(gang.waited);
    const std::string r = role ? role() : "standalone";
    for (const auto& [family, local] : families) {
      if (!local) {
        family->WithLabels({gang.cluster_queue, gang.priority_class, r}).Observe(seconds);
      } else if (!gang.local_queue.empty()) {
        family->WithLabels({gang.local_queue, gang.namespace_name, gang.priority_class, r}).Observe(seconds);
      }
    }
  };
  return absl::OkStatus();
}


namespace {

// A denied review as an audit event ("review.denied", by the requesting user).
audit::Event DenialEvent(const admission::Denial& d, absl::Time now) {
  audit::Event e;
  e.time = now;
  e.actor = d.username.empty() ? "unknown" : d.username;
  e.actor_claimed = true;  // a review's userInfo is whatever its sender wrote
  e.action = audit::kReviewDenied;
  e.kind = d.kind;
  e.namespace_name = d.namespace_name;
  e.name = d.name;
  e.uid = d.uid;
  e.reason = d.reason;
  e.details = absl::StrCat(R"({"operation":")", base::JsonEscape(d.operation), R"(","code":)", d.code,
                           R"(,"message":")", base::JsonEscape(d.message), R"(","dryRun":)",
                           d.dry_run ? "true" : "false", "}");
  return e;
}

}  // namespace

std::string InEtcdFlags(absl::string_view message) {
  return absl::StrReplaceAll(message,
                             {{"ca_file", "--etcd-ca"}, {"cert_file", "--etcd-cert"}, {"key_file", "--etcd-key"}});
}

std::string EtcdTlsHint(absl::string_view error, const std::string& ca, const std::string& cert) {
  // The connection ended during the first exchange (no HTTP answer).
  const bool cut = absl::EndsWith(error, ": Read") || absl::EndsWith(error, ": Write") ||
                   absl::EndsWith(error, ": SSLConnection");
  if (ca.empty()) {
    return cut ? "; if etcd speaks TLS, set --etcd-ca (the CA of etcd's certificate), and --etcd-cert and "
                 "--etcd-key when it requires client certificates"
               : "";
  }
  if (absl::StrContains(error, "certificate is not trusted")) {  // httpc: Failure::kTlsVerify
    return absl::StrCat("; etcd's certificate is not signed by --etcd-ca ", ca,
                        " or does not name the host of --store");
  }
  if (!cut) return "";
  return cert.empty()
             ? "; etcd ended the TLS connection: it may require a client certificate (set --etcd-cert and "
               "--etcd-key)"
             : absl::StrCat("; etcd ended the TLS connection: is --etcd-cert ", cert,
                            " signed by the CA etcd trusts (its --trusted-ca-file) and meant for client auth?");
}

namespace {

// What a webhook route needs for each review's outcome.
struct WebhookRouteContext {
  WebhookMetrics metrics;
  const base::Clock* clock;
  std::string name;  // the path without its "/"
  DenialRecorder record;

  // Audits a denial (blocks: an fsync or an etcd write).
  void RecordDenial(const admission::WebhookResult& result, const std::string& remote) const {
    if (!result.denial.has_value() || !record) return;
    absl::Status written = record(DenialEvent(*result.denial, clock->Now()), remote);
    if (!written.ok()) {
      base::GetLogger("audit")->error("audit: a denial of {}/{} was not recorded: {}", result.denial->namespace_name,
                                      result.denial->name, written.message());
    }
  }
  // Counts and times the review; its HTTP answer.
  server::HttpResponse Answer(admission::WebhookResult result, absl::Time start) const {
    metrics.reviews->WithLabels({name, result.kind, result.operation, result.outcome}).Increment();
    metrics.durations->WithLabels({name, result.kind, result.operation})
        .Observe(absl::ToDoubleSeconds(clock->Now() - start));
    if (!result.error.ok()) return server::ErrorResponse(result.error);
    server::HttpResponse out;
    out.status = 200;
    out.body = std::move(result.body);
    return out;
  }
};

server::Route WebhookPost(const std::string& path) {
  server::Route route;
  route.listener = server::Listener::kWebhook;
  route.method = "POST";
  route.path = path;
  return route;
}

}  // namespace

server::Route WebhookRoute(const std::string& path, const WebhookMetrics& m, const base::Clock* clock,
                           std::function<admission::WebhookResult(absl::string_view)> handle,
                           DenialRecorder record) {
  server::Route route = WebhookPost(path);
  auto ctx = std::make_shared<const WebhookRouteContext>(
      WebhookRouteContext{m, clock, path.substr(1), std::move(record)});
  route.handler = [handle = std::move(handle), ctx](const server::HttpRequest& req) {
    const absl::Time start = ctx->clock->Now();
    admission::WebhookResult result = handle(req.body);
    ctx->RecordDenial(result, req.remote_addr);
    return ctx->Answer(std::move(result), start);
  };
  return route;
}

server::Route AsyncWebhookRoute(const std::string& path, const WebhookMetrics& m, const base::Clock* clock,
                                AsyncReview handle, DenialRecorder record) {
  server::Route route = WebhookPost(path);
  auto ctx = std::make_shared<const WebhookRouteContext>(
      WebhookRouteContext{m, clock, path.substr(1), std::move(record)});
  route.async_handler = [handle = std::move(handle), ctx](server::HttpRequest req, server::Responder responder) {
    const absl::Time start = ctx->clock->Now();
    const broker::BlockingRunner blocking = [responder](absl::AnyInvocable<void()> work) {
      responder.RunBlocking(std::move(work));
    };
    handle(req.body, blocking,
           [ctx, responder, start, remote = std::move(req.remote_addr)](admission::WebhookResult result) mutable {
             if (result.denial.has_value() && ctx->record) {
               responder.RunBlocking(
                   [ctx, responder, start, remote = std::move(remote), result = std::move(result)]() mutable {
                     ctx->RecordDenial(result, remote);
                     responder.Respond(ctx->Answer(std::move(result), start));
                   });
               return;
             }
             responder.Respond(ctx->Answer(std::move(result), start));
           });
  };
  return route;
}

}  // namespace gangkeeper::node
