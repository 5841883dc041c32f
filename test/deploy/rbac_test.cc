// The ClusterRole of deploy/ against the API calls gangkeeper really makes.
//
// The real gangkeeper binary runs with --kube pointing at FakeKubeApi (an
// HTTPS API-server double on loopback that records every request), and is
// driven through what its actuator and reconciler do in a cluster:
//   - the reconciler's lists and watches of every managed kind;
//   - the release of an object of every managed kind (one whose first
//     patch is refused, so that it is read again), and of a pod group
//     (placement while gated, then the gates removed);
//   - the preemption of a Job that ran (suspend, startTime cleared through
//     jobs/status, templates restored);
//   - the preemption of a pod group (its pods deleted).
// Each recorded request is mapped to (API group, resource[/subresource],
// verb) the way the API server's authorizer sees it, and the set must equal
// the set the rendered ClusterRole grants: a verb gangkeeper needs and lacks
// fails it, and so does one it is granted and never uses.
#include <signal.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/deploy/render.h"
#include "test/testing/wait.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/kubeconfig.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper::deploy_test {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;

// (group, resource or resource/subresource, verb)
using Access = std::tuple<std::string, std::string, std::string>;

std::string Describe(const Access& a) {
  return absl::StrCat(std::get<0>(a).empty() ? "core" : std::get<0>(a), " ", std::get<1>(a), " ", std::get<2>(a));
}

// What the authorizer sees of a request: NotFound for a path that is not
// a resource (discovery, /version), which a ClusterRole of resources
// cannot grant.
absl::StatusOr<Access> AccessOf(const testing::RecordedCall& call) {
  std::vector<std::string> segs = absl::StrSplit(call.path, '/', absl::SkipEmpty());
  std::string group;
  size_t i = 0;
  if (segs.size() >= 2 && segs[0] == "api") {
    i = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis") {
    group = segs[1];
    i = 3;
  } else if (segs.size() == 2 && segs[0] == "apis" && call.method == "GET") {
    // Group discovery (--policy-source: is kueue.x-k8s.io served?): the
    // default ClusterRole system:discovery grants it to every
    // authenticated user, no rule of gangkeeper's.
    return Access{"", "", "discovery"};
  } else {
    return absl::NotFoundError(absl::StrCat("not a resource path: ", call.method, " ", call.path));
  }
  std::vector<std::string> rest(segs.begin() + i, segs.end());
  if (rest.size() >= 3 && rest[0] == "namespaces") rest.erase(rest.begin(), rest.begin() + 2);
  if (rest.empty()) return absl::NotFoundError(absl::StrCat("discovery: ", call.method, " ", call.path));
  const std::string resource = rest.size() >= 3 ? absl::StrCat(rest[0], "/", rest[2]) : rest[0];
  const bool named = rest.size() >= 2;
  bool watch = false;
  for (absl::string_view kv : absl::StrSplit(call.query, '&')) watch |= kv == "watch=true" || kv == "watch=1";
  std::string verb;
  if (call.method == "GET") {
    verb = watch ? "watch" : named ? "get" : "list";
  } else if (call.method == "PATCH") {
    verb = "patch";
  } else if (call.method == "DELETE") {
    verb = named ? "delete" : "deletecollection";
  } else if (call.method == "POST") {
    verb = "create";
  } else if (call.method == "PUT") {
    verb = "update";
  } else {
    return absl::NotFoundError(absl::StrCat("method ", call.method));
  }
  return Access{group, resource, verb};
}

TEST(AccessOfTest, MapsRequestsTheWayTheAuthorizerDoes) {
  auto of = [](const std::string& method, const std::string& path, const std::string& query = "") {
    testing::RecordedCall c;
    c.method = method;
    c.path = path;
    c.query = query;
    absl::StatusOr<Access> a = AccessOf(c);
    return a.ok() ? Describe(*a) : std::string(a.status().message());
  };
  EXPECT_EQ(of("GET", "/apis/batch/v1/jobs", "labelSelector=x&watch=true"), "batch jobs watch");
  EXPECT_EQ(of("GET", "/apis/batch/v1/jobs", "limit=500"), "batch jobs list");
  EXPECT_EQ(of("GET", "/apis/batch/v1/namespaces/a/jobs/j"), "batch jobs get");
  EXPECT_EQ(of("PATCH", "/apis/batch/v1/namespaces/a/jobs/j/status"), "batch jobs/status patch");
  EXPECT_EQ(of("DELETE", "/api/v1/namespaces/a/pods/p"), "core pods delete");
  EXPECT_EQ(of("DELETE", "/api/v1/namespaces/a/pods"), "core pods deletecollection");
  EXPECT_EQ(of("GET", "/api/v1/namespaces/a/pods"), "core pods list");
  EXPECT_EQ(of("GET", "/api/v1/namespaces/a"), "core namespaces get");
  EXPECT_EQ(of("POST", "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs"), "kubeflow.org pytorchjobs create");
  EXPECT_THAT(of("GET", "/apis"), ::testing::HasSubstr("not a resource path"));
  EXPECT_THAT(of("GET", "/apis/batch/v1"), ::testing::HasSubstr("discovery"));
}

