// gangkeeper store: snapshot files, written atomically (FORMAT.md §5).
//
// A snapshot is one payload (the whole broker state, encoded by its owner)
// that covers the log up to `position`: recovery loads the newest valid
// snapshot and replays the log after it. WriteSnapshot writes a temporary
// file, fsyncs it, renames it into place and fsyncs the directory, so a
// crash leaves either the old set of snapshots or the new one, never half a
// file under a snapshot name. Thread-compatible per directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/store/file_system.h"

namespace gangkeeper::store {

inline constexpr size_t kSnapshotHeaderSize = 40;

struct LoadedSnapshot {
  uint64_t position = 0;
  std::string path;
  std::string payload;
};

// "snapshot-<position, 20 digits>.snap"
std::string SnapshotFileName(uint64_t position);

[[nodiscard]] absl::Status WriteSnapshot(FileSystem* fs, const std::string& dir, absl::string_view kind,
                                         uint64_t position, absl::string_view payload);

// The positions of the snapshots in `dir`, oldest first (names only; not
// checked). An empty list when `dir` does not exist.
[[nodiscard]] absl::StatusOr<std::vector<uint64_t>> ListSnapshots(FileSystem* fs, const std::string& dir);

// The newest snapshot whose header and checksum are good, or nullopt when
// there is none. Bad ones are skipped with a line in `notes` (an older good
// one is used: the log keeps what it needs for that, see PruneSnapshots).
// Leftover temporary files are removed.
[[nodiscard]] absl::StatusOr<std::optional<LoadedSnapshot>> LoadNewestSnapshot(FileSystem* fs, const std::string& dir,
                                                                              absl::string_view kind,
                                                                              std::vector<std::string>* notes);

// Reads and checks one snapshot file.
[[nodiscard]] absl::StatusOr<LoadedSnapshot> ReadSnapshot(FileSystem* fs, const std::string& path,
                                                          absl::string_view kind);

// Removes all but the newest `keep` snapshots (keep >= 1). Returns the
// position of the oldest snapshot kept (0 when none): the log must keep
// every record after it.
[[nodiscard]] absl::StatusOr<uint64_t> PruneSnapshots(FileSystem* fs, const std::string& dir, int keep);

}  // namespace gangkeeper::store
