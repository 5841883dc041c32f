// gangkeeper: the loop round hand-over (Broker::SubmitAsync on a thread with
// a base::LoopRound, src/broker/broker.cc's RoundBatch), driven at random
// with fixed seeds. Three loop threads, each with a round of its own, and
// one plain thread submit, wait, flush, end and abandon rounds while the
// broker runs, and in some runs stops; then every answer, the durable record
// and each thread's order are checked against what the threads handed over.
// Each seed's threads run their steps concurrently: what differs between two
// runs of a seed is only the interleaving, and the checks hold for any.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/loop_round.h"
#include "gangkeeper/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/gangs.h"
#include "test/testing/manual_round.h"
#include "test/testing/policies.h"
#include "test/testing/wait.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::testing::WaitFor;

// SubmitAndWait's and Flush's limit, and how long a thread holds for the
// stop: generous, only a hang reaches them.
constexpr absl::Duration kWaitLimit = absl::Seconds(30);
// SubmitAsync's: never reached in a run (a timeout's Unavailable, followed
// by the event's late application, would be a legitimate third outcome).
constexpr absl::Duration kAckTimeout = absl::Minutes(10);

constexpr int kLoopThreads = 3;
constexpr int kThreads = kLoopThreads + 1;  // the last one is plain
constexpr int kSeeds = 20;                  // per test

// One GPU each, on the one team's 8: most stay pending, a few are admitted.
workload::Workload RoundJob(const std::string& name) { return testing::GpuGang(name, 1, 1); }

// An always-open sink recording, in the order they became durable, the
// registrations ("+name") and removals ("-name") of the batches it got.
class RecordingSink : public StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    for (const StateChange& c : batch.changes) {
      if (c.type == StateChange::Type::kRegistered) log_.push_back("+" + c.key.name);
      if (c.type == StateChange::Type::kRemoved) log_.push_back("-" + c.key.name);
    }
    return ++position_;
  }
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }

 private:
  absl::Mutex mu_;
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

using ::gangkeeper::testing::ManualRound;

// Every SubmitAsync answer, by workload name, numbered in the order the
// answers arrived (over all threads).
class Ledger {
 public:
  struct Answer {
    absl::Status status;
    int64_t seq = 0;
  };
  EventQueue::Ack Callback(std::string name) {
    return [this, name = std::move(name)](absl::Status s) {
      absl::MutexLock lock(&mu_);
      answers_[name].push_back(Answer{std::move(s), next_++});
    };
  }
  size_t Count(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = answers_.find(name);
    return it == answers_.end() ? 0 : it->second.size();
  }
  std::map<std::string, std::vector<Answer>> answers() {
    absl::MutexLock lock(&mu_);
    return answers_;
  }

 private:
  absl::Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<Answer>> answers_ ABSL_GUARDED_BY(mu_);
};

// One event a thread handed to the broker (it left the thread's open round,
// or never was in one), in the thread's hand-over order.
struct Handed {
  bool remove = false;  // Remove, else Add
  std::string name;
  bool async = false;   // SubmitAsync: answered in the Ledger; else SubmitAndWait:
  absl::Status waited;  // its answer
};

// What one thread did, as the thread saw it.
struct ThreadRun {
  int id = 0;
  bool loop = false;  // has a ManualRound installed
  int steps = 0;
  int hold_at = -1;  // the step before which it waits for the broker's stop; -1: none
  int next_name = 0;
  std::vector<Handed> handed;
  std::vector<std::string> open;       // SubmitAsync'ed in the open round, not handed over yet
  std::vector<std::string> abandoned;  // their round was abandoned: never handed over
  std::vector<std::string> added;      // every Add, for a Remove to name
  std::set<std::string> remove_named;
  int several_in_a_round = 0;          // rounds handed over with two events or more
  int flushes_refused = 0;
  std::vector<std::string> problems;   // seen while running (reported with the seed)
};

// What the runs of a test went through (asserted over all its seeds, so that
// a change in the generator cannot quietly stop covering a path).
struct Coverage {
  int async_ok = 0;
  int abandoned = 0;
  int refused_in_round = 0;  // a loop thread's SubmitAsync answered "shutting down"
  int refused_waits = 0;
  int removes_applied = 0;
  int several_in_a_round = 0;
  void Add(const Coverage& o) {
    async_ok += o.async_ok;
    abandoned += o.abandoned;
    refused_in_round += o.refused_in_round;
    refused_waits += o.refused_waits;
    removes_applied += o.removes_applied;
    several_in_a_round += o.several_in_a_round;
  }
};

bool ShuttingDown(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable && absl::StrContains(s.message(), "shutting down");
}

// One seed's run: a broker on a RecordingSink, the threads, and the checks.
class RoundRun {
 public:
  RoundRun(int seed, bool stop_midway) : seed_(seed), stop_midway_(stop_midway) {}