// What the rendered ClusterRole grants, rule by rule.
absl::StatusOr<std::set<Access>> Granted() {
  absl::StatusOr<Rendering> r = Kustomize(SourceDir() + "/deploy");
  if (!r.ok()) return r.status();
  // gangkeeper's own ClusterRole; the others (rbac-api-roles.yaml) are
  // for the API's callers.
  const json* role = nullptr;
  for (const json* c : OfKind(r->objects, "ClusterRole")) {
    if (c->contains("metadata") && (*c)["metadata"].value("name", "") == "gangkeeper") {
      if (role != nullptr) return absl::FailedPreconditionError("deploy/ renders two ClusterRoles named gangkeeper");
      role = c;
    }
  }
  if (role == nullptr) return absl::FailedPreconditionError("deploy/ must render the ClusterRole gangkeeper");
  std::set<Access> out;
  for (const json& rule : (*role)["rules"]) {
    for (const json& g : rule["apiGroups"]) {
      for (const json& res : rule["resources"]) {
        for (const json& v : rule["verbs"]) out.insert({g.get<std::string>(), res.get<std::string>(), v.get<std::string>()});
      }
    }
  }
  return out;
}

// ---- A gangkeeper against a fake API server ---------------------------------------

json PodSpec(const std::string& cpu, int gpus = 0) {
  json resources = {{"cpu", cpu}};
  if (gpus > 0) resources["nvidia.com/gpu"] = std::to_string(gpus);
  return {{"restartPolicy", "Never"},
          {"containers",
           json::array({{{"name", "w"}, {"image", "busybox"}, {"resources", {{"requests", resources}, {"limits", resources}}}}})}};
}
json Template(const std::string& cpu, int gpus = 0) { return {{"spec", PodSpec(cpu, gpus)}}; }

json Meta(const std::string& name, const std::string& priority_class = "") {
  json labels = {{"kueue.x-k8s.io/queue-name", "gpu-queue"}};
  if (!priority_class.empty()) labels["kueue.x-k8s.io/priority-class"] = priority_class;
  return {{"name", name}, {"namespace", "team-a"}, {"uid", "uid-" + name}, {"labels", labels}};
}

// One object of a managed kind, as a user would create it.
struct Workload {
  std::string group, version, kind, resource;
  json object;
  std::string collection() const {
    return absl::StrCat(group.empty() ? "/api/" + version : absl::StrCat("/apis/", group, "/", version),
                        "/namespaces/team-a/", resource);
  }
  std::string path() const { return absl::StrCat(collection(), "/", object["metadata"]["name"].get<std::string>()); }
};

Workload JobOf(const std::string& name, int pods, const std::string& cpu, int gpus, const std::string& pc = "") {
  return {"batch", "v1", "Job", "jobs",
          {{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"metadata", Meta(name, pc)},
           {"spec", {{"parallelism", pods}, {"completions", pods}, {"template", Template(cpu, gpus)}}}}};
}

Workload Kubeflow(const std::string& version, const std::string& kind, const std::string& resource,
                  const std::string& specs, json replicas) {
  json spec = json::object();
  spec[specs] = json::object();
  for (auto& [type, count] : replicas.items()) spec[specs][type] = {{"replicas", count}, {"template", Template("100m")}};
  return {"kubeflow.org", version, kind, resource,
          {{"apiVersion", "kubeflow.org/" + version},
           {"kind", kind},
           {"metadata", Meta(absl::AsciiStrToLower(kind))},
           {"spec", spec}}};
}

