// gangkeeper store/etcd: lease-based leader election with fencing (see
// election.h).
//
// Each Elector runs two threads. The elector thread runs the state machine
// (campaign, follow, lead) and every callback. The call thread makes the
// etcd calls, one at a time. They are split so that a hung call never
// delays a step-down. In a partition the client may wait out its timeouts
// and attempts, which can take longer than the TTL. The elector thread
// waits for an answer only until the term's deadline, then steps down on
// time while the call is still in flight; the late answer is dropped.
//
// All waiting is on `mu_`. Resign() and the destructor interrupt every wait
// of the elector thread; the calls it still makes after that (revoking the
// lease) wait with a deadline. Deadlines are read from the injected Clock,
// but the waits themselves are in real time, so the clock must move at real
// speed.
#include "gangkeeper/store/etcd/election.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::etcd {
namespace {

std::shared_ptr<spdlog::logger> Log() { return base::GetLogger("etcd"); }

class LeaseElector final : public Elector {
 public:
  LeaseElector(Client* client, ElectionOptions options, ElectionCallbacks callbacks, const base::Clock* clock)
      : client_(client),
        options_(std::move(options)),
        callbacks_(std::move(callbacks)),
        clock_(clock),
        what_(absl::StrCat("etcd election ", options_.key, " (", options_.identity, ")")) {}

  ~LeaseElector() override {
    // Destroying the Elector from its own callback would join the thread
    // that is running the callback.
    GK_CHECK_MSG(std::this_thread::get_id() != thread_.get_id(),
                 "an etcd Elector was destroyed from inside its own callback");
    Resign();
    if (thread_.joinable()) thread_.join();
    {
      absl::MutexLock lock(&mu_);
      call_thread_stop_ = true;
    }
    // Waits for a call still in flight (bounded by the client's timeouts):
    // the call uses `client_`, which only has to outlive the Elector.
    if (call_thread_.joinable()) call_thread_.join();
  }

  void Begin() {
    call_thread_ = std::thread([this] { CallLoop(); });
    thread_ = std::thread([this] { Run(); });
  }

  std::optional<Term> Leading() const override {
    absl::MutexLock lock(&mu_);
    if (term_.has_value() && clock_->Now() < deadline_) return term_;
    return std::nullopt;
  }

  Compare Fence(const Term& term) const override { return Compare::CreateRevision(options_.key, term.revision); }

  std::string LeaderIdentity() const override {
    absl::MutexLock lock(&mu_);
    return leader_identity_;
  }

  void Resign() override {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    // From a callback the elector thread resigns once the callback returns;
    // waiting here would wait for ourselves.
    if (std::this_thread::get_id() == thread_.get_id()) return;
    // The thread's last steps are bounded: every wait it makes from now on
    // has a deadline, and the interruptible ones return at once.
    mu_.Await(absl::Condition(&finished_));
  }

  void PauseKeepAlives(bool paused) override {
    absl::MutexLock lock(&mu_);
    paused_ = paused;
  }

 private:
  enum class Outcome { kLeading, kOtherLeads, kFailed };

  // --- Waiting ---------------------------------------------------------

  // Waits until `done()` or until `deadline` (on clock_) passes; returns
  // done().
  template <typename Pred>
  bool WaitUntil(const Pred& done, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!done()) {
      const absl::Duration left = deadline - clock_->Now();
      if (left <= absl::ZeroDuration()) return false;
      mu_.AwaitWithTimeout(absl::Condition(&done), left);
    }
    return true;
  }

