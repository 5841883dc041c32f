// Tests for what gangkeeper writes to Kueue's API (issue #24 items 2-4):
// StatusWriter (ClusterQueue and LocalQueue .status), WorkloadPublisher
// (Workload objects) and the detection of Kueue's own controller, against
// a FakeKubeApi serving Kueue's group, with a real broker deciding.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/kube/kueue_objects.h"
#include "gangkeeper/kube/status_writer.h"
#include "gangkeeper/kube/workload_publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "src/api/views.h"
#include "test/kube/fake_cluster.h"
#include "test/testing/gangs.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::GpuGang;
using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kCq[] = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a";
constexpr char kLq[] = "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/localqueues/q";
constexpr char kWorkloads[] = "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads";
constexpr char kJobs[] = "/apis/batch/v1/namespaces/a/jobs";

TEST(KueueObjectsTest, WorkloadNamesAreKueues) {
  // Kind prefix, name, the first 5 hex digits of sha1("Job\nbatch\nllm\nuid-1").
  EXPECT_EQ(KueueWorkloadName("Job", "batch", "llm", "uid-1"), "job-llm-5807a");
  EXPECT_EQ(KueueWorkloadName("PyTorchJob", "kubeflow.org", "train", "abc"), "pytorchjob-train-0804b");
  const std::string long_name(300, 'x');
  const std::string n = KueueWorkloadName("Job", "batch", long_name, "u");
  EXPECT_EQ(n.size(), 253u);
  EXPECT_EQ(n.substr(0, 4), "job-");
}

TEST(KueueObjectsTest, AnInactiveClusterQueueSaysWhyInItsActiveCondition) {
  std::string yaml = ::gangkeeper::testing::kOneTeamPolicies;
  yaml.replace(yaml.find("namespaceSelector: {}"), std::string("namespaceSelector: {}").size(),
               "namespaceSelector: {}\n  stopPolicy: Hold");
  std::shared_ptr<const model::PolicySet> policies = ::gangkeeper::testing::PoliciesFrom(yaml);
  broker::ClusterQueueView view;
  view.status.name = "team-a";
  view.status.active = false;
  const KueueStatus s = ClusterQueueStatusOf(view, *policies);
  ASSERT_EQ(s.conditions.size(), 1u);
  EXPECT_EQ(s.conditions[0].type, "Active");
  EXPECT_EQ(s.conditions[0].status, "False");
  EXPECT_EQ(s.conditions[0].reason, "Stopped");
  EXPECT_THAT(s.conditions[0].message, HasSubstr("stopPolicy Hold"));
}

// After a restart or a change of leader the broker has not tried its
// pending workloads yet (no reason): the reason the cluster's Workload
// shows stands, so that coming back writes nothing and the first cycle's
// reason (the same one) writes nothing either.
TEST(KueueObjectsTest, APendingWorkloadNotTriedYetKeepsTheReasonTheClusterShows) {
  broker::WorkloadInfo w;
  w.cluster_queue = "team-a";
  w.phase = broker::Phase::kPending;
  KueueStatus shown;
  shown.conditions.push_back({"QuotaReserved", "False", "Pending", "ClusterQueue team-a: needs 6 nvidia.com/gpu"});
  shown.conditions.push_back({"Admitted", "False", "NoReservation", "The workload has no reservation"});
  const KueueStatus kept = WorkloadStatusOf(w, &shown, std::nullopt);
  EXPECT_EQ(kept.conditions, shown.conditions);

  // Never published, or shown admitted before: nothing to keep.
  const KueueStatus fresh = WorkloadStatusOf(w, nullptr, std::nullopt);
  ASSERT_FALSE(fresh.conditions.empty());
  EXPECT_EQ(fresh.conditions[0].status, "False");
  EXPECT_THAT(fresh.conditions[0].message, HasSubstr("waiting for a scheduling cycle"));
  KueueStatus admitted;
  admitted.conditions.push_back({"QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a"});
  const KueueStatus requeued = WorkloadStatusOf(w, &admitted, std::nullopt);
  EXPECT_EQ(requeued.conditions[0].status, "False");
  EXPECT_THAT(requeued.conditions[0].message, HasSubstr("waiting for a scheduling cycle"));

  // Once tried, the broker's reason is written.
  w.reason.message = "needs 4 nvidia.com/gpu";
  const KueueStatus tried = WorkloadStatusOf(w, &shown, std::nullopt);
  EXPECT_EQ(tried.conditions[0].message, "ClusterQueue team-a: needs 4 nvidia.com/gpu");
}

