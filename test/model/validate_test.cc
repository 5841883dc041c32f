#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "gangkeeper/model/extended_resource.h"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kValidateFlavor[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: nvidia-gpu}
---
)";

// One ClusterQueue with the given spec body (indented two spaces), after a
// flavor called nvidia-gpu.
std::string Cq(const std::string& spec) {
  return std::string(kValidateFlavor) +
         "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a-gpu}\nspec:\n"
         "  namespaceSelector: {}\n" +
         spec;
}

struct Case {
  const char* name;
  std::string manifests;
  const char* want;  // substring of exactly one error line
};

TEST(ValidateTest, EachRuleNamesObjectPathAndFix) {
  const std::vector<Case> cases = {
      {"a quantity that is a word", Cq(R"(  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: memory, nominalQuota: 256Gi}
      - {name: nvidia.com/gpu, nominalQuota: four}
)"),
       "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: "
       "\"four\" is not a quantity (use \"4\")"},
      {"a memory quantity with a decimal unit slip", Cq(R"(  resourceGroups:
  - coveredResources: [memory]
    flavors:
    - name: nvidia-gpu
      resources: [{name: memory, nominalQuota: 16GB}]
)"),
       "nominalQuota: \"16GB\" is not a quantity (use \"16Gi\" for binary units)"},
      {"a flavor that does not exist", Cq(R"(  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: h100
      resources: [{name: cpu, nominalQuota: 1}]
)"),
       "ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].name: ResourceFlavor \"h100\" does not exist; "
       "define it or fix the name"},
      {"a resource in two resource groups", Cq(R"(  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: cpu, nominalQuota: 1}]
  - coveredResources: [cpu]
    flavors:
    - name: other
      resources: [{name: cpu, nominalQuota: 1}]
)"),
       "spec.resourceGroups[1].coveredResources[0]: \"cpu\" is already covered by spec.resourceGroups[0]; a resource "
       "may be in one resource group only"},
      {"a flavor that does not cover every resource of its group", Cq(R"(  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: cpu, nominalQuota: 1}]
)"),
       "spec.resourceGroups[0].flavors[0].resources: flavor \"nvidia-gpu\" has no quota for nvidia.com/gpu; every "
       "flavor of a group must list each covered resource"},
      {"a borrowingLimit without a cohort", Cq(R"(  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2}]
)"),
       "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: a borrowingLimit needs spec.cohort to be set"},
      {"a lendingLimit without a cohort", Cq(R"(  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 2}]
)"),
       "resources[0].lendingLimit: a lendingLimit needs spec.cohort to be set; set it or remove the limit"},
      {"a lendingLimit above nominal", Cq(R"(  cohort: shared
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 6}]
)"),
       "resources[0].lendingLimit: lendingLimit 6 is above nominalQuota 4; a queue can lend at most its nominal "
       "quota, so lower it to 4 or less"},
      {"a LocalQueue of a missing ClusterQueue", R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: gpu-queue, namespace: team-a}
spec: {clusterQueue: team-a-gpu}
)",
       "test.yaml#1: error: LocalQueue team-a/gpu-queue: spec.clusterQueue: ClusterQueue \"team-a-gpu\" does not "
       "exist; define it or fix the name"},
      {"a cohort cycle", R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: a}
spec: {parentName: b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: b}
spec: {parentName: a}
)",
       "Cohort a: spec.parentName: cohort cycle a -> b -> a; every member is disabled while it lasts, so remove one "
       "parentName"},
      {"duplicate names", std::string(kValidateFlavor) + "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                                                 "metadata: {name: nvidia-gpu}\n",
       "test.yaml#2: error: ResourceFlavor nvidia-gpu: metadata.name: duplicate ResourceFlavor \"nvidia-gpu\""},
      {"a namespaceSelector with a bad operator", std::string(kValidateFlavor) + R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-gpu}
