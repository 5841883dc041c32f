// gangkeeper audit: VerifyAuditLog (see verify.h; bytes in FORMAT.md).
#include "gangkeeper/audit/verify.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/store/log.h"
#include "src/audit/chain.h"

namespace gangkeeper::audit {
namespace {

// A whole record with a good checksum and a seq above `after` starts
// somewhere in segment[from, end): what precedes it is damage, not a torn
// last write.
bool ValidRecordAfter(absl::string_view segment, size_t from, uint64_t after) {
  store::RawRecord r;
  for (size_t off = from; off + store::kRecordHeaderSize <= segment.size(); ++off) {
    if (store::ParseRecordAt(segment, off, &r) && r.seq > after) return true;
  }
  return false;
}

// The walk over the records, oldest first.
class Verifier {
 public:
  Verifier(const VerifyOptions& o, VerifyReport* report)
      : report_(report), hasher_(o.hmac_key) {}

  void SetAnchors(std::optional<Anchor> base, std::optional<Anchor> head) {
    base_ = std::move(base);
    head_ = std::move(head);
  }

  // Checks one segment file; false once a bad record was found.
  bool Segment(const std::string& file, uint64_t first_seq, absl::string_view data, bool last) {
    ++report_->segments;
    if (absl::Status h = store::CheckSegmentHeader(data, "audit", first_seq); !h.ok()) {
      return Bad(file, first_seq, absl::StrCat("the segment header is bad: ", h.message()));
    }
    if (next_ == 0) {
      report_->first_seq = first_seq;
      // The chain before the oldest record kept: none before record 1, else
      // what BASE says retention removed.
      link_known_ = first_seq == 1 || (base_.has_value() && base_->seq + 1 == first_seq);
      if (link_known_ && first_seq != 1) prev_ = base_->chain;
    } else if (first_seq != next_) {
      return Bad(file, next_,
                 first_seq > next_
                     ? absl::StrCat("records ", next_, " to ", first_seq - 1, " are missing: no segment holds them")
                     : absl::StrCat("the segment starts at record ", first_seq, ", which an older segment holds"));
    }
    next_ = first_seq;
    size_t off = store::kSegmentHeaderSize;
    while (off < data.size()) {
      store::RawRecord r;
      if (!store::ParseRecordAt(data, off, &r)) {
        if (last && !ValidRecordAfter(data, off + 1, next_ - 1)) {
          report_->warnings.push_back(
              {file, next_, absl::StrCat(data.size() - off, " byte(s) after record ", next_ - 1,
                                         " are a torn write (a crash; the next start cuts them)")});
          break;
        }
        return Bad(file, next_, absl::StrCat("the record at byte ", off, " is corrupt (checksum or length)"));
      }
      if (r.seq != next_) {
        return Bad(file, next_,
                   r.seq > next_ ? absl::StrCat("missing: the record at byte ", off, " is record ", r.seq, " (",
                                                r.seq - next_, " record(s) removed)")
                                 : absl::StrCat("the record at byte ", off, " is record ", r.seq,
                                                " again (repeated or reordered)"));
      }
      if (!Record(file, r.payload)) return false;
      off += r.size;
      ++next_;
    }
    if (!last && off != data.size()) {
      return Bad(file, next_, absl::StrCat(data.size() - off, " byte(s) after record ", next_ - 1,
                                           " belong to no record"));
    }
    return true;
  }

  // After the last segment: HEAD against the end of the log.
  void Finish() {
    const uint64_t last = next_ == 0 ? 0 : next_ - 1;
    report_->last_seq = last;
    if (!head_.has_value()) {
      if (report_->chained > 0) {
        report_->warnings.push_back({kHeadFile, 0, "missing or unreadable: a cut-off tail cannot be detected"});
      }
      return;
    }
    if (head_->seq > last) {
      report_->missing_tail = head_->seq - last;
      report_->warnings.push_back(
          {kHeadFile, head_->seq,
           absl::StrCat("truncated tail: ", report_->missing_tail, " record(s) after record ", last,
                        " are missing (HEAD says record ", head_->seq, " was written)")});
    }
  }

  uint64_t next() const { return next_; }

 private:
  bool Bad(const std::string& file, uint64_t seq, std::string what) {
    report_->error = VerifyProblem{file, seq, std::move(what)};
    return false;
  }

