// Kueue's objects for integration tests of --policy-source cluster with
// publishing (kueue_ha_test.cc, kueue_restart_test.cc): two teams' queues
// as a platform team would apply them, one invalid ClusterQueue, and the
// requests that put them into a FakeKubeApi serving Kueue's group.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gangkeeper/base/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_kube_api.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::kueue_it {

using nlohmann::json;

inline constexpr char kKueue[] = "/apis/kueue.x-k8s.io/v1beta2";

// The flavor of the kube fixture's GPU nodes.
inline json FlavorObject() {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ResourceFlavor"},
          {"metadata", {{"name", "nvidia-gpu"}}},
          {"spec", {{"nodeLabels", {{"accelerator", "nvidia"}}}}}};
}

// A ClusterQueue for the kube fixture's Jobs (cpu, memory, GPUs on
// nvidia-gpu) selecting namespace `ns`, preempting lower priorities within.
inline json ClusterQueueObject(const std::string& name, const std::string& ns, const json& gpus) {
  json resources = json::array({{{"name", "cpu"}, {"nominalQuota", "64"}},
                                {{"name", "memory"}, {"nominalQuota", "256Gi"}},
                                {{"name", "nvidia.com/gpu"}, {"nominalQuota", gpus}}});
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "ClusterQueue"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns}}}}},
            {"preemption", {{"withinClusterQueue", "LowerPriority"}}},
            {"resourceGroups", json::array({{{"coveredResources", json::array({"cpu", "memory", "nvidia.com/gpu"})},
                                             {"flavors", json::array({{{"name", "nvidia-gpu"},
                                                                       {"resources", resources}}})}}})}}}};
}

inline json LocalQueueObject(const std::string& ns, const std::string& cq) {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "LocalQueue"},
          {"metadata", {{"name", "gpu-queue"}, {"namespace", ns}}},
          {"spec", {{"clusterQueue", cq}}}};
}

inline json PriorityObject(const std::string& name, int value) {
  return {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
          {"kind", "WorkloadPriorityClass"},
          {"metadata", {{"name", name}}},
          {"value", value}};
}

// Into `fake` (Kueue's CRDs and Workloads served): the flavor, the two
// priorities of the policy files, team-a-gpu (6 GPUs) and team-b-gpu (4)
// with their LocalQueues, and `broken`, a ClusterQueue whose quota is no
// quantity, with a LocalQueue in team-c.
inline void SeedKueueObjects(testing::FakeKubeApi& fake) {
  using ::gangkeeper::testing::IsOk;
  fake.ServeKueue();
  fake.set_served("kueue.x-k8s.io/v1beta2/workloads", true);
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/resourceflavors"), FlavorObject()), IsOk());
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/workloadpriorityclasses"), PriorityObject("training-batch", 10000)),
              IsOk());
  ASSERT_THAT(
      fake.Create(absl::StrCat(kKueue, "/workloadpriorityclasses"), PriorityObject("inference-critical", 100000)),
      IsOk());
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/clusterqueues"), ClusterQueueObject("team-a-gpu", "team-a", "6")),
              IsOk());
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/clusterqueues"), ClusterQueueObject("team-b-gpu", "team-b", "4")),
              IsOk());
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/clusterqueues"), ClusterQueueObject("broken", "team-c", "lots")),
              IsOk());
  for (const auto& [ns, cq] : {std::pair<std::string, std::string>{"team-a", "team-a-gpu"},
                               {"team-b", "team-b-gpu"},
                               {"team-c", "broken"}}) {
    ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/namespaces/", ns, "/localqueues"), LocalQueueObject(ns, cq)),
                IsOk());
  }
}

