// /validate: one test per denial rule and per warning (message text
// asserted), updates, deletions, completions and dry runs.
#include "gangkeeper/admission/webhook.h"
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/admission/review_builder.h"

namespace gangkeeper::admission {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::shared_ptr<model::PolicySet> Policies() {
  auto loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
  EXPECT_TRUE(loaded.ok());
  return std::make_shared<model::PolicySet>(loaded.ok() ? loaded->policies : model::PolicySet{});
}

// A Job in team-a asking `parallelism` pods of `requests` (limits equal).
ReviewSpec Job(int parallelism, nlohmann::json requests, nlohmann::json limits = nullptr) {
  ReviewSpec s;
  if (limits.is_null()) limits = requests;
  nlohmann::json container = {{"name", "w"}, {"image", "cuda"}};
  container["resources"] = {{"requests", requests}, {"limits", limits}};
  nlohmann::json pod_spec = {{"restartPolicy", "Never"}};
  pod_spec["containers"] = nlohmann::json::array({container});
  nlohmann::json spec = {{"parallelism", parallelism}, {"completions", parallelism}, {"suspend", true}};
  spec["template"] = {{"spec", pod_spec}};
  s.object = {{"apiVersion", "batch/v1"}, {"kind", "Job"}};
  s.object["metadata"] = {
      {"name", "train"}, {"namespace", "team-a"}, {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}};
  s.object["spec"] = spec;
  return s;
}

nlohmann::json Gpus(int n) { return {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", std::to_string(n)}}; }

class ValidateTest : public ::testing::Test {
 protected:
  Answer Validate(const ReviewSpec& s) {
    WebhookResult r = hook_.Validate(ReviewBody(s));
    EXPECT_TRUE(r.error.ok()) << r.error;
    return ParseAnswer(r.body);
  }
  std::shared_ptr<model::PolicySet> policies_ = Policies();
  std::unique_ptr<broker::WorkloadRegistry> registry_ = broker::NewInMemoryRegistry();
  WebhookOptions options_;
  Webhook hook_{[this] { return std::shared_ptr<const model::PolicySet>(policies_); }, *registry_, options_};
};

TEST_F(ValidateTest, TheSeedJobIsAllowedRegisteredAndToldWhereItQueues) {
  Answer a = Validate(Job(2, Gpus(1)));
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains(HasSubstr("team-a/train (2 pods) is suspended and queued in LocalQueue gpu-queue "
                                               "-> ClusterQueue team-a-gpu (cohort gpu-shared); 0 workloads ahead")));
  auto record = registry_->Find({"team-a", "train"});
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->cluster_queue, "team-a-gpu");
  EXPECT_EQ(record->state, broker::WorkloadState::kPending);
  // The next one is told it waits behind the first.
  ReviewSpec second = Job(1, Gpus(1));
  second.object["metadata"]["name"] = "second";
  second.name = "second";
  EXPECT_THAT(Validate(second).warnings(), Contains(HasSubstr("; 1 workload ahead")));
}

TEST_F(ValidateTest, DryRunRegistersNothing) {
  ReviewSpec s = Job(2, Gpus(1));
  s.dry_run = true;
  EXPECT_TRUE(Validate(s).allowed());
  EXPECT_FALSE(registry_->Find({"team-a", "train"}).has_value());
}

TEST_F(ValidateTest, DeniesAnUnknownLocalQueueListingTheNamespacesQueues) {
  ReviewSpec s = Job(1, Gpus(1));
  s.object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "fast-lane";
  Answer a = Validate(s);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response["status"]["code"], 403);
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train: LocalQueue \"fast-lane\" does not exist in namespace team-a (its LocalQueues: "
            "gpu-queue): fix the label kueue.x-k8s.io/queue-name");
  EXPECT_FALSE(registry_->Find({"team-a", "train"}).has_value());
}