  bool Record(const std::string& file, absl::string_view payload) {
    ++report_->records;
    Sealed s;
    if (!SplitSealed(payload, &s)) return Bad(file, next_, "its seal is malformed (the record was altered)");
    if (!s.chained) {
      if (report_->chained > 0) {
        return Bad(file, next_, "has no seal although the records before it have one: its seal was removed");
      }
      if (report_->unchained++ == 0) report_->unchained_first = next_;
      report_->unchained_last = next_;
      prev_ = Hash{};  // the first sealed record after them links to zero
      link_known_ = true;
      return CheckAnchors(file, Hash{});
    }
    if (!link_known_) {
      // The oldest record kept, and BASE does not name the one before it.
      if (!base_.has_value() || base_->seq < next_) {
        return Bad(file, next_,
                   absl::StrCat("records before ", next_, " are gone and ", kBaseFile,
                                base_.has_value() ? absl::StrCat(" names record ", base_->seq, ", not ", next_ - 1)
                                                  : std::string(" is missing"),
                                ": segments were removed by something other than retention"));
      }
      report_->notes.push_back(absl::StrCat("record ", next_, "'s link to the removed records is not checked (",
                                            kBaseFile, " names the later record ", base_->seq,
                                            ": a retention pass was cut short)"));
    } else if (hasher_.Link(prev_, next_, s.json) != s.chain) {
      return Bad(file, next_,
                 "the hash chain does not match: the record was changed, or one before it was removed or reordered");
    }
    link_known_ = true;
    prev_ = s.chain;
    ++report_->chained;
    if (s.has_hmac) {
      hmac_seen_ = true;
      if (hasher_.keyed()) {
        if (hasher_.Mac(absl::string_view(reinterpret_cast<const char*>(s.chain.data()), s.chain.size())) != s.hmac) {
          return Bad(file, next_,
                     "the HMAC does not match: the record was changed and re-hashed, or it was written with another "
                     "key");
        }
        ++report_->hmac_checked;
      }
    } else {
      if (hmac_seen_) {
        return Bad(file, next_, "has no HMAC although the records before it have one: it was rewritten without the key");
      }
      ++report_->without_hmac;
    }
    return CheckAnchors(file, s.chain);
  }

  // BASE and HEAD name a record with its chain value: it must be this one's.
  bool CheckAnchors(const std::string& file, const Hash& chain) {
    for (const auto& [name, anchor] : {std::pair{kBaseFile, &base_}, std::pair{kHeadFile, &head_}}) {
      if (!anchor->has_value() || (*anchor)->seq != next_ || (*anchor)->chain == chain) continue;
      return Bad(file, next_,
                 absl::StrCat(name, " names this record with another chain value: the log was rewritten after ", name,
                              " was written"));
    }
    return true;
  }

  VerifyReport* report_;
  Hasher hasher_;
  std::optional<Anchor> base_, head_;
  uint64_t next_ = 0;  // the seq expected next; 0 before the first segment
  Hash prev_{};        // the chain value before record next_
  bool link_known_ = false;
  bool hmac_seen_ = false;
};

}  // namespace

absl::StatusOr<VerifyReport> VerifyAuditLog(const VerifyOptions& options) {
  store::FileSystem* fs = options.fs != nullptr ? options.fs : store::DefaultFileSystem();
  absl::StatusOr<std::vector<std::string>> names = fs->List(options.dir);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) {
      return absl::NotFoundError(absl::StrCat(options.dir, ": no audit log here (give the --data-dir of gangkeeper serve)"));
    }
    return names.status();
  }
  std::vector<std::pair<uint64_t, std::string>> segments;
  for (const std::string& name : *names) {
    uint64_t first = 0;
    if (name.size() == 24 && name.substr(20) == ".log" && absl::SimpleAtoi(name.substr(0, 20), &first)) {
      segments.emplace_back(first, name);
    }
  }
  std::sort(segments.begin(), segments.end());
  VerifyReport report;
  Verifier v(options, &report);
  Hasher hasher(options.hmac_key);
  std::optional<Anchor> anchors[2];
  const char* anchor_files[2] = {kBaseFile, kHeadFile};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::string> bytes = fs->Read(store::JoinPath(options.dir, anchor_files[i]));
    if (!bytes.ok()) continue;
    int bad = 0;
    anchors[i] = LastAnchor(*bytes, &bad);
    if (bad > 0 && anchors[i].has_value() && i == 1) {
      report.notes.push_back(absl::StrCat(kHeadFile, ": ", bad, " torn or damaged entr(ies) skipped"));
    }
    if (!anchors[i].has_value() || !hasher.keyed()) continue;
    if (!anchors[i]->has_hmac) {
      report.warnings.push_back({anchor_files[i], anchors[i]->seq, "has no HMAC (written without the key)"});
    } else if (!AnchorMacMatches(*anchors[i], &hasher)) {
      report.error = VerifyProblem{anchor_files[i], anchors[i]->seq,
                                   "its HMAC does not match: it was altered, or written with another key"};
      return report;
    }
  }
  v.SetAnchors(anchors[0], anchors[1]);
  for (size_t i = 0; i < segments.size(); ++i) {
    absl::StatusOr<std::string> data = fs->Read(store::JoinPath(options.dir, segments[i].second));
    if (!data.ok()) return data.status();
    if (!v.Segment(segments[i].second, segments[i].first, *data, i + 1 == segments.size())) {
      report.last_seq = v.next() == 0 ? 0 : v.next() - 1;
      return report;
    }
  }
  v.Finish();
  if (report.first_seq > 1 && report.unchained_first == report.first_seq) {
    report.notes.push_back(absl::StrCat("records before ", report.first_seq, " were removed by retention"));
  }
  if (hasher.keyed() && report.chained > 0 && report.hmac_checked == 0) {
    report.warnings.push_back({"", 0, "no record carries an HMAC: the log was written without --audit-hmac-key"});
  }
  return report;
}

}  // namespace gangkeeper::audit