TEST(KueueObjectsTest, TheTwoVersionsNameTheirFieldsAsKueueDoes) {
  broker::WorkloadInfo w;
  w.key = {"a", "llm"};
  workload::Workload job = GpuGang("llm", 2, 1, /*priority=*/100);
  job.priority_class = "high";
  job.priority_class_source = "WorkloadPriorityClass";
  w.workload = std::make_shared<workload::Workload>(job);
  w.local_queue = "q";
  w.priority = 100;
  const json v2 = WorkloadSpec(w, KueueVersion::kV1beta2);
  EXPECT_EQ(v2["priorityClassRef"], json({{"group", "kueue.x-k8s.io"}, {"kind", "WorkloadPriorityClass"}, {"name", "high"}}));
  EXPECT_FALSE(v2.contains("priorityClassName"));
  const json v1 = WorkloadSpec(w, KueueVersion::kV1beta1);
  EXPECT_EQ(v1["priorityClassName"], "high");
  EXPECT_EQ(v1["priorityClassSource"], "kueue.x-k8s.io/workloadpriorityclass");
  EXPECT_EQ(v1["priority"], 100);
  // LocalQueue flavor usage: flavorUsage in v1beta1, flavorsUsage in v1beta2.
  EXPECT_THAT(LocalQueueStatusKeys(KueueVersion::kV1beta1), ::testing::Contains("flavorUsage"));
  EXPECT_THAT(LocalQueueStatusKeys(KueueVersion::kV1beta2), ::testing::Contains("flavorsUsage"));
  EXPECT_EQ(KueuePath(KueueVersion::kV1beta1, "workloads", "a", "x"), "/apis/kueue.x-k8s.io/v1beta1/namespaces/a/workloads/x");
}

// An actuator that confirms releases at once and keeps suspensions until
// the test says the gang stopped.
class ManualActuator : public broker::Actuator {
 public:
  void Release(const broker::ReleaseOrder& o) override {
    broker->Submit(broker::Event::ReleaseResult(o.key, o.uid, absl::OkStatus()));
  }
  void Suspend(const broker::SuspendOrder& o) override { suspended.push_back(o); }
  broker::Broker* broker = nullptr;
  std::vector<broker::SuspendOrder> suspended;  // broker thread only until Settle()
};

class KueuePublishingTest : public FakeClusterTest {
 protected:
  void SetUp() override {
    FakeClusterTest::SetUp();
    for (const char* r : {"clusterqueues", "localqueues", "workloads", "cohorts"}) {
      fake_->set_served(std::string("kueue.x-k8s.io/v1beta2/") + r, true);
    }
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
                              {{"metadata", {{"name", "team-a"}}}, {"spec", json::object()}})
                    .status(),
                IsOk());
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/localqueues",
                              {{"metadata", {{"name", "q"}}}, {"spec", {{"clusterQueue", "team-a"}}}})
                    .status(),
                IsOk());
    options_.clock = &base::RealClock();
    options_.interval = absl::Hours(1);  // the tests call Sync themselves
    options_.leading = [this] { return leading_a_; };
    status_ = std::make_unique<StatusWriter>(client_.get(), &port_, options_);
    publisher_ = std::make_unique<WorkloadPublisher>(client_.get(), &port_, options_);
    broker::BrokerOptions bo;
    bo.observers.push_back(publisher_.get());
    auto b = broker::Broker::Create(::gangkeeper::testing::PoliciesFrom(policies_yaml_), bo,
                                    &actuator_, nullptr, &base::RealClock());
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    actuator_.broker = broker_.get();
    port_.broker = broker_.get();
    broker_->Start();
  }
  void TearDown() override {
    if (broker_ != nullptr) broker_->Stop();
  }

  // A job in the fake (the Workload's owner) and the same job in the broker.
  void AddJob(workload::Workload w) {
    ASSERT_THAT(fake_->Create(kJobs, {{"metadata", {{"name", w.name}, {"uid", w.uid}}}, {"spec", json::object()}})
                    .status(),
                IsOk());
    w.api_version = "batch/v1";
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(std::move(w))), IsOk());
    Settle();
  }
  void Settle() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }
  // Answers every suspension the broker asked for (the gangs stopped).
  void StopSuspended() {
    Settle();
    std::vector<broker::SuspendOrder> orders;
    orders.swap(actuator_.suspended);
    for (const broker::SuspendOrder& o : orders) {
      ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Stopped(o.key, o.uid)), IsOk());
    }
    Settle();
  }
  void Finish(const std::string& name) {
    broker::WorkloadKey key{"a", name};
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish(key, "uid-" + name)), IsOk());
    Settle();
  }
  json WorkloadOf(const std::string& name) {
    absl::StatusOr<json> w =
        fake_->Get(absl::StrCat(kWorkloads, "/", KueueWorkloadName("Job", "batch", name, "uid-" + name)));
    return w.ok() ? *w : json(nullptr);
  }
  static json Condition(const json& object, const std::string& type) {
    for (const json& c : object["status"].value("conditions", json::array())) {
      if (c["type"] == type) return c;
    }
    return nullptr;
  }
  int Writes() {
    int n = 0;
    for (const ::gangkeeper::testing::RecordedCall& c : fake_->Calls()) {
      if (c.method != "GET") ++n;
    }
    return n;
  }
  // The ClusterQueue's status in the cluster equals GET
  // /v1/clusterqueues/team-a/status (api::QueueJson of the same snapshot).
  void ExpectClusterQueueMatchesTheApi() {
    std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
    const broker::ClusterQueueView* view = snap->FindClusterQueue("team-a");
    ASSERT_NE(view, nullptr);
    const json api = api::QueueJson(*view);
    absl::StatusOr<json> cq = fake_->Get(kCq);
    ASSERT_THAT(cq.status(), IsOk());
    const json& st = (*cq)["status"];
    EXPECT_EQ(st["pendingWorkloads"], api["pending"]);
    EXPECT_EQ(st["admittedWorkloads"], api["admitted"]);
    EXPECT_EQ(st["reservingWorkloads"], api["admitted"]);
    EXPECT_EQ(st["fairSharing"]["weightedShare"], api["weightedShare"]);
    ASSERT_EQ(st["flavorsUsage"].size(), 1u);
    for (const json& r : api["resources"]) {
      bool found = false;
      for (const char* field : {"flavorsUsage", "flavorsReservation"}) {
        for (const json& f : st[field]) {
          if (f["name"] != r["flavor"]) continue;
          for (const json& x : f["resources"]) {
            if (x["name"] != r["resource"]) continue;
            found = true;
            EXPECT_EQ(x["total"], r["usage"]) << field;
            EXPECT_EQ(x["borrowed"], r["borrowed"]) << field;
          }
        }
      }
      EXPECT_TRUE(found) << r.dump();
    }
    EXPECT_EQ(Condition(*cq, "Active")["status"], api["active"].get<bool>() ? "True" : "False");
    // The LocalQueue (team-a's only one) holds the same.
    absl::StatusOr<json> lq = fake_->Get(kLq);
    ASSERT_THAT(lq.status(), IsOk());
    EXPECT_EQ((*lq)["status"]["pendingWorkloads"], api["pending"]);
    EXPECT_EQ((*lq)["status"]["admittedWorkloads"], api["admitted"]);
    const json usage = (*lq)["status"]["flavorsUsage"];
    const std::string used = api["resources"][0]["usage"].get<std::string>();
    if (used == "0") {
      EXPECT_TRUE(usage.empty()) << usage.dump();
    } else {
      ASSERT_EQ(usage.size(), 1u);
      EXPECT_EQ(usage[0]["resources"][0]["total"], used);
    }
  }

  struct Port : broker::SnapshotSource {
    broker::Broker* broker = nullptr;
    std::shared_ptr<const broker::Snapshot> snapshot() const override { return broker->snapshot(); }
  };

  // The broker's policies (a derived fixture sets others before SetUp).
  std::string policies_yaml_ = ::gangkeeper::testing::kOneTeamPolicies;
  bool leading_a_ = true;
  KueueWriterOptions options_;
  Port port_;
  ManualActuator actuator_;
  std::unique_ptr<StatusWriter> status_;
  std::unique_ptr<WorkloadPublisher> publisher_;
  std::unique_ptr<broker::Broker> broker_;
};

