#include "gangkeeper/store/log.h"

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
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

constexpr char kDir[] = "/data/journal";

LogOptions Options(uint64_t segment_bytes = 64ull << 20) {
  LogOptions o;
  o.kind = "journal";
  o.segment_bytes = segment_bytes;
  return o;
}

// Every record of `log` from `from`, by seq.
std::map<uint64_t, std::string> ReadAll(const SegmentedLog& log, uint64_t from = 1) {
  std::map<uint64_t, std::string> out;
  absl::Status s = log.Read(from, [&](uint64_t seq, absl::string_view p) {
    out[seq] = std::string(p);
    return absl::OkStatus();
  });
  EXPECT_THAT(s, IsOk());
  return out;
}

std::unique_ptr<SegmentedLog> MustOpen(FileSystem* fs, LogOptions o = Options(), LogRecovery* rec = nullptr) {
  absl::StatusOr<std::unique_ptr<SegmentedLog>> log = SegmentedLog::Open(fs, kDir, o, rec);
  EXPECT_THAT(log, IsOk());
  return log.ok() ? *std::move(log) : nullptr;
}

std::string SegmentPath(uint64_t first) { return absl::StrCat(kDir, "/", SegmentFileName(first)); }

TEST(SegmentedLogTest, AppendsAreNumberedFromOneAndSurviveReopen) {
  ::gangkeeper::testing::TempDir tmp;
  const std::string dir = tmp.File("journal");
  {
    auto log = SegmentedLog::Open(DefaultFileSystem(), dir, Options(), nullptr);
    ASSERT_THAT(log, IsOk());
    EXPECT_EQ(*(*log)->Append("first"), 1u);
    std::vector<absl::string_view> two = {"second", "third"};
    EXPECT_EQ(*(*log)->Append(two), 2u);
    EXPECT_EQ((*log)->next_seq(), 4u);
  }
  auto log = SegmentedLog::Open(DefaultFileSystem(), dir, Options(), nullptr);
  ASSERT_THAT(log, IsOk());
  EXPECT_EQ((*log)->next_seq(), 4u);
  EXPECT_EQ(*(*log)->Append("fourth"), 4u);
  std::map<uint64_t, std::string> want = {{1, "first"}, {2, "second"}, {3, "third"}, {4, "fourth"}};
  EXPECT_EQ(ReadAll(**log), want);
  // Reading from the middle.
  EXPECT_EQ(ReadAll(**log, 3).size(), 2u);
}

TEST(SegmentedLogTest, RejectsEmptyBatchesOversizedRecordsAndForeignLogs) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  EXPECT_THAT(log->Append(absl::Span<const absl::string_view>()), StatusIs(absl::StatusCode::kInvalidArgument));
  std::string huge(kMaxRecordPayload + 1, 'x');
  EXPECT_THAT(log->Append(huge), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_THAT(log->Append("a"), IsOk());
  log.reset();
  LogOptions audit = Options();
  audit.kind = "audit";
  auto other = SegmentedLog::Open(&fs, kDir, audit, nullptr);
  EXPECT_THAT(other, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("'journal' log, not 'audit'"));
}

TEST(SegmentedLogTest, RotatesSegmentsAndDropsThoseASnapshotCovers) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs, Options(/*segment_bytes=*/200));
  for (int i = 1; i <= 50; ++i) ASSERT_THAT(log->Append(absl::StrCat("record-", i)), IsOk());
  const LogStats before = log->stats();
  EXPECT_GT(before.segments, 3u);
  EXPECT_EQ(ReadAll(*log).size(), 50u);
  ASSERT_THAT(log->DropBefore(30), IsOk());
  const LogStats after = log->stats();
  EXPECT_LT(after.segments, before.segments);
  EXPECT_LE(after.first_seq, 30u);  // record 30 is still there
  EXPECT_GT(after.first_seq, 1u);
  std::map<uint64_t, std::string> rest = ReadAll(*log, 30);
  ASSERT_EQ(rest.size(), 21u);
  EXPECT_EQ(rest.at(30), "record-30");
  // Reading from a dropped record starts at what is kept.
  EXPECT_EQ(ReadAll(*log, 1).begin()->first, after.first_seq);
  log.reset();
  log = MustOpen(&fs, Options(200));
  EXPECT_EQ(log->next_seq(), 51u);
  EXPECT_EQ(ReadAll(*log, 30).size(), 21u);
}

