// gangkeeper store: SegmentedLog (see log.h; bytes in FORMAT.md §2-3).
#include "gangkeeper/store/log.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/crc32c.h"

namespace gangkeeper::store {
namespace {

constexpr char kMagic[8] = {'G', 'K', 'L', 'O', 'G', '\0', 'v', '1'};

uint32_t LoadFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

uint64_t LoadFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

std::string KindBytes(const std::string& kind) {
  std::string k = kind.substr(0, 8);
  k.resize(8, '\0');
  return k;
}

std::string EncodeHeader(const std::string& kind, uint64_t first_seq) {
  std::string h;
  h.append(kMagic, 8);
  h.append(KindBytes(kind));
  Encoder e(&h);
  e.PutFixed64(first_seq);
  e.PutFixed32(Crc32c(h));
  e.PutFixed32(0);
  return h;
}

// Appends the framed record to `out`: its payload is `payload` + `tail`.
void EncodeRecord(uint64_t seq, absl::string_view payload, absl::string_view tail, std::string* out) {
  Encoder e(out);
  e.PutFixed32(static_cast<uint32_t>(payload.size() + tail.size()));
  char seq_bytes[8];
  for (int i = 0; i < 8; ++i) seq_bytes[i] = static_cast<char>((seq >> (8 * i)) & 0xFF);
  uint32_t crc = Crc32cExtend(0, seq_bytes, 8);
  crc = Crc32cExtend(crc, payload.data(), payload.size());
  crc = Crc32cExtend(crc, tail.data(), tail.size());
  e.PutFixed32(crc);
  out->append(seq_bytes, 8);
  out->append(payload.data(), payload.size());
  out->append(tail.data(), tail.size());
}

enum class HeaderCheck { kOk, kShort, kBad };

HeaderCheck CheckHeader(absl::string_view data, const std::string& kind, uint64_t first_seq, std::string* why) {
  if (data.size() < kSegmentHeaderSize) {
    *why = absl::StrCat("the header has ", data.size(), " of ", kSegmentHeaderSize, " bytes");
    return HeaderCheck::kShort;
  }
  if (data.substr(0, 8) != absl::string_view(kMagic, 8)) {
    *why = "the header does not start with the magic bytes GKLOG\\0v1";
    return HeaderCheck::kBad;
  }
  if (LoadFixed32(data.data() + 24) != Crc32c(data.substr(0, 24))) {
    *why = "the header checksum does not match";
    return HeaderCheck::kBad;
  }
  if (data.substr(8, 8) != KindBytes(kind)) {
    std::string found(data.substr(8, 8));
    found.erase(found.find_last_not_of('\0') + 1);
    *why = absl::StrCat("the segment belongs to a '", found, "' log, not '", kind, "'");
    return HeaderCheck::kBad;
  }
  if (LoadFixed64(data.data() + 16) != first_seq) {
    *why = absl::StrCat("the header says the first record is ", LoadFixed64(data.data() + 16), ", the name says ",
                        first_seq);
    return HeaderCheck::kBad;
  }
  return HeaderCheck::kOk;
}

// The record at `off` if it is whole and its checksum matches.
struct Parsed {
  uint64_t seq = 0;
  absl::string_view payload;
  size_t size = 0;
};

bool ParseRecord(absl::string_view data, size_t off, Parsed* out) {
  if (data.size() - off < kRecordHeaderSize) return false;
  const char* p = data.data() + off;
  const uint32_t len = LoadFixed32(p);
  if (len > kMaxRecordPayload || data.size() - off - kRecordHeaderSize < len) return false;
  const uint32_t crc = LoadFixed32(p + 4);
  if (Crc32cExtend(0, p + 8, 8 + static_cast<size_t>(len)) != crc) return false;
  out->seq = LoadFixed64(p + 8);
  out->payload = data.substr(off + kRecordHeaderSize, len);
  out->size = kRecordHeaderSize + len;
  return true;
}

// True when a valid record with seq > `after` starts anywhere in
// data[from, end): what follows a bad record is data, not a torn tail.
bool ValidRecordAfter(absl::string_view data, size_t from, uint64_t after) {
  for (size_t off = from; off + kRecordHeaderSize <= data.size(); ++off) {
    Parsed r;
    if (ParseRecord(data, off, &r) && r.seq > after) return true;
  }
  return false;
}

struct Segment {
  uint64_t first_seq = 0;
  std::string path;
};

struct Writer {
  std::string bytes;
  uint64_t first_seq = 0;
  uint64_t count = 0;
  std::vector<uint32_t> sizes;  // of each record, when sealed and located
  uint64_t segment = 0;  // where bytes[0] went, set by the group's leader
  uint64_t offset = 0;
  bool done = false;
  absl::Status status;
};

// Frames `payloads` as the records w->first_seq on into w->bytes, each
// sealed by `seal` when given (and its size kept when `locate`).
void EncodeRecords(absl::Span<const absl::string_view> payloads, const Sealer* seal, bool locate, Writer* w) {
  if (seal == nullptr) {
    for (size_t i = 0; i < payloads.size(); ++i) EncodeRecord(w->first_seq + i, payloads[i], {}, &w->bytes);
    return;
  }
  std::string tail;
  for (size_t i = 0; i < payloads.size(); ++i) {
    tail.clear();
    (*seal)(w->first_seq + i, payloads[i], &tail);
    GK_CHECK(tail.size() <= kMaxSealTail);
    const size_t before = w->bytes.size();
    EncodeRecord(w->first_seq + i, payloads[i], tail, &w->bytes);
    if (locate) w->sizes.push_back(static_cast<uint32_t>(w->bytes.size() - before));
  }
}

}  // namespace

bool ParseRecordAt(absl::string_view segment, size_t offset, RawRecord* out) {
  Parsed r;
  if (offset > segment.size() || !ParseRecord(segment, offset, &r)) return false;
  *out = {r.seq, r.payload, r.size};
  return true;
}

absl::Status CheckSegmentHeader(absl::string_view segment, const std::string& kind, uint64_t first_seq) {
  std::string why;
  if (CheckHeader(segment, kind, first_seq, &why) == HeaderCheck::kOk) return absl::OkStatus();
  return absl::DataLossError(why);
}

std::string SegmentFileName(uint64_t first_seq) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020" PRIu64 ".log", first_seq);
  return buf;
}

