// gangkeeper tests: the generative invariant check of the Scheduler
// (DESIGN §2 "Invariants"), shared by invariants_test.cc (fixed seeds, in
// CI) and test/bench/invariants_bench.cc (a long run whose figures go in
// the issue note).
//
// A seed makes a random world: a cohort tree (none, flat, or a root with
// quota and two child cohorts), two to five ClusterQueues with random
// quotas, borrowing and lending limits, queueing strategies and preemption
// policies, one or two flavors, fair sharing on or off, one head per cycle
// or not; and a random stream of operations on a simulated clock:
// arrivals (gangs and pod groups), completions, deletions, a name reused by
// a new object whose old one is deleted later, priority updates, quota
// changes, restarts (the state goes through the durable encoding and back),
// the actuator's answers (released, stopped, a failed release), scheduling
// passes, quiet periods in which nothing in the world changes, and admission
// reviews alone (a phantom create, another object under a tracked name, a
// shrinking update, a real create confirmed later with other pod sets).
//
// Checked after every operation: the Scheduler's own invariants (no
// over-commit, no partly reserved gang, usage equal to the admitted
// gangs'), every acknowledged workload tracked exactly once (against a
// model kept by the test), and no workload preempted twice without a change
// of the world in between (a review alone is no change); nothing known only
// from a review holds quota or changes what the API server's word set. After
// every quiet period: a fixed point (nothing
// admitted, preempted or pending an answer) within a bounded number of
// rounds. A failing seed is shrunk to a short list of operations and
// printed as a reproduction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gangkeeper/broker/scheduler.h"

namespace gangkeeper::broker::invariants {

// One operation of the stream. Targets are chosen when the operation runs,
// as `pick` modulo the candidates (sorted by key), so that any sub-list of
// a stream is still a valid stream (for shrinking).
struct Op {
  enum class Type {
    kArrive,      // a new gang in ClusterQueue `cq`
    kArriveGroup, // a new pod group of `pods` pods in `cq`
    kReuse,       // a tracked name gets a new object; the old one's deletion is seen `delay` ops later
    kFinish,      // a reserved / running / evicting workload ends
    kRemove,      // any workload's object is deleted
    kUpdate,      // a pending workload's priority changes
    kQuota,       // every nominal quota scaled to `factor`
    kRestart,     // the scheduler is rebuilt from its durable state
    kDeliver,     // one of the actuator's pending answers arrives (a release fails with `fail`)
    kSchedule,    // a scheduling pass
    kQuiet,       // nothing changes: answers and passes until a fixed point
    kReview,      // an admission review alone (DESIGN §2: a hint), of kind `variant`
  };
  // kReview: what the review is (the API server's word, if any, comes
  // `delay` operations later):
  enum class Review {
    kPhantom,    // a create the API server never stored: dropped later
    kForgedUid,  // a create of another object under a tracked name: dropped later
    kShrink,     // an update shrinking a pending workload: must change nothing
    kReal,       // a real create, seen as a review first and confirmed later with the stored object
  };
  Review variant = Review::kPhantom;
  Type type = Type::kSchedule;
  int cq = 0;
  int pods = 1;
  int gpus = 1;
  // kArrive: partial admission down to this many pods (0: whole only).
  int min_pods = 0;
  int32_t priority = 0;
  bool never_preempts = false;
  int factor = 2;
  int delay = 0;
  bool fail = false;
  uint64_t pick = 0;
};

std::string Describe(const Op& op);
// Prints every state change of the runs that follow to stderr.
void SetTrace(bool on);

// The random world of one seed.
struct World {
  std::string yaml_template;  // policies with "{Nk}" placeholders for the scaled quotas
  std::vector<int> base_quotas;
  int clusterqueues = 0;
  SchedulerOptions options;
  std::string description;
  // The policies with every nominal quota multiplied by `factor`.
  std::string Policies(int factor) const;
};

World MakeWorld(uint64_t seed);
std::vector<Op> MakeOps(uint64_t seed, int count);

struct Figures {
  int64_t ops = 0;
  int64_t schedule_calls = 0;
  int64_t cycles = 0;
  int64_t admitted = 0;
  int64_t preempted = 0;
  int64_t guarded = 0;  // candidates the anti-churn rule spared
  int64_t quiet_periods = 0;
  int64_t max_rounds_to_fixed_point = 0;
  int64_t restarts = 0;
  int64_t arrivals = 0;
  void Add(const Figures& o);
  std::string ToString() const;
};

struct Result {
  bool ok = true;
  std::string failure;  // what broke, at which operation
  Figures figures;
};

// Runs `ops` in `world`. `guard` overrides the world's anti-churn rule.
Result Run(const World& world, const std::vector<Op>& ops, bool guard);

// The shortest sub-list of `ops` found (within `budget`) that still fails
// the same way as `ops` (unchanged when `ops` does not fail).
std::vector<Op> Shrink(const World& world, std::vector<Op> ops, bool guard, absl::Duration budget);
// Shrink's result as a reproduction: the failure, the world, the
// operations and the policies, as text.
std::string Reproduce(const World& world, std::vector<Op> ops, bool guard, absl::Duration budget);

}  // namespace gangkeeper::broker::invariants
