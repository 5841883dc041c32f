// gangkeeper: Kubernetes Events about the workloads it manages, where
// `kubectl describe` and `kubectl events` show them (issue #23, "Events").
//
// EventRecorder is the bounded, rate-limited writer: Record() never blocks
// (the caller is the broker's observer); a full queue drops the event and
// counts it. One thread writes, at most `writes_per_second` with bursts of
// `burst`. An event like one written less than `series_window` ago (same
// object uid, reason and note) is not written again: the earlier one's
// series count goes up (events.k8s.io/v1 `series`, core/v1 `count`), so a
// storm of identical decisions is one object with a count, not a storm of
// writes. events.k8s.io/v1 is used; a cluster that does not serve it (404)
// gets core/v1 Events from then on. A write the API server refuses after
// the client's retries (429, 5xx, ...) is dropped and counted: Events are
// best effort and never hold scheduling up.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/kube/client.h"

namespace gangkeeper::kube {

// The object an Event is about.
struct ObjectRef {
  std::string api_version;  // "batch/v1"
  std::string kind;         // "Job"
  std::string namespace_name;
  std::string name;
  std::string uid;
};

struct ClusterEvent {
  ObjectRef regarding;
  bool warning = false;
  std::string reason;  // CamelCase, e.g. "Pending", "Preempted"
  std::string action;  // what gangkeeper did, e.g. "Admit", "Preempt"
  std::string note;    // for people; cut at 1 KiB
};

struct EventRecorderOptions {
  // Required: event times and the rate limit. Must outlive the recorder.
  const base::Clock* clock = nullptr;
  std::string controller = "gangkeeper.io/gangkeeper";  // reportingController
  std::string instance = "gangkeeper";                  // reportingInstance (the replica)
  size_t queue_limit = 1024;
  double writes_per_second = 20;
  int burst = 100;
  absl::Duration series_window = absl::Minutes(30);
  size_t series_limit = 4096;  // series remembered; the oldest are forgotten
};

struct EventRecorderStats {
  uint64_t recorded = 0;        // Record() calls that were queued
  uint64_t created = 0;         // Events written
  uint64_t series_updates = 0;  // repeats counted on an earlier Event
  uint64_t dropped_full = 0;    // Record() found the queue full
  uint64_t failed = 0;          // writes the API server refused (dropped)
  bool core_v1 = false;         // events.k8s.io/v1 is not served: core/v1 in use
};

class EventRecorder {
 public:
  // `client` must outlive the recorder; give it a client of its own (Stop
  // shuts it down) with a short retry budget.
  EventRecorder(Client* client, EventRecorderOptions options);
  ~EventRecorder();  // Stop()
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void Start();
  // Drops what is queued, ends the write in flight (through the client)
  // and joins the thread.
  void Stop();
  void Record(ClusterEvent e);
  EventRecorderStats stats() const;

 private:
  struct Series {
    std::string name;  // the Event object's
    int64_t count = 1;
    absl::Time last;
    bool core_v1 = false;
  };
  void Run();
  // Waits for a write token (false: stopping).
  bool TakeToken();
  void Write(const ClusterEvent& e);
  bool Create(const ClusterEvent& e, const std::string& key, absl::Time now);
  void Remember(const std::string& key, Series s);

  Client* const client_;
  const EventRecorderOptions options_;
  mutable absl::Mutex mu_;
  std::deque<ClusterEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  EventRecorderStats stats_ ABSL_GUARDED_BY(mu_);
  // Writer thread only.
  double tokens_ = 0;
  absl::Time refilled_;
  bool core_v1_ = false;
  uint64_t next_name_ = 0;
  std::map<std::string, Series> series_;              // by uid, reason and note
  std::multimap<absl::Time, std::string> series_by_age_;  // last write -> key, to forget the oldest
  std::thread thread_;
};

}  // namespace gangkeeper::kube
