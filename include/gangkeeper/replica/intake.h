// gangkeeper replica: the intake, how any replica hands changes to the
// leader through etcd (DESIGN §9, issue #10).
//
// Every replica's webhook registers, updates, removes and finishes
// workloads by putting intake events under
//   P intake/<replica id>/<start time in ns>-<counter, 20 digits>.<events>
// (one put: durable in etcd's quorum when it returns, so the webhook may
// acknowledge). Concurrent changes on one replica share a put (group
// commit: while one put is in flight the next ones queue, and go together
// in the next, up to kIntakeBatchMax events), so etcd sees one request
// per batch, not per change. The leader applies the events in order
// (IntakeFeeder: a range, then a watch) through EventQueue::Submit. An event's
// place is its position: its key's mod revision times
// kIntakePositionsPerRevision plus its index in the put. The leader's
// journal records the position it applied up to (P intake-applied,
// store/etcd_journal.h) in the same transaction as the changes, so a new leader
// applies exactly the events after it, none twice, none lost, even when
// the old one stopped in the middle of a put's events. Applied events are
// deleted in the background.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/broker/snapshot.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::replica {

std::string IntakePrefix(const std::string& prefix);

inline constexpr int kIntakeBatchMax = 256;  // events in one put
inline constexpr int64_t kIntakePositionsPerRevision = 1024;
inline int64_t IntakePosition(int64_t mod_revision, int index) {
  return mod_revision * kIntakePositionsPerRevision + index;
}

// A change that reached this replica through the intake (a replica's
// webhook wrote it to etcd); the leader applies it like the webhook's own
// calls, without waiting, in order. `revision` is its position (above).
// Its encoding is a wire format: its Type values never change. kReview is
// legacy: replicas before the audit stream (node/audit_stream.h) sent
// their denied reviews' audit events this way; it still decodes, and the
// leader hands it to IntakeFeeder's on_review, not to the broker.
struct IntakeEvent {
  enum class Type { kRegister, kUpdate, kRemove, kFinish, kPolicies, kReview };
  Type type = Type::kRegister;
  workload::Workload workload;  // kRegister, kUpdate
  broker::WorkloadKey key;      // kRemove, kFinish, kReview
  std::string uid;              // kRemove, kFinish: only that object ("" = any)
  // kPolicies: the new set, what the API changed over the files, who, what.
  // kReview (legacy): `what` is an admission review's audit event (encoded
  // by the audit module), `actor` who sent the review.
  std::shared_ptr<const model::PolicySet> policies;
  std::shared_ptr<const model::PolicyOverlay> overlay;
  std::string actor, what;
  int64_t revision = 0;
};

// The broker event it stands for, with intake_revision = revision. A
// legacy kReview stands for none: a kFlush (it only moves the intake on).
broker::Event ToBrokerEvent(IntakeEvent e);

// One intake event (the position is etcd's, not encoded). kPolicies events
// are not written to the intake (the API's changes have their own key).
std::string EncodeIntake(const IntakeEvent& e);
[[nodiscard]] absl::StatusOr<IntakeEvent> DecodeIntake(absl::string_view data);
// The value of an intake key: events encoded by EncodeIntake, in order
// (1 to kIntakeBatchMax of them).
std::string EncodeIntakeBatch(const std::vector<std::string>& events);
// An intake key's value: a batch, or (as written before batches) a single
// event.
[[nodiscard]] absl::StatusOr<std::vector<IntakeEvent>> DecodeIntakeValue(absl::string_view data);

// The webhook's registry on every replica: changes go to the intake, reads
// come from the local broker (leader or follower).
class IntakeRegistry final : public broker::WorkloadRegistry {
 public:
  // `client` and `view` must outlive the registry; `replica_id` must be
  // unique among the replicas (and across restarts: host, pid, start time).
  // `clock` dates this session's keys.
  IntakeRegistry(etcd::Client* client, std::string prefix, std::string replica_id, const broker::SnapshotSource* view,
                 const base::Clock* clock);

  absl::Status Register(const workload::Workload& w, const std::string& cluster_queue) override;
  absl::Status Update(const workload::Workload& w) override;
  absl::Status Remove(const broker::WorkloadKey& key, const std::string& uid) override;
  absl::Status Finish(const broker::WorkloadKey& key, const std::string& uid) override;
  std::optional<broker::WorkloadRecord> Find(const broker::WorkloadKey& key) const override;
  int64_t PendingIn(const std::string& cluster_queue) const override;
  std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const override;
  size_t UnconfirmedCount() const override;

  uint64_t written() const { return counter_.load(); }  // puts
  uint64_t events() const { return events_.load(); }    // events in them

 private:
  struct Waiter;
  absl::Status Put(const IntakeEvent& e);

  etcd::Client* const client_;
  const std::string prefix_;
  const std::string replica_id_;
  const std::string session_;
  const broker::SnapshotSource* const view_;
  std::atomic<uint64_t> counter_{0};
  std::atomic<uint64_t> events_{0};
  absl::Mutex mu_;
  std::vector<Waiter*> queue_ ABSL_GUARDED_BY(mu_);  // not yet in a put
  bool writing_ ABSL_GUARDED_BY(mu_) = false;        // a put is in flight
};

struct FeederStats {
  uint64_t submitted = 0;
  uint64_t undecodable = 0;  // skipped, logged
  uint64_t watch_restarts = 0;
  uint64_t deleted = 0;
  int64_t last_position = 0;  // the highest submitted
};

// On the leader: submits every intake event after position `applied` to
// `broker`, in order, until stopped; keeps at it across etcd outages
// (bounded backoff) and deletes the events the journal says are applied.
// A legacy kReview event's `what` goes to `on_review` (may be empty: then
// it is logged and dropped).
class IntakeFeeder {
 public:
  using OnReview = std::function<void(const std::string& what)>;
  IntakeFeeder(etcd::Client* client, std::string prefix, int64_t applied, broker::EventQueue* broker,
               OnReview on_review = nullptr);
  ~IntakeFeeder();  // Stop()
  IntakeFeeder(const IntakeFeeder&) = delete;
  IntakeFeeder& operator=(const IntakeFeeder&) = delete;

  void Stop();
  FeederStats stats() const;

 private:
  void Run();
  // Ranges the events after last_ and submits them; then watches. Returns
  // when the watch ends or Stop().
  absl::Status CatchUpAndWatch();
  void Feed(const etcd::KeyValue& kv);
  void DeleteApplied();

  etcd::Client* const client_;
  const std::string prefix_;
  broker::EventQueue* const broker_;
  const OnReview on_review_;
  mutable absl::Mutex mu_;
  int64_t last_ ABSL_GUARDED_BY(mu_);  // the highest position submitted
  FeederStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gangkeeper::replica
