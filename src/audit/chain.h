// gangkeeper audit: the hash chain over the audit records and its two
// anchor files (src/audit/FORMAT.md §3 and §5).
//
// Every version 2 record ends in a seal: the chain value (SHA-256 over the
// previous record's chain value, the record's seq and its event JSON) and,
// with a key, an HMAC-SHA256 of that value. HEAD anchors the newest
// acknowledged record (so a cut tail shows), BASE the record before the
// oldest one kept (so retention does not break the chain). Used by
// AuditLog (writing) and VerifyAuditLog (reading); private to the module.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/store/file_system.h"
#include "gangkeeper/store/log.h"

namespace gangkeeper::audit {

using Hash = std::array<uint8_t, 32>;

// The last byte of a sealed payload (FORMAT.md §3). A version 1 payload is
// bare JSON and ends in '}'.
inline constexpr uint8_t kSealChain = 0x01;      // chain value only
inline constexpr uint8_t kSealChainHmac = 0x02;  // chain value, then its HMAC
inline constexpr size_t kAnchorSize = 96;
inline constexpr char kHeadFile[] = "HEAD";
inline constexpr char kBaseFile[] = "BASE";

std::string Hex(const Hash& h);

// A record's payload split into the event JSON and its seal.
struct Sealed {
  absl::string_view json;
  bool chained = false;  // false: a version 1 record
  Hash chain{};
  bool has_hmac = false;
  Hash hmac{};
};
// False when the payload ends in neither '}' nor a whole seal.
bool SplitSealed(absl::string_view payload, Sealed* out);
// The event JSON of a payload (the payload itself when it is not sealed).
absl::string_view EventJson(absl::string_view payload);

// SHA-256 and HMAC-SHA256 (OpenSSL), contexts made once. Thread-compatible:
// one per thread that hashes.
class Hasher {
 public:
  explicit Hasher(std::string key = "");
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  bool keyed() const { return keyed_; }
  // SHA-256(prev || u64 little-endian seq || json): the chain value.
  Hash Link(const Hash& prev, uint64_t seq, absl::string_view json);
  // HMAC-SHA256(key, data); only when keyed().
  Hash Mac(absl::string_view data);

 private:
  struct Contexts;
  std::unique_ptr<Contexts> c_;
  bool keyed_ = false;
};

// A record named by its seq, its event's time and the chain value after
// it (all zero for an unchained record or "before the first record").
struct Anchor {
  uint64_t seq = 0;
  absl::Time time = absl::UnixEpoch();
  Hash chain{};
  bool has_hmac = false;
  Hash hmac{};  // over the anchor's first 60 bytes
};
// The 96 bytes of FORMAT.md §5 (with an HMAC when `hasher` is keyed).
std::string EncodeAnchor(const Anchor& a, Hasher* hasher);
// The last whole anchor with a good CRC in `bytes` (HEAD holds many, BASE
// one); nullopt when there is none. `bad` (when not null) counts the
// 96-byte slots that were not one.
std::optional<Anchor> LastAnchor(absl::string_view bytes, int* bad = nullptr);
// True when `a`'s HMAC is the one `hasher`'s key gives.
bool AnchorMacMatches(const Anchor& a, Hasher* hasher);

// The chain of one AuditLog: seals records as the log numbers them, keeps
// HEAD up to date after each acknowledged append and writes BASE before
// retention removes segments. Thread-safe.
class Chain {
 public:
  Chain(store::FileSystem* fs, std::string dir, std::string hmac_key);
  ~Chain();

  // Starts after `last` (the log's newest record, or what BASE says came
  // before an empty log) and rewrites HEAD to name it.
  void Start(const Anchor& last);

  // One Append's view of the sealing: the anchor before its first record
  // (where a segment may start) and after its last.
  struct Call {
    const std::vector<absl::Time>* times = nullptr;  // each event's time
    size_t sealed = 0;
    Anchor before, last;
  };
  // The sealer for one Append; `call` must outlive it.
  store::Sealer SealerFor(Call* call);

  // After an acknowledged append: HEAD names `last` (unless a later one
  // already did). One appender writes at a time and takes along what the
  // others acknowledged meanwhile; they do not wait. A failure to write
  // HEAD is logged, not returned: the records are durable either way.
  void Acknowledged(const Anchor& last) ABSL_LOCKS_EXCLUDED(ack_mu_, head_mu_);
  // The newest acknowledged record.
  Anchor head() const;
  // Writes BASE atomically (temp file, fsync, rename, directory fsync).
  [[nodiscard]] absl::Status WriteBase(const Anchor& before_first_kept);

  // Segments start at an Append's first record: remembers the anchor
  // before segment `first_seq`, for the BASE written when the segments
  // before it go.
  void SegmentStarted(uint64_t first_seq, const Anchor& before);
  // The anchor before segment `first_seq` when remembered.
  std::optional<Anchor> Before(uint64_t first_seq) const;
  // Forgets the anchors of segments before `first_seq` (removed).
  void ForgetBefore(uint64_t first_seq);

 private:
  // Appends `a` to HEAD, or replaces HEAD with it (at start, after a
  // failure, past kHeadRewriteBytes).
  void WriteHead(const Anchor& a, bool rewrite) ABSL_LOCKS_EXCLUDED(head_mu_);

  store::FileSystem* const fs_;
  const std::string dir_;

  absl::Mutex seal_mu_;  // taken under the log's lock, which orders the calls
  Hasher sealer_ ABSL_GUARDED_BY(seal_mu_);
  Anchor sealed_ ABSL_GUARDED_BY(seal_mu_);  // the last record sealed

  mutable absl::Mutex ack_mu_;
  Anchor acked_ ABSL_GUARDED_BY(ack_mu_);          // the newest acknowledged record
  uint64_t written_seq_ ABSL_GUARDED_BY(ack_mu_) = 0;  // the record HEAD names
  bool writing_ ABSL_GUARDED_BY(ack_mu_) = false;  // an appender is writing HEAD

  mutable absl::Mutex head_mu_;
  Hasher head_hasher_ ABSL_GUARDED_BY(head_mu_);
  std::unique_ptr<store::WritableFile> head_file_ ABSL_GUARDED_BY(head_mu_);
  uint64_t head_bytes_ ABSL_GUARDED_BY(head_mu_) = 0;
  bool head_failed_ ABSL_GUARDED_BY(head_mu_) = false;  // logged once
  std::map<uint64_t, Anchor> before_segment_ ABSL_GUARDED_BY(head_mu_);
};

}  // namespace gangkeeper::audit
