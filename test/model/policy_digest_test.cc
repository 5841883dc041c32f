// gangkeeper: a policy set's digest (policy_digest.h): what makes two sets
// "the same policies" for the broker and the durable state, and that the
// policy store seals every set it hands out.
#include "gangkeeper/model/policy_digest.h"

#include <memory>
#include <string>
#include <vector>

#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/policy_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gangkeeper::model {
namespace {

constexpr char kDigestFlavor[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
)";

std::string DigestQueue(int gpus, const std::string& extra = "") {
  return "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n" + extra +
         "  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n"
         "    flavors:\n    - name: a100\n      resources: [{name: nvidia.com/gpu, nominalQuota: " +
         std::to_string(gpus) + "}]\n";
}

// The set the documents of `files` decode to, one file each, in order.
PolicySet DigestTestSet(const std::vector<std::string>& files) {
  PolicySet p;
  Diagnostics d;
  for (size_t i = 0; i < files.size(); ++i) {
    DecodeManifests(files[i], "file" + std::to_string(i) + ".yaml", &p, &d);
  }
  EXPECT_FALSE(d.HasErrors()) << d.ErrorSummary();
  return p;
}

TEST(PolicyDigestTest, IsTheSameForTheSameObjectsHoweverTheFilesSpellThem) {
  const PolicyDigest base = DigestOf(DigestTestSet({kDigestFlavor, DigestQueue(8)}));
  ASSERT_TRUE(base.known());
  EXPECT_EQ(base.bytes().size(), PolicyDigest::kSize);
  EXPECT_EQ(base.Hex().size(), 2 * PolicyDigest::kSize);
  // Other file order, objects in one file, comments and whitespace.
  EXPECT_EQ(DigestOf(DigestTestSet({DigestQueue(8), kDigestFlavor})), base);
  EXPECT_EQ(DigestOf(DigestTestSet({"# quotas\n" + DigestQueue(8) + "\n\n---\n" + kDigestFlavor})), base);
  // A field spelled out with the value Kueue defaults it to.
  EXPECT_EQ(DigestOf(DigestTestSet({kDigestFlavor, DigestQueue(8, "  queueingStrategy: BestEffortFIFO\n")})), base);
  // JSON instead of YAML.
  EXPECT_EQ(DigestOf(DigestTestSet({R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                       "metadata": {"name": "a100"}})",
                                    DigestQueue(8)})),
            base);
}

TEST(PolicyDigestTest, DiffersWhenAnythingTheModelHoldsDiffers) {
  const PolicyDigest base = DigestOf(DigestTestSet({kDigestFlavor, DigestQueue(8)}));
  EXPECT_NE(DigestOf(DigestTestSet({kDigestFlavor, DigestQueue(9)})), base) << "a quota";
  EXPECT_NE(DigestOf(DigestTestSet({kDigestFlavor, DigestQueue(8, "  queueingStrategy: StrictFIFO\n")})), base);
  EXPECT_NE(DigestOf(DigestTestSet({kDigestFlavor})), base) << "an object less";
  EXPECT_NE(DigestOf(PolicySet()), base);
}

TEST(PolicyDigestTest, SealStampsTheDigestAndACopyIsNotSealed) {
  PolicySet p = DigestTestSet({kDigestFlavor, DigestQueue(8)});
  const PolicyDigest computed = DigestOf(p);
  EXPECT_FALSE(p.sealed.digest().known()) << "decoded sets are not sealed";
  std::shared_ptr<const PolicySet> sealed = Seal(p);
  EXPECT_EQ(sealed->sealed.digest(), computed);
  EXPECT_EQ(Sealed(sealed), sealed) << "sealed already: the same set, not a copy";
  // A copy may be changed: it carries no stamp, and its digest follows its
  // content.
  PolicySet copy = *sealed;
  EXPECT_FALSE(copy.sealed.digest().known());
  copy.cluster_queues.erase("team-a");
  EXPECT_NE(DigestOf(copy), computed);
  PolicySet moved = std::move(copy);
  EXPECT_FALSE(moved.sealed.digest().known());
  std::shared_ptr<const PolicySet> resealed = Sealed(std::make_shared<const PolicySet>(*sealed));
  EXPECT_EQ(resealed->sealed.digest(), computed);
}

TEST(PolicyDigestTest, ARecordedDigestIsTakenAsIsAndMustHaveItsSize) {
  absl::StatusOr<PolicyDigest> recorded = PolicyDigest::FromBytes(std::string(PolicyDigest::kSize, 'x'));
  ASSERT_TRUE(recorded.ok());
  std::shared_ptr<const PolicySet> p = Seal(PolicySet(), *recorded);
  EXPECT_EQ(DigestOf(*p), *recorded) << "not computed again";
  EXPECT_FALSE(PolicyDigest::FromBytes("short").ok());
  EXPECT_FALSE(PolicyDigest::FromBytes("").ok());
  EXPECT_EQ(PolicyDigest().Hex(), "unknown");
}

TEST(PolicyDigestTest, ThePolicyStoreSealsEverySetItPublishes) {
  auto files = std::make_shared<const PolicySet>(DigestTestSet({kDigestFlavor, DigestQueue(8)}));
  PolicyStore store(files);
  std::shared_ptr<const EffectiveSet> first = store.current();
  EXPECT_TRUE(first->policies->sealed.digest().known());
  EXPECT_EQ(first->digest(), DigestOf(*files));
  // Another store (another replica, or a restart) on the same content.
  PolicyStore other(std::make_shared<const PolicySet>(DigestTestSet({DigestQueue(8), kDigestFlavor})));
  EXPECT_EQ(other.current()->digest(), first->digest());
  // The same files again: a new version, the same digest.
  auto again = store.ReloadFiles(std::make_shared<const PolicySet>(DigestTestSet({kDigestFlavor, DigestQueue(8)})),
                                 nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->version, first->version + 1);
  EXPECT_EQ((*again)->digest(), first->digest());
  // An overlay that changes the quota: another digest, sealed as well.
  auto overlay = std::make_shared<PolicyOverlay>();
  overlay->generation = 1;
  overlay->put = DigestTestSet({DigestQueue(4)});
  auto changed = store.SetOverlay(overlay, nullptr);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE((*changed)->policies->sealed.digest().known());
  EXPECT_NE((*changed)->digest(), first->digest());
  auto candidate = store.Compose(overlay, nullptr);
  ASSERT_TRUE(candidate.ok());
  EXPECT_TRUE((*candidate)->policies->sealed.digest().known()) << "what the API writes is sealed too";
}

}  // namespace
}  // namespace gangkeeper::model