spec:
  namespaceSelector:
    matchExpressions: [{key: team, operator: Equals, values: [a]}]
)",
       "spec.namespaceSelector.matchExpressions[0].operator: \"Equals\" is not a selector operator (use In, NotIn, "
       "Exists or DoesNotExist)"},
      {"a namespaceSelector whose matchLabels is a list", std::string(kValidateFlavor) + R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-gpu}
spec:
  namespaceSelector:
    matchLabels: [team-a]
)",
       "spec.namespaceSelector.matchLabels: must be a map, not a list"},
      {"a MIG layout that does not fit the GPU", R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: mig}
---
apiVersion: gangkeeper.io/v1alpha1
kind: GPUNodePool
metadata: {name: pool}
spec: {flavor: mig, gpu: A100-80GB, gpusPerNode: 1, nodes: 1, migStrategy: mixed, migProfiles: [MIG4g, MIG4g]}
)",
       "test.yaml#2: error: GPUNodePool pool: spec.migProfiles"},
      {"two globalDefault PriorityClasses", R"(apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: a}
value: 1
globalDefault: true
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: b}
value: 2
globalDefault: true
)",
       "PriorityClass b: globalDefault: several PriorityClasses are globalDefault (a, b)"},
      {"preference without TryNextFlavor", Cq("  flavorFungibility: {preference: BorrowingOverPreemption}\n"),
       "spec.flavorFungibility.preference: preference BorrowingOverPreemption requires both whenCanBorrow and "
       "whenCanPreempt to be TryNextFlavor"},
      {"borrowWithinCohort without reclaim", Cq("  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n"),
       "spec.preemption.borrowWithinCohort.policy: borrowWithinCohort needs reclaimWithinCohort other than Never"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Decoded d = Decode(c.manifests);
    std::vector<std::string> errors = d.Errors();
    int hits = 0;
    for (const std::string& e : errors) hits += e.find(c.want) != std::string::npos ? 1 : 0;
    EXPECT_EQ(hits, 1) << "want: " << c.want << "\ngot:\n" << d.All();
  }
}

TEST(ValidateTest, CleanSetHasNoErrors) {
  Decoded d = Decode(Cq(R"(  cohort: shared
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 2, lendingLimit: 4}]
)"));
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_THAT(d.Warnings(), IsEmpty()) << d.All();
}

// Kubernetes counts extended resources (GPUs, MIG slices, example.com/foo)
// in whole units: a fractional quota of one is refused wherever it is
// written, with the path and the whole numbers next to it.
TEST(ValidateTest, ExtendedResourceQuotasAreWholeNumbers) {
  const std::string cohort = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: shared}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: "0.5"}]
)";
  Decoded d = Decode(Cq(R"(  cohort: shared
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu, nvidia.com/mig-1g.5gb, example.com/foo]
    flavors:
    - name: nvidia-gpu
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "1.5", lendingLimit: 250m}
      - {name: nvidia.com/gpu, nominalQuota: "0.5", borrowingLimit: "1.5", lendingLimit: 250m}
      - {name: nvidia.com/mig-1g.5gb, nominalQuota: 2500m}
      - {name: example.com/foo, nominalQuota: "3", borrowingLimit: "0.001"}
)") + "---\n" + cohort);
  EXPECT_THAT(
      d.Errors(),
      ElementsAre(
          "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: "
          "nvidia.com/gpu is an extended resource and must be a whole number, not \"0.5\" (use \"1\" or \"0\")",
          "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[1].borrowingLimit: "
          "nvidia.com/gpu is an extended resource and must be a whole number, not \"1.5\" (use \"2\" or \"1\")",
          "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: "
          "nvidia.com/gpu is an extended resource and must be a whole number, not \"0.25\" (use \"1\" or \"0\")",
          "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[2].nominalQuota: "
          "nvidia.com/mig-1g.5gb is an extended resource and must be a whole number, not \"2.5\" (use \"3\" or "
          "\"2\")",
          "test.yaml#2: error: ClusterQueue team-a-gpu: spec.resourceGroups[0].flavors[0].resources[3].borrowingLimit: "
          "example.com/foo is an extended resource and must be a whole number, not \"0.001\" (use \"1\" or \"0\")",
          "test.yaml#3: error: Cohort shared: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
          "nvidia.com/gpu is an extended resource and must be a whole number, not \"0.5\" (use \"1\" or \"0\")"))
      << d.All();
}

