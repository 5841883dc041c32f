// gangkeeper: the elastic worker pool behind each HTTPS listener.
//
// cpp-httplib runs one connection per task for the connection's whole
// keep-alive life, so a fixed pool starves every connection beyond its size
// (shared/bench README, observation 7). ElasticTaskQueue keeps `min_threads`
// workers and starts another whenever a task arrives and no worker is idle,
// up to `max_threads`; workers above the minimum exit after `idle_exit` with
// nothing to do. Beyond `max_threads` tasks wait in FIFO order (and the
// metrics show it). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

#include "absl/time/time.h"

namespace gangkeeper::server {

struct TaskQueueStats {
  size_t threads = 0;       // workers alive
  size_t busy = 0;          // workers running a task (open connections)
  size_t queued = 0;        // tasks waiting for a worker
  size_t peak_threads = 0;  // most workers alive at once
};

class ElasticTaskQueue final : public httplib::TaskQueue {
 public:
  ElasticTaskQueue(size_t min_threads, size_t max_threads, absl::Duration idle_exit);
  ~ElasticTaskQueue() override;

  // httplib::TaskQueue
  void enqueue(std::function<void()> fn) override;
  // Runs every task already queued, then joins all workers. Blocks until the
  // tasks in flight finish (httplib bounds them with its read/write timeouts).
  void shutdown() override;

  TaskQueueStats stats() const;

 private:
  void SpawnLocked();
  void WorkerLoop();

  const size_t min_threads_;
  const size_t max_threads_;
  const absl::Duration idle_exit_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable exited_cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  size_t threads_ = 0;                       // guarded by mu_
  size_t idle_ = 0;                          // guarded by mu_
  size_t peak_ = 0;                          // guarded by mu_
  bool shutdown_ = false;                    // guarded by mu_
  // Workers detach themselves; shutdown() waits for threads_ to reach 0.
};

}  // namespace gangkeeper::server
