// Tests for KubeActuator against FakeKubeApi (a real HTTPS server on
// loopback): release and suspend of Jobs, Kubeflow jobs and pod groups, the
// uid test on every patch, the Job template rules, the two phases of a pod
// group release, retries, dry run and per-workload ordering. Every wait is
// bounded.
#include "gangkeeper/kube/actuator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/held_objects.h"
#include "gangkeeper/workload/observe.h"
#include "gangkeeper/workload/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/gangs.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/policies.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::FakeKubeApi;
using ::gangkeeper::testing::FakeKubeOptions;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RecordedCall;
using ::gangkeeper::testing::ScriptedFailure;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kJobs[] = "/apis/batch/v1/namespaces/team-a/jobs";
constexpr char kPods[] = "/api/v1/namespaces/team-a/pods";
constexpr char kPyTorchJobs[] = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs";
constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kAnnotation[] = "gangkeeper.io/admitted-flavors";
constexpr char kGate[] = "gangkeeper.io/admission";
constexpr auto kWait = std::chrono::seconds(10);

// ---- Objects -----------------------------------------------------------------

// A suspended 2-worker Job whose template already selects disk=ssd and
// topology.example.com/zone=z1 and tolerates team=a.
json JobObject(const std::string& name) {
  return {{"metadata", {{"name", name}, {"labels", {{"kueue.x-k8s.io/queue-name", "lq"}}}}},
          {"spec",
           {{"suspend", true},
            {"parallelism", 2},
            {"completions", 2},
            {"template",
             {{"metadata", {{"labels", {{"app", "train"}}}}},
              {"spec",
               {{"restartPolicy", "Never"},
                {"nodeSelector", {{"disk", "ssd"}, {"topology.example.com/zone", "z1"}}},
                {"tolerations", {{{"key", "team"}, {"operator", "Equal"}, {"value", "a"}, {"effect", "NoSchedule"}}}},
                {"containers", {{{"name", "w"}, {"image", "cuda:12"}}}}}}}}}}};
}

json PodTemplate() {
  return {{"spec", {{"restartPolicy", "OnFailure"}, {"containers", {{{"name", "pytorch"}, {"image", "torch:2"}}}}}}};
}

json PyTorchJobObject(const std::string& name) {
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"runPolicy", {{"suspend", true}}},
            {"pytorchReplicaSpecs",
             {{"Master", {{"replicas", 1}, {"template", PodTemplate()}}},
              {"Worker", {{"replicas", 2}, {"template", PodTemplate()}}}}}}}};
}

json GatedPod(const std::string& name, const std::string& group) {
  return {{"metadata",
           {{"name", name},
            {"labels", {{"kueue.x-k8s.io/pod-group-name", group}, {"kueue.x-k8s.io/queue-name", "lq"}}},
            {"annotations", {{"kueue.x-k8s.io/pod-group-total-count", "4"}}}}},
          {"spec",
           {{"schedulingGates", {{{"name", kGate}}}},
            {"nodeSelector", {{"disk", "ssd"}}},
            {"containers", {{{"name", "w"}, {"image", "cuda:12"}}}}}}};
}

// ---- Orders ------------------------------------------------------------------

const std::map<std::string, std::string> kA100Labels = {{"gpu.example.com/class", "a100"},
                                                         {"topology.example.com/zone", "z1"}};

model::Toleration GpuToleration() {
  model::Toleration t;
  t.key = "nvidia.com/gpu";
  t.op = "Exists";
  t.effect = "NoSchedule";
  return t;
}

model::Toleration TeamToleration() {  // the one the Job template has already
  model::Toleration t;
  t.key = "team";
  t.op = "Equal";
  t.value = "a";
  t.effect = "NoSchedule";
  return t;
}

workload::PodSet MakePodSet(const std::string& name, int64_t count, const std::string& pointer) {
  workload::PodSet ps;
  ps.name = name;
  ps.count = count;
  ps.template_pointer = pointer;
  return ps;
}

std::shared_ptr<const workload::Workload> JobWorkload(const std::string& name, const std::string& uid) {
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kJob;
  w->api_version = "batch/v1";
  w->namespace_name = "team-a";
  w->name = name;
  w->uid = uid;
  w->suspended = true;
  w->pod_sets = {MakePodSet("main", 2, "/spec/template")};
  return w;
}

std::shared_ptr<const workload::Workload> PyTorchWorkload(const std::string& name, const std::string& uid) {
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kPyTorchJob;
  w->api_version = "kubeflow.org/v1";
  w->namespace_name = "team-a";
  w->name = name;
  w->uid = uid;
  w->suspended = true;
  w->pod_sets = {MakePodSet("master", 1, "/spec/pytorchReplicaSpecs/Master/template"),
                 MakePodSet("worker", 2, "/spec/pytorchReplicaSpecs/Worker/template")};
  return w;
}

std::shared_ptr<const workload::Workload> PodGroupWorkload(const std::string& group) {
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kPod;
  w->api_version = "v1";
  w->namespace_name = "team-a";
  w->name = group;
  w->suspended = true;
  w->pod_group_name = group;
  w->pod_group_total_count = 4;
  w->pod_sets = {MakePodSet("main", 4, "")};
  return w;
}

broker::ReleaseOrder::PodSetPlacement Placement(const std::string& name, std::map<std::string, std::string> labels,
                                                std::vector<model::Toleration> tolerations) {
  broker::ReleaseOrder::PodSetPlacement p;
  p.name = name;
  p.node_selector = std::move(labels);
  p.tolerations = std::move(tolerations);
  return p;
}

broker::PodSetAssignment PodSetAssignment(const std::string& name, int64_t count, const std::string& flavor) {
  broker::PodSetAssignment a;
  a.name = name;
  a.count = count;
  a.flavors = {{"nvidia.com/gpu", flavor}, {"cpu", "default"}};
  return a;
}

// Release of the Job `name`: the a100 flavor (its labels, one of which the
// template selects already) and the gpu toleration plus team=a (which the
// template has already).
broker::ReleaseOrder JobRelease(const std::string& name, const std::string& uid) {
  broker::ReleaseOrder o;
  o.key = {"team-a", name};
  o.uid = uid;
  o.workload = JobWorkload(name, uid);
  o.assignment.cluster_queue = "cq-gpu";
  o.assignment.pod_sets = {PodSetAssignment("main", 2, "a100")};
  o.placements = {Placement("main", kA100Labels, {GpuToleration(), TeamToleration()})};
  return o;
}

broker::SuspendOrder SuspendOf(const broker::ReleaseOrder& r, const std::string& reason = "InClusterQueue") {
  broker::SuspendOrder s;
  s.key = r.key;
  s.uid = r.uid;
  s.workload = r.workload;
  s.reason = reason;
  s.message = "preempted by team-a/urgent";
  s.preemptor = {"team-a", "urgent"};
  return s;
}

broker::ReleaseOrder PodGroupRelease(const std::string& group) {
  broker::ReleaseOrder o;
  o.key = {"team-a", group};
  o.uid = "group-uid-" + group;
  o.workload = PodGroupWorkload(group);
  o.assignment.cluster_queue = "cq-gpu";
  o.assignment.pod_sets = {PodSetAssignment("main", 4, "a100")};
  o.placements = {Placement("main", {{"gpu.example.com/class", "a100"}}, {GpuToleration()})};
  return o;
}

// ---- Results -----------------------------------------------------------------

// Polls (bounded) until `done` holds.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}


struct Result {
  bool release = false;  // else stopped
  broker::WorkloadKey key;
  std::string uid;
  absl::Status status;
  std::string detail;
};

class Recorder {
 public:
  ActuatorCallbacks Callbacks() {
    ActuatorCallbacks c;
    c.released = [this](const broker::WorkloadKey& key, const std::string& uid, absl::Status result,
                        const std::string& detail) { Add({true, key, uid, std::move(result), detail}); };
    c.stopped = [this](const broker::WorkloadKey& key, const std::string& uid, const std::string& detail) {
      Add({false, key, uid, absl::OkStatus(), detail});
    };
    return c;
  }

  // Waits (bounded) until `n` results arrived; returns them all.
  std::vector<Result> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kWait, [&] { return results_.size() >= n; });
    return results_;
  }
  std::vector<Result> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }

 private:
  void Add(Result r) {
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(std::move(r));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Result> results_;
};

// Holds the fake's answers to requests whose path contains one of the held
// strings until Open(): the request is handled (and recorded) first, then
// its answer waits, so the worker that sent it stays busy. Bounded: an
// answer is held at most kWait.
class AnswerGate {
 public:
  void Hold(const std::string& path_contains) {
    std::lock_guard<std::mutex> lock(mu_);
    held_.insert(path_contains);
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    held_.clear();
    cv_.notify_all();
  }
  // On a fake's worker thread, for every call.
  void OnCall(const RecordedCall& call) {
    std::unique_lock<std::mutex> lock(mu_);
    auto matches = [&] {
      for (const std::string& h : held_) {
        if (call.path.find(h) != std::string::npos) return true;
      }
      return false;
    };
    if (!matches()) return;
    ++waiting_;
    cv_.notify_all();
    cv_.wait_for(lock, kWait, [&] { return !matches(); });
    --waiting_;
  }
  // Waits (bounded) until `n` answers are held; false if they never are.
  bool WaitHeld(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> held_;
  int waiting_ = 0;
};

// ---- Fixture -----------------------------------------------------------------

class ActuatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    auto r = gangkeeper::testing::RunCommand(
        {gangkeeper::testing::GangkeeperBinary(), "certs", "--out", certs_->path()}, absl::Seconds(60));
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    FakeKubeOptions o;
    o.cert_file = certs_->File("tls.crt");
    o.key_file = certs_->File("tls.key");
    o.on_call = [this](const RecordedCall& call, absl::Time) { gate_.OnCall(call); };
    auto api = FakeKubeApi::Start(o);
    ASSERT_THAT(api, IsOk());
    api_ = *std::move(api);