TEST(SegmentedLogTest, RollStartsANewSegmentAtTheNextAppend) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  ASSERT_THAT(log->Append("a"), IsOk());
  ASSERT_THAT(log->Roll(), IsOk());
  ASSERT_THAT(log->Append("b"), IsOk());
  EXPECT_TRUE(fs.Exists(SegmentPath(1)));
  EXPECT_TRUE(fs.Exists(SegmentPath(2)));
  ASSERT_THAT(log->DropBefore(2), IsOk());
  EXPECT_FALSE(fs.Exists(SegmentPath(1)));
  EXPECT_EQ(ReadAll(*log), (std::map<uint64_t, std::string>{{2, "b"}}));
}

TEST(SegmentedLogTest, ConcurrentWritersShareFsyncsAndEveryAppendIsReadBack) {
  ::gangkeeper::testing::TempDir tmp;
  auto opened = SegmentedLog::Open(DefaultFileSystem(), tmp.File("j"), Options(1 << 16), nullptr);
  ASSERT_THAT(opened, IsOk());
  SegmentedLog& log = **opened;
  constexpr int kThreads = 32;
  constexpr int kPerThread = 40;
  std::mutex mu;
  std::map<uint64_t, std::string> acked;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string payload = absl::StrCat("writer ", t, " record ", i);
        absl::StatusOr<uint64_t> seq = log.Append(payload);
        ASSERT_THAT(seq, IsOk());
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_TRUE(acked.emplace(*seq, payload).second) << "seq " << *seq << " given twice";
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(acked.size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(ReadAll(log), acked);
  const LogStats stats = log.stats();
  EXPECT_EQ(stats.appends, uint64_t{kThreads * kPerThread});
  EXPECT_LT(stats.groups, stats.appends) << "no fsync was shared";
}

// The fault-injection core: writers append concurrently, the machine
// crashes at a random moment (tearing or garbling unsynced bytes), and on
// restart every acknowledged append is there, whole, in order; nothing else
// is half there.
TEST(SegmentedLogTest, EveryAcknowledgedAppendSurvivesACrashAtAnyMoment) {
  for (int round = 0; round < 24; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    FaultFileSystem fs(/*seed=*/round);
    const auto tear = static_cast<FaultFileSystem::Tear>(round % 3);
    std::map<uint64_t, std::string> acked;
    std::set<std::string> attempted;
    uint64_t acked_before = 0;
    for (int life = 0; life < 3; ++life) {
      auto log = MustOpen(&fs, Options(/*segment_bytes=*/300 + 97 * round));
      ASSERT_NE(log, nullptr);
      // Everything acknowledged in earlier lives is still there.
      std::map<uint64_t, std::string> seen = ReadAll(*log);
      for (const auto& [seq, payload] : acked) {
        auto it = seen.find(seq);
        ASSERT_NE(it, seen.end()) << "acknowledged record " << seq << " lost";
        EXPECT_EQ(it->second, payload);
      }
      // Nothing half-applied: every record present is one some writer sent.
      for (const auto& [seq, payload] : seen) EXPECT_EQ(attempted.count(payload), 1u) << payload;
      // Numbering has no gap.
      uint64_t expect = seen.empty() ? 1 : seen.begin()->first;
      for (const auto& [seq, payload] : seen) EXPECT_EQ(seq, expect++);
      acked_before = acked.size();
      std::mutex mu;
      std::atomic<int> done{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < 200; ++i) {
            const std::string payload = absl::StrCat("life ", life, " writer ", t, " record ", i);
            {
              std::lock_guard<std::mutex> lock(mu);
              attempted.insert(payload);
            }
            absl::StatusOr<uint64_t> seq = log->Append(payload);
            if (!seq.ok()) break;  // crashed
            std::lock_guard<std::mutex> lock(mu);
            acked[*seq] = payload;
          }
          ++done;
        });
      }
      std::mt19937_64 rng(static_cast<uint64_t>(round * 10 + life));
      // Crash after a random number of acknowledgements (bounded wait).
      const size_t crash_after = acked_before + 1 + rng() % 400;
      for (int spin = 0; spin < 20000; ++spin) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (acked.size() >= crash_after || done.load() == 6) break;
        }
        std::this_thread::yield();
      }
      fs.Crash(tear);
      for (std::thread& th : threads) th.join();
      log.reset();
      fs.Restart();
    }
    EXPECT_GT(acked.size(), acked_before);
  }
}

