// Kueue's Configuration document in the policy files: what is read, what is
// a warning, what is an error, and the requests the quota sees.
#include "gangkeeper/model/configuration.h"

#include "gangkeeper/model/encode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using quantity::Quantity;

// The MIG example of the README: one 1g.10gb slice is charged as an eighth
// of a GPU, and the slice itself is not charged (Replace).
constexpr char kMigConfiguration[] = R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: :8081
resources:
  transformations:
  - input: nvidia.com/mig-1g.10gb
    strategy: Replace
    outputs:
      nvidia.com/gpu: 125m
  - input: nvidia.com/mig-3g.40gb
    outputs:
      nvidia.com/gpu: 500m
fairSharing:
  enable: true
  preemptionStrategies: [LessThanInitialShare]
waitForPodsReady:
  enable: true
  timeout: 5m
manageJobsWithoutQueueName: true
)";

Quantity MilliQ(int64_t milli) { return Quantity::FromMilli(milli); }

TEST(ConfigurationTest, ReadsTransformationsAndFairSharing) {
  Decoded d = Decode(kMigConfiguration);
  EXPECT_THAT(d.Errors(), IsEmpty()) << d.All();
  const KueueConfiguration& c = d.policies.configuration;
  ASSERT_TRUE(c.present);
  ASSERT_EQ(c.transformations.size(), 2u);
  EXPECT_EQ(c.transformations[0].input, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(c.transformations[0].strategy, TransformationStrategy::kReplace);
  EXPECT_THAT(c.transformations[0].outputs, ElementsAre(Pair("nvidia.com/gpu", MilliQ(125))));
  EXPECT_EQ(c.transformations[1].strategy, TransformationStrategy::kRetain);  // Kueue's default
  EXPECT_TRUE(c.fair_sharing);
  EXPECT_THAT(c.preemption_strategies, ElementsAre(FairPreemptionStrategy::kLessThanInitialShare));
  // No "skipped" note: the document is read.
  EXPECT_THAT(d.Notes(), IsEmpty()) << d.All();
}

TEST(ConfigurationTest, WhatIsNotEnforcedIsAWarningNamingIt) {
  Decoded d = Decode(kMigConfiguration);
  const std::vector<std::string> warnings = d.Warnings();
  // waitForPodsReady is enforced: no warning.
  for (const std::string& w : warnings) EXPECT_THAT(w, ::testing::Not(HasSubstr("waitForPodsReady")));
  EXPECT_THAT(warnings,
              Contains(AllOf(HasSubstr("Configuration: manageJobsWithoutQueueName"), HasSubstr("not enforced"))));
  // The process's own settings (namespace, health) say nothing about admission.
  for (const std::string& w : warnings) {
    EXPECT_THAT(w, ::testing::Not(HasSubstr("health")));
    EXPECT_THAT(w, ::testing::Not(HasSubstr("namespace:")));
  }
  Decoded unknown = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  excludeResourcePrefixes: [example.com/]
someFutureOption: {}
)");
  EXPECT_THAT(unknown.Errors(), IsEmpty()) << unknown.All();
  EXPECT_THAT(unknown.Warnings(), Contains(HasSubstr("resources.excludeResourcePrefixes: not enforced")));
  EXPECT_THAT(unknown.Warnings(), Contains(HasSubstr("someFutureOption: not enforced")));
}

