// The reconciler feeding waitForPodsReady: a Job's status.ready, as the
// API server's watch shows it, reaches the broker as the gang's ready pods;
// a gang not ready in time is evicted on the broker's clock (a simulated
// one here: the timeout passes without waiting for it).
#include "gangkeeper/kube/reconciler.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/kube/fake_cluster.h"
#include "test/testing/policies.h"
#include "test/testing/wait.h"

namespace gangkeeper::kube {
namespace {

using nlohmann::json;
using ::gangkeeper::testing::IsOk;

constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: gpu-queue, namespace: team-a}
spec: {clusterQueue: team-a}
)";

constexpr char kJobs[] = "/apis/batch/v1/namespaces/team-a/jobs";

json Job(const std::string& name, int pods) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}, {"namespace", "team-a"}, {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}}},
          {"spec",
           {{"parallelism", pods},
            {"suspend", true},
            {"template",
             {{"spec",
               {{"restartPolicy", "Never"},
                {"containers",
                 json::array({{{"name", "w"},
                               {"image", "trainer"},
                               {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}}}}}}};
}

class ReconcilerReadinessTest : public FakeClusterTest {
 protected:
  void StartAll() {
    broker::BrokerOptions bo;
    bo.tick = absl::Milliseconds(20);
    model::WaitForPodsReady& w = bo.scheduler.wait_for_pods_ready;
    w.enabled = true;
    w.timeout = absl::Minutes(5);
    w.recovery_timeout = absl::Minutes(5);
    w.backoff_base_seconds = 60;
    auto b = broker::Broker::Create(testing::PoliciesFrom(kPolicies), bo, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    ReconcilerOptions ro;
    ro.clock = &clock_;
    ro.error_backoff = absl::Milliseconds(50);
    reconciler_ = std::make_unique<Reconciler>(client_.get(), broker_.get(), broker_.get(), ro);
    reconciler_->Start();
  }
  void TearDown() override {
    if (reconciler_ != nullptr) reconciler_->Stop();
    if (broker_ != nullptr) broker_->Stop();
  }
  // The broker's view of Job `name`, or nullptr.
  std::shared_ptr<const broker::WorkloadInfo> Info(const std::string& name) {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const broker::WorkloadInfo* w = snap->Find(broker::WorkloadKey{"team-a", name, workload::Kind::kJob, false});
    return w == nullptr ? nullptr : std::make_shared<broker::WorkloadInfo>(*w);
  }
  bool PhaseIs(const std::string& name, broker::Phase phase) {
    auto w = Info(name);
    return w != nullptr && w->phase == phase;
  }
  void SetReady(const std::string& name, int ready) {
    auto j = fake_->Get(absl::StrCat(kJobs, "/", name));
    ASSERT_THAT(j.status(), IsOk());
    json job = *j;
    job["status"]["active"] = ready;
    job["status"]["ready"] = ready;
    ASSERT_THAT(fake_->Replace(absl::StrCat(kJobs, "/", name), job).status(), IsOk());
  }
  static bool WaitFor(const std::function<bool()>& done) {
    return ::gangkeeper::testing::WaitFor(done, absl::Seconds(20), absl::Milliseconds(20));
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ReconcilerReadinessTest, TheJobsReadyCountReachesTheBrokerAndANotReadyGangIsEvictedAfterTheTimeout) {
  ASSERT_THAT(fake_->Create(kJobs, Job("steady", 2)).status(), IsOk());
  ASSERT_THAT(fake_->Create(kJobs, Job("stuck", 3)).status(), IsOk());
  ASSERT_NO_FATAL_FAILURE(StartAll());
  // Registered from the list; admitted; (no actuator: released at once).
  ASSERT_TRUE(WaitFor([&] { return PhaseIs("steady", broker::Phase::kRunning) && PhaseIs("stuck", broker::Phase::kRunning); }));
  SetReady("steady", 1);
  ASSERT_TRUE(WaitFor([&] { auto w = Info("steady"); return w != nullptr && w->ready_pods == 1; }));
  EXPECT_FALSE(Info("steady")->pods_ready);
  SetReady("steady", 2);
  ASSERT_TRUE(WaitFor([&] { auto w = Info("steady"); return w != nullptr && w->pods_ready; }));
  SetReady("stuck", 2);  // 2 of 3: not ready
  ASSERT_TRUE(WaitFor([&] { auto w = Info("stuck"); return w != nullptr && w->ready_pods == 2; }));
  // Five minutes pass on the broker's clock.
  clock_.AdvanceTime(absl::Minutes(5));
  ASSERT_TRUE(WaitFor([&] {
    auto w = Info("stuck");
    return w != nullptr && w->phase == broker::Phase::kPending &&
           w->reason.code == broker::PendingReason::Code::kRequeueBackoff;
  }));
  EXPECT_EQ(Info("stuck")->requeue_count, 1);
  EXPECT_TRUE(PhaseIs("steady", broker::Phase::kRunning));
  // After the backoff it is admitted again.
  clock_.AdvanceTime(absl::Minutes(1));
  ASSERT_TRUE(WaitFor([&] { return PhaseIs("stuck", broker::Phase::kRunning); }));
}

}  // namespace
}  // namespace gangkeeper::kube