    ClusterConfig config;
    config.host = "127.0.0.1";
    config.port = api_->port();
    config.ca_pem = ReadFile(certs_->File("ca.crt"));
    config.token = "fake-token";
    config.source = "test";
    ClientOptions options;
    options.timeout = absl::Seconds(5);
    options.retry.max_attempts = 4;
    options.retry.initial_backoff = absl::Milliseconds(10);
    options.retry.max_backoff = absl::Milliseconds(50);
    options.retry.max_total = absl::Seconds(20);
    auto client = Client::Create(config, options);
    ASSERT_THAT(client, IsOk());
    client_ = *std::move(client);
  }

  void TearDown() override {
    gate_.Open();
    actuator_.reset();  // before the client it uses
    client_.reset();
    api_.reset();
  }

  static std::string ReadFile(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return "";
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
    return out;
  }

  KubeActuator& StartActuator(ActuatorOptions options = {}) {
    if (options.clock == nullptr) options.clock = &base::RealClock();
    actuator_ = std::make_unique<KubeActuator>(client_.get(), options);
    actuator_->Bind(recorder_.Callbacks());
    return *actuator_;
  }

  json MustCreate(const std::string& collection, json obj) {
    auto r = api_->Create(collection, std::move(obj));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : json();
  }
  json MustGet(const std::string& path) {
    auto r = api_->Get(path);
    EXPECT_THAT(r, IsOk()) << path;
    return r.ok() ? *r : json();
  }

  // The calls of `method` (every method when empty).
  std::vector<RecordedCall> CallsOf(const std::string& method) const {
    std::vector<RecordedCall> out;
    for (const RecordedCall& c : api_->Calls()) {
      if (method.empty() || c.method == method) out.push_back(c);
    }
    return out;
  }

  // Every PATCH is a JSON patch whose first op tests metadata.uid against
  // the uid of the object it went to (looked up in `uids` by path, without
  // a /status suffix).
  void ExpectPatchesTestUid(const std::map<std::string, std::string>& uids) {
    for (const RecordedCall& c : CallsOf("PATCH")) {
      SCOPED_TRACE(c.path + " " + c.body);
      EXPECT_EQ(c.content_type, kJsonPatch);
      json body = json::parse(c.body, nullptr, false);
      ASSERT_TRUE(body.is_array()) << "a JSON patch";
      ASSERT_FALSE(body.empty());
      std::string path = c.path;
      if (absl::EndsWith(path, "/status")) path.resize(path.size() - 7);
      auto it = uids.find(path);
      ASSERT_NE(it, uids.end()) << "a PATCH to an unexpected path";
      EXPECT_EQ(body[0], json({{"op", "test"}, {"path", "/metadata/uid"}, {"value", it->second}}));
    }
  }

  // Every one of `orders` given is accounted for (carried out, stale,
  // coalesced or merged), and every one carried out answered (`before`:
  // the answers there were before they were given).
  bool AllOrdersAccountedFor(uint64_t orders, size_t before) {
    const ActuatorStats st = actuator_->stats();
    return st.given == orders &&
           st.carried_out + st.stale_releases + st.stale_suspends + st.coalesced_releases + st.merged == orders &&
           recorder_.Snapshot().size() - before == st.carried_out;
  }

  // Each order carried out for workload `name` was answered, once.
  void ExpectAnsweredOnce(const std::string& name, size_t carried_out) {
    size_t answers = 0;
    for (const Result& r : recorder_.Snapshot()) answers += r.key.name == name;
    EXPECT_EQ(answers, carried_out);
  }

  static TempDir* certs_;
  AnswerGate gate_;  // before api_: the fake's threads use it
  std::unique_ptr<FakeKubeApi> api_;
  std::unique_ptr<Client> client_;
  Recorder recorder_;
  std::unique_ptr<KubeActuator> actuator_;
};

TempDir* ActuatorTest::certs_ = nullptr;

json GpuTolerationJson() { return {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}; }
json TeamTolerationJson() {
  return {{"key", "team"}, {"operator", "Equal"}, {"value", "a"}, {"effect", "NoSchedule"}};
}

bool HasGate(const json& pod) {
  const json gates = pod["spec"].value("schedulingGates", json::array());
  for (const json& g : gates) {
    if (g.value("name", "") == kGate) return true;
  }
  return false;
}

// An object's map/list that may be absent or emptied: {} / [] when absent.
json OrEmptyObject(const json& parent, const char* key) {
  return parent.contains(key) ? parent[key] : json::object();
}

// ---- 1. Release of a Job -----------------------------------------------------

TEST_F(ActuatorTest, ReleasesJobWithFlavorPlacementAndRecord) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  StartActuator();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].release);
  EXPECT_EQ(results[0].key, (broker::WorkloadKey{"team-a", "train"}));
  EXPECT_EQ(results[0].uid, uid);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("PATCH " + path));
  EXPECT_THAT(results[0].detail, HasSubstr("gpu.example.com/class=a100"));

  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  const json& tspec = job["spec"]["template"]["spec"];
  EXPECT_EQ(tspec["nodeSelector"], json({{"disk", "ssd"},
                                         {"topology.example.com/zone", "z1"},
                                         {"gpu.example.com/class", "a100"}}));
  EXPECT_EQ(tspec["tolerations"], json::array({TeamTolerationJson(), GpuTolerationJson()}))
      << "existing kept, the flavor's appended once";
  EXPECT_EQ(tspec["containers"], created["spec"]["template"]["spec"]["containers"]);

  // The record: flavors and exactly what was added.
  ASSERT_TRUE(job["metadata"]["annotations"].contains(kAnnotation));
  json record = json::parse(job["metadata"]["annotations"][kAnnotation].get<std::string>(), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["clusterQueue"], "cq-gpu");
  ASSERT_EQ(record["podSets"].size(), 1u);
  EXPECT_EQ(record["podSets"][0]["name"], "main");
  EXPECT_EQ(record["podSets"][0]["flavors"], json({{"nvidia.com/gpu", "a100"}, {"cpu", "default"}}));
  EXPECT_EQ(record["podSets"][0]["nodeSelector"], json({{"gpu.example.com/class", "a100"}}))
      << "the zone label was in the template already";
  EXPECT_EQ(record["podSets"][0]["tolerations"], json::array({GpuTolerationJson()}));

  // Calls: one GET, one JSON patch that tests the uid first.
  std::vector<RecordedCall> calls = api_->Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].method, "GET");
  EXPECT_EQ(calls[0].path, path);
  EXPECT_EQ(calls[1].method, "PATCH");
  EXPECT_EQ(calls[1].path, path);
  EXPECT_EQ(calls[1].status, 200);
  EXPECT_EQ(calls[1].authorization, "Bearer fake-token");
  ExpectPatchesTestUid({{path, uid}});
  json ops = json::parse(calls[1].body);
  EXPECT_EQ(ops.back(), json({{"op", "add"}, {"path", "/spec/suspend"}, {"value", false}}));
  bool escaped = false;
  for (const json& op : ops) {
    if (op["path"] == "/spec/template/spec/nodeSelector/gpu.example.com~1class") escaped = true;
  }
  EXPECT_TRUE(escaped) << "label keys are escaped in JSON pointers: " << ops.dump();
}

TEST_F(ActuatorTest, ReleaseAddsNodeSelectorAndTolerationsWhenTemplateHasNone) {
  const std::string path = std::string(kJobs) + "/bare";
  json obj = JobObject("bare");
  obj["spec"]["template"]["spec"].erase("nodeSelector");
  obj["spec"]["template"]["spec"].erase("tolerations");
  obj["metadata"].erase("labels");
  const std::string uid = MustCreate(kJobs, obj)["metadata"]["uid"];
  StartActuator();

  actuator_->Release(JobRelease("bare", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeSelector"], json(kA100Labels));
  EXPECT_EQ(job["spec"]["template"]["spec"]["tolerations"], json::array({GpuTolerationJson(), TeamTolerationJson()}));
  json record = json::parse(job["metadata"]["annotations"][kAnnotation].get<std::string>());
  EXPECT_EQ(record["podSets"][0]["nodeSelector"], json(kA100Labels));
  ExpectPatchesTestUid({{path, uid}});

  // And suspend takes all of it out again.
  actuator_->Suspend(SuspendOf(JobRelease("bare", uid)));
  results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  const json after = MustGet(path);
  EXPECT_EQ(after["spec"]["suspend"], true);
  EXPECT_EQ(OrEmptyObject(after["spec"]["template"]["spec"], "nodeSelector"), json::object());
  EXPECT_TRUE(after["spec"]["template"]["spec"].value("tolerations", json::array()).empty());
  EXPECT_FALSE(after["metadata"].value("annotations", json::object()).contains(kAnnotation));
  ExpectPatchesTestUid({{path, uid}});
}

// ---- 2. Already released; replaced object ----------------------------------

TEST_F(ActuatorTest, ReleasingAReleasedJobChangesNothing) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  StartActuator();
  actuator_->Release(JobRelease("train", uid));
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  const json released = MustGet(path);
  const int64_t rv = api_->resource_version();
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[1].release);
  ASSERT_THAT(results[1].status, IsOk());
  EXPECT_EQ(results[1].detail, "already released");
  EXPECT_TRUE(CallsOf("PATCH").empty());
  EXPECT_EQ(MustGet(path), released);
  EXPECT_EQ(api_->resource_version(), rv);
}

TEST_F(ActuatorTest, ReleaseOfAReplacedObjectFailsAndTouchesNothing) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string old_uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  ASSERT_THAT(api_->Delete(path), IsOk());
  const json replacement = MustCreate(kJobs, JobObject("train"));
  ASSERT_NE(replacement["metadata"]["uid"], old_uid);
  StartActuator();
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", old_uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].release);
  EXPECT_FALSE(results[0].status.ok());
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr(old_uid));
  EXPECT_TRUE(CallsOf("PATCH").empty());
  EXPECT_EQ(MustGet(path), replacement);
  EXPECT_EQ(MustGet(path)["spec"]["suspend"], true);
}

TEST_F(ActuatorTest, ReleaseOfAJobUnsuspendedBySomeoneElseReportsIt) {
  json obj = JobObject("train");
  obj["spec"]["suspend"] = false;
  const std::string uid = MustCreate(kJobs, obj)["metadata"]["uid"];
  StartActuator();
  api_->ClearCalls();
  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("unsuspended by someone else"));
  EXPECT_TRUE(CallsOf("PATCH").empty());
}

// ---- 3. Conflicting template nodeSelector -----------------------------------

TEST_F(ActuatorTest, ConflictingTemplateNodeSelectorFailsNamingTheKey) {
  const std::string path = std::string(kJobs) + "/train";
  json obj = JobObject("train");
  obj["spec"]["template"]["spec"]["nodeSelector"]["gpu.example.com/class"] = "h100";
  const json created = MustCreate(kJobs, obj);
  StartActuator();
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", created["metadata"]["uid"]));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kInvalidArgument) << results[0].status;
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("gpu.example.com/class"));
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("h100"));
  EXPECT_TRUE(CallsOf("PATCH").empty());
  EXPECT_EQ(MustGet(path), created);
}

// ---- 4. Suspend of a started Job --------------------------------------------

TEST_F(ActuatorTest, SuspendOfStartedJobClearsStartTimeThenRestoresTemplate) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  const broker::ReleaseOrder release = JobRelease("train", uid);
  StartActuator();
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  ASSERT_THAT(recorder_.Snapshot()[0].status, IsOk());

  // The Job controller starts it.
  json running = MustGet(path);
  ASSERT_EQ(running["spec"]["suspend"], false);
  running["status"]["startTime"] = "2025-01-01T00:00:00Z";
  running["status"]["active"] = 2;
  ASSERT_THAT(api_->Replace(path, running), IsOk());
  api_->ClearCalls();

  actuator_->Suspend(SuspendOf(release));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  EXPECT_EQ(results[1].key, release.key);
  EXPECT_EQ(results[1].uid, uid);
  EXPECT_THAT(results[1].detail, HasSubstr("suspended"));
  EXPECT_THAT(results[1].detail, HasSubstr("startTime cleared"));
  EXPECT_THAT(results[1].detail, HasSubstr("templates restored"));
  EXPECT_THAT(results[1].detail, HasSubstr("InClusterQueue"));

  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], true);
  EXPECT_FALSE(job["status"].contains("startTime"));
  EXPECT_EQ(job["spec"]["template"], created["spec"]["template"]) << "what release added is gone, the rest kept";
  EXPECT_FALSE(job["metadata"].value("annotations", json::object()).contains(kAnnotation));

  // Suspend, clear startTime through /status, restore: in that order.
  std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 3u);
  for (const RecordedCall& c : patches) EXPECT_EQ(c.status, 200) << c.path << " " << c.body;
  EXPECT_EQ(patches[0].path, path);
  EXPECT_THAT(patches[0].body, HasSubstr("/spec/suspend"));
  EXPECT_EQ(patches[1].path, path + "/status");
  EXPECT_THAT(patches[1].body, HasSubstr("/status/startTime"));
  EXPECT_EQ(patches[2].path, path);
  EXPECT_THAT(patches[2].body, HasSubstr("/spec/template/spec/nodeSelector/gpu.example.com~1class"));
  EXPECT_THAT(patches[2].body, HasSubstr("/metadata/annotations/gangkeeper.io~1admitted-flavors"));
  EXPECT_THAT(patches[2].body, ::testing::Not(HasSubstr("topology.example.com~1zone")))
      << "the template selected the zone before release";
  ExpectPatchesTestUid({{path, uid}});

  // Again: nothing left to do.
  api_->ClearCalls();
  actuator_->Suspend(SuspendOf(release));
  results = recorder_.WaitFor(3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[2].release);
  EXPECT_THAT(results[2].detail, HasSubstr("already suspended"));
  EXPECT_TRUE(CallsOf("PATCH").empty());
  EXPECT_EQ(MustGet(path), job);

  // Deleted: gone already.
  ASSERT_THAT(api_->Delete(path), IsOk());
  actuator_->Suspend(SuspendOf(release));
  results = recorder_.WaitFor(4);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_FALSE(results[3].release);
  EXPECT_THAT(results[3].detail, HasSubstr("already gone"));
}