struct SegmentedLog::Impl {
  FileSystem* fs = nullptr;
  std::string dir;
  LogOptions options;

  mutable absl::Mutex mu;
  std::vector<Segment> segments ABSL_GUARDED_BY(mu);  // oldest first; the last is written
  std::unique_ptr<WritableFile> active;                // the leader's alone while it writes
  uint64_t active_size ABSL_GUARDED_BY(mu) = 0;       // durable bytes of the last segment
  bool roll ABSL_GUARDED_BY(mu) = false;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;          // given to the next record queued
  uint64_t durable_next ABSL_GUARDED_BY(mu) = 1;      // after the last acknowledged record
  absl::Status health ABSL_GUARDED_BY(mu);
  std::deque<Writer*> writers ABSL_GUARDED_BY(mu);
  LogStats stats ABSL_GUARDED_BY(mu);

  // Starts segment `first_seq`: header written and fsynced, its name made
  // durable. Called by the leader without `mu`.
  absl::Status StartSegment(uint64_t first_seq, std::unique_ptr<WritableFile>* file, std::string* path) {
    *path = JoinPath(dir, SegmentFileName(first_seq));
    absl::StatusOr<std::unique_ptr<WritableFile>> f = fs->Create(*path);
    if (!f.ok()) return f.status();
    if (absl::Status s = (*f)->Append(EncodeHeader(options.kind, first_seq)); !s.ok()) return s;
    if (absl::Status s = (*f)->Sync(); !s.ok()) return s;
    if (absl::Status s = fs->SyncDir(dir); !s.ok()) return s;
    *file = *std::move(f);
    return absl::OkStatus();
  }

  absl::Status Recover(LogRecovery* rec);
};

