#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kFlavor[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: nvidia-gpu
)";

TEST(DecodeTest, V1beta1ClusterQueueWithKueueDefaults) {
  Decoded d = Decode(std::string(kFlavor) + R"(---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a-gpu
spec:
  cohort: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "nvidia.com/gpu"]
    flavors:
    - name: nvidia-gpu
      resources:
      - name: cpu
        nominalQuota: "64"
      - name: nvidia.com/gpu
        nominalQuota: 4
        borrowingLimit: 2
        lendingLimit: "1"
)");
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  ASSERT_EQ(d.policies.cluster_queues.count("team-a-gpu"), 1u);
  const ClusterQueue& cq = d.policies.cluster_queues.at("team-a-gpu");
  EXPECT_EQ(cq.cohort, "shared");
  EXPECT_EQ(cq.queueing_strategy, QueueingStrategy::kBestEffortFIFO);
  EXPECT_EQ(cq.preemption.within_cluster_queue, WithinClusterQueuePolicy::kNever);
  EXPECT_EQ(cq.preemption.reclaim_within_cohort, ReclaimWithinCohortPolicy::kNever);
  EXPECT_EQ(cq.preemption.borrow_within_cohort, BorrowWithinCohortPolicy::kNever);
  EXPECT_EQ(cq.flavor_fungibility.when_can_borrow, FungibilityPolicy::kMayStopSearch);
  EXPECT_EQ(cq.flavor_fungibility.when_can_preempt, FungibilityPolicy::kTryNextFlavor);
  EXPECT_EQ(cq.fair_sharing_weight, 1.0);
  EXPECT_EQ(cq.stop_policy, StopPolicy::kNone);
  ASSERT_TRUE(cq.namespace_selector.has_value());
  EXPECT_TRUE(cq.namespace_selector->Matches({{"kubernetes.io/metadata.name", "anything"}}));
  ASSERT_THAT(cq.resource_groups, SizeIs(1));
  const ResourceQuota& gpu = cq.resource_groups[0].flavors[0].resources[1];
  EXPECT_EQ(gpu.name, "nvidia.com/gpu");
  EXPECT_EQ(gpu.nominal, quantity::Quantity::FromUnits(4));
  EXPECT_EQ(gpu.borrowing_limit, quantity::Quantity::FromUnits(2));
  EXPECT_EQ(gpu.lending_limit, quantity::Quantity::FromUnits(1));
}

TEST(DecodeTest, V1beta2UsesCohortNameAndRejectsTheOldSpelling) {
  Decoded ok = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  cohortName: shared
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
  fairSharing: {weight: "0.5"}
  stopPolicy: Hold
)",
                      false);
  ASSERT_THAT(ok.Errors(), IsEmpty()) << ok.All();
  const ClusterQueue& cq = ok.policies.cluster_queues.at("q");
  EXPECT_EQ(cq.cohort, "shared");
  EXPECT_EQ(cq.queueing_strategy, QueueingStrategy::kStrictFIFO);
  EXPECT_EQ(cq.preemption.within_cluster_queue, WithinClusterQueuePolicy::kLowerOrNewerEqualPriority);
  EXPECT_EQ(cq.preemption.reclaim_within_cohort, ReclaimWithinCohortPolicy::kAny);
  EXPECT_EQ(cq.preemption.borrow_within_cohort, BorrowWithinCohortPolicy::kLowerPriority);
  EXPECT_EQ(cq.preemption.borrow_max_priority_threshold, 100);
  EXPECT_EQ(cq.flavor_fungibility.preference, FungibilityPreference::kPreemptionOverBorrowing);
  EXPECT_EQ(cq.fair_sharing_weight, 0.5);
  EXPECT_EQ(cq.stop_policy, StopPolicy::kHold);

  Decoded old = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  cohort: shared
)",
                       false);
  EXPECT_THAT(old.Errors(), ElementsAre(HasSubstr("spec.cohort: v1beta2 renamed spec.cohort to spec.cohortName")));
  EXPECT_TRUE(old.policies.cluster_queues.empty());

  Decoded removed = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  flavorFungibility: {whenCanBorrow: Borrow}
)",
                           false);
  EXPECT_THAT(removed.Errors(), ElementsAre(HasSubstr("\"Borrow\" was removed in v1beta2; use MayStopSearch")));
  Decoded legacy = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
)",
                          false);
  EXPECT_THAT(legacy.Errors(), IsEmpty()) << legacy.All();
  EXPECT_EQ(legacy.policies.cluster_queues.at("q").flavor_fungibility.when_can_preempt,
            FungibilityPolicy::kMayStopSearch);
}

