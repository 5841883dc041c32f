// The reconciler feeding waitForPodsReady: a Job's status.ready, as the
// API server's watch shows it, reaches the broker as the gang's ready pods;
// a gang not ready in time is evicted on the broker's clock (a simulated
// one here: the timeout passes without waiting for it).
#include "gangkeeper/kube/reconciler.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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
    ro.held_objects = &held_;
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
  HeldObjects held_;  // before the reconciler, which writes to it
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<Reconciler> reconciler_;
};

// What the reconciler keeps for the actuator's releases (HeldObjects): the
// newest stored text of each held, queued job object, and nothing once the
// object runs or goes.
TEST_F(ReconcilerReadinessTest, TheNewestVersionOfAHeldJobIsKeptUntilItRunsOrGoes) {
  StartAll();
  const broker::WorkloadKey key{"team-a", "big", workload::Kind::kJob, false};
  // 12 GPUs against a quota of 8: it stays pending (and held).
  auto created = fake_->Create(kJobs, Job("big", 12));
  ASSERT_THAT(created.status(), IsOk());
  const std::string uid = (*created)["metadata"]["uid"];
  auto kept_version = [&]() -> std::string {
    std::shared_ptr<const std::string> text = held_.Find(key, uid);
    if (text == nullptr) return "";
    return json::parse(*text)["metadata"].value("resourceVersion", "");
  };
  ASSERT_TRUE(WaitFor([&] { return kept_version() == (*created)["metadata"]["resourceVersion"]; }));
  EXPECT_EQ(held_.Find(key, "another-uid"), nullptr) << "kept for its own instance only";

  // A change while held: the kept text follows it.
  json changed = *fake_->Get(absl::StrCat(kJobs, "/big"));
  changed["spec"]["template"]["spec"]["nodeSelector"] = {{"rack", "r1"}};
  auto replaced = fake_->Replace(absl::StrCat(kJobs, "/big"), changed);
  ASSERT_THAT(replaced.status(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return kept_version() == (*replaced)["metadata"]["resourceVersion"]; }));
  EXPECT_EQ(json::parse(*held_.Find(key, uid))["spec"]["template"]["spec"]["nodeSelector"], json({{"rack", "r1"}}));

  // Unsuspended (here by someone else): nothing kept.
  changed = *fake_->Get(absl::StrCat(kJobs, "/big"));
  changed["spec"]["suspend"] = false;
  ASSERT_THAT(fake_->Replace(absl::StrCat(kJobs, "/big"), changed).status(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return held_.Find(key, uid) == nullptr; }));

  // Deleted while held: nothing kept.
  auto other = fake_->Create(kJobs, Job("other", 12));
  ASSERT_THAT(other.status(), IsOk());
  const broker::WorkloadKey other_key{"team-a", "other", workload::Kind::kJob, false};
  ASSERT_TRUE(WaitFor([&] { return held_.Find(other_key, (*other)["metadata"]["uid"]) != nullptr; }));
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/other")), IsOk());
  ASSERT_TRUE(WaitFor([&] { return held_.stats().objects == 0; }));
  EXPECT_EQ(held_.stats().bytes, 0u);
}

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

// An EventQueue in front of the broker that holds back every event it is
// given until Open(): what the reconciler sends before it has any answer.
class HoldingQueue final : public broker::EventQueue {
 public:
  explicit HoldingQueue(broker::EventQueue* to) : to_(to) {}

  void Submit(broker::Event e) override { to_->Submit(std::move(e)); }
  absl::Status SubmitAndWait(broker::Event e, absl::Duration timeout) override {
    auto done = std::make_shared<absl::Notification>();
    auto status = std::make_shared<absl::Status>();
    SubmitAsync(
        std::move(e),
        [done, status](absl::Status s) {
          *status = s;
          done->Notify();
        },
        timeout);
    if (!done->WaitForNotificationWithTimeout(absl::Seconds(60))) return absl::DeadlineExceededError("held");
    return *status;
  }
  void SubmitAsync(broker::Event e, Ack done, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    types_.push_back(e.type);
    if (open_) {
      to_->SubmitAsync(std::move(e), std::move(done), timeout);
      return;
    }
    held_.push_back(Held{std::move(e), std::move(done), timeout});
  }
  // The names of the Jobs whose events are held, in the order sent.
  std::vector<std::string> HeldNames() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const Held& h : held_) out.push_back(h.event.workload.name.empty() ? h.event.key.name : h.event.workload.name);
    return out;
  }
  // How many events of `type` were sent through SubmitAsync so far.
  size_t Sent(broker::Event::Type type) {
    absl::MutexLock lock(&mu_);
    return static_cast<size_t>(std::count(types_.begin(), types_.end(), type));
  }
  // Holds again what comes from now on.
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  // Lets everything through, the held events first, in order.
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
    for (Held& h : held_) to_->SubmitAsync(std::move(h.event), std::move(h.done), h.timeout);
    held_.clear();
  }

 private:
  struct Held {
    broker::Event event;
    Ack done;
    absl::Duration timeout;
  };
  broker::EventQueue* const to_;
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
  std::vector<broker::Event::Type> types_ ABSL_GUARDED_BY(mu_);
};

