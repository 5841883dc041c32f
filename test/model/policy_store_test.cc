// gangkeeper: the policy store: files + the API's overlay as one validated,
// versioned set.
#include "gangkeeper/model/policy_store.h"

#include <memory>
#include <string>
#include <utility>

#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gangkeeper::model {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kFiles[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: team-a}
)";

std::shared_ptr<const PolicySet> DecodeSet(const std::string& yaml) {
  auto p = std::make_shared<PolicySet>();
  Diagnostics d;
  DecodeManifests(yaml, "test.yaml", p.get(), &d);
  EXPECT_FALSE(d.HasErrors()) << d.ErrorSummary();
  return p;
}

// An overlay of `generation` that puts the objects of `yaml` and deletes `deleted`.
std::shared_ptr<const PolicyOverlay> Overlay(uint64_t generation, const std::string& yaml,
                                             std::set<std::string> deleted = {}) {
  auto o = std::make_shared<PolicyOverlay>();
  o->generation = generation;
  if (!yaml.empty()) o->put = *DecodeSet(yaml);
  o->deleted = std::move(deleted);
  return o;
}

std::string LocalQueue(const std::string& name, const std::string& cluster_queue) {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " + name +
         ", namespace: b}\nspec: {clusterQueue: " + cluster_queue + "}\n";
}

TEST(PolicyStoreTest, StartsWithTheFilesAsVersionOne) {
  PolicyStore store(DecodeSet(kFiles));
  std::shared_ptr<const EffectiveSet> now = store.current();
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(now->version, 1u);
  EXPECT_EQ(now->overlay, nullptr);
  EXPECT_EQ(now->generation(), 0u);
  EXPECT_EQ(now->policies, now->files);
  EXPECT_EQ(now->policies->cluster_queues.count("team-a"), 1u);
}

TEST(PolicyStoreTest, NoFilesIsAnEmptySet) {
  PolicyStore store(nullptr);
  ASSERT_NE(store.current()->policies, nullptr);
  EXPECT_THAT(store.current()->policies->cluster_queues, IsEmpty());
}

TEST(PolicyStoreTest, AnOverlayAddsAndRemovesObjectsOverTheFiles) {
  PolicyStore store(DecodeSet(kFiles));
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> added =
      store.SetOverlay(Overlay(1, LocalQueue("qb", "team-a")), nullptr);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ((*added)->version, 2u);
  EXPECT_EQ((*added)->generation(), 1u);
  EXPECT_EQ((*added)->policies->local_queues.count({"b", "qb"}), 1u);
  EXPECT_EQ((*added)->policies->local_queues.count({"a", "q"}), 1u);
  EXPECT_EQ((*added)->files->local_queues.count({"b", "qb"}), 0u) << "the files are not changed";
  EXPECT_EQ(store.current(), *added);

  // Generation 2 deletes a file's object (and no longer puts qb).
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> removed =
      store.SetOverlay(Overlay(2, "", {ObjectId("LocalQueue", "a", "q")}), nullptr);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ((*removed)->version, 3u);
  EXPECT_THAT((*removed)->policies->local_queues, IsEmpty());
  EXPECT_EQ((*removed)->policies->cluster_queues.count("team-a"), 1u);

  // The set published before is unchanged: readers keep what they got.
  EXPECT_EQ((*added)->policies->local_queues.size(), 2u);

  // No overlay: the files again, as a new version.
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> none = store.SetOverlay(nullptr, nullptr);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)->version, 4u);
  EXPECT_EQ((*none)->policies->local_queues.size(), 1u);
}

TEST(PolicyStoreTest, TheOverlayInEffectAgainIsNoNewVersion) {
  PolicyStore store(DecodeSet(kFiles));
  ASSERT_TRUE(store.SetOverlay(Overlay(3, LocalQueue("qb", "team-a")), nullptr).ok());
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> again =
      store.SetOverlay(Overlay(3, LocalQueue("qb", "team-a")), nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->version, 2u);
  EXPECT_EQ(store.SetOverlay(nullptr, nullptr).value()->version, 3u);
  // An older generation than the last one seen (a recorded state) is published.
  EXPECT_EQ(store.SetOverlay(Overlay(2, ""), nullptr).value()->version, 4u);
}