json RayClusterSpec() {
  return {{"headGroupSpec", {{"rayStartParams", json::object()}, {"template", Template("100m")}}},
          {"workerGroupSpecs", json::array({{{"groupName", "w"}, {"replicas", 1}, {"template", Template("100m")}}})}};
}

// Every kind of workload::ManagedKinds() but pods, small enough to fit at once.
std::vector<Workload> OneOfEachKind() {
  return {
      JobOf("job", 2, "100m", 0),
      Kubeflow("v1", "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", {{"Master", 1}, {"Worker", 1}}),
      Kubeflow("v1", "TFJob", "tfjobs", "tfReplicaSpecs", {{"Worker", 2}}),
      Kubeflow("v2beta1", "MPIJob", "mpijobs", "mpiReplicaSpecs", {{"Launcher", 1}, {"Worker", 2}}),
      Kubeflow("v1", "XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", {{"Master", 1}, {"Worker", 1}}),
      Kubeflow("v1", "PaddleJob", "paddlejobs", "paddleReplicaSpecs", {{"Worker", 2}}),
      {"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets",
       {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
        {"kind", "JobSet"},
        {"metadata", Meta("jobset")},
        {"spec",
         {{"replicatedJobs",
           json::array({{{"name", "workers"},
                         {"replicas", 1},
                         {"template", {{"spec", {{"parallelism", 2}, {"completions", 2}, {"template", Template("100m")}}}}}}})}}}}},
      {"ray.io", "v1", "RayJob", "rayjobs",
       {{"apiVersion", "ray.io/v1"},
        {"kind", "RayJob"},
        {"metadata", Meta("rayjob")},
        {"spec", {{"entrypoint", "python train.py"}, {"rayClusterSpec", RayClusterSpec()}}}}},
      {"ray.io", "v1", "RayCluster", "rayclusters",
       {{"apiVersion", "ray.io/v1"}, {"kind", "RayCluster"}, {"metadata", Meta("raycluster")}, {"spec", RayClusterSpec()}}},
      // Issue #25's kinds.
      Kubeflow("v1", "JAXJob", "jaxjobs", "jaxReplicaSpecs", {{"Worker", 2}}),
      {"leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets",
       {{"apiVersion", "leaderworkerset.x-k8s.io/v1"},
        {"kind", "LeaderWorkerSet"},
        {"metadata", Meta("lws")},
        {"spec", {{"replicas", 1}, {"leaderWorkerTemplate", {{"size", 2}, {"workerTemplate", Template("100m")}}}}}}},
      {"apps", "v1", "StatefulSet", "statefulsets",
       {{"apiVersion", "apps/v1"},
        {"kind", "StatefulSet"},
        {"metadata", Meta("sts")},
        {"spec", {{"replicas", 2}, {"serviceName", "sts"}, {"template", Template("100m")}}}}},
      {"apps", "v1", "Deployment", "deployments",
       {{"apiVersion", "apps/v1"},
        {"kind", "Deployment"},
        {"metadata", Meta("deploy")},
        {"spec", {{"replicas", 2}, {"template", Template("100m")}}}}},
      // An AppWrapper of a batch Job (pod sets inferred; placement in
      // spec.components[0].podSetInfos).
      {"workload.codeflare.dev", "v1beta2", "AppWrapper", "appwrappers",
       {{"apiVersion", "workload.codeflare.dev/v1beta2"},
        {"kind", "AppWrapper"},
        {"metadata", Meta("appwrapper")},
        {"spec",
         {{"components",
           json::array({{{"template",
                          {{"apiVersion", "batch/v1"},
                           {"kind", "Job"},
                           {"metadata", {{"name", "wrapped"}}},
                           {"spec", {{"parallelism", 2}, {"template", Template("100m")}}}}}}})}}}}},
      // A TrainJob of 2 nodes with the ClusterTrainingRuntime every Cluster
      // seeds (its placement in spec.runtimePatches).
      {"trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs",
       {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
        {"kind", "TrainJob"},
        {"metadata", Meta("trainjob")},
        {"spec",
         {{"runtimeRef", {{"name", "torch-distributed"}}},
          {"trainer", {{"numNodes", 2}, {"resourcesPerNode", {{"requests", {{"cpu", "100m"}}}}}}}}}}},
  };
}