class ReconcilerPipelineTest : public FakeClusterTest {
 protected:
  void StartAll() {
    broker::BrokerOptions bo;
    bo.tick = absl::Milliseconds(20);
    auto b = broker::Broker::Create(testing::PoliciesFrom(kPolicies), bo, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    holding_ = std::make_unique<HoldingQueue>(broker_.get());
    ReconcilerOptions ro;
    ro.clock = &clock_;
    ro.error_backoff = absl::Milliseconds(50);
    reconciler_ = std::make_unique<Reconciler>(client_.get(), holding_.get(), broker_.get(), ro);
    reconciler_->Start();
  }
  void TearDown() override {
    if (holding_ != nullptr) holding_->Open();
    if (reconciler_ != nullptr) reconciler_->Stop();
    if (broker_ != nullptr) broker_->Stop();
  }
  size_t Tracked() { return broker_->snapshot()->workload_count(); }
  static bool WaitFor(const std::function<bool()>& done) {
    return ::gangkeeper::testing::WaitFor(done, absl::Seconds(20), absl::Milliseconds(10));
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<broker::Broker> broker_;
  std::unique_ptr<HoldingQueue> holding_;
  std::unique_ptr<Reconciler> reconciler_;
};

// Listed and watched Jobs reach the broker without the reconciler waiting
// for each answer, so the broker writes them in one journal append rather
// than one fsync each; the kind is in sync only once the broker has
// answered them all.
TEST_F(ReconcilerPipelineTest, EventsOfDifferentJobsGoOutBeforeAnyIsAnswered) {
  constexpr size_t kListed = 12;
  for (size_t i = 0; i < kListed; ++i) {
    ASSERT_THAT(fake_->Create(kJobs, Job(absl::StrCat("listed-", i), 1)).status(), IsOk());
  }
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_TRUE(WaitFor([&] { return holding_->HeldNames().size() == kListed; }));
  EXPECT_FALSE(reconciler_->synced());  // not before the broker has them
  EXPECT_EQ(Tracked(), 0u);
  holding_->Open();
  ASSERT_TRUE(WaitFor([&] { return reconciler_->synced() && Tracked() == kListed; }));
  // Watched: created while nothing is answered, all sent all the same.
  holding_->Close();
  for (size_t i = 0; i < kListed; ++i) {
    ASSERT_THAT(fake_->Create(kJobs, Job(absl::StrCat("watched-", i), 1)).status(), IsOk());
  }
  ASSERT_TRUE(WaitFor([&] { return holding_->HeldNames().size() == kListed; }));
  EXPECT_EQ(Tracked(), kListed);
  holding_->Open();
  ASSERT_TRUE(WaitFor([&] { return Tracked() == 2 * kListed; }));
}

// Two events of one Job are decided in turn: the second waits until the
// broker has answered the first (the snapshot shows it). Decided on the
// snapshot before the first's answer, a Job created and at once changed
// would be registered twice.
TEST_F(ReconcilerPipelineTest, ASecondEventOfTheSameJobWaitsForTheFirstsAnswer) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  holding_->Open();
  ASSERT_TRUE(WaitFor([&] { return reconciler_->synced(); }));
  holding_->Close();
  ASSERT_THAT(fake_->Create(kJobs, Job("twice", 1)).status(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return holding_->HeldNames().size() == 1; }));
  auto j = fake_->Get(absl::StrCat(kJobs, "/twice"));
  ASSERT_THAT(j.status(), IsOk());
  json changed = *j;
  changed["metadata"]["labels"]["extra"] = "label";
  ASSERT_THAT(fake_->Replace(absl::StrCat(kJobs, "/twice"), changed).status(), IsOk());
  ASSERT_THAT(fake_->Create(kJobs, Job("after", 1)).status(), IsOk());
  // The change waits for the creation's answer (and what the watch shows
  // after it waits in turn): nothing more is sent meanwhile.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_THAT(holding_->HeldNames(), ::testing::ElementsAre("twice"));
  holding_->Open();
  ASSERT_TRUE(WaitFor([&] { return Tracked() == 2u; }));
}

// No churn without a change: the broker keeps neither labels nor limits
// (broker.cc, Lean), so events of a queued Job that sets limits, changing
// nothing it is scheduled by, send it no Update. Compared with the stored
// object's limits, each of them would.
TEST_F(ReconcilerPipelineTest, EventsThatChangeNothingScheduledSendNoUpdate) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  holding_->Open();
  ASSERT_THAT(fake_->Create(kJobs, Job("queued", 16)).status(), IsOk());  // more than the quota: stays queued
  ASSERT_TRUE(WaitFor([&] { return reconciler_->synced() && Tracked() == 1u; }));
  for (int i = 0; i < 3; ++i) {
    auto j = fake_->Get(absl::StrCat(kJobs, "/queued"));
    ASSERT_THAT(j.status(), IsOk());
    json changed = *j;
    changed["metadata"]["labels"]["round"] = std::to_string(i);
    ASSERT_THAT(fake_->Replace(absl::StrCat(kJobs, "/queued"), changed).status(), IsOk());
  }
  // A last Job, created after the changes: once it is tracked, the watch
  // has delivered (and the reconciler decided) every event before it.
  ASSERT_THAT(fake_->Create(kJobs, Job("marker", 1)).status(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return Tracked() == 2u; }));
  EXPECT_EQ(holding_->Sent(broker::Event::Type::kUpdate), 0u);
  const broker::WorkloadInfo* info =
      broker_->snapshot()->Find(broker::WorkloadKey{"team-a", "queued", workload::Kind::kJob, false});
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->phase, broker::Phase::kPending);
  EXPECT_TRUE(info->workload->labels.empty());                // not kept by the broker
  EXPECT_TRUE(info->workload->pod_sets.at(0).limits.empty());  // nor these
}

}  // namespace
}  // namespace gangkeeper::kube
