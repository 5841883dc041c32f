// gangkeeper node: the composition root of `gangkeeper serve` (DESIGN §3).
//
// A Node builds every part of a serving process from its Options, in one
// place and in dependency order, and stops them in the reverse order:
//
//   Create()    the data directory (lock), the durable state (the journal
//               in --data-dir, or etcd), the policy files, the audit log
//               (caught up with the journal), the Kubernetes client and the
//               actuator, the broker (file journal; started: it applies the
//               recovered state) or an empty read-only view (etcd: the
//               replica creates a broker per term it leads), behind the
//               SwitchingPort every front end uses,
//               the webhook, the API, the denial aggregator, the metrics
//               and both listeners (not yet bound). Nothing answers yet.
//   Start()     binds the listeners; starts the reconciler (file journal)
//               or the replica's election, following and audit feed (etcd).
//               /readyz reports the node's conditions from then on: the
//               first full list of the managed kinds, the state from etcd,
//               the health of the journal and the audit log.
//   Shutdown()  fails /readyz, drains the listeners within `grace`, flushes
//               the aggregated denials, resigns (etcd), stops the
//               reconciler, the broker (its last batch durable), the
//               actuator, and writes a final snapshot.
//
// Errors are values: Create() and Start() return InvalidArgument for a
// setting at fault (the message names its flag; `gangkeeper serve` exits 2)
// and other codes for what went wrong at run time (exit 1). Signals and the
// process's exit stay with the caller (src/cli/serve.cc).
//
// Thread-safe after Create(): Start(), Shutdown() and the accessors may be
// called from any thread; Shutdown() once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/store/journal.h"
#include "gangkeeper/server/server.h"

namespace gangkeeper::node {

struct Options {
  server::Options server;             // listeners; the node adds its routes
  admission::WebhookOptions webhook;  // trust settings are derived (below)
  broker::BrokerOptions broker;
  store::JournalOptions journal;     // data_dir and truncate_corruption are set from below
  std::string policies_dir;           // "" = no policy files
  std::string data_dir = "./data";
  std::string tokens_file;            // "" = the API answers 401 to everyone
  // --api-auth: tokens | kubernetes | both; "" = both with a cluster,
  // tokens with --kube none (api/kube_auth.h).
  std::string api_auth;
  bool metrics_public = false;
  // auto (in-cluster when KUBERNETES_SERVICE_HOST is set and a service
  // account token is mounted), none, in-cluster, or a kubeconfig path.
  std::string kube = "auto";
  std::string kube_context;
  // --policy-source: where Kueue's objects come from: files (--policies and
  // the API's changes), cluster (the kueue.x-k8s.io objects, watched; API
  // writes go to the cluster), "" = cluster when --kube names a cluster
  // that serves kueue.x-k8s.io, else files (src/node/kueue_source.h).
  std::string policy_source;
  absl::Duration confirm_grace = absl::Seconds(30);
  std::string store = "file";      // file | etcd://host:port[,host:port...]
  std::string recover = "strict";  // strict | truncate
  // The audit log.
  size_t audit_max_mib = 1024;
  size_t audit_index_events = 1'000'000;
  absl::Duration audit_max_age = absl::Hours(24 * 400);
  absl::Duration audit_min_retention = absl::Hours(24 * 7);
  std::string audit_hmac_key;  // a file; "" = no HMAC
  int audit_denials_per_second = 10;
  absl::Duration audit_denial_window = absl::Minutes(1);
  // --store etcd://...
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_prefix = "/gangkeeper/";
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration lease_renew = absl::Seconds(3);
  std::string replica_id;  // "" = host-pid-start time
  // What is written to Kueue's own API (issue #24; node/kueue_publishing.h):
  // --publish-kueue-status and --publish-workloads, auto | true | false
  // (auto: on when the cluster serves Kueue's CRDs); never while Kueue's
  // own controller manager runs, found by its webhook configurations or its
  // leader Lease in `kueue_namespace`.
  std::string publish_kueue_status = "auto";
  std::string publish_workloads = "auto";
  std::string kueue_namespace = "kueue-system";
};

class Node {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Node>> Create(Options options);
  // Stops what is still running, as Shutdown(1s) would.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  [[nodiscard]] absl::Status Start();
  // Returns the listeners' drain outcome; everything else is stopped
  // whatever it is.
  absl::Status Shutdown(absl::Duration grace);

  // The bound ports (after Start(); useful with port 0).
  int webhook_port() const;
  int api_port() const;
  // SIGHUP: re-reads the certificate files (logged inside).
  absl::Status ReloadCertificates();
  // --test-hooks (etcd): toggles the lease keep-alives, a partition from
  // etcd. Returns whether they are paused now; false without etcd.
  bool ToggleKeepAlivesForTest();
  // Readers for in-process tests and tools: the latest snapshot of the
  // role the node plays (its broker, or a replica's view or term broker).
  std::shared_ptr<const broker::Snapshot> snapshot() const;
  // True when /readyz would answer 200; otherwise `*why` says why not.
  bool Ready(std::string* why) const;

 private:
  struct Impl;
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::node