TEST_F(ActuatorTest, SuspendOfReleasedJobThatNeverStarted) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  StartActuator();
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  api_->ClearCalls();

  actuator_->Suspend(SuspendOf(release));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  EXPECT_THAT(results[1].detail, ::testing::Not(HasSubstr("startTime")));
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], true);
  EXPECT_EQ(job["spec"]["template"], created["spec"]["template"]);
  EXPECT_EQ(CallsOf("PATCH").size(), 2u) << "suspend, restore; no /status";
  ExpectPatchesTestUid({{path, release.uid}});
}

// Partial admission: the Job runs the admitted count and gets its own back
// when suspended.
TEST_F(ActuatorTest, APartiallyAdmittedJobRunsTheAdmittedCountUntilSuspended) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  release.assignment.pod_sets = {PodSetAssignment("main", 1, "a100")};
  StartActuator();
  actuator_->Release(release);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_EQ(job["spec"]["parallelism"], 1);
  EXPECT_EQ(job["metadata"]["annotations"]["gangkeeper.io/full-parallelism"], "2");

  actuator_->Suspend(SuspendOf(release));
  ASSERT_EQ(recorder_.WaitFor(2).size(), 2u);
  job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], true);
  EXPECT_EQ(job["spec"]["parallelism"], 2);
  EXPECT_FALSE(job["metadata"]["annotations"].contains("gangkeeper.io/full-parallelism"));
  EXPECT_EQ(job["spec"]["template"], created["spec"]["template"]);
}

TEST_F(ActuatorTest, ReleaseAfterSomeoneElseSuspendedTakesTheOldPlacementOutFirst) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  StartActuator();
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  // Someone suspends it by hand; the placement and the record stay.
  json job = MustGet(path);
  job["spec"]["suspend"] = true;
  ASSERT_THAT(api_->Replace(path, job), IsOk());
  // Released again (the broker admitted it anew), then suspended by us: the
  // template ends exactly as it was created, with nothing added twice.
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(2).size(), 2u);
  EXPECT_THAT(recorder_.Snapshot()[1].status, IsOk());
  const json released = MustGet(path);
  EXPECT_EQ(released["spec"]["suspend"], false);
  EXPECT_EQ(released["spec"]["template"]["spec"]["tolerations"].size(), 2u) << released.dump();
  actuator_->Suspend(SuspendOf(release));
  ASSERT_EQ(recorder_.WaitFor(3).size(), 3u);
  const json restored = MustGet(path);
  EXPECT_EQ(restored["spec"]["suspend"], true);
  EXPECT_EQ(restored["spec"]["template"], created["spec"]["template"]);
  ExpectPatchesTestUid({{path, release.uid}});
}

TEST_F(ActuatorTest, SuspendOfAnObjectReplacedUnderTheSameNameTouchesNothing) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string old_uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  ASSERT_THAT(api_->Delete(path), IsOk());
  json running = JobObject("train");
  running["spec"]["suspend"] = false;
  const json replacement = MustCreate(kJobs, running);
  StartActuator();
  api_->ClearCalls();

  actuator_->Suspend(SuspendOf(JobRelease("train", old_uid)));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].release);
  EXPECT_THAT(results[0].detail, HasSubstr("already gone"));
  EXPECT_TRUE(CallsOf("PATCH").empty());
  EXPECT_EQ(MustGet(path), replacement);
}

// ---- 5. PyTorchJob ----------------------------------------------------------

TEST_F(ActuatorTest, MpiJobIsPatchedAtTheVersionItWasCreatedWith) {
  // The training operator serves MPIJob as kubeflow.org/v1, mpi-operator as
  // v2beta1: the release goes to the version of the object.
  const std::string collection = "/apis/kubeflow.org/v1/namespaces/team-a/mpijobs";
  json mpi = {{"metadata", {{"name", "mpi"}}},
              {"spec",
               {{"runPolicy", {{"suspend", true}}},
                {"mpiReplicaSpecs", {{"Launcher", {{"replicas", 1}, {"template", PodTemplate()}}},
                                     {"Worker", {{"replicas", 2}, {"template", PodTemplate()}}}}}}}};
  const json created = MustCreate(collection, mpi);
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kMPIJob;
  w->api_version = "kubeflow.org/v1";
  w->namespace_name = "team-a";
  w->name = "mpi";
  w->uid = created["metadata"]["uid"];
  w->pod_sets = {MakePodSet("launcher", 1, "/spec/mpiReplicaSpecs/Launcher/template"),
                 MakePodSet("worker", 2, "/spec/mpiReplicaSpecs/Worker/template")};
  broker::ReleaseOrder order;
  order.key = {"team-a", "mpi"};
  order.uid = w->uid;
  order.workload = w;
  order.assignment.cluster_queue = "cq-gpu";
  order.assignment.pod_sets = {PodSetAssignment("launcher", 1, "a100"), PodSetAssignment("worker", 2, "a100")};
  order.placements = {Placement("launcher", kA100Labels, {}), Placement("worker", kA100Labels, {})};
  StartActuator();
  actuator_->Release(order);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_EQ(MustGet(collection + "/mpi")["spec"]["runPolicy"]["suspend"], false);
  for (const RecordedCall& c : api_->Calls()) EXPECT_EQ(c.path, collection + "/mpi") << c.method;
}

TEST_F(ActuatorTest, AServerWithoutJsonPatchGetsAGuardedMergePatch) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  ScriptedFailure unsupported;
  unsupported.method = "PATCH";
  unsupported.status = 415;
  unsupported.times = 1;
  api_->Fail(unsupported);
  StartActuator();
  actuator_->Release(release);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeSelector"]["disk"], "ssd");
  EXPECT_TRUE(job["metadata"]["annotations"].contains(kAnnotation));
  const std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].content_type, kJsonPatch);
  EXPECT_EQ(patches[1].content_type, "application/merge-patch+json");
  const json merge = json::parse(patches[1].body);
  EXPECT_EQ(merge["metadata"]["uid"], release.uid);  // the guard
  EXPECT_EQ(merge["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
  EXPECT_EQ(merge["spec"]["suspend"], false);
}

TEST_F(ActuatorTest, ReleasesAndSuspendsPyTorchJobMasterAndWorker) {
  const std::string path = std::string(kPyTorchJobs) + "/pt";
  const json created = MustCreate(kPyTorchJobs, PyTorchJobObject("pt"));
  const std::string uid = created["metadata"]["uid"];
  broker::ReleaseOrder order;
  order.key = {"team-a", "pt"};
  order.uid = uid;
  order.workload = PyTorchWorkload("pt", uid);
  order.assignment.cluster_queue = "cq-gpu";
  order.assignment.pod_sets = {PodSetAssignment("master", 1, "cpu-only"), PodSetAssignment("worker", 2, "a100")};
  order.placements = {Placement("master", {{"pool", "cpu"}}, {}),
                      Placement("worker", kA100Labels, {GpuToleration()})};
  StartActuator();

  actuator_->Release(order);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("master: nodeSelector {pool=cpu}"));
  EXPECT_THAT(results[0].detail, HasSubstr("worker:"));

  json pt = MustGet(path);
  EXPECT_EQ(pt["spec"]["runPolicy"]["suspend"], false);
  const json& master = pt["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"];
  const json& worker = pt["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"];
  EXPECT_EQ(master["nodeSelector"], json({{"pool", "cpu"}}));
  EXPECT_FALSE(master.contains("tolerations"));
  EXPECT_EQ(worker["nodeSelector"], json(kA100Labels));
  EXPECT_EQ(worker["tolerations"], json::array({GpuTolerationJson()}));
  json record = json::parse(pt["metadata"]["annotations"][kAnnotation].get<std::string>());
  ASSERT_EQ(record["podSets"].size(), 2u);
  EXPECT_EQ(record["podSets"][0]["name"], "master");
  EXPECT_EQ(record["podSets"][0]["flavors"]["nvidia.com/gpu"], "cpu-only");
  EXPECT_EQ(record["podSets"][1]["name"], "worker");
  EXPECT_EQ(record["podSets"][1]["flavors"]["nvidia.com/gpu"], "a100");
  ASSERT_EQ(CallsOf("PATCH").size(), 1u);
  ExpectPatchesTestUid({{path, uid}});

  // Suspend: runPolicy.suspend back to true, templates as they were.
  api_->ClearCalls();
  broker::SuspendOrder suspend;
  suspend.key = order.key;
  suspend.uid = uid;
  suspend.workload = order.workload;
  suspend.reason = "InCohortReclamation";
  actuator_->Suspend(suspend);
  results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  pt = MustGet(path);
  EXPECT_EQ(pt["spec"]["runPolicy"]["suspend"], true);
  for (const char* role : {"Master", "Worker"}) {
    const json& spec = pt["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"];
    EXPECT_EQ(OrEmptyObject(spec, "nodeSelector"), json::object()) << role;
    EXPECT_TRUE(spec.value("tolerations", json::array()).empty()) << role;
    EXPECT_EQ(spec["containers"], PodTemplate()["spec"]["containers"]) << role;
  }
  EXPECT_FALSE(pt["metadata"].value("annotations", json::object()).contains(kAnnotation));
  EXPECT_EQ(CallsOf("PATCH").size(), 2u) << "suspend, restore (no startTime for Kubeflow)";
  ExpectPatchesTestUid({{path, uid}});
}

