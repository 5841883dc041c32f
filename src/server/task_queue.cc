// gangkeeper: elastic worker pool (see task_queue.h).
#include "src/server/task_queue.h"

#include <chrono>

namespace gangkeeper::server {

ElasticTaskQueue::ElasticTaskQueue(size_t min_threads, size_t max_threads, absl::Duration idle_exit)
    : min_threads_(min_threads == 0 ? 1 : min_threads),
      max_threads_(max_threads < min_threads_ ? min_threads_ : max_threads),
      idle_exit_(idle_exit) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < min_threads_; ++i) SpawnLocked();
}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::SpawnLocked() {
  ++threads_;
  if (threads_ > peak_) peak_ = threads_;
  std::thread([this] { WorkerLoop(); }).detach();
}

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_) return;  // httplib closes the socket when the task is dropped
  tasks_.push_back(std::move(fn));
  // Every idle worker is already promised to a queued task: start another.
  if (idle_ < tasks_.size() && threads_ < max_threads_) SpawnLocked();
  cv_.notify_one();
}

void ElasticTaskQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto idle_exit = absl::ToChronoMilliseconds(idle_exit_);
  while (true) {
    ++idle_;
    bool timed_out = !cv_.wait_for(lock, idle_exit, [this] { return shutdown_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) {
      if (shutdown_ || (timed_out && threads_ > min_threads_)) break;
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // destroy captured state outside the lock
    lock.lock();
  }
  --threads_;
  exited_cv_.notify_all();
}

void ElasticTaskQueue::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
  exited_cv_.wait(lock, [this] { return threads_ == 0; });
}

TaskQueueStats ElasticTaskQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return TaskQueueStats{threads_, threads_ - idle_, tasks_.size(), peak_};
}

}  // namespace gangkeeper::server