TEST(PolicyStoreTest, AnInvalidOverlayIsRefusedNamingTheFieldAndTheOldSetStays) {
  PolicyStore store(DecodeSet(kFiles));
  ASSERT_TRUE(store.SetOverlay(Overlay(1, LocalQueue("qb", "team-a")), nullptr).ok());
  const std::shared_ptr<const EffectiveSet> before = store.current();

  Diagnostics problems;
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> bad =
      store.SetOverlay(Overlay(2, LocalQueue("qc", "nope")), &problems);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("ClusterQueue \"nope\" does not exist; define it or fix the name"));
  ASSERT_TRUE(problems.HasErrors());
  bool named = false;
  for (const Diagnostic& d : problems.items) {
    named = named || (d.severity == Diagnostic::Severity::kError && d.object == "LocalQueue b/qc" &&
                      d.path == "spec.clusterQueue");
  }
  EXPECT_TRUE(named) << problems.ErrorSummary();
  EXPECT_EQ(store.current(), before);
  EXPECT_EQ(store.current()->version, 2u);

  // Deleting the ClusterQueue a LocalQueue uses is refused the same way.
  EXPECT_FALSE(store.SetOverlay(Overlay(2, "", {ObjectId("ClusterQueue", "", "team-a")}), nullptr).ok());
  EXPECT_EQ(store.current(), before);
}

// A recorded overlay is in effect whatever the files say now: published
// with its errors reported, not refused.
TEST(PolicyStoreTest, AdoptPublishesARecordedOverlayAndReportsItsErrors) {
  PolicyStore store(DecodeSet(kFiles));
  Diagnostics problems;
  std::shared_ptr<const EffectiveSet> adopted = store.Adopt(Overlay(4, LocalQueue("qc", "gone")), &problems);
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(adopted->version, 2u);
  EXPECT_EQ(adopted->generation(), 4u);
  EXPECT_EQ(adopted->policies->local_queues.count({"b", "qc"}), 1u);
  ASSERT_TRUE(problems.HasErrors());
  EXPECT_THAT(problems.ErrorSummary(), HasSubstr("ClusterQueue \"gone\" does not exist"));
  EXPECT_EQ(store.current(), adopted);
  // The same generation again: no new version, no new problems.
  Diagnostics again;
  EXPECT_EQ(store.Adopt(Overlay(4, LocalQueue("qc", "gone")), &again), adopted);
  EXPECT_THAT(again.items, IsEmpty());
}

TEST(PolicyStoreTest, ComposeValidatesWithoutPublishing) {
  PolicyStore store(DecodeSet(kFiles));
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> candidate =
      store.Compose(Overlay(1, LocalQueue("qb", "team-a")), nullptr);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  EXPECT_EQ((*candidate)->version, 0u) << "a candidate is not published";
  EXPECT_EQ((*candidate)->policies->local_queues.size(), 2u);
  EXPECT_EQ(store.current()->version, 1u);
  Diagnostics problems;
  EXPECT_FALSE(store.Compose(Overlay(1, LocalQueue("qc", "nope")), &problems).ok());
  EXPECT_TRUE(problems.HasErrors());
}

TEST(PolicyStoreTest, ReloadedFilesKeepTheOverlayAndAreValidatedWithIt) {
  PolicyStore store(DecodeSet(kFiles));
  ASSERT_TRUE(store.SetOverlay(Overlay(1, LocalQueue("qb", "team-a")), nullptr).ok());

  // A file edit that raises the quota: a new version, the overlay kept.
  std::string more(kFiles);
  more.replace(more.find("nominalQuota: 8"), 15, "nominalQuota: 16");
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> reloaded = store.ReloadFiles(DecodeSet(more), nullptr);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ((*reloaded)->version, 3u);
  EXPECT_EQ((*reloaded)->generation(), 1u);
  EXPECT_EQ((*reloaded)->policies->local_queues.count({"b", "qb"}), 1u);
  EXPECT_EQ(
      (*reloaded)->policies->cluster_queues.at("team-a").resource_groups[0].flavors[0].resources[0].nominal.CeilUnits(),
      16);

  // Files without the ClusterQueue the overlay's LocalQueue uses: refused,
  // the reloaded set stays.
  std::string no_cq(kFiles);
  no_cq = no_cq.substr(0, no_cq.find("---"));
  Diagnostics problems;
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> bad = store.ReloadFiles(DecodeSet(no_cq), &problems);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("ClusterQueue \"team-a\" does not exist"));
  EXPECT_EQ(store.current(), *reloaded);
}

