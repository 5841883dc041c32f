// gangkeeper: waitForPodsReady's requeue state is durable (FORMAT.md §4,
// image version 4): images round-trip it, version 3 images read as never
// requeued and active, and a broker restarted over what its sink recorded
// (every batch through the journal's encoding and replay, then a snapshot's
// encoding, as a file journal's recovery or a new etcd leader has it) keeps
// a deactivated gang deactivated and a backing-off gang's count.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/state_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/gangs.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::store {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;

broker::WorkloadInfo Image() {
  broker::WorkloadInfo info;
  const workload::Workload w = testing::GpuGang("g", 2, 1);
  info.key = {w.namespace_name, w.name};
  info.key.kind = w.kind;
  info.workload = std::make_shared<const workload::Workload>(w);
  info.cluster_queue = "team-a";
  info.local_queue = "q";
  info.created_at = absl::FromUnixSeconds(1'700'000'000);
  info.queued_at = info.created_at;
  return info;
}

TEST(RequeueRecordTest, TheRequeueStateRoundTrips) {
  struct Case {
    int64_t count;
    absl::Time at;
    bool active, timeout;
  };
  const Case cases[] = {
      {0, absl::InfinitePast(), true, false},
      {3, absl::FromUnixSeconds(1'700'000'360), true, false},
      {2, absl::InfiniteFuture(), false, false},
      {1, absl::FromUnixSeconds(1'700'000'100), true, true},
  };
  for (const Case& c : cases) {
    broker::WorkloadInfo info = Image();
    info.requeue_count = c.count;
    info.requeue_at = c.at;
    info.active = c.active;
    info.pods_ready_timeout = c.timeout;
    const std::string bytes = EncodeWorkloadInfo(info);
    EXPECT_EQ(bytes[0], 4) << "image version 4";
    absl::StatusOr<broker::WorkloadInfo> back = DecodeWorkloadInfo(bytes);
    ASSERT_THAT(back.status(), IsOk());
    EXPECT_EQ(back->requeue_count, c.count);
    EXPECT_EQ(back->requeue_at, c.at);
    EXPECT_EQ(back->active, c.active);
    EXPECT_EQ(back->pods_ready_timeout, c.timeout);
    EXPECT_EQ(EncodeWorkloadInfo(*back), bytes) << "the same image encodes to the same bytes";
  }
}

TEST(RequeueRecordTest, AVersion3ImageReadsAsNeverRequeuedAndActive) {
  broker::WorkloadInfo info = Image();
  info.requeue_count = 2;
  info.requeue_at = absl::InfiniteFuture();
  info.active = false;
  info.pods_ready_timeout = true;
  std::string bytes = EncodeWorkloadInfo(info);
  // Version 3 as the previous release wrote it: the same bytes up to the
  // pod-group flag, without the requeue state (svarint 2, u8 2, bool 0,
  // bool 1: four bytes).
  bytes[0] = 3;
  bytes.resize(bytes.size() - 4);
  absl::StatusOr<broker::WorkloadInfo> back = DecodeWorkloadInfo(bytes);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->key, info.key);
  EXPECT_EQ(back->requeue_count, 0);
  EXPECT_EQ(back->requeue_at, absl::InfinitePast());
  EXPECT_TRUE(back->active);
  EXPECT_FALSE(back->pods_ready_timeout);
}

TEST(RequeueRecordTest, ADamagedRequeueStateIsRefusedWithWhatIsWrong) {
  broker::WorkloadInfo info = Image();
  std::string bytes = EncodeWorkloadInfo(info);
  // The tail: svarint 0, u8 0 (none), bool 1, bool 0.
  ASSERT_EQ(bytes.substr(bytes.size() - 4), std::string("\x00\x00\x01\x00", 4));
  std::string bad_tag = bytes;
  bad_tag[bad_tag.size() - 3] = 7;
  EXPECT_THAT(DecodeWorkloadInfo(bad_tag).status(), StatusIs(absl::StatusCode::kDataLoss, "tag 7"));
  std::string negative = bytes;
  negative[negative.size() - 4] = 1;  // zigzag 1 = -1
  EXPECT_THAT(DecodeWorkloadInfo(negative).status(),
              StatusIs(absl::StatusCode::kDataLoss, "requeue count -1"));
}

// The broker's sink: every batch through the journal's encoding into a
// state, as a journal's replay would (file or etcd: the same records).
class ReplaySink final : public broker::StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const broker::DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = ApplyBatch(EncodeBatch(batch), ++seq_, &state_); !s.ok()) return s;
    return seq_;
  }
  // What a restart recovers: the replayed state through a snapshot's
  // encoding (a snapshot taken, then loaded).
  broker::DurableState Recovered() {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<broker::DurableState> decoded = DecodeState(EncodeState(state_), state_.position);
    EXPECT_THAT(decoded.status(), IsOk());
    return decoded.ok() ? *std::move(decoded) : broker::DurableState{};
  }

 private:
  absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  broker::DurableState state_ ABSL_GUARDED_BY(mu_);
};

// Releases and suspensions go nowhere: an evicted gang stays evicting.
class SilentActuator final : public broker::Actuator {
 public:
  void Release(const broker::ReleaseOrder&) override {}
  void Suspend(const broker::SuspendOrder&) override {}
};

// waitForPodsReady: timeout 100 s, backoff 60 s doubling; the gang's pods
// never get ready (no readiness is reported).
class RequeueRestartTest : public ::testing::Test {
 protected:
  void Start(std::optional<int64_t> limit, bool first, broker::Actuator* actuator = nullptr) {
    if (broker_ != nullptr) broker_->Stop();
    broker_.reset();
    broker::BrokerOptions o;
    model::WaitForPodsReady& w = o.scheduler.wait_for_pods_ready;
    w.enabled = true;
    w.timeout = absl::Seconds(100);
    w.recovery_timeout = absl::Seconds(100);
    w.backoff_base_seconds = 60;
    w.backoff_max_seconds = 3600;
    w.backoff_limit_count = limit;
    broker::DurableState recovered = sink_.Recovered();
    auto b = broker::Broker::Create(testing::PoliciesFrom(testing::kOneTeamPolicies), o, actuator, &sink_, &clock_,
                                    first ? nullptr : &recovered);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
  }
  void TearDown() override {
    if (broker_ != nullptr) broker_->Stop();
  }
  // At second `t`: applied, with the broker's own answers (release done,
  // stopped) and what they lead to.
  void At(int64_t t) {
    clock_.SetTime(absl::FromUnixSeconds(1'700'000'000 + t));
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }
  broker::WorkloadInfo Gang() {
    const broker::WorkloadInfo* info = broker_->snapshot()->Find(key_);
    EXPECT_NE(info, nullptr);
    return info == nullptr ? broker::WorkloadInfo{} : *info;
  }

  const workload::Workload gang_ = testing::GpuGang("g", 2, 1);
  const broker::WorkloadKey key_{gang_.namespace_name, gang_.name};
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  ReplaySink sink_;
  std::unique_ptr<broker::Broker> broker_;
};

TEST_F(RequeueRestartTest, ADeactivatedGangStaysDeactivatedAfterARestart) {
  Start(/*limit=*/1, /*first=*/true);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(gang_)), IsOk());
  At(0);
  ASSERT_EQ(Gang().phase, broker::Phase::kRunning);
  At(100);  // 1st timeout: requeued after 60 s
  ASSERT_EQ(Gang().reason.code, broker::PendingReason::Code::kRequeueBackoff);
  At(160);
  ASSERT_EQ(Gang().phase, broker::Phase::kRunning);
  At(260);  // 2nd timeout: past backoffLimitCount 1
  ASSERT_FALSE(Gang().active);
  ASSERT_EQ(Gang().reason.code, broker::PendingReason::Code::kDeactivated);

  Start(1, /*first=*/false);
  At(261);
  EXPECT_EQ(Gang().phase, broker::Phase::kPending);
  EXPECT_FALSE(Gang().active);
  EXPECT_EQ(Gang().requeue_count, 1);
  EXPECT_EQ(Gang().reason.code, broker::PendingReason::Code::kDeactivated);
  EXPECT_THAT(Gang().reason.message, HasSubstr("change or re-create the object"));
  At(100'000);
  EXPECT_EQ(Gang().phase, broker::Phase::kPending) << "never admitted while deactivated";
  // A second restart, as a new leader would have it: still deactivated.
  Start(1, /*first=*/false);
  At(100'001);
  EXPECT_FALSE(Gang().active);
  EXPECT_EQ(Gang().reason.code, broker::PendingReason::Code::kDeactivated);
  // Its object changed: active again, its count reset, admitted.
  workload::Workload changed = gang_;
  changed.priority = 5;
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Update(changed)), IsOk());
  At(100'002);
  EXPECT_TRUE(Gang().active);
  EXPECT_EQ(Gang().requeue_count, 0);
  EXPECT_EQ(Gang().phase, broker::Phase::kRunning);
}

TEST_F(RequeueRestartTest, ARestartInTheBackoffKeepsItsEndAndItsCount) {
  Start(/*limit=*/2, /*first=*/true);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(gang_)), IsOk());
  At(0);
  At(100);  // 1st timeout: requeued at 160
  ASSERT_EQ(Gang().requeue_count, 1);

  Start(2, /*first=*/false);
  At(130);
  EXPECT_EQ(Gang().phase, broker::Phase::kPending) << "still backing off";
  EXPECT_EQ(Gang().requeue_count, 1);
  EXPECT_EQ(Gang().reason.code, broker::PendingReason::Code::kRequeueBackoff);
  EXPECT_EQ(Gang().requeue_at, absl::FromUnixSeconds(1'700'000'160));
  At(159);
  EXPECT_EQ(Gang().phase, broker::Phase::kPending);
  At(160);
  ASSERT_EQ(Gang().phase, broker::Phase::kRunning) << "admitted when the backoff ends";
  At(260);  // 2nd timeout: the 2nd requeue, after 120 s
  EXPECT_EQ(Gang().requeue_count, 2);
  EXPECT_EQ(Gang().requeue_at, absl::FromUnixSeconds(1'700'000'380));
  EXPECT_THAT(Gang().reason.message, HasSubstr("2nd requeue"));

  Start(2, /*first=*/false);
  At(380);
  ASSERT_EQ(Gang().phase, broker::Phase::kRunning);
  At(480);  // 3rd timeout: past backoffLimitCount 2
  EXPECT_FALSE(Gang().active);
  EXPECT_EQ(Gang().reason.code, broker::PendingReason::Code::kDeactivated);
  EXPECT_EQ(Gang().requeue_count, 2);
}

TEST_F(RequeueRestartTest, ARestartWhileEvictingForATimeoutStillBacksOff) {
  SilentActuator silent;
  Start(/*limit=*/1, /*first=*/true, &silent);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(gang_)), IsOk());
  At(0);
  ASSERT_EQ(Gang().phase, broker::Phase::kReserved);
  At(100);  // the timeout: evicting, its pods not stopped yet
  ASSERT_EQ(Gang().phase, broker::Phase::kEvicting);

  // Restarted without an actuator: the suspension is sent again and
  // answered; the gang stopped after a PodsReady timeout backs off.
  clock_.SetTime(absl::FromUnixSeconds(1'700'000'101));
  Start(1, /*first=*/false);
  At(101);
  EXPECT_EQ(Gang().phase, broker::Phase::kPending);
  EXPECT_EQ(Gang().requeue_count, 1);
  EXPECT_EQ(Gang().reason.code, broker::PendingReason::Code::kRequeueBackoff);
  EXPECT_EQ(Gang().requeue_at, absl::FromUnixSeconds(1'700'000'161));
}

}  // namespace
}  // namespace gangkeeper::store
