// gangkeeper node: the composition root (see node.h for the order).
#include "gangkeeper/node/node.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/api/api.h"
#include "gangkeeper/api/metrics.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/denials.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/broker/roles.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/kube/actuator.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/held_objects.h"
#include "gangkeeper/kube/reconciler.h"
#include "gangkeeper/kube/training_runtimes.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/node/audit_events.h"
#include "gangkeeper/node/audit_stream.h"
#include "gangkeeper/replica/intake.h"
#include "gangkeeper/replica/overlay.h"
#include "gangkeeper/replica/replica.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/journal.h"
#include "src/node/api_auth.h"
#include "src/node/cluster_feeds.h"
#include "src/node/kueue_publishing.h"
#include "src/node/kueue_source.h"
#include "src/node/wiring.h"

namespace gangkeeper::node {
namespace {

// InvalidArgument means "a setting is at fault" (exit 2); a failure of a
// part at run time is reported as FailedPrecondition (exit 1) whatever
// code the part used, so the caller can tell the two apart.
absl::Status RunTime(absl::string_view message) { return absl::FailedPreconditionError(message); }
absl::Status Setting(absl::string_view message) { return absl::InvalidArgumentError(message); }

}  // namespace

// Members in construction order: they are destroyed in reverse, so every
// part outlives the parts that use it.
struct Node::Impl {
  Options o;
  const base::Clock* clock = &base::RealClock();
  std::shared_ptr<spdlog::logger> log = base::GetLogger("serve");
  bool replicated = false;
  std::shared_ptr<const model::PolicySet> files = std::make_shared<model::PolicySet>();
  // The files with the API's overlay: the one place they are combined.
  std::unique_ptr<model::PolicyStore> policy_store;
  // The durable state: the journal in --data-dir, or etcd.
  std::unique_ptr<store::FileLock> data_dir_lock;
  std::unique_ptr<store::Journal> journal;
  broker::DurableState recovered;
  std::unique_ptr<etcd::Client> etcd_client;
  std::unique_ptr<audit::AuditLog> audit_log;
  std::unique_ptr<AuditedJournal> audited;
  metrics::Registry registry;
  std::unique_ptr<kube::Client> kube_client;
  // Namespace labels and Events (a cluster only); an observer of the
  // broker, so it outlives it.
  std::unique_ptr<ClusterFeeds> cluster_feeds;
  // Kueue's status and Workload objects written back (a cluster serving
  // Kueue's CRDs only); an observer of the broker, so it outlives it.
  std::unique_ptr<KueuePublishing> kueue_publishing;
  // --policy-source cluster: Kueue's objects from the cluster, and the
  // API's writes of them to the cluster (kueue_source.h).
  std::unique_ptr<KueueSource> kueue_source;
  // What ChoosePolicySource's discovery of Kueue's group found, when it
  // asked; KueuePublishing reuses it.
  std::optional<absl::StatusOr<kube::KueueVersion>> kueue_discovery;
  // With etcd only the leader sends, and only while its lease surely holds.
  std::atomic<replica::Replica*> leader_gate{nullptr};
  // The held job objects as the reconciler read them: releases built from
  // them need no GET. Before both, so that it outlives them.
  kube::HeldObjects held_objects;
  std::unique_ptr<kube::KubeActuator> actuator;
  // Kueue's workload counters and admission waits: an observer of the
  // broker's durable changes (BrokerOptions::observers).
  std::unique_ptr<broker::WorkloadCounters> counters;
  // The file journal's broker (replicas: each term's broker is the
  // replica's), and what every front end reads and writes through: that
  // broker, or the role the replica plays now (broker/roles.h).
  std::shared_ptr<broker::Broker> broker;
  std::unique_ptr<broker::SwitchingPort> front;
  // The webhook's registry: the broker itself, or (replicas) the intake.
  std::unique_ptr<broker::WorkloadRegistry> broker_registry;
  // The reconciler runs where the broker leads: always with the file
  // journal, on the elected replica with etcd.
  absl::Mutex reconciler_mu;
  std::unique_ptr<kube::Reconciler> reconciler ABSL_GUARDED_BY(reconciler_mu);
  // TrainJobs: the Kubeflow Trainer runtimes their pod sets come from (a
  // cluster only; a client of its own). After the reconciler, so that it
  // stops first: its callback tells the reconciler.
  std::unique_ptr<kube::Client> runtimes_client;
  std::unique_ptr<kube::TrainingRuntimeCache> runtimes;
  std::atomic<bool> kube_synced{false};
  std::atomic<bool> store_failed{false};
  std::unique_ptr<replica::IntakeRegistry> intake;
  std::unique_ptr<admission::Webhook> webhook;
  std::unique_ptr<api::TokenStore> tokens;
  // --kube's cluster (when there is one), and who the API's callers are.
  std::optional<kube::ClusterConfig> kube_config;
  std::unique_ptr<ApiAuth> api_auth;
  std::unique_ptr<audit::DenialAggregator> denials;
  std::unique_ptr<replica::EtcdPolicyEditor> policy_editor;
  std::unique_ptr<server::Server> server;
  std::unique_ptr<replica::Replica> replica;
  // With etcd: this replica's denied reviews go to the audit stream, and
  // the stream comes back into the local audit log (audit_stream.h).
  std::unique_ptr<ReviewWriter> review_writer;
  std::unique_ptr<AuditStreamFeed> audit_feed;
  bool keep_alives_paused = false;
  enum class Phase { kBuilt, kStarted, kStopped };
  std::atomic<Phase> phase{Phase::kBuilt};