TEST_F(KueuePublishingTest, QueueStatusMatchesTheApiAfterAdmissionsAndPreemptions) {
  AddJob(GpuGang("low", 2, 4, /*priority=*/0));  // 8 of team-a's 8
  AddJob(GpuGang("waits", 1, 2, /*priority=*/0));
  EXPECT_GT(status_->Sync(), 0);
  ExpectClusterQueueMatchesTheApi();
  absl::StatusOr<json> cq = fake_->Get(kCq);
  ASSERT_THAT(cq.status(), IsOk());
  EXPECT_EQ((*cq)["status"]["admittedWorkloads"], 1);
  EXPECT_EQ((*cq)["status"]["pendingWorkloads"], 1);
  EXPECT_EQ((*cq)["status"]["flavorsUsage"][0]["resources"][0]["total"], "8");
  EXPECT_EQ(Condition(*cq, "Active")["reason"], "Ready");

  // A preemption: while the victim stops, and after.
  AddJob(GpuGang("urgent", 2, 4, /*priority=*/1000));
  status_->Sync();
  ExpectClusterQueueMatchesTheApi();
  StopSuspended();
  status_->Sync();
  ExpectClusterQueueMatchesTheApi();
  cq = fake_->Get(kCq);
  EXPECT_EQ((*cq)["status"]["pendingWorkloads"], 2);
  Finish("urgent");
  status_->Sync();
  ExpectClusterQueueMatchesTheApi();
}

TEST_F(KueuePublishingTest, AThousandCyclesWithoutAChangeWriteNothing) {
  AddJob(GpuGang("first", 2, 4));
  AddJob(GpuGang("second", 1, 2));
  status_->Sync();
  publisher_->Sync();
  fake_->ClearCalls();
  for (int i = 0; i < 1000; ++i) {
    broker_->Submit(broker::Event::Flush());
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
    EXPECT_EQ(status_->Sync(), 0);
    EXPECT_EQ(publisher_->Sync(), 0);
  }
  EXPECT_EQ(Writes(), 0);
  // A resync lists again and still writes nothing.
  status_->ResyncNext();
  publisher_->ResyncNext();
  EXPECT_EQ(status_->Sync(), 0);
  EXPECT_EQ(publisher_->Sync(), 0);
  EXPECT_EQ(Writes(), 0);
}

