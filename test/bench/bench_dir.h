// gangkeeper benchmarks: a fresh directory under $TMPDIR (or /tmp) on the
// real disk, removed at scope exit.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gangkeeper/base/check.h"

namespace gangkeeper::bench {

class BenchDir {
 public:
  BenchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gangkeeper-bench-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    GK_CHECK(made != nullptr);
    path_ = made;
  }
  ~BenchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gangkeeper::bench
