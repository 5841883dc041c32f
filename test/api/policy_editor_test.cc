// The one-node PolicyEditor against a namespace change published between
// an API edit's read and its write (src/api/policy_editor.cc).
#include "gangkeeper/api/policy_editor.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/quantity/quantity.h"
#include "gtest/gtest.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::api {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::quantity::Quantity;

constexpr char kEditorPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {matchLabels: {team: a}}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
)";

TEST(LocalPolicyEditorTest, ANamespaceChangeBetweenReadAndWriteMakesTheEditComposeAgainAndNeitherIsLost) {
  base::SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
  std::shared_ptr<const model::PolicySet> files = testing::PoliciesFrom(kEditorPolicies);
  model::PolicyStore store(files);
  broker::BrokerOptions options;
  options.ack_timeout = absl::Seconds(10);
  auto b = broker::Broker::Create(files, options, nullptr, nullptr, &clock);
  ASSERT_THAT(b.status(), IsOk());
  std::unique_ptr<broker::Broker> broker = *std::move(b);
  broker->Start();
  std::unique_ptr<PolicyEditor> editor = LocalPolicyEditor(broker.get(), broker.get(), &store);

  auto edit = [&](const PolicyEditor::Current& base) {
    auto overlay = std::make_shared<model::PolicyOverlay>();
    overlay->generation = 1;
    overlay->put.cluster_queues["team-a"] = files->cluster_queues.at("team-a");
    overlay->put.cluster_queues["team-a"].resource_groups[0].flavors[0].resources[0].nominal =
        Quantity::FromUnits(12);
    absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> next = store.Compose(overlay, nullptr);
    EXPECT_THAT(next.status(), IsOk());
    return editor->Write(base, overlay, (*next)->policies, "alice", "PUT ClusterQueue team-a");
  };

  absl::StatusOr<PolicyEditor::Current> first = editor->Read();
  ASSERT_THAT(first.status(), IsOk());
  // The namespace watch publishes (and, in the node, submits) a set
  // without the API's change after the read.
  auto labels = std::make_shared<model::ClusterNamespaces>();
  (*labels)["team-a-ns"] = {{"team", "a"}};
  ASSERT_THAT(store.SetClusterNamespaces(labels, nullptr).status(), IsOk());
  // A set composed before that would drop the new namespace: refused.
  EXPECT_THAT(edit(*first), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(broker->snapshot()->overlay(), nullptr);

  absl::StatusOr<PolicyEditor::Current> second = editor->Read();
  ASSERT_THAT(second.status(), IsOk());
  ASSERT_THAT(edit(*second), IsOk());
  // The broker has both changes, and so has the store: the watch's next
  // set builds on the API's overlay.
  const model::PolicySet& in_effect = broker->snapshot()->policies();
  EXPECT_EQ(in_effect.cluster_queues.at("team-a").resource_groups[0].flavors[0].resources[0].nominal,
            Quantity::FromUnits(12));
  EXPECT_EQ(in_effect.namespaces.count("team-a-ns"), 1u);
  ASSERT_NE(store.current()->overlay, nullptr);
  EXPECT_EQ(store.current()->overlay->generation, 1u);
  broker->Stop();
}

}  // namespace
}  // namespace gangkeeper::api