  absl::Status CheckOptions();
  absl::Status LoadPolicyFiles();
  absl::Status OpenStore();
  absl::Status OpenJournal();
  absl::Status ConnectEtcd(const std::vector<std::string>& endpoints);
  absl::Status OpenAudit();
  absl::Status ConnectKube();
  absl::Status ConnectKueuePublishing();
  absl::Status ChoosePolicySource();
  absl::Status BuildBroker();
  absl::Status BuildFrontEnds();
  absl::Status RegisterMetrics();
  // Kueue's replica_role: "leader" / "follower" with replicas, else "standalone".
  api::ReplicaRole Role();
  void DeclareReadiness();
  void StartReconciler();
  absl::Status ConnectTrainingRuntimes(const kube::ClusterConfig& config);
  void StopReconciler();
};

absl::Status Node::Impl::CheckOptions() {
  replicated = absl::StartsWith(o.store, "etcd://");
  if (o.store != "file" && !replicated) {
    return Setting(absl::StrCat("--store ", o.store,
                                ": use file (the journal in --data-dir) or etcd://host:port[,host:port...]"));
  }
  if (o.recover != "strict" && o.recover != "truncate") {
    return Setting(absl::StrCat("--recover ", o.recover, ": use strict or truncate"));
  }
  if (o.confirm_grace < absl::Milliseconds(100)) {
    return Setting(absl::StrCat("--confirm-grace ", absl::FormatDuration(o.confirm_grace),
                                ": use at least 100ms (30s by default: longer than the API server takes to store an "
                                "object after admission)"));
  }
  if (o.audit_denials_per_second < 1 || o.audit_denial_window <= absl::ZeroDuration()) {
    return Setting(absl::StrCat("--audit-denials-per-second ", o.audit_denials_per_second, " --audit-denial-window ",
                                absl::FormatDuration(o.audit_denial_window),
                                ": use at least 1 and a positive duration"));
  }
  return absl::OkStatus();
}

absl::Status Node::Impl::LoadPolicyFiles() {
  if (o.policies_dir.empty()) return absl::OkStatus();
  absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(o.policies_dir);
  if (!loaded.ok()) return RunTime(absl::StrCat("--policies: ", loaded.status().message()));
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
    return RunTime(absl::StrCat("--policies ", o.policies_dir, ": ",
                                loaded->diagnostics.Count(model::Diagnostic::Severity::kError),
                                " error(s); fix them (gangkeeper check-policies ", o.policies_dir,
                                " lists them) and start again"));
  }
  auto p = std::make_shared<model::PolicySet>(std::move(loaded->policies));
  log->info("policies: {} file(s) from {}: {} ResourceFlavor, {} ClusterQueue, {} LocalQueue, {} Cohort, {} "
            "WorkloadPriorityClass, {} PriorityClass, {} GPUNodePool",
            loaded->files, o.policies_dir, p->flavors.size(), p->cluster_queues.size(), p->local_queues.size(),
            p->cohorts.size(), p->workload_priority_classes.size(), p->priority_classes.size(),
            p->gpu_node_pools.size());
  files = std::move(p);
  return absl::OkStatus();
}

// The data directory (one process per directory in every store mode: the
// journal takes the lock itself; with etcd the directory still holds the
// audit log), then the durable state.
absl::Status Node::Impl::OpenStore() {
  absl::StatusOr<std::vector<std::string>> endpoints = std::vector<std::string>{};
  if (replicated) endpoints = etcd::ParseEndpoints(o.store);
  if (!endpoints.ok()) return Setting(absl::StrCat("--store: ", endpoints.status().message()));
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) return RunTime(absl::StrCat("--data-dir ", o.data_dir, ": ", ec.message()));
  ::chmod(o.data_dir.c_str(), 0700);
  if (!replicated) return OpenJournal();
  absl::StatusOr<std::unique_ptr<store::FileLock>> locked = store::LockDataDir(store::DefaultFileSystem(), o.data_dir);
  if (!locked.ok()) return RunTime(absl::StrCat("--data-dir ", o.data_dir, ": ", locked.status().message()));
  data_dir_lock = *std::move(locked);
  return ConnectEtcd(*endpoints);
}

