// gangkeeper audit: the in-memory index of the newest events (see index.h).
#include "src/audit/index.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/log.h"
#include "src/audit/chain.h"

namespace gangkeeper::audit {

AuditIndex::~AuditIndex() {
  stop_.store(true);
  if (filler_.joinable()) filler_.join();
}

// Fills events [from, end) from the log on a thread of its own.
void AuditIndex::StartFill(const store::SegmentedLog* log, uint64_t from, uint64_t end) {
  if (from >= end) {
    absl::MutexLock lock(&mu_);
    ready_ = true;
    return;
  }
  filler_ = std::thread([this, log, from, end] { Fill(log, from, end); });
}

void AuditIndex::Stage(uint64_t seq, const Event& e, const store::RecordLocation& at) {
  {
    absl::MutexLock lock(&staging_mu_);
    staging_.push_back({seq, absl::ToUnixMicros(e.time), at.offset, at.size, e.namespace_name, e.name, e.kind,
                        e.action, e.actor, e.cluster_queue});
  }
  // Fold now unless a query holds the index; the next one folds it then.
  if (mu_.TryLock()) {
    FoldLocked();
    mu_.Unlock();
  }
}

// Drops events below `first` (retention removed their segments).
void AuditIndex::TrimBelow(uint64_t first) {
  absl::MutexLock lock(&mu_);
  FoldLocked();
  while (!entries_.empty() && begin_ < first) {
    entries_.pop_front();
    ++begin_;
  }
  if (entries_.empty() && begin_ < first) begin_ = first;
}

// The first seq the index answers for (everything from there on).
uint64_t AuditIndex::Begin() {
  absl::MutexLock lock(&mu_);
  FoldLocked();
  return begin_;
}

// Up to `want` events matching `q` with seq >= `from`. False when the
// index no longer reaches back to `from` (the caller scans the gap).
bool AuditIndex::Lookup(const Query& q, uint64_t from, size_t want, std::vector<Hit>* hits) {
  absl::MutexLock lock(&mu_);
  FoldLocked();
  if (from < begin_) return false;
  // Filters as ids; a string the index never saw matches nothing here.
  struct Want {
    const std::string* value;
    uint32_t Entry::*field;
    uint32_t id = 0;
  };
  Want wants[] = {{&q.namespace_name, &Entry::ns}, {&q.name, &Entry::name},   {&q.kind, &Entry::kind},
                  {&q.action, &Entry::action},     {&q.actor, &Entry::actor}, {&q.cluster_queue, &Entry::cq}};
  size_t n = 0;
  for (Want& w : wants) {
    if (w.value->empty()) continue;
    auto it = ids_.find(*w.value);
    if (it == ids_.end()) return true;
    w.id = it->second;
    wants[n++] = w;
  }
  size_t pos = from - begin_;
  if (pos >= entries_.size()) return true;
  if (q.since.has_value()) {
    const int64_t since = absl::ToUnixMicros(*q.since);
    auto first = std::partition_point(entries_.begin() + static_cast<std::ptrdiff_t>(pos), entries_.end(),
                                      [since](const Entry& e) { return e.max_time_us < since; });
    pos = static_cast<size_t>(first - entries_.begin());
  }
  for (; pos < entries_.size() && hits->size() < want; ++pos) {
    const Entry& e = entries_[pos];
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) ok = e.*(wants[i].field) == wants[i].id;
    if (!ok) continue;
    const absl::Time t = absl::FromUnixMicros(e.time_us);
    if ((q.since.has_value() && t < *q.since) || (q.until.has_value() && t > *q.until)) continue;
    hits->push_back({begin_ + pos, e.offset, e.size});
  }
  return true;
}

void AuditIndex::Stats(AuditStats* out) {
  absl::MutexLock lock(&mu_);
  FoldLocked();
  out->indexed_events = entries_.size();
  out->index_first_seq = entries_.empty() ? 0 : begin_;
  out->index_ready = ready_;
}

bool AuditIndex::ready() {
  absl::MutexLock lock(&mu_);
  return ready_;
}

uint32_t AuditIndex::InternLocked(const std::string& s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  strings_.push_back(s);
  const auto id = static_cast<uint32_t>(strings_.size() - 1);
  ids_.emplace(strings_.back(), id);
  return id;
}

AuditIndex::Entry AuditIndex::MakeLocked(const Staged& s, int64_t prev_max) {
  Entry e;
  e.time_us = s.time_us;
  e.max_time_us = std::max(prev_max, s.time_us);
  e.offset = static_cast<uint32_t>(s.offset);
  e.size = s.size;
  e.ns = InternLocked(s.ns);
  e.name = InternLocked(s.name);
  e.kind = InternLocked(s.kind);
  e.action = InternLocked(s.action);
  e.actor = InternLocked(s.actor);
  e.cq = InternLocked(s.cq);
  return e;
}

