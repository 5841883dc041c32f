// gangkeeper tests: what the etcd client's tests share (client_test.cc,
// watch_test.cc, transport_test.cc): a closed loopback port, a client with
// short timeouts, a recorder of watch callbacks to wait on, and a fixture on
// one etcd shared by the tests of a binary (each keeps to its own prefix).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/store/etcd/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_process.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::etcd {

// A loopback port nobody listens on: connections are refused at once.
inline int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

inline std::unique_ptr<Client> NewClient(std::vector<std::string> endpoints, absl::Duration timeout = absl::Seconds(2),
                                         int max_attempts = 3) {
  ClientOptions o;
  o.endpoints = std::move(endpoints);
  o.timeout = timeout;
  o.max_attempts = max_attempts;
  o.backoff = absl::Milliseconds(50);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(std::move(o));
  EXPECT_THAT(c, ::gangkeeper::testing::IsOk());
  return c.ok() ? std::move(*c) : nullptr;
}

// What a watch delivered, for waiting on from the test thread.
class WatchRecorder {
 public:
  struct Call {
    std::vector<WatchEvent> events;
    int64_t revision = 0;
  };

  std::function<void(const std::vector<WatchEvent>&, int64_t)> OnEvents() {
    return [this](const std::vector<WatchEvent>& events, int64_t revision) {
      absl::MutexLock lock(&mu_);
      calls_.push_back({events, revision});
      if (events.empty()) {
        ++progress_;
      } else {
        event_count_ += events.size();
      }
    };
  }
  std::function<void(const absl::Status&)> OnEnd() {
    return [this](const absl::Status& why) {
      absl::MutexLock lock(&mu_);
      ends_.push_back(why);
    };
  }

  bool WaitForEvents(size_t n, absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n] {
      mu_.AssertReaderHeld();
      return event_count_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  bool WaitForProgress(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto seen = [this] {
      mu_.AssertReaderHeld();
      return progress_ > 0;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(5)) {
    absl::MutexLock lock(&mu_);
    auto ended = [this] {
      mu_.AssertReaderHeld();
      return !ends_.empty();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  }

  // The calls that carried events (progress notifications left out).
  std::vector<Call> EventCalls() {
    absl::MutexLock lock(&mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (!c.events.empty()) out.push_back(c);
    }
    return out;
  }
  std::vector<WatchEvent> Events() {
    std::vector<WatchEvent> out;
    for (const Call& c : EventCalls()) out.insert(out.end(), c.events.begin(), c.events.end());
    return out;
  }
  std::vector<Call> ProgressCalls() {
    absl::MutexLock lock(&mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (c.events.empty()) out.push_back(c);
    }
    return out;
  }
  size_t EventCount() {
    absl::MutexLock lock(&mu_);
    return event_count_;
  }
  std::vector<absl::Status> Ends() {
    absl::MutexLock lock(&mu_);
    return ends_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  size_t event_count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t progress_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Status> ends_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------
// Against one shared etcd.

class EtcdClientTest : public testing::SharedEtcdTest {
 protected:
  void SetUp() override {
    SharedEtcdTest::SetUp();
    if (HasFatalFailure()) return;
    client_ = NewClient({etcd_->endpoint()});
    ASSERT_NE(client_, nullptr);
    prefix_ = absl::StrCat("test/", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/");
  }

  std::string Key(absl::string_view name) const { return absl::StrCat(prefix_, name); }

  int64_t MustPut(const std::string& key, const std::string& value, int64_t lease = 0) {
    absl::StatusOr<int64_t> rev = client_->Put(key, value, lease);
    EXPECT_THAT(rev, ::gangkeeper::testing::IsOk());
    return rev.ok() ? *rev : 0;
  }

  std::unique_ptr<Client> client_;
  std::string prefix_;
};

}  // namespace gangkeeper::etcd
