// Issue #25's job kinds through the real binary and the fake API server,
// the same checks the existing kinds have: each is held at creation by
// /mutate, released with the flavor's nodeSelector and tolerations in every
// pod template, preempted whole with its templates restored (and held
// again), released again when the preemptor ends, and its end (a JAXJob's
// Succeeded condition; an AppWrapper's Succeeded phase; a LeaderWorkerSet's,
// StatefulSet's or Deployment's deletion, as they run until deleted) frees
// its quota for the next gang. An AppWrapper's placement is checked where
// its controller takes it from: spec.components[i].podSetInfos[j]. A
// TrainJob's pods are its ClusterTrainingRuntime's (seeded first); its
// placement is checked in gangkeeper's spec.runtimePatches entry, which
// preemption takes out again.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "test/integration/kube_fixture.h"

namespace gangkeeper::kube_it {
namespace {

using ::testing::HasSubstr;

json GpuTemplate(int gpus) { return {{"spec", {{"containers", json::array({GpuContainer(gpus)})}}}}; }

struct KindCase {
  std::string kind, group, version, resource;
  json object;  // 6 GPUs in all: team-a's whole reach
  std::vector<std::string> templates;  // every pod template (JSON pointers)
  // Held back: a suspend flag, or 0 replicas with the count kept.
  bool replicas_hold = false;
  // `templates` point at the placement itself (an AppWrapper's podSetInfos
  // entries), not at pod templates whose spec takes it.
  bool placement_beside = false;
  // The status that ends it; null: it runs until deleted (replicas_hold)
  // or a Succeeded condition.
  json finished_status;
  // Seeded before the object (a TrainJob's ClusterTrainingRuntime): the
  // collection and the object; null: none.
  std::string runtime_collection;
  json runtime;
  std::string collection() const {
    return absl::StrCat("/apis/", group, "/", version, "/namespaces/team-a/", resource);
  }
  std::string path() const { return absl::StrCat(collection(), "/", object["metadata"]["name"].get<std::string>()); }
};

json Meta(const std::string& name) {
  return {{"name", name},
          {"namespace", "team-a"},
          {"uid", "uid-" + name},
          {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}, {"kueue.x-k8s.io/priority-class", "training-batch"}}}};
}

