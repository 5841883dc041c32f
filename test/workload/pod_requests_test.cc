// gangkeeper: tests for the effective pod request arithmetic.
#include "src/workload/pod_requests.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::HasSubstr;
using PodRequestStrings = std::map<std::string, std::string>;

ResourceList R(const PodRequestStrings& m) {
  ResourceList out;
  for (const auto& [name, text] : m) out[name] = Q(text);
  return out;
}

ContainerResources C(const PodRequestStrings& requests, const PodRequestStrings& limits = {}) {
  return ContainerResources{R(requests), R(limits), false};
}

ContainerResources Sidecar(const PodRequestStrings& requests, const PodRequestStrings& limits = {}) {
  return ContainerResources{R(requests), R(limits), true};
}

struct PodRequestCase {
  const char* name;
  PodResources pod;
  PodRequestStrings want_requests;
  PodRequestStrings want_limits;
};

TEST(ComputeEffectiveResourcesTest, Table) {
  const std::vector<PodRequestCase> cases = {
      {"regular containers add up",
       {.containers = {C({{"cpu", "1"}, {"memory", "1Gi"}}), C({{"cpu", "500m"}, {"nvidia.com/gpu", "1"}})}},
       {{"cpu", "1500m"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}},
       {}},
      {"an init container larger than the sum wins",
       {.containers = {C({{"cpu", "1"}}), C({{"cpu", "1"}})}, .init_containers = {C({{"cpu", "3"}})}},
       {{"cpu", "3"}},
       {}},
      {"an init container smaller than the sum does not count",
       {.containers = {C({{"cpu", "2"}, {"memory", "4Gi"}})}, .init_containers = {C({{"cpu", "1"}})}},
       {{"cpu", "2"}, {"memory", "4Gi"}},
       {}},
      {"the max is taken per resource",
       {.containers = {C({{"cpu", "4"}, {"memory", "1Gi"}})},
        .init_containers = {C({{"cpu", "1"}, {"memory", "8Gi"}})}},
       {{"cpu", "4"}, {"memory", "8Gi"}},
       {}},
      {"init containers run one at a time: the largest counts, not their sum",
       {.containers = {C({{"cpu", "1"}})}, .init_containers = {C({{"cpu", "2"}}), C({{"cpu", "3"}})}},
       {{"cpu", "3"}},
       {}},
      {"a sidecar adds to the regular containers",
       {.containers = {C({{"cpu", "1"}, {"memory", "2Gi"}})},
        .init_containers = {Sidecar({{"cpu", "500m"}, {"memory", "256Mi"}})}},
       {{"cpu", "1500m"}, {"memory", "2304Mi"}},
       {}},
      {"an init container after a sidecar runs next to it",
       {.containers = {C({{"cpu", "1"}})}, .init_containers = {Sidecar({{"cpu", "1"}}), C({{"cpu", "3"}})}},
       {{"cpu", "4"}},  // max(1 + 1, 3 + 1)
       {}},
      {"an init container before a sidecar does not",
       {.containers = {C({{"cpu", "1"}})}, .init_containers = {C({{"cpu", "3"}}), Sidecar({{"cpu", "1"}})}},
       {{"cpu", "3"}},  // max(1 + 1, 3, 1)
       {}},
      {"two sidecars then an init container",
       {.containers = {C({{"memory", "1Gi"}})},
        .init_containers = {Sidecar({{"memory", "1Gi"}}), Sidecar({{"memory", "2Gi"}}), C({{"memory", "2Gi"}})}},
       {{"memory", "5Gi"}},  // max(1 + 1 + 2, 2 + 3)
       {}},
      {"overhead is added to requests and to the limits that exist",
       {.containers = {C({{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "2"}})},
        .overhead = R({{"cpu", "250m"}, {"memory", "120Mi"}})},
       {{"cpu", "1250m"}, {"memory", "1144Mi"}},
       {{"cpu", "2250m"}}},
      {"a limit stands in for a missing request",
       {.containers = {C({}, {{"nvidia.com/mig-3g.40gb", "1"}, {"cpu", "2"}})}},
       {{"cpu", "2"}, {"nvidia.com/mig-3g.40gb", "1"}},
       {{"cpu", "2"}, {"nvidia.com/mig-3g.40gb", "1"}}},
      {"an explicit request is kept below its limit",
       {.containers = {C({{"cpu", "500m"}}, {{"cpu", "2"}, {"memory", "1Gi"}})}},
       {{"cpu", "500m"}, {"memory", "1Gi"}},
       {{"cpu", "2"}, {"memory", "1Gi"}}},
      {"limits stand in inside init containers and sidecars too",
       {.containers = {C({{"cpu", "1"}})}, .init_containers = {Sidecar({}, {{"cpu", "1"}}), C({}, {{"cpu", "5"}})}},
       {{"cpu", "6"}},
       {{"cpu", "6"}}},
      {"limits are summed like requests",
       {.containers = {C({}, {{"cpu", "1"}}), C({}, {{"cpu", "1"}})}, .init_containers = {C({}, {{"cpu", "3"}})}},
       {{"cpu", "3"}},
       {{"cpu", "3"}}},
      {"a zero request is kept",
       {.containers = {C({{"nvidia.com/gpu", "0"}, {"cpu", "1"}})}},
       {{"cpu", "1"}, {"nvidia.com/gpu", "0"}},
       {}},
      {"pod-level resources replace cpu and memory but not extended resources",
       {.containers = {C({{"cpu", "1"}, {"nvidia.com/gpu", "1"}})},
        .overhead = R({{"cpu", "100m"}}),
        .pod_requests = R({{"cpu", "4"}, {"nvidia.com/gpu", "8"}}),
        .pod_limits = R({{"memory", "8Gi"}})},
       {{"cpu", "4100m"}, {"memory", "8Gi"}, {"nvidia.com/gpu", "1"}},
       {{"memory", "8Gi"}}},
      {"a pod with nothing requested requests nothing", {.containers = {C({})}}, {}, {}},
  };
  for (const PodRequestCase& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<EffectiveResources> got = ComputeEffectiveResources(c.pod);
    ASSERT_THAT(got, IsOk());
    EXPECT_EQ(Formatted(got->requests), c.want_requests);
    EXPECT_EQ(Formatted(got->limits), c.want_limits);
  }
}

TEST(ComputeEffectiveResourcesTest, OverflowIsOutOfRangeNamingTheResource) {
  PodResources pod;
  pod.containers = {C({{"memory", "8E"}}), C({{"memory", "8E"}})};
  EXPECT_THAT(ComputeEffectiveResources(pod), StatusIs(absl::StatusCode::kOutOfRange, "memory"));

  PodResources overhead;
  overhead.containers = {C({{"cpu", "9E"}})};
  overhead.overhead = R({{"cpu", "1E"}});
  EXPECT_THAT(ComputeEffectiveResources(overhead), StatusIs(absl::StatusCode::kOutOfRange, "cpu"));
}

}  // namespace
}  // namespace gangkeeper::workload