// An AppWrapper takes its placement beside the wrapped templates, in
// spec.components[i].podSetInfos[j] (its controller copies it into the
// template when it creates the component): the list is created or
// extended, the wrapped objects stay as written, and suspend takes out
// exactly what release added (a user's own entry stays).
TEST_F(ActuatorTest, ReleasesAndSuspendsAnAppWrapperThroughItsPodSetInfos) {
  constexpr char kAppWrappers[] = "/apis/workload.codeflare.dev/v1beta2/namespaces/team-a/appwrappers";
  const std::string path = std::string(kAppWrappers) + "/aw";
  const json pytorch = PyTorchJobObject("wrapped");
  json aw = {{"apiVersion", "workload.codeflare.dev/v1beta2"},
             {"kind", "AppWrapper"},
             {"metadata", {{"name", "aw"}, {"namespace", "team-a"}}},
             {"spec",
              {{"suspend", true},
               {"components",
                json::array({{{"template", {{"apiVersion", "v1"}, {"kind", "Service"}}}},
                             {{"podSetInfos", json::array({{{"nodeSelector", {{"team", "a"}}}}})},
                              {"template", pytorch}}})}}}};
  const json created = MustCreate(kAppWrappers, aw);
  const std::string uid = created["metadata"]["uid"];
  auto w = std::make_shared<workload::Workload>();
  w->kind = workload::Kind::kAppWrapper;
  w->api_version = "workload.codeflare.dev/v1beta2";
  w->namespace_name = "team-a";
  w->name = "aw";
  w->uid = uid;
  w->suspended = true;
  w->pod_sets = {MakePodSet("aw-0", 1, "/spec/components/1/podSetInfos/0"),
                 MakePodSet("aw-1", 2, "/spec/components/1/podSetInfos/1")};
  broker::ReleaseOrder order;
  order.key = {"team-a", "aw"};
  order.uid = uid;
  order.workload = w;
  order.assignment.cluster_queue = "cq-gpu";
  order.assignment.pod_sets = {PodSetAssignment("aw-0", 1, "a100"), PodSetAssignment("aw-1", 2, "a100")};
  order.placements = {Placement("aw-0", kA100Labels, {GpuToleration()}), Placement("aw-1", kA100Labels, {GpuToleration()})};
  StartActuator();

  actuator_->Release(order);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  json got = MustGet(path);
  EXPECT_EQ(got["spec"]["suspend"], false);
  const json& infos = got["spec"]["components"][1]["podSetInfos"];
  ASSERT_EQ(infos.size(), 2u) << got.dump();
  json want0 = kA100Labels;
  want0["team"] = "a";
  EXPECT_EQ(infos[0]["nodeSelector"], want0) << "added beside the user's own entry";
  EXPECT_EQ(infos[1]["nodeSelector"], json(kA100Labels));
  EXPECT_EQ(infos[1]["tolerations"], json::array({GpuTolerationJson()}));
  EXPECT_EQ(got["spec"]["components"][1]["template"], pytorch) << "the wrapped object is not touched";
  EXPECT_FALSE(got["spec"]["components"][0].contains("podSetInfos")) << "a component without pods gets none";
  ASSERT_EQ(CallsOf("PATCH").size(), 1u);
  ExpectPatchesTestUid({{path, uid}});

  api_->ClearCalls();
  broker::SuspendOrder suspend;
  suspend.key = order.key;
  suspend.uid = uid;
  suspend.workload = w;
  suspend.reason = "InClusterQueue";
  actuator_->Suspend(suspend);
  results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  got = MustGet(path);
  EXPECT_EQ(got["spec"]["suspend"], true);
  const json& restored = got["spec"]["components"][1]["podSetInfos"];
  EXPECT_EQ(restored[0]["nodeSelector"], json({{"team", "a"}})) << "the user's entry stays";
  EXPECT_EQ(OrEmptyObject(restored[1], "nodeSelector"), json::object());
  EXPECT_TRUE(restored[1].value("tolerations", json::array()).empty());
  EXPECT_FALSE(got["metadata"].value("annotations", json::object()).contains(kAnnotation));
  EXPECT_EQ(got["spec"]["components"][1]["template"], pytorch);
}

// ---- 6. Pod groups ------------------------------------------------------------

class PodGroupTest : public ActuatorTest {
 protected:
  // Creates p1..p4 of group g1; remembers their uids by path.
  void CreateGroup() {
    for (const char* name : {"p1", "p2", "p3", "p4"}) {
      const json pod = MustCreate(kPods, GatedPod(name, "g1"));
      ASSERT_EQ(pod["spec"]["tolerations"].size(), 2u) << "the fake's default tolerations";
      uids_[std::string(kPods) + "/" + name] = pod["metadata"]["uid"];
      created_[name] = pod;
    }
    // Another group and a pod without a group in the namespace: untouched.
    MustCreate(kPods, GatedPod("other", "g2"));
  }
  std::map<std::string, std::string> uids_;
  std::map<std::string, json> created_;
};

TEST_F(PodGroupTest, ReleasePlacesEveryPodThenUngatesThem) {
  CreateGroup();
  StartActuator();
  api_->ClearCalls();

  actuator_->Release(PodGroupRelease("g1"));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("ungated 4 pod(s)"));

  for (const char* name : {"p1", "p2", "p3", "p4"}) {
    SCOPED_TRACE(name);
    const json pod = MustGet(std::string(kPods) + "/" + name);
    EXPECT_FALSE(HasGate(pod));
    EXPECT_EQ(pod["spec"]["nodeSelector"], json({{"disk", "ssd"}, {"gpu.example.com/class", "a100"}}));
    json want_tolerations = created_[name]["spec"]["tolerations"];
    want_tolerations.push_back(GpuTolerationJson());
    EXPECT_EQ(pod["spec"]["tolerations"], want_tolerations) << "the default tolerations kept";
  }
  EXPECT_TRUE(HasGate(MustGet(std::string(kPods) + "/other")));

  // Phase 1 (placement) on every pod before phase 2 (gate) on any.
  std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 8u);
  for (size_t i = 0; i < patches.size(); ++i) {
    SCOPED_TRACE(patches[i].body);
    EXPECT_EQ(patches[i].status, 200);
    const bool gate = absl::StrContains(patches[i].body, "/spec/schedulingGates");
    EXPECT_EQ(gate, i >= 4) << "patch " << i << " to " << patches[i].path;
  }
  ExpectPatchesTestUid(uids_);
  EXPECT_TRUE(CallsOf("DELETE").empty());

  // Again: nothing gated is left, nothing is patched.
  api_->ClearCalls();
  actuator_->Release(PodGroupRelease("g1"));
  results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_THAT(results[1].status, IsOk());
  EXPECT_TRUE(CallsOf("PATCH").empty());
}

TEST_F(PodGroupTest, PhaseOneFailureLeavesEveryPodGated) {
  CreateGroup();
  StartActuator();
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = std::string(kPods) + "/p3";
  f.status = 403;
  f.times = -1;
  api_->Fail(f);
  api_->ClearCalls();

  actuator_->Release(PodGroupRelease("g1"));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].release);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kPermissionDenied) << results[0].status;
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("p3"));
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("no pod was ungated"));
  for (const char* name : {"p1", "p2", "p3", "p4"}) {
    EXPECT_TRUE(HasGate(MustGet(std::string(kPods) + "/" + name))) << name;
  }
  for (const RecordedCall& c : CallsOf("PATCH")) {
    EXPECT_THAT(c.body, ::testing::Not(HasSubstr("schedulingGates"))) << "no gate removal was tried";
  }
  EXPECT_TRUE(CallsOf("DELETE").empty());
  api_->ClearFailures();
}

TEST_F(PodGroupTest, PhaseTwoFailureDeletesThePodsAlreadyUngated) {
  CreateGroup();
  StartActuator();
  // p3's first PATCH (its placement, phase 1) goes through: a delay-only
  // failure of zero length consumes the first match. Every later PATCH of
  // p3 (the gate removal, phase 2) is refused.
  ScriptedFailure pass;
  pass.method = "PATCH";
  pass.path_contains = std::string(kPods) + "/p3";
  pass.status = 0;
  pass.times = 1;
  api_->Fail(pass);
  ScriptedFailure refuse = pass;
  refuse.status = 403;
  refuse.times = -1;
  api_->Fail(refuse);
  api_->ClearCalls();

  actuator_->Release(PodGroupRelease("g1"));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status.code(), absl::StatusCode::kPermissionDenied) << results[0].status;
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("pod p3 could not be ungated"));
  EXPECT_THAT(std::string(results[0].status.message()), HasSubstr("2 ungated pod(s) deleted"));

  // p1 and p2 had been ungated: deleted. p3 and p4 still gated.
  std::vector<std::string> left;
  for (const json& pod : api_->List(kPods)) {
    const std::string name = pod["metadata"]["name"];
    left.push_back(name);
    EXPECT_TRUE(HasGate(pod)) << name << " is ungated";
  }
  EXPECT_THAT(left, ::testing::ElementsAre("other", "p3", "p4"));
  std::vector<RecordedCall> deletes = CallsOf("DELETE");
  ASSERT_EQ(deletes.size(), 2u);
  EXPECT_EQ(deletes[0].path, std::string(kPods) + "/p1");
  EXPECT_EQ(deletes[1].path, std::string(kPods) + "/p2");
  for (const RecordedCall& d : deletes) {
    json body = json::parse(d.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << d.body;
    EXPECT_EQ(body.value("propagationPolicy", ""), "Background") << d.body;
    EXPECT_EQ(body["preconditions"]["uid"], uids_[d.path]) << "only the pod that was ungated";
  }
  // Phase 1 did reach every pod, p3 included, before any gate was removed.
  int placements = 0;
  for (const RecordedCall& c : CallsOf("PATCH")) {
    if (!absl::StrContains(c.body, "schedulingGates")) ++placements;
  }
  EXPECT_EQ(placements, 4);
  ExpectPatchesTestUid(uids_);
  api_->ClearFailures();
}

// ---- 7. Suspend of a pod group ---------------------------------------------

TEST_F(PodGroupTest, SuspendDeletesEveryPodWithUidPreconditions) {
  CreateGroup();
  StartActuator();
  actuator_->Release(PodGroupRelease("g1"));
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  ASSERT_THAT(recorder_.Snapshot()[0].status, IsOk());
  api_->ClearCalls();

  broker::SuspendOrder s;
  s.key = {"team-a", "g1"};
  s.uid = "group-uid-g1";
  s.workload = PodGroupWorkload("g1");
  s.reason = "InClusterQueue";
  actuator_->Suspend(s);
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  EXPECT_EQ(results[1].key, s.key);
  EXPECT_THAT(results[1].detail, HasSubstr("deleted 4 pod(s)"));

  std::vector<json> left = api_->List(kPods);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["metadata"]["name"], "other");
  std::vector<RecordedCall> deletes = CallsOf("DELETE");
  ASSERT_EQ(deletes.size(), 4u);
  for (const RecordedCall& d : deletes) {
    SCOPED_TRACE(d.path);
    EXPECT_EQ(d.status, 200);
    json body = json::parse(d.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << d.body;
    ASSERT_TRUE(uids_.count(d.path));
    EXPECT_EQ(body["preconditions"]["uid"], uids_[d.path]);
    EXPECT_EQ(body["propagationPolicy"], "Background");
  }
  EXPECT_TRUE(CallsOf("PATCH").empty());

  // Nothing left: stopped again.
  actuator_->Suspend(s);
  results = recorder_.WaitFor(3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[2].release);
  EXPECT_THAT(results[2].detail, HasSubstr("deleted 0 pod(s)"));
}

// ---- A single Pod (no group) ------------------------------------------------

