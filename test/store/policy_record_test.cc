// gangkeeper: the policies in the durable state carry their digest
// (model/policy_digest.h; FORMAT.md §4-6): records of this version
// round-trip it, records of older versions (written here byte by byte as
// FORMAT.md specified them) get it computed, and a broker restarted over
// what its sink recorded records a policies change only when the content of
// its policies changed.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_digest.h"
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

constexpr char kRecordFlavor[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
)";

std::string RecordQueue(int gpus) {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n"
         "  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n"
         "    flavors:\n    - name: a100\n      resources: [{name: nvidia.com/gpu, nominalQuota: " +
         std::to_string(gpus) + "}]\n";
}

// The policies part as versions before the digest wrote it (FORMAT.md §4):
// present, manifests, terminating manifests, an overlay or none.
void PutOldPolicies(Encoder& e, const model::PolicySet& p, const model::PolicyOverlay* overlay) {
  e.PutBool(true);
  e.PutString(model::EncodeManifests(p));
  e.PutString(model::EncodeManifests(model::PolicySet()));
  e.PutBool(overlay != nullptr);
  if (overlay == nullptr) return;
  e.PutString(model::EncodeManifests(overlay->put));
  e.PutVarint(overlay->deleted.size());
  for (const std::string& id : overlay->deleted) e.PutString(id);
  e.PutVarint(overlay->generation);
}

// A version 3 batch: no changes, no images, the policies.
std::string V3PoliciesBatch(const model::PolicySet& p, const model::PolicyOverlay* overlay) {
  std::string out;
  Encoder e(&out);
  e.PutU8(3);
  e.PutVarint(0);
  e.PutVarint(0);
  PutOldPolicies(e, p, overlay);
  return out;
}

// A version 2 snapshot payload: the policies, no workloads.
std::string V2PoliciesSnapshot(const model::PolicySet& p) {
  std::string out;
  Encoder e(&out);
  e.PutU8(2);
  PutOldPolicies(e, p, nullptr);
  e.PutVarint(0);
  return out;
}

TEST(PolicyRecordTest, OlderRecordsLoadAndGetTheDigestOfTheirManifests) {
  const std::shared_ptr<const model::PolicySet> files =
      testing::PoliciesFrom(std::string(kRecordFlavor) + "---\n" + RecordQueue(8));
  model::PolicyOverlay overlay;
  overlay.generation = 3;
  overlay.deleted.insert(model::ObjectId("LocalQueue", "a", "q"));
  broker::DurableState state;
  ASSERT_THAT(ApplyBatch(V3PoliciesBatch(*files, &overlay), 7, &state), IsOk());
  ASSERT_NE(state.policies, nullptr);
  EXPECT_TRUE(state.policies->sealed.digest().known()) << "sealed when decoded";
  EXPECT_EQ(model::DigestOf(*state.policies), model::DigestOf(*files));
  EXPECT_EQ(state.policies->cluster_queues.count("team-a"), 1u);
  ASSERT_NE(state.overlay, nullptr);
  EXPECT_EQ(state.overlay->generation, 3u);
  EXPECT_EQ(state.position, 7u);

  absl::StatusOr<broker::DurableState> snap = DecodeState(V2PoliciesSnapshot(*files), 12);
  ASSERT_THAT(snap.status(), IsOk());
  ASSERT_NE(snap->policies, nullptr);
  EXPECT_EQ(model::DigestOf(*snap->policies), model::DigestOf(*files));
  EXPECT_EQ(snap->overlay, nullptr);
}

TEST(PolicyRecordTest, ThisVersionRecordsTheDigestAndReadsItBack) {
  const std::shared_ptr<const model::PolicySet> sealed =
      model::Seal(*testing::PoliciesFrom(std::string(kRecordFlavor) + "---\n" + RecordQueue(8)));
  broker::DurableBatch batch;
  batch.policies = sealed;
  const std::string payload = EncodeBatch(batch);
  EXPECT_EQ(payload[0], 4) << "batch version 4";
  broker::DurableState state;
  ASSERT_THAT(ApplyBatch(payload, 1, &state), IsOk());
  ASSERT_NE(state.policies, nullptr);
  EXPECT_EQ(state.policies->sealed.digest(), sealed->sealed.digest());
  // Byte 0 the version, 1 and 2 no changes and no images, 3 present, 4 the
  // digest's length, then the digest.
  EXPECT_EQ(static_cast<unsigned char>(payload[4]), model::PolicyDigest::kSize);
  EXPECT_EQ(payload.substr(5, model::PolicyDigest::kSize), sealed->sealed.digest().bytes())
      << "the digest follows the presence flag (FORMAT.md §4)";

  const std::string snapshot = EncodeState(state);
  EXPECT_EQ(snapshot[0], 3) << "snapshot version 3";
  absl::StatusOr<broker::DurableState> back = DecodeState(snapshot, 1);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->policies->sealed.digest(), sealed->sealed.digest());
  EXPECT_EQ(EncodeState(*back), snapshot) << "the same state encodes to the same bytes";

  // A digest that is not 32 bytes is damage, named as such.
  std::string bad = payload;
  bad[4] = 5;
  EXPECT_THAT(ApplyBatch(bad, 2, &state), StatusIs(absl::StatusCode::kDataLoss));
}

