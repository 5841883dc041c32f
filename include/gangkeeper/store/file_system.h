// gangkeeper store: the file operations the store needs, behind an
// interface so that tests can inject faults (lose what was not synced,
// tear a write, flip a byte, fail a write or an fsync).
//
// DefaultFileSystem() is POSIX: Sync is fdatasync, SyncDir fsyncs the
// directory (so that a created, renamed or removed name is durable), Lock is
// an flock on a file that stays held while the FileLock lives. Every error
// names the path and the system's reason. Implementations are thread-safe;
// one WritableFile is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::store {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends at the end of the file (not durable until Sync).
  [[nodiscard]] virtual absl::Status Append(absl::string_view data) = 0;
  // Everything appended so far is durable when this returns OK.
  [[nodiscard]] virtual absl::Status Sync() = 0;
  [[nodiscard]] virtual absl::Status Close() = 0;
};

// Held while it lives.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates `dir` and its parents; OK when it exists.
  [[nodiscard]] virtual absl::Status CreateDirs(const std::string& dir) = 0;
  // The names (not paths) in `dir`, unsorted. NotFound when it is missing.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> List(const std::string& dir) = 0;
  [[nodiscard]] virtual absl::StatusOr<std::string> Read(const std::string& path) = 0;
  // Up to `n` bytes from `offset` (fewer at the end of the file).
  [[nodiscard]] virtual absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset,
                                                              uint64_t n) = 0;
  [[nodiscard]] virtual absl::StatusOr<uint64_t> Size(const std::string& path) = 0;
  // Opens for appending; creates an empty file when missing (the name is
  // durable only after SyncDir of its directory).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<WritableFile>> OpenAppend(const std::string& path) = 0;
  // Creates or empties `path` and opens it for appending.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path) = 0;
  // Cuts `path` to `size` bytes and makes that durable.
  [[nodiscard]] virtual absl::Status Truncate(const std::string& path, uint64_t size) = 0;
  // Atomically replaces `to` (durable after SyncDir).
  [[nodiscard]] virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  [[nodiscard]] virtual absl::Status Remove(const std::string& path) = 0;
  [[nodiscard]] virtual absl::Status SyncDir(const std::string& dir) = 0;
  // An exclusive lock on `path` (created if needed). FailedPrecondition when
  // another process (or another lock in this one) holds it; the POSIX
  // implementation writes "pid N on HOST" into the file while it holds it
  // and names that holder in the message.
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<FileLock>> Lock(const std::string& path) = 0;
};

// The process-wide POSIX file system. Never null; not owned.
FileSystem* DefaultFileSystem();

// The file whose lock keeps a data directory to one gangkeeper (FORMAT.md §1).
inline constexpr absl::string_view kDataDirLockFile = "LOCK";

// Locks `data_dir` for this process, in every store mode (the journal's
// state, or with etcd the replica's audit log). FailedPrecondition when
// another process holds it, naming the holder when known.
[[nodiscard]] absl::StatusOr<std::unique_ptr<FileLock>> LockDataDir(FileSystem* fs, const std::string& data_dir);

// "dir/name" (dir may end with '/').
std::string JoinPath(absl::string_view dir, absl::string_view name);

}  // namespace gangkeeper::store
