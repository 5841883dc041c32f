// gangkeeper: the kinds table's hold operations (hold.h), over every kind.
//
// Each managed kind is held, tested and released through the same three
// operations; these tables pin, per kind, the exact JSON patch operations
// the webhook and the actuator send, for every shape of object they meet.
#include "gangkeeper/workload/hold.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/workload/extract.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

using ::testing::IsEmpty;

// Where each kind's hold lives, written out independently of kinds.cc.
struct HoldRow {
  Kind kind;
  const char* pointer;
  HoldMethod method;
};

const std::vector<HoldRow>& ExpectedHolds() {
  static const auto* rows = new std::vector<HoldRow>{
      {Kind::kJob, "/spec/suspend", HoldMethod::kSuspendFlag},
      {Kind::kPyTorchJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kTFJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kMPIJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kXGBoostJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kPaddleJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kJobSet, "/spec/suspend", HoldMethod::kSuspendFlag},
      {Kind::kRayJob, "/spec/suspend", HoldMethod::kSuspendFlag},
      {Kind::kRayCluster, "/spec/suspend", HoldMethod::kSuspendFlag},
      {Kind::kPod, "/spec/schedulingGates", HoldMethod::kGate},
      {Kind::kJAXJob, "/spec/runPolicy/suspend", HoldMethod::kSuspendFlag},
      {Kind::kLeaderWorkerSet, "/spec/replicas", HoldMethod::kReplicas},
      {Kind::kStatefulSet, "/spec/replicas", HoldMethod::kReplicas},
      {Kind::kDeployment, "/spec/replicas", HoldMethod::kReplicas},
      {Kind::kAppWrapper, "/spec/suspend", HoldMethod::kSuspendFlag},
      {Kind::kTrainJob, "/spec/suspend", HoldMethod::kSuspendFlag},
  };
  return *rows;
}

TEST(HoldTest, EveryKindSaysWhereItsHoldLives) {
  ASSERT_EQ(ExpectedHolds().size(), ManagedKinds().size());
  for (const HoldRow& row : ExpectedHolds()) {
    const KindInfo& info = InfoFor(row.kind);
    EXPECT_EQ(info.hold.pointer, row.pointer) << info.name;
    EXPECT_EQ(info.hold.method, row.method) << info.name;
  }
}

PatchOp Add(const std::string& path, const std::string& value) { return PatchOp{"add", path, value}; }

// One object shape and what each operation makes of it, for the flag kinds
// at spec.suspend, at spec.runPolicy.suspend, and for the gate.
struct OpsCase {
  const char* name;
  const char* spec_suspend;  // the object for a kind with /spec/suspend
  const char* run_policy;    // ... with /spec/runPolicy/suspend
  bool held;
  std::vector<PatchOp> hold_spec, hold_run_policy;
  std::vector<PatchOp> release_spec, release_run_policy;
};

std::vector<OpsCase> FlagCases() {
  return {
      {"no spec",
       R"({"metadata": {}})",
       R"({"metadata": {}})",
       false,
       {Add("/spec", R"({"suspend":true})")},
       {Add("/spec", R"({"runPolicy":{"suspend":true}})")},
       {},
       {}},
      {"spec is not an object",
       R"({"spec": 3})",
       R"({"spec": []})",
       false,
       {Add("/spec", R"({"suspend":true})")},
       {Add("/spec", R"({"runPolicy":{"suspend":true}})")},
       {},
       {}},
      {"flag absent",
       R"({"spec": {}})",
       R"({"spec": {"runPolicy": {"cleanPodPolicy": "None"}}})",
       false,
       {Add("/spec/suspend", "true")},
       {Add("/spec/runPolicy/suspend", "true")},
       {},
       {}},
      {"run policy absent",
       R"({"spec": {"suspend": false}})",
       R"({"spec": {}})",
       false,
       {Add("/spec/suspend", "true")},
       {Add("/spec/runPolicy", R"({"suspend":true})")},
       {},
       {}},
      {"run policy malformed",
       R"({"spec": {"suspend": "true"}})",
       R"({"spec": {"runPolicy": "x"}})",
       false,
       {Add("/spec/suspend", "true")},
       {Add("/spec/runPolicy", R"({"suspend":true})")},
       {},
       {}},
      {"held",
       R"({"spec": {"suspend": true}})",
       R"({"spec": {"runPolicy": {"suspend": true}}})",
       true,
       {},
       {},
       {Add("/spec/suspend", "false")},
       {Add("/spec/runPolicy/suspend", "false")}},
  };
}

