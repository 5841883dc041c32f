// gangkeeper fuzzing: writes a seed set (seeds.h) into a corpus directory.
// Usage: gangkeeper_fuzz_seed_tool SET SOURCE_DIR OUT_DIR
// Existing files of the same name are overwritten; others are left alone,
// so the corpus libFuzzer grew survives. Exit 0 on success, 1 on a fixture
// or file error, 2 on usage errors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/fuzz/seeds.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s reviews|objects|manifests|none SOURCE_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::vector<gangkeeper::fuzz::Seed>> seeds = gangkeeper::fuzz::BuildSeeds(argv[1], argv[2]);
  if (!seeds.ok()) {
    std::fprintf(stderr, "seeds: %s\n", seeds.status().ToString().c_str());
    return seeds.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::filesystem::path out_dir = argv[3];
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "seeds: cannot create %s: %s\n", out_dir.c_str(), ec.message().c_str());
    return 1;
  }
  for (const gangkeeper::fuzz::Seed& seed : *seeds) {
    std::ofstream out(out_dir / seed.name, std::ios::binary | std::ios::trunc);
    out << seed.data;
    if (!out) {
      std::fprintf(stderr, "seeds: cannot write %s\n", (out_dir / seed.name).c_str());
      return 1;
    }
  }
  std::printf("%zu %s seeds in %s\n", seeds->size(), argv[1], out_dir.c_str());
  return 0;
}