void AuditIndex::FoldLocked() {
  {
    absl::MutexLock lock(&staging_mu_);
    if (staging_.empty()) return;
    held_.insert(held_.end(), std::make_move_iterator(staging_.begin()), std::make_move_iterator(staging_.end()));
    staging_.clear();
  }
  // Concurrent appends stage in any order: take the contiguous run and
  // hold the rest until the events before them arrive.
  std::sort(held_.begin(), held_.end(), [](const Staged& a, const Staged& b) { return a.seq < b.seq; });
  size_t taken = 0;
  for (; taken < held_.size(); ++taken) {
    const Staged& s = held_[taken];
    if (s.seq < begin_ + entries_.size()) continue;  // already dropped by a trim
    if (s.seq != begin_ + entries_.size()) break;  // a gap: wait for the missing ones
    // Segments hold at most 4 GiB of offsets; past that the event is scanned.
    if (s.offset > std::numeric_limits<uint32_t>::max()) {
      entries_.clear();
      begin_ = s.seq + 1;
      continue;
    }
    entries_.push_back(MakeLocked(s, entries_.empty() ? std::numeric_limits<int64_t>::min() : entries_.back().max_time_us));
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(taken));
  while (entries_.size() > capacity_) {
    entries_.pop_front();
    ++begin_;
  }
  MaybeCompactLocked();
}

// Strings of events that left the index are dropped once they outnumber
// the events.
void AuditIndex::MaybeCompactLocked() {
  if (strings_.size() < 4096 || strings_.size() < 2 * (entries_.size() + built_.size())) return;
  std::deque<std::string> old;
  old.swap(strings_);
  ids_.clear();
  std::vector<uint32_t> remap(old.size(), std::numeric_limits<uint32_t>::max());
  auto again = [&](uint32_t& id) {
    if (remap[id] == std::numeric_limits<uint32_t>::max()) remap[id] = InternLocked(old[id]);
    id = remap[id];
  };
  auto redo = [&](Entry& e) {
    again(e.ns), again(e.name), again(e.kind), again(e.action), again(e.actor), again(e.cq);
  };
  for (Entry& e : built_) redo(e);
  for (Entry& e : entries_) redo(e);
}

void AuditIndex::Fill(const store::SegmentedLog* log, uint64_t from, uint64_t end) {
  std::vector<Staged> chunk;
  uint64_t next = from;
  auto flush = [&] {
    absl::MutexLock lock(&mu_);
    for (const Staged& s : chunk) {
      built_.push_back(MakeLocked(s, built_.empty() ? std::numeric_limits<int64_t>::min() : built_.back().max_time_us));
    }
    chunk.clear();
  };
  const absl::Status stop = absl::CancelledError("stopped");
  absl::Status s = log->ReadLocated(from, [&](uint64_t seq, absl::string_view payload, const store::RecordLocation& at) {
    if (stop_.load(std::memory_order_relaxed)) return stop;
    if (seq >= end) return stop;
    absl::StatusOr<Event> e = DecodeEvent(EventJson(payload), seq);
    if (!e.ok() || seq != next || at.offset > std::numeric_limits<uint32_t>::max()) {
      return absl::DataLossError(absl::StrCat("record ", seq, " cannot be indexed"));
    }
    ++next;
    chunk.push_back({seq, absl::ToUnixMicros(e->time), at.offset, at.size, std::move(e->namespace_name),
                     std::move(e->name), std::move(e->kind), std::move(e->action), std::move(e->actor),
                     std::move(e->cluster_queue)});
    if (chunk.size() == 4096) flush();
    return absl::OkStatus();
  });
  flush();
  absl::MutexLock lock(&mu_);
  FoldLocked();
  if (s.ok() || s == stop) {
    if (next == end && next == begin_) {
      // Prepend what was built; the index keeps the newest `capacity_`.
      const size_t room = capacity_ > entries_.size() ? capacity_ - entries_.size() : 0;
      const size_t skip = built_.size() > room ? built_.size() - room : 0;
      int64_t max_time = std::numeric_limits<int64_t>::min();
      std::deque<Entry> merged(built_.begin() + static_cast<std::ptrdiff_t>(skip), built_.end());
      for (Entry& e : entries_) {
        merged.push_back(e);
      }
      for (Entry& e : merged) e.max_time_us = max_time = std::max(max_time, e.time_us);
      begin_ = from + skip;
      entries_.swap(merged);
    }
  } else {
    base::GetLogger("audit")->warn("audit: the index covers only events from {} on ({}); older ones are scanned",
                                   begin_, s.message());
  }
  built_.clear();
  built_.shrink_to_fit();
  ready_ = true;
}

}  // namespace gangkeeper::audit