// Namespaces from the cluster replace the files' Namespace objects for
// namespaceSelectors: a label set after start is seen at once, the same
// labels again publish nothing, file reloads keep them, null restores the
// files' namespaces.
TEST(PolicyStoreTest, ClusterNamespacesReplaceTheFilesNamespaces) {
  const std::string files = std::string(kFiles) +
                            "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {tier: bronze}}\n";
  PolicyStore store(DecodeSet(files));
  EXPECT_EQ(store.current()->policies->NamespaceLabels("a").at("tier"), "bronze");

  auto gold = std::make_shared<const ClusterNamespaces>(ClusterNamespaces{{"a", {{"tier", "gold"}}}, {"b", {}}});
  absl::StatusOr<std::shared_ptr<const EffectiveSet>> set = store.SetClusterNamespaces(gold, nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->version, 2u);
  EXPECT_EQ((*set)->policies->NamespaceLabels("a").at("tier"), "gold");
  EXPECT_EQ((*set)->policies->namespaces.count("b"), 1u);

  // The same labels (a resync): no new version.
  auto again = std::make_shared<const ClusterNamespaces>(*gold);
  ASSERT_TRUE(store.SetClusterNamespaces(again, nullptr).ok());
  EXPECT_EQ(store.current()->version, 2u);

  // An overlay and a file reload keep the cluster's namespaces.
  ASSERT_TRUE(store.SetOverlay(Overlay(1, LocalQueue("qb", "team-a")), nullptr).ok());
  EXPECT_EQ(store.current()->policies->NamespaceLabels("a").at("tier"), "gold");
  ASSERT_TRUE(store.ReloadFiles(DecodeSet(files), nullptr).ok());
  EXPECT_EQ(store.current()->policies->NamespaceLabels("a").at("tier"), "gold");
  EXPECT_EQ(store.current()->policies->local_queues.count({"b", "qb"}), 1u);

  // Relabelled, then forgotten: back to the files' labels.
  auto silver = std::make_shared<const ClusterNamespaces>(ClusterNamespaces{{"a", {{"tier", "silver"}}}});
  ASSERT_TRUE(store.SetClusterNamespaces(silver, nullptr).ok());
  EXPECT_EQ(store.current()->policies->NamespaceLabels("a").at("tier"), "silver");
  EXPECT_EQ(store.current()->policies->namespaces.count("b"), 0u);
  ASSERT_TRUE(store.SetClusterNamespaces(nullptr, nullptr).ok());
  EXPECT_EQ(store.current()->policies->NamespaceLabels("a").at("tier"), "bronze");
}

// --- Kueue's objects from the cluster (--policy-source cluster) ---

constexpr char kClusterObjects[] = R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: good}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: missing-flavor}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: no-such-flavor
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: a}
spec: {clusterQueue: good}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: orphan, namespace: a}
spec: {clusterQueue: nowhere}
)";

std::shared_ptr<const ClusterKueueObjects> FromCluster(const std::string& yaml) {
  auto c = std::make_shared<ClusterKueueObjects>();
  c->objects = *DecodeSet(yaml);
  return c;
}

TEST(ClusterObjectsTest, ReplaceTheFilesKueueObjectsAndRefuseOnlyWhatIsInvalid) {
  PolicyStore store(DecodeSet(kFiles));
  Diagnostics problems;
  auto set = store.SetClusterObjects(FromCluster(kClusterObjects), &problems);
  ASSERT_TRUE(set.ok()) << set.status();
  const PolicySet& p = *(*set)->policies;
  EXPECT_EQ(p.flavors.count("a100"), 0u) << "the files' Kueue objects are replaced";
  EXPECT_EQ(p.cluster_queues.count("team-a"), 0u);
  EXPECT_TRUE(p.cluster_queues.at("good").inactive_reason.empty());
  const ClusterQueue& stub = p.cluster_queues.at("missing-flavor");
  EXPECT_TRUE(stub.resource_groups.empty());
  EXPECT_THAT(stub.inactive_reason, HasSubstr("no-such-flavor"));
  EXPECT_EQ(p.local_queues.count({"a", "q"}), 1u);
  EXPECT_EQ(p.local_queues.count({"a", "orphan"}), 0u) << "a LocalQueue of a missing ClusterQueue is left out";
  EXPECT_THAT(problems.ErrorSummary(), HasSubstr("nowhere"));
  Diagnostics again;
  ValidatePolicySet(p, &again);
  EXPECT_FALSE(again.HasErrors()) << again.ErrorSummary();
  // Back to the files: a new version with the files' objects.
  const uint64_t v = (*set)->version;
  auto same = store.SetClusterObjects(nullptr, nullptr);
  ASSERT_TRUE(same.ok());
  EXPECT_GT((*same)->version, v);
  EXPECT_EQ((*same)->policies->cluster_queues.count("team-a"), 1u);
}

