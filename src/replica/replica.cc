// gangkeeper replica: one replica among several on etcd (see replica.h).
#include "gangkeeper/replica/replica.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/store/journal.h"

namespace gangkeeper::replica {

absl::StatusOr<std::unique_ptr<Replica>> Replica::Start(etcd::Client* client, broker::SwitchingPort* front,
                                                        broker::Actuator* actuator, ReplicaOptions options,
                                                        const base::Clock* clock) {
  if (client == nullptr || front == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("replica: a client, a switching port and a clock are required");
  }
  if (!options.policies) return absl::InvalidArgumentError("replica: options.policies is required");
  if (options.election.identity.empty()) {
    return absl::InvalidArgumentError("replica: options.election.identity is required (host and pid)");
  }
  if (options.election.key.empty() || options.election.key == etcd::ElectionOptions{}.key) {
    options.election.key = options.prefix + "leader";
  }
  options.journal.prefix = options.prefix;
  std::unique_ptr<Replica> r(new Replica(client, front, actuator, std::move(options), clock));
  // Follow first: the view shows the state before anything else (the
  // policies in effect, no workloads, until the state from etcd arrives).
  absl::StatusOr<std::shared_ptr<broker::ReadOnlyView>> view =
      broker::ReadOnlyView::Create(r->options_.policies(nullptr)->policies, r->options_.broker, clock);
  if (!view.ok()) return view.status();
  r->view_ = *std::move(view);
  front->Switch(r->view_);
  r->follower_ = std::make_unique<Follower>(client, r->options_.prefix, r->view_.get(), r->options_.follow_interval);
  etcd::ElectionCallbacks callbacks;
  Replica* self = r.get();
  callbacks.on_elected = [self](const etcd::Term& term) {
    absl::MutexLock lock(&self->mu_);
    self->transitions_.push_back({true, term});
  };
  callbacks.on_lost = [self](const etcd::Term& term, const absl::Status& why) {
    base::GetLogger("replica")->warn("replica: leadership lost (term {}): {}", term.revision, why.message());
    absl::MutexLock lock(&self->mu_);
    self->transitions_.push_back({false, term});
  };
  absl::StatusOr<std::unique_ptr<etcd::Elector>> elector =
      etcd::Elector::Start(client, r->options_.election, std::move(callbacks), clock);
  if (!elector.ok()) return elector.status();
  r->elector_ = *std::move(elector);
  r->thread_ = std::thread([self] { self->Run(); });
  return r;
}

Replica::Replica(etcd::Client* client, broker::SwitchingPort* front, broker::Actuator* actuator,
                 ReplicaOptions options, const base::Clock* clock)
    : client_(client), front_(front), actuator_(actuator), options_(std::move(options)), clock_(clock) {}

Replica::~Replica() { Shutdown(); }

void Replica::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
  }
  // Resigning first lets another replica take over at once; the loss is
  // handled by the thread like any other.
  if (elector_ != nullptr) elector_->Resign();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (follower_ != nullptr) follower_->Stop();
}

bool Replica::MaySend() const {
  std::optional<etcd::Term> leading = elector_ != nullptr ? elector_->Leading() : std::nullopt;
  absl::MutexLock lock(&mu_);
  return leading.has_value() && term_.has_value() && leading->revision == term_->revision;
}

void Replica::PauseKeepAlives(bool paused) {
  if (elector_ != nullptr) elector_->PauseKeepAlives(paused);
}

ReplicaStats Replica::stats() const {
  ReplicaStats out;
  {
    absl::MutexLock lock(&mu_);
    out = stats_;
  }
  out.leading = MaySend();
  if (elector_ != nullptr) out.leader = elector_->LeaderIdentity();
  return out;
}

void Replica::Run() {
  while (true) {
    std::optional<Transition> next;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !transitions_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (!transitions_.empty()) {
        next = transitions_.front();
        transitions_.pop_front();
      }
      stop = stopping_ && transitions_.empty() && !next.has_value();
    }
    if (next.has_value()) {
      if (next->lead) {
        BecomeLeader(next->term);
      } else {
        bool ours;
        {
          absl::MutexLock lock(&mu_);
          ours = term_.has_value() && term_->revision == next->term.revision;
        }
        if (ours) BecomeFollower();
      }
      continue;
    }
    if (stop) {
      bool leading;
      {
        absl::MutexLock lock(&mu_);
        leading = term_.has_value();
      }
      if (leading) BecomeFollower();
      return;
    }
    RecordFollowerStats();
    MaybeSnapshot();
  }
}

void Replica::RecordFollowerStats() {
  // follower_ changes on this thread only; while leading there is none and
  // the last progress stays (stats().leading says the rest).
  if (follower_ == nullptr) return;
  const FollowerStats f = follower_->stats();
  absl::MutexLock lock(&mu_);
  stats_.follower = f;
}