// Recovers the durable state before anything can change it.
absl::Status Node::Impl::OpenJournal() {
  o.journal.data_dir = o.data_dir;
  o.journal.truncate_corruption = o.recover == "truncate";
  store::JournalRecovery recovery;
  absl::StatusOr<std::unique_ptr<store::Journal>> opened = store::Journal::Open(o.journal, &recovery);
  if (!opened.ok()) return RunTime(absl::StrCat("--data-dir ", o.data_dir, ": ", opened.status().message()));
  journal = *std::move(opened);
  for (const std::string& note : recovery.notes) log->warn("recovery: {}", note);
  log->info("recovery: {} workload(s) from {} (snapshot at record {}, {} record(s) replayed) in {}; next record {}",
            recovery.workloads, o.data_dir, recovery.snapshot_position, recovery.replayed_records,
            absl::FormatDuration(recovery.took), recovery.next_record);
  recovered = journal->TakeRecovered();
  return absl::OkStatus();
}

absl::Status Node::Impl::ConnectEtcd(const std::vector<std::string>& endpoints) {
  etcd::ClientOptions eo;
  eo.endpoints = endpoints;
  eo.ca_file = o.etcd_ca;
  eo.cert_file = o.etcd_cert;
  eo.key_file = o.etcd_key;
  absl::StatusOr<std::unique_ptr<etcd::Client>> c = etcd::Client::Create(eo);
  if (!c.ok()) return Setting(absl::StrCat("--store ", o.store, ": ", InEtcdFlags(c.status().message())));
  etcd_client = *std::move(c);
  // Fail fast on a wrong address or certificate instead of serving nothing
  // but errors.
  if (absl::StatusOr<etcd::RangeResult> probe = etcd_client->Range(o.etcd_prefix + "leader"); !probe.ok()) {
    return RunTime(absl::StrCat("--store ", o.store, ": cannot read from etcd: ", probe.status().message(),
                                EtcdTlsHint(probe.status().message(), o.etcd_ca, o.etcd_cert)));
  }
  if (o.replica_id.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    o.replica_id = absl::StrCat(host, "-", ::getpid(), "-", absl::ToUnixMillis(clock->Now()));
  }
  log->info("store: etcd at {} under {}; this replica is {}", absl::StrJoin(endpoints, ","), o.etcd_prefix,
            o.replica_id);
  return absl::OkStatus();
}

// The audit log: with the file journal, written after each record (and
// caught up with the records it missed); with etcd, every replica writes it
// from the audit stream (AuditStreamFeed, audit_stream.h).
absl::Status Node::Impl::OpenAudit() {
  audit::AuditOptions ao;
  ao.dir = o.data_dir + "/audit";
  ao.clock = clock;
  ao.truncate_corruption = o.recover == "truncate";
  ao.max_bytes = static_cast<uint64_t>(std::max<size_t>(o.audit_max_mib, 1)) << 20;
  ao.segment_bytes = std::clamp<uint64_t>(ao.max_bytes / 8, 64 << 10, 16 << 20);
  ao.index_events = o.audit_index_events;
  ao.max_age = o.audit_max_age;
  ao.min_retention = o.audit_min_retention;
  if (!o.audit_hmac_key.empty()) {
    absl::StatusOr<std::string> key = audit::LoadHmacKey(o.audit_hmac_key);
    if (!key.ok()) return Setting(absl::StrCat("--audit-hmac-key: ", key.status().message()));
    ao.hmac_key = *std::move(key);
  }
  store::LogRecovery recovery;
  absl::StatusOr<std::unique_ptr<audit::AuditLog>> opened = audit::AuditLog::Open(ao, &recovery);
  if (!opened.ok()) {
    return RunTime(absl::StrCat("--data-dir ", o.data_dir, ": audit log: ", opened.status().message()));
  }
  audit_log = *std::move(opened);
  for (const std::string& note : recovery.notes) log->warn("audit recovery: {}", note);
  if (journal == nullptr) return absl::OkStatus();
  uint64_t caught_up = 0;
  if (absl::Status c = CatchUp(*journal, audit_log.get(), &caught_up); !c.ok()) {
    return RunTime(
        absl::StrCat("--data-dir ", o.data_dir, ": audit log: catching up with the journal: ", c.message()));
  }
  if (caught_up > 0) log->warn("audit: wrote {} event(s) the journal had and the audit log missed", caught_up);
  journal->SetRetentionFloor([a = audit_log.get()] { return a->last_journal_record() + 1; });
  audited = std::make_unique<AuditedJournal>(journal.get(), audit_log.get());
  return absl::OkStatus();
}

