// gangkeeper replica: one of several gangkeeper replicas sharing their
// state in etcd (DESIGN §9, issue #10). Ties the pieces together:
//
//   etcd::Elector         who leads (lease, keep-alives, fencing)
//   broker::ReadOnlyView  while following: the leader's state, read-only
//   Follower              while following: brings that state from etcd
//   broker::Broker        while leading: one per term, created and owned here
//   store::EtcdJournal    while leading: that broker's sink, fenced by the term
//   IntakeFeeder          while leading: every replica's registrations, in order
//   OverlayFeeder         while leading: quota changes through any replica's API
//
// The front ends hold a broker::SwitchingPort (roles.h) that the replica
// points at the role it plays: the view while following, the term's broker
// while leading. On election the state is read from etcd after the term
// began and a new Broker is created from it with a journal fenced by the
// term (it sends again what was not confirmed and schedules at once); the
// feeder applies the intake from where the journal says it stopped, and
// `on_lead` starts what only a leader runs (the reconciler). On losing the
// lease (or etcd) `on_follow` stops those, the broker is stopped (what it
// had queued is applied) and dropped, and the view shows its last state
// until the follower brings the one in etcd. Transitions run on a thread
// of their own, so the elector's keep-alives never wait for them; the same
// thread writes snapshots while leading.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/roles.h"
#include "gangkeeper/replica/follower.h"
#include "gangkeeper/replica/intake.h"
#include "gangkeeper/replica/overlay.h"
#include "gangkeeper/store/etcd/client.h"
#include "gangkeeper/store/etcd/election.h"
#include "gangkeeper/store/etcd_journal.h"

namespace gangkeeper::replica {

struct ReplicaOptions {
  std::string prefix = "/gangkeeper/";
  // key "" = prefix + "leader"; identity is required.
  etcd::ElectionOptions election;
  store::EtcdJournalOptions journal;  // its prefix is set from `prefix`
  // A leader writes a snapshot after this many records, or this long with
  // at least one record, since the last one.
  uint64_t snapshot_every_records = 10'000;
  absl::Duration snapshot_every = absl::Minutes(5);
  absl::Duration follow_interval = absl::Milliseconds(200);
  // The policies to run with given the API's overlay (the files with the
  // overlay): for a new leader, with the overlay of the state it read, and
  // for every change through the API (overlay.h). Required.
  EffectivePolicies policies;
  // Each term's broker (its observers must outlive the replica).
  broker::BrokerOptions broker;
  // Run on the replica's thread after the broker leads / before it
  // follows again (start and stop the reconciler). May be empty.
  std::function<void()> on_lead, on_follow;
  // While leading: a denied review's audit event that a replica older than
  // the audit stream sent through the intake (IntakeFeeder). May be empty.
  IntakeFeeder::OnReview on_legacy_review;
};

struct ReplicaStats {
  bool leading = false;
  std::string leader;   // the leader's identity as etcd last showed it
  uint64_t terms = 0;   // terms this replica led
  absl::Time led_since;
  absl::Duration last_takeover;  // from elected to the broker leading
  store::EtcdJournalStats journal;  // of the current or last term
  FollowerStats follower;
  FeederStats feeder;
  OverlayFeederStats overlay;
};

class Replica {
 public:
  // Points `front` at an empty read-only view, then starts following and
  // campaigning. `client`, `front` and `actuator` (may be null) must
  // outlive the replica; the actuator answers to `front`. `clock` is
  // required (the node's).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Replica>> Start(etcd::Client* client,
                                                                     broker::SwitchingPort* front,
                                                                     broker::Actuator* actuator,
                                                                     ReplicaOptions options, const base::Clock* clock);
  ~Replica();  // Shutdown()
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Leading now, with the lease surely held: the actuator's gate.
  bool MaySend() const;
  // Stops leading (another replica takes over at once) and following.
  void Shutdown();
  // Tests: a partition between this replica and etcd's lease keep-alives.
  void PauseKeepAlives(bool paused);
  ReplicaStats stats() const;

 private:
  Replica(etcd::Client* client, broker::SwitchingPort* front, broker::Actuator* actuator, ReplicaOptions options,
          const base::Clock* clock);
  struct Transition {
    bool lead = false;
    etcd::Term term;
  };
  void Run();
  void BecomeLeader(const etcd::Term& term);
  void BecomeFollower();
  void MaybeSnapshot();
  // Copies the follower's progress into stats_ (stats().follower: a
  // follower's /readyz waits for its first state from etcd). Run thread.
  void RecordFollowerStats();

  etcd::Client* const client_;
  broker::SwitchingPort* const front_;
  broker::Actuator* const actuator_;
  ReplicaOptions options_;
  const base::Clock* const clock_;
  std::unique_ptr<etcd::Elector> elector_;

  mutable absl::Mutex mu_;
  std::deque<Transition> transitions_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<etcd::Term> term_ ABSL_GUARDED_BY(mu_);  // the term leader_ leads in
  ReplicaStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;

  // The replica thread's alone (the view is shared with the front ends).
  std::shared_ptr<broker::ReadOnlyView> view_;
  std::unique_ptr<store::EtcdJournal> journal_;  // leader_'s sink: outlives it
  std::shared_ptr<broker::Broker> leader_;       // this term's; null while following
  std::unique_ptr<IntakeFeeder> feeder_;
  std::unique_ptr<OverlayFeeder> overlay_feeder_;
  std::unique_ptr<Follower> follower_;
  uint64_t snapshot_position_ = 0;
  absl::Time snapshot_time_;
};

}  // namespace gangkeeper::replica