absl::Status SegmentedLog::Impl::Recover(LogRecovery* rec) {
  absl::MutexLock lock(&mu);
  absl::StatusOr<std::vector<std::string>> names = fs->List(dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    uint64_t first = 0;
    if (name.size() != 24 || name.substr(20) != ".log" || !absl::SimpleAtoi(name.substr(0, 20), &first)) continue;
    segments.push_back({first, JoinPath(dir, name)});
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.first_seq < b.first_seq; });
  // Every segment but the last must have a good header.
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    absl::StatusOr<std::string> head = fs->ReadRange(segments[i].path, 0, kSegmentHeaderSize);
    if (!head.ok()) return head.status();
    std::string why;
    if (CheckHeader(*head, options.kind, segments[i].first_seq, &why) == HeaderCheck::kOk) continue;
    if (why.find("belongs to") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(segments[i].path, ": ", why));
    }
    if (!options.truncate_corruption) {
      return absl::DataLossError(absl::StrCat(
          segments[i].path, ": ", why, "; ", segments.size() - i - 1,
          " later segment(s) follow it. Restore the data directory from a backup, or start with "
          "--recover=truncate to drop this segment and everything after it"));
    }
    for (size_t j = i; j < segments.size(); ++j) {
      absl::StatusOr<uint64_t> size = fs->Size(segments[j].path);
      if (size.ok()) rec->corrupt_bytes += *size;
      if (absl::Status s = fs->Remove(segments[j].path); !s.ok()) return s;
      ++rec->removed_segments;
    }
    rec->notes.push_back(absl::StrCat("cut the log at ", segments[i].path, " (", why, ")"));
    segments.resize(i);
    if (absl::Status s = fs->SyncDir(dir); !s.ok()) return s;
    break;
  }
  // The last segment: keep its valid prefix.
  while (!segments.empty()) {
    Segment& last = segments.back();
    absl::StatusOr<std::string> data = fs->Read(last.path);
    if (!data.ok()) return data.status();
    std::string why;
    const HeaderCheck hc = CheckHeader(*data, options.kind, last.first_seq, &why);
    if (hc == HeaderCheck::kBad && why.find("belongs to") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(last.path, ": ", why));
    }
    if (hc != HeaderCheck::kOk) {
      // A segment is created, its header written and synced before any
      // record goes in: a bad header with nothing after it is a crash
      // during creation. With records after it, it is corruption.
      if (hc == HeaderCheck::kBad && ValidRecordAfter(*data, 0, 0) && !options.truncate_corruption) {
        return absl::DataLossError(absl::StrCat(
            last.path, ": ", why, " but records follow it. Restore the data directory from a backup, or start "
            "with --recover=truncate to drop this segment"));
      }
      rec->torn_tail_bytes += data->size();
      ++rec->removed_segments;
      rec->notes.push_back(absl::StrCat("removed ", last.path, ": ", why));
      if (absl::Status s = fs->Remove(last.path); !s.ok()) return s;
      if (absl::Status s = fs->SyncDir(dir); !s.ok()) return s;
      segments.pop_back();
      continue;
    }
    size_t off = kSegmentHeaderSize;
    uint64_t expect = last.first_seq;
    Parsed r;
    while (off < data->size() && ParseRecord(*data, off, &r) && r.seq == expect) {
      off += r.size;
      ++expect;
    }
    if (off < data->size()) {
      const uint64_t bad = data->size() - off;
      if (ValidRecordAfter(*data, off + 1, expect - 1)) {
        if (!options.truncate_corruption) {
          return absl::DataLossError(absl::StrCat(
              last.path, ": record ", expect, " at byte ", off,
              " is corrupt and valid records follow it. Restore the data directory from a backup, or start "
              "with --recover=truncate to drop record ", expect, " and everything after it"));
        }
        rec->corrupt_bytes += bad;
        rec->notes.push_back(absl::StrCat("cut ", last.path, " at record ", expect, " (byte ", off, "): corrupt; ",
                                          bad, " byte(s) dropped"));
      } else {
        rec->torn_tail_bytes += bad;
        rec->notes.push_back(absl::StrCat("cut a torn tail of ", bad, " byte(s) from ", last.path, " after record ",
                                          expect - 1));
      }
      if (absl::Status s = fs->Truncate(last.path, off); !s.ok()) return s;
    }
    absl::StatusOr<std::unique_ptr<WritableFile>> f = fs->OpenAppend(last.path);
    if (!f.ok()) return f.status();
    active = *std::move(f);
    active_size = off;
    next_seq = expect;
    break;
  }
  if (segments.empty()) next_seq = 1;
  durable_next = next_seq;
  return absl::OkStatus();
}

SegmentedLog::SegmentedLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SegmentedLog::~SegmentedLog() {
  if (impl_->active != nullptr) (void)impl_->active->Close();
}