TEST(ValidateTest, WholeExtendedResourcesAndFractionalCpuAreFine) {
  Decoded d = Decode(Cq(R"(  cohort: shared
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu, kubernetes.io/batch-cpu]
    flavors:
    - name: nvidia-gpu
      resources:
      - {name: cpu, nominalQuota: 500m, borrowingLimit: "1.5"}
      - {name: memory, nominalQuota: 1.5Gi}
      - {name: nvidia.com/gpu, nominalQuota: "4", borrowingLimit: 2000m, lendingLimit: "0"}
      - {name: kubernetes.io/batch-cpu, nominalQuota: 100m}
)"));
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
}

TEST(ExtendedResourceTest, FollowsKubernetesRule) {
  for (const char* name : {"nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "example.com/foo", "amd.com/gpu"}) {
    EXPECT_TRUE(IsExtendedResource(name)) << name;
  }
  for (const char* name : {"cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "kubernetes.io/batch-cpu",
                           "node.kubernetes.io/foo", "requests.nvidia.com/gpu", ""}) {
    EXPECT_FALSE(IsExtendedResource(name)) << name;
  }
}

constexpr char kMigPool[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100-mig}
---
apiVersion: gangkeeper.io/v1alpha1
kind: GPUNodePool
metadata: {name: migmixed}
spec:
  flavor: a100-mig
  gpu: A100-80GB
  gpusPerNode: 1
  nodes: 2
  migStrategy: mixed
  migProfiles: [MIG3g, MIG2g, MIG1g, MIG1g]
---
)";

TEST(CapacityTest, QuotaForAProfileNoPoolAdvertisesIsAWarning) {
  Decoded d = Decode(std::string(kMigPool) + R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-mig}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/mig-3g.40gb, nvidia.com/mig-4g.40gb]
    flavors:
    - name: a100-mig
      resources:
      - {name: nvidia.com/mig-3g.40gb, nominalQuota: 1}
      - {name: nvidia.com/mig-4g.40gb, nominalQuota: 1}
)");
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_THAT(d.Warnings(),
              ElementsAre(HasSubstr("ClusterQueue team-a-mig: has 1 nvidia.com/mig-4g.40gb in flavor a100-mig but no "
                                    "GPUNodePool of that flavor advertises nvidia.com/mig-4g.40gb (migmixed advertise "
                                    "4 nvidia.com/mig-1g.10gb, 2 nvidia.com/mig-2g.20gb, 2 nvidia.com/mig-3g.40gb)")));
}

TEST(CapacityTest, OverCommittedQuotaIsAWarningWithTheNumbers) {
  Decoded d = Decode(std::string(kMigPool) + R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-mig}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/mig-1g.10gb]
    flavors:
    - name: a100-mig
      resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 3}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b-mig}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/mig-1g.10gb]
    flavors:
    - name: a100-mig
      resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 2}]
)");
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_THAT(d.Warnings(), ElementsAre(HasSubstr(
                                "ResourceFlavor a100-mig: nominal quota for nvidia.com/mig-1g.10gb adds up to 5 "
                                "(ClusterQueue team-a-mig, ClusterQueue team-b-mig) but the GPUNodePools of this "
                                "flavor (migmixed) advertise 4")));
}

TEST(CapacityTest, QuotaWithinCapacityIsClean) {
  Decoded d = Decode(std::string(kMigPool) + R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-mig}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb]
    flavors:
    - name: a100-mig
      resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 4}, {name: nvidia.com/mig-3g.40gb, nominalQuota: 2}]
)");
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_THAT(d.Warnings(), IsEmpty()) << d.All();
}

}  // namespace
}  // namespace gangkeeper::model
