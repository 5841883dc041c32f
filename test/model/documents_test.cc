// Duplicate keys in policy manifests: YAML and JSON parsers keep only one
// value of a key written twice, so the decoder refuses such documents and
// names both places and the key's path.
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/encode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// The message for `key` written at `first` and again at `again` ("line L, column C").
std::string Twice(const std::string& key, const std::string& first, const std::string& again) {
  return absl::StrCat("key \"", key, "\" is written twice in the same map: first at ", first, ", again at ", again,
                      "; only one value would be kept, so remove one of them");
}

TEST(DuplicateKeyTest, YamlTopLevelKeyNamesBothPlaces) {
  Decoded d = Decode(R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: nvidia-gpu}
kind: ResourceFlavor
)");
  EXPECT_THAT(d.Errors(), ElementsAre("test.yaml#1: error: ResourceFlavor nvidia-gpu: kind: " +
                                      Twice("kind", "line 2, column 1", "line 4, column 1")));
  EXPECT_THAT(d.policies.flavors, IsEmpty());
}

TEST(DuplicateKeyTest, YamlKeyInAListOfMapsInALaterDocument) {
  Decoded d = Decode(R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: nvidia-gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a-gpu
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources:
      - name: cpu
        nominalQuota: 8
      - name: nvidia.com/gpu
        nominalQuota: 4
        nominalQuota: 8
)");
  EXPECT_THAT(d.Errors(),
              ElementsAre("test.yaml#2: error: ClusterQueue team-a-gpu: "
                          "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: " +
                          Twice("nominalQuota", "line 19, column 9", "line 20, column 9")));
  EXPECT_THAT(d.policies.cluster_queues, IsEmpty());
  EXPECT_THAT(d.policies.flavors, SizeIs(1));  // the other document still counts
}

TEST(DuplicateKeyTest, YamlNestedFlowMapKeyWithDotsIsBracketed) {
  Decoded d = Decode(R"(apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {gangkeeper.io/team: a, other: x, gangkeeper.io/team: b}
)");
  EXPECT_THAT(d.Errors(), ElementsAre("test.yaml#1: error: Namespace team-a: metadata.labels[gangkeeper.io/team]: " +
                                      Twice("gangkeeper.io/team", "line 5, column 12", "line 5, column 45")));
  EXPECT_THAT(d.policies.namespaces, IsEmpty());
}

TEST(DuplicateKeyTest, YamlMapReachedTwiceThroughAnAliasIsReportedOnce) {
  Decoded d = Decode(R"(apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: &l {a: "1", a: "2"}
  annotations: *l
)");
  EXPECT_THAT(d.Errors(), ElementsAre(HasSubstr("metadata.labels.a: " +
                                                Twice("a", "line 5, column 15", "line 5, column 23"))));
}

TEST(DuplicateKeyTest, ManyDuplicatesAreCapped) {
  std::string text = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n  labels:\n";
  for (int i = 0; i < 30; ++i) absl::StrAppend(&text, "    k: v", i, "\n");
  Decoded d = Decode(text);
  ASSERT_THAT(d.Errors(), SizeIs(21)) << d.All();
  EXPECT_THAT(d.Errors()[0], HasSubstr(Twice("k", "line 6, column 5", "line 7, column 5")));
  EXPECT_THAT(d.Errors()[20], HasSubstr("only the first 20 are listed"));
}

TEST(DuplicateKeyTest, JsonObjectNamesBothPlacesCountingLeadingLines) {
  Decoded d = Decode(R"(
{
  "apiVersion": "kueue.x-k8s.io/v1beta1",
  "kind": "ResourceFlavor",
  "metadata": {"name": "a", "labels": {"x": "1", "x": "2"}},
  "spec": {"nodeLabels": {"gpu": "a100"}}
})");
  EXPECT_THAT(d.Errors(), ElementsAre("test.yaml#1: error: ResourceFlavor a: metadata.labels.x: " +
                                      Twice("x", "line 5, column 40", "line 5, column 50")));
  EXPECT_THAT(d.policies.flavors, IsEmpty());
}

TEST(DuplicateKeyTest, JsonEscapedSpellingOfTheSameKeyIsADuplicate) {
  Decoded d = Decode(R"({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}, "\u006bind": "x\"y"})");
  EXPECT_THAT(d.Errors(), ElementsAre(HasSubstr(
                              "kind: " + Twice("kind", "line 1, column 22", "line 1, column 70"))));
}

TEST(DuplicateKeyTest, JsonArrayItemsAreDocuments) {
  Decoded d = Decode(R"([
 {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a"}},
 {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
  "metadata": {"name": "b"},
  "spec": {"nodeTaints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule", "key": "j"}]}}
])");
  EXPECT_THAT(d.Errors(), ElementsAre("test.yaml#2: error: ResourceFlavor b: spec.nodeTaints[1].key: " +
                                      Twice("key", "line 5, column 66", "line 5, column 102")));
  EXPECT_THAT(d.policies.flavors, SizeIs(1));
}

TEST(DuplicateKeyTest, JsonListItemsCarryTheirPath) {
  Decoded d = Decode(R"({"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}},
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b", "name": "c"}}]})");
  EXPECT_THAT(d.Errors(), ElementsAre("test.yaml#1: error: List: items[1].metadata.name: " +
                                      Twice("name", "line 3, column 58", "line 3, column 71")));
}

TEST(DuplicateKeyTest, EqualKeysInDifferentMapsAreFine) {
  const std::string yaml = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: nvidia-gpu, labels: {name: x}}
spec:
  nodeLabels: {name: y}
  nodeTaints:
  - {key: a, value: b, effect: NoSchedule}
  - {key: c, value: d, effect: NoSchedule}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-gpu}
spec:
  namespaceSelector: {matchLabels: {name: a}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: nvidia-gpu
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: nvidia.com/gpu, nominalQuota: 4}
)";
  Decoded from_yaml = Decode(yaml);
  EXPECT_THAT(from_yaml.Errors(), IsEmpty()) << from_yaml.All();
  EXPECT_THAT(from_yaml.policies.cluster_queues, SizeIs(1));
  // The same objects as one JSON text (what the journal and the API write).
  Decoded from_json = Decode(EncodeManifests(from_yaml.policies));
  EXPECT_THAT(from_json.Errors(), IsEmpty()) << from_json.All();
  EXPECT_THAT(from_json.policies.cluster_queues, SizeIs(1));
}

}  // namespace
}  // namespace gangkeeper::model