TEST(DecodeTest, SelectorsMatchLabelsAndExpressions) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector:
    matchLabels: {team: a}
    matchExpressions:
    - {key: tier, operator: In, values: [gold, silver]}
    - {key: frozen, operator: DoesNotExist}
)",
                     false);
  ASSERT_THAT(d.Errors(), IsEmpty()) << d.All();
  const LabelSelector& s = *d.policies.cluster_queues.at("q").namespace_selector;
  EXPECT_TRUE(s.Matches({{"team", "a"}, {"tier", "gold"}}));
  EXPECT_FALSE(s.Matches({{"team", "a"}, {"tier", "bronze"}}));
  EXPECT_FALSE(s.Matches({{"team", "b"}, {"tier", "gold"}}));
  EXPECT_FALSE(s.Matches({{"team", "a"}, {"tier", "gold"}, {"frozen", "yes"}}));
  Decoded none = Decode("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n", true);
  EXPECT_FALSE(none.policies.cluster_queues.at("q").namespace_selector.has_value());
  EXPECT_THAT(none.Warnings(), ElementsAre(HasSubstr("spec.namespaceSelector: not set, so no namespace can use")));
}

TEST(DecodeTest, EveryPolicyKind) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {instance-type: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
  tolerations: [{key: spot-taint, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu-queue, namespace: team-a}
spec: {clusterQueue: team-a-gpu, stopPolicy: HoldAndDrain}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: child}
spec: {parentName: root, fairSharing: {weight: 2}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: "x"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: inference-critical}
value: 100000
globalDefault: false
preemptionPolicy: PreemptLowerPriority
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: training-batch}
value: 10000
preemptionPolicy: Never
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {tier: gold}}
)",
                     false);
  ASSERT_THAT(d.Errors(), IsEmpty()) << d.All();
  const ResourceFlavor& rf = d.policies.flavors.at("spot");
  EXPECT_EQ(rf.node_labels.at("instance-type"), "spot");
  ASSERT_THAT(rf.node_taints, SizeIs(1));
  EXPECT_EQ(rf.node_taints[0].effect, "NoSchedule");
  ASSERT_THAT(rf.tolerations, SizeIs(1));
  EXPECT_EQ(rf.tolerations[0].op, "Exists");
  const LocalQueue& lq = d.policies.local_queues.at({"team-a", "gpu-queue"});
  EXPECT_EQ(lq.cluster_queue, "team-a-gpu");
  EXPECT_EQ(lq.stop_policy, StopPolicy::kHoldAndDrain);
  EXPECT_EQ(d.policies.cohorts.at("child").parent, "root");
  EXPECT_EQ(d.policies.cohorts.at("child").fair_sharing_weight, 2.0);
  EXPECT_EQ(d.policies.workload_priority_classes.at("high").value, 1000);
  EXPECT_EQ(d.policies.priority_classes.at("inference-critical").value, 100000);
  EXPECT_EQ(d.policies.priority_classes.at("training-batch").preemption_policy, PreemptionPolicy::kNever);
  EXPECT_EQ(d.policies.NamespaceLabels("team-a").at("tier"), "gold");
  EXPECT_EQ(d.policies.NamespaceLabels("team-a").at("kubernetes.io/metadata.name"), "team-a");
  EXPECT_EQ(d.policies.NamespaceLabels("other").at("kubernetes.io/metadata.name"), "other");
}