// The Kubernetes side: a client when --kube names a cluster; the actuator
// either sends or (none) records what it would send.
absl::Status Node::Impl::ConnectKube() {
  if (absl::Status m = metrics::RegisterProcessMetrics(registry); !m.ok()) {
    log->warn("process metrics unavailable: {}", m.message());
  }
  absl::StatusOr<std::optional<kube::ClusterConfig>> config = KubeConfigFor(o.kube, o.kube_context);
  if (!config.ok()) return Setting(absl::StrCat("--kube ", o.kube, ": ", config.status().message()));
  if (config->has_value()) {
    absl::StatusOr<std::unique_ptr<kube::Client>> c = kube::Client::Create(**config);
    if (!c.ok()) return Setting(absl::StrCat("--kube ", o.kube, ": ", c.status().message()));
    kube_client = *std::move(c);
    kube_config = **config;
    log->info("kube: API server https://{}:{} ({})", (*config)->host, (*config)->port, (*config)->source);
    ClusterFeeds::Options fo;
    fo.clock = clock;
    fo.instance = o.replica_id;
    if (replicated) {
      fo.leading = [this] {
        replica::Replica* r = leader_gate.load();
        return r != nullptr && r->MaySend();
      };
    }
    absl::StatusOr<std::unique_ptr<ClusterFeeds>> feeds = ClusterFeeds::Create(**config, std::move(fo));
    if (!feeds.ok()) return Setting(absl::StrCat("--kube ", o.kube, ": ", feeds.status().message()));
    cluster_feeds = *std::move(feeds);
    o.broker.observers.push_back(cluster_feeds->observer());
    if (absl::Status r = ConnectTrainingRuntimes(**config); !r.ok()) return r;
  } else {
    log->info("kube: none: releases and suspensions are recorded and shown, not sent");
  }
  kube::ActuatorOptions ao;
  ao.clock = clock;
  ao.dry_run = kube_client == nullptr;
  ao.held_objects = &held_objects;
  broker::WorkloadCounters::OnAdmitted on_admitted;
  if (absl::Status m = RegisterFlowMetrics(registry, &ao, &o.broker, &on_admitted, Role()); !m.ok()) {
    return RunTime(m.message());
  }
  counters = std::make_unique<broker::WorkloadCounters>(std::move(on_admitted));
  o.broker.observers.push_back(counters.get());
  if (replicated) {
    ao.may_send = [this] {
      replica::Replica* r = leader_gate.load();
      return r != nullptr && r->MaySend();
    };
  }
  // Stale orders are not sent: each is checked against the newest state of
  // whatever role the node plays (`front`, built with the broker after this;
  // orders come only once the broker runs). A follower's orders are not
  // sent anyway (may_send).
  ao.release_wanted = [this](const broker::ReleaseOrder& order) {
    return front == nullptr || kube::OrderWanted(*front->snapshot(), order.key, order.uid, /*release=*/true);
  };
  ao.suspend_wanted = [this](const broker::SuspendOrder& order) {
    return front == nullptr || kube::OrderWanted(*front->snapshot(), order.key, order.uid, /*release=*/false);
  };
  actuator = std::make_unique<kube::KubeActuator>(kube_client.get(), ao);
  return absl::OkStatus();
}

// What gangkeeper writes to Kueue's own API (issue #24 items 2-4): from the
// leader only, never while Kueue's own controller runs.
absl::Status Node::Impl::ConnectKueuePublishing() {
  if (!kube_config.has_value()) return absl::OkStatus();
  KueuePublishing::Options ko;
  ko.clock = clock;
  ko.policy_source_cluster = kueue_source != nullptr;
  ko.served = kueue_discovery;
  ko.status = o.publish_kueue_status;
  ko.workloads = o.publish_workloads;
  ko.detection.kueue_namespace = o.kueue_namespace;
  if (replicated) {
    ko.leading = [this] {
      replica::Replica* r = leader_gate.load();
      return r != nullptr && r->MaySend();
    };
  }
  absl::StatusOr<std::unique_ptr<KueuePublishing>> k = KueuePublishing::Create(*kube_config, std::move(ko));
  if (!k.ok()) return Setting(k.status().message());
  kueue_publishing = *std::move(k);
  if (kueue_publishing != nullptr && kueue_publishing->observer() != nullptr) {
    o.broker.observers.push_back(kueue_publishing->observer());
  }
  return absl::OkStatus();
}

// --policy-source (kueue_source.h): Kueue's objects from the files or from
// the cluster; the choice and why are logged.
absl::Status Node::Impl::ChoosePolicySource() {
  absl::StatusOr<PolicySourceChoice> choice = node::ChoosePolicySource(o.policy_source, kube_client.get());
  if (!choice.ok()) return Setting(choice.status().message());
  kueue_discovery = choice->discovery;
  if (!choice->cluster) {
    log->info("policies: source files ({})", choice->why);
    return absl::OkStatus();
  }
  log->info("policies: source cluster ({}): Kueue's objects are watched in the cluster; the API's changes of them "
            "are written there; GPUNodePools and PriorityClasses come from --policies",
            choice->why);
  if (!files->flavors.empty() || !files->cluster_queues.empty() || !files->local_queues.empty() ||
      !files->cohorts.empty() || !files->workload_priority_classes.empty()) {
    log->warn("policies: the Kueue objects in --policies {} are not used with --policy-source cluster (the "
              "cluster's are); apply them with kubectl, or start with --policy-source files",
              o.policies_dir);
  }
  KueueSource::Options ko;
  ko.clock = clock;
  ko.version = choice->version;
  absl::StatusOr<std::unique_ptr<KueueSource>> k = KueueSource::Create(*kube_config, std::move(ko));
  if (!k.ok()) return Setting(absl::StrCat("--policy-source cluster: ", k.status().message()));
  kueue_source = *std::move(k);
  return absl::OkStatus();
}

