// gangkeeper: tests for the audit log's hash chain, its anchors (HEAD,
// BASE), the offline verifier and the minimum retention: the chain holds
// across appends, concurrent appenders, restarts, rotation and retention;
// a forged record, a removed one and a cut-off tail are found; version 1
// logs still open and verify as unchained.
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/audit/verify.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/store/crc32c.h"
#include "gangkeeper/store/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "test/testing/audit_records.h"
#include "test/testing/fault_fs.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::audit {
namespace {

using ::gangkeeper::testing::AuditRecordBytes;
using ::gangkeeper::testing::FaultFileSystem;
using ::gangkeeper::testing::Le64;
using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kDir[] = "/data/audit";
const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

std::string Sha256(absl::string_view data) {
  unsigned char out[32];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(out), n);
}

std::string HexOf(absl::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) absl::StrAppend(&out, absl::Hex(c, absl::kZeroPad2));
  return out;
}

// An anchor's 96 bytes as FORMAT.md §5 gives them, without an HMAC.
std::string AnchorBytes(uint64_t seq, absl::Time time, absl::string_view chain) {
  std::string out = absl::StrCat(absl::string_view("GKANCH\0" "1", 8), Le64(seq),
                                 Le64(static_cast<uint64_t>(absl::ToUnixMicros(time))), chain);
  out.append(4 + 32, '\0');  // flags 0, no HMAC
  const uint32_t crc = store::Crc32c(out);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  return out;
}

struct RawRecord : ::gangkeeper::testing::SegmentRecord {
  std::string segment;  // path
};

// The verifier stopped at record `seq`, saying `what`.
void ExpectBadRecord(const VerifyReport& r, uint64_t seq, const std::string& what) {
  ASSERT_TRUE(r.error.has_value()) << "no bad record found; wanted record " << seq;
  EXPECT_EQ(r.error->seq, seq) << r.error->what;
  EXPECT_THAT(r.error->what, HasSubstr(what));
}

class AuditChainTest : public ::testing::Test {
 protected:
  AuditOptions Options() {
    AuditOptions o;
    o.dir = kDir;
    o.fs = &fs_;
    o.clock = &clock_;
    o.segment_bytes = 4096;
    o.index_events = 1000;
    o.hmac_key = key_;
    return o;
  }
  std::unique_ptr<AuditLog> Open(AuditOptions o) {
    absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(std::move(o), nullptr);
    EXPECT_THAT(log, IsOk());
    return log.ok() ? *std::move(log) : nullptr;
  }
  std::unique_ptr<AuditLog> Open() { return Open(Options()); }

  Event Ev(int i, const std::string& name = "train") {
    Event e;
    e.time = clock_.Now();
    e.actor = i % 3 == 0 ? "alice" : "gangkeeper";
    e.action = "workload.pending";
    e.kind = "Job";
    e.namespace_name = "team-a";
    e.name = name;
    e.uid = absl::StrCat("uid-", i);
    e.reason = "Queued";
    e.details = absl::StrCat(R"({"n":)", i, "}");
    return e;
  }
  void AppendN(AuditLog* log, int n, int per_append = 1) {
    for (int i = 0; i < n; i += per_append) {
      std::vector<Event> batch;
      for (int k = i; k < std::min(n, i + per_append); ++k) batch.push_back(Ev(next_++));
      ASSERT_THAT(log->Append(batch), IsOk());
      clock_.AdvanceTime(absl::Milliseconds(10));
    }
  }

  VerifyReport Verify(const std::string& key = "") {
    VerifyOptions o;
    o.dir = kDir;
    o.fs = &fs_;
    o.hmac_key = key;
    absl::StatusOr<VerifyReport> r = VerifyAuditLog(o);
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *std::move(r) : VerifyReport{};
  }