absl::StatusOr<std::unique_ptr<SegmentedLog>> SegmentedLog::Open(FileSystem* fs, std::string dir, LogOptions options,
                                                                 LogRecovery* recovery) {
  if (options.kind.empty() || options.kind.size() > 8) {
    return absl::InvalidArgumentError("log: kind must have 1 to 8 characters");
  }
  if (absl::Status s = fs->CreateDirs(dir); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->fs = fs;
  impl->dir = std::move(dir);
  impl->options = std::move(options);
  LogRecovery ignored;
  if (absl::Status s = impl->Recover(recovery != nullptr ? recovery : &ignored); !s.ok()) return s;
  return std::unique_ptr<SegmentedLog>(new SegmentedLog(std::move(impl)));
}

absl::StatusOr<uint64_t> SegmentedLog::Append(absl::string_view payload) {
  return Append(absl::Span<const absl::string_view>(&payload, 1));
}

absl::StatusOr<uint64_t> SegmentedLog::Append(absl::Span<const absl::string_view> payloads,
                                              std::vector<RecordLocation>* where, const Sealer* seal) {
  Impl& m = *impl_;
  if (payloads.empty()) return absl::InvalidArgumentError("log: nothing to append");
  size_t total = 0;
  const uint64_t max_payload = kMaxRecordPayload - (seal != nullptr ? kMaxSealTail : 0);
  for (absl::string_view p : payloads) {
    if (p.size() > max_payload) {
      return absl::InvalidArgumentError(
          absl::StrCat("log: a record of ", p.size(), " bytes exceeds the limit of ", max_payload));
    }
    total += kRecordHeaderSize + p.size() + (seal != nullptr ? kMaxSealTail : 0);
  }
  Writer w;
  w.bytes.reserve(total);
  absl::MutexLock lock(&m.mu);
  if (!m.health.ok()) return m.health;
  w.first_seq = m.next_seq;
  w.count = payloads.size();
  EncodeRecords(payloads, seal, where != nullptr, &w);
  m.next_seq += payloads.size();
  m.writers.push_back(&w);
  auto my_turn = [&m, &w]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(m.mu) { return w.done || m.writers.front() == &w; };
  m.mu.Await(absl::Condition(&my_turn));
  // Every record of one Append is in one group, so in one segment, back to back.
  auto locate = [&]() {
    if (where == nullptr) return;
    where->clear();
    uint64_t off = w.offset;
    for (size_t i = 0; i < payloads.size(); ++i) {
      const auto size = w.sizes.empty() ? static_cast<uint32_t>(kRecordHeaderSize + payloads[i].size()) : w.sizes[i];
      where->push_back({w.segment, off, size});
      off += size;
    }
  };
  if (w.done) {
    if (!w.status.ok()) return w.status;
    locate();
    return w.first_seq;
  }
  // The leader: everything queued up to max_group_bytes goes in one write.
  std::vector<Writer*> group;
  uint64_t bytes = 0;
  for (Writer* q : m.writers) {
    if (!group.empty() && bytes + q->bytes.size() > m.options.max_group_bytes) break;
    group.push_back(q);
    bytes += q->bytes.size();
  }
  absl::Status status = m.health;
  const bool start_segment =
      status.ok() && (m.active == nullptr || m.roll ||
                      (m.active_size >= m.options.segment_bytes && m.active_size > kSegmentHeaderSize));
  std::string new_path;
  if (status.ok()) {
    // Where each writer's bytes go (only the leader writes, so this holds).
    uint64_t offset = start_segment ? kSegmentHeaderSize : m.active_size;
    const uint64_t segment = start_segment ? group.front()->first_seq : m.segments.back().first_seq;
    for (Writer* q : group) {
      q->segment = segment;
      q->offset = offset;
      offset += q->bytes.size();
    }
    m.mu.Unlock();
    std::unique_ptr<WritableFile> next;
    if (start_segment) status = m.StartSegment(group.front()->first_seq, &next, &new_path);
    WritableFile* file = start_segment ? next.get() : m.active.get();
    if (status.ok()) {
      if (group.size() == 1) {
        status = file->Append(group.front()->bytes);
      } else {
        std::string buf;
        buf.reserve(bytes);
        for (Writer* q : group) buf.append(q->bytes);
        status = file->Append(buf);
      }
    }
    if (status.ok()) status = file->Sync();
    m.mu.Lock();
    if (start_segment && next != nullptr) {
      if (m.active != nullptr) (void)m.active->Close();
      m.active = std::move(next);
      m.segments.push_back({group.front()->first_seq, new_path});
      m.active_size = kSegmentHeaderSize;
      m.roll = false;
    }
    if (status.ok()) {
      m.active_size += bytes;
      m.durable_next = group.back()->first_seq + group.back()->count;
      ++m.stats.groups;
      m.stats.bytes += bytes;
    } else {
      m.health = absl::Status(status.code(), absl::StrCat("the ", m.options.kind, " in ", m.dir,
                                                          " failed and accepts no more writes until restart: ",
                                                          status.message()));
      status = m.health;
    }
  }
  for (Writer* q : group) {
    m.writers.pop_front();
    q->status = status;
    q->done = true;
    if (status.ok()) {
      ++m.stats.appends;
      m.stats.records += q->count;
    }
  }
  if (!status.ok()) return status;
  locate();
  return w.first_seq;
}

absl::Status SegmentedLog::Read(uint64_t from,
                                const std::function<absl::Status(uint64_t seq, absl::string_view payload)>& f,
                                uint64_t* corrupt_seq) const {
  return ReadLocated(
      from, [&f](uint64_t seq, absl::string_view payload, const RecordLocation&) { return f(seq, payload); },
      corrupt_seq);
}

absl::StatusOr<std::string> SegmentedLog::ReadRecord(uint64_t seq, const RecordLocation& at) const {
  const Impl& m = *impl_;
  std::string path;
  {
    absl::MutexLock lock(&m.mu);
    if (seq >= m.durable_next) return absl::NotFoundError(absl::StrCat("log ", m.dir, ": no record ", seq, " yet"));
    for (const Segment& s : m.segments) {
      if (s.first_seq == at.segment) path = s.path;
    }
  }
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat("log ", m.dir, ": record ", seq, " was removed with its segment"));
  }
  absl::StatusOr<std::string> data = m.fs->ReadRange(path, at.offset, at.size);
  if (!data.ok()) return data.status();
  Parsed r;
  if (!ParseRecord(*data, 0, &r) || r.seq != seq || r.size != at.size) {
    return absl::DataLossError(
        absl::StrCat(path, ": the ", at.size, " bytes at byte ", at.offset, " are not record ", seq));
  }
  return std::string(r.payload);
}

