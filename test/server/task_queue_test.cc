#include "src/server/task_queue.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "absl/time/clock.h"

#include "gtest/gtest.h"
#include "test/testing/wait.h"

namespace gangkeeper::server {
namespace {

// Blocks tasks until Release(); bounded waits only.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return open_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

using ::gangkeeper::testing::WaitFor;

TEST(ElasticTaskQueueTest, GrowsBeyondTheMinimumWhenAllWorkersAreBusy) {
  ElasticTaskQueue queue(2, 64, absl::Seconds(60));
  Gate gate;
  std::atomic<int> running{0};
  for (int i = 0; i < 40; ++i) {
    queue.enqueue([&] {
      running.fetch_add(1);
      gate.Wait();
    });
  }
  // All 40 long-lived tasks (think: keep-alive connections) run at once.
  EXPECT_TRUE(WaitFor([&] { return running.load() == 40; }));
  EXPECT_GE(queue.stats().threads, 40u);
  gate.Release();
  queue.shutdown();
  EXPECT_EQ(queue.stats().threads, 0u);
}

TEST(ElasticTaskQueueTest, QueuesBeyondTheMaximumAndRunsEverythingEventually) {
  ElasticTaskQueue queue(1, 4, absl::Seconds(60));
  Gate gate;
  std::atomic<int> running{0};
  std::atomic<int> finished{0};
  for (int i = 0; i < 10; ++i) {
    queue.enqueue([&] {
      running.fetch_add(1);
      gate.Wait();
      finished.fetch_add(1);
    });
  }
  EXPECT_TRUE(WaitFor([&] { return running.load() == 4; }));
  EXPECT_EQ(queue.stats().threads, 4u);
  EXPECT_EQ(queue.stats().queued, 6u);
  gate.Release();
  EXPECT_TRUE(WaitFor([&] { return finished.load() == 10; }));
  queue.shutdown();
}

TEST(ElasticTaskQueueTest, ExtraWorkersExitWhenIdle) {
  ElasticTaskQueue queue(1, 8, absl::Milliseconds(50));
  Gate gate;
  for (int i = 0; i < 6; ++i) queue.enqueue([&] { gate.Wait(); });
  EXPECT_TRUE(WaitFor([&] { return queue.stats().threads >= 6; }));
  gate.Release();
  EXPECT_TRUE(WaitFor([&] { return queue.stats().threads == 1; }));
  EXPECT_GE(queue.stats().peak_threads, 6u);
}

TEST(ElasticTaskQueueTest, ShutdownRunsQueuedTasksThenRefusesNewOnes) {
  auto queue = std::make_unique<ElasticTaskQueue>(1, 1, absl::Seconds(60));
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i) queue->enqueue([&] { ran.fetch_add(1); });
  queue->shutdown();
  EXPECT_EQ(ran.load(), 5);
  queue->enqueue([&] { ran.fetch_add(100); });
  queue.reset();
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace gangkeeper::server
