// Kueue's metric families (api/metrics.h, RegisterBrokerMetrics) over a real
// Broker: the LocalQueue and cohort families with Kueue's names and labels,
// replica_role on every Kueue family, kueue_build_info, and labels that never
// carry a workload's name or uid, whatever the workloads are called.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/api/metrics.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/broker/counters.h"
#include "gangkeeper/metrics/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/metrics/prom_text.h"
#include "test/testing/gangs.h"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::api {
namespace {

using ::gangkeeper::testing::IsOk;

// Two teams under cohort gpu-shared, itself under the root cohort org,
// which lends 4 GPUs of its own.
std::string TwoTeams() {
  namespace t = ::gangkeeper::testing;
  return t::Manifests({t::FlavorYaml("a100"), t::CohortYaml("org", "", 4), t::CohortYaml("gpu-shared", "org"),
                       t::ClusterQueueYaml("team-a", "gpu-shared", 8), t::ClusterQueueYaml("team-b", "gpu-shared", 8),
                       t::LocalQueueYaml("a", "q", "team-a"), t::LocalQueueYaml("b", "q", "team-b")});
}

class KueueMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker::BrokerOptions o;
    o.observers.push_back(&counters_);
    auto b = broker::Broker::Create(testing::PoliciesFrom(TwoTeams()), o, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    ASSERT_THAT(RegisterBrokerMetrics(registry_, broker_.get(), &counters_, [this] { return role_; }), IsOk());
    ASSERT_THAT(RegisterBuildInfo(registry_, BuildInfo{"1.2.3", "abcdef", "2026-12-05T00:00:00Z", "GNU 12", "linux/x86_64"}),
                IsOk());
  }
  void TearDown() override { broker_->Stop(); }

  static workload::Workload Gang(const std::string& ns, const std::string& name, int64_t pods, int64_t gpus) {
    workload::Workload w = testing::GpuGang(name, pods, gpus);
    w.namespace_name = ns;
    w.priority_class = "training";
    return w;
  }
  void Settle() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  }
  // The value of one sample, found by its exact label set.
  double Value(const std::string& name, const std::map<std::string, std::string>& labels) {
    const std::string text = registry_.ExposePrometheus();
    absl::StatusOr<std::vector<testing::PromFamily>> fams = testing::ParsePromText(text);
    EXPECT_THAT(fams, IsOk()) << text;
    if (!fams.ok()) return -1;
    absl::StatusOr<double> v = testing::PromValue(*fams, name, labels);
    EXPECT_THAT(v, IsOk()) << text;
    return v.ok() ? *v : -1;
  }

  base::SimulatedClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  broker::WorkloadCounters counters_;
  std::unique_ptr<broker::Broker> broker_;
  metrics::Registry registry_;
  std::string role_ = "leader";
};

TEST_F(KueueMetricsTest, LocalQueuesShowTheirPendingAdmittedUsageAndCounts) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a", "one", 2, 4))), IsOk());   // 8 of team-a's 8
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a", "two", 1, 8))), IsOk());   // borrows team-b's 8
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a", "three", 1, 8))), IsOk()); // waits
  Settle();
  const std::map<std::string, std::string> lq_a = {{"name", "q"}, {"namespace", "a"}, {"replica_role", "leader"}};
  auto with = [](std::map<std::string, std::string> m, const std::string& k, const std::string& v) {
    m[k] = v;
    return m;
  };
  EXPECT_EQ(Value("kueue_local_queue_admitted_active_workloads", lq_a), 2);
  EXPECT_EQ(Value("kueue_local_queue_reserving_active_workloads", lq_a), 2);
  EXPECT_EQ(Value("kueue_local_queue_pending_workloads", with(lq_a, "status", "active")) +
                Value("kueue_local_queue_pending_workloads", with(lq_a, "status", "inadmissible")),
            1);
  EXPECT_EQ(Value("kueue_local_queue_resource_usage",
                  with(with(lq_a, "flavor", "a100"), "resource", "nvidia.com/gpu")),
            16);
  EXPECT_EQ(Value("kueue_local_queue_status", with(lq_a, "active", "True")), 1);
  EXPECT_EQ(Value("kueue_local_queue_status", with(lq_a, "active", "False")), 0);
  EXPECT_EQ(Value("kueue_local_queue_admitted_workloads_total", with(lq_a, "priority_class", "training")), 2);
  // b's queue exists and is idle: it is shown, with zeros.
  EXPECT_EQ(Value("kueue_local_queue_admitted_active_workloads",
                  {{"name", "q"}, {"namespace", "b"}, {"replica_role", "leader"}}),
            0);
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"a", "one"}, "uid-one")), IsOk());
  Settle();
  EXPECT_EQ(Value("kueue_local_queue_finished_workloads_total", with(lq_a, "priority_class", "training")), 1);
  EXPECT_EQ(Value("kueue_finished_workloads_total",
                  {{"cluster_queue", "team-a"}, {"priority_class", "training"}, {"replica_role", "leader"}}),
            1);
}