void Replica::BecomeLeader(const etcd::Term& term) {
  const base::Stopwatch took;
  auto log = base::GetLogger("replica");
  // The state is read after the term began: every record the old leader
  // could still write is fenced off from here on.
  absl::StatusOr<broker::DurableState> state;
  store::EtcdRecovery r;
  // Tried for as long as the term lasts: while this replica holds the lease
  // nobody else can lead, so giving up would leave the cluster without a
  // scheduler. Stopping is bounded by the term (the lease lapses when etcd
  // is unreachable) or by a restart.
  for (int attempt = 0;; ++attempt) {
    std::optional<etcd::Term> leading = elector_->Leading();
    if (!leading.has_value() || leading->revision != term.revision) {
      log->warn("replica: term {} ended before it began", term.revision);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    state = store::ReadState(client_, options_.prefix, &r);
    if (state.ok()) break;
    log->error("replica: elected, but reading the state from etcd failed (attempt {}): {}", attempt + 1,
               state.status().message());
    absl::SleepFor(std::min(absl::Milliseconds(100) * (attempt + 1), absl::Seconds(2)));
  }
  if (follower_ != nullptr) follower_->Stop();
  follower_.reset();
  journal_ = std::make_unique<store::EtcdJournal>(client_, options_.journal, r.next_record, elector_->Fence(term));
  // This term's broker, from the state: the policies in effect here (the
  // files with the state's overlay) replace the recorded ones when they
  // differ, and what was released or suspended but not confirmed is sent
  // again when it starts.
  broker::BrokerOptions bo = options_.broker;
  bo.start_stats = view_->snapshot()->stats();
  absl::StatusOr<std::unique_ptr<broker::Broker>> created = broker::Broker::Create(
      options_.policies(state->overlay)->policies, std::move(bo), actuator_, journal_.get(), clock_, &*state);
  if (!created.ok()) {
    log->error("replica: the broker could not lead from the state in etcd: {}", created.status().message());
    journal_.reset();
    follower_ = std::make_unique<Follower>(client_, options_.prefix, view_.get(), options_.follow_interval);
    return;
  }
  leader_ = *std::move(created);
  front_->Switch(leader_);
  {
    absl::MutexLock lock(&mu_);
    term_ = term;
  }
  leader_->Start();
  leader_->Submit(broker::Event::Flush());  // the first cycle at once
  feeder_ = std::make_unique<IntakeFeeder>(client_, options_.prefix, r.intake_revision, leader_.get(),
                                           options_.on_legacy_review);
  // After the broker: changes the API made since the state's overlay (one
  // the last leader did not apply before it went) come first.
  overlay_feeder_ =
      std::make_unique<OverlayFeeder>(client_, options_.prefix, leader_.get(), leader_.get(), options_.policies);
  snapshot_position_ = r.snapshot_position;
  snapshot_time_ = clock_->Now();
  if (options_.on_lead) options_.on_lead();
  {
    absl::MutexLock lock(&mu_);
    ++stats_.terms;
    stats_.led_since = clock_->Now();
    stats_.last_takeover = took.Elapsed();
  }
  log->info("replica: leading (term {}) from record {} ({} workloads, intake from position {}) after {}",
            term.revision, r.next_record - 1, r.workloads, r.intake_revision, absl::FormatDuration(took.Elapsed()));
}

void Replica::BecomeFollower() {
  if (options_.on_follow) options_.on_follow();
  if (feeder_ != nullptr) {
    FeederStats fs = feeder_->stats();
    feeder_->Stop();
    absl::MutexLock lock(&mu_);
    stats_.feeder = fs;
  }
  feeder_.reset();
  if (overlay_feeder_ != nullptr) {
    OverlayFeederStats os = overlay_feeder_->stats();
    overlay_feeder_->Stop();
    absl::MutexLock lock(&mu_);
    stats_.overlay = os;
  }
  overlay_feeder_.reset();
  {
    absl::MutexLock lock(&mu_);
    term_.reset();
  }
  // The term's broker applies what it had queued and stops scheduling and
  // actuating; the view shows its last state until the follower brings the
  // one in etcd, and the broker goes (after calls in flight on it finish).
  if (leader_ != nullptr) {
    leader_->Stop();
    view_->Show(leader_->snapshot());
    front_->Switch(view_);
    leader_.reset();
  }
  if (journal_ != nullptr) {
    absl::MutexLock lock(&mu_);
    stats_.journal = journal_->stats();
  }
  journal_.reset();
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
  }
  if (!stopping) {
    follower_ = std::make_unique<Follower>(client_, options_.prefix, view_.get(), options_.follow_interval);
  }
  base::GetLogger("replica")->info("replica: following");
}

void Replica::MaybeSnapshot() {
  if (journal_ == nullptr || leader_ == nullptr) return;
  std::shared_ptr<const broker::Snapshot> snap = leader_->snapshot();
  if (!snap->durable() || snap->durable_position() <= snapshot_position_) return;
  const bool due = snap->durable_position() - snapshot_position_ >= options_.snapshot_every_records ||
                   clock_->Now() - snapshot_time_ >= options_.snapshot_every;
  if (!due) return;
  if (absl::Status s = journal_->WriteSnapshot(*snap); !s.ok()) {
    base::GetLogger("replica")->warn("replica: snapshot at record {} not written: {}", snap->durable_position(),
                                     s.message());
  } else {
    snapshot_position_ = snap->durable_position();
  }
  snapshot_time_ = clock_->Now();
  absl::MutexLock lock(&mu_);
  stats_.journal = journal_->stats();
}

}  // namespace gangkeeper::replica
