// Integration tests with the real gangkeeper binary and --kube pointing at
// FakeKubeApi (a real HTTPS API-server double on loopback): objects of the
// managed kinds, the AdmissionReviews the API server would send for them,
// and a fixture that runs gangkeeper against the fake and submits objects
// the way the API server does (/mutate, its patch, /validate, store).
#pragma once

#include <signal.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/wait.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/kubeconfig.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper::kube_it {

using ::gangkeeper::testing::IsOk;
using nlohmann::json;

inline constexpr char kJobs[] = "/apis/batch/v1/namespaces/team-a/jobs";
inline constexpr char kTeamBJobs[] = "/apis/batch/v1/namespaces/team-b/jobs";
inline constexpr char kPyTorchJobs[] = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs";
inline constexpr char kPods[] = "/api/v1/namespaces/team-a/pods";

inline json GpuContainer(int gpus) {
  return {{"name", "worker"},
          {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
          {"resources",
           {{"requests", {{"cpu", "2"}, {"memory", "8Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
            {"limits", {{"cpu", "2"}, {"memory", "8Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

// A Job of `pods` pods with `gpus` GPUs each, queued in team-a's gpu-queue.
inline json Job(const std::string& name, int pods, int gpus, const std::string& priority_class = "") {
  json labels = {{"kueue.x-k8s.io/queue-name", "gpu-queue"}};
  if (!priority_class.empty()) labels["kueue.x-k8s.io/priority-class"] = priority_class;
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "uid-" + name}, {"labels", labels}}},
          {"spec",
           {{"parallelism", pods},
            {"completions", pods},
            {"template",
             {{"spec",
               {{"restartPolicy", "Never"},
                {"nodeSelector", {{"kubernetes.io/os", "linux"}}},
                {"containers", json::array({GpuContainer(gpus)})}}}}}}}};
}

// A PyTorchJob of one master with `gpus` GPUs, in team-a's gpu-queue.
inline json PyTorchJob(const std::string& name, int gpus) {
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "uid-pytorch-" + name},
            {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}}}}},
          {"spec",
           {{"pytorchReplicaSpecs",
             {{"Master",
               {{"replicas", 1},
                {"restartPolicy", "OnFailure"},
                {"template", {{"spec", {{"containers", json::array({GpuContainer(gpus)})}}}}}}}}}}}};
}

inline json GroupPod(const std::string& group, int index, int total) {
  const std::string name = absl::StrCat(group, "-", index);
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "uid-" + name},
            {"labels", {{"kueue.x-k8s.io/queue-name", "gpu-queue"}, {"kueue.x-k8s.io/pod-group-name", group}}},
            {"annotations", {{"kueue.x-k8s.io/pod-group-total-count", std::to_string(total)}}}}},
          {"spec", {{"restartPolicy", "Never"}, {"containers", json::array({GpuContainer(1)})}}}};
}

inline json Review(const json& object, const std::string& group, const std::string& version, const std::string& kind,
            const std::string& resource, const std::string& uid) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", {{"group", group}, {"version", version}, {"kind", kind}}},
            {"resource", {{"group", group}, {"version", version}, {"resource", resource}}},
            {"namespace", object["metadata"]["namespace"]},
            {"name", object["metadata"]["name"]},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "alice"}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", false}}}};
}

inline bool Suspended(const json& job) { return job["spec"].value("suspend", false); }

inline bool Gated(const json& pod) {
  if (!pod["spec"].contains("schedulingGates")) return false;
  for (const json& g : pod["spec"]["schedulingGates"]) {
    if (g.value("name", "") == "gangkeeper.io/admission") return true;
  }
  return false;
}

class KubeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(30));
    ASSERT_THAT(certs, IsOk());
    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    auto fake = testing::FakeKubeApi::Start(fo);
    ASSERT_THAT(fake, IsOk());
    fake_ = *std::move(fake);
    testing::WriteKubeconfigFor(*fake_, dir_.path());
    ASSERT_NO_FATAL_FAILURE(BeforeGangkeeper());
    StartGangkeeper();
  }
  // What a test's cluster holds before gangkeeper starts (Kueue's CRDs...).
  virtual void BeforeGangkeeper() {}

  // `data` is the data directory (a fresh one loses the state: everything
  // running is adopted from the cluster).
  void StartGangkeeper(const std::string& data = "data") {
    std::vector<std::string> args = {
        "--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
        "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File(data),
        "--policies=" + policies_dir_, "--kube=" + dir_.File("kubeconfig"),
        "--log-level=debug", "--metrics-public"};
    args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
    auto p = testing::ServerProcess::Start(args, dir_.path());
    ASSERT_THAT(p, IsOk());
    server_ = *std::move(p);
    testing::TlsClientOptions o;
    o.ca_file = dir_.File("certs/ca.crt");
    auto c = testing::TlsConnection::Connect(server_->webhook_port(), o);
    ASSERT_THAT(c, IsOk());
    conn_ = *std::move(c);
    // Ready only after the reconciler's first list.
    ASSERT_TRUE(WaitFor([&] {
      auto api = testing::TlsConnection::Connect(server_->api_port(), o);
      if (!api.ok()) return false;
      auto r = (*api)->Request("GET", "/readyz");
      return r.ok() && r->status == 200;
    })) << server_->Stderr();
  }

  void StopGangkeeper() {
    conn_.reset();
    server_->Signal(SIGTERM);
    auto code = server_->Wait(absl::Seconds(30));
    ASSERT_THAT(code, IsOk());
    EXPECT_EQ(*code, 0) << server_->Stderr();
    server_.reset();
  }

  static bool WaitFor(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(20)) {
    return ::gangkeeper::testing::WaitFor(done, limit, absl::Milliseconds(50));
  }

  // What the API server does on CREATE: /mutate, apply its patch, /validate,
  // store. Returns the stored object.
  json Submit(json object, const std::string& group, const std::string& version, const std::string& kind,
              const std::string& resource, const std::string& collection) {
    static int n = 0;
    const std::string uid = absl::StrCat("review-", ++n);
    auto m = conn_->Request("POST", "/mutate", Review(object, group, version, kind, resource, uid).dump());
    EXPECT_THAT(m, IsOk());
    if (!m.ok()) return json();
    json answer = json::parse(m->body);
    EXPECT_TRUE(answer["response"]["allowed"].get<bool>()) << m->body;
    if (answer["response"].contains("patch")) {
      std::string patch;
      EXPECT_TRUE(absl::Base64Unescape(answer["response"]["patch"].get<std::string>(), &patch));
      object = object.patch(json::parse(patch));
    }
    auto v = conn_->Request("POST", "/validate", Review(object, group, version, kind, resource, uid + "v").dump());
    EXPECT_THAT(v, IsOk());
    if (!v.ok()) return json();
    json verdict = json::parse(v->body);
    EXPECT_TRUE(verdict["response"]["allowed"].get<bool>()) << v->body;
    auto stored = fake_->Create(collection, object);
    EXPECT_THAT(stored, IsOk());
    return stored.ok() ? *stored : json();
  }

  json SubmitJob(const json& job) { return Submit(job, "batch", "v1", "Job", "jobs", kJobs); }
  json SubmitTeamBJob(json job) {
    job["metadata"]["namespace"] = "team-b";
    return Submit(job, "batch", "v1", "Job", "jobs", kTeamBJobs);
  }
  json SubmitPyTorchJob(const json& job) {
    return Submit(job, "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", kPyTorchJobs);
  }

  json GetJob(const std::string& name, const std::string& collection = kJobs) {
    auto j = fake_->Get(absl::StrCat(collection, "/", name));
    return j.ok() ? *j : json();
  }

  bool Released(const std::string& name, const std::string& collection = kJobs) {
    json j = GetJob(name, collection);
    return j.is_object() && !Suspended(j);
  }

  bool PyTorchJobReleased(const std::string& name) {
    json j = GetJob(name, kPyTorchJobs);
    return j.is_object() && j["spec"].contains("runPolicy") && !j["spec"]["runPolicy"].value("suspend", true);
  }

  // PATCHes sent to objects under `collection`.
  int PatchesUnder(const std::string& collection) {
    int n = 0;
    for (const testing::RecordedCall& c : fake_->Calls()) n += c.method == "PATCH" && c.path.rfind(collection, 0) == 0;
    return n;
  }

  // The Job controller: a released Job starts (status.startTime).
  void Start(const std::string& name, const std::string& collection = kJobs) {
    json j = GetJob(name, collection);
    j["status"]["startTime"] = "2026-12-03T10:00:00Z";
    ASSERT_THAT(fake_->Replace(absl::StrCat(collection, "/", name), j), IsOk());
  }

  void Complete(const std::string& name) {
    json j = GetJob(name);
    j["status"]["conditions"] = json::array({{{"type", "Complete"}, {"status", "True"}}});
    ASSERT_THAT(fake_->Replace(absl::StrCat(kJobs, "/", name), j), IsOk());
  }

  // Flags for every start of gangkeeper (set them before SetUp runs).
  std::vector<std::string> extra_flags_;
  // The --policies directory (set it before SetUp runs).
  std::string policies_dir_ = std::string(GK_SOURCE_DIR) + "/policies";
  testing::TempDir dir_;
  std::unique_ptr<testing::FakeKubeApi> fake_;
  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<testing::TlsConnection> conn_;
};

}  // namespace gangkeeper::kube_it