std::vector<KindCase> Cases() {
  std::vector<KindCase> out;
  out.push_back({"JAXJob", "kubeflow.org", "v1", "jaxjobs",
                 {{"apiVersion", "kubeflow.org/v1"},
                  {"kind", "JAXJob"},
                  {"metadata", Meta("jax")},
                  {"spec",
                   {{"jaxReplicaSpecs",
                     {{"Worker", {{"replicas", 3}, {"restartPolicy", "OnFailure"}, {"template", GpuTemplate(2)}}}}}}}},
                 {"/spec/jaxReplicaSpecs/Worker/template"}});
  out.push_back({"LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                 {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
                  {"kind", "LeaderWorkerSet"},
                  {"metadata", Meta("lws")},
                  {"spec",
                   {{"replicas", 1},
                    {"leaderWorkerTemplate",
                     {{"size", 3}, {"leaderTemplate", GpuTemplate(2)}, {"workerTemplate", GpuTemplate(2)}}}}}},
                 {"/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"},
                 true});
  for (const char* kind : {"StatefulSet", "Deployment"}) {
    const bool sts = std::string(kind) == "StatefulSet";
    json spec = {{"replicas", 3}, {"selector", {{"matchLabels", {{"app", "web"}}}}}, {"template", GpuTemplate(2)}};
    spec["template"]["metadata"] = {{"labels", {{"app", "web"}}}};
    if (sts) spec["serviceName"] = "web";
    out.push_back({kind, "apps", "v1", sts ? "statefulsets" : "deployments",
                   {{"apiVersion", "apps/v1"}, {"kind", kind}, {"metadata", Meta(sts ? "web-sts" : "web-deploy")},
                    {"spec", spec}},
                   {"/spec/template"},
                   true});
  }
  // An AppWrapper of a PyTorchJob as the AppWrapper project's sample wraps
  // it: no podSets declared, so they are inferred (Master, then Worker);
  // the placement goes to spec.components[0].podSetInfos, which the
  // AppWrapper controller copies into the templates when it creates the
  // PyTorchJob.
  json pytorch = {{"apiVersion", "kubeflow.org/v1"},
                  {"kind", "PyTorchJob"},
                  {"metadata", {{"name", "pytorch-simple"}}},
                  {"spec",
                   {{"pytorchReplicaSpecs",
                     {{"Master", {{"replicas", 1}, {"restartPolicy", "OnFailure"}, {"template", GpuTemplate(2)}}},
                      {"Worker", {{"replicas", 2}, {"restartPolicy", "OnFailure"}, {"template", GpuTemplate(2)}}}}}}}};
  KindCase aw{"AppWrapper", "workload.codeflare.dev", "v1beta2", "appwrappers",
              {{"apiVersion", "workload.codeflare.dev/v1beta2"},
               {"kind", "AppWrapper"},
               {"metadata", Meta("wrapped")},
               {"spec", {{"components", json::array({{{"template", pytorch}}})}}}},
              {"/spec/components/0/podSetInfos/0", "/spec/components/0/podSetInfos/1"}};
  aw.placement_beside = true;
  aw.finished_status = {{"phase", "Succeeded"}};
  out.push_back(aw);
  // A TrainJob of 3 nodes of 2 GPUs, run with a ClusterTrainingRuntime as
  // the Trainer's torch-distributed one: one replicated job, the trainer
  // step. Its placement goes to gangkeeper's spec.runtimePatches entry.
  KindCase tj{"TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs",
              {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
               {"kind", "TrainJob"},
               {"metadata", Meta("torch")},
               {"spec",
                {{"runtimeRef", {{"name", "torch-distributed"}}},
                 {"trainer",
                  {{"numNodes", 3},
                   {"resourcesPerNode",
                    {{"requests", {{"nvidia.com/gpu", "2"}}}, {"limits", {{"nvidia.com/gpu", "2"}}}}}}}}}},
              {"/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/template"}};
  tj.finished_status = {{"conditions", json::array({{{"type", "Complete"}, {"status", "True"}}})}};
  tj.runtime_collection = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes";
  tj.runtime = {
      {"apiVersion", "trainer.kubeflow.org/v1alpha1"},
      {"kind", "ClusterTrainingRuntime"},
      {"metadata", {{"name", "torch-distributed"}}},
      {"spec",
       {{"mlPolicy", {{"numNodes", 1}, {"torch", {{"numProcPerNode", "auto"}}}}},
        {"template",
         {{"spec",
           {{"replicatedJobs",
             json::array({{{"name", "node"},
                           {"template",
                            {{"metadata", {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
                             {"spec",
                              {{"template",
                                {{"spec",
                                  {{"containers",
                                    json::array({{{"name", "node"},
                                                  {"image", "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"},
                                                  {"command", json::array({"torchrun"})}}})}}}}}}}}}}})}}}}}}}};
  out.push_back(tj);
  return out;
}

class KindsIntegrationTest : public KubeIntegrationTest, public ::testing::WithParamInterface<KindCase> {
 protected:
  json Object() {
    auto o = fake_->Get(GetParam().path());
    return o.ok() ? *o : json();
  }
  bool Held(const json& o) {
    if (!o.is_object()) return false;
    if (GetParam().replicas_hold) {
      return o["spec"].value("replicas", -1) == 0 && o["metadata"].contains("annotations") &&
             o["metadata"]["annotations"].contains("gangkeeper.io/held-replicas");
    }
    if (GetParam().group == "kubeflow.org") return o["spec"]["runPolicy"].value("suspend", false);
    return o["spec"].value("suspend", false);
  }
  bool ReleasedObject() {
    json o = Object();
    return o.is_object() && !Held(o);
  }
  // Every pod template carries the flavor's placement (policies/: nvidia-gpu
  // has nodeLabels accelerator=nvidia and a toleration of sku).
  // Where the placement of the template at `t` is.
  const json& PlacementAt(const json& o, const std::string& t) {
    const json& at = o.at(json::json_pointer(t));
    return GetParam().placement_beside ? at : at.at("spec");
  }
  void ExpectPlacedEverywhere(const json& o) {
    for (const std::string& t : GetParam().templates) {
      SCOPED_TRACE(t);
      ASSERT_TRUE(o.contains(json::json_pointer(t))) << o.dump();
      const json& spec = PlacementAt(o, t);
      EXPECT_EQ(spec["nodeSelector"].value("accelerator", ""), "nvidia") << spec.dump();
      ASSERT_TRUE(spec.contains("tolerations") && spec["tolerations"].is_array()) << spec.dump();
      EXPECT_EQ(spec["tolerations"][0]["key"], "sku");
    }
  }
  void ExpectRestoredEverywhere(const json& o) {
    for (const std::string& t : GetParam().templates) {
      SCOPED_TRACE(t);
      if (!o.contains(json::json_pointer(t))) continue;  // nothing there: nothing placed
      const json& spec = PlacementAt(o, t);
      EXPECT_FALSE(spec.contains("nodeSelector") && !spec["nodeSelector"].empty()) << spec.dump();
      EXPECT_FALSE(spec.contains("tolerations") && !spec["tolerations"].empty()) << spec.dump();
    }
    EXPECT_FALSE(o["metadata"].contains("annotations") &&
                 o["metadata"]["annotations"].contains("gangkeeper.io/admitted-flavors"));
  }
};

TEST_P(KindsIntegrationTest, HeldReleasedPlacedPreemptedRestoredAndItsEndFreesQuota) {
  const KindCase& c = GetParam();
  if (!c.runtime.is_null()) {
    ASSERT_THAT(fake_->Create(c.runtime_collection, c.runtime), IsOk());
  }
  json stored = Submit(c.object, c.group, c.version, c.kind, c.resource, c.collection());
  ASSERT_TRUE(Held(stored)) << "/mutate did not hold it back: " << stored.dump();
  if (c.replicas_hold) {
    EXPECT_EQ(stored["metadata"]["annotations"]["gangkeeper.io/held-replicas"],
              absl::StrCat(c.object["spec"]["replicas"].get<int>()))
        << "the count it asks for is kept";
  }

  // Released whole, placed in every template.
  ASSERT_TRUE(WaitFor([&] { return ReleasedObject(); })) << server_->Stderr();
  json released = Object();
  ExpectPlacedEverywhere(released);
  if (c.replicas_hold) {
    EXPECT_EQ(released["spec"]["replicas"], c.object["spec"]["replicas"]);
    EXPECT_FALSE(released["metadata"]["annotations"].contains("gangkeeper.io/held-replicas"));
  }

  // A higher priority Job needs 2 of the 6 GPUs: the whole gang is
  // preempted, held again, its templates put back.
  SubmitJob(Job("urgent", 2, 1, "inference-critical"));
  ASSERT_TRUE(WaitFor([&] { return Released("urgent"); })) << server_->Stderr();
  ASSERT_TRUE(WaitFor([&] { return Held(Object()); })) << Object().dump();
  json preempted = Object();
  ExpectRestoredEverywhere(preempted);
  if (c.replicas_hold) {
    EXPECT_EQ(preempted["metadata"]["annotations"]["gangkeeper.io/held-replicas"],
              absl::StrCat(c.object["spec"]["replicas"].get<int>()));
  }

  // The preemptor ends: released again, placed again.
  Complete("urgent");
  ASSERT_TRUE(WaitFor([&] { return ReleasedObject(); })) << server_->Stderr();
  ExpectPlacedEverywhere(Object());

  // Its end frees the quota: a Job of all 6 GPUs is released.
  SubmitJob(Job("after", 3, 2));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(Released("after")) << "the gang still holds the GPUs";
  if (c.replicas_hold) {
    ASSERT_THAT(fake_->Delete(c.path()), IsOk());
  } else if (!c.finished_status.is_null()) {
    json done = Object();
    done["status"] = c.finished_status;
    ASSERT_THAT(fake_->Replace(c.path(), done), IsOk());
  } else {
    json done = Object();
    done["status"]["conditions"] = json::array({{{"type", "Succeeded"}, {"status", "True"}}});
    ASSERT_THAT(fake_->Replace(c.path(), done), IsOk());
  }
  ASSERT_TRUE(WaitFor([&] { return Released("after"); })) << server_->Stderr();
}

INSTANTIATE_TEST_SUITE_P(NewKinds, KindsIntegrationTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<KindCase>& param) { return param.param.kind; });