TEST(ConfigurationTest, ReadsWaitForPodsReadyWithKueuesDefaults) {
  // v1beta1: `enable`, timeout 5m, blockAdmission as enable, recoveryTimeout as timeout.
  const WaitForPodsReady& v1 = Decode(kMigConfiguration).policies.configuration.wait_for_pods_ready;
  EXPECT_TRUE(v1.enabled);
  EXPECT_EQ(v1.timeout, absl::Minutes(5));
  EXPECT_EQ(v1.recovery_timeout, absl::Minutes(5));
  EXPECT_TRUE(v1.block_admission);
  EXPECT_EQ(v1.timestamp, RequeuingTimestamp::kEviction);
  EXPECT_EQ(v1.backoff_base_seconds, 60);
  EXPECT_EQ(v1.backoff_max_seconds, 3600);
  EXPECT_FALSE(v1.backoff_limit_count.has_value());
  // v1beta2: on by presence, timeout 30m, blockAdmission false.
  Decoded v2 = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady: {}
)");
  EXPECT_THAT(v2.Errors(), IsEmpty()) << v2.All();
  const WaitForPodsReady& w2 = v2.policies.configuration.wait_for_pods_ready;
  EXPECT_TRUE(w2.enabled);
  EXPECT_EQ(w2.timeout, absl::Minutes(30));
  EXPECT_FALSE(w2.block_admission);
  Decoded full = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 10m
  recoveryTimeout: 0s
  blockAdmission: true
  requeuingStrategy:
    timestamp: Creation
    backoffLimitCount: 5
    backoffBaseSeconds: 10
    backoffMaxSeconds: 600
)");
  EXPECT_THAT(full.Errors(), IsEmpty()) << full.All();
  EXPECT_THAT(full.Warnings(), IsEmpty()) << full.All();
  const WaitForPodsReady& w = full.policies.configuration.wait_for_pods_ready;
  EXPECT_EQ(w.timeout, absl::Minutes(10));
  EXPECT_EQ(w.recovery_timeout, absl::ZeroDuration());
  EXPECT_TRUE(w.block_admission);
  EXPECT_EQ(w.timestamp, RequeuingTimestamp::kCreation);
  EXPECT_EQ(w.backoff_limit_count, 5);
  EXPECT_EQ(w.backoff_base_seconds, 10);
  EXPECT_EQ(w.backoff_max_seconds, 600);
  // The canonical encoding reads back the same.
  PolicySet p;
  p.configuration = full.policies.configuration;
  Decoded again = Decode(EncodeManifests(p));
  EXPECT_THAT(again.Errors(), IsEmpty()) << again.All();
  EXPECT_EQ(again.policies.configuration.wait_for_pods_ready, w);
  // Off in v1beta1 without enable.
  Decoded off = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady:
  timeout: 5m
)");
  EXPECT_FALSE(off.policies.configuration.wait_for_pods_ready.enabled);
}

TEST(ConfigurationTest, BadWaitForPodsReadyValuesAreErrorsNamingTheField) {
  Decoded bad = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: five minutes
  recoveryTimeout: -1m
  requeuingStrategy:
    timestamp: Admission
    backoffLimitCount: -1
)");
  const std::string all = bad.All();
  EXPECT_THAT(all, HasSubstr("waitForPodsReady.timeout"));
  EXPECT_THAT(all, HasSubstr("not a duration; write it as 30s, 5m or 1h30m"));
  EXPECT_THAT(all, HasSubstr("waitForPodsReady.recoveryTimeout"));
  EXPECT_THAT(all, HasSubstr("waitForPodsReady.requeuingStrategy.timestamp"));
  EXPECT_THAT(all, HasSubstr("waitForPodsReady.requeuingStrategy.backoffLimitCount"));
  EXPECT_FALSE(bad.policies.configuration.present);
  Decoded zero = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady: {timeout: 0s}
)");
  EXPECT_THAT(zero.All(), HasSubstr("must be more than 0s"));
}

TEST(ConfigurationTest, V1beta2TurnsFairSharingOnByPresence) {
  Decoded on = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing: {}
)");
  EXPECT_THAT(on.Errors(), IsEmpty()) << on.All();
  EXPECT_TRUE(on.policies.configuration.fair_sharing);
  EXPECT_THAT(on.policies.configuration.preemption_strategies,
              ElementsAre(FairPreemptionStrategy::kLessThanOrEqualToFinalShare,
                          FairPreemptionStrategy::kLessThanInitialShare));
  Decoded off = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: false
)");
  EXPECT_FALSE(off.policies.configuration.fair_sharing);
  Decoded none = Decode(std::string(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default
)"));
  EXPECT_FALSE(none.policies.configuration.present);
  EXPECT_FALSE(none.policies.configuration.fair_sharing);
}

TEST(ConfigurationTest, BadDocumentsAreErrors) {
  Decoded order = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: true
  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]
)");
  EXPECT_THAT(order.Errors(), ElementsAre(HasSubstr("fairSharing.preemptionStrategies: must be")));
  EXPECT_FALSE(order.policies.configuration.present);

  Decoded twice = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  transformations:
  - input: nvidia.com/mig-1g.10gb
    outputs: {nvidia.com/gpu: 125m}
  - input: nvidia.com/mig-1g.10gb
    strategy: Sideways
    outputs: {nvidia.com/gpu: 1}
)");
  EXPECT_THAT(twice.Errors(), Contains(HasSubstr("a second transformation for nvidia.com/mig-1g.10gb")));
  EXPECT_THAT(twice.Errors(), Contains(HasSubstr("strategy")));

  Decoded two_docs = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
)");
  EXPECT_THAT(two_docs.Errors(), ElementsAre(HasSubstr("a second Kueue Configuration (the first is in test.yaml#1)")));

  Decoded version = Decode(R"(
apiVersion: config.kueue.x-k8s.io/v1alpha9
kind: Configuration
)");
  EXPECT_THAT(version.Errors(), ElementsAre(HasSubstr("is not supported for Configuration")));
}