// The walk up the cohort tree that the metrics and the counters share: the
// cohort itself first, then its parents; a cohort only named ends the walk;
// a cycle (which validation refuses) ends at the first repeat.
TEST(DecodeTest, CohortsAboveWalksTheParentsNearestFirst) {
  PolicySet p;
  p.cohorts["team"].parent = "dept";
  p.cohorts["dept"].parent = "org";  // "org" is only named
  EXPECT_THAT(p.CohortsAbove("team"), ElementsAre("team", "dept", "org"));
  EXPECT_THAT(p.CohortsAbove("org"), ElementsAre("org"));
  EXPECT_THAT(p.CohortsAbove(""), IsEmpty());
  p.cohorts["org"].parent = "team";  // a cycle
  EXPECT_THAT(p.CohortsAbove("team"), ElementsAre("team", "dept", "org"));
  p.cohorts["self"].parent = "self";
  EXPECT_THAT(p.CohortsAbove("self"), ElementsAre("self"));
}

TEST(DecodeTest, OtherKindsAreSkippedWithANote) {
  Decoded d = Decode(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: train}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
)");
  EXPECT_THAT(d.Errors(), IsEmpty());
  EXPECT_THAT(d.Notes(), ElementsAre(HasSubstr("test.yaml#1: note: Job train: skipped: batch/v1 Job is not a policy"),
                                     HasSubstr("test.yaml#2: note: Deployment web: skipped")));
}

// Issue #25 item 6: Kueue's kinds that gangkeeper does not enforce are
// warnings (not notes, which --quiet hides) that say what does not happen.
TEST(DecodeTest, KueueKindsNotEnforcedAreWarningsSayingWhat) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: prov}
spec: {controllerName: kueue.x-k8s.io/provisioning-request}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: prov-config}
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueConfig
metadata: {name: mk}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: wl, namespace: team-a}
)");
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_THAT(d.Notes(), IsEmpty()) << d.All();
  EXPECT_THAT(
      d.Warnings(),
      ElementsAre(
          AllOf(HasSubstr("test.yaml#1: warning: AdmissionCheck prov: not enforced: kueue.x-k8s.io/v1beta1 "
                          "AdmissionCheck is skipped"),
                HasSubstr("admission checks are not run")),
          AllOf(HasSubstr("ProvisioningRequestConfig prov-config"), HasSubstr("no ProvisioningRequests are created")),
          AllOf(HasSubstr("Topology default"), HasSubstr("topology-aware scheduling is not done")),
          AllOf(HasSubstr("MultiKueueConfig mk"), HasSubstr("MultiKueue is not done")),
          AllOf(HasSubstr("MultiKueueCluster worker1"), HasSubstr("MultiKueue is not done")),
          AllOf(HasSubstr("Workload"), HasSubstr("Workload objects are not read"))));
}

TEST(DecodeTest, JsonDocumentsArraysAndLists) {
  Decoded d = Decode(R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"List","items":[
    {"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"a"}},
    {"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"WorkloadPriorityClass","metadata":{"name":"p"},"value":7}]})",
                     false);
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  EXPECT_EQ(d.policies.flavors.count("a"), 1u);
  EXPECT_EQ(d.policies.workload_priority_classes.at("p").value, 7);
  Decoded arr = Decode(R"([{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"b"}}])",
                       false);
  EXPECT_EQ(arr.policies.flavors.count("b"), 1u);
}

TEST(DecodeTest, TyposAndWrongTypesNameTheField) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  queueingStrategy: Fifo
  namespaceSelecter: {}
  resourceGroups: "cpu"
)",
                     false);
  std::string all = d.All();
  EXPECT_THAT(all, HasSubstr("spec.queueingStrategy: \"Fifo\" is not supported (use one of StrictFIFO, BestEffortFIFO)"));
  EXPECT_THAT(all, HasSubstr("spec.namespaceSelecter: unknown field \"namespaceSelecter\"; did you mean "
                             "\"namespaceSelector\"?"));
  EXPECT_THAT(all, HasSubstr("spec.resourceGroups: must be a list, not a string"));
  EXPECT_TRUE(d.policies.cluster_queues.empty());
}