absl::Status SegmentedLog::ReadLocated(uint64_t from, const LocatedReader& f, uint64_t* corrupt_seq) const {
  const Impl& m = *impl_;
  std::vector<Segment> segments;
  uint64_t active_size = 0;
  uint64_t end = 0;
  {
    absl::MutexLock lock(&m.mu);
    segments = m.segments;
    active_size = m.active_size;
    end = m.durable_next;
  }
  auto corrupt = [&](uint64_t seq, const std::string& why) {
    if (corrupt_seq != nullptr) *corrupt_seq = seq;
    return absl::DataLossError(why);
  };
  uint64_t expect = 0;  // the next seq; 0 until the first segment read
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = segments[i];
    const bool last = i + 1 == segments.size();
    const uint64_t seg_end = last ? end : segments[i + 1].first_seq;
    if (seg_end <= from) {
      expect = seg_end;
      continue;
    }
    if (expect != 0 && seg.first_seq != expect) {
      return corrupt(expect, absl::StrCat("log ", m.dir, ": records ", expect, " to ", seg.first_seq - 1,
                                          " are missing (no segment holds them)"));
    }
    absl::StatusOr<std::string> data =
        last ? m.fs->ReadRange(seg.path, 0, active_size) : m.fs->Read(seg.path);
    if (!data.ok()) return data.status();
    std::string why;
    if (CheckHeader(*data, m.options.kind, seg.first_seq, &why) != HeaderCheck::kOk) {
      return corrupt(seg.first_seq, absl::StrCat(seg.path, ": ", why));
    }
    size_t off = kSegmentHeaderSize;
    expect = seg.first_seq;
    while (expect < seg_end) {
      Parsed r;
      if (off >= data->size()) {
        return corrupt(expect, absl::StrCat(seg.path, ": ends before record ", expect, " (byte ", off, ")"));
      }
      if (!ParseRecord(*data, off, &r)) {
        return corrupt(expect, absl::StrCat(seg.path, ": record ", expect, " at byte ", off,
                                            " is corrupt (checksum or length)"));
      }
      if (r.seq != expect) {
        return corrupt(expect, absl::StrCat(seg.path, ": record at byte ", off, " has seq ", r.seq, ", expected ",
                                            expect));
      }
      if (r.seq >= from) {
        const RecordLocation at{seg.first_seq, off, static_cast<uint32_t>(r.size)};
        if (absl::Status s = f(r.seq, r.payload, at); !s.ok()) return s;
      }
      off += r.size;
      ++expect;
    }
    if (!last && off != data->size()) {
      return corrupt(expect, absl::StrCat(seg.path, ": ", data->size() - off, " byte(s) after record ", expect - 1,
                                          " that belong to no record"));
    }
  }
  return absl::OkStatus();
}

