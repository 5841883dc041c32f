// Kueue's objects for integration tests of --policy-source cluster with
// publishing (kueue_ha_test.cc, kueue_restart_test.cc): two teams' queues
// as a platform team would apply them, one invalid ClusterQueue, and the
// requests that put them into a FakeKubeApi serving Kueue's group.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_kube_api.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::kueue_it {

using nlohmann::json;

inline constexpr char kKueue[] = "/apis/kueue.x-k8s.io/v1beta2";

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
  ASSERT_THAT(fake.Create(absl::StrCat(kKueue, "/resourceflavors"),
                          {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
                           {"kind", "ResourceFlavor"},
                           {"metadata", {{"name", "nvidia-gpu"}}},
                           {"spec", {{"nodeLabels", {{"accelerator", "nvidia"}}}}}}),
              IsOk());
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

}  // namespace gangkeeper::kueue_it