TEST_F(ActuatorTest, ReleasesAndSuspendsASinglePod) {
  const std::string path = std::string(kPods) + "/solo";
  json obj = GatedPod("solo", "");
  obj["metadata"]["labels"].erase("kueue.x-k8s.io/pod-group-name");
  const json created = MustCreate(kPods, obj);
  const std::string uid = created["metadata"]["uid"];
  auto w = std::make_shared<workload::Workload>(*PodGroupWorkload(""));
  w->name = "solo";
  w->uid = uid;
  w->pod_group_total_count = 0;
  w->pod_sets = {MakePodSet("main", 1, "")};
  broker::ReleaseOrder order;
  order.key = {"team-a", "solo"};
  order.uid = uid;
  order.workload = w;
  order.assignment.cluster_queue = "cq-gpu";
  order.assignment.pod_sets = {PodSetAssignment("main", 1, "a100")};
  order.placements = {Placement("main", kA100Labels, {GpuToleration()})};
  StartActuator();
  api_->ClearCalls();

  actuator_->Release(order);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("ungated 1 pod(s)"));
  const json pod = MustGet(path);
  EXPECT_FALSE(HasGate(pod));
  EXPECT_EQ(pod["spec"]["nodeSelector"], json({{"disk", "ssd"},
                                               {"gpu.example.com/class", "a100"},
                                               {"topology.example.com/zone", "z1"}}));
  json want_tolerations = created["spec"]["tolerations"];
  want_tolerations.push_back(GpuTolerationJson());
  EXPECT_EQ(pod["spec"]["tolerations"], want_tolerations);
  EXPECT_EQ(CallsOf("PATCH").size(), 2u) << "placement, then the gate";
  ExpectPatchesTestUid({{path, uid}});

  api_->ClearCalls();
  broker::SuspendOrder s;
  s.key = order.key;
  s.uid = uid;
  s.workload = w;
  s.reason = "InClusterQueue";
  actuator_->Suspend(s);
  results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[1].release);
  EXPECT_THAT(results[1].detail, HasSubstr("deleted 1 pod(s)"));
  EXPECT_FALSE(api_->Get(path).ok());
  std::vector<RecordedCall> deletes = CallsOf("DELETE");
  ASSERT_EQ(deletes.size(), 1u);
  json body = json::parse(deletes[0].body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << deletes[0].body;
  EXPECT_EQ(body["preconditions"]["uid"], uid);
  EXPECT_EQ(body["propagationPolicy"], "Background");
}

// ---- 8. Retries ---------------------------------------------------------------

TEST_F(ActuatorTest, ServerErrorsAreRetriedByTheClient) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  StartActuator();
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = path;
  f.status = 500;
  f.times = 2;
  api_->Fail(f);
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 3u);
  EXPECT_EQ(patches[0].status, 500);
  EXPECT_EQ(patches[1].status, 500);
  EXPECT_EQ(patches[2].status, 200);
  EXPECT_EQ(patches[0].body, patches[2].body) << "the same patch, resent";
  EXPECT_EQ(MustGet(path)["spec"]["suspend"], false);
  ExpectPatchesTestUid({{path, uid}});
}

TEST_F(ActuatorTest, TooManyRequestsWaitsForRetryAfter) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  StartActuator();
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = path;
  f.status = 429;
  f.retry_after = "1";
  f.times = 1;
  api_->Fail(f);
  api_->ClearCalls();

  const absl::Time start = absl::Now();
  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_GE(took, absl::Milliseconds(900)) << "Retry-After: 1 honoured";
  std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[0].status, 429);
  EXPECT_EQ(patches[1].status, 200);
  EXPECT_EQ(MustGet(path)["spec"]["suspend"], false);
}

TEST_F(ActuatorTest, FailedTestOpRereadsAndPatchesAgain) {
  const std::string path = std::string(kJobs) + "/train";
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  StartActuator();
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = path;
  f.status = 422;
  f.times = 1;
  api_->Fail(f);
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  EXPECT_EQ(CallsOf("GET").size(), 2u) << "read again after the 422";
  EXPECT_EQ(CallsOf("PATCH").size(), 2u);
  EXPECT_EQ(MustGet(path)["spec"]["suspend"], false);
}

// ---- Releases from the kept object (HeldObjects, no GET) ----------------------

// The same release sent from the object the reconciler kept and after a GET
// leaves the two Jobs alike; the kept one is sent without a read.
TEST_F(ActuatorTest, AReleaseOfAKeptHeldObjectNeedsNoReadAndChangesTheSame) {
  const std::string kept_path = std::string(kJobs) + "/kept";
  const std::string read_path = std::string(kJobs) + "/read";
  const json kept = MustCreate(kJobs, JobObject("kept"));
  const json read = MustCreate(kJobs, JobObject("read"));
  HeldObjects held;
  held.Put({"team-a", "kept"}, kept["metadata"]["uid"], kept["metadata"]["resourceVersion"],
           MustGet(kept_path).dump());
  StartActuator(ActuatorOptions{.workers = 1, .held_objects = &held});
  api_->ClearCalls();

  actuator_->Release(JobRelease("kept", kept["metadata"]["uid"]));
  actuator_->Release(JobRelease("read", read["metadata"]["uid"]));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  for (const Result& r : results) {
    ASSERT_THAT(r.status, IsOk());
    EXPECT_THAT(r.detail, HasSubstr("unsuspend"));
  }
  std::vector<std::string> calls;
  for (const RecordedCall& c : api_->Calls()) calls.push_back(c.method + " " + c.path);
  EXPECT_THAT(calls, ::testing::ElementsAre("PATCH " + kept_path, "GET " + read_path, "PATCH " + read_path));
  ExpectPatchesTestUid({{kept_path, kept["metadata"]["uid"]}, {read_path, read["metadata"]["uid"]}});
  EXPECT_EQ(json::parse(CallsOf("PATCH")[0].body)[1],
            json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", kept["metadata"]["resourceVersion"]}}))
      << "guarded by the kept version";

  json a = MustGet(kept_path), b = MustGet(read_path);
  EXPECT_EQ(a["spec"], b["spec"]);
  EXPECT_EQ(a["metadata"]["annotations"], b["metadata"]["annotations"]);
  EXPECT_EQ(actuator_->stats().unread_releases, 1u);
  EXPECT_EQ(actuator_->stats().unread_misses, 0u);
  EXPECT_EQ(held.Find({"team-a", "kept"}, kept["metadata"]["uid"]), nullptr) << "used up";
}

// The server stored a newer version than the one kept (the watch lags, or
// the template changed): the guarded PATCH is refused, the object is read,
// and the release placed into what is stored now. The miss is not one of
// the max_conflicts.
TEST_F(ActuatorTest, AKeptVersionTheServerHasMovedPastIsReadAndReleasedAsStored) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  HeldObjects held;
  held.Put({"team-a", "train"}, uid, created["metadata"]["resourceVersion"], MustGet(path).dump());
  json changed = MustGet(path);
  changed["spec"]["template"]["spec"]["nodeSelector"]["rack"] = "r1";
  ASSERT_THAT(api_->Replace(path, changed).status(), IsOk());
  StartActuator(ActuatorOptions{.workers = 1, .max_conflicts = 0, .held_objects = &held});
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  std::vector<std::string> calls;
  for (const RecordedCall& c : api_->Calls()) calls.push_back(absl::StrCat(c.method, " ", c.status));
  EXPECT_THAT(calls, ::testing::ElementsAre("PATCH 422", "GET 200", "PATCH 200"));
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeSelector"]["rack"], "r1") << "the stored change kept";
  EXPECT_EQ(job["spec"]["template"]["spec"]["nodeSelector"]["gpu.example.com/class"], "a100");
  EXPECT_EQ(actuator_->stats().unread_misses, 1u);
  EXPECT_EQ(actuator_->stats().unread_releases, 0u);
}

// A kept object of another instance (deleted and recreated under the name)
// or without a resourceVersion is never used.
TEST_F(ActuatorTest, AKeptObjectOfAnotherInstanceIsNotUsed) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  HeldObjects held;
  json old = MustGet(path);
  old["metadata"]["uid"] = "an-older-instance";
  held.Put({"team-a", "train"}, "an-older-instance", created["metadata"]["resourceVersion"], old.dump());
  StartActuator(ActuatorOptions{.workers = 1, .held_objects = &held});
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", uid));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_THAT(results[0].status, IsOk());
  ASSERT_EQ(CallsOf("GET").size(), 1u);
  ASSERT_EQ(CallsOf("PATCH").size(), 1u);
  EXPECT_EQ(actuator_->stats().unread_releases, 0u);
  EXPECT_EQ(MustGet(path)["spec"]["suspend"], false);
}

// Nothing is concluded from a kept version without a guarded patch: a kept
// text that says the Job runs, ended, or has a placement that conflicts
// (each out of date here) makes the release read the Job, which is held,
// and release it.
TEST_F(ActuatorTest, AKeptVersionIsOnlyEverTheBaseOfAGuardedPatch) {
  for (const std::string out_of_date : {"running", "finished", "conflicting"}) {
    SCOPED_TRACE(out_of_date);
    const std::string name = "train-" + out_of_date;
    const std::string path = std::string(kJobs) + "/" + name;
    const json created = MustCreate(kJobs, JobObject(name));
    const std::string uid = created["metadata"]["uid"];
    json kept = MustGet(path);
    if (out_of_date == "running") kept["spec"]["suspend"] = false;
    if (out_of_date == "finished") {
      kept["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
    }
    if (out_of_date == "conflicting") kept["spec"]["template"]["spec"]["nodeSelector"]["gpu.example.com/class"] = "t4";
    HeldObjects held;
    held.Put({"team-a", name}, uid, created["metadata"]["resourceVersion"], kept.dump());
    StartActuator(ActuatorOptions{.workers = 1, .max_conflicts = 0, .held_objects = &held});
    api_->ClearCalls();
    const size_t before = recorder_.Snapshot().size();

    actuator_->Release(JobRelease(name, uid));
    std::vector<Result> results = recorder_.WaitFor(before + 1);
    ASSERT_EQ(results.size(), before + 1);
    ASSERT_THAT(results.back().status, IsOk());
    EXPECT_THAT(results.back().detail, HasSubstr("PATCH " + path));
    std::vector<std::string> calls;
    for (const RecordedCall& c : api_->Calls()) calls.push_back(c.method);
    EXPECT_THAT(calls, ::testing::ElementsAre("GET", "PATCH"));
    EXPECT_EQ(MustGet(path)["spec"]["suspend"], false);
    actuator_.reset();
  }
}

// The broker as the generative order tests model it (a model of its
// phases: an order given makes its kind wanted, or, sometimes, the
// workload finishes at once; a workload may finish between orders): per
// workload what it wants now, and every question the actuator asked, in
// the order asked (per workload the order of execution: one order at a
// time). An order's id travels in the release's cluster_queue and the
// suspension's reason.
class OrderModel {
 public:
  struct Asked {
    int id;
    bool release;
    bool answer;
  };
  // What the server must have seen for the orders carried out, from a
  // suspended Job: a release GETs and, if suspended, PATCHes once; a
  // suspension GETs and, if released, PATCHes twice (suspend, restore).
  struct Expected {
    int gets = 0;
    int patches = 0;
    bool suspended = true;
  };

  void Wire(ActuatorOptions* options) {
    options->release_wanted = [this](const broker::ReleaseOrder& o) {
      return Ask(o.key.name, o.assignment.cluster_queue, true);
    };
    options->suspend_wanted = [this](const broker::SuspendOrder& o) { return Ask(o.key.name, o.reason, false); };
  }

  // Order `id` for `base`'s workload: the model's wish changes (drawn from
  // `rng`), then the order is given.
  void Give(std::mt19937& rng, KubeActuator& actuator, const broker::ReleaseOrder& base, int id, bool release,
            const std::vector<std::string>& names) {
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<size_t> pick(0, names.size() - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      want_[base.key.name] = percent(rng) < 80 ? (release ? "release" : "suspend") : "";
      if (percent(rng) < 10) want_[names[pick(rng)]] = "";  // another finished
    }
    given_[base.key.name].push_back({id, release, true});
    broker::ReleaseOrder r = base;
    r.assignment.cluster_queue = absl::StrCat(id);
    if (release) {
      actuator.Release(r);
    } else {
      broker::SuspendOrder s = SuspendOf(r);
      s.reason = absl::StrCat(id);
      actuator.Suspend(s);
    }
  }

  // The orders carried out for `name` (asked about and wanted), checking
  // that they were asked about in the order given.
  std::vector<Asked> Sent(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Asked> sent;
    int last = -1;
    for (const Asked& a : asked_[name]) {
      EXPECT_GT(a.id, last) << "an order asked about after a later one";
      last = a.id;
      if (a.answer) sent.push_back(a);
    }
    return sent;
  }

  static Expected ExpectedFor(const std::vector<Asked>& sent) {
    Expected e;
    for (const Asked& a : sent) {
      ++e.gets;
      if (a.release && e.suspended) ++e.patches;
      if (!a.release && !e.suspended) e.patches += 2;
      e.suspended = !a.release;
    }
    return e;
  }

  // The last order given for `name` was carried out when the model still
  // wants it.
  void ExpectLastWantedCarriedOut(const std::string& name, const std::vector<Asked>& sent, bool suspended) {
    if (given_[name].empty()) return;
    const Asked last = given_[name].back();
    std::lock_guard<std::mutex> lock(mu_);
    if (want_[name] != (last.release ? "release" : "suspend")) return;
    ASSERT_FALSE(sent.empty());
    EXPECT_EQ(sent.back().id, last.id) << "the last wanted order was not carried out";
    EXPECT_EQ(suspended, !last.release);
  }

 private:
  bool Ask(const std::string& name, const std::string& id, bool release) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool answer = want_[name] == (release ? "release" : "suspend");
    int n = 0;
    EXPECT_TRUE(absl::SimpleAtoi(id, &n)) << id;
    asked_[name].push_back({n, release, answer});
    return answer;
  }

  std::mutex mu_;
  std::map<std::string, std::string> want_;
  std::map<std::string, std::vector<Asked>> asked_;
  std::map<std::string, std::vector<Asked>> given_;  // the test thread's only
};