// The cluster source's stand-in for an invalid ClusterQueue (no quota,
// refused with a reason) next to a valid queue.
std::shared_ptr<const model::PolicySet> WithStandIn(const std::string& reason) {
  model::PolicySet p = *testing::PoliciesFrom(std::string(kRecordFlavor) + "---\n" + RecordQueue(8));
  model::ClusterQueue stand_in;
  stand_in.meta.name = "broken";
  stand_in.meta.api_version = "kueue.x-k8s.io/v1beta2";
  stand_in.namespace_selector = model::LabelSelector{};
  stand_in.inactive_reason = reason;
  p.cluster_queues["broken"] = stand_in;
  return model::Seal(std::move(p));
}

TEST(PolicyRecordTest, AStandInsInactiveReasonRoundTripsThroughBatchSnapshotAndDigest) {
  const std::shared_ptr<const model::PolicySet> sealed =
      WithStandIn("its object is invalid: spec.resourceGroups[0]: \"lots\" is not a quantity");
  broker::DurableBatch batch;
  batch.policies = sealed;
  broker::DurableState state;
  ASSERT_THAT(ApplyBatch(EncodeBatch(batch), 1, &state), IsOk());
  ASSERT_NE(state.policies, nullptr);
  EXPECT_EQ(state.policies->cluster_queues.at("broken").inactive_reason,
            sealed->cluster_queues.at("broken").inactive_reason);
  EXPECT_TRUE(state.policies->cluster_queues.at("team-a").inactive_reason.empty());
  EXPECT_EQ(model::DigestOf(*state.policies), sealed->sealed.digest());
  EXPECT_EQ(model::DigestOf(model::PolicySet(*state.policies)), sealed->sealed.digest())
      << "the digest computed from what was read back is the recorded one";

  absl::StatusOr<broker::DurableState> back = DecodeState(EncodeState(state), 1);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->policies->cluster_queues.at("broken").inactive_reason,
            sealed->cluster_queues.at("broken").inactive_reason);

  // The reason is part of the content: another reason, or none, is another
  // set (a start over it records the change).
  EXPECT_NE(model::DigestOf(*WithStandIn("another reason")), sealed->sealed.digest());
  model::PolicySet none = *sealed;
  none.cluster_queues["broken"].inactive_reason.clear();
  EXPECT_NE(model::DigestOf(none), sealed->sealed.digest());
}

TEST(PolicyRecordTest, ARecordWrittenBeforeTheReasonWasRecordedStillDecodes) {
  // Version 4 as the previous release wrote it: the stand-in's manifests
  // without the annotation, the digest of those manifests.
  model::PolicySet old = *WithStandIn("x");
  old.cluster_queues["broken"].inactive_reason.clear();
  const std::string manifests = model::EncodeManifests(old);
  ASSERT_EQ(manifests.find(std::string(model::kInactiveReasonAnnotation)), std::string::npos);
  std::string payload;
  Encoder e(&payload);
  e.PutU8(4);
  e.PutVarint(0);
  e.PutVarint(0);
  e.PutBool(true);
  e.PutString(model::PolicyDigest::OfManifests(manifests).bytes());
  e.PutString(manifests);
  e.PutString(model::EncodeManifests(model::PolicySet()));
  e.PutBool(false);
  broker::DurableState state;
  ASSERT_THAT(ApplyBatch(payload, 1, &state), IsOk());
  ASSERT_EQ(state.policies->cluster_queues.count("broken"), 1u);
  EXPECT_TRUE(state.policies->cluster_queues.at("broken").inactive_reason.empty());
  // A start over the cluster's objects (the stand-in with its reason) sees
  // other content and records it: the reason is back from then on.
  EXPECT_NE(model::DigestOf(*state.policies), model::DigestOf(*WithStandIn("x")));
}