TEST_F(KueuePublishingTest, ConditionsFollowAdmitPreemptRequeueAdmitFinish) {
  AddJob(GpuGang("low", 2, 4));
  publisher_->Sync();
  json w = WorkloadOf("low");
  ASSERT_FALSE(w.is_null());
  EXPECT_EQ(w["spec"]["queueName"], "q");
  EXPECT_EQ(w["spec"]["podSets"][0]["count"], 2);
  EXPECT_EQ(w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"],
            "4");
  EXPECT_EQ(w["metadata"]["ownerReferences"][0]["uid"], "uid-low");
  EXPECT_EQ(w["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(Condition(w, "QuotaReserved")["status"], "True");
  EXPECT_EQ(Condition(w, "Admitted")["status"], "True");
  EXPECT_EQ(w["status"]["admission"]["clusterQueue"], "team-a");
  EXPECT_EQ(w["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"], "a100");
  EXPECT_EQ(w["status"]["admission"]["podSetAssignments"][0]["count"], 2);

  // Preempted: Evicted and Preempted while it stops.
  AddJob(GpuGang("urgent", 2, 4, /*priority=*/1000));
  publisher_->Sync();
  w = WorkloadOf("low");
  EXPECT_EQ(Condition(w, "Evicted")["status"], "True");
  EXPECT_EQ(Condition(w, "Evicted")["reason"], "Preempted");
  EXPECT_EQ(Condition(w, "Preempted")["status"], "True");
  EXPECT_EQ(Condition(w, "Preempted")["reason"], "InClusterQueue");
  EXPECT_THAT(Condition(w, "Preempted")["message"].get<std::string>(), HasSubstr("a/urgent"));
  json urgent = WorkloadOf("urgent");
  EXPECT_EQ(Condition(urgent, "QuotaReserved")["status"], "False");
  EXPECT_EQ(Condition(urgent, "QuotaReserved")["reason"], "WaitingForPreemptedWorkloads");

  // Requeued: pending again, the reason in numbers.
  StopSuspended();
  publisher_->Sync();
  w = WorkloadOf("low");
  EXPECT_EQ(Condition(w, "QuotaReserved")["status"], "False");
  EXPECT_THAT(Condition(w, "QuotaReserved")["message"].get<std::string>(), HasSubstr("nvidia.com/gpu"));
  EXPECT_THAT(Condition(w, "QuotaReserved")["message"].get<std::string>(), ::testing::ContainsRegex("[0-9]"));
  EXPECT_EQ(Condition(w, "Admitted")["status"], "False");
  EXPECT_EQ(Condition(w, "Requeued")["status"], "True");
  EXPECT_TRUE(w["status"]["admission"].is_null());
  EXPECT_EQ(Condition(WorkloadOf("urgent"), "Admitted")["status"], "True");

  // Admitted again once urgent finished.
  Finish("urgent");
  publisher_->Sync();
  w = WorkloadOf("low");
  EXPECT_EQ(Condition(w, "QuotaReserved")["status"], "True");
  EXPECT_EQ(Condition(w, "Admitted")["status"], "True");
  EXPECT_EQ(Condition(w, "Evicted")["status"], "False");
  EXPECT_EQ(Condition(WorkloadOf("urgent"), "Finished")["status"], "True");

  Finish("low");
  publisher_->Sync();
  w = WorkloadOf("low");
  EXPECT_EQ(Condition(w, "Finished")["status"], "True");
  EXPECT_EQ(w["status"]["admission"]["clusterQueue"], "team-a");  // kept, as Kueue keeps it
}

TEST_F(KueuePublishingTest, APendingWorkloadsChangedPodSetsUpdateItsSpec) {
  AddJob(GpuGang("big", 3, 4));  // 12 GPUs: more than team-a ever has
  publisher_->Sync();
  json w = WorkloadOf("big");
  EXPECT_EQ(w["spec"]["podSets"][0]["count"], 3);
  EXPECT_EQ(Condition(w, "QuotaReserved")["reason"], "ExceedsMaxQuota");
  workload::Workload smaller = GpuGang("big", 1, 4);
  smaller.api_version = "batch/v1";
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Update(std::move(smaller))), IsOk());
  Settle();
  publisher_->Sync();
  w = WorkloadOf("big");
  EXPECT_EQ(w["spec"]["podSets"][0]["count"], 1);
  EXPECT_EQ(Condition(w, "Admitted")["status"], "True");
  EXPECT_EQ(fake_->List(kWorkloads).size(), 1u);
}

TEST_F(KueuePublishingTest, WorkloadsGoWithTheirJobs) {
  AddJob(GpuGang("one", 1, 2));
  AddJob(GpuGang("two", 1, 2));
  publisher_->Sync();
  EXPECT_EQ(fake_->List(kWorkloads).size(), 2u);
  // Garbage collection: the job is deleted, its Workload with it; the
  // broker hears of the deletion and the publisher writes nothing more for it.
  ASSERT_THAT(fake_->Delete(absl::StrCat(kJobs, "/one")), IsOk());
  EXPECT_EQ(fake_->List(kWorkloads).size(), 1u);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Remove({"a", "one"}, "uid-one")), IsOk());
  Settle();
  publisher_->Sync();
  EXPECT_EQ(fake_->List(kWorkloads).size(), 1u);
  EXPECT_TRUE(WorkloadOf("one").is_null());
  // Removed from the broker first (the publisher deletes it itself).
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Remove({"a", "two"}, "uid-two")), IsOk());
  Settle();
  publisher_->Sync();
  EXPECT_TRUE(fake_->List(kWorkloads).empty());
}

