// gangkeeper replica: quota changes through the HTTP API of any replica
// (DESIGN §7, §9; issue #10).
//
// The API's changes over the policy files (the overlay, model/overlay.h)
// live in one key:
//   P overlay   {"generation", "put" (manifests), "deleted", "actor", "what"}
// Any replica's API writes it with EtcdPolicyEditor: it reads the key,
// builds and validates the new overlay, and puts it only if the key's mod
// revision is still the one it read (a transaction), so concurrent changes
// on two replicas are applied one after the other, never one over the
// other. The change is durable once the put returns. The leader's
// OverlayFeeder watches the key and hands each new generation to its
// broker, which records it in the journal with the policies; every
// replica's view then shows it, and the editor waits for its own replica's
// view to show it before the API answers (read your writes).
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::replica {

std::string OverlayKey(const std::string& prefix);

// The policy files with an overlay (null: none): what a replica runs with,
// never null. The node's is its model::PolicyStore adopting the overlay
// (PolicyStoreFeed); its version orders the set against the store's other
// publications in the broker (broker::Event::policies_version).
using EffectivePolicies =
    std::function<std::shared_ptr<const model::EffectiveSet>(const std::shared_ptr<const model::PolicyOverlay>&)>;

struct OverlayRecord {
  std::shared_ptr<const model::PolicyOverlay> overlay;
  std::string actor, what;
};
// `store`'s EffectivePolicies: Adopt (the overlay is durable already), the
// policies it publishes; errors of the combination are logged. `store` must
// outlive the function.
EffectivePolicies PolicyStoreFeed(model::PolicyStore* store);

std::string EncodeOverlay(const model::PolicyOverlay& overlay, const std::string& actor, const std::string& what);
[[nodiscard]] absl::StatusOr<OverlayRecord> DecodeOverlay(absl::string_view data);

struct EtcdPolicyEditorOptions {
  std::string prefix = "/gangkeeper/";
  // How long Write waits for this replica's view to show the change. The
  // change is durable either way; after this the answer says so.
  absl::Duration view_wait = absl::Seconds(10);
};

class EtcdPolicyEditor final : public model::PolicyEditor {
 public:
  // `client`, `view` (this replica's broker) and `policies` (the node's
  // policy store: Read adopts the overlay in etcd, durable already) must
  // outlive the editor.
  EtcdPolicyEditor(etcd::Client* client, const broker::SnapshotSource* view, model::PolicyStore* policies,
                   EtcdPolicyEditorOptions options = {});

  absl::StatusOr<Current> Read() override;
  absl::Status Write(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                     std::shared_ptr<const model::PolicySet> policies, const std::string& actor,
                     const std::string& what) override;

 private:
  etcd::Client* const client_;
  const broker::SnapshotSource* const view_;
  model::PolicyStore* const policies_;
  const EtcdPolicyEditorOptions options_;
};

struct OverlayFeederStats {
  uint64_t applied = 0;       // generations handed to the broker
  uint64_t undecodable = 0;   // values skipped, logged
  uint64_t generation = 0;    // the newest handed over (or found in effect)
};

// On the leader: hands every overlay generation newer than the one the
// broker shows to the broker, from the key as it is at the start and then
// as it changes; keeps at it across etcd outages. It uses two faces of
// the term's broker: `view` (the overlay in effect when the feeder starts)
// and `events` (where each new generation goes, as Event::Policies with
// the files the node's policy store combines it with).
class OverlayFeeder {
 public:
  // `client` and `events` must outlive the feeder; `view` is read here
  // only (the generation to start after).
  OverlayFeeder(etcd::Client* client, std::string prefix, broker::EventQueue* events,
                const broker::SnapshotSource* view, EffectivePolicies effective);
  ~OverlayFeeder();  // Stop()
  OverlayFeeder(const OverlayFeeder&) = delete;
  OverlayFeeder& operator=(const OverlayFeeder&) = delete;

  void Stop();
  OverlayFeederStats stats() const;

 private:
  void Run();
  absl::Status ReadAndWatch();
  void Feed(const etcd::KeyValue& kv);

  etcd::Client* const client_;
  const std::string prefix_;
  broker::EventQueue* const events_;
  const EffectivePolicies effective_;
  mutable absl::Mutex mu_;
  OverlayFeederStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gangkeeper::replica