// The broker, from the recovered state (file journal) or following the
// state from etcd (replicas). Quota changes made through the API are kept
// over the policy files.
absl::Status Node::Impl::BuildBroker() {
  policy_store = std::make_unique<model::PolicyStore>(files);
  if (cluster_feeds != nullptr) cluster_feeds->Seed(policy_store.get());
  if (kueue_source != nullptr) {
    kueue_source->Seed(policy_store.get(), recovered.policies.get());
    // The cluster is the one truth: an overlay recorded with the files is
    // not laid over it.
    if (recovered.overlay != nullptr) {
      log->warn("policies: the API's changes recorded over the policy files (generation {}) are not used with "
                "--policy-source cluster",
                recovered.overlay->generation);
      recovered.overlay = nullptr;
    }
  }
  model::Diagnostics problems;
  const std::shared_ptr<const model::EffectiveSet> effective = policy_store->Adopt(recovered.overlay, &problems);
  if (problems.HasErrors()) {
    log->warn("policies: the files with the API's recorded changes have errors (kept, as recorded): {}",
              problems.ErrorSummary());
  }
  if (const auto& ov = recovered.overlay; ov != nullptr) {
    log->info("policies: {} object(s) changed and {} deleted through the API are kept over the files",
              ov->put.flavors.size() + ov->put.cluster_queues.size() + ov->put.local_queues.size() +
                  ov->put.cohorts.size() + ov->put.workload_priority_classes.size() + ov->put.priority_classes.size(),
              ov->deleted.size());
  }
  if (replicated) {
    // A replica follows until it is elected (replica::Replica, at Start):
    // it shows the policies and nothing else before the state from etcd.
    absl::StatusOr<std::shared_ptr<broker::ReadOnlyView>> view = broker::ReadOnlyView::Create(effective->policies, o.broker, clock);
    if (!view.ok()) return RunTime(absl::StrCat("--policies ", o.policies_dir, ": ", view.status().message()));
    front = std::make_unique<broker::SwitchingPort>(*std::move(view));
  } else {
    absl::StatusOr<std::unique_ptr<broker::Broker>> b =
        broker::Broker::Create(effective->policies, o.broker, actuator.get(), audited.get(), clock, &recovered);
    recovered = broker::DurableState{};
    if (!b.ok()) return RunTime(absl::StrCat("--policies ", o.policies_dir, ": ", b.status().message()));
    broker = *std::move(b);
    front = std::make_unique<broker::SwitchingPort>(broker);
  }
  actuator->Bind(front.get());
  broker_registry = broker::NewBrokerRegistry(front.get(), front.get());
  if (broker != nullptr) {
    broker->Start();
    journal->StartSnapshots([b = broker.get()] { return b->snapshot(); }, clock);
  }
  return absl::OkStatus();
}