TEST_F(KueuePublishingTest, AWorkloadDeletedByHandIsRepairedNotObeyed) {
  AddJob(GpuGang("kept", 2, 4));
  publisher_->Sync();
  const std::string name = KueueWorkloadName("Job", "batch", "kept", "uid-kept");
  ASSERT_THAT(fake_->Delete(absl::StrCat(kWorkloads, "/", name)), IsOk());
  publisher_->ResyncNext();
  EXPECT_GT(publisher_->Sync(), 0);
  json w = WorkloadOf("kept");
  ASSERT_FALSE(w.is_null());
  EXPECT_EQ(Condition(w, "Admitted")["status"], "True");
  // The broker never heard of it: the gang still holds its quota.
  const broker::WorkloadInfo* info = broker_->snapshot()->Find({"a", "kept"});
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->admission.has_value());
}

TEST_F(KueuePublishingTest, ARestartOrANewLeaderDuplicatesNothing) {
  AddJob(GpuGang("first", 2, 4));
  AddJob(GpuGang("second", 1, 2));
  status_->Sync();
  publisher_->Sync();
  const size_t before = fake_->List(kWorkloads).size();
  ASSERT_EQ(before, 2u);
  // Another replica (or this one restarted): it lists, finds everything
  // right and writes nothing; while it does not lead it does not even list.
  bool b_leads = false;
  KueueWriterOptions o = options_;
  o.leading = [&b_leads] { return b_leads; };
  StatusWriter status_b(client_.get(), &port_, o);
  WorkloadPublisher publisher_b(client_.get(), &port_, o);
  fake_->ClearCalls();
  EXPECT_EQ(status_b.Sync(), 0);
  EXPECT_EQ(publisher_b.Sync(), 0);
  EXPECT_TRUE(fake_->Calls().empty());
  leading_a_ = false;
  b_leads = true;
  EXPECT_EQ(status_b.Sync(), 0);
  EXPECT_EQ(publisher_b.Sync(), 0);
  EXPECT_EQ(Writes(), 0);
  EXPECT_EQ(fake_->List(kWorkloads).size(), before);
  // The old leader writes nothing now, whatever changes.
  AddJob(GpuGang("third", 1, 2));
  fake_->ClearCalls();
  EXPECT_EQ(publisher_->Sync(), 0);
  EXPECT_EQ(status_->Sync(), 0);
  EXPECT_TRUE(fake_->Calls().empty());
  EXPECT_GT(publisher_b.Sync(), 0);
  EXPECT_EQ(fake_->List(kWorkloads).size(), before + 1);
}

TEST_F(KueuePublishingTest, KueuesOwnControllerIsDetected) {
  absl::StatusOr<std::string> none = DetectKueueController(*client_);
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_EQ(*none, "");
  ASSERT_THAT(fake_->Create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                            {{"metadata", {{"name", "kueue-mutating-webhook-configuration"}}},
                             {"webhooks", json::array({{{"name", "mclusterqueue.kb.io"}}})}})
                  .status(),
              IsOk());
  absl::StatusOr<std::string> found = DetectKueueController(*client_);
  ASSERT_THAT(found.status(), IsOk());
  EXPECT_THAT(*found, HasSubstr("kueue-mutating-webhook-configuration"));
  ASSERT_THAT(fake_->Delete("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
                            "kueue-mutating-webhook-configuration"),
              IsOk());
  ASSERT_THAT(fake_->Create("/apis/coordination.k8s.io/v1/namespaces/kueue-system/leases",
                            {{"metadata", {{"name", "c1f6bfd2.kueue.x-k8s.io"}}},
                             {"spec", {{"holderIdentity", "kueue-controller-manager-abc"}}}})
                  .status(),
              IsOk());
  found = DetectKueueController(*client_);
  ASSERT_THAT(found.status(), IsOk());
  EXPECT_THAT(*found, HasSubstr("kueue-controller-manager-abc"));

  // Refused: nothing is written.
  KueueWriterOptions o = options_;
  o.refused = [] { return std::string("Kueue's own controller manager runs"); };
  StatusWriter status(client_.get(), &port_, o);
  WorkloadPublisher publisher(client_.get(), &port_, o);
  AddJob(GpuGang("first", 1, 2));
  fake_->ClearCalls();
  EXPECT_EQ(status.Sync(), 0);
  EXPECT_EQ(publisher.Sync(), 0);
  EXPECT_TRUE(fake_->Calls().empty());
  EXPECT_EQ(publisher.stats().refused, 1u);
}