  std::vector<std::string> SegmentPaths() {
    absl::StatusOr<std::vector<std::string>> names = fs_.List(kDir);
    std::vector<std::string> out;
    if (!names.ok()) return out;
    for (const std::string& n : *names) {
      if (absl::EndsWith(n, ".log")) out.push_back(absl::StrCat(kDir, "/", n));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<RawRecord> Records() {
    std::vector<RawRecord> out;
    for (const std::string& path : SegmentPaths()) {
      for (::gangkeeper::testing::SegmentRecord& r : ::gangkeeper::testing::SegmentRecords(fs_.Contents(path))) {
        out.push_back({std::move(r), path});
      }
    }
    return out;
  }
  RawRecord Record(uint64_t seq) {
    for (RawRecord& r : Records()) {
      if (r.seq == seq) return r;
    }
    ADD_FAILURE() << "no record " << seq;
    return {};
  }
  void Rewrite(const std::string& path, const std::string& bytes) {
    auto f = fs_.Create(path);
    ASSERT_THAT(f, IsOk());
    ASSERT_THAT((*f)->Append(bytes), IsOk());
    ASSERT_THAT((*f)->Sync(), IsOk());
    ASSERT_THAT(fs_.SyncDir(kDir), IsOk());
  }
  // Replaces the `size` bytes at `offset` of `path` with `bytes`.
  void Splice(const std::string& path, size_t offset, size_t size, const std::string& bytes) {
    std::string all = fs_.Contents(path);
    all.replace(offset, size, bytes);
    Rewrite(path, all);
  }
  // What a forger without the key does: edits record `seq`'s event and
  // recomputes its CRC (the seal stays).
  void Forge(uint64_t seq, const std::string& from, const std::string& to) {
    const std::string path = Record(seq).segment;
    std::string bytes = fs_.Contents(path);
    ASSERT_TRUE(::gangkeeper::testing::ForgeRecord(&bytes, seq, from, to));
    Rewrite(path, bytes);
  }

  FaultFileSystem fs_{17};
  base::SimulatedClock clock_{kNow};
  std::string key_;
  int next_ = 0;
};

TEST(AuditEventClaimTest, ActorClaimedIsEncodedOnlyWhenSetAndDecodesBack) {
  Event e;
  e.time = kNow;
  e.actor = "system:admin";
  e.action = kReviewDenied;
  EXPECT_THAT(EncodeEvent(e), ::testing::Not(HasSubstr("actorClaimed")));
  e.actor_claimed = true;
  const std::string line = EncodeEvent(e, false);
  EXPECT_THAT(line, HasSubstr(R"("actor":"system:admin","actorClaimed":true,"action":"review.denied")"));
  absl::StatusOr<Event> back = DecodeEvent(line, 3);
  ASSERT_THAT(back, IsOk());
  EXPECT_TRUE(back->actor_claimed);
  EXPECT_EQ(EncodeEvent(*back, false), line);
}

TEST_F(AuditChainTest, EachRecordLinksToTheOneBeforeByteForByteAsFormatMdSays) {
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 5, /*per_append=*/2);
  // Recomputed here from FORMAT.md alone: SHA-256(previous chain || u64 seq
  // || event JSON), the chain value then tag 0x01 after the JSON.
  std::string prev(32, '\0');
  for (const RawRecord& r : Records()) {
    ASSERT_EQ(r.payload.back(), '\x01');
    const std::string json = r.payload.substr(0, r.payload.size() - 33);
    ASSERT_EQ(json.back(), '}');
    const std::string chain = Sha256(absl::StrCat(prev, Le64(r.seq), json));
    EXPECT_EQ(r.payload.substr(json.size(), 32), chain) << r.seq;
    prev = chain;
  }
  const AuditHead head = log->head();
  EXPECT_EQ(head.seq, 5u);
  EXPECT_EQ(head.chain, HexOf(prev));
  EXPECT_EQ(head.time, kNow + absl::Milliseconds(20));
  EXPECT_EQ(head.hmac, "");
  // Queries see the events, not the seals.
  Query q;
  absl::StatusOr<Page> page = log->Find(q);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->events.size(), 5u);
  EXPECT_EQ(page->events[4].details, R"({"n":4})");
}