TEST_F(ValidateTest, DeniesANamespaceTheClusterQueueDoesNotSelect) {
  model::LocalQueue lq;
  lq.meta.name = "gpu-queue";
  lq.meta.namespace_name = "team-c";
  lq.cluster_queue = "team-a-gpu";
  policies_->local_queues[{"team-c", "gpu-queue"}] = lq;
  ReviewSpec s = Job(1, Gpus(1));
  s.namespace_name = "team-c";
  s.object["metadata"]["namespace"] = "team-c";
  Answer a = Validate(s);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-c/train: ClusterQueue team-a-gpu's namespaceSelector does not select namespace team-c, "
            "so LocalQueue gpu-queue cannot use it: ask your platform team");
}

TEST_F(ValidateTest, DeniesAResourceTheClusterQueueHasNoQuotaFor) {
  Answer a = Validate(Job(1, {{"cpu", "1"}, {"nvidia.com/mig-4g.40gb", "1"}}));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train requests nvidia.com/mig-4g.40gb (pod set main), but ClusterQueue team-a-gpu has "
            "no quota for it (it covers cpu, memory, nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/mig-2g.20gb, "
            "nvidia.com/mig-3g.40gb): request a covered resource or ask your platform team for quota");
}

TEST_F(ValidateTest, DeniesAGangLargerThanTheClusterQueueCanEverHold) {
  Answer a = Validate(Job(8, Gpus(1)));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train needs 8 nvidia.com/gpu; ClusterQueue team-a-gpu can hold at most 6 (nominal 4 + "
            "borrowing limit 2): lower parallelism or ask for quota");
}

// Partial admission: only a minimum that can never fit is denied.
TEST_F(ValidateTest, AJobThatMayShrinkIsDeniedOnlyWhenItsMinimumCannotFit) {
  ReviewSpec may_shrink = Job(8, Gpus(1));
  may_shrink.object["metadata"]["annotations"] = {{"kueue.x-k8s.io/job-min-parallelism", "4"}};
  Answer a = Validate(may_shrink);
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains(HasSubstr("it starts with as many of its pods as fit, at least 4 (partial "
                                               "admission)")));
  ReviewSpec too_big = Job(20, Gpus(1));
  too_big.object["metadata"]["annotations"] = {{"kueue.x-k8s.io/job-min-parallelism", "7"}};
  Answer denied = Validate(too_big);
  EXPECT_FALSE(denied.allowed());
  EXPECT_THAT(denied.message(), HasSubstr("needs 7 nvidia.com/gpu; ClusterQueue team-a-gpu can hold at most 6"));
}

// resources.transformations: a slice charged as part of a GPU is checked as
// that part, so a queue covering only nvidia.com/gpu takes it.
TEST_F(ValidateTest, TransformedRequestsAreCheckedAsTheQuotaChargesThem) {
  model::ResourceTransformation t;
  t.input = "nvidia.com/mig-4g.40gb";
  t.strategy = model::TransformationStrategy::kReplace;
  t.outputs["nvidia.com/gpu"] = quantity::Quantity::FromMilli(500);
  policies_->configuration.present = true;
  policies_->configuration.transformations.push_back(t);
  Answer a = Validate(Job(4, {{"cpu", "1"}, {"nvidia.com/mig-4g.40gb", "1"}}));
  EXPECT_TRUE(a.allowed()) << a.message();
  // 14 slices are 7 GPUs: more than the queue can ever hold.
  Answer denied = Validate(Job(14, {{"cpu", "1"}, {"nvidia.com/mig-4g.40gb", "1"}}));
  EXPECT_FALSE(denied.allowed());
  EXPECT_THAT(denied.message(), HasSubstr("needs 7 nvidia.com/gpu"));
}

TEST_F(ValidateTest, DeniesAPodNeedingMoreMigThanOneNodeHas) {
  Answer a = Validate(Job(1, {{"cpu", "1"}, {"nvidia.com/mig-3g.40gb", "2"}}));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train pod set main: one pod needs 2 nvidia.com/mig-3g.40gb but no node of the GPU pools "
            "behind ClusterQueue team-a-gpu has that many (migmixed: 1 per node): split the work over more pods with "
            "fewer nvidia.com/mig-3g.40gb each");
}