// The webhook (trust model, DESIGN §2: with a Kubernetes API reviews are
// hints and the API server's stored objects the truth; a verified client
// certificate makes the caller the API server), the API, the denial
// auditing and both listeners' routes.
absl::Status Node::Impl::BuildFrontEnds() {
  if (replicated) {
    intake = std::make_unique<replica::IntakeRegistry>(etcd_client.get(), o.etcd_prefix, o.replica_id, front.get(),
                                                       clock);
  }
  broker::WorkloadRegistry& registrations = intake != nullptr ? static_cast<broker::WorkloadRegistry&>(*intake)
                                                              : *broker_registry;
  o.webhook.trust_reviews = kube_client == nullptr;
  o.webhook.reviews_authenticated = !o.server.client_ca_file.empty();
  log->info("admission reviews are {}", o.webhook.trust_reviews
                                            ? "trusted (--kube none: no API server to confirm them)"
                                            : "hints: workloads are confirmed from the API server's objects");
  // waitForPodsReady needs the cluster's word on readiness (the reconciler).
  if (kube_client == nullptr && (o.broker.scheduler.wait_for_pods_ready.enabled ||
                                 front->snapshot()->shared_policies()->configuration.wait_for_pods_ready.enabled)) {
    log->warn("waitForPodsReady with --kube none: nothing reports pods ready, so every admitted gang is evicted "
              "after the timeout");
  }
  webhook = std::make_unique<admission::Webhook>([f = front.get()] { return f->snapshot()->shared_policies(); },
                                                 registrations, o.webhook);
  absl::StatusOr<WebhookMetrics> wm = RegisterWebhookMetrics(registry);
  if (!wm.ok()) return RunTime(wm.status().message());
  absl::StatusOr<std::unique_ptr<api::TokenStore>> t = api::TokenStore::Load(o.tokens_file);
  if (!t.ok()) return Setting(absl::StrCat("--tokens: ", t.status().message()));
  tokens = *std::move(t);
  absl::StatusOr<std::unique_ptr<ApiAuth>> auth = BuildApiAuth(o.api_auth, kube_config, tokens.get(), clock);
  if (!auth.ok()) return Setting(absl::StrCat("--api-auth: ", auth.status().message()));
  api_auth = *std::move(auth);
  log->info("API authentication: {}{}", api::AuthModeName(api_auth->mode),
            o.api_auth.empty() ? " (the default with --kube " + o.kube + ")" : "");
  if (o.tokens_file.empty() && api_auth->mode == api::AuthMode::kTokens) {
    log->warn("no --tokens: the API (/v1/..., and /metrics without --metrics-public) answers 401 to everyone");
  }
  audit::DenialAggregator::Sink sink = [a = audit_log.get()](const audit::Event& e) { return a->Append({e}).status(); };
  if (replicated) {
    review_writer = std::make_unique<ReviewWriter>(etcd_client.get(), o.etcd_prefix, o.replica_id, clock);
    sink = [w = review_writer.get()](const audit::Event& e) { return w->Write(e); };
  }
  audit::DenialLimits limits;
  limits.per_second = o.audit_denials_per_second;
  limits.burst = 10.0 * o.audit_denials_per_second;
  limits.window = limits.summary_every = o.audit_denial_window;
  denials = std::make_unique<audit::DenialAggregator>(limits, clock, std::move(sink));
  denials->Start();
  if (absl::Status m = RegisterMetrics(); !m.ok()) return m;
  // With etcd, quota changes through the API of any replica go to etcd's
  // overlay key; the leader applies them (replica/overlay.h).
  if (replicated) {
    replica::EtcdPolicyEditorOptions eo;
    eo.prefix = o.etcd_prefix;
    policy_editor =
        std::make_unique<replica::EtcdPolicyEditor>(etcd_client.get(), front.get(), policy_store.get(), eo);
  }
  server::Options so = o.server;
  so.clock = clock;
  for (server::Route& r : api::Routes(front.get(), front.get(), api_auth->authenticator, clock, audit_log.get(),
                                      policy_store.get(), policy_editor.get(),
                                      kueue_source != nullptr ? kueue_source->writer() : nullptr)) {
    so.routes.push_back(std::move(r));
  }
  if (!o.metrics_public) so.routes.push_back(api::MetricsRoute(&registry, api_auth->authenticator, clock));
  admission::Webhook* w = webhook.get();
  // /mutate decides from the snapshot alone (no broker round trip, no
  // fsync): it answers on the event loop. /validate checks on the event
  // loop and registers asynchronously: its answer goes out when the
  // broker's durable acknowledgement comes, and no thread waits for it
  // (a registry that can only block, etcd's intake, and the denial audit
  // run on the worker pool).
  so.routes.push_back(WebhookRoute("/mutate", *wm, clock, [w](absl::string_view body) { return w->Mutate(body); }));
  so.routes.back().may_block = false;
  so.routes.push_back(AsyncWebhookRoute(
      "/validate", *wm, clock,
      [w](absl::string_view body, const broker::BlockingRunner& blocking,
          absl::AnyInvocable<void(admission::WebhookResult)> done) {
        w->ValidateAsync(body, blocking, std::move(done));
      },
      [d = denials.get()](const audit::Event& e, const std::string& source) { return d->Record(e, source); }));
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Create(std::move(so), registry);
  if (!s.ok()) return Setting(s.status().message());
  server = *std::move(s);
  return absl::OkStatus();
}

api::ReplicaRole Node::Impl::Role() {
  return [this]() -> std::string {
    if (!replicated) return "standalone";
    replica::Replica* r = leader_gate.load();
    return r != nullptr && r->MaySend() ? "leader" : "follower";
  };
}

absl::Status Node::Impl::RegisterMetrics() {
  if (absl::Status m = api::RegisterAuditMetrics(registry, audit_log.get(), clock, denials.get()); !m.ok()) {
    return RunTime(m.message());
  }
  if (journal != nullptr) {
    if (absl::Status m = api::RegisterJournalMetrics(registry, journal.get()); !m.ok()) return RunTime(m.message());
  }
  if (absl::Status m = api::RegisterBrokerMetrics(registry, front.get(), counters.get(), Role()); !m.ok()) {
    return RunTime(m.message());
  }
  if (absl::Status m = api::RegisterBuildInfo(registry, BuildInfo()); !m.ok()) return RunTime(m.message());
  if (cluster_feeds != nullptr) {
    if (absl::Status m = cluster_feeds->RegisterMetrics(registry); !m.ok()) return RunTime(m.message());
  }
  if (kueue_publishing != nullptr) {
    if (absl::Status m = kueue_publishing->RegisterMetrics(registry); !m.ok()) return RunTime(m.message());
  }
  if (!replicated) return absl::OkStatus();
  absl::Status m = registry.AddCallbackGauge(
      "gangkeeper_replica_leader", "1 while this replica leads (holds the lease, schedules and actuates), else 0.",
      {"replica"}, [this, id = o.replica_id] {
        replica::Replica* r = leader_gate.load();
        return std::vector<metrics::Sample>{{{id}, r != nullptr && r->MaySend() ? 1.0 : 0.0}};
      });
  return m.ok() ? absl::OkStatus() : RunTime(m.message());
}

