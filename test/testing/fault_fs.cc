// gangkeeper tests: FaultFileSystem (see fault_fs.h).
#include "test/testing/fault_fs.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gangkeeper::testing {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string Normal(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

class FaultFileSystem::File final : public store::WritableFile {
 public:
  File(FaultFileSystem* fs, std::shared_ptr<Inode> inode, uint64_t generation, std::string path)
      : fs_(fs), inode_(std::move(inode)), generation_(generation), path_(std::move(path)) {}
  absl::Status Append(absl::string_view data) override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat("write ", path_, ": closed"));
    return fs_->FileAppend(inode_, generation_, path_, std::string(data));
  }
  absl::Status Sync() override {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat("fsync ", path_, ": closed"));
    return fs_->FileSync(inode_, generation_, path_);
  }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }

 private:
  FaultFileSystem* fs_;
  std::shared_ptr<Inode> inode_;
  uint64_t generation_;
  std::string path_;
  bool closed_ = false;
};

class FaultFileSystem::HeldLock final : public store::FileLock {
 public:
  HeldLock(FaultFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~HeldLock() override {
    absl::MutexLock lock(&fs_->mu_);
    fs_->locks_.erase(path_);
  }

 private:
  FaultFileSystem* fs_;
  std::string path_;
};

absl::Status FaultFileSystem::Dead() const {
  if (crashed_) return absl::UnavailableError("fault fs: the machine has crashed");
  return absl::OkStatus();
}

void FaultFileSystem::FailWrites(int n, bool disk_full) {
  absl::MutexLock lock(&mu_);
  fail_writes_ = n;
  disk_full_ = disk_full;
}

void FaultFileSystem::FailSyncs(int n) {
  absl::MutexLock lock(&mu_);
  fail_syncs_ = n;
}

void FaultFileSystem::SetShortWrites(bool on) {
  absl::MutexLock lock(&mu_);
  short_writes_ = on;
}

void FaultFileSystem::FlipByte(const std::string& path, uint64_t offset) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(Normal(path));
  if (it == live_.end() || offset >= it->second->data.size()) return;
  it->second->data[offset] = static_cast<char>(~it->second->data[offset]);
}

void FaultFileSystem::Crash(Tear tear) {
  absl::MutexLock lock(&mu_);
  if (crashed_) return;
  crashed_ = true;
  image_.clear();
  for (const auto& [path, inode] : durable_) {
    auto copy = std::make_shared<Inode>();
    copy->data = inode->data.substr(0, inode->synced);
    if (tear != Tear::kNone && inode->data.size() > inode->synced) {
      const size_t unsynced = inode->data.size() - inode->synced;
      const size_t keep = std::uniform_int_distribution<size_t>(0, unsynced)(rng_);
      copy->data.append(inode->data, inode->synced, keep);
      if (tear == Tear::kGarbage) {
        const size_t junk = std::uniform_int_distribution<size_t>(0, 64)(rng_);
        for (size_t i = 0; i < junk; ++i) copy->data.push_back(static_cast<char>(rng_() & 0xFF));
      }
    }
    copy->synced = copy->data.size();
    image_[path] = std::move(copy);
  }
}

void FaultFileSystem::Restart() {
  absl::MutexLock lock(&mu_);
  if (!crashed_) return;
  crashed_ = false;
  ++generation_;
  live_ = image_;
  durable_ = image_;
  image_.clear();
  locks_.clear();
  fail_writes_ = fail_syncs_ = 0;
  disk_full_ = short_writes_ = false;
}

bool FaultFileSystem::Exists(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return live_.count(Normal(path)) != 0;
}

std::string FaultFileSystem::Contents(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(Normal(path));
  return it == live_.end() ? std::string() : it->second->data;
}

uint64_t FaultFileSystem::syncs() const {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

uint64_t FaultFileSystem::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

absl::Status FaultFileSystem::FileAppend(const std::shared_ptr<Inode>& inode, uint64_t generation,
                                         const std::string& path, const std::string& data) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  if (generation != generation_) return absl::FailedPreconditionError("fault fs: a handle from before the crash");
  if (fail_writes_ > 0) {
    --fail_writes_;
    if (short_writes_) inode->data.append(data, 0, data.size() / 2);
    if (disk_full_) return absl::ResourceExhaustedError(absl::StrCat("write ", path, ": No space left on device"));
    return absl::InternalError(absl::StrCat("write ", path, ": Input/output error"));
  }
  ++writes_;
  inode->data.append(data);
  return absl::OkStatus();
}