TEST_F(AuditChainTest, TheChainContinuesAcrossRestartsAndConcurrentAppenders) {
  {
    std::unique_ptr<AuditLog> log = Open();
    AppendN(log.get(), 20, 3);
  }
  {
    std::unique_ptr<AuditLog> log = Open();
    EXPECT_EQ(log->head().seq, 20u);
    std::vector<std::thread> writers;
    for (int t = 0; t < 8; ++t) {
      writers.emplace_back([&, t] {
        for (int i = 0; i < 40; ++i) {
          std::vector<Event> batch = {Ev(1000 * t + i), Ev(1000 * t + i + 500)};
          EXPECT_THAT(log->Append(batch), IsOk());
        }
      });
    }
    for (std::thread& w : writers) w.join();
    EXPECT_EQ(log->head().seq, 20u + 8 * 40 * 2);
    // A power cut: HEAD's unsynced entries may be torn; the records are all
    // durable, and the chain goes on from the last one.
    fs_.Crash(FaultFileSystem::Tear::kPrefix);
  }
  fs_.Restart();
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 10);
  const VerifyReport r = Verify();
  EXPECT_FALSE(r.error.has_value()) << r.error->file << " " << r.error->seq << ": " << r.error->what;
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.first_seq, 1u);
  EXPECT_EQ(r.last_seq, 20u + 8 * 40 * 2 + 10);
  EXPECT_EQ(r.chained, r.records);
  EXPECT_EQ(r.unchained, 0u);
  EXPECT_GT(r.segments, 3u);
}

TEST_F(AuditChainTest, RetentionKeepsTheChainCheckableThroughBase) {
  AuditOptions o = Options();
  o.max_bytes = 16 << 10;
  o.min_retention = absl::ZeroDuration();
  std::unique_ptr<AuditLog> log = Open(o);
  AppendN(log.get(), 300, 4);
  ASSERT_GT(log->stats().log.first_seq, 1u) << "retention removed nothing";
  EXPECT_TRUE(fs_.Exists(absl::StrCat(kDir, "/BASE")));
  log.reset();
  log = Open(o);  // and after a restart, retention goes on
  AppendN(log.get(), 100, 4);
  const uint64_t first = log->stats().log.first_seq;
  VerifyReport r = Verify();
  EXPECT_FALSE(r.error.has_value()) << r.error->what;
  EXPECT_EQ(r.first_seq, first);
  EXPECT_EQ(r.chained, r.records);
  // Removing the oldest segment by hand is not retention.
  const std::vector<std::string> segments = SegmentPaths();
  ASSERT_GT(segments.size(), 2u);
  ASSERT_THAT(fs_.Remove(segments[0]), IsOk());
  r = Verify();
  ASSERT_TRUE(r.error.has_value());
  EXPECT_THAT(r.error->what, HasSubstr("removed by something other than retention"));
}

TEST_F(AuditChainTest, WithAKeyEveryRecordCarriesAnHmacThatOnlyTheKeyConfirms) {
  key_ = "0123456789abcdef0123456789abcdef";
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 30, 2);
  EXPECT_EQ(log->head().hmac.size(), 64u);
  VerifyReport r = Verify(key_);
  EXPECT_FALSE(r.error.has_value()) << r.error->what;
  EXPECT_EQ(r.hmac_checked, 30u);
  // Without the key the chain is still checked, the HMACs are not.
  r = Verify();
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.hmac_checked, 0u);
  EXPECT_EQ(r.chained, 30u);
  // Another key: nothing it signed.
  r = Verify("another key, also long enough");
  ASSERT_TRUE(r.error.has_value());
  EXPECT_THAT(r.error->what, HasSubstr("another key"));
  // A forger without the key rewrites record 7 and every chain value after
  // it: the chain holds, the HMAC does not.
  log.reset();
  Forge(7, R"("actor":"alice")", R"("actor":"mallory")");
  std::string prev = Record(6).payload.substr(Record(6).payload.size() - 65, 32);
  for (RawRecord rec : Records()) {
    if (rec.seq < 7) continue;
    rec = Record(rec.seq);
    const std::string json = rec.payload.substr(0, rec.payload.size() - 65);
    const std::string chain = Sha256(absl::StrCat(prev, Le64(rec.seq), json));
    const std::string payload = absl::StrCat(json, chain, rec.payload.substr(json.size() + 32));
    Splice(rec.segment, rec.offset, rec.size(), AuditRecordBytes(rec.seq, payload));
    prev = chain;
  }
  // HEAD still names the last record with its old chain value.
  r = Verify();
  ExpectBadRecord(r, 30, "HEAD names this record with another chain value");
  // The forger rewrites HEAD too (without the key: no HMAC).
  Rewrite(absl::StrCat(kDir, "/HEAD"), AnchorBytes(30, kNow, prev));
  r = Verify();
  EXPECT_FALSE(r.error.has_value()) << "without the key the rewrite is consistent: " << r.error->what;
  r = Verify(key_);
  ExpectBadRecord(r, 7, "HMAC does not match");
}

