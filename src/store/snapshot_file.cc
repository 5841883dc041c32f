// gangkeeper store: snapshot files (see snapshot_file.h; FORMAT.md §5).
#include "gangkeeper/store/snapshot_file.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/crc32c.h"

namespace gangkeeper::store {
namespace {

constexpr char kSnapshotMagic[8] = {'G', 'K', 'S', 'N', 'A', 'P', '\0', '1'};
constexpr absl::string_view kPrefix = "snapshot-";
constexpr absl::string_view kSuffix = ".snap";
constexpr absl::string_view kTempSuffix = ".snap.tmp";

std::string SnapshotKindBytes(absl::string_view kind) {
  std::string k(kind.substr(0, 8));
  k.resize(8, '\0');
  return k;
}

bool ParseName(absl::string_view name, uint64_t* position) {
  if (!absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) return false;
  absl::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return digits.size() == 20 && absl::SimpleAtoi(digits, position);
}

}  // namespace

std::string SnapshotFileName(uint64_t position) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "snapshot-%020" PRIu64 ".snap", position);
  return buf;
}

absl::Status WriteSnapshot(FileSystem* fs, const std::string& dir, absl::string_view kind, uint64_t position,
                           absl::string_view payload) {
  if (absl::Status s = fs->CreateDirs(dir); !s.ok()) return s;
  std::string header;
  header.append(kSnapshotMagic, 8);
  header.append(SnapshotKindBytes(kind));
  Encoder e(&header);
  e.PutFixed64(position);
  e.PutFixed64(payload.size());
  e.PutFixed32(Crc32c(payload));
  e.PutFixed32(Crc32c(header));
  const std::string final_path = JoinPath(dir, SnapshotFileName(position));
  const std::string temp_path = absl::StrCat(final_path, ".tmp");
  absl::StatusOr<std::unique_ptr<WritableFile>> f = fs->Create(temp_path);
  if (!f.ok()) return f.status();
  absl::Status s = (*f)->Append(header);
  if (s.ok()) s = (*f)->Append(payload);
  if (s.ok()) s = (*f)->Sync();
  if (absl::Status c = (*f)->Close(); s.ok()) s = c;
  if (s.ok()) s = fs->Rename(temp_path, final_path);
  if (s.ok()) s = fs->SyncDir(dir);
  if (!s.ok()) {
    (void)fs->Remove(temp_path);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> ListSnapshots(FileSystem* fs, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = fs->List(dir);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) return std::vector<uint64_t>{};
    return names.status();
  }
  std::vector<uint64_t> out;
  for (const std::string& n : *names) {
    uint64_t p = 0;
    if (ParseName(n, &p)) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<LoadedSnapshot> ReadSnapshot(FileSystem* fs, const std::string& path, absl::string_view kind) {
  absl::StatusOr<std::string> data = fs->Read(path);
  if (!data.ok()) return data.status();
  auto bad = [&](absl::string_view why) { return absl::DataLossError(absl::StrCat(path, ": ", why)); };
  if (data->size() < kSnapshotHeaderSize) {
    return bad(absl::StrCat("has ", data->size(), " bytes, less than its ", kSnapshotHeaderSize, "-byte header"));
  }
  if (absl::string_view(*data).substr(0, 8) != absl::string_view(kSnapshotMagic, 8)) {
    return bad("does not start with the magic bytes GKSNAP\\0 1");
  }
  Decoder d(absl::string_view(*data).substr(16, 24), path);
  uint64_t position = 0;
  uint64_t length = 0;
  uint32_t crc = 0;
  uint32_t header_crc = 0;
  d.GetFixed64(&position);
  d.GetFixed64(&length);
  d.GetFixed32(&crc);
  d.GetFixed32(&header_crc);
  if (header_crc != Crc32c(absl::string_view(*data).substr(0, 36))) return bad("the header checksum does not match");
  if (absl::string_view(*data).substr(8, 8) != SnapshotKindBytes(kind)) {
    return bad(absl::StrCat("is not a '", kind, "' snapshot"));
  }
  if (data->size() - kSnapshotHeaderSize != length) {
    return bad(absl::StrCat("the header says ", length, " payload bytes, the file has ",
                            data->size() - kSnapshotHeaderSize));
  }
  LoadedSnapshot out;
  out.position = position;
  out.path = path;
  out.payload = data->substr(kSnapshotHeaderSize);
  if (Crc32c(out.payload) != crc) return bad("the payload checksum does not match");
  return out;
}

absl::StatusOr<std::optional<LoadedSnapshot>> LoadNewestSnapshot(FileSystem* fs, const std::string& dir,
                                                                absl::string_view kind,
                                                                std::vector<std::string>* notes) {
  absl::StatusOr<std::vector<std::string>> names = fs->List(dir);
  if (!names.ok()) {
    if (absl::IsNotFound(names.status())) return std::optional<LoadedSnapshot>();
    return names.status();
  }
  for (const std::string& n : *names) {
    if (absl::EndsWith(n, kTempSuffix)) {
      if (absl::Status s = fs->Remove(JoinPath(dir, n)); !s.ok()) return s;
      if (notes != nullptr) notes->push_back(absl::StrCat("removed the unfinished snapshot ", JoinPath(dir, n)));
    }
  }
  absl::StatusOr<std::vector<uint64_t>> positions = ListSnapshots(fs, dir);
  if (!positions.ok()) return positions.status();
  for (auto it = positions->rbegin(); it != positions->rend(); ++it) {
    absl::StatusOr<LoadedSnapshot> s = ReadSnapshot(fs, JoinPath(dir, SnapshotFileName(*it)), kind);
    if (s.ok()) {
      if (s->position != *it) {
        if (notes != nullptr) {
          notes->push_back(absl::StrCat("skipped ", s->path, ": its header says position ", s->position));
        }
        continue;
      }
      return std::optional<LoadedSnapshot>(*std::move(s));
    }
    if (!absl::IsDataLoss(s.status())) return s.status();
    if (notes != nullptr) notes->push_back(absl::StrCat("skipped a bad snapshot: ", s.status().message()));
  }
  return std::optional<LoadedSnapshot>();
}

absl::StatusOr<uint64_t> PruneSnapshots(FileSystem* fs, const std::string& dir, int keep) {
  if (keep < 1) keep = 1;
  absl::StatusOr<std::vector<uint64_t>> positions = ListSnapshots(fs, dir);
  if (!positions.ok()) return positions.status();
  if (positions->empty()) return uint64_t{0};
  const size_t n = positions->size();
  const size_t drop = n > static_cast<size_t>(keep) ? n - static_cast<size_t>(keep) : 0;
  for (size_t i = 0; i < drop; ++i) {
    if (absl::Status s = fs->Remove(JoinPath(dir, SnapshotFileName((*positions)[i]))); !s.ok() && !absl::IsNotFound(s)) {
      return s;
    }
  }
  if (drop > 0) {
    if (absl::Status s = fs->SyncDir(dir); !s.ok()) return s;
  }
  return (*positions)[drop];
}

}  // namespace gangkeeper::store