absl::Status SegmentedLog::Roll() {
  absl::MutexLock lock(&impl_->mu);
  if (!impl_->health.ok()) return impl_->health;
  if (impl_->active_size > kSegmentHeaderSize) impl_->roll = true;
  return absl::OkStatus();
}

absl::Status SegmentedLog::DropBefore(uint64_t seq) {
  Impl& m = *impl_;
  std::vector<std::string> remove;
  {
    absl::MutexLock lock(&m.mu);
    size_t n = 0;
    // Segment i holds [first_i, first_{i+1}); the last one is never removed.
    while (n + 1 < m.segments.size() && m.segments[n + 1].first_seq <= seq) ++n;
    for (size_t i = 0; i < n; ++i) remove.push_back(m.segments[i].path);
    m.segments.erase(m.segments.begin(), m.segments.begin() + static_cast<std::ptrdiff_t>(n));
  }
  for (const std::string& path : remove) {
    if (absl::Status s = m.fs->Remove(path); !s.ok() && !absl::IsNotFound(s)) return s;
  }
  if (!remove.empty()) return m.fs->SyncDir(m.dir);
  return absl::OkStatus();
}

absl::Status SegmentedLog::TruncateFrom(uint64_t seq) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  if (!m.writers.empty()) return absl::FailedPreconditionError("log: TruncateFrom while appending");
  if (seq >= m.durable_next) return absl::OkStatus();
  // Segments that start at or after `seq` go entirely.
  while (!m.segments.empty() && m.segments.back().first_seq >= seq) {
    if (m.active != nullptr) {
      (void)m.active->Close();
      m.active.reset();
    }
    if (absl::Status s = m.fs->Remove(m.segments.back().path); !s.ok()) return s;
    m.segments.pop_back();
  }
  if (!m.segments.empty()) {
    Segment& last = m.segments.back();
    absl::StatusOr<std::string> data = m.fs->Read(last.path);
    if (!data.ok()) return data.status();
    size_t off = kSegmentHeaderSize;
    uint64_t expect = last.first_seq;
    Parsed r;
    while (expect < seq && ParseRecord(*data, off, &r) && r.seq == expect) {
      off += r.size;
      ++expect;
    }
    if (m.active != nullptr) {
      (void)m.active->Close();
      m.active.reset();
    }
    if (absl::Status s = m.fs->Truncate(last.path, off); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<WritableFile>> f = m.fs->OpenAppend(last.path);
    if (!f.ok()) return f.status();
    m.active = *std::move(f);
    m.active_size = off;
    seq = expect;
  } else {
    m.active_size = 0;
  }
  if (absl::Status s = m.fs->SyncDir(m.dir); !s.ok()) return s;
  m.next_seq = m.durable_next = seq;
  return absl::OkStatus();
}

absl::Status SegmentedLog::StartAt(uint64_t seq) {
  Impl& m = *impl_;
  absl::MutexLock lock(&m.mu);
  if (seq <= m.durable_next) return absl::OkStatus();
  if (!m.segments.empty() || !m.writers.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("log ", m.dir, ": cannot start at record ", seq, ": it holds records up to ", m.durable_next - 1));
  }
  m.next_seq = m.durable_next = seq;
  return absl::OkStatus();
}

std::vector<SegmentInfo> SegmentedLog::Segments() const {
  std::vector<Segment> segments;
  uint64_t active_size = 0;
  {
    absl::MutexLock lock(&impl_->mu);
    segments = impl_->segments;
    active_size = impl_->active_size;
  }
  std::vector<SegmentInfo> out;
  for (size_t i = 0; i < segments.size(); ++i) {
    SegmentInfo info{segments[i].first_seq, segments[i].path, 0};
    if (i + 1 == segments.size()) {
      info.bytes = active_size;
    } else {
      absl::StatusOr<uint64_t> size = impl_->fs->Size(segments[i].path);
      info.bytes = size.ok() ? *size : 0;
    }
    out.push_back(std::move(info));
  }
  return out;
}

uint64_t SegmentedLog::next_seq() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->durable_next;
}

absl::Status SegmentedLog::health() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->health;
}

LogStats SegmentedLog::stats() const {
  absl::MutexLock lock(&impl_->mu);
  LogStats s = impl_->stats;
  s.segments = impl_->segments.size();
  s.next_seq = impl_->durable_next;
  s.first_seq = impl_->segments.empty() ? impl_->durable_next : impl_->segments.front().first_seq;
  return s;
}

const std::string& SegmentedLog::dir() const { return impl_->dir; }

}  // namespace gangkeeper::store
