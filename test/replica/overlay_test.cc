// gangkeeper: the leader's OverlayFeeder in a real etcd (replica/overlay.h),
// on the two interfaces it uses: the view it starts from (a
// broker::SnapshotSource: which overlay generation is in effect) and the
// queue it hands new generations to (a broker::EventQueue). Here the view
// is a broker restored from a recorded overlay and the queue records what
// it is given, so what the feeder sends is seen event by event.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/broker/event.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/replica/overlay.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_fixture.h"
#include "test/testing/gangs.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"
#include "test/testing/wait.h"

namespace gangkeeper::replica {
namespace {

using ::gangkeeper::testing::IsOk;

// The EventQueue the feeder writes to: keeps every event.
class OverlayTestQueue final : public broker::EventQueue {
 public:
  void Submit(broker::Event e) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(e));
  }
  absl::Status SubmitAndWait(broker::Event e, absl::Duration) override {
    Submit(std::move(e));
    return absl::OkStatus();
  }
  void SubmitAsync(broker::Event e, Ack done, absl::Duration) override {
    Submit(std::move(e));
    done(absl::OkStatus());
  }
  std::vector<broker::Event> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<broker::Event> events_ ABSL_GUARDED_BY(mu_);
};

class OverlayFeederTest : public testing::EtcdFixture {
 protected:
  // An overlay of generation `generation` that sets team-a's nominal GPUs.
  std::shared_ptr<const model::PolicyOverlay> TeamA(uint64_t generation, int64_t gpus) const {
    auto o = std::make_shared<model::PolicyOverlay>();
    o->generation = generation;
    model::ClusterQueue cq = files_->cluster_queues.at("team-a");
    cq.resource_groups.at(0).flavors.at(0).resources.at(0).nominal = quantity::Quantity::FromUnits(gpus);
    o->put.cluster_queues["team-a"] = cq;
    return o;
  }

  void PutOverlay(const model::PolicyOverlay& o, const std::string& what) {
    ASSERT_THAT(client_->Put(OverlayKey(prefix_), EncodeOverlay(o, "platform", what)).status(), IsOk());
  }

  // A broker that shows `recorded` as the overlay in effect (restored from
  // a state that recorded it), never started: only a view here.
  std::unique_ptr<broker::Broker> ViewWith(std::shared_ptr<const model::PolicyOverlay> recorded) {
    broker::DurableState state;
    state.policies = files_;
    state.overlay = std::move(recorded);
    auto b = broker::Broker::Create(files_, {}, nullptr, nullptr, &clock_, &state);
    EXPECT_THAT(b.status(), IsOk());
    return b.ok() ? *std::move(b) : nullptr;
  }

  static int64_t NominalGpus(const model::PolicySet& p) {
    return p.cluster_queues.at("team-a").resource_groups.at(0).flavors.at(0).resources.at(0).nominal.CeilUnits();
  }

  std::shared_ptr<const model::PolicySet> files_ = testing::PoliciesFrom(testing::kOneTeamPolicies);
  model::PolicyStore store_{files_};
  OverlayTestQueue queue_;
};

TEST_F(OverlayFeederTest, HandsTheQueueOnlyGenerationsNewerThanTheViewShows) {
  PutOverlay(*TeamA(2, 6), "PUT team-a 6");
  std::unique_ptr<broker::Broker> view = ViewWith(TeamA(2, 6));
  ASSERT_NE(view, nullptr);
  OverlayFeeder feeder(client_.get(), prefix_, &queue_, view.get(), PolicyStoreFeed(&store_));
  EXPECT_EQ(feeder.stats().generation, 2u) << "the generation the view shows";

  PutOverlay(*TeamA(3, 10), "PUT team-a 10");
  ASSERT_TRUE(testing::WaitFor([&] { return feeder.stats().applied == 1; }));
  feeder.Stop();
  std::vector<broker::Event> sent = queue_.events();
  ASSERT_EQ(sent.size(), 1u) << "generation 2 is in effect already: only 3 is sent";
  EXPECT_EQ(sent[0].type, broker::Event::Type::kPolicies);
  ASSERT_NE(sent[0].overlay, nullptr);
  EXPECT_EQ(sent[0].overlay->generation, 3u);
  EXPECT_EQ(sent[0].actor, "platform");
  EXPECT_EQ(sent[0].message, "PUT team-a 10");
  // The policies are the files with the overlay, as the store publishes them.
  ASSERT_NE(sent[0].policies, nullptr);
  EXPECT_EQ(NominalGpus(*sent[0].policies), 10);
  EXPECT_EQ(sent[0].policies, store_.current()->policies);
  EXPECT_EQ(view->snapshot()->overlay()->generation, 2u) << "the view is only read";
}

TEST_F(OverlayFeederTest, AnOverlayWrittenBeforeTheFeederStartsIsSentFirstAndABadValueIsSkipped) {
  std::unique_ptr<broker::Broker> view = ViewWith(nullptr);
  ASSERT_NE(view, nullptr);
  PutOverlay(*TeamA(1, 4), "PUT team-a 4");
  OverlayFeeder feeder(client_.get(), prefix_, &queue_, view.get(), PolicyStoreFeed(&store_));
  ASSERT_TRUE(testing::WaitFor([&] { return feeder.stats().applied == 1; }));
  ASSERT_THAT(client_->Put(OverlayKey(prefix_), "not an overlay").status(), IsOk());
  ASSERT_TRUE(testing::WaitFor([&] { return feeder.stats().undecodable == 1; }));
  PutOverlay(*TeamA(2, 5), "PUT team-a 5");
  ASSERT_TRUE(testing::WaitFor([&] { return feeder.stats().applied == 2; }));
  feeder.Stop();
  std::vector<broker::Event> sent = queue_.events();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(NominalGpus(*sent[0].policies), 4);
  EXPECT_EQ(NominalGpus(*sent[1].policies), 5);
  EXPECT_EQ(feeder.stats().generation, 2u);
}

}  // namespace
}  // namespace gangkeeper::replica