// Generative, with the reconciler's kept objects in play: before random
// orders (as in GenerativeOrdersAreSentInOrderAndNeverStale), the test keeps
// for a workload either the version stored now or one stored earlier (a
// lagging watch), or forgets it. Whatever is kept: what reaches the server
// is what the same orders send without any kept object (the same successful
// PATCHes, the same final state), every PATCH is guarded by the object's
// uid and the version it was built from, a version the server has moved
// past is refused and then read (never concluded from), and each release
// sent from a kept version saves exactly one GET.
TEST_F(ActuatorTest, GenerativeKeptVersionsNeverChangeWhatIsSent) {
  constexpr int kSeeds = 12;
  constexpr int kWorkloads = 4;
  constexpr int kOrders = 40;
  uint64_t unread = 0, misses = 0;  // over every seed
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    std::vector<std::string> names, uids, paths;
    std::vector<std::vector<json>> versions(kWorkloads);  // every version seen, oldest first
    for (int w = 0; w < kWorkloads; ++w) {
      names.push_back(absl::StrCat("k", seed, "-w", w));
      uids.push_back(MustCreate(kJobs, JobObject(names.back()))["metadata"]["uid"]);
      paths.push_back(std::string(kJobs) + "/" + names.back());
      versions[w].push_back(MustGet(paths.back()));
    }
    OrderModel model;
    HeldObjects held;
    ActuatorOptions options;
    options.held_objects = &held;
    model.Wire(&options);
    const size_t answered_before = recorder_.Snapshot().size();
    api_->ClearCalls();
    StartActuator(options);

    std::uniform_int_distribution<int> pick(0, kWorkloads - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    for (int id = 0; id < kOrders; ++id) {
      const int w = pick(rng);
      const bool release = percent(rng) < 50;
      // What the reconciler keeps meanwhile.
      if (percent(rng) < 50) versions[w].push_back(MustGet(paths[w]));
      const int keep = percent(rng);
      const broker::ReleaseOrder base = JobRelease(names[w], uids[w]);
      if (keep < 70) {
        const json& v = keep < 40 ? versions[w].back() : versions[w][rng() % versions[w].size()];
        held.Put(base.key, uids[w], v["metadata"]["resourceVersion"], v.dump());
      } else if (keep < 80) {
        held.Forget(base.key);
      }
      model.Give(rng, *actuator_, base, id, release, names);
      if (percent(rng) < 30) absl::SleepFor(absl::Microseconds(percent(rng) * 20));
    }
    ASSERT_TRUE(Eventually([&] { return AllOrdersAccountedFor(kOrders, answered_before); }))
        << "the actuator went idle";
    const ActuatorStats stats = actuator_->stats();
    actuator_.reset();

    const std::vector<RecordedCall> calls = api_->Calls();
    std::map<std::string, std::string> uid_of;
    for (int w = 0; w < kWorkloads; ++w) uid_of[paths[w]] = uids[w];
    ExpectPatchesTestUid(uid_of);
    int all_gets = 0, all_want_gets = 0, refused = 0;
    for (int w = 0; w < kWorkloads; ++w) {
      SCOPED_TRACE(names[w]);
      const std::vector<OrderModel::Asked> sent = model.Sent(names[w]);
      const OrderModel::Expected want = OrderModel::ExpectedFor(sent);
      int gets = 0, patches = 0;
      const RecordedCall* previous = nullptr;
      for (const RecordedCall& c : calls) {
        if (c.path != paths[w]) continue;
        if (previous != nullptr && previous->method == "PATCH" && previous->status == 422) {
          EXPECT_EQ(c.method, "GET") << "a refused PATCH from a kept version is followed by a read";
        }
        previous = &c;
        gets += c.method == "GET";
        if (c.method != "PATCH") continue;
        if (c.status == 422) {
          ++refused;
          continue;
        }
        EXPECT_EQ(c.status, 200) << c.body;
        ++patches;
        const json body = json::parse(c.body, nullptr, false);
        ASSERT_TRUE(body.is_array() && body.size() > 1) << c.body;
        const bool releases = std::any_of(body.begin(), body.end(), [](const json& op) {
          return op.value("path", "") == "/spec/suspend" && op.value("value", json()) == false;
        });
        if (releases) {
          EXPECT_EQ(body[1], json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", body[1]["value"]}}))
              << "a release is guarded by the version it was built from: " << c.body;
        }
      }
      EXPECT_EQ(patches, want.patches) << "the same changes as without kept objects";
      EXPECT_EQ(MustGet(paths[w])["spec"]["suspend"], want.suspended);
      EXPECT_LE(gets, want.gets);
      all_gets += gets;
      all_want_gets += want.gets;
      model.ExpectLastWantedCarriedOut(names[w], sent, want.suspended);
      ExpectAnsweredOnce(names[w], sent.size());
    }
    EXPECT_EQ(all_gets + static_cast<int>(stats.unread_releases), all_want_gets)
        << "each release sent from a kept version saves one GET, no more";
    EXPECT_EQ(refused, static_cast<int>(stats.unread_misses));
    unread += stats.unread_releases;
    misses += stats.unread_misses;
  }
  // Both ways a kept version goes were taken.
  EXPECT_GT(unread, 0u) << "no release was sent from a kept version";
  EXPECT_GT(misses, 0u) << "no kept version was out of date when used";
}

TEST(HeldObjectsTest, KeepsNoMoreThanItsBoundAndCountsItsBytes) {
  HeldObjects held(/*max_bytes=*/100);
  const broker::WorkloadKey a{"ns", "a"}, b{"ns", "b"}, c{"ns", "c"};
  held.Put(a, "ua", "1", std::string(40, 'a'));
  held.Put(b, "ub", "1", std::string(40, 'b'));
  EXPECT_EQ(held.stats().bytes, 80u);
  held.Put(c, "uc", "1", std::string(40, 'c'));  // over the bound: not kept
  EXPECT_EQ(held.Find(c, "uc"), nullptr);
  EXPECT_EQ(held.stats().refused, 1u);
  held.Put(a, "ua", "2", std::string(50, 'A'));  // a newer version replaces, within the bound
  ASSERT_NE(held.Find(a, "ua"), nullptr);
  EXPECT_EQ(*held.Find(a, "ua"), std::string(50, 'A'));
  EXPECT_EQ(held.stats().bytes, 90u);
  held.Put(b, "ub", "2", std::string(70, 'B'));  // a newer version that does not fit: the old goes too
  EXPECT_EQ(held.Find(b, "ub"), nullptr);
  EXPECT_EQ(held.stats().bytes, 50u);
  held.Put(a, "ua", "", "{}");  // no version to guard a patch by: nothing kept
  EXPECT_EQ(held.Find(a, "ua"), nullptr);
  held.Put(c, "uc", "3", std::string(100, 'c'));
  EXPECT_NE(held.Find(c, "uc"), nullptr) << "room again";
  held.Forget(c);
  EXPECT_EQ(held.stats().objects, 0u);
  EXPECT_EQ(held.stats().bytes, 0u);
}

TEST_F(ActuatorTest, PersistentUnprocessableGivesUpAfterMaxConflicts) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  StartActuator(ActuatorOptions{.dry_run = false, .workers = 1, .max_conflicts = 2});
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = path;
  f.status = 422;
  f.times = -1;
  api_->Fail(f);
  api_->ClearCalls();

  actuator_->Release(JobRelease("train", created["metadata"]["uid"]));
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].status.ok());
  EXPECT_EQ(CallsOf("PATCH").size(), 3u) << "the first try and max_conflicts more";
  EXPECT_EQ(MustGet(path), created);
  api_->ClearFailures();
}

TEST_F(ActuatorTest, FailedSuspendIsRetriedUntilItGoesThrough) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  StartActuator();
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  ASSERT_THAT(recorder_.Snapshot()[0].status, IsOk());
  ScriptedFailure f;
  f.method = "PATCH";
  f.path_contains = path;
  f.status = 403;  // final for the client
  f.times = 1;
  api_->Fail(f);
  api_->ClearCalls();

  actuator_->Suspend(SuspendOf(release));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u) << "stopped only once the suspend went through";
  EXPECT_FALSE(results[1].release);
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], true);
  EXPECT_EQ(job["spec"]["template"], created["spec"]["template"]);
  std::vector<RecordedCall> patches = CallsOf("PATCH");
  ASSERT_EQ(patches.size(), 3u) << "refused suspend, suspend, restore";
  EXPECT_EQ(patches[0].status, 403);
  EXPECT_EQ(patches[0].body, patches[1].body);
}

// ---- 9. Dry run -------------------------------------------------------------