// Sealed policies (what the policy store hands the server's webhook) have
// their ClusterQueues' facts kept per thread (src/admission/queue_facts.h).
// Invariant: every answer is the one the unsealed copy (computed afresh)
// gives. Random Jobs over both teams' queues, every GPU/MIG resource of the
// example policies and one no queue covers.
TEST_F(ValidateTest, SealedPoliciesDecideAsTheirUnsealedCopy) {
  std::shared_ptr<const model::PolicySet> sealed = model::Seal(*policies_);
  std::unique_ptr<broker::WorkloadRegistry> registry = broker::NewInMemoryRegistry();
  Webhook kept([sealed] { return sealed; }, *registry, options_);
  const std::vector<std::string> resources = {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb",
                                              "nvidia.com/mig-3g.40gb", "nvidia.com/mig-4g.40gb", "cpu"};
  std::mt19937 rng(20261207);
  int allowed = 0;
  int denied = 0;
  for (int i = 0; i < 400; ++i) {
    ReviewSpec s = Job(1 + static_cast<int>(rng() % 10),
                       {{"cpu", "1"}, {resources[rng() % resources.size()], std::to_string(rng() % 4)}});
    s.name = absl::StrCat("job-", i);
    s.object["metadata"]["name"] = s.name;
    if (rng() % 2 == 0) {
      s.namespace_name = "team-b";
      s.object["metadata"]["namespace"] = "team-b";
    }
    const Answer fresh = Validate(s);
    const WebhookResult r = kept.Validate(ReviewBody(s));
    ASSERT_TRUE(r.error.ok()) << r.error;
    const Answer cached = ParseAnswer(r.body);
    ASSERT_EQ(fresh.allowed(), cached.allowed()) << s.object.dump();
    EXPECT_EQ(fresh.message(), cached.message());
    EXPECT_EQ(fresh.warnings(), cached.warnings());
    (fresh.allowed() ? allowed : denied)++;
  }
  // Both outcomes are exercised (each is about half of the 400).
  EXPECT_GT(allowed, 50);
  EXPECT_GT(denied, 50);
}

// A changed policy set is judged by its own quotas on the same thread, never
// by the facts kept for the set before it; an equal set reuses them.
TEST_F(ValidateTest, ANewPolicySetIsNeverAnsweredFromTheFactsOfTheOneBefore) {
  std::shared_ptr<const model::PolicySet> current = model::Seal(*policies_);
  Webhook hook([&current] { return current; }, *registry_, options_);
  auto six_gpus = [&hook] {
    ReviewSpec s = Job(6, Gpus(1));
    s.dry_run = true;
    return ParseAnswer(hook.Validate(ReviewBody(s)).body);
  };
  EXPECT_TRUE(six_gpus().allowed()) << six_gpus().message();  // nominal 4 + borrowing limit 2
  model::PolicySet smaller = *policies_;
  for (model::ResourceGroup& rg : smaller.cluster_queues["team-a-gpu"].resource_groups) {
    for (model::FlavorQuotas& fq : rg.flavors) {
      for (model::ResourceQuota& q : fq.resources) {
        if (q.name == "nvidia.com/gpu") q.borrowing_limit = quantity::Quantity::FromUnits(1);
      }
    }
  }
  current = model::Seal(smaller);
  Answer denied = six_gpus();
  EXPECT_FALSE(denied.allowed());
  EXPECT_THAT(denied.message(),
              HasSubstr("needs 6 nvidia.com/gpu; ClusterQueue team-a-gpu can hold at most 5 (nominal 4 + borrowing "
                        "limit 1)"));
  current = model::Seal(*policies_);
  EXPECT_TRUE(six_gpus().allowed());
}