TEST_F(AuditChainTest, ALogWrittenWithoutAKeyVerifiedWithOneIsAWarning) {
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 3);
  const VerifyReport r = Verify("0123456789abcdef0123456789abcdef");
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.without_hmac, 3u);
  EXPECT_FALSE(r.warnings.empty());
}

TEST_F(AuditChainTest, VerifyNamesAForgedActorWhoseCrcWasRecomputed) {
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 40, 3);
  log.reset();
  ASSERT_FALSE(Verify().error.has_value());
  Forge(13, R"("actor":"alice")", R"("actor":"eve")");
  const VerifyReport r = Verify();
  ExpectBadRecord(r, 13, "hash chain does not match");
  EXPECT_EQ(r.error.value_or(VerifyProblem{}).file, Record(13).segment.substr(sizeof(kDir)));
}

TEST_F(AuditChainTest, VerifyNamesARecordDeletedInTheMiddle) {
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 40, 3);
  log.reset();
  // Cut out record 20 as it is.
  const RawRecord victim = Record(20);
  Splice(victim.segment, victim.offset, victim.size(), "");
  VerifyReport r = Verify();
  ExpectBadRecord(r, 20, "1 record(s) removed");
  // Renumbering the later records (checksums recomputed) breaks the chain.
  for (RawRecord rec : Records()) {
    if (rec.seq <= 20) continue;
    Splice(rec.segment, rec.offset, rec.size(), AuditRecordBytes(rec.seq - 1, rec.payload));
  }
  r = Verify();
  ExpectBadRecord(r, 20, "hash chain does not match");
}

TEST_F(AuditChainTest, ACutOffTailIsAWarningWithItsCountAndAnEventAtTheNextStart) {
  std::unique_ptr<AuditLog> log = Open();
  AppendN(log.get(), 40, 1);
  log.reset();
  // The last three records go, cleanly: the log alone looks whole.
  const RawRecord first_cut = Record(38);
  ASSERT_EQ(Record(40).segment, first_cut.segment);
  Rewrite(first_cut.segment, fs_.Contents(first_cut.segment).substr(0, first_cut.offset));
  VerifyReport r = Verify();
  EXPECT_FALSE(r.error.has_value()) << r.error->what;
  EXPECT_EQ(r.missing_tail, 3u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0].what, HasSubstr("truncated tail: 3 record(s) after record 37"));
  // The next start says so in the log itself, and the chain goes on.
  log = Open();
  Query q;
  q.action = kTailMissing;
  absl::StatusOr<Page> page = log->Find(q);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->events.size(), 1u);
  nlohmann::json details = nlohmann::json::parse(page->events[0].details);
  EXPECT_EQ(details["count"], 3);
  EXPECT_EQ(details["from"], 38);
  EXPECT_EQ(page->events[0].seq, 38u);
  log.reset();
  r = Verify();
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.missing_tail, 0u);
}

TEST_F(AuditChainTest, AVersionOneLogOpensQueriesAndVerifiesAsUnchained) {
  {
    // Written as before version 2: bare JSON payloads.
    store::LogOptions lo;
    lo.kind = "audit";
    lo.segment_bytes = 4096;
    auto v1 = store::SegmentedLog::Open(&fs_, kDir, lo, nullptr);
    ASSERT_THAT(v1, IsOk());
    for (int i = 0; i < 25; ++i) ASSERT_THAT((*v1)->Append(EncodeEvent(Ev(i, "old"), false)), IsOk());
  }
  VerifyReport r = Verify();
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.unchained, 25u);
  EXPECT_EQ(r.chained, 0u);
  std::unique_ptr<AuditLog> log = Open();
  Query q;
  q.name = "old";
  absl::StatusOr<Page> page = log->Find(q);
  ASSERT_THAT(page, IsOk());
  EXPECT_EQ(page->events.size(), 25u);
  AppendN(log.get(), 10);
  log.reset();
  r = Verify();
  EXPECT_FALSE(r.error.has_value()) << r.error->what;
  EXPECT_EQ(r.unchained_first, 1u);
  EXPECT_EQ(r.unchained_last, 25u);
  EXPECT_EQ(r.chained, 10u);
  // A sealed record stripped of its seal is not "old": it is tampering.
  const RawRecord rec = Record(30);
  const std::string bare = rec.payload.substr(0, rec.payload.size() - 33);
  Splice(rec.segment, rec.offset, rec.size(), AuditRecordBytes(30, bare));
  r = Verify();
  ExpectBadRecord(r, 30, "seal was removed");
}

