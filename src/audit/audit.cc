// gangkeeper audit: the audit log (see audit.h).
#include "gangkeeper/audit/audit.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <limits>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/base/log.h"
#include "nlohmann/json.hpp"
#include "src/audit/chain.h"
#include "src/audit/event_time.h"

namespace gangkeeper::audit {
namespace {

using nlohmann::json;

json QuantitiesJson(const std::map<std::string, quantity::Quantity>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v.Format();
  return out;
}

json AssignmentJson(const broker::Assignment& a) {
  json pod_sets = json::array();
  for (const broker::PodSetAssignment& ps : a.pod_sets) {
    pod_sets.push_back({{"name", ps.name}, {"count", ps.count}, {"flavors", ps.flavors}, {"usage", QuantitiesJson(ps.usage)}});
  }
  json usage = json::object();
  for (const auto& [fr, q] : a.usage) usage[fr.flavor][fr.resource] = q.Format();
  return {{"clusterQueue", a.cluster_queue}, {"podSets", pod_sets}, {"usage", usage},
          {"borrowingLevel", a.borrowing_level}};
}

const char* ActionOf(const broker::StateChange& c) {
  using T = broker::StateChange::Type;
  switch (c.type) {
    case T::kRegistered: return "workload.pending";
    case T::kUpdated: return "workload.updated";
    case T::kRemoved: return "workload.deleted";
    case T::kAdmitted: return "workload.admitted";
    case T::kReleased: return "workload.released";
    case T::kReleaseFailed: return "workload.release_failed";
    case T::kEvicted: return c.preemptor.name.empty() ? "workload.evicted" : "workload.preempted";
    case T::kRequeued: return "workload.requeued";
    case T::kFinished: return "workload.finished";
    case T::kPoliciesChanged: return "quota.changed";
    case T::kReviewed: return "review";
  }
  return "workload.changed";
}

// The reason of a change that carries none of its own (every event has one).
std::string DefaultReason(broker::StateChange::Type t) {
  using T = broker::StateChange::Type;
  switch (t) {
    case T::kRegistered: return "Queued";
    case T::kUpdated: return "Updated";
    case T::kRemoved: return "Deleted";
    case T::kAdmitted: return "Admitted";
    case T::kReleased: return "Released";
    case T::kReleaseFailed: return "ReleaseFailed";
    case T::kEvicted: return "Evicted";
    case T::kRequeued: return "Requeued";
    case T::kFinished: return "Finished";
    case T::kPoliciesChanged: return "PoliciesChanged";
    case T::kReviewed: return "Reviewed";
  }
  return "Changed";
}

}  // namespace

std::string EncodeEvent(const Event& e, bool with_seq) {
  // Fields in DESIGN §8's order.
  nlohmann::ordered_json j = {{"time", Rfc3339Micros(e.time)}, {"actor", e.actor}};
  if (e.actor_claimed) j["actorClaimed"] = true;
  j["action"] = e.action;
  j["object"] = {{"kind", e.kind}, {"namespace", e.namespace_name}, {"name", e.name}, {"uid", e.uid}};
  j["clusterQueue"] = e.cluster_queue;
  j["reason"] = e.reason;
  nlohmann::ordered_json details =
      e.details.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(e.details, nullptr, false);
  j["details"] = details.is_discarded() ? nlohmann::ordered_json(e.details) : details;
  if (e.journal_record != 0) j["journal"] = e.journal_record;
  if (with_seq) {
    nlohmann::ordered_json numbered = {{"seq", e.seq}};
    numbered.update(j);
    j = std::move(numbered);
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<Event> DecodeEvent(absl::string_view text, uint64_t seq) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, " is not a JSON object"));
  }
  auto str = [&](const json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Event e;
  e.seq = seq;  // the record number is the truth
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", str(j, "time"), absl::UTCTimeZone(), &e.time, &err)) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, ": time: ", err));
  }
  e.actor = str(j, "actor");
  if (auto c = j.find("actorClaimed"); c != j.end() && c->is_boolean()) e.actor_claimed = c->get<bool>();
  e.action = str(j, "action");
  if (auto o = j.find("object"); o != j.end() && o->is_object()) {
    e.kind = str(*o, "kind");
    e.namespace_name = str(*o, "namespace");
    e.name = str(*o, "name");
    e.uid = str(*o, "uid");
  }
  e.cluster_queue = str(j, "clusterQueue");
  e.reason = str(j, "reason");
  if (auto d = j.find("details"); d != j.end()) e.details = d->dump();
  if (auto r = j.find("journal"); r != j.end() && r->is_number_unsigned()) e.journal_record = r->get<uint64_t>();
  return e;
}