TEST_F(ValidateTest, DeniesExtendedResourcesWithRequestsBelowLimitsOrFractions) {
  Answer a = Validate(Job(1, Gpus(1), Gpus(2)));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train pod set main requests 1 nvidia.com/gpu but limits 2; extended resources cannot be "
            "overcommitted: make requests equal limits");
  Answer half = Validate(Job(1, {{"cpu", "1"}, {"nvidia.com/gpu", "0.5"}}));
  EXPECT_FALSE(half.allowed());
  EXPECT_EQ(half.message(),
            "gangkeeper: team-a/train pod set main requests 500m nvidia.com/gpu; extended resources are counted in "
            "whole units: use a whole number");
}

TEST_F(ValidateTest, DeniesPodGroupsWithInconsistentTotals) {
  auto pod = [](const std::string& name, const std::string& total) {
    ReviewSpec s;
    s.group = "";
    s.kind = "Pod";
    s.resource = "pods";
    s.name = name;
    s.object = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", "team-a"},
                  {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}, {"kueue.x-k8s.io/pod-group-name", "g"}}},
                  {"annotations", {{"kueue.x-k8s.io/pod-group-total-count", total}}}}},
                {"spec",
                 {{"schedulingGates", {{{"name", "gangkeeper.io/admission"}}}},
                  {"containers",
                   {{{"name", "w"},
                     {"image", "i"},
                     {"resources", {{"requests", {{"nvidia.com/gpu", "1"}}}, {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
    return s;
  };
  EXPECT_TRUE(Validate(pod("p0", "3")).allowed());
  EXPECT_TRUE(Validate(pod("p1", "3")).allowed());
  EXPECT_EQ(registry_->Find({"team-a", "g", workload::Kind::kPod, true})->pod_group_members, 2);
  Answer a = Validate(pod("p2", "4"));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: pod team-a/p2 says pod group g has 4 pods (kueue.x-k8s.io/pod-group-total-count) but its other "
            "pods say 3: give every pod of the group the same total");
}

TEST_F(ValidateTest, DeniesAnUnknownPriorityClass) {
  ReviewSpec s = Job(1, Gpus(1));
  s.object["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent";
  Answer a = Validate(s);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response["status"]["code"], 422);
  EXPECT_THAT(a.message(), AllOf(HasSubstr("gangkeeper: team-a/train: "), HasSubstr("\"urgent\""),
                                 HasSubstr("inference-critical"), HasSubstr("training-batch")));
}

TEST_F(ValidateTest, WarnsWhatItWaitsForInNumbers) {
  Answer a = Validate(Job(2, Gpus(1)));
  EXPECT_THAT(a.warnings(), Contains("gangkeeper: team-a-gpu uses 0 of 4 nvidia.com/gpu; this gang needs 2, which fits "
                                     "within nominal quota once it is its turn; 0 workloads ahead"));
}

TEST_F(ValidateTest, WarnsWhenTheGangMustBorrow) {
  Answer a = Validate(Job(6, Gpus(1)));
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains("gangkeeper: needs 6 nvidia.com/gpu, above ClusterQueue team-a-gpu's nominal 4: "
                                     "it waits until the rest can be borrowed in cohort gpu-shared and may be "
                                     "preempted when the lenders reclaim it"));
}

TEST_F(ValidateTest, WarnsAPreemptibleJobWithoutPersistentStorage) {
  ReviewSpec s = Job(1, Gpus(1));
  s.object["spec"]["template"]["spec"]["priorityClassName"] = "training-batch";
  Answer a = Validate(s);
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains(HasSubstr("gangkeeper: priority 10000 (training-batch) can be preempted by "
                                               "inference-critical, and no pod mounts a PersistentVolumeClaim")));
  // With a PVC for checkpoints the warning goes away.
  s.object["spec"]["template"]["spec"]["volumes"] = {{{"name", "ckpt"}, {"persistentVolumeClaim", {{"claimName", "c"}}}}};
  s.object["metadata"]["name"] = "with-pvc";
  s.name = "with-pvc";
  EXPECT_THAT(Validate(s).warnings(), Not(Contains(HasSubstr("PersistentVolumeClaim"))));
}

TEST_F(ValidateTest, WarnsWhenQueueAndPodPrioritiesDisagree) {
  ReviewSpec s = Job(1, Gpus(1));
  s.object["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "inference-critical";
  s.object["spec"]["template"]["spec"]["priorityClassName"] = "training-batch";
  Answer a = Validate(s);
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains("gangkeeper: queue priority 100000 (WorkloadPriorityClass inference-critical) "
                                     "disagrees with the pods' PriorityClass training-batch (10000): admission order "
                                     "and pod preemption would rank this job differently; use classes with the same "
                                     "value"));
}

TEST_F(ValidateTest, UnsuspendingAPendingWorkloadIsOnlyForTheController) {
  ASSERT_TRUE(Validate(Job(2, Gpus(1))).allowed());
  ReviewSpec update = Job(2, Gpus(1));
  update.operation = "UPDATE";
  update.old_object = update.object;
  update.object["spec"]["suspend"] = false;
  Answer a = Validate(update);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train has not been admitted (it is pending in ClusterQueue team-a-gpu); leave it "
            "suspended: gangkeeper releases the whole gang when it fits");
  update.username = options_.controller_username;
  EXPECT_TRUE(Validate(update).allowed());
}

TEST_F(ValidateTest, PendingPodSetChangesReachTheRegistry) {
  ASSERT_TRUE(Validate(Job(2, Gpus(1))).allowed());
  ReviewSpec update = Job(3, Gpus(1));
  update.operation = "UPDATE";
  update.old_object = Job(2, Gpus(1)).object;
  EXPECT_TRUE(Validate(update).allowed());
  EXPECT_EQ(registry_->Find({"team-a", "train"})->workload.pod_sets[0].count, 3);
}

TEST_F(ValidateTest, DeletionAndCompletionReachTheRegistry) {
  ASSERT_TRUE(Validate(Job(2, Gpus(1))).allowed());
  ReviewSpec status = Job(2, Gpus(1));
  status.operation = "UPDATE";
  status.sub_resource = "status";
  status.old_object = status.object;
  status.object["status"] = {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
  EXPECT_TRUE(Validate(status).allowed());
  EXPECT_EQ(registry_->Find({"team-a", "train"})->state, broker::WorkloadState::kFinished);
  ReviewSpec del = Job(2, Gpus(1));
  del.operation = "DELETE";
  del.old_object = del.object;
  del.object = nullptr;
  EXPECT_TRUE(Validate(del).allowed());
  EXPECT_FALSE(registry_->Find({"team-a", "train"}).has_value());
}

// The trust model (DESIGN §2): with a Kubernetes API, reviews are hints.
// A CREATE registers its workload as unconfirmed, by a claimed user;
// deletions, completions and changes wait for the API server's word.
class UntrustedValidateTest : public ValidateTest {
 protected:
  static WebhookOptions Untrusted() {
    WebhookOptions o;
    o.trust_reviews = false;
    o.max_unconfirmed = 2;
    return o;
  }
  Webhook untrusted_{[this] { return std::shared_ptr<const model::PolicySet>(policies_); }, *registry_, Untrusted()};
  Answer Check(const ReviewSpec& s) {
    WebhookResult r = untrusted_.Validate(ReviewBody(s));
    EXPECT_TRUE(r.error.ok()) << r.error;
    return ParseAnswer(r.body);
  }
};

TEST_F(UntrustedValidateTest, ACreateRegistersAnUnconfirmedWorkloadByAClaimedUser) {
  ASSERT_TRUE(Check(Job(2, Gpus(1))).allowed());
  auto record = registry_->Find({"team-a", "train"});
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->workload.unconfirmed);
  EXPECT_EQ(record->workload.submitted_by, "alice");
  EXPECT_TRUE(record->workload.submitter_claimed);
  EXPECT_EQ(registry_->UnconfirmedCount(), 1u);
}

TEST_F(UntrustedValidateTest, DeletionCompletionAndChangesWaitForTheApiServer) {
  ASSERT_TRUE(Check(Job(2, Gpus(1))).allowed());
  ReviewSpec update = Job(1, Gpus(1));
  update.operation = "UPDATE";
  update.old_object = Job(2, Gpus(1)).object;
  EXPECT_TRUE(Check(update).allowed());
  ReviewSpec status = Job(2, Gpus(1));
  status.operation = "UPDATE";
  status.sub_resource = "status";
  status.old_object = status.object;
  status.object["status"] = {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
  EXPECT_TRUE(Check(status).allowed());
  ReviewSpec del = Job(2, Gpus(1));
  del.operation = "DELETE";
  del.old_object = del.object;
  del.object = nullptr;
  EXPECT_TRUE(Check(del).allowed());
  auto record = registry_->Find({"team-a", "train"});
  ASSERT_TRUE(record.has_value()) << "a DELETE review removed the workload";
  EXPECT_EQ(record->state, broker::WorkloadState::kPending) << "a status review finished the workload";
  EXPECT_EQ(record->workload.pod_sets[0].count, 2) << "an UPDATE review changed the gang";
}

TEST_F(UntrustedValidateTest, PodGroupsAndCreatesPastTheCapRegisterNothingButAreAllowed) {
  ReviewSpec pod;
  pod.group = "";
  pod.kind = "Pod";
  pod.resource = "pods";
  pod.name = "group-0";
  pod.object = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", "group-0"},
                  {"namespace", "team-a"},
                  {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}, {"kueue.x-k8s.io/pod-group-name", "group"}}},
                  {"annotations", {{"kueue.x-k8s.io/pod-group-total-count", "2"}}}}},
                {"spec",
                 {{"containers",
                   {{{"name", "w"}, {"image", "cuda"}, {"resources", {{"requests", Gpus(1)}, {"limits", Gpus(1)}}}}}}}}};
  EXPECT_TRUE(Check(pod).allowed());
  EXPECT_FALSE(registry_->Find({"team-a", "group", workload::Kind::kPod, true}).has_value());
  for (const char* name : {"one", "two", "three"}) {
    ReviewSpec s = Job(1, Gpus(1));
    s.object["metadata"]["name"] = name;
    s.name = name;
    EXPECT_TRUE(Check(s).allowed()) << name;
  }
  EXPECT_EQ(registry_->UnconfirmedCount(), 2u);
  EXPECT_FALSE(registry_->Find({"team-a", "three"}).has_value());
}