TEST(ConfigurationTest, EncodingKeepsWhatIsEnforced) {
  Decoded d = Decode(kMigConfiguration);
  ASSERT_THAT(d.Errors(), IsEmpty()) << d.All();
  Decoded again = Decode(EncodeManifests(d.policies));
  EXPECT_THAT(again.Errors(), IsEmpty()) << again.All();
  EXPECT_EQ(again.policies.configuration, d.policies.configuration);
  // Without a Configuration, nothing is added to the encoding.
  PolicySet empty;
  EXPECT_THAT(EncodeManifests(empty), ::testing::Not(HasSubstr("Configuration")));
}

TEST(ConfigurationTest, QuotaRequestsApplyRetainAndReplace) {
  Decoded d = Decode(kMigConfiguration);
  const KueueConfiguration& c = d.policies.configuration;
  // Replace: two 1g slices are a quarter of a GPU, and no slice is charged.
  EXPECT_THAT(QuotaRequests(c, {{"cpu", MilliQ(1000)}, {"nvidia.com/mig-1g.10gb", MilliQ(2000)}}),
              ElementsAre(Pair("cpu", MilliQ(1000)), Pair("nvidia.com/gpu", MilliQ(250))));
  // Retain: the slice is charged as well as its half GPU; generated
  // charges add to a GPU requested directly.
  EXPECT_THAT(QuotaRequests(c, {{"nvidia.com/gpu", MilliQ(1000)}, {"nvidia.com/mig-3g.40gb", MilliQ(1000)}}),
              ElementsAre(Pair("nvidia.com/gpu", MilliQ(1500)), Pair("nvidia.com/mig-3g.40gb", MilliQ(1000))));
  // Untouched when nothing matches.
  EXPECT_THAT(QuotaRequests(c, {{"cpu", MilliQ(500)}}), ElementsAre(Pair("cpu", MilliQ(500))));
  // A product finer than a milli-unit rounds up.
  KueueConfiguration tiny;
  tiny.transformations.push_back({"example.com/unit", TransformationStrategy::kReplace, "", {{"cpu", MilliQ(1)}}});
  EXPECT_THAT(QuotaRequests(tiny, {{"example.com/unit", MilliQ(1)}}), ElementsAre(Pair("cpu", MilliQ(1))));
  // multiplyBy scales the input; a negative total generated is zero.
  KueueConfiguration scaled;
  scaled.transformations.push_back(
      {"example.com/cores", TransformationStrategy::kReplace, "example.com/pods", {{"cpu", MilliQ(2000)}, {"memory", MilliQ(-1000)}}});
  EXPECT_THAT(QuotaRequests(scaled, {{"example.com/cores", MilliQ(3000)}, {"example.com/pods", MilliQ(2000)}, {"memory", MilliQ(5000)}}),
              ElementsAre(Pair("cpu", MilliQ(12000)), Pair("example.com/pods", MilliQ(2000)), Pair("memory", MilliQ(5000))));
}

// QuotaRequestsOf answers as QuotaRequests, and hands back the requests
// themselves (no copy) when nothing transforms them.
TEST(ConfigurationTest, QuotaRequestsOfCopiesOnlyWhatATransformationChanges) {
  Decoded d = Decode(kMigConfiguration);
  const KueueConfiguration& c = d.policies.configuration;
  const std::map<std::string, Quantity> plain = {{"cpu", MilliQ(500)}, {"nvidia.com/gpu", MilliQ(1000)}};
  const std::map<std::string, Quantity> sliced = {{"cpu", MilliQ(1000)}, {"nvidia.com/mig-1g.10gb", MilliQ(2000)}};
  std::map<std::string, Quantity> storage;
  const std::map<std::string, Quantity>& same = QuotaRequestsOf(c, plain, &storage);
  EXPECT_EQ(&same, &plain);
  EXPECT_TRUE(storage.empty());
  const std::map<std::string, Quantity>& charged = QuotaRequestsOf(c, sliced, &storage);
  EXPECT_EQ(&charged, &storage);
  EXPECT_EQ(charged, QuotaRequests(c, sliced));
  EXPECT_THAT(charged, ElementsAre(Pair("cpu", MilliQ(1000)), Pair("nvidia.com/gpu", MilliQ(250))));
  EXPECT_EQ(&QuotaRequestsOf(KueueConfiguration(), sliced, &storage), &sliced) << "no transformations at all";
}

}  // namespace
}  // namespace gangkeeper::model