// /readyz: the reconciler's first full list (file journal with a cluster),
// the state from etcd (replicas), and the health of the journal and the
// audit log (once failed, nothing can be acknowledged any more: not ready
// until restarted). Each is a condition evaluated when /readyz asks.
void Node::Impl::DeclareReadiness() {
  server::Readiness& ready = server->readiness();
  if (kube_client != nullptr && !replicated) {
    ready.Watch("kube", [this]() -> std::string {
      if (kube_synced.load()) return "";
      absl::MutexLock lock(&reconciler_mu);
      if (reconciler == nullptr || !reconciler->synced()) return "waiting for the first list of the managed kinds";
      if (cluster_feeds != nullptr && !cluster_feeds->namespaces_synced()) {
        return "waiting for the first list of namespaces (RBAC: list and watch namespaces)";
      }
      if (!kube_synced.exchange(true)) log->info("kube: first list done; ready");
      return "";
    });
  }
  // Kueue's own controller runs: said on /readyz, without failing it (the
  // webhook and the broker work on; only the publishing to Kueue's API stops).
  if (kueue_publishing != nullptr) {
    ready.Note("kueue", [this] { return kueue_publishing->last_refusal(); });
  }
  if (kueue_source != nullptr) {
    ready.Watch("kueue", [this]() -> std::string {
      return kueue_source->synced() ? "" : "waiting for the first list of Kueue's objects (RBAC: list and watch "
                                           "kueue.x-k8s.io)";
    });
  }
  ready.Watch("store", [this]() -> std::string {
    absl::Status health = journal != nullptr ? journal->health() : absl::OkStatus();
    if (health.ok()) health = audit_log->health();
    if (!health.ok()) {
      if (!store_failed.exchange(true)) log->error("store: {}; not ready until restarted", health.message());
      return absl::StrCat(health.message(), "; fix the disk and restart gangkeeper");
    }
    if (replicated) {
      // leader_gate, not `replica`: Start() sets it after the replica
      // exists, and it is atomic (this runs on a request thread).
      replica::Replica* r = leader_gate.load();
      if (r == nullptr) return "waiting for the state from etcd";
      const replica::ReplicaStats st = r->stats();
      if (!st.follower.synced && !st.leading) return "waiting for the state from etcd";
    }
    return "";
  });
}

void Node::Impl::StartReconciler() {
  if (kube_client == nullptr) return;
  absl::MutexLock lock(&reconciler_mu);
  kube::ReconcilerOptions ro;
  ro.clock = clock;
  ro.manage_jobs_without_queue_name = o.webhook.manage_jobs_without_queue_name;
  ro.confirm_grace = o.confirm_grace;
  ro.training_runtime = o.webhook.training_runtime;
  ro.held_objects = &held_objects;
  ro.confirm_check = std::clamp(o.confirm_grace / 2, absl::Milliseconds(100), absl::Seconds(5));
  reconciler = std::make_unique<kube::Reconciler>(kube_client.get(), front.get(), front.get(), ro);
  reconciler->Start();
}

// TrainJobs: the runtime cache, its lookup for the webhook and the
// reconciler, and a runtime that shows or changes makes the reconciler read
// the TrainJobs again (those waiting for it are then queued).
absl::Status Node::Impl::ConnectTrainingRuntimes(const kube::ClusterConfig& config) {
  absl::StatusOr<std::unique_ptr<kube::Client>> c = kube::Client::Create(config);
  if (!c.ok()) return Setting(absl::StrCat("--kube ", o.kube, ": ", c.status().message()));
  runtimes_client = *std::move(c);
  runtimes = std::make_unique<kube::TrainingRuntimeCache>(runtimes_client.get(),
                                                          [this](const kube::TrainingRuntimeId&) {
                                                            absl::MutexLock lock(&reconciler_mu);
                                                            if (reconciler != nullptr) reconciler->RereadTrainJobs();
                                                          });
  runtimes->Start();
  // Bounded: the webhook answers a TrainJob whose runtime is not known yet
  // with a warning, and the reconciler queues it once the runtime shows.
  if (!runtimes->WaitSynced(absl::Seconds(10))) log->warn("kube: the training runtimes are not listed yet");
  kube::TrainingRuntimeCache* cache = runtimes.get();
  o.webhook.training_runtime = [cache](const workload::TrainingRuntimeRef& ref, absl::string_view ns) {
    return cache->Find(ref, ns);
  };
  return absl::OkStatus();
}

void Node::Impl::StopReconciler() {
  std::unique_ptr<kube::Reconciler> r;
  {
    absl::MutexLock lock(&reconciler_mu);
    r = std::move(reconciler);
  }
  if (r != nullptr) r->Stop();
}

absl::StatusOr<std::unique_ptr<Node>> Node::Create(Options options) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  for (absl::Status (Impl::*step)() : {&Impl::CheckOptions, &Impl::LoadPolicyFiles, &Impl::OpenStore,
                                       &Impl::OpenAudit, &Impl::ConnectKube, &Impl::ChoosePolicySource,
                                       &Impl::ConnectKueuePublishing, &Impl::BuildBroker,
                                       &Impl::BuildFrontEnds}) {
    if (absl::Status s = (impl.get()->*step)(); !s.ok()) return s;
  }
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Node::~Node() {
  if (impl_->phase.load() == Impl::Phase::kStarted) (void)Shutdown(absl::Seconds(1));
}