TEST(HoldTest, FlagKindsHoldAndReleaseWhereTheTableSays) {
  for (const HoldRow& row : ExpectedHolds()) {
    if (row.method != HoldMethod::kSuspendFlag) continue;
    const KindInfo& info = InfoFor(row.kind);
    const bool run_policy = std::string(row.pointer) == "/spec/runPolicy/suspend";
    for (const OpsCase& c : FlagCases()) {
      SCOPED_TRACE(absl::StrCat(info.name, ": ", c.name));
      rapidjson::Document doc = ParseJson(run_policy ? c.run_policy : c.spec_suspend);
      EXPECT_EQ(IsHeld(doc, info), c.held);
      EXPECT_EQ(HoldOps(doc, info), run_policy ? c.hold_run_policy : c.hold_spec);
      EXPECT_EQ(ReleaseOps(doc, info), run_policy ? c.release_run_policy : c.release_spec);
    }
  }
}

TEST(HoldTest, PodsAreHeldByGangkeepersSchedulingGate) {
  const KindInfo& pod = InfoFor(Kind::kPod);
  const std::string gate = R"({"name":"gangkeeper.io/admission"})";
  struct Case {
    const char* name;
    const char* object;
    bool held;
    std::vector<PatchOp> hold, release;
  };
  const std::vector<Case> cases = {
      {"no spec", R"({})", false, {Add("/spec", absl::StrCat(R"({"schedulingGates":[)", gate, "]}"))}, {}},
      {"no gates", R"({"spec": {}})", false, {Add("/spec/schedulingGates", absl::StrCat("[", gate, "]"))}, {}},
      {"gates not a list",
       R"({"spec": {"schedulingGates": {}}})",
       false,
       {Add("/spec/schedulingGates", absl::StrCat("[", gate, "]"))},
       {}},
      {"another gate",
       R"({"spec": {"schedulingGates": [{"name": "example.com/other"}]}})",
       false,
       {Add("/spec/schedulingGates/-", gate)},
       {}},
      {"gated second",
       R"({"spec": {"schedulingGates": [{"name": "x"}, {"name": "gangkeeper.io/admission"}]}})",
       true,
       {},
       {PatchOp{"test", "/spec/schedulingGates/1/name", R"("gangkeeper.io/admission")"},
        PatchOp{"remove", "/spec/schedulingGates/1", ""}}},
      {"gated",
       R"({"spec": {"schedulingGates": [{"name": "gangkeeper.io/admission"}]}})",
       true,
       {},
       {PatchOp{"test", "/spec/schedulingGates/0/name", R"("gangkeeper.io/admission")"},
        PatchOp{"remove", "/spec/schedulingGates/0", ""}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    rapidjson::Document doc = ParseJson(c.object);
    EXPECT_EQ(IsHeld(doc, pod), c.held);
    EXPECT_EQ(HoldOps(doc, pod), c.hold);
    EXPECT_EQ(ReleaseOps(doc, pod), c.release);
  }
}

TEST(HoldTest, WhatHoldOpsAddsIsHeld) {
  // The object as the webhook left it is held, for every kind.
  for (const KindInfo& info : ManagedKinds()) {
    SCOPED_TRACE(info.name);
    if (info.hold.method == HoldMethod::kReplicas) continue;  // two ops: ReplicaKindsAreHeldAtZero...
    rapidjson::Document doc = ParseJson(R"({"spec": {}})");
    ASSERT_FALSE(IsHeld(doc, info));
    std::vector<PatchOp> ops = HoldOps(doc, info);
    ASSERT_EQ(ops.size(), 1u);
    // Apply the single `add` under spec by hand.
    rapidjson::Document value = ParseJson(ops[0].value_json);
    const std::string under_spec = ops[0].path.substr(std::string("/spec/").size());
    rapidjson::Value& spec = doc["spec"];
    spec.AddMember(rapidjson::Value(under_spec.c_str(), doc.GetAllocator()),
                   rapidjson::Value(value, doc.GetAllocator()), doc.GetAllocator());
    EXPECT_TRUE(IsHeld(doc, info));
    EXPECT_THAT(HoldOps(doc, info), IsEmpty()) << "holding twice changes nothing";
  }
}

// Every kind's pod sets point at their templates as the kinds table says.
TEST(HoldTest, PodSetsPointAtTheirTemplatesPerKind) {
  const std::string t = R"({"spec": {"containers": [{"name": "c"}]}})";
  const std::string ray = absl::StrCat(R"({"headGroupSpec": {"template": )", t,
                                       R"(}, "workerGroupSpecs": [{"groupName": "g", "template": )", t, "}]}");
  struct Case {
    Kind kind;
    std::string object;
    std::vector<std::string> pointers;
    std::string runtime;  // a TrainJob's: its pod sets point into it
  };
  const std::vector<Case> cases = {
      {Kind::kJob, absl::StrCat(R"({"spec": {"template": )", t, "}}"), {"/spec/template"}},
      {Kind::kPyTorchJob,
       absl::StrCat(R"({"spec": {"pytorchReplicaSpecs": {"Master": {"template": )", t, R"(}, "worker": {"template": )",
                    t, "}}}}"),
       {"/spec/pytorchReplicaSpecs/Master/template", "/spec/pytorchReplicaSpecs/worker/template"}},
      {Kind::kTFJob,
       absl::StrCat(R"({"spec": {"tfReplicaSpecs": {"Worker": {"template": )", t, R"(}, "PS": {"template": )", t,
                    "}}}}"),
       {"/spec/tfReplicaSpecs/PS/template", "/spec/tfReplicaSpecs/Worker/template"}},
      {Kind::kMPIJob, absl::StrCat(R"({"spec": {"mpiReplicaSpecs": {"Launcher": {"template": )", t, "}}}}"),
       {"/spec/mpiReplicaSpecs/Launcher/template"}},
      {Kind::kXGBoostJob, absl::StrCat(R"({"spec": {"xgbReplicaSpecs": {"Master": {"template": )", t, "}}}}"),
       {"/spec/xgbReplicaSpecs/Master/template"}},
      {Kind::kPaddleJob, absl::StrCat(R"({"spec": {"paddleReplicaSpecs": {"Worker": {"template": )", t, "}}}}"),
       {"/spec/paddleReplicaSpecs/Worker/template"}},
      {Kind::kJobSet,
       absl::StrCat(R"({"spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": )", t,
                    R"(}}}, {"name": "b", "template": {"spec": {"template": )", t, "}}}]}}"),
       {"/spec/replicatedJobs/0/template/spec/template", "/spec/replicatedJobs/1/template/spec/template"}},
      {Kind::kRayJob, absl::StrCat(R"({"spec": {"rayClusterSpec": )", ray, "}}"),
       {"/spec/rayClusterSpec/headGroupSpec/template", "/spec/rayClusterSpec/workerGroupSpecs/0/template"}},
      {Kind::kRayCluster, absl::StrCat(R"({"spec": )", ray, "}"),
       {"/spec/headGroupSpec/template", "/spec/workerGroupSpecs/0/template"}},
      {Kind::kPod, R"({"spec": {"containers": [{"name": "c"}]}})", {""}},
      {Kind::kJAXJob, absl::StrCat(R"({"spec": {"jaxReplicaSpecs": {"Worker": {"template": )", t, "}}}}"),
       {"/spec/jaxReplicaSpecs/Worker/template"}},
      {Kind::kLeaderWorkerSet,
       absl::StrCat(R"({"spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": )", t,
                    R"(, "workerTemplate": )", t, "}}}"),
       {"/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"}},
      {Kind::kStatefulSet, absl::StrCat(R"({"spec": {"template": )", t, "}}"), {"/spec/template"}},
      {Kind::kDeployment, absl::StrCat(R"({"spec": {"template": )", t, "}}"), {"/spec/template"}},
      // An AppWrapper's pod sets point at the podSetInfos entries its
      // controller copies into the templates (a Service runs no pods).
      {Kind::kAppWrapper,
       absl::StrCat(R"({"metadata": {"name": "aw"}, "spec": {"components": [)"
                    R"({"template": {"apiVersion": "v1", "kind": "Service", "spec": {}}},)"
                    R"({"podSets": [{"path": "template.spec.template"}, {"path": "template.spec.sidecar"}],)"
                    R"( "template": {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"template": )",
                    t, R"(, "sidecar": )", t, "}}}]}}"),
       {"/spec/components/1/podSetInfos/0", "/spec/components/1/podSetInfos/1"}},
      // A TrainJob's pod sets point into its runtime (its placement goes
      // into its own spec.runtimePatches instead).
      {Kind::kTrainJob, R"({"spec": {"runtimeRef": {"name": "rt"}}})",
       {"/spec/template/spec/replicatedJobs/0/template/spec/template",
        "/spec/template/spec/replicatedJobs/1/template/spec/template"},
       absl::StrCat(R"({"spec": {"template": {"spec": {"replicatedJobs": [)"
                    R"({"name": "dataset-initializer", "template": {"spec": {"template": )", t, R"(}}},)"
                    R"({"name": "node", "template": {"spec": {"template": )", t, "}}}]}}}}")},
  };
  ASSERT_EQ(cases.size(), ManagedKinds().size());
  for (const Case& c : cases) {
    SCOPED_TRACE(InfoFor(c.kind).name);
    ExtractOptions options;
    options.training_runtime = [&c](const TrainingRuntimeRef&, absl::string_view) -> std::optional<std::string> {
      return c.runtime;
    };
    absl::StatusOr<Workload> w = Extract(c.object, c.kind, {}, options);
    ASSERT_TRUE(w.ok()) << w.status();
    std::vector<std::string> pointers;
    for (const PodSet& ps : w->pod_sets) pointers.push_back(ps.template_pointer);
    EXPECT_EQ(pointers, c.pointers);
  }
}

// StatefulSet, Deployment and LeaderWorkerSet have no suspend field: they
// are held at 0 replicas, the count they ask for kept in an annotation
// (tested before it is taken out, so a changed count fails the patch).
TEST(HoldTest, ReplicaKindsAreHeldAtZeroWithTheirCountKept) {
  const std::string kept = "/metadata/annotations/gangkeeper.io~1held-replicas";
  struct Case {
    const char* name;
    const char* object;
    bool held;
    std::vector<PatchOp> hold, release;
  };
  const std::vector<Case> cases = {
      {"no metadata, no count (Kubernetes' default: 1)",
       R"({"spec": {}})",
       false,
       {Add("/metadata", R"({"annotations":{"gangkeeper.io/held-replicas":"1"}})"), Add("/spec/replicas", "0")},
       {}},
      {"annotations absent",
       R"({"metadata": {"name": "web"}, "spec": {"replicas": 3}})",
       false,
       {Add("/metadata/annotations", R"({"gangkeeper.io/held-replicas":"3"})"), Add("/spec/replicas", "0")},
       {}},
      {"annotations present",
       R"({"metadata": {"annotations": {"a": "b"}}, "spec": {"replicas": 5}})",
       false,
       {Add(kept, R"("5")"), Add("/spec/replicas", "0")},
       {}},
      {"scaled to zero by its owner (nothing kept): held at 0",
       R"({"metadata": {}, "spec": {"replicas": 0}})",
       false,
       {Add("/metadata/annotations", R"({"gangkeeper.io/held-replicas":"0"})"), Add("/spec/replicas", "0")},
       {}},
      {"held",
       R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "3"}}, "spec": {"replicas": 0}})",
       true,
       {},
       {PatchOp{"test", kept, R"("3")"}, PatchOp{"remove", kept, ""}, Add("/spec/replicas", "3")}},
      {"count kept but scaled up by someone else: not held",
       R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "3"}}, "spec": {"replicas": 2}})",
       false,
       {Add(kept, R"("2")"), Add("/spec/replicas", "0")},
       {}},
      {"kept count malformed: not held",
       R"({"metadata": {"annotations": {"gangkeeper.io/held-replicas": "x"}}, "spec": {"replicas": 0}})",
       false,
       {Add(kept, R"("0")"), Add("/spec/replicas", "0")},
       {}},
  };
  for (Kind kind : {Kind::kStatefulSet, Kind::kDeployment, Kind::kLeaderWorkerSet}) {
    const KindInfo& info = InfoFor(kind);
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(info.name, ": ", c.name));
      rapidjson::Document doc = ParseJson(c.object);
      EXPECT_EQ(IsHeld(doc, info), c.held);
      EXPECT_EQ(HoldOps(doc, info), c.hold);
      EXPECT_EQ(ReleaseOps(doc, info), c.release);
    }
  }
}

