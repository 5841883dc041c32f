// gangkeeper CLI: `gangkeeper serve`, the main job.
//
// Reads flags, prepares certificates (--dev), builds a node::Node (the
// composition root: every part, its start and stop order), then waits for
// signals on the main thread: SIGHUP re-checks the certificate files,
// SIGTERM/SIGINT drain and exit. All signals are blocked in every thread
// before any thread starts, so only the main thread's sigwait() sees them.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/node/node.h"
#include "gangkeeper/server/server.h"
#include "src/cli/certs.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {
namespace {

struct ServeFlags {
  node::Options node;
  bool dev = false;
  std::string dev_certs_dir = "certs/dev";
  std::string log_format = "text";
  std::string log_level = "info";
  absl::Duration shutdown_grace = absl::Seconds(25);
  bool test_hooks = false;
  // --wait-for-pods-ready (0: off), applied by ApplyWaitForPodsReady.
  absl::Duration wait_for_pods_ready = absl::ZeroDuration();
};

// waitForPodsReady's short form: Kueue's option with this timeout (and
// recoveryTimeout), its backoff defaults, and blockAdmission off. A Kueue
// Configuration in the policies that enables waitForPodsReady wins.
void DefineWaitForPodsReadyFlag(FlagSet& flags, ServeFlags& f) {
  flags.Duration("wait-for-pods-ready", &f.wait_for_pods_ready,
                 "evict an admitted gang whose pods are not all ready within this long, and requeue it with a "
                 "backoff (Kueue's waitForPodsReady; 0: off; a Kueue Configuration's waitForPodsReady wins)");
}

void ApplyWaitForPodsReady(ServeFlags& f) {
  if (f.wait_for_pods_ready <= absl::ZeroDuration()) return;
  model::WaitForPodsReady& w = f.node.broker.scheduler.wait_for_pods_ready;
  w.enabled = true;
  w.timeout = f.wait_for_pods_ready;
  w.recovery_timeout = f.wait_for_pods_ready;
  w.block_admission = false;
}

void DefineListenerAndPolicyFlags(FlagSet& flags, ServeFlags& f) {
  flags.String("webhook-addr", &f.node.server.webhook_addr, "webhook listener address (host:port)");
  flags.String("api-addr", &f.node.server.api_addr, "API listener address (host:port)");
  flags.String("tls-cert", &f.node.server.tls_cert_file, "serving certificate (PEM), reloaded when it changes");
  flags.String("tls-key", &f.node.server.tls_key_file, "serving key (PEM), reloaded when it changes");
  flags.String("client-ca", &f.node.server.client_ca_file, "require webhook clients to present a certificate from this CA");
  flags.Duration("tls-reload-interval", &f.node.server.cert_reload_interval, "how often certificate files are checked");
  flags.String("policies", &f.node.policies_dir, "directory of Kueue manifests and admission rules");
  flags.Bool("manage-jobs-without-queue-name", &f.node.webhook.manage_jobs_without_queue_name,
             "queue workloads without a queue-name label in the namespace's LocalQueue named default");
  flags.String("controller-username", &f.node.webhook.controller_username,
               "the only user allowed to un-suspend workloads gangkeeper has not admitted");
  flags.Size("max-unconfirmed", &f.node.webhook.max_unconfirmed,
             "with --kube: workloads known only from admission reviews tracked at most (past it a create is "
             "registered from the API server's watch alone)");
  flags.Duration("confirm-grace", &f.node.confirm_grace,
                 "with --kube: a workload known only from an admission review for this long is looked up in the "
                 "cluster, and dropped if the API server never stored it");
  flags.Bool("fair-sharing", &f.node.broker.scheduler.fair_sharing,
             "fair sharing in every cohort (Kueue's fairSharing.enable); a root Cohort labelled "
             "gangkeeper.io/fair-sharing=true enables it for its tree alone");
  flags.Bool("one-head-per-cycle", &f.node.broker.scheduler.one_head_per_cycle,
             "admit at most one workload per ClusterQueue per cycle, as Kueue does (slower)");
  flags.Size("keep-finished", &f.node.broker.keep_finished,
             "finished workloads kept for GET /v1/workloads?state=finished (the most recent)");
  flags.Duration("keep-finished-for", &f.node.broker.keep_finished_for,
                 "and for at most this long after they ended");
  flags.String("kube", &f.node.kube,
               "auto (in-cluster when KUBERNETES_SERVICE_HOST is set, else none), none (releases are recorded "
               "and shown, not sent), in-cluster, or the path of a kubeconfig file");
  flags.String("policy-source", &f.node.policy_source,
               "where ResourceFlavors, ClusterQueues, LocalQueues, Cohorts and WorkloadPriorityClasses come from: "
               "files (--policies and the API's changes) or cluster (Kueue's objects in the cluster, watched; the "
               "API's changes are written there); default cluster when --kube names a cluster that serves "
               "kueue.x-k8s.io, else files");
  flags.String("tokens", &f.node.tokens_file,
               "API bearer tokens: YAML/JSON list of {name, sha256, role, namespaces}; reloaded when it changes");
  flags.String("api-auth", &f.node.api_auth,
               "who may call the API: tokens (--tokens), kubernetes (TokenReview + SubjectAccessReview), or both "
               "(a --tokens token wins); default both with a cluster, tokens with --kube none");
  flags.Bool("metrics-public", &f.node.metrics_public,
             "serve GET /metrics to anyone (otherwise it needs a token of role admin, viewer or metrics)");
}

void DefineStoreAndOperationFlags(FlagSet& flags, ServeFlags& f) {
  flags.String("kube-context", &f.node.kube_context, "the kubeconfig context to use (default: current-context)");
  flags.String("publish-kueue-status", &f.node.publish_kueue_status,
               "write ClusterQueue and LocalQueue .status to Kueue's objects in the cluster (from the leader): auto "
               "(with --policy-source cluster), true or false; never while Kueue's own controller runs");
  flags.String("publish-workloads", &f.node.publish_workloads,
               "publish one kueue.x-k8s.io Workload per tracked workload, owned by its job (from the leader): auto "
               "(with --policy-source cluster), true or false; never while Kueue's own controller runs");
  flags.String("kueue-namespace", &f.node.kueue_namespace,
               "where Kueue's own controller manager would hold its leader Lease (to refuse publishing while it runs)");
  flags.String("data-dir", &f.node.data_dir, "directory for gangkeeper's durable state (journal, snapshots)");
  flags.String("store", &f.node.store,
               "where state is kept: file (the journal in --data-dir), or etcd://host:port[,host:port...] (several "
               "replicas share it; one leads)");
  flags.String("etcd-ca", &f.node.etcd_ca, "with --store etcd: TLS to etcd, verified with this CA (PEM)");
  flags.String("etcd-cert", &f.node.etcd_cert, "with --store etcd: the client certificate presented to etcd (PEM)");
  flags.String("etcd-key", &f.node.etcd_key, "with --store etcd: the client certificate's key (PEM)");
  flags.String("etcd-prefix", &f.node.etcd_prefix, "with --store etcd: the key prefix of gangkeeper's state");
  flags.Duration("lease-ttl", &f.node.lease_ttl,
                 "with --store etcd: the leader's lease; a dead leader is replaced within it (and one cycle)");
  flags.Duration("lease-renew", &f.node.lease_renew,
                 "with --store etcd: how often the leader renews its lease (below a third of --lease-ttl)");
  flags.String("replica-id", &f.node.replica_id, "with --store etcd: this replica's name (default: host-pid-start time)");
  flags.Bool("test-hooks", &f.test_hooks, "tests only: SIGUSR2 toggles the lease keep-alives (a partition)");
  flags.String("recover", &f.node.recover,
               "strict: refuse to start on a corrupt journal record that has valid ones after it; truncate: cut "
               "the journal there (what follows is lost)");
  flags.Size("audit-max-mib", &f.node.audit_max_mib,
             "the audit log's size limit in MiB; past it the oldest segments (an eighth of it, at most 16 MiB) are "
             "removed");
  flags.Duration("audit-max-age", &f.node.audit_max_age,
                 "audit segments whose events are all older than this are removed (0: no age limit)");
  flags.Duration("audit-min-retention", &f.node.audit_min_retention,
                 "the size limit removes audit events younger than this only with an error log line, a metric and an "
                 "audit.retention_forced event (0: no minimum)");
  flags.String("audit-hmac-key", &f.node.audit_hmac_key,
               "file with a secret (16 bytes or more) that HMAC-signs every audit record; gangkeeper audit verify "
               "needs it to check them");
  flags.Int("audit-denials-per-second", &f.node.audit_denials_per_second,
            "denied reviews audited one by one per second on average (10 times that at once); past it they are "
            "counted and summarised");
  flags.Duration("audit-denial-window", &f.node.audit_denial_window,
                 "repeats of a denial (same source, object and reason) within this are audited as one event with a "
                 "count");
  flags.Size("audit-index-events", &f.node.audit_index_events,
             "the newest this many audit events are indexed in memory (48 bytes each); older ones are scanned; 0: none");
  flags.Size("snapshot-every-records", &f.node.journal.snapshot_every_records,
               "write a snapshot after this many journal records");
  flags.Duration("snapshot-interval", &f.node.journal.snapshot_every,
                 "write a snapshot at least this often while the journal grows");
  flags.Bool("dev", &f.dev, "generate a CA and serving certificate into --dev-certs-dir if missing and use them");
  flags.String("dev-certs-dir", &f.dev_certs_dir, "where --dev keeps its certificates");
  flags.String("log-format", &f.log_format, "text or json");
  flags.String("log-level", &f.log_level, "trace, debug, info, warn, error, critical or off");
  flags.Int("threads", &f.node.server.threads, "event-loop threads serving both listeners (0: one per core)");
  flags.Int("max-connections", &f.node.server.max_connections,
            "open connections per listener; beyond it the oldest idle one is closed");
  flags.Int("max-connections-per-source", &f.node.server.max_connections_per_source,
            "open connections per listener from one source address; beyond it its oldest idle one is closed");
  flags.Duration("handshake-timeout", &f.node.server.handshake_timeout, "cut a TLS handshake that takes longer");
  flags.Int("listen-backlog", &f.node.server.listen_backlog, "kernel accept queue length");
  flags.Duration("read-timeout", &f.node.server.read_timeout, "cut a request whose header (then body) takes longer to arrive");
  flags.Duration("write-timeout", &f.node.server.write_timeout, "cut a connection that reads nothing for this long");
  flags.Duration("keep-alive-timeout", &f.node.server.keep_alive_timeout, "close idle keep-alive connections after");
  flags.Int("keep-alive-max-requests", &f.node.server.keep_alive_max_requests, "requests per connection");
  flags.Size("max-body-bytes", &f.node.server.max_body_bytes, "larger request bodies get 413");
  flags.Duration("drain-delay", &f.node.server.drain_delay, "on SIGTERM, fail /readyz this long before closing");
  flags.Duration("shutdown-grace", &f.shutdown_grace, "longest wait for requests in flight on SIGTERM");
}

std::string DisplayHost(const std::string& addr) {
  std::string host;
  int port = 0;
  if (!server::ParseListenAddress(addr, &host, &port).ok()) return addr;
  if (host == "0.0.0.0" || host == "::") host = "localhost";
  return host;
}

// --dev: a CA and serving certificate in --dev-certs-dir unless usable ones
// are there, used unless --tls-cert/--tls-key name others.
absl::Status PrepareDevCertificates(ServeFlags& f) {
  server::Options& s = f.node.server;
  if (s.tls_cert_file.empty() != s.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!s.tls_cert_file.empty()) return absl::OkStatus();
  if (!ServingCertificateUsable(f.dev_certs_dir, absl::Hours(24 * 7))) {
    CertOptions cert_options;
    cert_options.out_dir = f.dev_certs_dir;
    absl::StatusOr<CertResult> made = GenerateCertificates(cert_options);
    if (!made.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--dev: cannot make development certificates: ", made.status().message()));
    }
    base::GetLogger("serve")->info("--dev: made development certificates in {}", f.dev_certs_dir);
  }
  s.tls_cert_file = absl::StrCat(f.dev_certs_dir, "/tls.crt");
  s.tls_key_file = absl::StrCat(f.dev_certs_dir, "/tls.key");
  return absl::OkStatus();
}

void PrintBanner(const ServeFlags& f, const node::Node& n) {
  const server::Options& s = f.node.server;
  const std::string api_host = DisplayHost(s.api_addr);
  const std::string webhook_host = DisplayHost(s.webhook_addr);
  const std::string ca_hint = f.dev && absl::StartsWith(s.tls_cert_file, f.dev_certs_dir)
                                  ? absl::StrCat(f.dev_certs_dir, "/ca.crt")
                                  : std::string("<your CA file>");
  std::printf("gangkeeper %s serving\n", GK_VERSION);
  std::printf("  webhook: https://%s:%d  (POST /mutate, /validate; GET /healthz, /readyz)\n", webhook_host.c_str(),
              n.webhook_port());
  std::printf("  api:     https://%s:%d  (GET /healthz, /readyz, /metrics)\n", api_host.c_str(), n.api_port());
  std::printf("  try:     curl --cacert %s https://%s:%d/readyz\n", ca_hint.c_str(), api_host.c_str(), n.api_port());
  std::fflush(stdout);
}

// A second signal, or the grace running out, ends the process at once.
// Every acknowledged change is already durable (the journal, or etcd), so
// that is safe: the next start recovers it (only the final snapshot is
// skipped).
void ArmHardStop(sigset_t signals, absl::Duration grace) {
  const absl::Time deadline = base::RealClock().Now() + grace + absl::Seconds(5);
  std::thread([signals, deadline] {
    auto log = base::GetLogger("serve");
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
  }).detach();
}

// Serves until SIGTERM/SIGINT; returns the exit code.
int WaitForSignals(const ServeFlags& f, const sigset_t& signals, node::Node& n) {
  auto log = base::GetLogger("serve");
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      (void)n.ReloadCertificates();  // logged inside
      continue;
    }
    if (sig == SIGUSR2 && f.test_hooks) {
      // --test-hooks: a network partition between this replica and etcd's
      // lease keep-alives, toggled (the failover tests).
      log->warn("test hook: lease keep-alives {}", n.ToggleKeepAlivesForTest() ? "paused" : "resumed");
      continue;
    }
    if (sig != SIGTERM && sig != SIGINT) continue;
    log->info("received {}: draining (grace {})", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              absl::FormatDuration(f.shutdown_grace));
    ArmHardStop(signals, f.shutdown_grace);
    const absl::Status stopped = n.Shutdown(f.shutdown_grace);
    base::FlushLogs();
    return stopped.ok() ? 0 : 1;
  }
}