std::vector<Event> EventsFor(const std::vector<broker::StateChange>& changes, uint64_t journal_record) {
  std::vector<Event> out;
  out.reserve(changes.size());
  for (const broker::StateChange& c : changes) {
    if (c.type == broker::StateChange::Type::kReviewed) {
      // A replica's webhook wrote the event; it is kept as it was.
      absl::StatusOr<Event> reviewed = DecodeEvent(c.message, 0);
      if (!reviewed.ok()) {
        base::GetLogger("audit")->error("audit: journal record {}: a review's event does not decode ({}); skipped",
                                        journal_record, reviewed.status().message());
        continue;
      }
      out.push_back(*std::move(reviewed));
      continue;
    }
    if (c.unconfirmed) continue;  // nothing was decided on a review alone
    Event e;
    e.time = c.time;
    e.actor = c.actor.empty() ? "gangkeeper" : c.actor;
    e.actor_claimed = !c.actor.empty() && c.actor_claimed;  // a review's userInfo, not verified
    e.action = ActionOf(c);
    e.journal_record = journal_record;
    json details = json::object();
    if (c.type == broker::StateChange::Type::kPoliciesChanged) {
      e.kind = "PolicySet";
      if (!c.message.empty()) details["change"] = c.message;  // "PUT ClusterQueue team-a"
    } else {
      // The object's own kind ("Job", "PyTorchJob", "Pod", or "PodGroup"
      // for a pod group): a Job and a PyTorchJob may share a name.
      e.kind = broker::KindName(c.key);
      e.namespace_name = c.key.namespace_name;
      e.name = c.key.name;
      e.uid = c.uid;
      e.cluster_queue = c.cluster_queue;
      if (c.workload != nullptr) {
        details["objectKind"] = workload::InfoFor(c.workload->kind).name;
        details["pods"] = c.workload->TotalPods();
        if (!c.workload->queue_name.empty()) details["localQueue"] = c.workload->queue_name;
        details["priority"] = c.workload->priority;
      }
      if (c.assignment.has_value()) {
        // Admissions hold this quota from now on; frees give it back.
        details[c.type == broker::StateChange::Type::kAdmitted || c.type == broker::StateChange::Type::kEvicted ||
                        c.type == broker::StateChange::Type::kReleased
                    ? "assignment"
                    : "freed"] = AssignmentJson(*c.assignment);
      }
      if (!c.preemptor.name.empty()) {
        details["preemptor"] = broker::KeyString(c.preemptor);
      }
      if (!c.message.empty()) details["message"] = c.message;
    }
    e.reason = c.reason.empty() ? DefaultReason(c.type) : c.reason;
    e.details = details.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

bool Matches(const Query& q, const Event& e) {
  if (q.until.has_value() && e.time > *q.until) return false;
  if (q.since.has_value() && e.time < *q.since) return false;
  return (q.namespace_name.empty() || e.namespace_name == q.namespace_name) && (q.name.empty() || e.name == q.name) &&
         (q.kind.empty() || e.kind == q.kind) && (q.action.empty() || e.action == q.action) &&
         (q.actor.empty() || e.actor == q.actor) && (q.cluster_queue.empty() || e.cluster_queue == q.cluster_queue);
}

}  // namespace

// The in-memory index of the newest events (see audit.h). Entries are
// contiguous in seq: entries_[i] is event begin_ + i. Appends hand their
// events to a small staging list under their own mutex; queries (and
// appends, when nobody queries) fold it into the index, so an append never
// waits for a query's filtering.
class AuditIndex {
 public:
  // One indexed event: 48 bytes.
  struct Entry {
    int64_t time_us = 0;
    int64_t max_time_us = 0;  // the latest time up to here: `since` is a binary search
    uint32_t offset = 0, size = 0;
    uint32_t ns = 0, name = 0, kind = 0, action = 0, actor = 0, cq = 0;
  };
  struct Hit {
    uint64_t seq;
    uint32_t offset, size;
  };

  AuditIndex(size_t capacity, uint64_t next_seq) : capacity_(capacity), begin_(next_seq) {}
  ~AuditIndex() {
    stop_.store(true);
    if (filler_.joinable()) filler_.join();
  }

  // Fills events [from, end) from the log on a thread of its own.
  void StartFill(const store::SegmentedLog* log, uint64_t from, uint64_t end) {
    if (from >= end) {
      absl::MutexLock lock(&mu_);
      ready_ = true;
      return;
    }
    filler_ = std::thread([this, log, from, end] { Fill(log, from, end); });
  }

  void Stage(uint64_t seq, const Event& e, const store::RecordLocation& at) {
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
  void TrimBelow(uint64_t first) {
    absl::MutexLock lock(&mu_);
    FoldLocked();
    while (!entries_.empty() && begin_ < first) {
      entries_.pop_front();
      ++begin_;
    }
    if (entries_.empty() && begin_ < first) begin_ = first;
  }

  // The first seq the index answers for (everything from there on).
  uint64_t Begin() {
    absl::MutexLock lock(&mu_);
    FoldLocked();
    return begin_;
  }

  // Up to `want` events matching `q` with seq >= `from`. False when the
  // index no longer reaches back to `from` (the caller scans the gap).
  bool Lookup(const Query& q, uint64_t from, size_t want, std::vector<Hit>* hits) {
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

  void Stats(AuditStats* out) {
    absl::MutexLock lock(&mu_);
    FoldLocked();
    out->indexed_events = entries_.size();
    out->index_first_seq = entries_.empty() ? 0 : begin_;
    out->index_ready = ready_;
  }

  bool ready() {
    absl::MutexLock lock(&mu_);
    return ready_;
  }

 private:
  struct Staged {
    uint64_t seq;
    int64_t time_us;
    uint64_t offset;
    uint32_t size;
    std::string ns, name, kind, action, actor, cq;
  };

  uint32_t InternLocked(const std::string& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    strings_.push_back(s);
    const auto id = static_cast<uint32_t>(strings_.size() - 1);
    ids_.emplace(strings_.back(), id);
    return id;
  }

  Entry MakeLocked(const Staged& s, int64_t prev_max) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  void FoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  void MaybeCompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  void Fill(const store::SegmentedLog* log, uint64_t from, uint64_t end) {
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

  const size_t capacity_;
  std::atomic<bool> stop_{false};
  std::thread filler_;

  absl::Mutex staging_mu_;
  std::vector<Staged> staging_ ABSL_GUARDED_BY(staging_mu_);

  absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t begin_ ABSL_GUARDED_BY(mu_);
  std::vector<Staged> held_ ABSL_GUARDED_BY(mu_);   // staged after a gap, waiting
  std::vector<Entry> built_ ABSL_GUARDED_BY(mu_);  // the background fill, oldest first
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> strings_ ABSL_GUARDED_BY(mu_);  // id -> string (stable addresses)
  absl::flat_hash_map<absl::string_view, uint32_t> ids_ ABSL_GUARDED_BY(mu_);
};

AuditLog::AuditLog(AuditOptions options, std::unique_ptr<store::SegmentedLog> log, std::unique_ptr<Chain> chain,
                   uint64_t last_journal_record)
    : options_(std::move(options)),
      log_(std::move(log)),
      chain_(std::move(chain)),
      last_journal_record_(last_journal_record) {
  if (options_.index_events == 0) return;
  const store::LogStats st = log_->stats();
  index_ = std::make_unique<AuditIndex>(options_.index_events, st.next_seq);
  const uint64_t n = st.next_seq - st.first_seq;
  index_->StartFill(log_.get(), n > options_.index_events ? st.next_seq - options_.index_events : st.first_seq,
                    st.next_seq);
}

AuditLog::~AuditLog() = default;

namespace {

store::FileSystem* FileSystemOf(const AuditOptions& o) {
  return o.fs != nullptr ? o.fs : store::DefaultFileSystem();
}

// The anchor of record `seq` read from its segment.
std::optional<Anchor> ReadAnchor(const store::SegmentedLog& log, uint64_t seq) {
  std::optional<Anchor> out;
  const absl::Status stop = absl::CancelledError("found");
  (void)log.Read(seq, [&](uint64_t at, absl::string_view payload) {
    Sealed sealed;
    absl::StatusOr<Event> e = SplitSealed(payload, &sealed) ? DecodeEvent(sealed.json, at) : absl::DataLossError("");
    if (e.ok()) out = Anchor{at, e->time, sealed.chain, sealed.has_hmac, sealed.hmac};
    return stop;
  });
  return out;
}

// The anchor file `name` in `dir`, if it holds one.
std::optional<Anchor> ReadAnchorFile(store::FileSystem* fs, const std::string& dir, const char* name) {
  absl::StatusOr<std::string> bytes = fs->Read(store::JoinPath(dir, name));
  return bytes.ok() ? LastAnchor(*bytes) : std::nullopt;
}

// An event of the audit log about itself.
Event LogEvent(absl::Time now, const char* action, const char* reason, const nlohmann::json& details) {
  Event e;
  e.time = now;
  e.actor = "gangkeeper";
  e.action = action;
  e.kind = "AuditLog";
  e.reason = reason;
  e.details = details.dump(-1, ' ', false, json::error_handler_t::replace);
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options, store::LogRecovery* recovery) {
  store::LogOptions lo;
  lo.kind = "audit";
  lo.segment_bytes = options.segment_bytes;
  lo.truncate_corruption = options.truncate_corruption;
  store::FileSystem* fs = FileSystemOf(options);
  absl::StatusOr<std::unique_ptr<store::SegmentedLog>> log = store::SegmentedLog::Open(fs, options.dir, lo, recovery);
  if (!log.ok()) return log.status();
  // The journal record of the newest broker event: read back from the last
  // segments (a broker event comes with every batch, so it is near the end).
  // The newest record's seal continues the chain.
  uint64_t last_record = 0;
  const store::LogStats st = (*log)->stats();
  Anchor last;
  last.seq = st.next_seq - 1;
  if (st.next_seq > st.first_seq) {
    const uint64_t window = 100'000;
    const uint64_t from = st.next_seq - st.first_seq > window ? st.next_seq - window : st.first_seq;
    absl::Status s = (*log)->Read(from, [&](uint64_t seq, absl::string_view payload) {
      Sealed sealed;
      const bool split = SplitSealed(payload, &sealed);
      absl::StatusOr<Event> e = DecodeEvent(split ? sealed.json : payload, seq);
      if (e.ok()) last_record = std::max(last_record, e->journal_record);
      if (seq == last.seq) {
        last = Anchor{seq, e.ok() ? e->time : absl::UnixEpoch(), sealed.chain, sealed.has_hmac, sealed.hmac};
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  } else if (std::optional<Anchor> base = ReadAnchorFile(fs, options.dir, kBaseFile);
             base.has_value() && base->seq == last.seq) {
    last = *base;  // every record went with retention: the chain goes on from BASE
  }
  // HEAD names the newest record acknowledged before: a log that ends
  // before it lost its tail, which must not go unnoticed.
  std::optional<Event> tail_missing;
  if (std::optional<Anchor> head = ReadAnchorFile(fs, options.dir, kHeadFile);
      head.has_value() && head->seq > last.seq) {
    const uint64_t missing = head->seq - last.seq;
    base::GetLogger("audit")->error(
        "audit: {} ends at record {} but its HEAD says record {} was written: {} record(s) are missing (cut off "
        "or lost); recorded as an {} event. Restore {} from a backup if you have one",
        options.dir, last.seq, head->seq, missing, kTailMissing, options.dir);
    tail_missing = LogEvent(
        (options.clock != nullptr ? *options.clock : base::RealClock()).Now(), kTailMissing, "TailMissing",
        {{"from", last.seq + 1}, {"to", head->seq}, {"count", missing}, {"headChain", Hex(head->chain)},
         {"headTime", Rfc3339Micros(head->time)}});
  }
  if (last.has_hmac) {
    // A signed log goes on signed with the same key, or verify says so.
    Hasher hasher(options.hmac_key);
    if (!hasher.keyed()) {
      base::GetLogger("audit")->warn(
          "audit: {} is HMAC-signed but no --audit-hmac-key was given: new records carry none, and gangkeeper audit "
          "verify will report them",
          options.dir);
    } else if (hasher.Mac(absl::string_view(reinterpret_cast<const char*>(last.chain.data()), last.chain.size())) !=
               last.hmac) {
      base::GetLogger("audit")->warn(
          "audit: record {} of {} was signed with another --audit-hmac-key: gangkeeper audit verify takes one key and "
          "will stop where the key changed",
          last.seq, options.dir);
    }
  }
  auto chain = std::make_unique<Chain>(fs, options.dir, options.hmac_key);
  chain->Start(last);
  auto out = std::unique_ptr<AuditLog>(new AuditLog(std::move(options), *std::move(log), std::move(chain), last_record));
  out->Retain();
  if (tail_missing.has_value()) {
    if (absl::StatusOr<uint64_t> s = out->Append({*tail_missing}); !s.ok()) return s.status();
  }
  return out;
}

absl::StatusOr<uint64_t> AuditLog::Append(const std::vector<Event>& events) {
  absl::StatusOr<uint64_t> seq = AppendRecords(events);
  if (!seq.ok()) return seq;
  bool rotated = false;
  {
    absl::MutexLock lock(&mu_);
    rotated = log_->stats().segments != retained_segments_;
  }
  if (rotated) Retain();
  return seq;
}

absl::StatusOr<uint64_t> AuditLog::AppendRecords(const std::vector<Event>& events) {
  if (events.empty()) return log_->next_seq();
  std::vector<std::string> lines;
  std::vector<absl::Time> times;
  lines.reserve(events.size());
  times.reserve(events.size());
  uint64_t record = 0;
  for (const Event& e : events) {
    lines.push_back(EncodeEvent(e, /*with_seq=*/false));
    times.push_back(e.time);
    record = std::max(record, e.journal_record);
  }
  std::vector<absl::string_view> views(lines.begin(), lines.end());
  std::vector<store::RecordLocation> where;
  Chain::Call call;
  call.times = &times;
  const store::Sealer seal = chain_->SealerFor(&call);
  absl::StatusOr<uint64_t> seq = log_->Append(views, &where, &seal);
  if (!seq.ok()) {
    absl::MutexLock lock(&mu_);
    ++failed_appends_;
    return seq.status();
  }
  chain_->Acknowledged(call.last);
  // Only the first record of an Append can start a segment.
  const bool started_segment = where.front().offset == store::kSegmentHeaderSize;
  if (started_segment) chain_->SegmentStarted(*seq, call.before);
  if (index_ != nullptr) {
    for (size_t i = 0; i < events.size(); ++i) index_->Stage(*seq + i, events[i], where[i]);
  }
  absl::MutexLock lock(&mu_);
  last_journal_record_ = std::max(last_journal_record_, record);
  if (started_segment) first_event_time_[*seq] = events.front().time;
  return *seq;
}

std::optional<absl::Time> AuditLog::FirstEventTime(uint64_t first_seq) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = first_event_time_.find(first_seq); it != first_event_time_.end()) return it->second;
  }
  // The segment's first record, read alone: its length, then the record.
  std::optional<absl::Time> out;
  for (const store::SegmentInfo& seg : log_->Segments()) {
    if (seg.first_seq != first_seq) continue;
    absl::StatusOr<std::string> header =
        FileSystemOf(options_)->ReadRange(seg.path, store::kSegmentHeaderSize, store::kRecordHeaderSize);
    if (!header.ok() || header->size() < 4) break;
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(static_cast<uint8_t>((*header)[i])) << (8 * i);
    absl::StatusOr<std::string> payload = log_->ReadRecord(
        first_seq, {first_seq, store::kSegmentHeaderSize, static_cast<uint32_t>(store::kRecordHeaderSize + length)});
    if (!payload.ok()) break;
    absl::StatusOr<Event> e = DecodeEvent(EventJson(*payload), first_seq);
    if (e.ok()) out = e->time;
  }
  if (out.has_value()) {
    absl::MutexLock lock(&mu_);
    first_event_time_[first_seq] = *out;
  }
  return out;
}

void AuditLog::Retain() {
  absl::MutexLock retain(&retain_mu_);
  // Whole segments go from the oldest (never the last): past max_bytes, and
  // while the next segment began before now - max_age.
  const std::vector<store::SegmentInfo> segments = log_->Segments();
  {
    absl::MutexLock lock(&mu_);
    retained_segments_ = segments.size();
  }
  uint64_t total = 0;
  for (const store::SegmentInfo& s : segments) total += s.bytes;
  size_t by_size = 0;
  while (by_size + 1 < segments.size() && total > options_.max_bytes) total -= segments[by_size++].bytes;
  const absl::Time now = (options_.clock != nullptr ? *options_.clock : base::RealClock()).Now();
  const bool aged = options_.max_age > absl::ZeroDuration();
  const absl::Time age_cutoff = now - options_.max_age;
  size_t drop = by_size;
  while (aged && drop + 1 < segments.size()) {
    const std::optional<absl::Time> next = FirstEventTime(segments[drop + 1].first_seq);
    if (!next.has_value() || *next >= age_cutoff) break;
    ++drop;
  }
  // Segments the size cap removes although they hold events younger than
  // min_retention (a segment's events all came before the next one's
  // first) and not older than max_age: allowed only out loud.
  auto anchor_before = [this](uint64_t first_seq) {
    std::optional<Anchor> a = chain_->Before(first_seq);
    return a.has_value() ? a : ReadAnchor(*log_, first_seq - 1);
  };
  size_t young = by_size;
  if (options_.min_retention > absl::ZeroDuration()) {
    const absl::Time floor = now - options_.min_retention;
    for (size_t i = 0; i < by_size && young == by_size; ++i) {
      const std::optional<absl::Time> next = FirstEventTime(segments[i + 1].first_seq);
      if (!next.has_value() || (*next >= floor && (!aged || *next >= age_cutoff))) young = i;
    }
  }
  if (young < by_size) {
    const uint64_t first = segments[young].first_seq;
    const uint64_t end = segments[by_size].first_seq;
    const absl::Time from = FirstEventTime(first).value_or(now);
    const std::optional<Anchor> newest = anchor_before(end);
    const absl::Time until = newest.has_value() ? newest->time : now;
    base::GetLogger("audit")->error(
        "audit: the size cap ({} MiB) removes {} segment(s) holding {} event(s) (records {} to {}, {} to {}) younger "
        "than the minimum retention of {}; recorded as an {} event. Raise --audit-max-mib or find what floods the "
        "log (gangkeeper audit --action review.denials_suppressed)",
        options_.max_bytes >> 20, by_size - young, end - first, first, end - 1, Rfc3339Micros(from),
        Rfc3339Micros(until), absl::FormatDuration(options_.min_retention), kRetentionForced);
    {
      absl::MutexLock lock(&mu_);
      ++retention_forced_;
      retention_forced_events_ += end - first;
    }
    (void)AppendRecords({LogEvent(now, kRetentionForced, "SizeCapReached",
                                  {{"segments", by_size - young},
                                   {"events", end - first},
                                   {"firstSeq", first},
                                   {"lastSeq", end - 1},
                                   {"oldest", Rfc3339Micros(from)},
                                   {"newest", Rfc3339Micros(until)},
                                   {"newestAgeSeconds", absl::ToInt64Seconds(now - until)},
                                   {"minRetention", absl::FormatDuration(options_.min_retention)},
                                   {"maxBytes", options_.max_bytes}})});
  }
  if (drop > 0) {
    // BASE first: the chain of the first record kept must stay checkable.
    const uint64_t keep = segments[drop].first_seq;
    const std::optional<Anchor> before = anchor_before(keep);
    absl::Status based = before.has_value() ? chain_->WriteBase(*before)
                                            : absl::DataLossError(absl::StrCat("record ", keep - 1, " cannot be read"));
    if (!based.ok()) {
      base::GetLogger("audit")->error("audit: {} segment(s) kept past the limits: {}/{} cannot be written ({})", drop,
                                      options_.dir, kBaseFile, based.message());
      drop = 0;
    } else {
      (void)log_->DropBefore(keep);
      if (index_ != nullptr) index_->TrimBelow(log_->stats().first_seq);
      chain_->ForgetBefore(keep);
      absl::MutexLock lock(&mu_);
      first_event_time_.erase(first_event_time_.begin(), first_event_time_.lower_bound(keep));
    }
  }
  const std::optional<absl::Time> oldest =
      segments.empty() ? std::nullopt : FirstEventTime(segments[drop].first_seq);
  absl::MutexLock lock(&mu_);
  oldest_event_ = oldest;
}

absl::Status AuditLog::Scan(const Query& q, uint64_t from, uint64_t end, size_t want,
                            std::vector<Event>* found) const {
  if (from >= end || found->size() >= want) return absl::OkStatus();
  // Cheap rejections before the JSON parse: a wanted value made of plain
  // characters must appear quoted in the record, and the time is read alone.
  std::vector<std::string> needles;
  for (const std::string* v : {&q.namespace_name, &q.name, &q.kind, &q.action, &q.actor, &q.cluster_queue}) {
    if (!v->empty() && std::all_of(v->begin(), v->end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == ':' ||
                 c == '@';
        })) {
      needles.push_back(absl::StrCat("\"", *v, "\""));
    }
  }
  const bool timed = q.since.has_value() || q.until.has_value();
  const absl::Status stop = absl::CancelledError("done");
  absl::Status s = log_->Read(from, [&](uint64_t seq, absl::string_view payload) {
    if (seq >= end) return stop;
    for (const std::string& n : needles) {
      if (!absl::StrContains(payload, n)) return absl::OkStatus();
    }
    if (timed) {
      constexpr absl::string_view kTime = "\"time\":\"";
      const size_t at = payload.find(kTime);
      const size_t close = at == absl::string_view::npos ? at : payload.find('"', at + kTime.size());
      absl::Time t;
      std::string err;
      if (close != absl::string_view::npos &&
          absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", payload.substr(at + kTime.size(), close - at - kTime.size()),
                          absl::UTCTimeZone(), &t, &err) &&
          ((q.since.has_value() && t < *q.since) || (q.until.has_value() && t > *q.until))) {
        return absl::OkStatus();
      }
    }
    absl::StatusOr<Event> e = DecodeEvent(EventJson(payload), seq);
    if (!e.ok()) return e.status();
    if (!Matches(q, *e)) return absl::OkStatus();
    found->push_back(*std::move(e));
    return found->size() >= want ? stop : absl::OkStatus();
  });
  return s == stop ? absl::OkStatus() : s;
}

absl::StatusOr<Page> AuditLog::Find(const Query& q) const {
  const size_t limit = std::clamp<size_t>(q.limit, 1, 1000);
  const size_t want = limit + 1;  // one more tells whether there is a next page
  std::vector<Event> found;
  uint64_t from = q.after + 1;
  if (index_ == nullptr) {
    if (absl::Status s = Scan(q, from, std::numeric_limits<uint64_t>::max(), want, &found); !s.ok()) return s;
  }
  // Older events are scanned, newer ones looked up; retention or the index's
  // own bound may move its start between the two, hence the rounds.
  for (int round = 0; index_ != nullptr && round < 16 && found.size() < want; ++round) {
    const uint64_t indexed_from = index_->Begin();
    if (from < indexed_from) {
      if (absl::Status s = Scan(q, from, indexed_from, want, &found); !s.ok()) return s;
      from = indexed_from;
      continue;
    }
    std::vector<AuditIndex::Hit> hits;
    if (!index_->Lookup(q, from, want - found.size(), &hits)) continue;
    if (hits.empty()) break;
    // Only the matching records are read: one pread each.
    const std::vector<store::SegmentInfo> segments = log_->Segments();
    for (const AuditIndex::Hit& h : hits) {
      auto seg = std::upper_bound(segments.begin(), segments.end(), h.seq,
                                  [](uint64_t seq, const store::SegmentInfo& si) { return seq < si.first_seq; });
      if (seg == segments.begin()) continue;  // removed by retention meanwhile
      absl::StatusOr<std::string> payload = log_->ReadRecord(h.seq, {std::prev(seg)->first_seq, h.offset, h.size});
      if (absl::IsNotFound(payload.status())) continue;
      if (!payload.ok()) return payload.status();
      absl::StatusOr<Event> e = DecodeEvent(EventJson(*payload), h.seq);
      if (!e.ok()) return e.status();
      found.push_back(*std::move(e));
    }
    break;
  }
  Page page;
  if (found.size() > limit) {
    found.resize(limit);
    page.next = found.back().seq;
  }
  page.events = std::move(found);
  return page;
}

uint64_t AuditLog::last_journal_record() const {
  absl::MutexLock lock(&mu_);
  return last_journal_record_;
}

AuditStats AuditLog::stats() const {
  AuditStats out;
  out.log = log_->stats();
  if (index_ != nullptr) index_->Stats(&out);
  absl::MutexLock lock(&mu_);
  out.last_journal_record = last_journal_record_;
  out.failed_appends = failed_appends_;
  out.retention_forced = retention_forced_;
  out.retention_forced_events = retention_forced_events_;
  out.oldest_event = oldest_event_;
  return out;
}

AuditHead AuditLog::head() const {
  const Anchor a = chain_->head();
  return {a.seq, a.time, Hex(a.chain), a.has_hmac ? Hex(a.hmac) : ""};
}

absl::StatusOr<std::string> LoadHmacKey(const std::string& path) {
  absl::StatusOr<std::string> key = store::DefaultFileSystem()->Read(path);
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the key (", key.status().message(), ")"));
  }
  if (absl::EndsWith(*key, "\n")) key->pop_back();
  if (absl::EndsWith(*key, "\r")) key->pop_back();
  if (key->size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the key has ", key->size(), " byte(s); use at least 16 random ones, e.g. openssl rand -hex 32 > ",
        path));
  }
  return key;
}