TEST_F(KueuePublishingTest, TheServedVersionIsFound) {
  absl::StatusOr<KueueVersion> v = DiscoverKueue(*client_);
  ASSERT_THAT(v.status(), IsOk());
  EXPECT_EQ(*v, KueueVersion::kV1beta2);
  for (const char* r : {"clusterqueues", "localqueues", "cohorts", "workloads"}) {
    fake_->set_served(std::string("kueue.x-k8s.io/v1beta2/") + r, false);
  }
  v = DiscoverKueue(*client_);
  EXPECT_TRUE(absl::IsNotFound(v.status())) << v.status();
  fake_->set_served("kueue.x-k8s.io/v1beta1/clusterqueues", true);
  v = DiscoverKueue(*client_);
  ASSERT_THAT(v.status(), IsOk());
  EXPECT_EQ(*v, KueueVersion::kV1beta1);
}

// A cohort tree: team-a in cohort research, which is in the root org;
// team-b directly in org; team-c in "ghost", a cohort only ClusterQueues
// name. org and research are Cohort objects in the cluster; ghost is not.
class CohortStatusTest : public KueuePublishingTest {
 protected:
  void SetUp() override {
    using ::gangkeeper::testing::ClusterQueueYaml;
    using ::gangkeeper::testing::CohortYaml;
    policies_yaml_ = ::gangkeeper::testing::Manifests(
        {::gangkeeper::testing::FlavorYaml("a100"), CohortYaml("org"), CohortYaml("research", "org"),
         ClusterQueueYaml("team-a", "research", 8), ClusterQueueYaml("team-b", "org", 8),
         ClusterQueueYaml("team-c", "ghost", 4), ::gangkeeper::testing::LocalQueueYaml("a", "q", "team-a")});
    KueuePublishingTest::SetUp();
    for (const char* name : {"org", "research"}) {
      ASSERT_THAT(fake_->Create(kCohorts, {{"metadata", {{"name", name}}}, {"spec", json::object()}}).status(), IsOk());
    }
  }
  // status.fairSharing.weightedShare of Cohort `name` in the cluster (null
  // when none was written).
  json WeightedShare(const std::string& name) {
    absl::StatusOr<json> c = fake_->Get(absl::StrCat(kCohorts, "/", name));
    if (!c.ok()) return nullptr;
    const json st = c->value("status", json::object());
    return st.contains("fairSharing") ? st["fairSharing"].value("weightedShare", json()) : json();
  }
  int64_t BrokersShare(const std::string& name) {
    const broker::Snapshot::CohortMap& cohorts = broker_->snapshot()->cohorts();
    auto it = cohorts.find(name);
    return it == cohorts.end() ? -1 : static_cast<int64_t>(it->second.weighted_share);
  }
  static constexpr char kCohorts[] = "/apis/kueue.x-k8s.io/v1beta2/cohorts";
};

TEST_F(CohortStatusTest, ACohortsWeightedShareIsWrittenToItsObjectOnChangeOnly) {
  status_->Sync();
  EXPECT_EQ(WeightedShare("org"), 0);
  EXPECT_EQ(WeightedShare("research"), 0);

  // team-a takes 12 GPUs of its 8: research borrows from org.
  AddJob(GpuGang("big", 3, 4));
  ASSERT_GT(BrokersShare("research"), 0);
  fake_->ClearCalls();
  EXPECT_GT(status_->Sync(), 0);
  EXPECT_EQ(WeightedShare("research"), BrokersShare("research"));
  EXPECT_EQ(WeightedShare("org"), 0) << "a root cohort borrows from nobody";
  for (const ::gangkeeper::testing::RecordedCall& c : fake_->Calls()) {
    EXPECT_FALSE(absl::StrContains(c.path, "cohorts/ghost")) << "an implicit cohort has no object: " << c.method;
    if (c.method == "PATCH" && absl::StrContains(c.path, "/cohorts/")) {
      EXPECT_TRUE(absl::EndsWith(c.path, "/status")) << c.path;
      EXPECT_EQ(c.content_type, "application/merge-patch+json");
      EXPECT_FALSE(json::parse(c.body)["status"].contains("conditions")) << "a Cohort's status has no conditions";
    }
  }

  // Nothing changed: nothing written, by however many passes.
  fake_->ClearCalls();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(status_->Sync(), 0);
  EXPECT_EQ(Writes(), 0);

  // The borrower finishes: back to 0, written once more.
  Finish("big");
  EXPECT_GT(status_->Sync(), 0);
  EXPECT_EQ(WeightedShare("research"), 0);
}

TEST_F(CohortStatusTest, AFollowerWritesNoCohortStatus) {
  leading_a_ = false;
  AddJob(GpuGang("big", 3, 4));
  fake_->ClearCalls();
  EXPECT_EQ(status_->Sync(), 0);
  EXPECT_EQ(Writes(), 0);
  EXPECT_TRUE(WeightedShare("research").is_null());
  // Leading now: lists first, then writes what differs.
  leading_a_ = true;
  EXPECT_GT(status_->Sync(), 0);
  EXPECT_EQ(WeightedShare("research"), BrokersShare("research"));
}