absl::Status Node::Start() {
  Impl& n = *impl_;
  n.DeclareReadiness();
  if (n.cluster_feeds != nullptr) n.cluster_feeds->Connect(n.policy_store.get(), n.front.get(), n.front.get());
  if (n.kueue_publishing != nullptr) n.kueue_publishing->Connect(n.front.get());
  if (n.kueue_source != nullptr) n.kueue_source->Connect(n.policy_store.get(), n.front.get());
  if (!n.replicated) n.StartReconciler();
  if (absl::Status started = n.server->Start(); !started.ok()) return RunTime(started.message());
  n.phase.store(Impl::Phase::kStarted);
  if (!n.replicated) return absl::OkStatus();
  // With etcd: campaign and follow; the audit log follows the journal.
  replica::ReplicaOptions ro;
  ro.prefix = n.o.etcd_prefix;
  ro.election.identity = n.o.replica_id;
  ro.election.ttl = n.o.lease_ttl;
  ro.election.renew = n.o.lease_renew;
  ro.snapshot_every_records = n.o.journal.snapshot_every_records;
  ro.snapshot_every = n.o.journal.snapshot_every;
  ro.policies = replica::PolicyStoreFeed(n.policy_store.get());
  ro.broker = n.o.broker;
  ro.journal.prefix = ro.prefix;
  AddAuditStream(&ro.journal, n.clock);
  ro.on_legacy_review = [&n](const std::string& what) {
    absl::StatusOr<audit::Event> e = audit::DecodeEvent(what, 0);
    absl::Status written = e.ok() ? n.review_writer->Write(*e) : e.status();
    if (!written.ok()) n.log->error("audit: a review from an older replica was not recorded: {}", written.message());
  };
  ro.on_lead = [&n] {
    n.StartReconciler();
    n.log->info("replica: leading: scheduling and actuating");
  };
  ro.on_follow = [&n] { n.StopReconciler(); };
  absl::StatusOr<std::unique_ptr<replica::Replica>> r =
      replica::Replica::Start(n.etcd_client.get(), n.front.get(), n.actuator.get(), ro, n.clock);
  if (!r.ok()) return Setting(absl::StrCat("--store ", n.o.store, ": ", r.status().message()));
  n.replica = *std::move(r);
  n.leader_gate.store(n.replica.get());
  n.audit_feed = std::make_unique<AuditStreamFeed>(n.etcd_client.get(), n.o.etcd_prefix, n.audit_log.get());
  return absl::OkStatus();
}

absl::Status Node::Shutdown(absl::Duration grace) {
  Impl& n = *impl_;
  if (n.phase.exchange(Impl::Phase::kStopped) == Impl::Phase::kStopped) return absl::OkStatus();
  absl::Status stopped = n.server->Shutdown(grace);
  if (!stopped.ok()) n.log->error("shutdown: {}", stopped.message());
  n.denials->Stop();  // the last aggregated denials, while the intake still takes them
  // With etcd: resign, so another replica leads at once (this stops the
  // reconciler and the term's broker).
  if (n.replica != nullptr) n.replica->Shutdown();
  if (n.audit_feed != nullptr) n.audit_feed->Stop();
  n.StopReconciler();
  if (n.runtimes != nullptr) n.runtimes->Stop();
  if (n.cluster_feeds != nullptr) n.cluster_feeds->Stop();
  if (n.kueue_publishing != nullptr) n.kueue_publishing->Stop();
  if (n.kueue_source != nullptr) n.kueue_source->Stop();
  // The file journal's broker applies what is queued (its last batch is
  // durable), then a final snapshot makes the next start quick.
  if (n.broker != nullptr) n.broker->Stop();
  n.actuator->Stop();
  if (n.journal != nullptr) {
    n.journal->StopSnapshots();
    if (absl::Status snap = n.journal->WriteSnapshot(*n.broker->snapshot()); !snap.ok()) {
      n.log->warn("shutdown: no final snapshot ({}); the journal has everything", snap.message());
    }
    const store::JournalStats js = n.journal->stats();
    n.log->info("stopped cleanly: journal at record {}, snapshot at record {}", js.log.next_seq - 1,
                js.last_snapshot_position);
  } else {
    n.log->info("stopped cleanly: another replica leads from etcd");
  }
  n.leader_gate.store(nullptr);
  return stopped;
}

int Node::webhook_port() const { return impl_->server->webhook_port(); }
int Node::api_port() const { return impl_->server->api_port(); }
absl::Status Node::ReloadCertificates() { return impl_->server->ReloadCertificates(); }

bool Node::ToggleKeepAlivesForTest() {
  if (impl_->replica == nullptr) return false;
  impl_->keep_alives_paused = !impl_->keep_alives_paused;
  impl_->replica->PauseKeepAlives(impl_->keep_alives_paused);
  return impl_->keep_alives_paused;
}

std::shared_ptr<const broker::Snapshot> Node::snapshot() const { return impl_->front->snapshot(); }
bool Node::Ready(std::string* why) const { return impl_->server->readiness().Ready(why); }

}  // namespace gangkeeper::node
