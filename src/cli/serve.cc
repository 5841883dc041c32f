// gangkeeper CLI: `gangkeeper serve`, the main job.
//
// Reads flags, prepares certificates (--dev), builds the server, then waits
// for signals on the main thread: SIGHUP re-checks the certificate files,
// SIGTERM/SIGINT drain and exit. All signals are blocked in every thread
// before any thread starts, so only the main thread's sigwait() sees them.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/api/api.h"
#include "gangkeeper/api/metrics.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/denials.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/kube/actuator.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/kube/reconciler.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/replica/audit_feed.h"
#include "gangkeeper/replica/intake.h"
#include "gangkeeper/replica/replica.h"
#include "gangkeeper/server/server.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/journal.h"
#include "src/cli/certs.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {
namespace {

struct ServeFlags {
  server::Options server;
  admission::WebhookOptions webhook;
  std::string policies_dir;
  std::string data_dir = "./data";
  bool dev = false;
  std::string dev_certs_dir = "certs/dev";
  std::string log_format = "text";
  std::string log_level = "info";
  absl::Duration shutdown_grace = absl::Seconds(25);
  broker::BrokerOptions broker;
  std::string tokens_file;
  bool metrics_public = false;
  std::string kube = "auto";  // auto | none | KUBECONFIG
  std::string kube_context;
  absl::Duration confirm_grace = absl::Seconds(30);
  std::string store = "file";
  std::string recover = "strict";  // strict | truncate
  size_t audit_max_mib = 1024;
  size_t audit_index_events = 1'000'000;
  absl::Duration audit_max_age = absl::Hours(24 * 400);
  absl::Duration audit_min_retention = absl::Hours(24 * 7);
  std::string audit_hmac_key;
  int audit_denials_per_second = 10;
  absl::Duration audit_denial_window = absl::Minutes(1);
  broker::JournalOptions journal;
  // --store etcd://...
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_prefix = "/gangkeeper/";
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration lease_renew = absl::Seconds(3);
  std::string replica_id;
  bool test_hooks = false;
};

// --kube: auto = in-cluster when KUBERNETES_SERVICE_HOST is set, else none.
// Returns no config for none.
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

struct WebhookMetrics {
  metrics::CounterFamily* reviews;
  metrics::HistogramFamily* durations;
};

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

// gangkeeper_release_* from the actuator's outcomes and Kueue's admission
// wait histograms from the broker's admissions. Labels are kinds, actions,
// ClusterQueues and priority classes: bounded, never workload names.
absl::Status RegisterFlowMetrics(metrics::Registry& registry, kube::ActuatorOptions* actuator,
                                 broker::BrokerOptions* broker_options) {
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
  actuator->observe = [a = *actuations, fl = *failures, t = *took](const kube::ActuationOutcome& o) {
    a->WithLabels({o.action, o.kind}).Increment();
    if (!o.ok) fl->WithLabels({o.action, o.kind}).Increment();
    t->WithLabels({o.action, o.kind}).Observe(absl::ToDoubleSeconds(o.took));
  };
  // 5 ms to about 3 hours.
  const std::vector<double> wait_buckets = metrics::ExponentialBuckets(0.005, 2, 22);
  absl::StatusOr<metrics::HistogramFamily*> wait = registry.AddHistogram(
      "kueue_admission_wait_time_seconds",
      "Time from a workload's creation or last requeue to its admission, by ClusterQueue and priority class.",
      {"cluster_queue", "priority_class"}, wait_buckets);
  if (!wait.ok()) return wait.status();
  absl::StatusOr<metrics::HistogramFamily*> reserved = registry.AddHistogram(
      "kueue_quota_reserved_wait_time_seconds",
      "Time from a workload's creation or last requeue to its quota reservation (gangkeeper reserves and admits "
      "at once), by ClusterQueue and priority class.",
      {"cluster_queue", "priority_class"}, wait_buckets);
  if (!reserved.ok()) return reserved.status();
  broker_options->on_admitted = [w = *wait, r = *reserved](const model::ClusterQueueName& cq,
                                                           const std::string& priority_class, absl::Duration waited) {
    const double seconds = absl::ToDoubleSeconds(waited);
    w->WithLabels({cq, priority_class}).Observe(seconds);
    r->WithLabels({cq, priority_class}).Observe(seconds);
  };
  return absl::OkStatus();
}

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

// The etcd client's words for its TLS options as the flags that set them,
// and for a first read that failed, which flag to look at.
std::string InEtcdFlags(absl::string_view message) {
  return absl::StrReplaceAll(message,
                             {{"ca_file", "--etcd-ca"}, {"cert_file", "--etcd-cert"}, {"key_file", "--etcd-key"}});
}
std::string EtcdTlsHint(absl::string_view error, const ServeFlags& f) {
  // The connection ended during the first exchange (no HTTP answer).
  const bool cut = absl::EndsWith(error, ": Read") || absl::EndsWith(error, ": Write") ||
                   absl::EndsWith(error, ": SSLConnection");
  if (f.etcd_ca.empty()) {
    return cut ? "; if etcd speaks TLS, set --etcd-ca (the CA of etcd's certificate), and --etcd-cert and "
                 "--etcd-key when it requires client certificates"
               : "";
  }
  if (absl::StrContains(error, "SSLServerVerification")) {
    return absl::StrCat("; etcd's certificate is not signed by --etcd-ca ", f.etcd_ca,
                        " or does not name the host of --store");
  }
  if (!cut) return "";
  return f.etcd_cert.empty()
             ? "; etcd ended the TLS connection: it may require a client certificate (set --etcd-cert and "
               "--etcd-key)"
             : absl::StrCat("; etcd ended the TLS connection: is --etcd-cert ", f.etcd_cert,
                            " signed by the CA etcd trusts (its --trusted-ca-file) and meant for client auth?");
}

// Where a webhook's denials are audited, with the caller's address: through
// the rate limit (audit::DenialAggregator) to the local audit log, or
// (several replicas on etcd) to the intake, from which the leader's journal
// brings them to every replica's log.
using DenialRecorder = std::function<absl::Status(const audit::Event&, const std::string& source)>;

// A webhook listener route: the body goes to `handle`, the outcome is
// counted, and a denial is recorded (when `record` is set) before the
// answer goes out.
server::Route WebhookRoute(const std::string& path, const WebhookMetrics& m,
                           std::function<admission::WebhookResult(absl::string_view)> handle,
                           DenialRecorder record = nullptr) {
  server::Route route;
  route.listener = server::Listener::kWebhook;
  route.method = "POST";
  route.path = path;
  const std::string name = path.substr(1);
  route.handler = [handle = std::move(handle), m, name, record = std::move(record)](const server::HttpRequest& req) {
    const absl::Time start = base::RealClock().Now();
    admission::WebhookResult result = handle(req.body);
    if (result.denial.has_value() && record) {
      absl::Status written = record(DenialEvent(*result.denial, base::RealClock().Now()), req.remote_addr);
      if (!written.ok()) {
        base::GetLogger("audit")->error("audit: a denial of {}/{} was not recorded: {}", result.denial->namespace_name,
                                        result.denial->name, written.message());
      }
    }
    m.reviews->WithLabels({name, result.kind, result.operation, result.outcome}).Increment();
    m.durations->WithLabels({name, result.kind, result.operation})
        .Observe(absl::ToDoubleSeconds(base::RealClock().Now() - start));
    server::HttpResponse out;
    out.status = result.http_status;
    out.body = std::move(result.body);
    return out;
  };
  return route;
}

std::string DisplayHost(const std::string& addr) {
  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(addr, &host, &port).ok()) return addr;
  if (host == "0.0.0.0" || host == "::") host = "localhost";
  return host;
}

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  // Hand freed memory back to the kernel once 4 MiB lie free at the top of
  // a heap. glibc's default threshold grows with the largest block freed,
  // so a server whose request threads allocate and the broker thread frees
  // kept ~150 MB of dead heap per 100,000 workloads (BM_Memory100k).
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  ServeFlags f;
  FlagSet flags("serve", "Runs the admission webhook listener and the API listener over TLS until SIGTERM.");
  flags.String("webhook-addr", &f.server.webhook_addr, "webhook listener address (host:port)");
  flags.String("api-addr", &f.server.api_addr, "API listener address (host:port)");
  flags.String("tls-cert", &f.server.tls_cert_file, "serving certificate (PEM), reloaded when it changes");
  flags.String("tls-key", &f.server.tls_key_file, "serving key (PEM), reloaded when it changes");
  flags.String("client-ca", &f.server.client_ca_file, "require webhook clients to present a certificate from this CA");
  flags.Duration("tls-reload-interval", &f.server.cert_reload_interval, "how often certificate files are checked");
  flags.String("policies", &f.policies_dir, "directory of Kueue manifests and admission rules");
  flags.Bool("manage-jobs-without-queue-name", &f.webhook.manage_jobs_without_queue_name,
             "queue workloads without a queue-name label in the namespace's LocalQueue named default");
  flags.String("controller-username", &f.webhook.controller_username,
               "the only user allowed to un-suspend workloads gangkeeper has not admitted");
  flags.Size("max-unconfirmed", &f.webhook.max_unconfirmed,
             "with --kube: workloads known only from admission reviews tracked at most (past it a create is "
             "registered from the API server's watch alone)");
  flags.Duration("confirm-grace", &f.confirm_grace,
                 "with --kube: a workload known only from an admission review for this long is looked up in the "
                 "cluster, and dropped if the API server never stored it");
  flags.Bool("fair-sharing", &f.broker.scheduler.fair_sharing,
             "fair sharing in every cohort (Kueue's fairSharing.enable); a root Cohort labelled "
             "gangkeeper.io/fair-sharing=true enables it for its tree alone");
  flags.Bool("one-head-per-cycle", &f.broker.scheduler.one_head_per_cycle,
             "admit at most one workload per ClusterQueue per cycle, as Kueue does (slower)");
  flags.Size("keep-finished", &f.broker.keep_finished,
             "finished workloads kept for GET /v1/workloads?state=finished (the most recent)");
  flags.Duration("keep-finished-for", &f.broker.keep_finished_for,
                 "and for at most this long after they ended");
  flags.String("kube", &f.kube,
               "auto (in-cluster when KUBERNETES_SERVICE_HOST is set, else none), none (releases are recorded "
               "and shown, not sent), in-cluster, or the path of a kubeconfig file");
  flags.String("tokens", &f.tokens_file,
               "API bearer tokens: YAML/JSON list of {name, sha256, role, namespaces}; reloaded when it changes");
  flags.Bool("metrics-public", &f.metrics_public,
             "serve GET /metrics to anyone (otherwise it needs a token of role admin, viewer or metrics)");
  flags.String("kube-context", &f.kube_context, "the kubeconfig context to use (default: current-context)");
  flags.String("data-dir", &f.data_dir, "directory for gangkeeper's durable state (journal, snapshots)");
  flags.String("store", &f.store,
               "where state is kept: file (the journal in --data-dir), or etcd://host:port[,host:port...] (several "
               "replicas share it; one leads)");
  flags.String("etcd-ca", &f.etcd_ca, "with --store etcd: TLS to etcd, verified with this CA (PEM)");
  flags.String("etcd-cert", &f.etcd_cert, "with --store etcd: the client certificate presented to etcd (PEM)");
  flags.String("etcd-key", &f.etcd_key, "with --store etcd: the client certificate's key (PEM)");
  flags.String("etcd-prefix", &f.etcd_prefix, "with --store etcd: the key prefix of gangkeeper's state");
  flags.Duration("lease-ttl", &f.lease_ttl,
                 "with --store etcd: the leader's lease; a dead leader is replaced within it (and one cycle)");
  flags.Duration("lease-renew", &f.lease_renew,
                 "with --store etcd: how often the leader renews its lease (below a third of --lease-ttl)");
  flags.String("replica-id", &f.replica_id, "with --store etcd: this replica's name (default: host-pid-start time)");
  flags.Bool("test-hooks", &f.test_hooks, "tests only: SIGUSR2 toggles the lease keep-alives (a partition)");
  flags.String("recover", &f.recover,
               "strict: refuse to start on a corrupt journal record that has valid ones after it; truncate: cut "
               "the journal there (what follows is lost)");
  flags.Size("audit-max-mib", &f.audit_max_mib,
             "the audit log's size limit in MiB; past it the oldest segments (an eighth of it, at most 16 MiB) are "
             "removed");
  flags.Duration("audit-max-age", &f.audit_max_age,
                 "audit segments whose events are all older than this are removed (0: no age limit)");
  flags.Duration("audit-min-retention", &f.audit_min_retention,
                 "the size limit removes audit events younger than this only with an error log line, a metric and an "
                 "audit.retention_forced event (0: no minimum)");
  flags.String("audit-hmac-key", &f.audit_hmac_key,
               "file with a secret (16 bytes or more) that HMAC-signs every audit record; gangkeeper audit verify "
               "needs it to check them");
  flags.Int("audit-denials-per-second", &f.audit_denials_per_second,
            "denied reviews audited one by one per second on average (10 times that at once); past it they are "
            "counted and summarised");
  flags.Duration("audit-denial-window", &f.audit_denial_window,
                 "repeats of a denial (same source, object and reason) within this are audited as one event with a "
                 "count");
  flags.Size("audit-index-events", &f.audit_index_events,
             "the newest this many audit events are indexed in memory (48 bytes each); older ones are scanned; 0: none");
  flags.Size("snapshot-every-records", &f.journal.snapshot_every_records,
               "write a snapshot after this many journal records");
  flags.Duration("snapshot-interval", &f.journal.snapshot_every,
                 "write a snapshot at least this often while the journal grows");
  flags.Bool("dev", &f.dev, "generate a CA and serving certificate into --dev-certs-dir if missing and use them");
  flags.String("dev-certs-dir", &f.dev_certs_dir, "where --dev keeps its certificates");
  flags.String("log-format", &f.log_format, "text or json");
  flags.String("log-level", &f.log_level, "trace, debug, info, warn, error, critical or off");
  flags.Int("threads", &f.server.threads, "worker threads kept per listener");
  flags.Int("max-connections", &f.server.max_connections, "open connections served at once per listener");
  flags.Int("listen-backlog", &f.server.listen_backlog, "kernel accept queue length");
  flags.Duration("read-timeout", &f.server.read_timeout, "cut a connection that sends nothing for this long");
  flags.Duration("write-timeout", &f.server.write_timeout, "cut a connection that reads nothing for this long");
  flags.Duration("keep-alive-timeout", &f.server.keep_alive_timeout, "close idle keep-alive connections after");
  flags.Int("keep-alive-max-requests", &f.server.keep_alive_max_requests, "requests per connection");
  flags.Size("max-body-bytes", &f.server.max_body_bytes, "larger request bodies get 413");
  flags.Duration("drain-delay", &f.server.drain_delay, "on SIGTERM, fail /readyz this long before closing");
  flags.Duration("shutdown-grace", &f.shutdown_grace, "longest wait for requests in flight on SIGTERM");
  bool help = false;
  if (absl::Status s = flags.Parse(args, nullptr, &help); !s.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (help) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }

  base::LogOptions log_options;
  log_options.level = f.log_level;
  absl::Status s = base::ParseLogFormat(f.log_format, &log_options.format);
  if (s.ok()) s = base::ConfigureLogging(log_options);
  if (!s.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  auto log = base::GetLogger("serve");

  // Block the signals we handle before any thread exists; ignore SIGPIPE
  // (a client that hangs up must not kill the process).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  if (f.dev) {
    if (f.server.tls_cert_file.empty() != f.server.tls_key_file.empty()) {
      log->error("--tls-cert and --tls-key go together");
      return 2;
    }
    if (f.server.tls_cert_file.empty()) {
      if (!ServingCertificateUsable(f.dev_certs_dir, absl::Hours(24 * 7))) {
        CertOptions cert_options;
        cert_options.out_dir = f.dev_certs_dir;
        absl::StatusOr<CertResult> made = GenerateCertificates(cert_options);
        if (!made.ok()) {
          log->error("--dev: cannot make development certificates: {}", made.status().message());
          return 1;
        }
        log->info("--dev: made development certificates in {}", f.dev_certs_dir);
      }
      f.server.tls_cert_file = absl::StrCat(f.dev_certs_dir, "/tls.crt");
      f.server.tls_key_file = absl::StrCat(f.dev_certs_dir, "/tls.key");
    }
  }
  auto policies = std::make_shared<model::PolicySet>();
  if (!f.policies_dir.empty()) {
    absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(f.policies_dir);
    if (!loaded.ok()) {
      log->error("--policies: {}", loaded.status().message());
      return 1;
    }
    for (const model::Diagnostic& d : loaded->diagnostics.items) {
      if (d.severity == model::Diagnostic::Severity::kError) {
        log->error("{}", d.ToString());
      } else if (d.severity == model::Diagnostic::Severity::kWarning) {
        log->warn("{}", d.ToString());
      } else {
        log->debug("{}", d.ToString());
      }
    }
    if (loaded->diagnostics.HasErrors()) {
      log->error("--policies {}: {} error(s); fix them (gangkeeper check-policies {} lists them) and start again",
                 f.policies_dir, loaded->diagnostics.Count(model::Diagnostic::Severity::kError), f.policies_dir);
      return 1;
    }
    *policies = std::move(loaded->policies);
    log->info("policies: {} file(s) from {}: {} ResourceFlavor, {} ClusterQueue, {} LocalQueue, {} Cohort, {} "
              "WorkloadPriorityClass, {} PriorityClass, {} GPUNodePool",
              loaded->files, f.policies_dir, policies->flavors.size(), policies->cluster_queues.size(),
              policies->local_queues.size(), policies->cohorts.size(), policies->workload_priority_classes.size(),
              policies->priority_classes.size(), policies->gpu_node_pools.size());
  }
  // --store: the journal in --data-dir, or etcd shared by several replicas.
  const bool replicated = absl::StartsWith(f.store, "etcd://");
  absl::StatusOr<std::vector<std::string>> etcd_endpoints = std::vector<std::string>{};
  if (replicated) etcd_endpoints = etcd::ParseEndpoints(f.store);
  if (f.store != "file" && !replicated) {
    log->error("--store {}: use file (the journal in --data-dir) or etcd://host:port[,host:port...]", f.store);
    return 2;
  }
  if (!etcd_endpoints.ok()) {
    log->error("--store: {}", etcd_endpoints.status().message());
    return 2;
  }
  if (f.recover != "strict" && f.recover != "truncate") {
    log->error("--recover {}: use strict or truncate", f.recover);
    return 2;
  }
  if (f.confirm_grace < absl::Milliseconds(100)) {
    log->error("--confirm-grace {}: use at least 100ms (30s by default: longer than the API server takes to "
               "store an object after admission)", absl::FormatDuration(f.confirm_grace));
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir, ec);
  if (ec) {
    log->error("--data-dir {}: {}", f.data_dir, ec.message());
    return 1;
  }
  ::chmod(f.data_dir.c_str(), 0700);
  // One process per data directory in every store mode: the journal takes
  // the lock itself; with etcd the directory still holds the audit log.
  std::unique_ptr<store::FileLock> data_dir_lock;
  if (replicated) {
    absl::StatusOr<std::unique_ptr<store::FileLock>> locked =
        store::LockDataDir(store::DefaultFileSystem(), f.data_dir);
    if (!locked.ok()) {
      log->error("--data-dir {}: {}", f.data_dir, locked.status().message());
      return 1;
    }
    data_dir_lock = *std::move(locked);
  }
  std::unique_ptr<broker::Journal> journal;
  broker::DurableState recovered;
  std::unique_ptr<etcd::Client> etcd_client;
  if (!replicated) {
    // Recover the durable state before anything can change it.
    f.journal.data_dir = f.data_dir;
    f.journal.truncate_corruption = f.recover == "truncate";
    broker::JournalRecovery recovery;
    absl::StatusOr<std::unique_ptr<broker::Journal>> opened = broker::Journal::Open(f.journal, &recovery);
    if (!opened.ok()) {
      log->error("--data-dir {}: {}", f.data_dir, opened.status().message());
      return 1;
    }
    journal = *std::move(opened);
    for (const std::string& note : recovery.notes) log->warn("recovery: {}", note);
    log->info("recovery: {} workload(s) from {} (snapshot at record {}, {} record(s) replayed) in {}; next record {}",
              recovery.workloads, f.data_dir, recovery.snapshot_position, recovery.replayed_records,
              absl::FormatDuration(recovery.took), recovery.next_record);
    recovered = journal->TakeRecovered();
  } else {
    etcd::ClientOptions eo;
    eo.endpoints = *etcd_endpoints;
    eo.ca_file = f.etcd_ca;
    eo.cert_file = f.etcd_cert;
    eo.key_file = f.etcd_key;
    absl::StatusOr<std::unique_ptr<etcd::Client>> c = etcd::Client::Create(eo);
    if (!c.ok()) {
      log->error("--store {}: {}", f.store, InEtcdFlags(c.status().message()));
      return 2;
    }
    etcd_client = *std::move(c);
    // Fail fast on a wrong address or certificate instead of serving
    // nothing but errors.
    if (absl::StatusOr<etcd::RangeResult> probe = etcd_client->Range(f.etcd_prefix + "leader"); !probe.ok()) {
      log->error("--store {}: cannot read from etcd: {}{}", f.store, probe.status().message(),
                 EtcdTlsHint(probe.status().message(), f));
      return 1;
    }
    if (f.replica_id.empty()) {
      char host[256] = {0};
      ::gethostname(host, sizeof host - 1);
      f.replica_id = absl::StrCat(host, "-", ::getpid(), "-", absl::ToUnixMillis(base::RealClock().Now()));
    }
    log->info("store: etcd at {} under {}; this replica is {}", absl::StrJoin(*etcd_endpoints, ","), f.etcd_prefix,
              f.replica_id);
  }
  // The audit log: with the file journal, written after each record (and
  // caught up with the records it missed); with etcd, every replica writes
  // it from the leader's records (replica::AuditFeed).
  audit::AuditOptions audit_options;
  audit_options.dir = f.data_dir + "/audit";
  audit_options.truncate_corruption = f.recover == "truncate";
  audit_options.max_bytes = static_cast<uint64_t>(std::max<size_t>(f.audit_max_mib, 1)) << 20;
  audit_options.segment_bytes = std::clamp<uint64_t>(audit_options.max_bytes / 8, 64 << 10, 16 << 20);
  audit_options.index_events = f.audit_index_events;
  audit_options.max_age = f.audit_max_age;
  audit_options.min_retention = f.audit_min_retention;
  if (!f.audit_hmac_key.empty()) {
    absl::StatusOr<std::string> key = audit::LoadHmacKey(f.audit_hmac_key);
    if (!key.ok()) {
      log->error("--audit-hmac-key: {}", key.status().message());
      return 2;
    }
    audit_options.hmac_key = *std::move(key);
  }
  if (f.audit_denials_per_second < 1 || f.audit_denial_window <= absl::ZeroDuration()) {
    log->error("--audit-denials-per-second {} --audit-denial-window {}: use at least 1 and a positive duration",
               f.audit_denials_per_second, absl::FormatDuration(f.audit_denial_window));
    return 2;
  }
  store::LogRecovery audit_recovery;
  absl::StatusOr<std::unique_ptr<audit::AuditLog>> audit_log = audit::AuditLog::Open(audit_options, &audit_recovery);
  if (!audit_log.ok()) {
    log->error("--data-dir {}: audit log: {}", f.data_dir, audit_log.status().message());
    return 1;
  }
  for (const std::string& note : audit_recovery.notes) log->warn("audit recovery: {}", note);
  std::unique_ptr<audit::AuditedJournal> audited;
  if (journal != nullptr) {
    uint64_t caught_up = 0;
    if (absl::Status c = audit::CatchUp(*journal, audit_log->get(), &caught_up); !c.ok()) {
      log->error("--data-dir {}: audit log: catching up with the journal: {}", f.data_dir, c.message());
      return 1;
    }
    if (caught_up > 0) log->warn("audit: wrote {} event(s) the journal had and the audit log missed", caught_up);
    journal->SetRetentionFloor([a = audit_log->get()] { return a->last_journal_record() + 1; });
    audited = std::make_unique<audit::AuditedJournal>(journal.get(), audit_log->get());
  }

  metrics::Registry registry;
  if (absl::Status m = metrics::RegisterProcessMetrics(registry); !m.ok()) {
    log->warn("process metrics unavailable: {}", m.message());
  }
  // The Kubernetes side: a client when --kube names a cluster; the actuator
  // either sends or (none) records what it would send.
  absl::StatusOr<std::optional<kube::ClusterConfig>> kube_config = KubeConfigFor(f.kube, f.kube_context);
  if (!kube_config.ok()) {
    log->error("--kube {}: {}", f.kube, kube_config.status().message());
    return 2;
  }
  std::unique_ptr<kube::Client> kube_client;
  if (kube_config->has_value()) {
    absl::StatusOr<std::unique_ptr<kube::Client>> c = kube::Client::Create(**kube_config);
    if (!c.ok()) {
      log->error("--kube {}: {}", f.kube, c.status().message());
      return 2;
    }
    kube_client = *std::move(c);
    log->info("kube: API server https://{}:{} ({})", (*kube_config)->host, (*kube_config)->port,
              (*kube_config)->source);
  } else {
    log->info("kube: none: releases and suspensions are recorded and shown, not sent");
  }
  kube::ActuatorOptions actuator_options;
  actuator_options.dry_run = kube_client == nullptr;
  if (absl::Status m = RegisterFlowMetrics(registry, &actuator_options, &f.broker); !m.ok()) {
    log->error("{}", m.message());
    return 1;
  }
  // With etcd only the leader sends, and only while its lease surely holds.
  std::atomic<replica::Replica*> leader_gate{nullptr};
  if (replicated) {
    actuator_options.may_send = [&leader_gate] {
      replica::Replica* r = leader_gate.load();
      return r != nullptr && r->MaySend();
    };
  }
  kube::KubeActuator actuator(kube_client.get(), actuator_options);
  // Quota changes made through the API are kept over the policy files.
  std::shared_ptr<const model::PolicySet> files = policies;
  auto effective_for = [files](const std::shared_ptr<const model::PolicyOverlay>& overlay) {
    return overlay == nullptr ? files
                              : std::make_shared<const model::PolicySet>(model::ApplyOverlay(*files, *overlay));
  };
  std::shared_ptr<const model::PolicySet> effective = effective_for(recovered.overlay);
  if (recovered.overlay != nullptr) {
    log->info("policies: {} object(s) changed and {} deleted through the API are kept over the files",
              recovered.overlay->put.flavors.size() + recovered.overlay->put.cluster_queues.size() +
                  recovered.overlay->put.local_queues.size() + recovered.overlay->put.cohorts.size() +
                  recovered.overlay->put.workload_priority_classes.size() +
                  recovered.overlay->put.priority_classes.size(),
              recovered.overlay->deleted.size());
  }
  absl::StatusOr<std::unique_ptr<broker::Broker>> workloads = broker::Broker::Create(
      effective, f.broker, &actuator, audited.get(), &base::RealClock(), journal != nullptr ? &recovered : nullptr);
  recovered = broker::DurableState{};
  if (!workloads.ok()) {
    log->error("--policies {}: {}", f.policies_dir, workloads.status().message());
    return 1;
  }
  actuator.Bind(workloads->get());
  (*workloads)->Start();
  broker::Broker& broker = **workloads;
  if (replicated) {
    // A replica follows until it is elected; it shows nothing before the
    // state from etcd arrives.
    if (absl::Status followed = broker.Follow(broker::DurableState{}); !followed.ok()) {
      log->error("broker: {}", followed.message());
      return 1;
    }
  }
  if (journal != nullptr) journal->StartSnapshots([&broker] { return broker.snapshot(); }, &base::RealClock());
  // The reconciler runs where the broker leads: always with the file
  // journal, on the elected replica with etcd.
  absl::Mutex reconciler_mu;
  std::unique_ptr<kube::Reconciler> reconciler;
  auto start_reconciler = [&] {
    if (kube_client == nullptr) return;
    absl::MutexLock lock(&reconciler_mu);
    kube::ReconcilerOptions ro;
    ro.manage_jobs_without_queue_name = f.webhook.manage_jobs_without_queue_name;
    ro.confirm_grace = f.confirm_grace;
    ro.confirm_check = std::clamp(f.confirm_grace / 2, absl::Milliseconds(100), absl::Seconds(5));
    reconciler = std::make_unique<kube::Reconciler>(kube_client.get(), &broker, ro);
    reconciler->Start();
  };
  auto stop_reconciler = [&] {
    std::unique_ptr<kube::Reconciler> r;
    {
      absl::MutexLock lock(&reconciler_mu);
      r = std::move(reconciler);
    }
    if (r != nullptr) r->Stop();
  };
  if (!replicated) start_reconciler();
  std::unique_ptr<replica::IntakeRegistry> intake;
  if (replicated) {
    intake = std::make_unique<replica::IntakeRegistry>(etcd_client.get(), f.etcd_prefix, f.replica_id, &broker);
  }
  broker::WorkloadRegistry& webhook_registry =
      intake != nullptr ? static_cast<broker::WorkloadRegistry&>(*intake) : static_cast<broker::WorkloadRegistry&>(broker);
  // The trust model (DESIGN §2): with a Kubernetes API, reviews are hints
  // and the API server's stored objects the truth; without one, reviews
  // are all there is. A verified client certificate (--client-ca) makes
  // the caller the API server, and so the user it names believable.
  f.webhook.trust_reviews = kube_client == nullptr;
  f.webhook.reviews_authenticated = !f.server.client_ca_file.empty();
  log->info("admission reviews are {}", f.webhook.trust_reviews
                                            ? "trusted (--kube none: no API server to confirm them)"
                                            : "hints: workloads are confirmed from the API server's objects");
  admission::Webhook webhook([&broker] { return broker.policies(); }, webhook_registry, f.webhook);
  absl::StatusOr<WebhookMetrics> webhook_metrics = RegisterWebhookMetrics(registry);
  if (!webhook_metrics.ok()) {
    log->error("{}", webhook_metrics.status().message());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<api::TokenStore>> tokens = api::TokenStore::Load(f.tokens_file);
  if (!tokens.ok()) {
    log->error("--tokens: {}", tokens.status().message());
    return 2;
  }
  if (f.tokens_file.empty()) {
    log->warn("no --tokens: the API (/v1/..., and /metrics without --metrics-public) answers 401 to everyone");
  }
  audit::DenialAggregator::Sink denial_sink = [log_ptr = audit_log->get()](const audit::Event& e) {
    return log_ptr->Append({e}).status();
  };
  if (intake != nullptr) {
    denial_sink = [registry_ptr = intake.get()](const audit::Event& e) {
      return registry_ptr->RecordReview({e.namespace_name, e.name}, e.uid, e.actor, audit::EncodeEvent(e, false));
    };
  }
  audit::DenialLimits denial_limits;
  denial_limits.per_second = f.audit_denials_per_second;
  denial_limits.burst = 10.0 * f.audit_denials_per_second;
  denial_limits.window = denial_limits.summary_every = f.audit_denial_window;
  audit::DenialAggregator denials(denial_limits, &base::RealClock(), std::move(denial_sink));
  denials.Start();
  DenialRecorder record_denial = [&denials](const audit::Event& e, const std::string& source) {
    return denials.Record(e, source);
  };
  if (absl::Status m = api::RegisterAuditMetrics(registry, audit_log->get(), &denials); !m.ok()) {
    log->error("{}", m.message());
    return 1;
  }
  if (journal != nullptr) {
    if (absl::Status m = api::RegisterJournalMetrics(registry, journal.get()); !m.ok()) {
      log->error("{}", m.message());
      return 1;
    }
  }
  if (absl::Status m = api::RegisterBrokerMetrics(registry, &broker); !m.ok()) {
    log->error("{}", m.message());
    return 1;
  }
  if (replicated) {
    absl::Status m = registry.AddCallbackGauge(
        "gangkeeper_replica_leader", "1 while this replica leads (holds the lease, schedules and actuates), else 0.",
        {"replica"}, [&leader_gate, id = f.replica_id] {
          replica::Replica* r = leader_gate.load();
          return std::vector<metrics::Sample>{{{id}, r != nullptr && r->MaySend() ? 1.0 : 0.0}};
        });
    if (!m.ok()) {
      log->error("{}", m.message());
      return 1;
    }
  }
  // With etcd, quota changes through the API of any replica go to etcd's
  // overlay key; the leader applies them (replica/overlay.h).
  std::unique_ptr<replica::EtcdPolicyEditor> policy_editor;
  if (replicated) {
    replica::EtcdPolicyEditorOptions eo;
    eo.prefix = f.etcd_prefix;
    policy_editor = std::make_unique<replica::EtcdPolicyEditor>(etcd_client.get(), &broker, effective_for, eo);
  }
  for (server::Route& r :
       api::Routes(&broker, tokens->get(), &base::RealClock(), audit_log->get(), files, policy_editor.get())) {
    f.server.routes.push_back(std::move(r));
  }
  if (!f.metrics_public) f.server.routes.push_back(api::MetricsRoute(&registry, tokens->get(), &base::RealClock()));
  f.server.routes.push_back(WebhookRoute("/mutate", *webhook_metrics, [&webhook](absl::string_view body) {
    return webhook.Mutate(body);
  }));
  f.server.routes.push_back(WebhookRoute(
      "/validate", *webhook_metrics, [&webhook](absl::string_view body) { return webhook.Validate(body); },
      record_denial));
  absl::StatusOr<std::unique_ptr<server::Server>> srv = server::Server::Create(f.server, registry);
  if (!srv.ok()) {
    log->error("{}", srv.status().message());
    return 2;
  }
  if (kube_client != nullptr && !replicated) {
    (*srv)->readiness().Set("kube", false, "waiting for the first list of the managed kinds");
  }
  if (replicated) (*srv)->readiness().Set("store", false, "waiting for the state from etcd");
  if (absl::Status started = (*srv)->Start(); !started.ok()) {
    log->error("{}", started.message());
    return 1;
  }
  // With etcd: campaign and follow; the audit log follows the journal.
  std::unique_ptr<replica::Replica> replica;
  std::unique_ptr<replica::AuditFeed> audit_feed;
  if (replicated) {
    replica::ReplicaOptions ro;
    ro.prefix = f.etcd_prefix;
    ro.election.identity = f.replica_id;
    ro.election.ttl = f.lease_ttl;
    ro.election.renew = f.lease_renew;
    ro.snapshot_every_records = f.journal.snapshot_every_records;
    ro.snapshot_every = f.journal.snapshot_every;
    ro.policies = effective_for;
    ro.on_lead = [&] {
      start_reconciler();
      log->info("replica: leading: scheduling and actuating");
    };
    ro.on_follow = [&] { stop_reconciler(); };
    absl::StatusOr<std::unique_ptr<replica::Replica>> r =
        replica::Replica::Start(etcd_client.get(), &broker, &actuator, ro);
    if (!r.ok()) {
      log->error("--store {}: {}", f.store, r.status().message());
      return 2;
    }
    replica = *std::move(r);
    leader_gate.store(replica.get());
    audit_feed = std::make_unique<replica::AuditFeed>(etcd_client.get(), f.etcd_prefix, audit_log->get());
  }
  // /readyz waits for the reconciler's first full list (or, with etcd, for
  // the state from etcd), and fails for good once the journal has failed
  // (nothing can be acknowledged any more).
  std::thread ready_watch;
  std::atomic<bool> serving{true};
  ready_watch = std::thread([&] {
    bool kube_synced = kube_client == nullptr || replicated;
    bool store_ready = !replicated;
    bool store_failed = false;
    for (int i = 0; serving.load(); ++i) {
      if (!kube_synced) {
        absl::MutexLock lock(&reconciler_mu);
        if (reconciler != nullptr && reconciler->synced()) {
          kube_synced = true;
          (*srv)->readiness().Set("kube", true);
          log->info("kube: first list done; ready");
        }
      }
      if (!store_ready) {
        const replica::ReplicaStats st = replica->stats();
        if (st.follower.synced || st.leading) {
          store_ready = true;
          (*srv)->readiness().Set("store", true);
          log->info("store: state from etcd shown; ready");
        }
      }
      if (!store_failed) {
        absl::Status health = journal != nullptr ? journal->health() : absl::OkStatus();
        if (health.ok()) health = (*audit_log)->health();
        if (!health.ok()) {
          store_failed = true;
          (*srv)->readiness().Set("store", false,
                                  absl::StrCat(health.message(), "; fix the disk and restart gangkeeper"));
          log->error("store: {}; not ready until restarted", health.message());
        }
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });

  const std::string api_host = DisplayHost(f.server.api_addr);
  const std::string webhook_host = DisplayHost(f.server.webhook_addr);
  std::string ca_hint = f.dev && absl::StartsWith(f.server.tls_cert_file, f.dev_certs_dir)
                            ? absl::StrCat(f.dev_certs_dir, "/ca.crt")
                            : std::string("<your CA file>");
  std::printf("gangkeeper %s serving\n", GK_VERSION);
  std::printf("  webhook: https://%s:%d  (POST /mutate, /validate; GET /healthz, /readyz)\n", webhook_host.c_str(),
              (*srv)->webhook_port());
  std::printf("  api:     https://%s:%d  (GET /healthz, /readyz, /metrics)\n", api_host.c_str(), (*srv)->api_port());
  std::printf("  try:     curl --cacert %s https://%s:%d/readyz\n", ca_hint.c_str(), api_host.c_str(),
              (*srv)->api_port());
  std::fflush(stdout);

  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      (void)(*srv)->ReloadCertificates();  // logged inside
      continue;
    }
    if (sig == SIGUSR2 && replica != nullptr && f.test_hooks) {
      // --test-hooks: a network partition between this replica and etcd's
      // lease keep-alives, toggled (the failover tests).
      static bool paused = false;
      paused = !paused;
      replica->PauseKeepAlives(paused);
      log->warn("test hook: lease keep-alives {}", paused ? "paused" : "resumed");
      continue;
    }
    if (sig != SIGTERM && sig != SIGINT) continue;
    log->info("received {}: draining (grace {})", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              absl::FormatDuration(f.shutdown_grace));
    // A second signal, or the grace running out, ends the process at once.
    // Every acknowledged change is already durable (the journal, or etcd),
    // so that is safe: the next start recovers it (only the final snapshot
    // is skipped).
    const absl::Time deadline = base::RealClock().Now() + f.shutdown_grace + absl::Seconds(5);
    std::thread hard_stop([signals, deadline, log] {
      while (true) {
        const absl::Duration left = deadline - base::RealClock().Now();
        if (left <= absl::ZeroDuration()) {
          log->error("shutdown: the grace period ran out; exiting now (every acknowledged change is durable)");
          break;
        }
        timespec ts = absl::ToTimespec(std::min(left, absl::Seconds(1)));
        const int got = sigtimedwait(&signals, nullptr, &ts);
        if (got == SIGTERM || got == SIGINT) {
          log->warn("shutdown: second signal; exiting now (every acknowledged change is durable)");
          break;
        }
      }
      base::FlushLogs();
      std::_Exit(1);
    });
    hard_stop.detach();
    absl::Status stopped = (*srv)->Shutdown(f.shutdown_grace);
    serving.store(false);
    if (ready_watch.joinable()) ready_watch.join();
    if (!stopped.ok()) log->error("shutdown: {}", stopped.message());
    denials.Stop();  // the last aggregated denials, while the intake still takes them
    // With etcd: resign, so another replica leads at once (this stops the
    // reconciler and makes the broker follow).
    if (replica != nullptr) replica->Shutdown();
    if (audit_feed != nullptr) audit_feed->Stop();
    stop_reconciler();
    // The broker applies what is queued (its last batch is durable), then a
    // final snapshot makes the next start quick.
    broker.Stop();
    actuator.Stop();
    if (journal != nullptr) {
      journal->StopSnapshots();
      if (absl::Status snap = journal->WriteSnapshot(*broker.snapshot()); !snap.ok()) {
        log->warn("shutdown: no final snapshot ({}); the journal has everything", snap.message());
      }
      const broker::JournalStats js = journal->stats();
      log->info("stopped cleanly: journal at record {}, snapshot at record {}", js.log.next_seq - 1,
                js.last_snapshot_position);
    } else {
      log->info("stopped cleanly: another replica leads from etcd");
    }
    leader_gate.store(nullptr);
    base::FlushLogs();
    return stopped.ok() ? 0 : 1;
  }
}

}  // namespace gangkeeper::cli