TEST(DecodeTest, UnsupportedAndUnenforcedFieldsAreNamed) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  admissionChecks: [prov]
)",
                     false);
  EXPECT_THAT(d.Errors(), ElementsAre(HasSubstr("spec.admissionChecks: admission checks are not supported")));
  Decoded w = Decode(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
)",
                     false);
  EXPECT_THAT(w.Errors(), IsEmpty());
  EXPECT_THAT(w.Warnings(), ElementsAre(HasSubstr("spec.admissionScope: admission fair sharing")));
  EXPECT_EQ(w.policies.cluster_queues.count("q"), 1u);
}

TEST(DecodeTest, UnsupportedApiVersionAndMissingMetadata) {
  Decoded d = Decode(R"(
apiVersion: kueue.x-k8s.io/v1alpha9
kind: ClusterQueue
metadata: {name: q}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq}
spec: {clusterQueue: q}
---
kind: ResourceFlavor
---
- just
- a list
)",
                     false);
  std::vector<std::string> errors = d.Errors();
  ASSERT_THAT(errors, SizeIs(5)) << d.All();
  EXPECT_THAT(errors[0], HasSubstr("#1: error: ClusterQueue: apiVersion: apiVersion kueue.x-k8s.io/v1alpha9 is not "
                                   "supported for ClusterQueue; use kueue.x-k8s.io/v1beta2 or kueue.x-k8s.io/v1beta1"));
  EXPECT_THAT(errors[1], HasSubstr("#2: error: ResourceFlavor <unnamed>: metadata: metadata.name must be set"));
  EXPECT_THAT(errors[2], HasSubstr("#3: error: LocalQueue /lq: metadata.namespace: this kind lives in a namespace"));
  EXPECT_THAT(errors[3], HasSubstr("#4: error: apiVersion: every manifest needs apiVersion and kind"));
  EXPECT_THAT(errors[4], HasSubstr("#5: error: a manifest must be an object"));
}

TEST(DecodeTest, YamlSyntaxErrorsAreLocatedAndOtherDocumentsStillLoad) {
  Decoded d = Decode(std::string(kFlavor) + R"(---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: [unclosed
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: second}
)",
                     false);
  EXPECT_THAT(d.Errors(), ElementsAre(HasSubstr("test.yaml#2: error: YAML syntax error at line")));
  EXPECT_EQ(d.policies.flavors.count("nvidia-gpu"), 1u);
  EXPECT_EQ(d.policies.flavors.count("second"), 1u);
}

TEST(DecodeTest, DuplicateNamesKeepTheFirst) {
  Decoded d = Decode(std::string(kFlavor) + "---\n" + kFlavor, false);
  EXPECT_THAT(d.Errors(), ElementsAre(HasSubstr("test.yaml#2: error: ResourceFlavor nvidia-gpu: metadata.name: "
                                                "duplicate ResourceFlavor \"nvidia-gpu\" (first defined in "
                                                "test.yaml#1); rename or remove one")));
  EXPECT_EQ(d.policies.flavors.at("nvidia-gpu").meta.source.document, 1);
}

}  // namespace
}  // namespace gangkeeper::model

namespace gangkeeper::model {
namespace {

TEST(DecodeTest, NamespacesDefinedTwiceMergeTheirLabelsUnlessTheyConflict) {
  Decoded d = Decode(R"(apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {a: "1"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {b: "2"}}
)");
  EXPECT_THAT(d.Errors(), ::testing::IsEmpty()) << d.All();
  EXPECT_EQ(d.policies.NamespaceLabels("ml").at("a"), "1");
  EXPECT_EQ(d.policies.NamespaceLabels("ml").at("b"), "2");
  Decoded c = Decode(R"(apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {a: "1"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml, labels: {a: "2"}}
)");
  EXPECT_THAT(c.Errors(), ::testing::ElementsAre(::testing::HasSubstr("duplicate Namespace \"ml\"")));
}

}  // namespace
}  // namespace gangkeeper::model