// Plain pods grouped by kueue.x-k8s.io/pod-group-name: one Workload per
// group, named after it, owned by every pod of the group.
class PodGroupWorkloadTest : public KueuePublishingTest {
 protected:
  static constexpr char kPods[] = "/api/v1/namespaces/a/pods";
  // Pod `pod` of group `group` (of `total` pods, 1 GPU each): in the fake,
  // then in the broker, as the reconciler would hand it over.
  void AddGroupPod(const std::string& group, const std::string& pod, int64_t total) {
    ASSERT_THAT(fake_->Create(kPods, {{"metadata",
                                       {{"name", pod},
                                        {"uid", "uid-" + pod},
                                        {"labels", {{"kueue.x-k8s.io/pod-group-name", group},
                                                    {"kueue.x-k8s.io/queue-name", "q"}}}}},
                                      {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "x"}}})}}}})
                    .status(),
                IsOk());
    workload::Workload w = GpuGang(pod, 1, 1);
    w.kind = workload::Kind::kPod;
    w.api_version = "v1";
    w.pod_group_name = group;
    w.pod_group_total_count = total;
    w.pod_sets[0].template_pointer = "/spec";
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(std::move(w))), IsOk());
    Settle();
  }
  json GroupWorkload(const std::string& group) {
    absl::StatusOr<json> w = fake_->Get(absl::StrCat(kWorkloads, "/", group));
    return w.ok() ? *w : json(nullptr);
  }
  // The pods the Workload's ownerReferences name, each checked to be a
  // plain (not controller) reference to that pod's uid.
  std::vector<std::string> Owners(const json& w) {
    std::vector<std::string> out;
    for (const json& r : w["metadata"].value("ownerReferences", json::array())) {
      EXPECT_EQ(r["apiVersion"], "v1");
      EXPECT_EQ(r["kind"], "Pod");
      EXPECT_EQ(r["uid"], "uid-" + r["name"].get<std::string>());
      EXPECT_FALSE(r.value("controller", false)) << "no pod controls a group's Workload";
      out.push_back(r["name"]);
    }
    return out;
  }
  int PodLists() {
    int n = 0;
    for (const ::gangkeeper::testing::RecordedCall& c : fake_->Calls()) {
      if (c.method == "GET" && c.path == kPods) ++n;
    }
    return n;
  }
};

TEST_F(PodGroupWorkloadTest, AGroupHasOneWorkloadNamedAfterItOwnedByEveryPod) {
  AddGroupPod("trainers", "trainer-0", 2);
  AddGroupPod("trainers", "trainer-1", 2);
  EXPECT_GT(publisher_->Sync(), 0);
  ASSERT_EQ(fake_->List(kWorkloads).size(), 1u);
  const json w = GroupWorkload("trainers");
  ASSERT_FALSE(w.is_null());
  EXPECT_THAT(Owners(w), ::testing::ElementsAre("trainer-0", "trainer-1"));
  EXPECT_EQ(w["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"], "true");
  EXPECT_EQ(w["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gangkeeper");
  EXPECT_EQ(w["spec"]["queueName"], "q");
  int64_t pods = 0;
  for (const json& ps : w["spec"]["podSets"]) pods += ps["count"].get<int64_t>();
  EXPECT_EQ(pods, 2) << w["spec"].dump();
  EXPECT_EQ(w["status"]["admission"]["clusterQueue"], "team-a");
  EXPECT_EQ(Condition(w, "Admitted")["status"], "True");

  // Nothing changed: nothing written, the pods not listed again.
  fake_->ClearCalls();
  EXPECT_EQ(publisher_->Sync(), 0);
  EXPECT_EQ(Writes(), 0);
  EXPECT_EQ(PodLists(), 0);
  // A restart (or a new leader) finds it and writes nothing either.
  publisher_->ResyncNext();
  EXPECT_EQ(publisher_->Sync(), 0);
  EXPECT_EQ(Writes(), 0);
  EXPECT_EQ(PodLists(), 0);
}

TEST_F(PodGroupWorkloadTest, APodThatJoinsOwnsTheWorkloadToo) {
  AddGroupPod("trainers", "trainer-0", 3);
  AddGroupPod("trainers", "trainer-1", 3);
  publisher_->Sync();
  ASSERT_FALSE(GroupWorkload("trainers").is_null());
  EXPECT_THAT(Owners(GroupWorkload("trainers")), ::testing::ElementsAre("trainer-0", "trainer-1"));
  AddGroupPod("trainers", "trainer-2", 3);
  EXPECT_GT(publisher_->Sync(), 0);
  EXPECT_THAT(Owners(GroupWorkload("trainers")), ::testing::ElementsAre("trainer-0", "trainer-1", "trainer-2"));
}

TEST_F(PodGroupWorkloadTest, TheWorkloadGoesWithTheLastPod) {
  AddGroupPod("trainers", "trainer-0", 2);
  AddGroupPod("trainers", "trainer-1", 2);
  publisher_->Sync();
  ASSERT_FALSE(GroupWorkload("trainers").is_null());
  // Garbage collection (the fake's, as Kubernetes'): one pod gone, the
  // Workload stays, owned by the other; the last pod gone, so is it.
  ASSERT_THAT(fake_->Delete(absl::StrCat(kPods, "/trainer-0")), IsOk());
  ASSERT_FALSE(GroupWorkload("trainers").is_null());
  EXPECT_THAT(Owners(GroupWorkload("trainers")), ::testing::ElementsAre("trainer-1"));
  ASSERT_THAT(fake_->Delete(absl::StrCat(kPods, "/trainer-1")), IsOk());
  EXPECT_TRUE(GroupWorkload("trainers").is_null());
  // The broker hears of it: the publisher writes nothing more for it.
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Remove({"a", "trainers", workload::Kind::kPod, true}, "")),
              IsOk());
  Settle();
  publisher_->Sync();
  EXPECT_TRUE(fake_->List(kWorkloads).empty());
}

