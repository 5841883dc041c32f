// gangkeeper audit: AuditLog::Find: newer events from the index, older
// ones by scanning their segments (see audit.h).
#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "src/audit/chain.h"
#include "src/audit/index.h"

namespace gangkeeper::audit {
namespace {

bool Matches(const Query& q, const Event& e) {
  if (q.until.has_value() && e.time > *q.until) return false;
  if (q.since.has_value() && e.time < *q.since) return false;
  return (q.namespace_name.empty() || e.namespace_name == q.namespace_name) && (q.name.empty() || e.name == q.name) &&
         (q.kind.empty() || e.kind == q.kind) && (q.action.empty() || e.action == q.action) &&
         (q.actor.empty() || e.actor == q.actor) && (q.cluster_queue.empty() || e.cluster_queue == q.cluster_queue);
}

}  // namespace

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
      if (close != absl::string_view::npos &&
          base::ParseRfc3339(payload.substr(at + kTime.size(), close - at - kTime.size()), &t) &&
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
  AwaitSettled();
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

}  // namespace gangkeeper::audit
