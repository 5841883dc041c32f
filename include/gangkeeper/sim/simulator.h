// gangkeeper sim: replaying a trace against the real broker::Scheduler on a
// simulated clock.
//
// The simulated cluster keeps an event queue ordered by (time, kind, trace
// order) and never sleeps: time jumps from one event to the next.
//
// The cycle model, at each instant t that has events:
//   1. apply every event due at t, in this order: completions, stops of
//      preempted gangs (only with a stop delay), arrivals (trace order).
//      Arrival -> Scheduler::Add; completion -> Scheduler::Finish;
//   2. one scheduling pass: Scheduler::Schedule(t) runs cycles to a fixed
//      point. Every admission is released and confirmed at once
//      (ReleaseSucceeded at t) and starts running at t; it completes at
//      t + the runtime it has left. Every preempted gang stops (Stopped) at
//      t + stop_delay; with no delay (the default) it stops at t and the pass
//      runs Schedule(t) again so that the preemptor is admitted at t;
//   3. a preempted workload is pending again, re-queued by the Scheduler as
//      Kueue re-queues an evicted workload; it restarts from zero, or from
//      its last checkpoint (progress rounded down to a whole number of
//      checkpoint intervals) when the trace gives one.
// The run ends when no event is left (everything finished, or what is left
// can never be admitted), or at `until`.
//
// Deterministic: no clock is read; the same trace, policies and options give
// the same Report. Thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/sim/report.h"
#include "gangkeeper/sim/trace.h"

namespace gangkeeper::sim {

struct SimOptions {
  // Stop simulating at this time (ms from the start of the trace); nullopt:
  // run until nothing is left to happen.
  std::optional<int64_t> until_ms;
  // How long a preempted gang takes to stop and give its quota back. 0 (the
  // default) is the ideal cluster; larger values model slow pod termination.
  int64_t stop_delay_ms = 0;
  // Passed to the Scheduler (Kueue's one head per ClusterQueue per cycle,
  // fair sharing, ...).
  broker::SchedulerOptions scheduler;
  // The time series gets about this many buckets, and never more than twice
  // as many (the bucket width is a 1-2-5 number of milliseconds, doubled
  // whenever the run outlasts its estimate).
  int target_buckets = 100;
  // How many never-admitted workloads the report names.
  int max_unadmitted_listed = 20;
  // What the report says about where the policies came from.
  std::string policies_source;
};

// Replays `trace` against `policies` (the trace's own when null; a
// generator trace brings them). InvalidArgument, naming the trace line and
// field, when a workload's LocalQueue does not exist, its priority class is
// unknown or its name is taken; InvalidArgument when the policies cannot
// form a quota tree; Internal if the scheduler breaks an invariant.
[[nodiscard]] absl::StatusOr<Report> Simulate(const Trace& trace, std::shared_ptr<const model::PolicySet> policies,
                                              const SimOptions& options = {});

}  // namespace gangkeeper::sim