absl::Status CatchUp(const store::Journal& journal, AuditLog* audit, uint64_t* appended) {
  *appended = 0;
  const uint64_t first_kept = journal.stats().log.first_seq;
  const uint64_t last = audit->last_journal_record();
  if (last + 1 < first_kept && last != 0) {
    base::GetLogger("audit")->error(
        "audit: the events of journal records {} to {} were never written and the journal no longer has them",
        last + 1, first_kept - 1);
  }
  return journal.ReadChanges(audit->last_journal_record(),
                             [&](uint64_t record, const std::vector<broker::StateChange>& changes) {
                               std::vector<Event> events = EventsFor(changes, record);
                               if (events.empty()) return absl::OkStatus();
                               absl::StatusOr<uint64_t> s = audit->Append(events);
                               if (!s.ok()) return s.status();
                               *appended += events.size();
                               return absl::OkStatus();
                             });
}

absl::StatusOr<uint64_t> AuditedJournal::Append(const broker::DurableBatch& batch) {
  absl::StatusOr<uint64_t> record = journal_->Append(batch);
  if (!record.ok()) return record;
  absl::StatusOr<uint64_t> audited = audit_->Append(EventsFor(batch.changes, *record));
  if (!audited.ok()) {
    base::GetLogger("audit")->error("audit: events of journal record {} not written ({}); the next start writes them",
                                    *record, audited.status().message());
  }
  return record;
}

}  // namespace gangkeeper::audit
