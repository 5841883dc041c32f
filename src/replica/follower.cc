// gangkeeper replica: a follower's copy of the leader's state (see
// follower.h).
#include "gangkeeper/replica/follower.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gangkeeper/store/state_codec.h"
#include "src/replica/watch_loop.h"

namespace gangkeeper::replica {

Follower::Follower(etcd::Client* client, std::string prefix, broker::ReadOnlyView* view, absl::Duration min_interval)
    : client_(client), prefix_(std::move(prefix)), view_(view), min_interval_(min_interval) {
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
  internal::RunSessions(&stop_, "replica", "follower: following the journal in etcd", [this] { return Follow(); });
}

void Follower::OnEvents(const std::vector<etcd::WatchEvent>& events) {
  absl::MutexLock lock(&mu_);
  for (const etcd::WatchEvent& e : events) {
    // Deletions are the leader's clean-up of records its snapshot covers.
    if (e.type != etcd::WatchEvent::Type::kPut || gap_) continue;
    const std::optional<uint64_t> record = store::RecordOfKey(prefix_, e.kv.key);
    if (!record.has_value() || *record <= state_.position) continue;
    if (*record != state_.position + 1) {
      gap_ = true;
      continue;
    }
    if (absl::Status s = store::ApplyBatch(e.kv.value, *record, &state_); !s.ok()) {
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
  store::EtcdRecovery r;
  absl::StatusOr<broker::DurableState> state = store::ReadState(client_, prefix_, &r);
  if (!state.ok()) return state.status();
  {
    absl::MutexLock lock(&mu_);
    state_ = *std::move(state);
    dirty_ = true;
    gap_ = false;
    ++stats_.reads;
  }
  etcd::WatchOptions wo;
  wo.range_end = etcd::PrefixEnd(store::JournalPrefix(prefix_));
  wo.start_revision = r.revision + 1;
  if (absl::Status s = HandOver(); !s.ok()) return s;
  return internal::WatchUntilEnd(
      client_, store::JournalPrefix(prefix_), wo,
      [this](const std::vector<etcd::WatchEvent>& events, int64_t) { OnEvents(events); }, &stop_, min_interval_,
      [this] { return HandOver(); });
}

absl::Status Follower::HandOver() {
  // The newest state, at most every min_interval.
  broker::DurableState copy;
  {
    absl::MutexLock lock(&mu_);
    if (gap_) return absl::DataLossError("a record was missed or did not decode");
    if (!dirty_) return absl::OkStatus();
    copy = state_;
    dirty_ = false;
  }
  const uint64_t position = copy.position;
  absl::Status s = view_->Show(std::move(copy));
  absl::MutexLock lock(&mu_);
  if (s.ok()) {
    ++stats_.rebuilds;
    stats_.position = position;
    stats_.synced = true;
  } else {
    base::GetLogger("replica")->error("follower: the state at record {} cannot be shown: {}", position,
                                      s.message());
    dirty_ = true;
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::replica
