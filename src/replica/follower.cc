// gangkeeper replica: a follower's copy of the leader's state (see
// follower.h).
#include "gangkeeper/replica/follower.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/replica/etcd_journal.h"

namespace gangkeeper::replica {

Follower::Follower(etcd::Client* client, std::string prefix, broker::Broker* broker, absl::Duration min_interval)
    : client_(client), prefix_(std::move(prefix)), broker_(broker), min_interval_(min_interval) {
  thread_ = std::thread([this] { Run(); });
}

Follower::~Follower() { Stop(); }

void Follower::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

FollowerStats Follower::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Follower::Run() {
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stop_.HasBeenNotified()) {
    absl::Status s = Follow();
    if (stop_.HasBeenNotified()) break;
    base::GetLogger("replica")->warn("follower: following the journal in etcd stopped ({}); again in {}",
                                     s.message(), absl::FormatDuration(backoff));
    if (stop_.WaitForNotificationWithTimeout(backoff)) break;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

void Follower::OnEvents(const std::vector<etcd::WatchEvent>& events) {
  absl::MutexLock lock(&mu_);
  for (const etcd::WatchEvent& e : events) {
    // Deletions are the leader's clean-up of records its snapshot covers.
    if (e.type != etcd::WatchEvent::Type::kPut || gap_) continue;
    const std::optional<uint64_t> record = RecordOfKey(prefix_, e.kv.key);
    if (!record.has_value() || *record <= state_.position) continue;
    if (*record != state_.position + 1) {
      gap_ = true;
      continue;
    }
    if (absl::Status s = broker::ApplyBatch(e.kv.value, *record, &state_); !s.ok()) {
      base::GetLogger("replica")->error("follower: {}: {}; reading the whole state again", e.kv.key, s.message());
      gap_ = true;
      continue;
    }
    state_.position = *record;
    ++stats_.records;
    dirty_ = true;
  }
}

absl::Status Follower::Follow() {
  EtcdRecovery r;
  absl::StatusOr<broker::DurableState> state = ReadState(client_, prefix_, &r);
  if (!state.ok()) return state.status();
  {
    absl::MutexLock lock(&mu_);
    state_ = *std::move(state);
    dirty_ = true;
    gap_ = false;
    ++stats_.reads;
  }
  absl::Notification ended;
  absl::Mutex why_mu;
  absl::Status why = absl::UnavailableError("the watch ended");
  etcd::WatchOptions wo;
  wo.range_end = etcd::PrefixEnd(JournalPrefix(prefix_));
  wo.start_revision = r.revision + 1;
  absl::StatusOr<std::unique_ptr<etcd::Watch>> watch = client_->StartWatch(
      JournalPrefix(prefix_), wo, [this](const std::vector<etcd::WatchEvent>& events, int64_t) { OnEvents(events); },
      [&](const absl::Status& s) {
        {
          absl::MutexLock lock(&why_mu);
          if (!s.ok()) why = s;
        }
        ended.Notify();
      });
  if (!watch.ok()) return watch.status();
  absl::Status out = absl::OkStatus();
  while (true) {
    // Hand the broker the newest state (at most every min_interval).
    broker::DurableState copy;
    bool give = false;
    {
      absl::MutexLock lock(&mu_);
      if (gap_) {
        out = absl::DataLossError("a record was missed or did not decode");
        break;
      }
      if (dirty_) {
        copy = state_;
        dirty_ = false;
        give = true;
      }
    }
    if (give) {
      const uint64_t position = copy.position;
      absl::Status s = broker_->Follow(std::move(copy));
      absl::MutexLock lock(&mu_);
      if (s.ok()) {
        ++stats_.rebuilds;
        stats_.position = position;
        stats_.synced = true;
      } else {
        base::GetLogger("replica")->error("follower: the broker refused the state at record {}: {}", position,
                                          s.message());
        dirty_ = true;
      }
    }
    if (stop_.WaitForNotificationWithTimeout(min_interval_)) break;
    if (ended.HasBeenNotified()) {
      absl::MutexLock lock(&why_mu);
      out = why;
      break;
    }
  }
  (*watch)->Cancel();
  watch->reset();
  return out;
}

}  // namespace gangkeeper::replica