TEST_F(KueueMetricsTest, CohortsShowTheTreeTheSubtreeQuotaAndReservations) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a", "one", 2, 4))), IsOk());
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("b", "two", 1, 2))), IsOk());
  Settle();
  const std::string r = "leader";
  EXPECT_EQ(Value("kueue_cohort_info", {{"cohort", "gpu-shared"}, {"parent_cohort", "org"}, {"root_cohort", "org"},
                                        {"replica_role", r}}),
            1);
  EXPECT_EQ(Value("kueue_cohort_info", {{"cohort", "org"}, {"parent_cohort", ""}, {"root_cohort", "org"},
                                        {"replica_role", r}}),
            1);
  EXPECT_EQ(Value("kueue_cluster_queue_info", {{"cluster_queue", "team-b"}, {"parent_cohort", "gpu-shared"},
                                               {"root_cohort", "org"}, {"replica_role", r}}),
            1);
  const std::map<std::string, std::string> gpus = {{"flavor", "a100"}, {"resource", "nvidia.com/gpu"}};
  auto in = [&](const std::string& cohort) {
    std::map<std::string, std::string> m = gpus;
    m["cohort"] = cohort;
    m["replica_role"] = r;
    return m;
  };
  // gpu-shared: the two queues' 8 + 8; org: those and its own 4.
  EXPECT_EQ(Value("kueue_cohort_subtree_quota", in("gpu-shared")), 16);
  EXPECT_EQ(Value("kueue_cohort_subtree_quota", in("org")), 20);
  EXPECT_EQ(Value("kueue_cohort_subtree_resource_reservations", in("gpu-shared")), 10);
  EXPECT_EQ(Value("kueue_cohort_subtree_resource_reservations", in("org")), 10);
  EXPECT_EQ(Value("kueue_cohort_subtree_admitted_active_workloads", {{"cohort", "org"}, {"replica_role", r}}), 2);
  EXPECT_EQ(Value("kueue_cohort_subtree_admitted_workloads_total",
                  {{"cohort", "org"}, {"priority_class", "training"}, {"replica_role", r}}),
            2);
}

TEST_F(KueueMetricsTest, EveryKueueFamilyCarriesTheReplicaRoleAsItIsNow) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(Gang("a", "one", 1, 1))), IsOk());
  Settle();
  for (const std::string role : {"leader", "follower", "standalone"}) {
    role_ = role;
    const std::string text = registry_.ExposePrometheus();
    absl::StatusOr<std::vector<testing::PromFamily>> fams = testing::ParsePromText(text);
    ASSERT_THAT(fams, IsOk()) << text;
    int kueue_samples = 0;
    for (const testing::PromFamily& f : *fams) {
      if (!absl::StartsWith(f.name, "kueue_") || f.name == "kueue_build_info") continue;
      for (const testing::PromSample& s : f.samples) {
        ++kueue_samples;
        auto it = s.labels.find("replica_role");
        ASSERT_TRUE(it != s.labels.end()) << s.name;
        EXPECT_EQ(it->second, role) << s.name;
      }
    }
    EXPECT_GT(kueue_samples, 30);
  }
  EXPECT_EQ(Value("kueue_build_info", {{"git_version", "1.2.3"},
                                       {"git_commit", "abcdef"},
                                       {"build_date", "2026-12-05T00:00:00Z"},
                                       {"go_version", ""},
                                       {"compiler", "GNU 12"},
                                       {"platform", "linux/x86_64"}}),
            1);
}

// Generative: whatever workloads are called and however many there are, no
// label value of any family is a workload's name or uid (bounded
// cardinality), and the series count does not grow with the workloads.
TEST_F(KueueMetricsTest, NoLabelEverCarriesAWorkloadNameOrUid) {
  std::mt19937 rng(20261205);
  std::vector<std::string> secrets;
  size_t series_after_first = 0;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 25; ++i) {
      const std::string name = absl::StrCat("wl-", rng() % 1'000'000, "-", round, "-", i);
      workload::Workload w = Gang(rng() % 2 == 0 ? "a" : "b", name, 1 + rng() % 3, 1 + rng() % 4);
      w.uid = absl::StrCat("uid-", rng());
      secrets.push_back(w.name);
      secrets.push_back(w.uid);
      ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(w)), IsOk());
      if (rng() % 3 == 0) {
        ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({w.namespace_name, w.name}, w.uid)), IsOk());
      }
    }
    Settle();
    const std::string text = registry_.ExposePrometheus();
    absl::StatusOr<std::vector<testing::PromFamily>> fams = testing::ParsePromText(text);
    ASSERT_THAT(fams, IsOk());
    size_t series = 0;
    for (const testing::PromFamily& f : *fams) {
      for (const testing::PromSample& s : f.samples) {
        ++series;
        for (const auto& [label, value] : s.labels) {
          for (const std::string& secret : secrets) {
            ASSERT_FALSE(absl::StrContains(value, secret)) << s.name << "{" << label << "=" << value << "}";
          }
        }
      }
    }
    if (round == 0) series_after_first = series;
    // Only new label values of bounded sets (statuses, reasons) may appear.
    EXPECT_LE(series, series_after_first + 20) << "round " << round;
  }
}

}  // namespace
}  // namespace gangkeeper::api
