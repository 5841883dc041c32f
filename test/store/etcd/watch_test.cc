// Tests for the etcd client's watches against a real etcd (see
// client_test.cc): order, history, ranges, progress, cancel, compaction.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/store/etcd/client_fixture.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::etcd {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::IsEmpty;

TEST_F(EtcdClientTest, WatchDeliversPutsAndDeletesInOrder) {
  WatchRecorder rec;
  WatchOptions o;
  o.range_end = PrefixEnd(prefix_);
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(prefix_, o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());

  const int64_t r1 = MustPut(Key("a"), "1");
  const int64_t r2 = MustPut(Key("a"), "2");
  absl::StatusOr<std::pair<int64_t, int64_t>> d = client_->Delete(Key("a"));
  ASSERT_THAT(d, IsOk());
  absl::StatusOr<TxnResult> t = client_->Txn({}, {Op::Put(Key("b"), "b"), Op::Put(Key("c"), "c")});
  ASSERT_THAT(t, IsOk());

  ASSERT_TRUE(rec.WaitForEvents(5)) << "got " << rec.EventCount() << " events";
  std::vector<WatchEvent> ev = rec.Events();
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(ev[0].kv.key, Key("a"));
  EXPECT_EQ(ev[0].kv.value, "1");
  EXPECT_EQ(ev[0].kv.mod_revision, r1);
  EXPECT_EQ(ev[0].kv.version, 1);
  EXPECT_EQ(ev[1].kv.value, "2");
  EXPECT_EQ(ev[1].kv.mod_revision, r2);
  EXPECT_EQ(ev[1].kv.create_revision, r1);
  EXPECT_EQ(ev[2].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(ev[2].kv.key, Key("a"));
  EXPECT_EQ(ev[2].kv.mod_revision, d->first);
  EXPECT_EQ(ev[3].kv.key, Key("b"));
  EXPECT_EQ(ev[4].kv.key, Key("c"));
  EXPECT_EQ(ev[3].kv.mod_revision, t->revision);
  EXPECT_EQ(ev[4].kv.mod_revision, t->revision);

  // One call per etcd response: both events of the txn's revision together,
  // each call's revision at least its events' revision.
  std::vector<WatchRecorder::Call> calls = rec.EventCalls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].events.size(), 2u);
  int64_t last = 0;
  for (const WatchRecorder::Call& c : calls) {
    EXPECT_GE(c.revision, c.events.back().kv.mod_revision);
    EXPECT_GT(c.events.front().kv.mod_revision, last);
    last = c.events.back().kv.mod_revision;
  }
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, WatchFromAStartRevisionReplaysHistory) {
  const int64_t r1 = MustPut(Key("h"), "1");
  MustPut(Key("h"), "2");
  const int64_t r3 = MustPut(Key("h"), "3");

  WatchRecorder rec;
  WatchOptions o;
  o.start_revision = r1;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("h"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForEvents(3));
  std::vector<WatchEvent> ev = rec.Events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kv.value, "1");
  EXPECT_EQ(ev[1].kv.value, "2");
  EXPECT_EQ(ev[2].kv.value, "3");
  EXPECT_EQ(ev[2].kv.mod_revision, r3);

  // And then the live changes.
  MustPut(Key("h"), "4");
  ASSERT_TRUE(rec.WaitForEvents(4));
  EXPECT_EQ(rec.Events().back().kv.value, "4");
}

TEST_F(EtcdClientTest, WatchOfAKeyOrPrefixSeesNothingElse) {
  WatchRecorder key_rec, prefix_rec;
  absl::StatusOr<std::unique_ptr<Watch>> key_watch =
      client_->StartWatch(Key("w/x"), {}, key_rec.OnEvents(), key_rec.OnEnd());
  ASSERT_THAT(key_watch, IsOk());
  WatchOptions o;
  o.range_end = PrefixEnd(Key("w/"));
  absl::StatusOr<std::unique_ptr<Watch>> prefix_watch =
      client_->StartWatch(Key("w/"), o, prefix_rec.OnEvents(), prefix_rec.OnEnd());
  ASSERT_THAT(prefix_watch, IsOk());

  MustPut(Key("w0"), "outside");
  MustPut(Key("w"), "outside");
  MustPut(Key("w/y"), "inside");
  MustPut(Key("w/x"), "inside");
  ASSERT_TRUE(prefix_rec.WaitForEvents(2));
  ASSERT_TRUE(key_rec.WaitForEvents(1));
  std::vector<WatchEvent> ev = prefix_rec.Events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kv.key, Key("w/y"));
  EXPECT_EQ(ev[1].kv.key, Key("w/x"));
  ev = key_rec.Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv.key, Key("w/x"));
}