TEST(SegmentedLogTest, ATornTailIsCutAndReported) {
  FaultFileSystem fs;
  {
    auto log = MustOpen(&fs);
    ASSERT_THAT(log->Append("one"), IsOk());
    ASSERT_THAT(log->Append("two"), IsOk());
  }
  // A record half written when the power went: its header and some bytes.
  const std::string path = SegmentPath(1);
  {
    auto f = fs.OpenAppend(path);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Append(std::string("\x20\x00\x00\x00\x11\x22\x33\x44\x03\x00\x00", 11)), IsOk());
    ASSERT_THAT((*f)->Sync(), IsOk());
  }
  LogRecovery rec;
  auto log = MustOpen(&fs, Options(), &rec);
  EXPECT_EQ(rec.torn_tail_bytes, 11u);
  ASSERT_EQ(rec.notes.size(), 1u);
  EXPECT_THAT(rec.notes[0], HasSubstr("torn tail"));
  EXPECT_EQ(log->next_seq(), 3u);
  EXPECT_EQ(*log->Append("three"), 3u);
  EXPECT_EQ(ReadAll(*log).size(), 3u);
}

TEST(SegmentedLogTest, AFlippedByteInTheLastRecordIsATornTail) {
  FaultFileSystem fs;
  {
    auto log = MustOpen(&fs);
    for (int i = 0; i < 3; ++i) ASSERT_THAT(log->Append(absl::StrCat("record ", i)), IsOk());
  }
  const std::string path = SegmentPath(1);
  const uint64_t size = fs.Contents(path).size();
  fs.FlipByte(path, size - 2);
  LogRecovery rec;
  auto log = MustOpen(&fs, Options(), &rec);
  EXPECT_GT(rec.torn_tail_bytes, 0u);
  EXPECT_EQ(ReadAll(*log).size(), 2u);
}

TEST(SegmentedLogTest, ACorruptRecordInTheMiddleStopsOpenUnlessTruncating) {
  FaultFileSystem fs;
  {
    auto log = MustOpen(&fs);
    for (int i = 1; i <= 5; ++i) ASSERT_THAT(log->Append(absl::StrCat("record ", i)), IsOk());
  }
  const std::string path = SegmentPath(1);
  // Record 2's payload: header (32) + record 1 (16 + 8) + record 2 header (16) + 1.
  fs.FlipByte(path, kSegmentHeaderSize + 24 + kRecordHeaderSize + 1);
  auto failed = SegmentedLog::Open(&fs, kDir, Options(), nullptr);
  ASSERT_THAT(failed, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("record 2"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("--recover=truncate"));

  LogOptions truncate = Options();
  truncate.truncate_corruption = true;
  LogRecovery rec;
  auto log = MustOpen(&fs, truncate, &rec);
  EXPECT_GT(rec.corrupt_bytes, 0u);
  EXPECT_EQ(ReadAll(*log), (std::map<uint64_t, std::string>{{1, "record 1"}}));
  EXPECT_EQ(*log->Append("again"), 2u);
}

TEST(SegmentedLogTest, CorruptionInAnOlderSegmentIsFoundByRead) {
  FaultFileSystem fs;
  {
    auto log = MustOpen(&fs, Options(120));
    for (int i = 1; i <= 20; ++i) ASSERT_THAT(log->Append(absl::StrCat("record ", i)), IsOk());
  }
  fs.FlipByte(SegmentPath(1), kSegmentHeaderSize + kRecordHeaderSize + 2);  // record 1's payload
  auto log = MustOpen(&fs, Options(120));  // the last segment is fine
  uint64_t bad = 0;
  absl::Status s = log->Read(1, [](uint64_t, absl::string_view) { return absl::OkStatus(); }, &bad);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(bad, 1u);
  EXPECT_THAT(std::string(s.message()), HasSubstr(SegmentFileName(1)));
  // The repair cuts it there.
  ASSERT_THAT(log->TruncateFrom(bad), IsOk());
  EXPECT_EQ(log->next_seq(), 1u);
  EXPECT_TRUE(ReadAll(*log).empty());
}

TEST(SegmentedLogTest, AWriteErrorLatchesUntilRestart) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  ASSERT_THAT(log->Append("kept"), IsOk());
  fs.FailWrites(1, /*disk_full=*/true);
  absl::StatusOr<uint64_t> failed = log->Append("lost");
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("No space left"));
  // The disk works again, the log still refuses: it cannot know what reached the disk.
  EXPECT_THAT(log->Append("after"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(log->health().ok());
  log.reset();
  log = MustOpen(&fs);
  EXPECT_TRUE(log->health().ok());
  EXPECT_EQ(ReadAll(*log), (std::map<uint64_t, std::string>{{1, "kept"}}));
  EXPECT_EQ(*log->Append("after restart"), 2u);
}

TEST(SegmentedLogTest, AShortWriteIsNeverHalfRead) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  ASSERT_THAT(log->Append("kept"), IsOk());
  fs.SetShortWrites(true);
  fs.FailWrites(1);
  EXPECT_FALSE(log->Append(std::string(100, 'x')).ok());
  log.reset();
  fs.Crash(FaultFileSystem::Tear::kPrefix);
  fs.Restart();
  LogRecovery rec;
  log = MustOpen(&fs, Options(), &rec);
  EXPECT_EQ(ReadAll(*log), (std::map<uint64_t, std::string>{{1, "kept"}}));
}