absl::Status FaultFileSystem::FileSync(const std::shared_ptr<Inode>& inode, uint64_t generation,
                                       const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  if (generation != generation_) return absl::FailedPreconditionError("fault fs: a handle from before the crash");
  if (fail_syncs_ > 0) {
    --fail_syncs_;
    return absl::InternalError(absl::StrCat("fdatasync ", path, ": Input/output error"));
  }
  ++syncs_;
  inode->synced = inode->data.size();
  return absl::OkStatus();
}

absl::Status FaultFileSystem::CreateDirs(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  std::string p = Normal(dir);
  while (!p.empty() && p != "." && p != "/") {
    dirs_.insert(p);
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    p = p.substr(0, slash);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FaultFileSystem::List(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  const std::string d = Normal(dir);
  if (dirs_.count(d) == 0) return absl::NotFoundError(absl::StrCat("list ", dir, ": No such file or directory"));
  std::vector<std::string> out;
  const std::string prefix = d + "/";
  for (const auto& [path, inode] : live_) {
    if (absl::StartsWith(path, prefix) && path.find('/', prefix.size()) == std::string::npos) {
      out.push_back(path.substr(prefix.size()));
    }
  }
  return out;
}

absl::StatusOr<std::string> FaultFileSystem::Read(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  auto it = live_.find(Normal(path));
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("open ", path, ": No such file or directory"));
  return it->second->data;
}

absl::StatusOr<std::string> FaultFileSystem::ReadRange(const std::string& path, uint64_t offset, uint64_t n) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  auto it = live_.find(Normal(path));
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("open ", path, ": No such file or directory"));
  if (offset >= it->second->data.size()) return std::string();
  return it->second->data.substr(offset, n);
}

absl::StatusOr<uint64_t> FaultFileSystem::Size(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  auto it = live_.find(Normal(path));
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("stat ", path, ": No such file or directory"));
  return it->second->data.size();
}

absl::StatusOr<std::unique_ptr<store::WritableFile>> FaultFileSystem::OpenAppend(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  const std::string p = Normal(path);
  if (dirs_.count(DirOf(p)) == 0) return absl::NotFoundError(absl::StrCat("open ", path, ": no such directory"));
  auto& inode = live_[p];
  if (inode == nullptr) inode = std::make_shared<Inode>();
  return std::unique_ptr<store::WritableFile>(new File(this, inode, generation_, p));
}

absl::StatusOr<std::unique_ptr<store::WritableFile>> FaultFileSystem::Create(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  const std::string p = Normal(path);
  if (dirs_.count(DirOf(p)) == 0) return absl::NotFoundError(absl::StrCat("create ", path, ": no such directory"));
  auto inode = std::make_shared<Inode>();  // O_TRUNC on a new inode: the old bytes stay with the old name's inode
  auto it = live_.find(p);
  if (it != live_.end()) {
    // Truncating an existing file in place: the same inode, emptied (and
    // the emptiness is not durable until a sync).
    it->second->data.clear();
    it->second->synced = std::min(it->second->synced, size_t{0});
    inode = it->second;
  }
  live_[p] = inode;
  return std::unique_ptr<store::WritableFile>(new File(this, inode, generation_, p));
}

absl::Status FaultFileSystem::Truncate(const std::string& path, uint64_t size) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  auto it = live_.find(Normal(path));
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("truncate ", path, ": No such file or directory"));
  it->second->data.resize(size);
  it->second->synced = it->second->data.size();
  return absl::OkStatus();
}

absl::Status FaultFileSystem::Rename(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  auto it = live_.find(Normal(from));
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("rename ", from, ": No such file or directory"));
  live_[Normal(to)] = it->second;
  live_.erase(it);
  return absl::OkStatus();
}

absl::Status FaultFileSystem::Remove(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  if (live_.erase(Normal(path)) == 0) {
    return absl::NotFoundError(absl::StrCat("remove ", path, ": No such file or directory"));
  }
  return absl::OkStatus();
}

absl::Status FaultFileSystem::SyncDir(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  if (fail_syncs_ > 0) {
    --fail_syncs_;
    return absl::InternalError(absl::StrCat("fsync ", dir, ": Input/output error"));
  }
  ++syncs_;
  const std::string d = Normal(dir);
  for (auto it = durable_.begin(); it != durable_.end();) {
    if (DirOf(it->first) == d && live_.count(it->first) == 0) {
      it = durable_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [path, inode] : live_) {
    if (DirOf(path) == d) durable_[path] = inode;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<store::FileLock>> FaultFileSystem::Lock(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status d = Dead(); !d.ok()) return d;
  const std::string p = Normal(path);
  if (!locks_.insert(p).second) {
    return absl::FailedPreconditionError(absl::StrCat("lock ", path, ": held"));
  }
  return std::unique_ptr<store::FileLock>(new HeldLock(this, p));
}

}  // namespace gangkeeper::testing
