#include "gangkeeper/store/snapshot_file.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/fault_fs.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::store {
namespace {

using ::gangkeeper::testing::FaultFileSystem;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kSnapshotDir[] = "/data/snapshots";

std::string PathOf(uint64_t position) { return absl::StrCat(kSnapshotDir, "/", SnapshotFileName(position)); }

TEST(SnapshotFileTest, WritesAndLoadsTheNewest) {
  ::gangkeeper::testing::TempDir tmp;
  const std::string dir = tmp.File("snapshots");
  ASSERT_THAT(WriteSnapshot(DefaultFileSystem(), dir, "broker", 10, "state at 10"), IsOk());
  ASSERT_THAT(WriteSnapshot(DefaultFileSystem(), dir, "broker", 25, "state at 25"), IsOk());
  std::vector<std::string> notes;
  auto loaded = LoadNewestSnapshot(DefaultFileSystem(), dir, "broker", &notes);
  ASSERT_THAT(loaded, IsOk());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->position, 25u);
  EXPECT_EQ((*loaded)->payload, "state at 25");
  EXPECT_TRUE(notes.empty());
}

TEST(SnapshotFileTest, NoneIsNotAnError) {
  FaultFileSystem fs;
  auto loaded = LoadNewestSnapshot(&fs, kSnapshotDir, "broker", nullptr);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_FALSE(loaded->has_value());
}

TEST(SnapshotFileTest, ABadNewestSnapshotFallsBackToTheOlderOne) {
  FaultFileSystem fs;
  ASSERT_THAT(WriteSnapshot(&fs, kSnapshotDir, "broker", 10, "older"), IsOk());
  ASSERT_THAT(WriteSnapshot(&fs, kSnapshotDir, "broker", 20, "newer"), IsOk());
  fs.FlipByte(PathOf(20), kSnapshotHeaderSize + 2);
  std::vector<std::string> notes;
  auto loaded = LoadNewestSnapshot(&fs, kSnapshotDir, "broker", &notes);
  ASSERT_THAT(loaded, IsOk());
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->position, 10u);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0], HasSubstr("payload checksum"));
  EXPECT_THAT(ReadSnapshot(&fs, PathOf(20), "broker"), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(SnapshotFileTest, RejectsTruncatedFilesAndOtherKinds) {
  FaultFileSystem fs;
  ASSERT_THAT(WriteSnapshot(&fs, kSnapshotDir, "broker", 5, "payload"), IsOk());
  EXPECT_THAT(ReadSnapshot(&fs, PathOf(5), "audit"), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_THAT(fs.Truncate(PathOf(5), kSnapshotHeaderSize + 3), IsOk());
  auto cut = ReadSnapshot(&fs, PathOf(5), "broker");
  EXPECT_THAT(cut, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("the file has 3"));
}

TEST(SnapshotFileTest, ACrashWhileWritingLeavesTheOldSnapshot) {
  for (auto tear : {FaultFileSystem::Tear::kNone, FaultFileSystem::Tear::kPrefix, FaultFileSystem::Tear::kGarbage}) {
    FaultFileSystem fs(static_cast<uint64_t>(tear) + 3);
    ASSERT_THAT(WriteSnapshot(&fs, kSnapshotDir, "broker", 10, "old state"), IsOk());
    // The new one is written but its directory entry is not yet durable
    // (as if the crash came between rename and the directory fsync).
    ASSERT_THAT(fs.CreateDirs(kSnapshotDir), IsOk());
    {
      auto f = fs.Create(PathOf(20) + ".tmp");
      ASSERT_THAT(f, IsOk());
      ASSERT_THAT((*f)->Append("partial"), IsOk());
    }
    ASSERT_THAT(fs.Rename(PathOf(20) + ".tmp", PathOf(20)), IsOk());
    fs.Crash(tear);
    fs.Restart();
    std::vector<std::string> notes;
    auto loaded = LoadNewestSnapshot(&fs, kSnapshotDir, "broker", &notes);
    ASSERT_THAT(loaded, IsOk());
    ASSERT_TRUE(loaded->has_value());
    EXPECT_EQ((*loaded)->position, 10u);
    EXPECT_EQ((*loaded)->payload, "old state");
  }
}

TEST(SnapshotFileTest, LeftoverTemporaryFilesAreRemoved) {
  FaultFileSystem fs;
  ASSERT_THAT(fs.CreateDirs(kSnapshotDir), IsOk());
  {
    auto f = fs.Create(PathOf(7) + ".tmp");
    ASSERT_THAT(f, IsOk());
  }
  std::vector<std::string> notes;
  ASSERT_THAT(LoadNewestSnapshot(&fs, kSnapshotDir, "broker", &notes), IsOk());
  EXPECT_FALSE(fs.Exists(PathOf(7) + ".tmp"));
  ASSERT_EQ(notes.size(), 1u);
}

TEST(SnapshotFileTest, PruneKeepsTheNewestAndReportsTheOldestKept) {
  FaultFileSystem fs;
  for (uint64_t p : {5, 10, 15, 20}) ASSERT_THAT(WriteSnapshot(&fs, kSnapshotDir, "broker", p, "x"), IsOk());
  auto oldest = PruneSnapshots(&fs, kSnapshotDir, 2);
  ASSERT_THAT(oldest, IsOk());
  EXPECT_EQ(*oldest, 15u);
  auto left = ListSnapshots(&fs, kSnapshotDir);
  ASSERT_THAT(left, IsOk());
  EXPECT_EQ(*left, (std::vector<uint64_t>{15, 20}));
}

}  // namespace
}  // namespace gangkeeper::store