  // Waits up to `d` unless Resign() or a change of the pause state comes
  // first. True when it is time to stop.
  bool Sleep(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    const bool paused = paused_;
    auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || paused_ != paused; };
    WaitUntil(wake, clock_->Now() + d);
    return stop_;
  }

  // Runs `call` on the call thread and waits for its answer until
  // `deadline`, or until Resign() when `interruptible`. nullopt when no
  // answer came in time: the call may still run and its answer is dropped.
  template <typename T>
  std::optional<T> CallEtcd(std::function<T()> call, absl::Time deadline, bool interruptible) {
    // Shared with the job, which may outlive this wait.
    auto answer = std::make_shared<std::optional<T>>();
    absl::MutexLock lock(&mu_);
    auto stopped = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return interruptible && stop_; };
    // A call given up on earlier may still hold the call thread.
    auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped() || (!call_busy_ && job_ == nullptr); };
    if (!WaitUntil(idle, deadline) || stopped()) return std::nullopt;
    job_ = [this, answer, call = std::move(call)] {
      T value = call();
      absl::MutexLock job_lock(&mu_);
      *answer = std::move(value);
    };
    auto answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped() || answer->has_value(); };
    WaitUntil(answered, deadline);
    if (!answer->has_value()) return std::nullopt;
    return std::move(*answer);
  }

  void CallLoop() {
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return call_thread_stop_ || job_ != nullptr; };
        mu_.Await(absl::Condition(&ready));
        // Nobody waits for a job still queued at the end.
        if (call_thread_stop_) return;
        job = std::move(job_);
        job_ = nullptr;
        call_busy_ = true;
      }
      job();
      absl::MutexLock lock(&mu_);
      call_busy_ = false;
    }
  }

  // --- The state machine -------------------------------------------------

  void Run() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        // A paused replica is partitioned: it makes no etcd call at all.
        auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !paused_; };
        mu_.Await(absl::Condition(&wake));
        if (stop_) break;
      }
      RevokeStaleLease(clock_->Now() + options_.ttl, /*interruptible=*/true);
      switch (Campaign()) {
        case Outcome::kLeading:
          break;  // led until it stepped down; campaign again (or stop)
        case Outcome::kOtherLeads:
          Follow();
          break;
        case Outcome::kFailed:
          Sleep(options_.retry);
          break;
      }
    }
    // Stopped. A lease left from a term that ended is revoked (best effort)
    // so that nobody waits for its TTL.
    if (!IsPaused()) RevokeStaleLease(clock_->Now() + options_.renew, /*interruptible=*/false);
    absl::MutexLock lock(&mu_);
    finished_ = true;
  }

  // One attempt to take the key. Leads until it steps down when it wins.
  Outcome Campaign() {
    // The grant counts as the term's first keep-alive, sent now.
    const absl::Time sent = clock_->Now();
    const absl::Time give_up = sent + options_.ttl - options_.renew;
    std::optional<absl::StatusOr<LeaseGrant>> grant =
        CallEtcd<absl::StatusOr<LeaseGrant>>([this] { return client_->Grant(options_.ttl); }, give_up, true);
    // Stopped, or etcd too slow. A grant that still comes is not known here
    // and simply expires (it holds no key).
    if (!grant.has_value()) return Outcome::kFailed;
    if (!grant->ok()) {
      NoteError("granting a lease", grant->status());
      return Outcome::kFailed;
    }
    const int64_t lease = (*grant)->id;
    // etcd may grant more than asked (its minimum TTL) but never less; the
    // shorter of the two is the safe one to count with.
    const absl::Duration life = std::min(options_.ttl, absl::Seconds((*grant)->ttl_seconds)) - options_.renew;
    if (life <= absl::ZeroDuration() || IsPaused() || IsStopping()) {
      SetStaleLease(lease);
      return Outcome::kFailed;
    }

    std::optional<absl::StatusOr<TxnResult>> txn = CallEtcd<absl::StatusOr<TxnResult>>(
        [this, lease] {
          return client_->Txn({Compare::Absent(options_.key)}, {Op::Put(options_.key, options_.identity, lease)},
                              {Op::Get(options_.key)});
        },
        sent + life, true);
    if (!txn.has_value() || !txn->ok()) {
      // The put may have happened (an unknown outcome): revoking the lease
      // removes the key with it if so.
      if (txn.has_value()) NoteError("campaigning", txn->status());
      SetStaleLease(lease);
      return Outcome::kFailed;
    }
    ClearError();
    if (!(*txn)->succeeded) {
      // The failure branch read the key: its value names the leader.
      const std::vector<std::vector<KeyValue>>& responses = (*txn)->responses;
      {
        absl::MutexLock lock(&mu_);
        leader_identity_ = responses.empty() || responses[0].empty() ? "" : responses[0][0].value;
      }
      // Nothing uses the lease: revoke it now rather than let it linger.
      SetStaleLease(lease);
      RevokeStaleLease(clock_->Now() + options_.ttl, true);
      return Outcome::kOtherLeads;
    }

    const Term term{lease, (*txn)->revision, options_.identity};
    {
      absl::MutexLock lock(&mu_);
      if (stop_) {
        stale_lease_ = lease;
        return Outcome::kFailed;
      }
      term_ = term;
      deadline_ = sent + life;
      leader_identity_ = options_.identity;
    }
    Log()->info("{}: leads (term {}, lease {})", what_, term.revision, lease);
    if (callbacks_.on_elected) callbacks_.on_elected(term);
    Lead(term, sent);
    return Outcome::kLeading;
  }

  // Keeps the lease alive every `renew` and checks the key is still ours,
  // until the term's deadline passes, the lease or the key is gone, or
  // Resign(). Returns once stepped down.
  void Lead(const Term& term, absl::Time first_sent) {
    absl::Time next = first_sent + options_.renew;
    absl::Status last_error = absl::OkStatus();
    while (true) {
      absl::Time deadline;
      {
        absl::MutexLock lock(&mu_);
        const bool paused = paused_;
        auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || paused_ != paused; };
        // Paused, nothing is sent: the only thing left is the deadline.
        WaitUntil(wake, paused ? deadline_ : std::min(next, deadline_));
        deadline = deadline_;
      }
      if (IsStopping()) {
        StepDown(term, absl::CancelledError(absl::StrCat(what_, ": resigned")));
        if (IsPaused()) {
          SetStaleLease(term.lease);
        } else {
          // Tries until etcd would expire the lease anyway (deadline + renew),
          // but for one renew at least.
          const absl::Time until = std::max(deadline, clock_->Now()) + options_.renew;
          absl::Status s = RevokeUntil(term.lease, until, false);
          if (!s.ok()) {
            Log()->warn("{}: revoking lease {} on resign: {}", what_, term.lease, s.message());
            SetStaleLease(term.lease);
          }
        }
        return;
      }
      const absl::Time now = clock_->Now();
      if (now >= deadline) {
        absl::Status why = absl::UnavailableError(absl::StrCat(
            what_, ": no keep-alive succeeded within ttl - renew (",
            absl::FormatDuration(options_.ttl - options_.renew), "); stepping down before etcd can expire lease ",
            term.lease, IsPaused() ? " (keep-alives paused)" : "",
            last_error.ok() ? "" : absl::StrCat("; last error: ", last_error.message())));
        StepDown(term, std::move(why));
        SetStaleLease(term.lease);
        return;
      }
      if (IsPaused() || now < next) continue;

      const absl::Time sent = now;
      std::optional<absl::StatusOr<int64_t>> ttl = CallEtcd<absl::StatusOr<int64_t>>(
          [this, lease = term.lease] { return client_->KeepAlive(lease); }, deadline, true);
      if (!ttl.has_value()) continue;  // the deadline or Resign(): both handled above
      if (!ttl->ok()) {
        if (ttl->status().code() == absl::StatusCode::kNotFound) {
          StepDown(term, absl::NotFoundError(absl::StrCat(what_, ": lease ", term.lease, " expired in etcd")));
          return;
        }
        last_error = ttl->status();
        // Sooner than a renew: the deadline leaves room for more than one.
        next = clock_->Now() + std::min(options_.retry, options_.renew);
        continue;
      }
      last_error = absl::OkStatus();
      {
        absl::MutexLock lock(&mu_);
        deadline_ = sent + std::min(options_.ttl, absl::Seconds(**ttl)) - options_.renew;
        deadline = deadline_;
      }
      next = sent + options_.renew;

      // The key can go while the lease lives (deleted by hand): then
      // another replica may already lead.
      std::optional<absl::StatusOr<RangeResult>> range =
          CallEtcd<absl::StatusOr<RangeResult>>([this] { return client_->Range(options_.key); }, deadline, true);
      if (!range.has_value() || !range->ok()) continue;
      const std::vector<KeyValue>& kvs = (*range)->kvs;
      if (kvs.empty() || kvs[0].create_revision != term.revision) {
        const std::string holder = kvs.empty() ? "" : kvs[0].value;
        StepDown(term, absl::AbortedError(absl::StrCat(
                           what_, ": the leader key ",
                           kvs.empty() ? "is gone"
                                       : absl::StrCat("belongs to ", holder, " (term ", kvs[0].create_revision, ")"))));
        {
          absl::MutexLock lock(&mu_);
          leader_identity_ = holder;
        }
        SetStaleLease(term.lease);
        return;
      }
    }
  }

  // Checks the key every `retry` until it is gone (time to campaign), the
  // pause state changes, or Resign().
  void Follow() {
    while (true) {
      if (Sleep(options_.retry) || IsPaused()) return;
      // A follower has no deadline: Resign() interrupts the wait.
      std::optional<absl::StatusOr<RangeResult>> range = CallEtcd<absl::StatusOr<RangeResult>>(
          [this] { return client_->Range(options_.key); }, absl::InfiniteFuture(), true);
      if (!range.has_value()) return;
      if (!range->ok()) {
        NoteError("reading the leader key", range->status());
        continue;
      }
      ClearError();
      const std::vector<KeyValue>& kvs = (*range)->kvs;
      absl::MutexLock lock(&mu_);
      leader_identity_ = kvs.empty() ? "" : kvs[0].value;
      if (kvs.empty()) return;
    }
  }

  void StepDown(const Term& term, absl::Status why) {
    {
      absl::MutexLock lock(&mu_);
      term_.reset();
      leader_identity_.clear();
    }
    // `why` names the key and the replica already.
    Log()->warn("{} (term {})", why.message(), term.revision);
    if (callbacks_.on_lost) callbacks_.on_lost(term, why);
  }

  // --- Leases left behind --------------------------------------------------

  absl::Status RevokeUntil(int64_t lease, absl::Time deadline, bool interruptible) {
    std::optional<absl::Status> s =
        CallEtcd<absl::Status>([this, lease] { return client_->Revoke(lease); }, deadline, interruptible);
    if (!s.has_value()) return absl::DeadlineExceededError("no answer in time");
    // Already expired: as good as revoked.
    if (s->code() == absl::StatusCode::kNotFound) return absl::OkStatus();
    return *s;
  }

  void SetStaleLease(int64_t lease) {
    absl::MutexLock lock(&mu_);
    stale_lease_ = lease;
  }

  // Revokes the lease of a term that ended (or of a lost campaign), once
  // etcd can be reached: a key still under it goes at once. Kept for a
  // later try on failure.
  void RevokeStaleLease(absl::Time deadline, bool interruptible) {
    int64_t lease;
    {
      absl::MutexLock lock(&mu_);
      lease = stale_lease_;
    }
    if (lease == 0) return;
    if (RevokeUntil(lease, deadline, interruptible).ok()) {
      absl::MutexLock lock(&mu_);
      if (stale_lease_ == lease) stale_lease_ = 0;
    }
  }

  // --- Small helpers -------------------------------------------------------

  bool IsPaused() const {
    absl::MutexLock lock(&mu_);
    return paused_;
  }

  bool IsStopping() const {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

  // Logs the first of a run of failures only; etcd being away for a while
  // is one message, not one per retry.
  void NoteError(absl::string_view doing, const absl::Status& s) {
    if (failing_) return;
    failing_ = true;
    Log()->warn("{}: {} failed (retrying every {}): {}", what_, doing, absl::FormatDuration(options_.retry),
                s.message());
  }

  void ClearError() {
    if (!failing_) return;
    failing_ = false;
    Log()->info("{}: etcd answers again", what_);
  }

  Client* const client_;
  const ElectionOptions options_;
  const ElectionCallbacks callbacks_;
  const base::Clock* const clock_;
  const std::string what_;   // "etcd election KEY (IDENTITY)", for messages
  std::thread thread_;       // runs Run(): the state machine and callbacks
  std::thread call_thread_;  // runs CallLoop(): the etcd calls
  bool failing_ = false;     // only the elector thread touches it

  mutable absl::Mutex mu_;
  // The term this replica leads in, while its keep-alives keep up; Leading()
  // also checks deadline_, so it turns false on time even when the elector
  // thread is late to step down.
  std::optional<Term> term_ ABSL_GUARDED_BY(mu_);
  // The last successful keep-alive's send time + ttl - renew.
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string leader_identity_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;      // Resign() or the destructor
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Run() returned
  // A lease no term uses any more but which may still hold the key (0: none).
  int64_t stale_lease_ ABSL_GUARDED_BY(mu_) = 0;
  // The call thread's mailbox: at most one job, and one call in flight.
  std::function<void()> job_ ABSL_GUARDED_BY(mu_);
  bool call_busy_ ABSL_GUARDED_BY(mu_) = false;
  bool call_thread_stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Elector>> Elector::Start(Client* client, ElectionOptions options,
                                                        ElectionCallbacks callbacks, const base::Clock* clock) {
  const base::FieldPath root("election");
  base::FieldErrors errors;
  if (client == nullptr) {
    errors.Add(root.Child("client"), base::FieldErrorType::kRequired, "an etcd client is required");
  }
  if (clock == nullptr) errors.Add(root.Child("clock"), base::FieldErrorType::kRequired, "a clock is required");
  if (options.key.empty()) {
    errors.Add(root.Child("key"), base::FieldErrorType::kRequired, "the leader key must not be empty");
  }
  if (options.identity.empty()) {
    errors.Add(root.Child("identity"), base::FieldErrorType::kRequired,
               "this replica's identity must not be empty (e.g. host:pid)");
  }
  if (options.ttl < absl::Seconds(2)) {
    errors.Add(root.Child("ttl"), base::FieldErrorType::kInvalid,
               absl::StrCat(absl::FormatDuration(options.ttl),
                            " is under 2s (etcd leases count whole seconds; a leader needs time to renew)"));
  }
  if (options.renew <= absl::ZeroDuration() || options.renew >= options.ttl / 2) {
    errors.Add(root.Child("renew"), base::FieldErrorType::kInvalid,
               absl::StrCat(absl::FormatDuration(options.renew), " must be positive and under ttl / 2 (",
                            absl::FormatDuration(options.ttl / 2), "): a keep-alive must get two chances"));
  }
  if (options.retry <= absl::ZeroDuration()) {
    errors.Add(root.Child("retry"), base::FieldErrorType::kInvalid,
               absl::StrCat(absl::FormatDuration(options.retry), " is not positive"));
  }
  if (absl::Status s = base::ToStatus(errors); !s.ok()) return s;
  auto elector = std::make_unique<LeaseElector>(client, std::move(options), std::move(callbacks), clock);
  elector->Begin();
  return elector;
}

}  // namespace gangkeeper::etcd