  Coverage Run() {
    BrokerOptions options;
    options.ack_timeout = kAckTimeout;
    auto created = Broker::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), options, nullptr, &sink_, &clock_);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return {};
    broker_ = *std::move(created);
    broker_->Start();

    std::mt19937 plan(static_cast<uint32_t>(seed_));
    std::vector<ThreadRun> runs(kThreads);
    int holders = 0;
    for (int i = 0; i < kThreads; ++i) {
      runs[i].id = i;
      runs[i].loop = i < kLoopThreads;
      runs[i].steps = 30 + static_cast<int>(plan() % 31);
      if (stop_midway_ && plan() % 2 == 0) {
        runs[i].hold_at = 1 + static_cast<int>(plan() % static_cast<uint32_t>(runs[i].steps - 1));
        ++holders;
      }
    }
    if (stop_midway_ && holders == 0) {
      ThreadRun& t = runs[plan() % kThreads];
      t.hold_at = 1 + static_cast<int>(plan() % static_cast<uint32_t>(t.steps - 1));
      holders = 1;
    }

    // The stop comes once every holder waits at its step, while the others
    // run on (they race with it).
    std::thread stopper;
    if (stop_midway_) {
      stopper = std::thread([this, holders] {
        const bool all_held = WaitFor([&] { return arrived_.load() == holders; }, kWaitLimit, absl::Milliseconds(1));
        EXPECT_TRUE(all_held) << "seed " << seed_ << ": " << arrived_.load() << " of " << holders
                              << " threads reached their hold";
        broker_->Stop();
        stopped_.Notify();
      });
    }
    std::vector<std::thread> threads;
    for (ThreadRun& t : runs) threads.emplace_back([this, &t] { Drive(t); });
    for (std::thread& th : threads) th.join();
    if (stopper.joinable()) stopper.join();
    broker_->Stop();  // what is queued is applied and answered
    return Check(runs);
  }

 private:
  // The thread's steps; its rounds, on a loop thread, end or are abandoned
  // only here.
  void Drive(ThreadRun& t) {
    std::mt19937 rng(static_cast<uint32_t>(seed_ * 1000 + t.id));
    ManualRound round;
    std::optional<base::ScopedRound> on_loop;
    if (t.loop) on_loop.emplace(&round);
    for (int step = 0; step < t.steps; ++step) {
      if (step == t.hold_at) Hold(t);
      const uint32_t dice = rng() % 100;
      if (t.loop) {
        if (dice < 45) {
          SubmitAsync(t);
        } else if (dice < 65) {
          EndRound(t, round);
        } else if (dice < 73) {
          WaitAdd(t);
        } else if (dice < 81) {
          WaitRemove(t, rng);
        } else if (dice < 93) {
          Flush(t);
        } else {
          AbandonRound(t, round);
        }
      } else {
        if (dice < 55) {
          SubmitAsync(t);
        } else if (dice < 70) {
          WaitAdd(t);
        } else if (dice < 85) {
          WaitRemove(t, rng);
        } else {
          Flush(t);
        }
      }
    }
    if (t.loop) {
      if (rng() % 4 == 0) {
        AbandonRound(t, round);
      } else {
        EndRound(t, round);
      }
    }
  }

  // Waits for the stop; a loop thread first opens its round, so that the
  // stop finds it open.
  void Hold(ThreadRun& t) {
    if (t.loop) SubmitAsync(t);
    ++arrived_;
    if (!stopped_.WaitForNotificationWithTimeout(kWaitLimit)) {
      t.problems.push_back(absl::StrCat("thread ", t.id, " was not released from its hold"));
    }
  }

  std::string FreshName(ThreadRun& t) { return absl::StrCat("t", t.id, "-", t.next_name++); }

  void SubmitAsync(ThreadRun& t) {
    std::string name = FreshName(t);
    t.added.push_back(name);
    if (t.loop) {
      t.open.push_back(name);
    } else {
      t.handed.push_back(Handed{false, name, true, absl::OkStatus()});
    }
    broker_->SubmitAsync(Event::Add(RoundJob(name)), ledger_.Callback(name), kAckTimeout);
  }

  // What the thread's open round holds goes to the broker now (a round's
  // end, or a waiting call from the same thread, hands it over).
  void HandOverOpen(ThreadRun& t) {
    if (t.open.size() >= 2) ++t.several_in_a_round;
    for (std::string& name : t.open) t.handed.push_back(Handed{false, std::move(name), true, absl::OkStatus()});
    t.open.clear();
  }

  void EndRound(ThreadRun& t, ManualRound& round) {
    HandOverOpen(t);
    round.End();
  }

  void AbandonRound(ThreadRun& t, ManualRound& round) {
    t.abandoned.insert(t.abandoned.end(), t.open.begin(), t.open.end());
    t.open.clear();
    round.Abandon();
  }

  void WaitAdd(ThreadRun& t) {
    HandOverOpen(t);
    const std::string name = FreshName(t);
    t.added.push_back(name);
    const absl::Status s = broker_->SubmitAndWait(Event::Add(RoundJob(name)), kWaitLimit);
    t.handed.push_back(Handed{false, name, false, s});
    if (s.ok()) ExpectAnsweredBefore(t, absl::StrCat("SubmitAndWait(Add ", name, ")"));
  }

  // Removes one of the thread's Adds (still in the open round, handed over,
  // or abandoned); an Add when it has none left.
  void WaitRemove(ThreadRun& t, std::mt19937& rng) {
    std::vector<std::string> candidates;
    for (const std::string& name : t.added) {
      if (t.remove_named.count(name) == 0) candidates.push_back(name);
    }
    if (candidates.empty()) {
      SubmitAsync(t);
      return;
    }
    const std::string name = candidates[rng() % candidates.size()];
    t.remove_named.insert(name);
    HandOverOpen(t);
    const absl::Status s = broker_->SubmitAndWait(Event::Remove({"a", name}, ""), kWaitLimit);
    t.handed.push_back(Handed{true, name, false, s});
    if (s.ok()) ExpectAnsweredBefore(t, absl::StrCat("SubmitAndWait(Remove ", name, ")"));
  }

  void Flush(ThreadRun& t) {
    HandOverOpen(t);
    if (broker_->Flush(kWaitLimit)) {
      ExpectAnsweredBefore(t, "Flush");
    } else {
      ++t.flushes_refused;
    }
  }

  // A waiting call that returned OK was applied after everything the thread
  // handed over before it: those SubmitAsync callbacks were called already.
  void ExpectAnsweredBefore(ThreadRun& t, const std::string& call) {
    for (const Handed& h : t.handed) {
      if (h.async && ledger_.Count(h.name) == 0) {
        t.problems.push_back(absl::StrCat("thread ", t.id, ": ", h.name, " was handed over before ", call,
                                          ", which returned OK, but its callback had not been called"));
      }
    }
  }

  Coverage Check(const std::vector<ThreadRun>& runs) {
    Coverage cov;
    const std::map<std::string, std::vector<Ledger::Answer>> answers = ledger_.answers();
    const std::vector<std::string> log = sink_.log();
    const std::shared_ptr<const Snapshot> snapshot = broker_->snapshot();
    std::set<std::string> acknowledged;  // Adds answered OK
    std::set<std::string> removed;       // of those, Removes answered OK
    std::set<std::string> refused;       // Adds answered with an error, or abandoned
    for (const ThreadRun& t : runs) {
      const std::string who = absl::StrCat("seed ", seed_, " thread ", t.id);
      for (const std::string& p : t.problems) ADD_FAILURE() << "seed " << seed_ << ": " << p;
      EXPECT_TRUE(t.open.empty()) << who << ": the test left a round open";
      cov.several_in_a_round += t.several_in_a_round;
      if (!stop_midway_) {
        EXPECT_EQ(t.flushes_refused, 0) << who << ": Flush failed on a running broker";
      }

      // 1. Every SubmitAsync callback is called exactly once.
      auto answer = [&](const std::string& name) -> std::optional<absl::Status> {
        auto it = answers.find(name);
        const size_t n = it == answers.end() ? 0 : it->second.size();
        EXPECT_EQ(n, 1u) << who << ": the callback of " << name << " was called " << n << " times";
        if (n == 0) return std::nullopt;
        return it->second.front().status;
      };
      for (const std::string& name : t.abandoned) {
        ++cov.abandoned;
        refused.insert(name);
        const std::optional<absl::Status> s = answer(name);
        if (!s.has_value()) continue;
        EXPECT_TRUE(s->code() == absl::StatusCode::kUnavailable && absl::StrContains(s->message(), "server stopped"))
            << who << ": " << name << " was in an abandoned round, answered " << *s;
      }

      // What the sink must have got from this thread: its OK answers, in
      // the order it handed them over. The async ones are also answered in
      // that order.
      std::vector<std::string> want;
      std::vector<std::string> async_ok_handed;
      for (const Handed& h : t.handed) {
        std::optional<absl::Status> s = h.async ? answer(h.name) : std::optional<absl::Status>(h.waited);
        if (!s.has_value()) continue;
        if (!s->ok()) {
          EXPECT_TRUE(ShuttingDown(*s)) << who << ": " << (h.remove ? "Remove " : "Add ") << h.name
                                        << " answered " << *s << ", want OK or Unavailable \"shutting down\"";
          if (!stop_midway_) {
            ADD_FAILURE() << who << ": " << h.name << " refused by a running broker: " << *s;
          }
          if (h.async && t.loop) ++cov.refused_in_round;
          if (!h.async) ++cov.refused_waits;
          if (!h.remove) refused.insert(h.name);
          continue;
        }
        if (h.remove) {
          if (acknowledged.count(h.name) > 0 && removed.insert(h.name).second) {
            want.push_back("-" + h.name);
            ++cov.removes_applied;
          }
          continue;
        }
        acknowledged.insert(h.name);
        want.push_back("+" + h.name);
        if (h.async) {
          ++cov.async_ok;
          async_ok_handed.push_back(h.name);
        }
      }

      // 4. The thread's events reached the sink in its hand-over order
      // (a round's in submission order, before the thread's later waiting
      // calls, and rounds one after the other).
      const std::string prefix = absl::StrCat("t", t.id, "-");
      std::vector<std::string> got;
      for (const std::string& entry : log) {
        if (absl::StartsWith(entry.substr(1), prefix)) got.push_back(entry);
      }
      EXPECT_THAT(got, ::testing::ElementsAreArray(want))
          << who << ": the sink did not get this thread's acknowledged events (+add, -remove) in the order it "
          << "handed them over";

      std::vector<std::pair<int64_t, std::string>> by_arrival;
      for (const std::string& name : async_ok_handed) by_arrival.emplace_back(answers.at(name).front().seq, name);
      std::sort(by_arrival.begin(), by_arrival.end());
      std::vector<std::string> answered_order;
      for (auto& [seq, name] : by_arrival) answered_order.push_back(name);
      EXPECT_THAT(answered_order, ::testing::ElementsAreArray(async_ok_handed))
          << who << ": its SubmitAsync callbacks answered OK in another order than it handed the events over";
    }

    // 2, 3 and 5: the durable record holds exactly the acknowledged Adds,
    // each once; the snapshot agrees.
    std::map<std::string, int> registered;
    for (const std::string& entry : log) {
      if (entry[0] == '+') ++registered[entry.substr(1)];
    }
    for (const auto& [name, n] : registered) {
      EXPECT_EQ(n, 1) << "seed " << seed_ << ": " << name << " registered " << n << " times in the sink";
      if (acknowledged.count(name) > 0) continue;
      if (refused.count(name) > 0) {
        ADD_FAILURE() << "seed " << seed_ << ": " << name << " is registered in the sink, but was answered with an "
                      << "error (or its round abandoned)";
      } else {
        ADD_FAILURE() << "seed " << seed_ << ": " << name << " is registered in the sink, but was never handed over";
      }
    }
    for (const std::string& name : acknowledged) {
      EXPECT_EQ(registered.count(name), 1u) << "seed " << seed_ << ": " << name
                                            << " was acknowledged OK, but is not registered in the sink";
      const bool want_tracked = removed.count(name) == 0;
      EXPECT_EQ(snapshot->Record({"a", name}).has_value(), want_tracked)
          << "seed " << seed_ << ": " << name << (want_tracked ? " acknowledged, but not" : " removed, but still")
          << " in the broker's snapshot";
    }
    for (const std::string& name : refused) {
      EXPECT_FALSE(snapshot->Record({"a", name}).has_value())
          << "seed " << seed_ << ": " << name << " was answered with an error, but is in the broker's snapshot";
    }
    return cov;
  }

  const int seed_;
  const bool stop_midway_;
  RecordingSink sink_;
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  Ledger ledger_;  // outlives the broker, whose callbacks write to it
  std::unique_ptr<Broker> broker_;
  std::atomic<int> arrived_{0};
  absl::Notification stopped_;
};

TEST(LoopRoundRandomTest, RoundsHandOverEveryEventInOrderOnARunningBroker) {
  Coverage cov;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    cov.Add(RoundRun(seed, /*stop_midway=*/false).Run());
    if (::testing::Test::HasFailure()) break;  // one seed's failures are enough to read
  }
  EXPECT_GT(cov.async_ok, 0);
  EXPECT_GT(cov.several_in_a_round, 0);
  EXPECT_GT(cov.abandoned, 0);
  EXPECT_GT(cov.removes_applied, 0);
}

TEST(LoopRoundRandomTest, RoundsOpenWhenTheBrokerStopsAreAnsweredAndNothingAcknowledgedIsLost) {
  Coverage cov;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    cov.Add(RoundRun(seed, /*stop_midway=*/true).Run());
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(cov.async_ok, 0);
  EXPECT_GT(cov.abandoned, 0);
  EXPECT_GT(cov.refused_in_round, 0);
  EXPECT_GT(cov.refused_waits, 0);
}

}  // namespace
}  // namespace gangkeeper::broker
