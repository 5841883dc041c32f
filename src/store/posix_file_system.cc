// gangkeeper store: the POSIX FileSystem (see file_system.h).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/store/file_system.h"

namespace gangkeeper::store {
namespace {

absl::Status Errno(absl::string_view op, absl::string_view path, int err) {
  std::string msg = absl::StrCat(op, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Append(absl::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("write ", path_, ": file is closed"));
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write", path_, errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("fsync ", path_, ": file is closed"));
    while (::fdatasync(fd_) != 0) {
      if (errno != EINTR) return Errno("fdatasync", path_, errno);
    }
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    const int r = ::close(fd_);
    fd_ = -1;
    if (r != 0 && errno != EINTR) return Errno("close", path_, errno);
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_;
};

// flock() locks belong to the open file description, so two opens in one
// process would both "succeed" on some systems: the process also keeps the
// set of paths it holds.
absl::Mutex held_mu(absl::kConstInit);
std::set<std::string>* held = nullptr;

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFileLock() override {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
    absl::MutexLock lock(&held_mu);
    held->erase(path_);
  }

 private:
  std::string path_;
  int fd_;
};

// "pid 123 on host-name": written into a lock file by its holder, for the
// message of the process that finds it held.
std::string Holder() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return absl::StrCat("pid ", ::getpid(), " on ", host);
}

// The holder a lock file names ("" when it names none), bounded and on one line.
std::string ReadHolder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  for (char& c : text) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) c = ' ';
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

class PosixFileSystem final : public FileSystem {
 public:
  absl::Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Errno("mkdir", dir, ec.value());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override {
    std::error_code ec;
    std::vector<std::string> out;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      out.push_back(it->path().filename().string());
    }
    if (ec) return Errno("list", dir, ec.value());
    return out;
  }

  absl::StatusOr<std::string> Read(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", path, errno);
    std::string out;
    char buf[1 << 16];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return Errno("read", path, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  absl::StatusOr<std::string> ReadRange(const std::string& path, uint64_t offset, uint64_t n) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", path, errno);
    std::string out;
    out.resize(static_cast<size_t>(n));
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, out.data() + got, static_cast<size_t>(n) - got, static_cast<off_t>(offset + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return Errno("read", path, err);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    ::close(fd);
    out.resize(got);
    return out;
  }

  absl::StatusOr<uint64_t> Size(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Errno("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> OpenAppend(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> Create(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  absl::Status Truncate(const std::string& path, uint64_t size) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", path, errno);
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      const int err = errno;
      ::close(fd);
      return Errno("truncate", path, err);
    }
    if (::fsync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      return Errno("fsync", path, err);
    }
    ::close(fd);
    return absl::OkStatus();
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename", absl::StrCat(from, " -> ", to), errno);
    return absl::OkStatus();
  }

  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Errno("remove", path, errno);
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open", dir, errno);
    if (::fsync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      return Errno("fsync", dir, err);
    }
    ::close(fd);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<FileLock>> Lock(const std::string& path) override {
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
    if (ec) canonical = path;
    {
      absl::MutexLock lock(&held_mu);
      if (held == nullptr) held = new std::set<std::string>();
      if (held->count(canonical) != 0) {
        return absl::FailedPreconditionError(absl::StrCat("lock ", path, ": already held by this process"));
      }
    }
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path, errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        const std::string holder = ReadHolder(fd);
        ::close(fd);
        return absl::FailedPreconditionError(
            absl::StrCat("lock ", path, ": another gangkeeper process uses this data directory",
                         holder.empty() ? "" : absl::StrCat(" (", holder, ")")));
      }
      ::close(fd);
      return Errno("lock", path, err);
    }
    // Says who holds it (informational: the flock is the lock).
    const std::string holder = Holder();
    const bool noted = ::ftruncate(fd, 0) == 0 &&
                       ::pwrite(fd, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size());
    (void)noted;  // without the note the lock holds all the same; only a message is poorer
    absl::MutexLock lock(&held_mu);
    held->insert(canonical);
    return std::unique_ptr<FileLock>(new PosixFileLock(canonical, fd));
  }
};

}  // namespace

FileSystem* DefaultFileSystem() {
  static FileSystem* fs = new PosixFileSystem();
  return fs;
}

absl::StatusOr<std::unique_ptr<FileLock>> LockDataDir(FileSystem* fs, const std::string& data_dir) {
  absl::StatusOr<std::unique_ptr<FileLock>> lock = fs->Lock(JoinPath(data_dir, kDataDirLockFile));
  if (absl::IsFailedPrecondition(lock.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat(lock.status().message(), "; stop that process or give this one its own --data-dir"));
  }
  return lock;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

}  // namespace gangkeeper::store