// KueueObjectsOf takes exactly the five Kueue kinds out of a set (a
// recorded one stands in for the cluster's until the first list), and
// SetKueueObjects puts them back over another set without touching the
// rest (WithClusterObjects).
TEST(ClusterObjectsTest, KueueObjectsOfCopiesTheFiveKueueKindsAndNothingElse) {
  PolicySet set;
  set.flavors["a100"].meta.name = "a100";
  set.cluster_queues["team-a"].meta.name = "team-a";
  set.cluster_queues["refused"].inactive_reason = "spec.cohort: a cycle";
  set.local_queues[{"ns-a", "q"}].meta.name = "q";
  set.cohorts["org"].meta.name = "org";
  set.workload_priority_classes["high"].value = 1000;
  set.priority_classes["critical"].value = 7;
  set.namespaces["ns-a"].meta.name = "ns-a";
  set.gpu_node_pools["pool"];
  set.gpu_node_pool_sources["pool"].file = "pools.yaml";
  set.configuration.present = true;

  const ClusterKueueObjects k = KueueObjectsOf(set);
  EXPECT_EQ(k.objects.flavors.count("a100"), 1u);
  ASSERT_EQ(k.objects.cluster_queues.size(), 2u);
  EXPECT_EQ(k.objects.cluster_queues.at("refused").inactive_reason, "spec.cohort: a cycle")
      << "a refused ClusterQueue keeps its reason";
  EXPECT_EQ(k.objects.local_queues.count({"ns-a", "q"}), 1u);
  EXPECT_EQ(k.objects.cohorts.count("org"), 1u);
  ASSERT_EQ(k.objects.workload_priority_classes.count("high"), 1u);
  EXPECT_EQ(k.objects.workload_priority_classes.at("high").value, 1000);
  EXPECT_THAT(k.objects.priority_classes, IsEmpty());
  EXPECT_THAT(k.objects.namespaces, IsEmpty());
  EXPECT_THAT(k.objects.gpu_node_pools, IsEmpty());
  EXPECT_THAT(k.objects.gpu_node_pool_sources, IsEmpty());
  EXPECT_FALSE(k.objects.configuration.present);

  PolicySet files;
  files.flavors["old"].meta.name = "old";
  files.cohorts["old-org"].meta.name = "old-org";
  files.gpu_node_pools["files-pool"];
  files.priority_classes["files-pc"].value = 3;
  files.configuration.present = true;
  SetKueueObjects(k, &files);
  EXPECT_EQ(files.flavors.size(), 1u);
  EXPECT_EQ(files.flavors.count("a100"), 1u) << "the Kueue kinds are replaced, not merged";
  EXPECT_EQ(files.cluster_queues.size(), 2u);
  EXPECT_EQ(files.local_queues.size(), 1u);
  ASSERT_EQ(files.cohorts.size(), 1u);
  EXPECT_EQ(files.cohorts.count("org"), 1u);
  EXPECT_EQ(files.workload_priority_classes.size(), 1u);
  EXPECT_EQ(files.gpu_node_pools.count("files-pool"), 1u) << "the rest stays the files'";
  EXPECT_EQ(files.priority_classes.count("files-pc"), 1u);
  EXPECT_TRUE(files.configuration.present);
}

TEST(ClusterObjectsTest, AnUndecodableClusterQueueIsAnInactiveStandInWithTheDecodersMessage) {
  ClusterKueueObjects c;
  Diagnostics problems;
  EXPECT_FALSE(DecodeClusterObject(
      R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"cq"},)"
      R"("spec":{"resourceGroups":[{"coveredResources":["cpu"],"flavors":[{"name":"f","resources":)"
      R"([{"name":"cpu","nominalQuota":"lots"}]}]}]}})",
      "the cluster (clusterqueues/cq)", "ClusterQueue", "cq", &c, &problems));
  ASSERT_EQ(c.objects.cluster_queues.count("cq"), 1u);
  EXPECT_THAT(c.objects.cluster_queues.at("cq").inactive_reason, HasSubstr("nominalQuota"));
  EXPECT_TRUE(problems.HasErrors());
  // An annotation on a valid object from the cluster marks nothing: only
  // validation refuses a cluster object.
  EXPECT_TRUE(DecodeClusterObject(
      R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"annotated",)"
      R"("annotations":{"gangkeeper.io/inactive-reason":"says who"}},"spec":{}})",
      "the cluster (clusterqueues/annotated)", "ClusterQueue", "annotated", &c, nullptr));
  EXPECT_TRUE(c.objects.cluster_queues.at("annotated").inactive_reason.empty());
  // Any other kind that does not decode is left out.
  EXPECT_FALSE(DecodeClusterObject(
      R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"f"},"spec":{"nodeLabels":1}})",
      "the cluster (resourceflavors/f)", "ResourceFlavor", "f", &c, nullptr));
  EXPECT_EQ(c.objects.flavors.count("f"), 0u);
}

}  // namespace
}  // namespace gangkeeper::model