// A registry that reports every workload as admitted (the broker's job).
class AdmittedRegistry final : public broker::WorkloadRegistry {
 public:
  absl::Status Register(const workload::Workload&, const std::string&) override { return absl::OkStatus(); }
  absl::Status Update(const workload::Workload&) override { return absl::OkStatus(); }
  absl::Status Remove(const broker::WorkloadKey&, const std::string&) override { return absl::OkStatus(); }
  absl::Status Finish(const broker::WorkloadKey&, const std::string&) override { return absl::OkStatus(); }
  std::optional<broker::WorkloadRecord> Find(const broker::WorkloadKey&) const override {
    broker::WorkloadRecord r;
    r.state = broker::WorkloadState::kAdmitted;
    r.cluster_queue = "team-a-gpu";
    return r;
  }
  int64_t PendingIn(const std::string&) const override { return 0; }
  std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string&) const override {
    return {{"nvidia.com/gpu", quantity::Quantity::FromUnits(4)}};
  }
};

TEST(ValidateAdmittedTest, AnAdmittedWorkloadKeepsItsQueueAndPodSets) {
  auto policies = Policies();
  AdmittedRegistry registry;
  Webhook hook([policies] { return std::shared_ptr<const model::PolicySet>(policies); }, registry, {});
  ReviewSpec resize = Job(3, Gpus(1));
  resize.operation = "UPDATE";
  resize.old_object = Job(2, Gpus(1)).object;
  Answer a = ParseAnswer(hook.Validate(ReviewBody(resize)).body);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "gangkeeper: team-a/train is admitted; its pod sets (counts and requests) cannot change while it holds "
            "quota: suspend it first");
  ReviewSpec move = Job(2, Gpus(1));
  move.operation = "UPDATE";
  move.old_object = move.object;
  move.object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other";
  Answer b = ParseAnswer(hook.Validate(ReviewBody(move)).body);
  EXPECT_FALSE(b.allowed());
  EXPECT_THAT(b.message(), HasSubstr("is admitted; its queue (kueue.x-k8s.io/queue-name) cannot change"));
  // Un-suspending an admitted workload is fine (gangkeeper released it).
  ReviewSpec release = Job(2, Gpus(1));
  release.operation = "UPDATE";
  release.old_object = release.object;
  release.object["spec"]["suspend"] = false;
  EXPECT_TRUE(ParseAnswer(hook.Validate(ReviewBody(release)).body).allowed());
}