TEST(SegmentedLogTest, AFailedFsyncLatchesAndTheRecordIsWholeOrAbsent) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  ASSERT_THAT(log->Append("kept"), IsOk());
  fs.FailSyncs(1);
  EXPECT_THAT(log->Append("unsure"), StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(log->Append("later"), StatusIs(absl::StatusCode::kInternal));
  log.reset();
  for (auto tear : {FaultFileSystem::Tear::kNone, FaultFileSystem::Tear::kPrefix}) {
    fs.Crash(tear);
    fs.Restart();
    log = MustOpen(&fs);
    std::map<uint64_t, std::string> all = ReadAll(*log);
    ASSERT_GE(all.size(), 1u);
    EXPECT_EQ(all.at(1), "kept");
    if (all.size() > 1) {
      EXPECT_EQ(all.at(2), "unsure");
    }
    EXPECT_LE(all.size(), 2u);
    log.reset();
  }
}

TEST(SegmentedLogTest, ASegmentTornAtCreationIsRemoved) {
  FaultFileSystem fs;
  {
    auto log = MustOpen(&fs, Options(100));
    for (int i = 1; i <= 6; ++i) ASSERT_THAT(log->Append(absl::StrCat("record number ", i)), IsOk());
  }
  const uint64_t next = 7;
  ASSERT_THAT(fs.CreateDirs(kDir), IsOk());
  {
    auto f = fs.Create(SegmentPath(next));
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Append("GKLOG"), IsOk());  // 5 of 32 header bytes
    ASSERT_THAT((*f)->Sync(), IsOk());
    ASSERT_THAT(fs.SyncDir(kDir), IsOk());
  }
  LogRecovery rec;
  auto log = MustOpen(&fs, Options(100), &rec);
  EXPECT_EQ(rec.removed_segments, 1);
  EXPECT_FALSE(fs.Exists(SegmentPath(next)));
  EXPECT_EQ(log->next_seq(), next);
  EXPECT_EQ(ReadAll(*log).size(), 6u);
}

// What each record holds and where Append said it is, by seq.
using Appended = std::map<uint64_t, std::pair<std::string, RecordLocation>>;

// 4 writers at once, 25 appends of two records each; `stored` says what a
// record holds once written (its payload, with what `seal` adds). Then
// every record is read alone where Append said it is.
Appended AppendConcurrentlyAndReadEachAlone(
    SegmentedLog* log, const Sealer* seal,
    const std::function<std::string(uint64_t seq, const std::string& payload)>& stored) {
  Appended appended;
  std::mutex mu;
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        std::vector<std::string> batch = {absl::StrCat("w", t, "-", i, "-a"), absl::StrCat("w", t, "-", i, "-bb")};
        std::vector<absl::string_view> views(batch.begin(), batch.end());
        std::vector<RecordLocation> where;
        absl::StatusOr<uint64_t> first = log->Append(views, &where, seal);
        ASSERT_THAT(first, IsOk());
        ASSERT_EQ(where.size(), 2u);
        std::lock_guard<std::mutex> lock(mu);
        for (uint64_t k = 0; k < 2; ++k) appended[*first + k] = {stored(*first + k, batch[k]), where[k]};
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(appended.size(), 200u);
  EXPECT_GT(log->Segments().size(), 5u);
  for (const auto& [seq, rec] : appended) {
    absl::StatusOr<std::string> got = log->ReadRecord(seq, rec.second);
    EXPECT_EQ(got.ok() ? *got : got.status().ToString(), rec.first) << seq;
  }
  return appended;
}

