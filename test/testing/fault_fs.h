// gangkeeper tests: an in-memory store::FileSystem that can fail like a
// disk does.
//
// Every file keeps what was written and how much of it was synced; every
// directory keeps its names as the process sees them and as they are on
// "disk" (made durable by SyncDir). Crash() is a power cut at that instant:
// from then on every call fails until Restart(), which leaves only what was
// durable: synced bytes of durably named files, optionally followed by a
// random part of the unsynced bytes (a torn write) or by garbage. Faults can
// also be armed: fail the next writes or syncs, a full disk, a flipped byte.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/store/file_system.h"

namespace gangkeeper::testing {

class FaultFileSystem final : public store::FileSystem {
 public:
  enum class Tear {
    kNone,     // only synced bytes survive
    kPrefix,   // synced bytes, then a random prefix of the unsynced ones
    kGarbage,  // the same, then up to 64 random bytes
  };

  explicit FaultFileSystem(uint64_t seed = 1) : rng_(seed) {}

  // --- Faults ---
  // The next `n` Append calls fail (with ENOSPC-like ResourceExhausted when
  // `disk_full`, else an I/O error); nothing is written.
  void FailWrites(int n, bool disk_full = false);
  // The next `n` Sync calls fail; the bytes stay unsynced.
  void FailSyncs(int n);
  // Appends that fail write half their bytes first (a short write).
  void SetShortWrites(bool on);
  // Flips every bit of byte `offset` of `path` (durable as it is).
  void FlipByte(const std::string& path, uint64_t offset);
  // Power cut: see above.
  void Crash(Tear tear = Tear::kNone);
  // Back after a crash (no-op without one).
  void Restart();

  // --- Inspection ---
  bool Exists(const std::string& path);
  std::string Contents(const std::string& path);
  uint64_t syncs() const;
  uint64_t writes() const;

  // --- store::FileSystem ---
  absl::Status CreateDirs(const std::string& dir) override;
  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override;
  absl::StatusOr<std::string> Read(const std::string& path) override;
  absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset, uint64_t n) override;
  absl::StatusOr<uint64_t> Size(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<store::WritableFile>> OpenAppend(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<store::WritableFile>> Create(const std::string& path) override;
  absl::Status Truncate(const std::string& path, uint64_t size) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Remove(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::StatusOr<std::unique_ptr<store::FileLock>> Lock(const std::string& path) override;

  struct Inode {
    std::string data;
    size_t synced = 0;
  };

 private:
  class File;
  class HeldLock;
  friend class File;
  friend class HeldLock;

  absl::Status Dead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FileAppend(const std::shared_ptr<Inode>& inode, uint64_t generation, const std::string& path,
                          const std::string& data);
  absl::Status FileSync(const std::shared_ptr<Inode>& inode, uint64_t generation, const std::string& path);

  mutable absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dirs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Inode>> live_ ABSL_GUARDED_BY(mu_);     // path -> file
  std::map<std::string, std::shared_ptr<Inode>> durable_ ABSL_GUARDED_BY(mu_);  // names as on disk
  std::set<std::string> locks_ ABSL_GUARDED_BY(mu_);
  bool crashed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool disk_full_ ABSL_GUARDED_BY(mu_) = false;
  int fail_syncs_ ABSL_GUARDED_BY(mu_) = 0;
  bool short_writes_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<Inode>> image_ ABSL_GUARDED_BY(mu_);  // what Restart brings back
};

}  // namespace gangkeeper::testing