TEST(ValidateAdmittedTest, WarnsThatQuotaIsInUse) {
  auto policies = Policies();
  AdmittedRegistry registry;
  Webhook hook([policies] { return std::shared_ptr<const model::PolicySet>(policies); }, registry, {});
  Answer a = ParseAnswer(hook.Validate(ReviewBody(Job(2, Gpus(1)))).body);
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_THAT(a.warnings(), Contains("gangkeeper: team-a-gpu uses 4 of 4 nvidia.com/gpu; this gang needs 2, more than "
                                     "is free within nominal quota, so it waits for quota to be released or borrowed; 0 "
                                     "workloads ahead"));
}

// A TrainJob's pods are its runtime's: with the runtime known it is judged
// and queued as any kind; with it not known (yet) it is allowed with a
// warning naming the runtime, never denied.
TEST(ValidateTrainJobTest, AnUnknownRuntimeIsAWarningNamingItNotADenial) {
  std::shared_ptr<model::PolicySet> policies = Policies();
  std::unique_ptr<broker::WorkloadRegistry> registry = broker::NewInMemoryRegistry();
  bool known = false;
  WebhookOptions options;
  options.training_runtime = [&known](const workload::TrainingRuntimeRef& ref,
                                      absl::string_view) -> std::optional<std::string> {
    if (!known || ref.name != "torch-distributed") return std::nullopt;
    return R"({"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template":
              {"spec": {"containers": [{"name": "node", "image": "pytorch"}]}}}}}]}}}})";
  };
  Webhook hook([&] { return std::shared_ptr<const model::PolicySet>(policies); }, *registry, options);
  ReviewSpec s;
  s.group = "trainer.kubeflow.org";
  s.version = "v1alpha1";
  s.kind = "TrainJob";
  s.resource = "trainjobs";
  s.object = {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
              {"kind", "TrainJob"},
              {"metadata",
               {{"name", "train"}, {"namespace", "team-a"}, {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}}},
              {"spec",
               {{"suspend", true},
                {"runtimeRef", {{"name", "torch-distributed"}}},
                {"trainer",
                 {{"numNodes", 2},
                  {"resourcesPerNode", {{"requests", Gpus(1)}, {"limits", Gpus(1)}}}}}}}};
  WebhookResult unknown = hook.Validate(ReviewBody(s));
  ASSERT_TRUE(unknown.error.ok()) << unknown.error;
  Answer a = ParseAnswer(unknown.body);
  EXPECT_TRUE(a.allowed());
  EXPECT_THAT(a.warnings(), Contains(AllOf(HasSubstr("team-a/train"),
                                           HasSubstr("ClusterTrainingRuntime \"torch-distributed\" is not known"))));

  known = true;
  s.uid = "3f0f9a55-1b4e-4b8f-9e4c-6a1d1c2b7e12";
  WebhookResult judged = hook.Validate(ReviewBody(s));
  ASSERT_TRUE(judged.error.ok()) << judged.error;
  Answer b = ParseAnswer(judged.body);
  EXPECT_TRUE(b.allowed());
  EXPECT_THAT(b.warnings(), Contains(HasSubstr("(2 pods) is suspended and queued in LocalQueue gpu-queue")));
}

}  // namespace
}  // namespace gangkeeper::admission