// The ClusterTrainingRuntime the TrainJob above names: one replicated job,
// the trainer step.
json TorchRuntime() {
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "ClusterTrainingRuntime"},
          {"metadata", {{"name", "torch-distributed"}}},
          {"spec",
           {{"template",
             {{"spec",
               {{"replicatedJobs",
                 json::array({{{"name", "node"},
                               {"template",
                                {{"metadata", {{"labels", {{"trainer.kubeflow.org/trainjob-ancestor-step", "trainer"}}}}},
                                 {"spec", {{"template", Template("100m")}}}}}}})}}}}}}}};
}

Workload GroupPod(const std::string& group, int index, int total, const std::string& cpu, int gpus,
                  const std::string& pc = "") {
  json meta = Meta(absl::StrCat(group, "-", index), pc);
  meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group;
  meta["annotations"] = {{"kueue.x-k8s.io/pod-group-total-count", std::to_string(total)}};
  return {"", "v1", "Pod", "pods", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", PodSpec(cpu, gpus)}}};
}

// Held back by gangkeeper: suspended, or gated.
bool Held(const Workload& w, const json& stored) {
  if (w.kind == "Pod") {
    for (const json& g : stored["spec"].value("schedulingGates", json::array())) {
      if (g.value("name", "") == "gangkeeper.io/admission") return true;
    }
    return false;
  }
  if (w.group == "kubeflow.org") return stored["spec"].value("runPolicy", json::object()).value("suspend", false);
  if (w.group == "apps" || w.group == "leaderworkerset.x-k8s.io") {  // held at 0 replicas
    return stored["metadata"].value("annotations", json::object()).contains("gangkeeper.io/held-replicas") &&
           stored["spec"].value("replicas", -1) == 0;
  }
  return stored["spec"].value("suspend", false);
}

class Cluster {
 public:
  // Starts FakeKubeApi and `gangkeeper serve --kube` against it; waits
  // until /readyz (the reconciler's first list of every kind). With
  // `kueue`, the fake serves Kueue's CRDs (v1beta2) with the policies'
  // team-a ClusterQueue and LocalQueue: gangkeeper publishes to them.
  void Start(bool kueue = false) {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    ASSERT_EQ(certs->exit_code, 0) << certs->err;
    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    auto fake = testing::FakeKubeApi::Start(fo);
    ASSERT_THAT(fake, IsOk());
    fake_ = *std::move(fake);
    ASSERT_THAT(fake_->Create("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", TorchRuntime()).status(),
                IsOk());
    if (kueue) {
      ASSERT_NO_FATAL_FAILURE(ServeKueue());
    }
    testing::WriteKubeconfigFor(*fake_, dir_.path());
    std::vector<std::string> args = {
        "--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
        "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
        "--policies=" + SourceDir() + "/policies", "--kube=" + dir_.File("kubeconfig")};
    if (kueue) {
      // The quota from the files, its status and Workloads written to the
      // cluster (reading the quota from the cluster is proven elsewhere:
      // see `untried` below).
      for (const char* f : {"--policy-source=files", "--publish-kueue-status=true", "--publish-workloads=true"}) {
        args.push_back(f);
      }
    }
    auto p = testing::ServerProcess::Start(args, dir_.path());
    ASSERT_THAT(p, IsOk());
    server_ = *std::move(p);
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->webhook_port(), o);
    ASSERT_THAT(c, IsOk());
    conn_ = *std::move(c);
    ASSERT_TRUE(WaitFor([&] {
      auto api = testing::TlsConnection::Connect(server_->api_port(), o);
      if (!api.ok()) return false;
      auto r = (*api)->Request("GET", "/readyz");
      return r.ok() && r->status == 200;
    })) << server_->Stderr();
  }

  void ServeKueue() {
    for (const char* r : {"clusterqueues", "localqueues", "workloads", "cohorts"}) {
      fake_->set_served(absl::StrCat("kueue.x-k8s.io/v1beta2/", r), true);
    }
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", {{"metadata", {{"name", "team-a-gpu"}}}})
                    .status(),
                IsOk());
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
                              {{"metadata", {{"name", "gpu-queue"}}}, {"spec", {{"clusterQueue", "team-a-gpu"}}}})
                    .status(),
                IsOk());
    // The policies' cohort as an object: its status is written too.
    ASSERT_THAT(fake_->Create("/apis/kueue.x-k8s.io/v1beta2/cohorts", {{"metadata", {{"name", "gpu-shared"}}}}).status(),
                IsOk());
  }
  json KueueCohort() {
    auto o = fake_->Get("/apis/kueue.x-k8s.io/v1beta2/cohorts/gpu-shared");
    return o.ok() ? *o : json();
  }
  std::vector<json> KueueWorkloads() { return fake_->List("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"); }
  json KueueClusterQueue() {
    auto o = fake_->Get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-a-gpu");
    return o.ok() ? *o : json();
  }
  void DeleteObject(const Workload& w) { ASSERT_THAT(fake_->Delete(w.path()), IsOk()); }

  // A call of the API with a Kubernetes identity (--api-auth both, the
  // default with a cluster): gangkeeper sends a TokenReview, then
  // SubjectAccessReviews.
  void CallApiAsKubernetesUser() {
    fake_->SetTokenUser("dana-token", {"dana", "uid-dana", {"system:authenticated"}, {}});
    fake_->SetAccessRule([](const json& spec) { return spec.contains("resourceAttributes"); });
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto api = testing::TlsConnection::Connect(server_->api_port(), o);
    ASSERT_THAT(api, IsOk());
    auto r = (*api)->Request("GET", "/v1/clusterqueues", "", "Authorization: Bearer dana-token\r\n");
    ASSERT_THAT(r, IsOk());
    EXPECT_EQ(r->status, 200) << r->body;
  }

  // Events are written after the decisions, on their own thread: waits
  // (bounded) until `reason` was written about `name` in team-a.
  bool EventWritten(const std::string& name, const std::string& reason) {
    return WaitFor([&] {
      for (const json& e : fake_->List("/apis/events.k8s.io/v1/namespaces/team-a/events")) {
        if (e["regarding"]["name"] == name && e["reason"] == reason) return true;
      }
      return false;
    });
  }

  // SIGTERM, exit 0; returns what the fake recorded.
  std::vector<testing::RecordedCall> Stop() {
    conn_.reset();
    server_->Signal(SIGTERM);
    auto code = server_->Wait(absl::Seconds(40));
    EXPECT_THAT(code, IsOk());
    if (code.ok()) {
      EXPECT_EQ(*code, 0) << server_->Stderr();
    }
    std::vector<testing::RecordedCall> calls = fake_->Calls();
    server_.reset();
    fake_.reset();
    return calls;
  }

  // What the API server does on CREATE: /mutate, its patch, /validate, store.
  void Submit(const Workload& w) {
    static int n = 0;
    json object = w.object;
    auto review = [&](const std::string& uid) {
      return json{{"apiVersion", "admission.k8s.io/v1"},
                  {"kind", "AdmissionReview"},
                  {"request",
                   {{"uid", uid},
                    {"kind", {{"group", w.group}, {"version", w.version}, {"kind", w.kind}}},
                    {"resource", {{"group", w.group}, {"version", w.version}, {"resource", w.resource}}},
                    {"namespace", "team-a"},
                    {"name", object["metadata"]["name"]},
                    {"operation", "CREATE"},
                    {"userInfo", {{"username", "alice"}}},
                    {"object", object},
                    {"oldObject", nullptr},
                    {"dryRun", false}}}}
          .dump();
    };
    const std::string uid = absl::StrCat("review-", ++n);
    auto m = conn_->Request("POST", "/mutate", review(uid + "m"));
    ASSERT_THAT(m, IsOk());
    json answer = json::parse(m->body);
    ASSERT_TRUE(answer["response"]["allowed"].get<bool>()) << w.kind << ": " << m->body;
    if (answer["response"].contains("patch")) {
      std::string patch;
      ASSERT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
      object = object.patch(json::parse(patch));
    }
    auto v = conn_->Request("POST", "/validate", review(uid + "v"));
    ASSERT_THAT(v, IsOk());
    ASSERT_TRUE(json::parse(v->body)["response"]["allowed"].get<bool>()) << w.kind << ": " << v->body;
    auto stored = fake_->Create(w.collection(), object);
    ASSERT_THAT(stored, IsOk());
    ASSERT_TRUE(Held(w, *stored)) << w.kind << " was not held back by /mutate: " << stored->dump();
  }

  // The next PATCH of `w` is refused with 422, as when the object changed
  // after the reconciler read it: the actuator then reads it (GET) and
  // patches again.
  void RefuseFirstPatch(const Workload& w) {
    testing::ScriptedFailure f;
    f.method = "PATCH";
    f.path_contains = w.path();
    f.status = 422;
    f.times = 1;
    fake_->Fail(f);
  }

  json Get(const Workload& w) {
    auto o = fake_->Get(w.path());
    return o.ok() ? *o : json();
  }
  bool Gone(const Workload& w) { return absl::IsNotFound(fake_->Get(w.path()).status()); }
  bool Released(const Workload& w) {
    json o = Get(w);
    return o.is_object() && !Held(w, o);
  }
  // The Job controller: a released Job starts.
  void StartJob(const Workload& w) {
    json j = Get(w);
    j["status"]["startTime"] = "2026-12-03T10:00:00Z";
    ASSERT_THAT(fake_->Replace(w.path(), j), IsOk());
  }

  static bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(30)) {
    return ::gangkeeper::testing::WaitFor(done, limit, absl::Milliseconds(50));
  }

  std::string Stderr() const { return server_ != nullptr ? server_->Stderr() : ""; }

 private:
  testing::TempDir dir_;
  std::unique_ptr<testing::FakeKubeApi> fake_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<testing::TlsConnection> conn_;
};