// The condition `type` of a Workload (or queue) object, null when absent.
inline json Condition(const json& object, const std::string& type) {
  if (!object.is_object() || !object.contains("status") || !object["status"].contains("conditions")) return nullptr;
  for (const json& c : object["status"]["conditions"]) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

inline std::string ConditionStatus(const json& object, const std::string& type) {
  json c = Condition(object, type);
  return c.is_object() ? c.value("status", "") : "";
}

inline constexpr char kKueuePrefix[] = "/apis/kueue.x-k8s.io/";
using WriteCounts = std::map<std::string, int>;

inline std::string Describe(const WriteCounts& writes) {
  std::vector<std::string> out;
  for (const auto& [path, n] : writes) out.push_back(absl::StrCat(path, " x", n));
  return absl::StrJoin(out, "\n");
}

// The Workload objects of `ns` in `fake`, by the name of the job that owns
// them (its controller ownerReference).
inline std::map<std::string, std::vector<json>> Workloads(const testing::FakeKubeApi& fake, const std::string& ns) {
  std::map<std::string, std::vector<json>> out;
  for (const json& w : fake.List(absl::StrCat(kKueue, "/namespaces/", ns, "/workloads"))) {
    std::string owner = "<none>";
    const json& meta = w["metadata"];
    if (meta.contains("ownerReferences") && !meta["ownerReferences"].empty()) {
      owner = meta["ownerReferences"][0].value("name", "<unnamed>");
    }
    out[owner].push_back(w);
  }
  return out;
}

// The one Workload of job `name` (null when there is not exactly one).
inline json WorkloadOf(const testing::FakeKubeApi& fake, const std::string& ns, const std::string& name) {
  auto all = Workloads(fake, ns);
  auto it = all.find(name);
  return it != all.end() && it->second.size() == 1 ? it->second[0] : json();
}

// Waits until no write reaches Kueue's API for `quiet` (bounded: 60 s in
// all); true when it got there.
inline bool Quiet(const testing::FakeKubeApi& fake, absl::Duration quiet) {
  const base::Stopwatch watch;
  WriteCounts last = fake.WritesByPath(kKueuePrefix);
  while (watch.Elapsed() < absl::Seconds(60)) {
    absl::SleepFor(quiet);
    WriteCounts now = fake.WritesByPath(kKueuePrefix);
    if (now == last) return true;
    last = std::move(now);
  }
  return false;
}

// ClusterQueue `cq`'s and its LocalQueue's (`ns`/gpu-queue) status in the
// cluster against `view`, gangkeeper's /v1/clusterqueues/NAME/status: the
// counts, the usage of every flavor and resource the view shows, and
// Active. Empty when they agree, else what differs.
inline std::string StatusMismatch(const testing::FakeKubeApi& fake, const json& view, const std::string& cq,
                                  const std::string& ns) {
  auto object = fake.Get(absl::StrCat(kKueue, "/clusterqueues/", cq));
  auto local = fake.Get(absl::StrCat(kKueue, "/namespaces/", ns, "/localqueues/gpu-queue"));
  if (!view.is_object() || !object.ok() || !local.ok()) return "missing";
  const json status = object->value("status", json::object());
  const json lq = local->value("status", json::object());
  std::string out;
  auto same = [&](const std::string& what, const json& a, const json& b) {
    if (a != b) absl::StrAppend(&out, what, ": ", a.dump(), " vs ", b.dump(), "; ");
  };
  same("pendingWorkloads", status.value("pendingWorkloads", json()), view["pending"]);
  same("admittedWorkloads", status.value("admittedWorkloads", json()), view["admitted"]);
  same("reservingWorkloads", status.value("reservingWorkloads", json()), view["admitted"]);
  same("LocalQueue pendingWorkloads", lq.value("pendingWorkloads", json()), view["pending"]);
  same("LocalQueue admittedWorkloads", lq.value("admittedWorkloads", json()), view["admitted"]);
  std::map<std::string, std::string> used;  // "flavor/resource" -> total
  for (const json& f : status.value("flavorsUsage", json::array())) {
    for (const json& r : f.value("resources", json::array())) {
      used[absl::StrCat(f.value("name", ""), "/", r.value("name", ""))] = r.value("total", "");
    }
  }
  for (const json& r : view["resources"]) {
    const std::string key = absl::StrCat(r["flavor"].get<std::string>(), "/", r["resource"].get<std::string>());
    const std::string want = r["usage"].get<std::string>();
    const std::string got = used.count(key) != 0 ? used[key] : "";
    if (got != want && !(got.empty() && want == "0")) absl::StrAppend(&out, key, ": ", got, " vs ", want, "; ");
  }
  same("Active", json(ConditionStatus(*object, "Active")), json(view.value("active", false) ? "True" : "False"));
  return out;
}

}  // namespace gangkeeper::kueue_it