// The broker's sink: every batch through the encoding into a state, as a
// journal and its recovery would; counts the recorded policy changes.
class PolicyRecordSink final : public broker::StateSink {
 public:
  absl::StatusOr<uint64_t> Append(const broker::DurableBatch& batch) override {
    absl::MutexLock lock(&mu_);
    std::vector<broker::StateChange> changes;
    if (absl::Status s = ApplyBatch(EncodeBatch(batch), ++seq_, &state_, &changes); !s.ok()) return s;
    for (const broker::StateChange& c : changes) {
      if (c.type == broker::StateChange::Type::kPoliciesChanged) ++policy_changes_;
    }
    if (batch.policies != nullptr) ++policy_records_;
    return seq_;
  }
  // What a restart recovers (a copy: the sink goes on).
  broker::DurableState Recovered() {
    absl::MutexLock lock(&mu_);
    broker::DurableState copy = state_;
    // As recovery from disk would: decoded anew, so sealed from the record.
    absl::StatusOr<broker::DurableState> decoded = DecodeState(EncodeState(copy), copy.position);
    EXPECT_THAT(decoded.status(), IsOk());
    return decoded.ok() ? *std::move(decoded) : copy;
  }
  int policy_records() {
    absl::MutexLock lock(&mu_);
    return policy_records_;
  }
  int policy_changes() {
    absl::MutexLock lock(&mu_);
    return policy_changes_;
  }

 private:
  absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  broker::DurableState state_ ABSL_GUARDED_BY(mu_);
  int policy_records_ ABSL_GUARDED_BY(mu_) = 0;
  int policy_changes_ ABSL_GUARDED_BY(mu_) = 0;
};

class PolicyRestartTest : public ::testing::Test {
 protected:
  // A broker on `policies` from what the sink recorded (nothing the first
  // time), with one gang, flushed and stopped again.
  void Run(std::shared_ptr<const model::PolicySet> policies, bool first) {
    broker::DurableState recovered = sink_.Recovered();
    auto b = broker::Broker::Create(std::move(policies), {}, nullptr, &sink_, &clock_, first ? nullptr : &recovered);
    ASSERT_THAT(b.status(), IsOk());
    (*b)->Start();
    ASSERT_THAT((*b)->SubmitAndWait(broker::Event::Add(testing::GpuGang("g" + std::to_string(++runs_), 1, 1))),
                IsOk());
    (*b)->Stop();
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  PolicyRecordSink sink_;
  int runs_ = 0;
};

TEST_F(PolicyRestartTest, TheSamePoliciesRecordNothingNewChangedOnesOneChange) {
  const std::string files = std::string(testing::kOneTeamPolicies);
  Run(testing::PoliciesFrom(files), /*first=*/true);
  EXPECT_EQ(sink_.policy_records(), 1) << "a durable broker records what it starts with";
  // Restarts on the same content, decoded anew each time (other objects,
  // the same digest), unsealed as a test builds them and sealed as the
  // policy store hands them out.
  Run(testing::PoliciesFrom(files), false);
  Run(model::Seal(*testing::PoliciesFrom(files)), false);
  EXPECT_EQ(sink_.policy_records(), 1) << "no churn: the same policies are not recorded again";
  EXPECT_EQ(sink_.policy_changes(), 1);
  // The files changed while it was down: one change, then none again.
  std::string more = files;
  const std::string eight = "nominalQuota: 8";
  more.replace(more.find(eight), eight.size(), "nominalQuota: 12");
  Run(model::Seal(*testing::PoliciesFrom(more)), false);
  EXPECT_EQ(sink_.policy_records(), 2);
  EXPECT_EQ(sink_.policy_changes(), 2);
  Run(model::Seal(*testing::PoliciesFrom(more)), false);
  EXPECT_EQ(sink_.policy_records(), 2);
  EXPECT_EQ(model::DigestOf(*sink_.Recovered().policies), model::DigestOf(*testing::PoliciesFrom(more)));
}

TEST_F(PolicyRestartTest, AStandInSurvivesARestartWithItsReasonAndIsNotRecordedAgain) {
  const std::string reason = "its object is invalid: spec.cohortName: not a name";
  Run(WithStandIn(reason), /*first=*/true);
  EXPECT_EQ(sink_.Recovered().policies->cluster_queues.at("broken").inactive_reason, reason);
  // The cluster gives the same objects again after the restart: the same
  // content, nothing recorded.
  Run(WithStandIn(reason), false);
  EXPECT_EQ(sink_.policy_records(), 1);
  // The object was fixed differently: its new reason is recorded.
  Run(WithStandIn("its object is invalid: something else"), false);
  EXPECT_EQ(sink_.policy_records(), 2);
  EXPECT_EQ(sink_.Recovered().policies->cluster_queues.at("broken").inactive_reason,
            "its object is invalid: something else");
}

}  // namespace
}  // namespace gangkeeper::store