TEST_F(EtcdClientTest, WatchProgressNotificationsAreEmptyLists) {
  // The harness sets etcd's progress interval to 1 s.
  const int64_t rev = MustPut(Key("p"), "v");
  WatchRecorder rec;
  WatchOptions o;
  o.progress_notify = true;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("p"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForProgress(absl::Seconds(5)));
  std::vector<WatchRecorder::Call> progress = rec.ProgressCalls();
  ASSERT_FALSE(progress.empty());
  EXPECT_GE(progress[0].revision, rev);
}

TEST_F(EtcdClientTest, CancelStopsTheWatchPromptlyAndForGood) {
  WatchRecorder rec, witness;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("c"), {}, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  absl::StatusOr<std::unique_ptr<Watch>> other =
      client_->StartWatch(Key("c"), {}, witness.OnEvents(), witness.OnEnd());
  ASSERT_THAT(other, IsOk());
  MustPut(Key("c"), "1");
  ASSERT_TRUE(rec.WaitForEvents(1));

  base::Stopwatch took;
  (*w)->Cancel();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  MustPut(Key("c"), "2");
  ASSERT_TRUE(witness.WaitForEvents(2));  // etcd sent the change out
  EXPECT_EQ(rec.EventCount(), 1u);
  w->reset();  // joins the thread
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(rec.Ends(), IsEmpty()) << "Cancel() is not an end";

  // Destroying a watch without Cancel() is as quick.
  took.Reset();
  other->reset();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(witness.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, CancelFromInsideTheCallbackEndsTheWatch) {
  WatchRecorder rec;
  std::unique_ptr<Watch> w;
  absl::Mutex mu;
  absl::StatusOr<std::unique_ptr<Watch>> started = client_->StartWatch(
      Key("self"), {},
      [&](const std::vector<WatchEvent>& events, int64_t revision) {
        {
          absl::MutexLock lock(&mu);
          if (!events.empty()) w->Cancel();
        }
        rec.OnEvents()(events, revision);  // after Cancel(): the test waits for this
      },
      rec.OnEnd());
  ASSERT_THAT(started, IsOk());
  {
    absl::MutexLock lock(&mu);
    w = std::move(*started);
  }
  MustPut(Key("self"), "1");
  ASSERT_TRUE(rec.WaitForEvents(1));
  std::unique_ptr<Watch> doomed;
  {
    absl::MutexLock lock(&mu);
    doomed = std::move(w);
  }
  base::Stopwatch took;
  doomed.reset();
  EXPECT_LT(took.Elapsed(), absl::Seconds(4));  // not a read timeout
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionEndsWithOutOfRange) {
  const int64_t r1 = MustPut(Key("old"), "1");
  const int64_t r2 = MustPut(Key("old"), "2");
  ASSERT_THAT(client_->Compact(r2), IsOk());
  // Compacted history cannot be read either.
  RangeOptions ro;
  ro.revision = r1;
  EXPECT_THAT(client_->Range(Key("old"), ro), StatusIs(absl::StatusCode::kOutOfRange, "compacted"));
  EXPECT_THAT(client_->Compact(r1), StatusIs(absl::StatusCode::kOutOfRange));

  WatchRecorder rec;
  WatchOptions o;
  o.start_revision = r1;
  absl::StatusOr<std::unique_ptr<Watch>> w = client_->StartWatch(Key("old"), o, rec.OnEvents(), rec.OnEnd());
  ASSERT_THAT(w, IsOk());
  ASSERT_TRUE(rec.WaitForEnd());
  std::vector<absl::Status> ends = rec.Ends();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_THAT(ends[0], StatusIs(absl::StatusCode::kOutOfRange, "compacted"));
  EXPECT_EQ(rec.EventCount(), 0u);
}

TEST_F(EtcdClientTest, WatchOfAnEmptyRangeIsRefused) {
  WatchRecorder rec;
  WatchOptions o;
  o.range_end = Key("a");  // before the key itself
  EXPECT_THAT(client_->StartWatch(Key("z"), o, rec.OnEvents(), rec.OnEnd()),
              StatusIs(absl::StatusCode::kInvalidArgument, "range is empty"));
  EXPECT_THAT(rec.Ends(), IsEmpty());
}

}  // namespace
}  // namespace gangkeeper::etcd