TEST(RbacTest, TheClusterRoleGrantsExactlyTheCallsGangkeeperMakes) {
  absl::StatusOr<std::set<Access>> granted = Granted();
  ASSERT_THAT(granted, IsOk());
  std::vector<testing::RecordedCall> calls;
  auto record = [&](std::vector<testing::RecordedCall> more) { calls.insert(calls.end(), more.begin(), more.end()); };

  {  // Lists and watches of every kind; a release of every kind and of a pod group.
    SCOPED_TRACE("a release of every kind");
    Cluster c;
    ASSERT_NO_FATAL_FAILURE(c.Start());
    std::vector<Workload> all = OneOfEachKind();
    all.push_back(GroupPod("pair", 0, 2, "100m", 0));
    all.push_back(GroupPod("pair", 1, 2, "100m", 0));
    // A release is built from the object the reconciler kept, without a
    // read, unless the API server stored a newer version since: then it
    // reads the object (get), which is what each kind's first PATCH refused
    // stands for here.
    for (const Workload& w : all) {
      if (w.kind != "Pod") c.RefuseFirstPatch(w);
    }
    for (const Workload& w : all) ASSERT_NO_FATAL_FAILURE(c.Submit(w));
    for (const Workload& w : all) {
      EXPECT_TRUE(Cluster::WaitFor([&] { return c.Released(w); })) << w.kind << " was not released\n" << c.Stderr();
    }
    EXPECT_TRUE(c.EventWritten("job", "Admitted")) << c.Stderr();
    ASSERT_NO_FATAL_FAILURE(c.CallApiAsKubernetesUser());
    record(c.Stop());
  }
  {  // team-a's 6 GPUs taken by a Job that then runs, preempted by a higher priority.
    SCOPED_TRACE("preemption of a Job that ran");
    Cluster c;
    ASSERT_NO_FATAL_FAILURE(c.Start());
    const Workload low = JobOf("low", 3, "100m", 2, "training-batch");
    const Workload urgent = JobOf("urgent", 2, "100m", 1, "inference-critical");
    ASSERT_NO_FATAL_FAILURE(c.Submit(low));
    ASSERT_TRUE(Cluster::WaitFor([&] { return c.Released(low); })) << c.Stderr();
    ASSERT_NO_FATAL_FAILURE(c.StartJob(low));
    ASSERT_NO_FATAL_FAILURE(c.Submit(urgent));
    ASSERT_TRUE(Cluster::WaitFor([&] { return c.Released(urgent); })) << c.Stderr();
    const json stopped = c.Get(low);
    EXPECT_TRUE(stopped["spec"].value("suspend", false));
    EXPECT_FALSE(stopped.value("status", json::object()).contains("startTime")) << "cleared through jobs/status";
    EXPECT_TRUE(c.EventWritten("low", "Preempted")) << c.Stderr();
    record(c.Stop());
  }
  {  // The same with a pod group as the victim: its pods are deleted.
    SCOPED_TRACE("preemption of a pod group");
    Cluster c;
    ASSERT_NO_FATAL_FAILURE(c.Start());
    std::vector<Workload> pods;
    for (int i = 0; i < 3; ++i) pods.push_back(GroupPod("trio", i, 3, "100m", 2, "training-batch"));
    for (const Workload& p : pods) ASSERT_NO_FATAL_FAILURE(c.Submit(p));
    for (const Workload& p : pods) ASSERT_TRUE(Cluster::WaitFor([&] { return c.Released(p); })) << c.Stderr();
    const Workload urgent = JobOf("urgent", 2, "100m", 1, "inference-critical");
    ASSERT_NO_FATAL_FAILURE(c.Submit(urgent));
    for (const Workload& p : pods) EXPECT_TRUE(Cluster::WaitFor([&] { return c.Gone(p); })) << c.Stderr();
    EXPECT_TRUE(Cluster::WaitFor([&] { return c.Released(urgent); })) << c.Stderr();
    record(c.Stop());
  }

  {  // Kueue's CRDs served: status and a Workload published, the Workload
     // deleted with its job.
    SCOPED_TRACE("publishing to Kueue's API");
    Cluster c;
    ASSERT_NO_FATAL_FAILURE(c.Start(/*kueue=*/true));
    const Workload job = JobOf("published", 1, "100m", 1);
    ASSERT_NO_FATAL_FAILURE(c.Submit(job));
    ASSERT_TRUE(Cluster::WaitFor([&] { return c.Released(job); })) << c.Stderr();
    EXPECT_TRUE(Cluster::WaitFor([&] {
      std::vector<json> w = c.KueueWorkloads();
      return w.size() == 1 && w[0].value("status", json::object()).contains("admission");
    })) << c.Stderr();
    EXPECT_TRUE(Cluster::WaitFor([&] {
      return c.KueueClusterQueue().value("status", json::object()).value("admittedWorkloads", 0) == 1;
    })) << c.Stderr();
    EXPECT_TRUE(Cluster::WaitFor([&] {
      const json cohort = c.KueueCohort();
      return cohort.is_object() && cohort.value("status", json::object()).contains("fairSharing");
    })) << c.Stderr();
    ASSERT_NO_FATAL_FAILURE(c.DeleteObject(job));
    EXPECT_TRUE(Cluster::WaitFor([&] { return c.KueueWorkloads().empty(); })) << c.Stderr();
    record(c.Stop());
  }

  std::set<Access> used;
  for (const testing::RecordedCall& call : calls) {
    absl::StatusOr<Access> a = AccessOf(call);
    EXPECT_THAT(a, IsOk()) << "a call no resource rule grants";
    if (a.ok() && std::get<2>(*a) != "discovery") used.insert(*a);
  }
  std::vector<std::string> missing, unused;
  for (const Access& a : used) {
    if (!granted->count(a)) missing.push_back(Describe(a));
  }
  // Granted for paths these scenarios do not reach, each proven against
  // the fake API server in test/kube/events_test.cc: a repeated Event
  // raises its series count (patch), and a cluster without events.k8s.io
  // gets core/v1 Events (create, patch).
  // Likewise in test/kube/kueue_publishing_test.cc: a pending workload's
  // changed pod sets patch its Workload's spec, and a job deleted while
  // gangkeeper watches has its Workload deleted by gangkeeper itself (here
  // the fake's garbage collection may come first).
  std::set<Access> untried = {{"events.k8s.io", "events", "patch"}, {"", "events", "create"},
                              {"", "events", "patch"}, {"kueue.x-k8s.io", "workloads", "patch"},
                              {"kueue.x-k8s.io", "workloads", "delete"}};
  // Kueue's quota objects (--policy-source cluster: listed and watched; the
  // API's writes of them go to the cluster), proven against the fake API
  // server serving Kueue's group in test/kube/kueue_watch_test.cc and
  // test/integration/kueue_source_test.cc.
  for (const char* r : {"resourceflavors", "clusterqueues", "localqueues", "cohorts", "workloadpriorityclasses"}) {
    for (const char* verb : {"get", "list", "watch", "create", "update", "delete"}) {
      untried.insert({"kueue.x-k8s.io", r, verb});
    }
  }
  for (const Access& a : *granted) {
    if (!used.count(a) && !untried.count(a)) unused.push_back(Describe(a));
  }
  EXPECT_TRUE(missing.empty()) << "gangkeeper calls these, deploy/common/rbac.yaml does not grant them:\n  "
                               << absl::StrJoin(missing, "\n  ");
  EXPECT_TRUE(unused.empty()) << "deploy/common/rbac.yaml grants these, gangkeeper never calls them:\n  "
                              << absl::StrJoin(unused, "\n  ");
}

}  // namespace
}  // namespace gangkeeper::deploy_test