// Lines the "audit" logger writes while it lives.
class AuditLogLines {
 public:
  AuditLogLines() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    base::GetLogger("audit")->sinks().push_back(sink_);
  }
  ~AuditLogLines() {
    auto& sinks = base::GetLogger("audit")->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string Joined() const { return absl::StrJoin(sink_->last_formatted(), ""); }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

TEST_F(AuditChainTest, TheSizeCapRemovesEventsYoungerThanTheMinimumOnlyOutLoud) {
  AuditOptions o = Options();
  o.max_bytes = 16 << 10;
  o.min_retention = absl::Hours(1);
  o.max_age = absl::ZeroDuration();
  // Old events first, below the cap; two hours later the cap removes them
  // quietly.
  std::unique_ptr<AuditLog> log = Open(o);
  AppendN(log.get(), 50, 5);
  clock_.AdvanceTime(absl::Hours(2));
  {
    AuditLogLines lines;
    AppendN(log.get(), 40, 5);
    EXPECT_GT(log->stats().log.first_seq, 1u);
    EXPECT_EQ(log->stats().retention_forced, 0u);
    EXPECT_THAT(lines.Joined(), ::testing::Not(HasSubstr("minimum retention")));
  }
  // Now only young events are left: the cap still wins, loudly.
  AuditLogLines lines;
  AppendN(log.get(), 300, 5);
  const AuditStats st = log->stats();
  EXPECT_GT(st.retention_forced, 0u);
  EXPECT_GT(st.retention_forced_events, 0u);
  ASSERT_TRUE(st.oldest_event.has_value());
  EXPECT_GT(*st.oldest_event, kNow + absl::Hours(1));
  EXPECT_THAT(lines.Joined(), HasSubstr("younger than the minimum retention of 1h"));
  Query q;
  q.action = kRetentionForced;
  q.limit = 1000;
  absl::StatusOr<Page> page = log->Find(q);
  ASSERT_THAT(page, IsOk());
  ASSERT_FALSE(page->events.empty());
  uint64_t events = 0;
  for (const Event& e : page->events) {
    nlohmann::json d = nlohmann::json::parse(e.details);
    EXPECT_GE(d["segments"].get<int>(), 1);
    EXPECT_LT(d["newestAgeSeconds"].get<int>(), 3600);
    events += d["events"].get<uint64_t>();
  }
  // Every forced pass left its event (the older ones may have gone since).
  EXPECT_LE(events, st.retention_forced_events);
  log.reset();
  const VerifyReport r = Verify();
  EXPECT_FALSE(r.error.has_value()) << r.error->what;
}

TEST(AuditHmacKeyTest, AKeyFileMustHoldSixteenBytesOrMore) {
  ::gangkeeper::testing::TempDir tmp;
  EXPECT_THAT(LoadHmacKey(tmp.File("missing")).status(), ::gangkeeper::testing::StatusIs(absl::StatusCode::kInvalidArgument));
  std::ofstream(tmp.File("short")) << "secret\n";
  absl::StatusOr<std::string> short_key = LoadHmacKey(tmp.File("short"));
  EXPECT_THAT(short_key.status().message(), HasSubstr("openssl rand -hex 32"));
  std::ofstream(tmp.File("key")) << "0123456789abcdef0123\n";
  absl::StatusOr<std::string> key = LoadHmacKey(tmp.File("key"));
  ASSERT_THAT(key, IsOk());
  EXPECT_EQ(*key, "0123456789abcdef0123");
}

}  // namespace
}  // namespace gangkeeper::audit