// A TrainJob created before its runtime: /validate allows it with a
// warning (Submit checks the allow), it stays held, and once the runtime
// shows (the cache tells the reconciler, which reads the TrainJobs again)
// it is queued and released with its placement.
class TrainJobRuntimeIntegrationTest : public KubeIntegrationTest {};

TEST_F(TrainJobRuntimeIntegrationTest, ATrainJobWaitsForItsRuntimeThenRuns) {
  const KindCase c = Cases().back();
  ASSERT_EQ(c.kind, "TrainJob");
  json stored = Submit(c.object, c.group, c.version, c.kind, c.resource, c.collection());
  ASSERT_TRUE(stored.is_object() && stored["spec"].value("suspend", false)) << stored.dump();
  absl::SleepFor(absl::Milliseconds(500));
  auto held = fake_->Get(c.path());
  ASSERT_THAT(held, IsOk());
  EXPECT_TRUE((*held)["spec"].value("suspend", false)) << "released without its runtime";
  EXPECT_THAT(server_->Stderr(), HasSubstr("waits for its runtime"));

  ASSERT_THAT(fake_->Create(c.runtime_collection, c.runtime), IsOk());
  ASSERT_TRUE(WaitFor([&] {
    auto o = fake_->Get(c.path());
    return o.ok() && !(*o)["spec"].value("suspend", true);
  })) << server_->Stderr();
  auto released = fake_->Get(c.path());
  ASSERT_THAT(released, IsOk());
  const json& spec = released->at(json::json_pointer(c.templates[0])).at("spec");
  EXPECT_EQ(spec["nodeSelector"].value("accelerator", ""), "nvidia") << released->dump();
}

}  // namespace
}  // namespace gangkeeper::kube_it