TEST(HoldTest, PodSpecPointerIsUnderTheTemplate) {
  PodSet job;
  job.template_pointer = "/spec/pytorchReplicaSpecs/Worker/template";
  EXPECT_EQ(PodSpecPointer(job), "/spec/pytorchReplicaSpecs/Worker/template/spec");
  EXPECT_EQ(PodSpecPointer(PodSet{}), "/spec") << "a Pod is its own template";
}

// Every kind but the AppWrapper takes its placement in the template's
// PodSpec; an AppWrapper's goes to the podSetInfos entry its controller
// copies into the template.
TEST(HoldTest, PlacementPointerIsTheTemplateSpecOrTheTargetBesideIt) {
  PodSet ps;
  ps.template_pointer = "/spec/pytorchReplicaSpecs/Worker/template";
  for (const KindInfo& k : ManagedKinds()) {
    if (k.kind == Kind::kAppWrapper) continue;
    EXPECT_EQ(PlacementPointer(k.kind, ps), PodSpecPointer(ps)) << k.name;
  }
  ps.template_pointer = "/spec/components/2/podSetInfos/1";
  EXPECT_EQ(PlacementPointer(Kind::kAppWrapper, ps), "/spec/components/2/podSetInfos/1");
}

TEST(HoldTest, PlacementTargetsAreCreatedWhereMissing) {
  Workload w;
  w.kind = Kind::kAppWrapper;
  for (const char* p : {"/spec/components/0/podSetInfos/0", "/spec/components/0/podSetInfos/1",
                        "/spec/components/2/podSetInfos/0"}) {
    PodSet ps;
    ps.template_pointer = p;
    w.pod_sets.push_back(ps);
  }
  struct Case {
    const char* name;
    const char* object;
    std::vector<PatchOp> want;
  };
  const std::vector<Case> cases = {
      {"no lists: one entry per pod set",
       R"({"spec": {"components": [{"template": {}}, {"template": {}}, {"template": {}}]}})",
       {Add("/spec/components/0/podSetInfos", "[{},{}]"), Add("/spec/components/2/podSetInfos", "[{}]")}},
      {"complete lists: nothing",
       R"({"spec": {"components": [{"podSetInfos": [{}, {"nodeSelector": {"a": "b"}}]}, {}, {"podSetInfos": [{}]}]}})",
       {}},
      {"a short list is extended, a bad entry replaced",
       R"({"spec": {"components": [{"podSetInfos": [7]}, {}, {"podSetInfos": "x"}]}})",
       {PatchOp{"replace", "/spec/components/0/podSetInfos/0", "{}"}, Add("/spec/components/0/podSetInfos/-", "{}"),
        Add("/spec/components/2/podSetInfos", "[{}]")}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    rapidjson::Document doc = ParseJson(c.object);
    EXPECT_EQ(PlacementTargetOps(doc, w), c.want);
  }
  // Kinds placed in their templates need no targets.
  w.kind = Kind::kJob;
  EXPECT_THAT(PlacementTargetOps(ParseJson(R"({"spec": {}})"), w), IsEmpty());
}

// RFC 6901: "~1" is "/", "~0" is "~" (decoded in that order, so "~01" is
// "~1"); "" is the whole document; every other pointer starts with "/".
TEST(PointerTokensTest, UnescapesTokensAsRfc6901Says) {
  struct Case {
    const char* pointer;
    std::vector<std::string> tokens;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"/", {""}},
      {"/spec/suspend", {"spec", "suspend"}},
      {"/metadata/annotations/kueue.x-k8s.io~1queue-name", {"metadata", "annotations", "kueue.x-k8s.io/queue-name"}},
      {"/a~0b", {"a~b"}},
      {"/~01", {"~1"}},
      {"/~10", {"/0"}},
      {"/spec/template/spec/containers/0", {"spec", "template", "spec", "containers", "0"}},
      {"//x/", {"", "x", ""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    absl::StatusOr<std::vector<std::string>> tokens = PointerTokens(c.pointer);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    EXPECT_EQ(*tokens, c.tokens);
  }
}

TEST(PointerTokensTest, RefusesMalformedPointersAndSaysWhy) {
  struct Case {
    const char* pointer;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"spec/suspend", "must be empty or start with \"/\""},
      {"#/spec", "must be empty or start with \"/\""},
      {"/spec~", "\"~\" must be followed by 0 (for ~) or 1 (for /)"},
      {"/a~2b", "\"~\" must be followed by 0 (for ~) or 1 (for /)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    absl::StatusOr<std::vector<std::string>> tokens = PointerTokens(c.pointer);
    ASSERT_FALSE(tokens.ok());
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(tokens.status().message()), ::testing::HasSubstr(c.says));
    EXPECT_THAT(std::string(tokens.status().message()), ::testing::HasSubstr(c.pointer));
  }
}

}  // namespace
}  // namespace gangkeeper::workload