TEST_F(ActuatorTest, AReplicaThatDoesNotLeadSendsNothingAndAnswersNothing) {
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  api_->ClearCalls();
  std::atomic<bool> leading{false};
  StartActuator(ActuatorOptions{.may_send = [&leading] { return leading.load(); }});
  const broker::ReleaseOrder release = JobRelease("train", uid);
  actuator_->Release(release);
  actuator_->Suspend(SuspendOf(release));
  // The orders are dropped: no call, no answer, the job still suspended.
  for (int i = 0; i < 20 && api_->Calls().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(api_->Calls().empty());
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(recorder_.Snapshot().empty());
  EXPECT_EQ(MustGet(std::string(kJobs) + "/train")["spec"]["suspend"], true);
  // Leading again (a new term): the new leader's orders go out.
  leading = true;
  actuator_->Release(release);
  std::vector<Result> results = recorder_.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_THAT(results[0].status, IsOk());
  EXPECT_EQ(MustGet(std::string(kJobs) + "/train")["spec"]["suspend"], false);
}

TEST_F(ActuatorTest, DryRunSendsNothing) {
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  api_->ClearCalls();
  actuator_ = std::make_unique<KubeActuator>(nullptr, ActuatorOptions{.dry_run = true, .clock = &base::RealClock()});
  actuator_->Bind(recorder_.Callbacks());

  const broker::ReleaseOrder release = JobRelease("train", uid);
  actuator_->Release(release);
  actuator_->Release(PodGroupRelease("g1"));
  // After the releases' answers: a suspension given while train's release
  // is still queued would replace it.
  ASSERT_EQ(recorder_.WaitFor(2).size(), 2u);
  actuator_->Suspend(SuspendOf(release));
  std::vector<Result> results = recorder_.WaitFor(3);
  ASSERT_EQ(results.size(), 3u);
  int released = 0, stopped = 0;
  for (const Result& r : results) {
    EXPECT_THAT(r.status, IsOk());
    EXPECT_THAT(r.detail, StartsWith("not sent (--kube none)"));
    if (r.release) {
      ++released;
      if (r.key.name == "train") {
        EXPECT_THAT(r.detail, HasSubstr("PATCH " + std::string(kJobs) + "/train"));
        EXPECT_THAT(r.detail, HasSubstr("gpu.example.com/class=a100"));
      } else {
        EXPECT_THAT(r.detail, HasSubstr(kPods));
      }
    } else {
      ++stopped;
    }
  }
  EXPECT_EQ(released, 2);
  EXPECT_EQ(stopped, 1);
  EXPECT_TRUE(api_->Calls().empty());
  EXPECT_EQ(MustGet(std::string(kJobs) + "/train")["spec"]["suspend"], true);
}

// ---- 10. Order per workload ---------------------------------------------------

TEST_F(ActuatorTest, OrdersOfOneWorkloadRunInOrder) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string other_path = std::string(kJobs) + "/other";
  const std::string other_uid = MustCreate(kJobs, JobObject("other"))["metadata"]["uid"];
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  StartActuator(ActuatorOptions{.dry_run = false, .workers = 3});
  // Make the release slow: a suspend that overtook it would find the Job
  // suspended and unannotated, stop at once, and the release would win.
  ScriptedFailure slow;
  slow.method = "PATCH";
  slow.path_contains = path;
  slow.status = 0;
  slow.delay = absl::Milliseconds(300);
  slow.times = 1;
  api_->Fail(slow);

  actuator_->Release(release);
  // The release is in hand before the suspension is given (a release still
  // queued would be replaced by it: AQueuedReleaseFollowedBySuspendIsNeverSent).
  ASSERT_TRUE(Eventually([&] {
    for (const RecordedCall& c : api_->Calls()) {
      if (c.path == path) return true;
    }
    return false;
  }));
  actuator_->Suspend(SuspendOf(release));
  actuator_->Release(JobRelease("other", other_uid));  // another workload: not held up by these
  std::vector<Result> results = recorder_.WaitFor(3);
  ASSERT_EQ(results.size(), 3u);
  std::vector<std::string> train;
  for (const Result& r : results) {
    if (r.key.name == "train") train.push_back(r.release ? "released" : "stopped");
    if (r.release) {
      EXPECT_THAT(r.status, IsOk()) << r.key.name;
    }
  }
  EXPECT_THAT(train, ::testing::ElementsAre("released", "stopped"));
  EXPECT_EQ(results[0].key.name, "other") << "a different workload goes on while train's release is slow";

  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], true);
  EXPECT_EQ(job["spec"]["template"], created["spec"]["template"]);
  EXPECT_FALSE(job["metadata"].value("annotations", json::object()).contains(kAnnotation));
  EXPECT_EQ(MustGet(other_path)["spec"]["suspend"], false);
}

TEST_F(ActuatorTest, StopDropsQueuedOrders) {
  const std::string uid = MustCreate(kJobs, JobObject("train"))["metadata"]["uid"];
  StartActuator(ActuatorOptions{.dry_run = false, .workers = 1});
  actuator_->Stop();
  actuator_->Release(JobRelease("train", uid));  // after Stop: dropped
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(recorder_.Snapshot().empty());
  EXPECT_TRUE(api_->Calls().empty());
}

// ---- 11. Stale and superseded orders, concurrency ---------------------------------

TEST_F(ActuatorTest, StaleOrdersSendNothingAndAreNotAnswered) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string other_uid = MustCreate(kJobs, JobObject("other"))["metadata"]["uid"];
  api_->ClearCalls();
  ActuatorOptions options;
  // train finished meanwhile: the broker wants neither of its orders.
  options.release_wanted = [](const broker::ReleaseOrder& o) { return o.key.name != "train"; };
  options.suspend_wanted = [](const broker::SuspendOrder& o) { return o.key.name != "train"; };
  std::vector<std::string> dropped;
  std::mutex dropped_mu;
  options.observe = [&](const ActuationOutcome& o) {
    std::lock_guard<std::mutex> lock(dropped_mu);
    if (o.dropped != nullptr) dropped.push_back(absl::StrCat(o.action, " ", o.dropped));
  };
  StartActuator(options);
  const broker::ReleaseOrder release = JobRelease("train", created["metadata"]["uid"]);
  actuator_->Release(release);
  actuator_->Suspend(SuspendOf(release));
  actuator_->Release(JobRelease("other", other_uid));

  ASSERT_TRUE(Eventually([&] {
    const ActuatorStats st = actuator_->stats();
    return st.stale_releases + st.stale_suspends + st.coalesced_releases == 2 && recorder_.Snapshot().size() == 1;
  })) << "both of train's orders dropped, other's carried out";
  for (const RecordedCall& c : api_->Calls()) {
    EXPECT_THAT(c.path, ::testing::Not(HasSubstr("/jobs/train"))) << c.method << " sent for a stale order";
  }
  std::vector<Result> results = recorder_.Snapshot();
  ASSERT_EQ(results.size(), 1u) << "no answer for a dropped order";
  EXPECT_EQ(results[0].key.name, "other");
  EXPECT_EQ(MustGet(path), created);
  EXPECT_EQ(actuator_->stats().carried_out, 1u);
  std::lock_guard<std::mutex> lock(dropped_mu);
  EXPECT_EQ(dropped.size(), 2u) << "each dropped order is observed (metrics)";
}

// A Job that ended before an order reached it (the broker learns of the
// end through the watch, a little later) gets no PATCH: its release is
// answered done, its suspension stopped, and the object stays as it is.
TEST_F(ActuatorTest, OrdersThatFindTheirObjectFinishedSendNoPatch) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  json finished = MustGet(path);
  finished["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
  finished["status"]["succeeded"] = 2;
  ASSERT_THAT(api_->Replace(path, finished), IsOk());
  finished = MustGet(path);
  StartActuator();
  api_->ClearCalls();
  const broker::ReleaseOrder release = JobRelease("train", uid);
  actuator_->Release(release);
  ASSERT_EQ(recorder_.WaitFor(1).size(), 1u);
  actuator_->Suspend(SuspendOf(release));
  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].release);
  EXPECT_THAT(results[0].status, IsOk());
  EXPECT_THAT(results[0].detail, HasSubstr("already finished"));
  EXPECT_FALSE(results[1].release);
  EXPECT_THAT(results[1].detail, HasSubstr("already finished"));
  for (const RecordedCall& c : api_->Calls()) {
    EXPECT_NE(c.method, "PATCH") << c.path << ": a finished Job was patched";
  }
  EXPECT_EQ(MustGet(path), finished);
}

// A Job that finishes between the actuator's GET and its PATCH is not
// patched: the PATCH tests the resourceVersion it was built from, fails
// with 422, and the object read again is finished. For a release and for
// a suspension (the e2e bench saw the latter reach completed Jobs).
TEST_F(ActuatorTest, AJobThatFinishesBetweenTheReadAndThePatchIsNotPatched) {
  for (const bool release : {true, false}) {
    SCOPED_TRACE(release ? "release" : "suspend");
    const std::string name = release ? "rel" : "sus";
    const std::string path = std::string(kJobs) + "/" + name;
    const json created = MustCreate(kJobs, JobObject(name));
    const std::string uid = created["metadata"]["uid"];
    if (!release) {  // running: what a suspension stops
      json running = MustGet(path);
      running["spec"]["suspend"] = false;
      ASSERT_THAT(api_->Replace(path, running), IsOk());
    }
    if (actuator_ == nullptr) StartActuator();
    gate_.Hold("/jobs/" + name);
    const broker::ReleaseOrder order = JobRelease(name, uid);
    if (release) {
      actuator_->Release(order);
    } else {
      actuator_->Suspend(SuspendOf(order));
    }
    ASSERT_TRUE(gate_.WaitHeld(1));  // the GET is answered; the answer waits
    json finished = MustGet(path);
    finished["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
    finished["status"]["succeeded"] = 2;
    ASSERT_THAT(api_->Replace(path, finished), IsOk());
    finished = MustGet(path);
    gate_.Open();
    std::vector<Result> results = recorder_.WaitFor(release ? 1 : 2);
    ASSERT_EQ(results.size(), release ? 1u : 2u);
    EXPECT_EQ(results.back().release, release);
    EXPECT_THAT(results.back().status, IsOk());
    EXPECT_THAT(results.back().detail, HasSubstr("already finished"));
    EXPECT_EQ(MustGet(path), finished) << "the finished Job was patched";
  }
}

TEST_F(ActuatorTest, AQueuedReleaseFollowedBySuspendIsNeverSent) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  const std::string blocker_uid = MustCreate(kJobs, JobObject("blocker"))["metadata"]["uid"];
  StartActuator(ActuatorOptions{.dry_run = false, .workers = 1});
  api_->ClearCalls();
  // The one worker waits on the API server for another workload.
  gate_.Hold("/jobs/blocker");
  actuator_->Release(JobRelease("blocker", blocker_uid));
  ASSERT_TRUE(gate_.WaitHeld(1));
  // Meanwhile train is admitted and at once preempted: both orders queue.
  const broker::ReleaseOrder release = JobRelease("train", uid);
  actuator_->Release(release);
  actuator_->Suspend(SuspendOf(release));
  gate_.Open();

  std::vector<Result> results = recorder_.WaitFor(2);
  ASSERT_EQ(results.size(), 2u);
  absl::SleepFor(absl::Milliseconds(100));  // an unwanted third answer would show now
  results = recorder_.Snapshot();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].key.name, "blocker");
  EXPECT_TRUE(results[0].release);
  // The broker hears train's suspension (Stopped, which it waits for) and
  // nothing of the release it superseded.
  EXPECT_EQ(results[1].key.name, "train");
  EXPECT_FALSE(results[1].release);
  EXPECT_EQ(results[1].uid, uid);
  EXPECT_THAT(results[1].detail, HasSubstr("already suspended"));
  std::vector<std::string> train_calls;
  for (const RecordedCall& c : api_->Calls()) {
    if (c.path == path) train_calls.push_back(c.method);
  }
  EXPECT_THAT(train_calls, ::testing::ElementsAre("GET")) << "the suspension's read, no release";
  EXPECT_EQ(MustGet(path), created);
  EXPECT_EQ(actuator_->stats().coalesced_releases, 1u);
}