TEST_F(PodGroupWorkloadTest, ARemovedGroupsWorkloadIsDeletedByThePublisher) {
  AddGroupPod("trainers", "trainer-0", 1);
  publisher_->Sync();
  ASSERT_FALSE(GroupWorkload("trainers").is_null());
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Remove({"a", "trainers", workload::Kind::kPod, true}, "")),
              IsOk());
  Settle();
  publisher_->Sync();
  EXPECT_TRUE(GroupWorkload("trainers").is_null());
}

// --- A new leader and the queues the cluster does not have (issue #24 HA) ---
// A queue the broker has and the cluster does not (the policy files name
// it; nobody applied it): a new leader, or a restart, sends nothing for it,
// not even a write that fails; once someone creates it, the next list
// brings it and it gets its status.
TEST_F(KueuePublishingTest, ANewLeaderSendsNothingForAQueueTheClusterDoesNotHave) {
  ASSERT_THAT(fake_->Delete(kLq), IsOk());
  AddJob(GpuGang("first", 1, 2));
  ASSERT_EQ(status_->Sync(), 1) << "the ClusterQueue";
  StatusWriter next_leader(client_.get(), &port_, options_);
  fake_->ClearCalls();
  EXPECT_EQ(next_leader.Sync(), 0);
  EXPECT_EQ(Writes(), 0) << "not even a PATCH answered 404";
  ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/localqueues",
                            {{"metadata", {{"name", "q"}}}, {"spec", {{"clusterQueue", "team-a"}}}})
                  .status(),
              IsOk());
  next_leader.ResyncNext();
  AddJob(GpuGang("second", 1, 2));
  EXPECT_GT(next_leader.Sync(), 0);
  absl::StatusOr<json> lq = fake_->Get(kLq);
  ASSERT_THAT(lq.status(), IsOk());
  EXPECT_EQ((*lq)["status"]["admittedWorkloads"], 2);
}

// A pass that outlives this replica's lease (a slow API server): leading()
// is asked before every write, so nothing more is written once it is lost;
// the next pass that leads lists again and writes.
TEST_F(KueuePublishingTest, APassThatOutlivesTheLeaseWritesNothingMore) {
  AddJob(GpuGang("first", 1, 2));
  AddJob(GpuGang("second", 1, 2));
  int leads_for = 1;  // answers: true this many times, then false
  KueueWriterOptions o = options_;
  o.leading = [&leads_for] { return leads_for-- > 0; };
  StatusWriter status(client_.get(), &port_, o);
  WorkloadPublisher publisher(client_.get(), &port_, o);
  fake_->ClearCalls();
  EXPECT_EQ(status.Sync(), 0);
  leads_for = 1;
  EXPECT_EQ(publisher.Sync(), 0);
  EXPECT_EQ(Writes(), 0) << "the lease was lost after the passes began";
  EXPECT_TRUE(fake_->List(kWorkloads).empty());
  leads_for = 1000;
  EXPECT_GT(status.Sync(), 0);
  EXPECT_GT(publisher.Sync(), 0);
  EXPECT_EQ(fake_->List(kWorkloads).size(), 2u);
  EXPECT_EQ(status.stats().lists, 2u) << "listed again when it led again";
}

// A pass sends at most max_writes_per_pass writes (the rate limit); what is
// left goes out in the next passes, and a pass with nothing left sends
// nothing.
TEST_F(KueuePublishingTest, APassSendsAtMostItsBudgetAndTheNextPassesTheRest) {
  AddJob(GpuGang("first", 1, 2));
  AddJob(GpuGang("second", 1, 2));
  AddJob(GpuGang("third", 1, 2));
  KueueWriterOptions o = options_;
  o.max_writes_per_pass = 1;
  WorkloadPublisher publisher(client_.get(), &port_, o);
  int passes = 0;
  int total = 0;
  for (; passes < 20; ++passes) {
    fake_->ClearCalls();
    const int wrote = publisher.Sync();
    EXPECT_LE(Writes(), 1) << "pass " << passes;
    EXPECT_EQ(wrote, Writes()) << "pass " << passes;
    total += wrote;
    if (wrote == 0) break;
  }
  EXPECT_EQ(fake_->List(kWorkloads).size(), 3u);
  EXPECT_GE(total, 3) << "one create per job, each in a pass of its own";
  EXPECT_LT(passes, 20) << "the passes never ran out of writes";
  fake_->ClearCalls();
  EXPECT_EQ(publisher.Sync(), 0);
  EXPECT_EQ(Writes(), 0);
}

}  // namespace
}  // namespace gangkeeper::kube
