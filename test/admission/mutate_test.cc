// /mutate: suspension of every managed kind, idempotence, and patches that
// real tools apply (kubectl patch --local --type=json and nlohmann's
// RFC 6902 applier).
#include <fstream>

#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/model/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/admission/review_builder.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::admission {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;

std::shared_ptr<const model::PolicySet> ExamplePolicies() {
  static auto* policies = [] {
    auto loaded = model::LoadPolicies(std::string(GK_SOURCE_DIR) + "/policies");
    return new std::shared_ptr<const model::PolicySet>(
        std::make_shared<model::PolicySet>(loaded.ok() ? loaded->policies : model::PolicySet{}));
  }();
  return *policies;
}

nlohmann::json Labels() { return {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}; }

nlohmann::json PodSpec() {
  return {{"restartPolicy", "Never"},
          {"containers",
           {{{"name", "worker"},
             {"image", "cuda"},
             {"resources", {{"requests", {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}},
                            {"limits", {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}}}}}}}};
}

struct KindCase {
  const char* name;
  ReviewSpec spec;
  // JSON pointer to the suspend switch after mutation, and its value.
  const char* suspended_at;
};

std::vector<KindCase> Cases() {
  std::vector<KindCase> cases;
  {
    ReviewSpec s;
    s.object = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata", {{"name", "train"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec", {{"parallelism", 2}, {"completions", 2}, {"suspend", false}, {"template", {{"spec", PodSpec()}}}}}};
    cases.push_back({"Job", s, "/spec/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "kubeflow.org";
    s.kind = "PyTorchJob";
    s.resource = "pytorchjobs";
    s.object = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "PyTorchJob"},
                {"metadata", {{"name", "ddp"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec",
                 {{"pytorchReplicaSpecs",
                   {{"Master", {{"replicas", 1}, {"template", {{"spec", PodSpec()}}}}},
                    {"Worker", {{"replicas", 3}, {"template", {{"spec", PodSpec()}}}}}}}}}};
    cases.push_back({"PyTorchJob without runPolicy", s, "/spec/runPolicy/suspend"});
    s.object["spec"]["runPolicy"] = {{"cleanPodPolicy", "None"}};
    cases.push_back({"PyTorchJob with runPolicy", s, "/spec/runPolicy/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "kubeflow.org";
    s.kind = "TFJob";
    s.resource = "tfjobs";
    s.object = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "TFJob"},
                {"metadata", {{"name", "tf"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec", {{"tfReplicaSpecs", {{"Worker", {{"replicas", 2}, {"template", {{"spec", PodSpec()}}}}}}}}}};
    cases.push_back({"TFJob", s, "/spec/runPolicy/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "jobset.x-k8s.io";
    s.version = "v1alpha2";
    s.kind = "JobSet";
    s.resource = "jobsets";
    s.object = {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
                {"kind", "JobSet"},
                {"metadata", {{"name", "js"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec",
                 {{"replicatedJobs",
                   {{{"name", "workers"},
                     {"replicas", 2},
                     {"template", {{"spec", {{"parallelism", 1}, {"template", {{"spec", PodSpec()}}}}}}}}}}}}};
    cases.push_back({"JobSet", s, "/spec/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "ray.io";
    s.kind = "RayJob";
    s.resource = "rayjobs";
    s.object = {{"apiVersion", "ray.io/v1"},
                {"kind", "RayJob"},
                {"metadata", {{"name", "rj"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec",
                 {{"entrypoint", "python x.py"},
                  {"rayClusterSpec",
                   {{"headGroupSpec", {{"template", {{"spec", PodSpec()}}}}},
                    {"workerGroupSpecs",
                     {{{"groupName", "gpu"}, {"replicas", 2}, {"template", {{"spec", PodSpec()}}}}}}}}}}};
    cases.push_back({"RayJob", s, "/spec/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "";
    s.kind = "Pod";
    s.resource = "pods";
    s.object = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", "p"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec", PodSpec()}};
    cases.push_back({"Pod without gates", s, "/spec/schedulingGates"});
    s.object["spec"]["schedulingGates"] = {{{"name", "example.com/other"}}};
    cases.push_back({"Pod with another gate", s, "/spec/schedulingGates"});
  }
  // Issue #25's kinds.
  {
    ReviewSpec s;
    s.group = "kubeflow.org";
    s.kind = "JAXJob";
    s.resource = "jaxjobs";
    s.object = {{"apiVersion", "kubeflow.org/v1"},
                {"kind", "JAXJob"},
                {"metadata", {{"name", "jax"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec", {{"jaxReplicaSpecs", {{"Worker", {{"replicas", 2}, {"template", {{"spec", PodSpec()}}}}}}}}}};
    cases.push_back({"JAXJob", s, "/spec/runPolicy/suspend"});
  }
  {
    ReviewSpec s;
    s.group = "leaderworkerset.x-k8s.io";
    s.kind = "LeaderWorkerSet";
    s.resource = "leaderworkersets";
    s.object = {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
                {"kind", "LeaderWorkerSet"},
                {"metadata", {{"name", "lws"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec",
                 {{"replicas", 2},
                  {"leaderWorkerTemplate",
                   {{"size", 2}, {"leaderTemplate", {{"spec", PodSpec()}}}, {"workerTemplate", {{"spec", PodSpec()}}}}}}}};
    cases.push_back({"LeaderWorkerSet", s, "/spec/replicas"});
  }
  for (const char* kind : {"StatefulSet", "Deployment"}) {
    ReviewSpec s;
    s.group = "apps";
    s.kind = kind;
    s.resource = std::string(kind) == "StatefulSet" ? "statefulsets" : "deployments";
    s.object = {{"apiVersion", "apps/v1"},
                {"kind", kind},
                {"metadata", {{"name", "web"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec", {{"replicas", 3}, {"template", {{"spec", PodSpec()}}}}}};
    cases.push_back({kind, s, "/spec/replicas"});
    s.object["spec"].erase("replicas");
    s.object["metadata"]["annotations"] = {{"a", "b"}};
    cases.push_back({kind, s, "/spec/replicas"});
  }
  {
    ReviewSpec s;
    s.group = "workload.codeflare.dev";
    s.kind = "AppWrapper";
    s.resource = "appwrappers";
    s.object = {{"apiVersion", "workload.codeflare.dev/v1beta2"},
                {"kind", "AppWrapper"},
                {"metadata", {{"name", "aw"}, {"namespace", "team-a"}, {"labels", Labels()}}},
                {"spec",
                 {{"components",
                   {{{"template",
                      {{"apiVersion", "batch/v1"},
                       {"kind", "Job"},
                       {"spec", {{"parallelism", 2}, {"template", {{"spec", PodSpec()}}}}}}}}}}}}};
    cases.push_back({"AppWrapper", s, "/spec/suspend"});
  }
  return cases;
}

Answer Mutate(const ReviewSpec& spec, WebhookOptions options = {}) {
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([] { return ExamplePolicies(); }, *registry, options);
  WebhookResult r = hook.Mutate(ReviewBody(spec));
  EXPECT_TRUE(r.error.ok()) << r.error;
  return ParseAnswer(r.body);
}

TEST(MutateTest, SuspendsEveryManagedKindWithPatchesKubectlApplies) {
  for (const KindCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    Answer a = Mutate(c.spec);
    EXPECT_TRUE(a.allowed());
    EXPECT_EQ(a.response["uid"], c.spec.uid);
    ASSERT_FALSE(a.patch.is_null());
    EXPECT_EQ(a.response["patchType"], "JSONPatch");
    nlohmann::json strict = c.spec.object.patch(a.patch);  // RFC 6902, throws on a bad patch
    EXPECT_TRUE(Suspended(strict, c.suspended_at));
    nlohmann::json via_kubectl = KubectlPatch(c.spec.object, a.patch);
    EXPECT_TRUE(Suspended(via_kubectl, c.suspended_at)) << via_kubectl.dump();
    EXPECT_EQ(strict, via_kubectl);
    // Other gates survive.
    if (c.spec.object["spec"].contains("schedulingGates")) {
      EXPECT_EQ(strict["spec"]["schedulingGates"].size(), 2u);
    }
    // Reinvocation: the mutated object needs nothing more.
    ReviewSpec again = c.spec;
    again.object = strict;
    Answer second = Mutate(again);
    EXPECT_TRUE(second.allowed());
    EXPECT_TRUE(second.patch.is_null()) << second.patch.dump();
  }
}

TEST(MutateTest, LeavesWhatItDoesNotManageAlone) {
  ReviewSpec unlabelled = Cases()[0].spec;
  unlabelled.object["metadata"].erase("labels");
  ReviewSpec deployment = Cases()[0].spec;  // (a DaemonSet: no gang to hold)
  deployment.group = "apps";
  deployment.kind = "DaemonSet";
  auto named = [](const std::string& name) {
    for (const KindCase& c : Cases()) {
      if (c.name == name) return c.spec;
    }
    ADD_FAILURE() << "no case " << name;
    return ReviewSpec();
  };
  ReviewSpec owned = named("Pod with another gate");
  owned.object["metadata"]["ownerReferences"] = {
      {{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "u"}, {"controller", true}}};
  ReviewSpec update = Cases()[0].spec;
  update.operation = "UPDATE";
  update.old_object = update.object;
  // A LeaderWorkerSet's StatefulSet is held through the LeaderWorkerSet.
  ReviewSpec lws_sts = named("StatefulSet");
  lws_sts.object["metadata"]["ownerReferences"] = {{{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
                                                    {"kind", "LeaderWorkerSet"},
                                                    {"name", "lws"},
                                                    {"uid", "u"},
                                                    {"controller", true}}};
  // A Deployment's pod (its ReplicaSet's, with pod-template-hash).
  ReviewSpec deployment_pod = named("Pod without gates");
  deployment_pod.object["metadata"]["labels"]["pod-template-hash"] = "7c9d";
  deployment_pod.object["metadata"]["ownerReferences"] = {
      {{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", "web-7c9d"}, {"uid", "u"}, {"controller", true}}};
  // An AppWrapper's component (here a Job, queue label and all) is held
  // through the AppWrapper.
  ReviewSpec wrapped = Cases()[0].spec;
  wrapped.object["metadata"]["ownerReferences"] = {{{"apiVersion", "workload.codeflare.dev/v1beta2"},
                                                    {"kind", "AppWrapper"},
                                                    {"name", "aw"},
                                                    {"uid", "u"},
                                                    {"controller", true}}};
  for (const ReviewSpec& s : {unlabelled, deployment, owned, update, lws_sts, deployment_pod, wrapped}) {
    Answer a = Mutate(s);
    EXPECT_TRUE(a.allowed());
    EXPECT_TRUE(a.patch.is_null()) << a.patch.dump();
  }
}

TEST(MutateTest, ManageWithoutQueueNameAddsTheDefaultQueueLabel) {
  auto policies = std::make_shared<model::PolicySet>(*ExamplePolicies());
  model::LocalQueue def;
  def.meta.name = "default";
  def.meta.namespace_name = "team-a";
  def.cluster_queue = "team-a-gpu";
  policies->local_queues[{"team-a", "default"}] = def;
  auto registry = broker::NewInMemoryRegistry();
  WebhookOptions options;
  options.manage_jobs_without_queue_name = true;
  Webhook hook([policies] { return policies; }, *registry, options);
  ReviewSpec s = Cases()[0].spec;
  s.object["metadata"].erase("labels");
  Answer a = ParseAnswer(hook.Mutate(ReviewBody(s)).body);
  ASSERT_FALSE(a.patch.is_null());
  nlohmann::json out = s.object.patch(a.patch);
  EXPECT_EQ(out["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "default");
  EXPECT_TRUE(out["spec"]["suspend"].get<bool>());
  // A namespace without a default LocalQueue is left alone.
  s.namespace_name = "team-b";
  s.object["metadata"]["namespace"] = "team-b";
  EXPECT_TRUE(ParseAnswer(hook.Mutate(ReviewBody(s)).body).patch.is_null());
}

TEST(MalformedReviewTest, GetsA400AndTheServerKeepsServing) {
  auto registry = broker::NewInMemoryRegistry();
  Webhook hook([] { return ExamplePolicies(); }, *registry, {});
  nlohmann::json good = nlohmann::json::parse(ReviewBody(Cases()[0].spec));
  std::vector<std::pair<std::string, std::string>> bodies = {
      {"not JSON", "this is not json"},
      {"empty", ""},
      {"wrong apiVersion", [&] { auto j = good; j["apiVersion"] = "admission.k8s.io/v1beta1"; return j.dump(); }()},
      {"missing request", [&] { auto j = good; j.erase("request"); return j.dump(); }()},
      {"missing uid", [&] { auto j = good; j["request"].erase("uid"); return j.dump(); }()},
      {"object not an object", [&] { auto j = good; j["request"]["object"] = "job"; return j.dump(); }()},
      {"3 MiB of nesting", std::string(3 << 20, '[')},
      {"deep object nesting", [] {
         std::string s;
         for (int i = 0; i < 100000; ++i) s += R"({"a":)";
         return s;
       }()},
      {"array", "[1,2,3]"},
  };
  for (const auto& [name, body] : bodies) {
    SCOPED_TRACE(name);
    for (const WebhookResult& r : {hook.Mutate(body), hook.Validate(body)}) {
      // The route adapter answers this status (400) through server::ErrorResponse.
      EXPECT_EQ(r.error.code(), absl::StatusCode::kInvalidArgument) << r.error;
      EXPECT_FALSE(r.error.message().empty());
      EXPECT_STREQ(r.outcome, "bad_request");
    }
  }
  // Huge numbers inside a valid review: a clean denial, not a crash.
  ReviewSpec huge = Cases()[0].spec;
  huge.object["spec"]["parallelism"] = 1e300;
  WebhookResult r = hook.Validate(ReviewBody(huge));
  EXPECT_TRUE(r.error.ok()) << r.error;
  EXPECT_FALSE(ParseAnswer(r.body).allowed());
  EXPECT_THAT(ParseAnswer(r.body).message(), HasSubstr("parallelism"));
  // And a good review still works afterwards.
  EXPECT_TRUE(hook.Mutate(ReviewBody(Cases()[0].spec)).error.ok());
}

}  // namespace
}  // namespace gangkeeper::admission