TEST_F(ActuatorTest, OfTwoQueuedReleasesOfOneObjectTheNewerIsSent) {
  const std::string path = std::string(kJobs) + "/train";
  const json created = MustCreate(kJobs, JobObject("train"));
  const std::string uid = created["metadata"]["uid"];
  const std::string blocker_uid = MustCreate(kJobs, JobObject("blocker"))["metadata"]["uid"];
  StartActuator(ActuatorOptions{.dry_run = false, .workers = 1});
  gate_.Hold("/jobs/blocker");
  actuator_->Release(JobRelease("blocker", blocker_uid));
  ASSERT_TRUE(gate_.WaitHeld(1));
  broker::ReleaseOrder older = JobRelease("train", uid);
  older.assignment.cluster_queue = "cq-old";
  broker::ReleaseOrder newer = JobRelease("train", uid);
  newer.assignment.cluster_queue = "cq-new";
  actuator_->Release(older);
  actuator_->Release(newer);
  gate_.Open();

  ASSERT_EQ(recorder_.WaitFor(2).size(), 2u);
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_EQ(recorder_.Snapshot().size(), 2u) << "one answer for train";
  const json job = MustGet(path);
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_THAT(job["metadata"]["annotations"][kAnnotation].get<std::string>(), HasSubstr("cq-new"));
  int gets = 0;
  for (const RecordedCall& c : api_->Calls()) gets += c.path == path && c.method == "GET";
  EXPECT_EQ(gets, 1) << "the older release was not carried out";
  EXPECT_EQ(actuator_->stats().merged, 1u);
}

// With the default worker count, three workloads waiting on a slow API
// server hold up neither the orders of other workloads nor, out of turn,
// their own later orders.
TEST_F(ActuatorTest, SlowWorkloadsHoldUpNeitherOthersNorTheirOwnOrderOfOrders) {
  std::map<std::string, std::string> uid;
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g"}) {
    uid[name] = MustCreate(kJobs, JobObject(name))["metadata"]["uid"];
  }
  StartActuator();
  api_->ClearCalls();
  for (const char* name : {"a", "b", "c"}) gate_.Hold(std::string("/jobs/") + name);
  for (const char* name : {"a", "b", "c"}) actuator_->Release(JobRelease(name, uid[name]));
  ASSERT_TRUE(gate_.WaitHeld(3)) << "three workers wait on the server at once";
  const broker::ReleaseOrder a_release = JobRelease("a", uid["a"]);
  actuator_->Suspend(SuspendOf(a_release));  // behind a's release, which is in hand
  for (const char* name : {"d", "e", "f", "g"}) actuator_->Release(JobRelease(name, uid[name]));
  std::vector<Result> results = recorder_.WaitFor(4);
  ASSERT_EQ(results.size(), 4u) << "the others go on while a, b and c wait";
  for (const Result& r : results) {
    EXPECT_TRUE(r.key.name >= "d") << r.key.name;
    EXPECT_THAT(r.status, IsOk());
  }
  int a_calls = 0;
  for (const RecordedCall& c : api_->Calls()) a_calls += c.path == std::string(kJobs) + "/a";
  EXPECT_EQ(a_calls, 1) << "a's suspension waits for a's release to finish";

  gate_.Open();
  results = recorder_.WaitFor(8);
  ASSERT_EQ(results.size(), 8u);
  std::vector<std::string> a;
  for (const Result& r : results) {
    if (r.key.name == "a") a.push_back(r.release ? "released" : "stopped");
  }
  EXPECT_THAT(a, ::testing::ElementsAre("released", "stopped"));
  EXPECT_EQ(MustGet(std::string(kJobs) + "/a")["spec"]["suspend"], true);
  EXPECT_EQ(MustGet(std::string(kJobs) + "/b")["spec"]["suspend"], false);
}

// Stop finishes the orders in hand (their answers come) and joins, however
// many workers wait on the server.
TEST_F(ActuatorTest, StopFinishesTheOrdersInHandAndJoins) {
  std::map<std::string, std::string> uid;
  for (const char* name : {"a", "b", "c"}) uid[name] = MustCreate(kJobs, JobObject(name))["metadata"]["uid"];
  StartActuator();
  for (const char* name : {"a", "b"}) gate_.Hold(std::string("/jobs/") + name);
  actuator_->Release(JobRelease("a", uid["a"]));
  actuator_->Release(JobRelease("b", uid["b"]));
  ASSERT_TRUE(gate_.WaitHeld(2));
  actuator_->Suspend(SuspendOf(JobRelease("a", uid["a"])));  // queued: dropped by Stop
  std::thread opener([&] {
    absl::SleepFor(absl::Milliseconds(200));
    gate_.Open();
  });
  actuator_->Stop();
  opener.join();
  std::vector<Result> results = recorder_.Snapshot();
  ASSERT_EQ(results.size(), 2u) << "both releases in hand finished";
  for (const Result& r : results) EXPECT_TRUE(r.release);
  EXPECT_EQ(MustGet(std::string(kJobs) + "/a")["spec"]["suspend"], false);
}

// The broker gives an order only once its published snapshot shows the
// change (ports.h), so OrderWanted on the newest snapshot wants every order
// when it is given, and none once the workload finished.
class OrderCheckingActuator : public broker::Actuator {
 public:
  void Release(const broker::ReleaseOrder& order) override {
    absl::MutexLock lock(&mu_);
    checks_.push_back({true, order.key, order.uid, OrderWanted(*broker_->snapshot(), order.key, order.uid, true)});
  }
  void Suspend(const broker::SuspendOrder& order) override {
    absl::MutexLock lock(&mu_);
    checks_.push_back({false, order.key, order.uid, OrderWanted(*broker_->snapshot(), order.key, order.uid, false)});
  }
  struct Check {
    bool release;
    broker::WorkloadKey key;
    std::string uid;
    bool wanted;
  };
  std::vector<Check> checks() {
    absl::MutexLock lock(&mu_);
    return checks_;
  }
  const broker::Broker* broker_ = nullptr;  // set before the broker starts

 private:
  absl::Mutex mu_;
  std::vector<Check> checks_;
};

TEST(OrderWantedTest, EveryOrderIsWantedWhenGivenAndNoneAfterTheWorkloadFinished) {
  base::SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
  OrderCheckingActuator actuator;
  auto b = broker::Broker::Create(::gangkeeper::testing::PoliciesFrom(::gangkeeper::testing::kOneTeamPolicies),
                                  broker::BrokerOptions{}, &actuator, nullptr, &clock);
  ASSERT_THAT(b.status(), IsOk());
  std::unique_ptr<broker::Broker> broker = *std::move(b);
  actuator.broker_ = broker.get();
  broker->Start();
  // Registered and admitted in one batch; then preempted by a higher
  // priority gang in another.
  ASSERT_THAT(broker->SubmitAndWait(broker::Event::Add(::gangkeeper::testing::GpuGang("low", 1, 8, 0))), IsOk());
  ASSERT_THAT(broker->SubmitAndWait(broker::Event::Add(::gangkeeper::testing::GpuGang("high", 1, 8, 10))), IsOk());
  std::vector<OrderCheckingActuator::Check> checks = actuator.checks();
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks[0].release);
  EXPECT_EQ(checks[0].key.name, "low");
  EXPECT_TRUE(checks[0].wanted) << "the snapshot shows low reserved when its release is given";
  EXPECT_FALSE(checks[1].release);
  EXPECT_EQ(checks[1].key.name, "low");
  EXPECT_TRUE(checks[1].wanted) << "the snapshot shows low evicting when its suspension is given";
  std::shared_ptr<const broker::Snapshot> snap = broker->snapshot();
  const broker::WorkloadKey low = checks[0].key;
  EXPECT_FALSE(OrderWanted(*snap, low, "uid-low", true)) << "evicting: its release is superseded";
  EXPECT_FALSE(OrderWanted(*snap, low, "uid-other", false)) << "another instance";
  // low finishes while its suspension is still queued: stale.
  ASSERT_THAT(broker->SubmitAndWait(broker::Event::Finish(low, "uid-low")), IsOk());
  snap = broker->snapshot();
  EXPECT_FALSE(OrderWanted(*snap, low, "uid-low", false));
  EXPECT_FALSE(OrderWanted(*snap, low, "uid-low", true));
  broker->Stop();
}

// A generative test: random orders for a few workloads, with the broker's
// wishes changing under them (a model of its phases: an order given makes
// its kind wanted, or, sometimes, the workload finishes at once; a
// workload may finish between orders). Whatever the interleaving: the
// orders carried out for a workload are a subsequence of those given for it
// and in that order; none the model did not want when asked is sent (the
// requests the server saw are exactly those of the orders carried out); and
// each workload's last order, when still wanted at the end, is carried out.
TEST_F(ActuatorTest, GenerativeOrdersAreSentInOrderAndNeverStale) {
  constexpr int kSeeds = 20;
  constexpr int kWorkloads = 4;
  constexpr int kOrders = 40;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    std::vector<std::string> names, uids;
    for (int w = 0; w < kWorkloads; ++w) {
      names.push_back(absl::StrCat("s", seed, "-w", w));
      uids.push_back(MustCreate(kJobs, JobObject(names.back()))["metadata"]["uid"]);
    }
    OrderModel model;
    ActuatorOptions options;
    model.Wire(&options);
    const size_t answered_before = recorder_.Snapshot().size();  // by earlier seeds
    StartActuator(options);

    std::uniform_int_distribution<int> pick(0, kWorkloads - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    for (int id = 0; id < kOrders; ++id) {
      const int w = pick(rng);
      const bool release = percent(rng) < 50;
      model.Give(rng, *actuator_, JobRelease(names[w], uids[w]), id, release, names);
      if (percent(rng) < 30) absl::SleepFor(absl::Microseconds(percent(rng) * 20));
    }
    // Every order given is accounted for, and every one carried out answered.
    ASSERT_TRUE(Eventually([&] { return AllOrdersAccountedFor(kOrders, answered_before); }))
        << "the actuator went idle";
    actuator_.reset();

    const std::vector<RecordedCall> calls = api_->Calls();
    for (int w = 0; w < kWorkloads; ++w) {
      const std::string& name = names[w];
      SCOPED_TRACE(name);
      const std::string path = std::string(kJobs) + "/" + name;
      // In order: ids asked about rise; carried out = asked and wanted; the
      // server saw exactly what the orders carried out send.
      const std::vector<OrderModel::Asked> sent = model.Sent(name);
      const OrderModel::Expected want = OrderModel::ExpectedFor(sent);
      int gets = 0, patches = 0;
      for (const RecordedCall& c : calls) {
        if (c.path != path) continue;
        gets += c.method == "GET";
        patches += c.method == "PATCH";
      }
      EXPECT_EQ(gets, want.gets) << "a request for an order not carried out (stale or superseded)";
      EXPECT_EQ(patches, want.patches);
      EXPECT_EQ(MustGet(path)["spec"]["suspend"], want.suspended);
      model.ExpectLastWantedCarriedOut(name, sent, want.suspended);
      ExpectAnsweredOnce(name, sent.size());
    }
  }
}

}  // namespace
}  // namespace gangkeeper::kube