TEST(SegmentedLogTest, EveryRecordCanBeReadAloneWhereAppendSaidItIs) {
  FaultFileSystem fs(11);
  auto log = MustOpen(&fs, Options(/*segment_bytes=*/256));
  ASSERT_NE(log, nullptr);
  // Records of one call, of several concurrent calls, across segments.
  const Appended appended = AppendConcurrentlyAndReadEachAlone(
      log.get(), nullptr, [](uint64_t, const std::string& payload) { return payload; });
  ASSERT_EQ(appended.size(), 200u);
  // A full read reports the same places.
  size_t seen = 0;
  ASSERT_THAT(log->ReadLocated(1,
                               [&](uint64_t seq, absl::string_view payload, const RecordLocation& at) {
                                 const auto& [text, where] = appended.at(seq);
                                 EXPECT_EQ(payload, text);
                                 EXPECT_EQ(at.segment, where.segment);
                                 EXPECT_EQ(at.offset, where.offset);
                                 EXPECT_EQ(at.size, where.size);
                                 ++seen;
                                 return absl::OkStatus();
                               }),
              IsOk());
  EXPECT_EQ(seen, 200u);
  // The wrong place is not silently another record; a dropped segment is gone.
  RecordLocation wrong = appended.at(10).second;
  EXPECT_THAT(log->ReadRecord(11, wrong), StatusIs(absl::StatusCode::kDataLoss));
  wrong.offset += 1;
  EXPECT_THAT(log->ReadRecord(10, wrong), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_THAT(log->DropBefore(150), IsOk());
  EXPECT_THAT(log->ReadRecord(1, appended.at(1).second), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(log->ReadRecord(199, appended.at(199).second), IsOk());
  EXPECT_THAT(log->ReadRecord(201, appended.at(199).second), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SegmentedLogTest, ASealerSeesEveryRecordInSeqOrderAndItsTailIsStored) {
  FaultFileSystem fs(13);
  auto log = MustOpen(&fs, Options(/*segment_bytes=*/512));
  ASSERT_NE(log, nullptr);
  // The sealer runs under the log's lock: a plain counter checks the order.
  uint64_t last_sealed = 0;
  bool in_order = true;
  const Sealer seal = [&](uint64_t seq, absl::string_view payload, std::string* tail) {
    in_order = in_order && seq == last_sealed + 1;
    last_sealed = seq;
    absl::StrAppend(tail, "|", seq, ":", payload.size());
  };
  const Appended appended =
      AppendConcurrentlyAndReadEachAlone(log.get(), &seal, [](uint64_t seq, const std::string& payload) {
        return absl::StrCat(payload, "|", seq, ":", payload.size());
      });
  EXPECT_TRUE(in_order);
  ASSERT_EQ(appended.size(), 200u);
  // The offline reader sees the same records in the segment files.
  size_t seen = 0;
  for (const SegmentInfo& seg : log->Segments()) {
    const std::string bytes = fs.Contents(seg.path);
    ASSERT_THAT(CheckSegmentHeader(bytes, "journal", seg.first_seq), IsOk());
    EXPECT_THAT(CheckSegmentHeader(bytes, "audit", seg.first_seq), StatusIs(absl::StatusCode::kDataLoss));
    RawRecord r;
    for (size_t off = kSegmentHeaderSize; ParseRecordAt(bytes, off, &r); off += r.size, ++seen) {
      EXPECT_EQ(r.payload, appended.at(r.seq).first);
    }
  }
  EXPECT_EQ(seen, 200u);
}

TEST(SegmentedLogTest, StartAtOnlyForALogWithoutRecords) {
  FaultFileSystem fs;
  auto log = MustOpen(&fs);
  ASSERT_THAT(log->StartAt(1000), IsOk());
  EXPECT_EQ(*log->Append("x"), 1000u);
  EXPECT_THAT(log->StartAt(5000), StatusIs(absl::StatusCode::kFailedPrecondition));
  log.reset();
  log = MustOpen(&fs);
  EXPECT_EQ(log->next_seq(), 1001u);
  EXPECT_EQ(ReadAll(*log, 1000).at(1000), "x");
}

}  // namespace
}  // namespace gangkeeper::store