// A start error: logged; InvalidArgument (a setting at fault) exits 2.
int StartError(const absl::Status& s) {
  base::GetLogger("serve")->error("{}", s.message());
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
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
  flags.Examples(
      "  gangkeeper serve --dev --policies policies/ --tokens data/dev-tokens.yaml     what ./run.sh runs\n"
      "  gangkeeper serve --tls-cert tls.crt --tls-key tls.key --policies /etc/gangkeeper/policies --kube in-cluster");
  flags.ExitCodes("0 stopped by SIGTERM/SIGINT after draining; 1 a start or shutdown failure; 2 a bad flag or setting");
  DefineListenerAndPolicyFlags(flags, f);
  DefineStoreAndOperationFlags(flags, f);
  DefineWaitForPodsReadyFlag(flags, f);
  if (std::optional<int> done = flags.ParseOrExit(args, nullptr)) return *done;
  ApplyWaitForPodsReady(f);
  base::LogOptions log_options;
  log_options.level = f.log_level;
  absl::Status s = base::ParseLogFormat(f.log_format, &log_options.format);
  if (s.ok()) s = base::ConfigureLogging(log_options);
  if (!s.ok()) {
    std::fprintf(stderr, "gangkeeper: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  // Block the signals we handle before any thread exists; ignore SIGPIPE
  // (a client that hangs up must not kill the process).
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  if (f.dev) {
    if (absl::Status d = PrepareDevCertificates(f); !d.ok()) return StartError(d);
  }
  absl::StatusOr<std::unique_ptr<node::Node>> n = node::Node::Create(f.node);
  if (!n.ok()) return StartError(n.status());
  if (absl::Status started = (*n)->Start(); !started.ok()) return StartError(started);
  PrintBanner(f, **n);
  return WaitForSignals(f, signals, **n);
}

}  // namespace gangkeeper::cli
