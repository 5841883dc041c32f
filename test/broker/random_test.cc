// gangkeeper: a randomized invariant test for the Scheduler. A fixed-seed
// stream of events (add, update, finish, remove, stop evicted gangs,
// release success / failure, quota lowered or raised, schedule) runs over a
// policy set with a flat cohort, a hierarchical cohort with quota of its
// own, six ClusterQueues of mixed queueing strategies and preemption
// policies, and three flavors, one of them for a MIG resource. After every
// Schedule() the Scheduler's own CheckInvariants() must pass, and the usage
// is re-counted from the outside.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gangkeeper/broker/scheduler.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::broker {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;

constexpr char kGpu[] = "nvidia.com/gpu";
constexpr char kMig[] = "nvidia.com/mig-1g.10gb";
constexpr char kNs[] = "team";

// The release build runs 150,000 events (plus 75,000 with fair sharing) in
// about 4 s. The sanitizer build (Debug, ASan + UBSan) is ~20x slower, so
// it runs fewer to stay within ~20 s.
#if defined(__SANITIZE_ADDRESS__)
#define GK_RANDOM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GK_RANDOM_TEST_SANITIZED 1
#endif
#endif
#ifdef GK_RANDOM_TEST_SANITIZED
constexpr int64_t kEvents = 25'000;
constexpr int64_t kFairEvents = 6'000;
#else
constexpr int64_t kEvents = 150'000;
constexpr int64_t kFairEvents = 75'000;
#endif
#ifndef GK_RANDOM_TEST_SANITIZED
static_assert(kEvents >= 100'000, "the release build runs at least 100,000 events");
#endif
constexpr size_t kMaxTracked = 48;

// The policies with every nominal quota multiplied by `m` (1..3).
std::string PolicyYaml(int m) {
  auto n = [m](int base) { return absl::StrCat(base * m); };
  auto gpu_flavors = [&](const std::string& a100, const std::string& h100, const std::string& mig) {
    return absl::StrCat("  resourceGroups:\n",                                       //
                        "  - coveredResources: [nvidia.com/gpu]\n    flavors:\n",    //
                        "    - {name: a100, resources: [{name: nvidia.com/gpu, ", a100, "}]}\n",
                        "    - {name: h100, resources: [{name: nvidia.com/gpu, ", h100, "}]}\n",
                        "  - coveredResources: [nvidia.com/mig-1g.10gb]\n    flavors:\n",
                        "    - {name: a100-mig, resources: [{name: nvidia.com/mig-1g.10gb, ", mig, "}]}\n");
  };
  auto cq = [&](int i, const std::string& spec) {
    return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq-", i,
                        "}\nspec:\n  namespaceSelector: {}\n", spec, "---\n",
                        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq-", i,
                        ", namespace: team}\nspec: {clusterQueue: cq-", i, "}\n---\n");
  };
  std::string y;
  for (const char* f : {"a100", "h100", "a100-mig"}) {
    absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: ", f, "}\n---\n");
  }
  // The hierarchical tree: org (own quota) -> team-x, team-y.
  absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: org}\nspec:\n",
                  gpu_flavors(absl::StrCat("nominalQuota: ", n(2)), absl::StrCat("nominalQuota: ", n(2)),
                              absl::StrCat("nominalQuota: ", n(3))),
                  "---\n");
  absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: team-x}\n",
                  "spec: {parentName: org}\n---\n");
  absl::StrAppend(&y, "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: team-y}\n",
                  "spec: {parentName: org}\n---\n");
  // The flat cohort "pool" (implicit).
  absl::StrAppend(
      &y, cq(1, absl::StrCat("  cohort: pool\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: "
                             "Any}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(4)),
                                         absl::StrCat("nominalQuota: ", n(2), ", borrowingLimit: 2"),
                                         absl::StrCat("nominalQuota: ", n(7))))));
  absl::StrAppend(
      &y, cq(2, absl::StrCat("  cohort: pool\n  queueingStrategy: StrictFIFO\n"
                             "  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, reclaimWithinCohort: "
                             "LowerPriority, borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 50}}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(2), ", lendingLimit: ", n(1)),
                                         absl::StrCat("nominalQuota: ", n(4)),
                                         absl::StrCat("nominalQuota: ", n(2))))));
  absl::StrAppend(
      &y, cq(3, absl::StrCat("  cohort: pool\n  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(2), ", borrowingLimit: 2"),
                                         absl::StrCat("nominalQuota: ", n(2)), "nominalQuota: 0"))));
  absl::StrAppend(
      &y, cq(4, absl::StrCat("  cohort: team-x\n  preemption: {withinClusterQueue: LowerPriority, "
                             "reclaimWithinCohort: LowerPriority}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(4)), "nominalQuota: 0",
                                         absl::StrCat("nominalQuota: ", n(7), ", lendingLimit: ", n(3))))));
  absl::StrAppend(
      &y, cq(5, absl::StrCat("  cohort: team-x\n  queueingStrategy: StrictFIFO\n"
                             "  preemption: {reclaimWithinCohort: Any}\n"
                             "  flavorFungibility: {whenCanPreempt: MayStopSearch}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(2)),
                                         absl::StrCat("nominalQuota: ", n(2), ", lendingLimit: ", n(1)),
                                         "nominalQuota: 0"))));
  absl::StrAppend(
      &y, cq(6, absl::StrCat("  cohort: team-y\n  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n",
                             gpu_flavors(absl::StrCat("nominalQuota: ", n(2), ", borrowingLimit: 4"),
                                         absl::StrCat("nominalQuota: ", n(2)),
                                         absl::StrCat("nominalQuota: ", n(2))))));
  return y;
}

// Decoded once per multiplier.
std::shared_ptr<const model::PolicySet> Policies(int m) {
  static std::map<int, std::shared_ptr<const model::PolicySet>>* cache =
      new std::map<int, std::shared_ptr<const model::PolicySet>>();
  auto it = cache->find(m);
  if (it != cache->end()) return it->second;
  auto set = std::make_shared<model::PolicySet>();
  model::Diagnostics d;
  model::DecodeManifests(PolicyYaml(m), "random.yaml", set.get(), &d);
  EXPECT_FALSE(d.HasErrors()) << d.ErrorSummary();
  (*cache)[m] = set;
  return set;
}

bool HoldsQuota(Phase p) { return p == Phase::kReserved || p == Phase::kRunning || p == Phase::kEvicting; }

// The outside view: usage re-counted from the admissions, admissions only
// while holding quota, per-pod-set usage adding up to the admission's.
void CheckFromOutside(const Scheduler& s) {
  std::map<model::ClusterQueueName, ResourceAmounts> held;
  std::map<model::ClusterQueueName, int64_t> holders;
  for (const WorkloadInfo* info : s.Workloads()) {
    const std::string name = info->key.name;
    if (!HoldsQuota(info->phase)) {
      ASSERT_FALSE(info->admission.has_value()) << name << " is " << PhaseName(info->phase) << " with an admission";
      continue;
    }
    ASSERT_TRUE(info->admission.has_value()) << name << " is " << PhaseName(info->phase) << " without admission";
    const Assignment& a = *info->admission;
    ResourceAmounts from_pod_sets;
    for (const PodSetAssignment& ps : a.pod_sets) {
      for (const auto& [res, q] : ps.usage) {
        auto f = ps.flavors.find(res);
        ASSERT_NE(f, ps.flavors.end()) << name << ": " << res << " has usage but no flavor";
        from_pod_sets[FlavorResource{f->second, res}] = from_pod_sets[FlavorResource{f->second, res}].SaturatingAdd(q);
      }
    }
    ResourceAmounts nonzero;
    for (const auto& [fr, q] : a.usage) {
      if (!q.IsZero()) nonzero[fr] = q;
    }
    ResourceAmounts nonzero_ps;
    for (const auto& [fr, q] : from_pod_sets) {
      if (!q.IsZero()) nonzero_ps[fr] = q;
    }
    ASSERT_EQ(nonzero, nonzero_ps) << name << ": pod set usage does not add up to the admission's";
    ResourceAmounts& sum = held[a.cluster_queue];
    for (const auto& [fr, q] : a.usage) sum[fr] = sum[fr].SaturatingAdd(q);
    ++holders[a.cluster_queue];
  }
  for (const ClusterQueueStatus& cq : s.ClusterQueues()) {
    ResourceAmounts& sum = held[cq.name];
    for (const auto& [fr, st] : cq.resources) {
      auto it = sum.find(fr);
      ASSERT_EQ(st.usage, it == sum.end() ? Quantity() : it->second) << cq.name << " " << fr.ToString();
    }
    for (const auto& [fr, q] : sum) {
      if (q.IsZero()) continue;
      ASSERT_TRUE(cq.resources.count(fr)) << cq.name << " holds " << q << " of " << fr.ToString()
                                          << " but its status does not list it";
    }
    ASSERT_EQ(cq.admitted, holders[cq.name]) << cq.name;
    held.erase(cq.name);
  }
  for (const auto& [cq, sum] : held) {
    for (const auto& [fr, q] : sum) ASSERT_TRUE(q.IsZero()) << cq << " holds quota but has no status";
  }
}

struct Counters {
  int64_t adds = 0, schedules = 0, admitted = 0, preempted = 0, finished = 0, removed = 0, stopped = 0,
          release_ok = 0, release_failed = 0, policy_changes = 0, updates = 0, readiness = 0, ready_timeouts = 0;
};

class RandomRun {
 public:
  RandomRun(uint64_t seed, SchedulerOptions options)
      : rng_(seed), pods_ready_(options.wait_for_pods_ready.enabled) {
    absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(Policies(multiplier_), options);
    EXPECT_THAT(s, IsOk());
    if (s.ok()) s_ = std::move(s).value();
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  workload::Workload NewWorkload() {
    workload::Workload w;
    w.namespace_name = kNs;
    w.name = absl::StrCat("w", next_++);
    w.uid = absl::StrCat(w.name, "-uid");
    w.queue_name = Chance(0.01) ? "lq-missing" : absl::StrCat("lq-", Uniform(1, 6));
    static constexpr int32_t kPriorities[] = {0, 0, 10, 10, 100, 1000};
    w.priority = kPriorities[Uniform(0, 5)];
    if (Chance(0.1)) w.preemption_policy = model::PreemptionPolicy::kNever;
    const int sets = static_cast<int>(Uniform(1, 2));
    for (int i = 0; i < sets; ++i) {
      workload::PodSet ps;
      ps.name = absl::StrCat("ps", i);
      ps.count = Uniform(1, 3);
      if (Chance(0.2)) {
        ps.requests[kMig] = Quantity::FromUnits(Uniform(1, 2));
      } else {
        ps.requests[kGpu] = Quantity::FromUnits(Uniform(1, 4));
        if (Chance(0.1)) ps.requests[kMig] = Quantity::FromUnits(1);
      }
      ps.limits = ps.requests;
      w.pod_sets.push_back(ps);
    }
    return w;
  }

  // Every tracked workload in a given phase (sorted by key, so the choice
  // does not depend on hash order).
  std::vector<const WorkloadInfo*> InPhase(std::initializer_list<Phase> phases) {
    std::vector<const WorkloadInfo*> out;
    for (const WorkloadInfo* info : s_->Workloads()) {
      if (std::find(phases.begin(), phases.end(), info->phase) != phases.end()) out.push_back(info);
    }
    std::sort(out.begin(), out.end(), [](const WorkloadInfo* a, const WorkloadInfo* b) { return a->key < b->key; });
    return out;
  }
  const WorkloadInfo* Pick(const std::vector<const WorkloadInfo*>& v) {
    return v.empty() ? nullptr : v[static_cast<size_t>(Uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

  void AddEvent() {
    if (s_->size() >= kMaxTracked) return;
    ++counters_.adds;
    // A pod of a pod group: continue an incomplete group or start one.
    if (Chance(0.15)) {
      if (group_.added == group_.total) {
        group_ = Group{absl::StrCat("g", next_++), Uniform(2, 4), 0, absl::StrCat("lq-", Uniform(1, 6)),
                       Uniform(1, 2)};
      }
      workload::Workload pod;
      pod.kind = workload::Kind::kPod;
      pod.namespace_name = kNs;
      pod.name = absl::StrCat(group_.name, "-pod-", group_.added);
      pod.uid = absl::StrCat(pod.name, "-uid");
      pod.queue_name = group_.queue;
      pod.pod_group_name = group_.name;
      pod.pod_group_total_count = group_.total;
      workload::PodSet ps;
      ps.name = "main";
      ps.count = 1;
      ps.requests[kGpu] = Quantity::FromUnits(group_.gpus);
      ps.limits = ps.requests;
      pod.pod_sets.push_back(ps);
      ++group_.added;
      ASSERT_THAT(s_->Add(pod, Tick()), IsOk()) << pod.name;
      return;
    }
    workload::Workload w = NewWorkload();
    ASSERT_THAT(s_->Add(w, Tick()), IsOk()) << w.name;
  }

  // waitForPodsReady: an admitted gang's objects report how many pods are
  // ready (any number up to all of them, and drops). Only drawn when the
  // run enables it, so the other runs' streams are as they were.
  void ReadinessEvent() {
    const WorkloadInfo* w = Pick(InPhase({Phase::kRunning, Phase::kReserved}));
    if (w == nullptr || !w->admission.has_value()) return;
    int64_t admitted = 0;
    for (const PodSetAssignment& ps : w->admission->pod_sets) admitted += ps.count;
    ++counters_.readiness;
    const WorkloadKey key = w->key;
    const std::string uid = key.pod_group ? "" : w->workload->uid;
    const int64_t ready = Chance(0.5) ? admitted : Uniform(0, admitted);
    ASSERT_THAT(s_->PodsReady(key, uid, ready, Tick()), IsOk());
  }

  void Step() {
    if (pods_ready_ && Chance(0.08)) {
      ReadinessEvent();
      return;
    }
    const int64_t roll = Uniform(0, 999);
    if (roll < 280) {
      AddEvent();
    } else if (roll < 380) {
      if (const WorkloadInfo* w = Pick(InPhase({Phase::kRunning, Phase::kReserved, Phase::kPending}))) {
        ++counters_.finished;
        const WorkloadKey key = w->key;
        ASSERT_THAT(s_->Finish(key, "", Tick()), IsOk());
      }
    } else if (roll < 420) {
      if (const WorkloadInfo* w = Pick(InPhase({Phase::kPending, Phase::kRunning, Phase::kEvicting}))) {
        ++counters_.removed;
        const WorkloadKey key = w->key;
        ASSERT_THAT(s_->Remove(key, "", Tick()), IsOk());
      }
    } else if (roll < 520) {
      if (const WorkloadInfo* w = Pick(InPhase({Phase::kEvicting}))) {
        ++counters_.stopped;
        const WorkloadKey key = w->key;
        const std::string uid = w->workload->uid;
        ASSERT_THAT(s_->Stopped(key, uid, Tick()), IsOk());
      }
    } else if (roll < 640) {
      if (const WorkloadInfo* w = Pick(InPhase({Phase::kReserved}))) {
        const WorkloadKey key = w->key;
        const std::string uid = w->workload->uid;
        if (Chance(0.15)) {
          ++counters_.release_failed;
          ASSERT_THAT(s_->ReleaseFailed(key, uid, "injected", Tick()), IsOk());
        } else {
          ++counters_.release_ok;
          ASSERT_THAT(s_->ReleaseSucceeded(key, uid, Tick()), IsOk());
        }
      }
    } else if (roll < 660) {
      // Stale answers and events for unknown workloads are harmless.
      const WorkloadInfo* w = Pick(InPhase({Phase::kPending, Phase::kRunning}));
      if (w != nullptr) {
        const WorkloadKey key = w->key;
        ASSERT_THAT(s_->ReleaseSucceeded(key, "stale-uid", Tick()), IsOk());
        ASSERT_THAT(s_->Stopped(key, w->workload->uid, Tick()), IsOk());
      }
      ASSERT_THAT(s_->Finish(WorkloadKey{kNs, "never-added"}, "", Tick()), IsOk());
    } else if (roll < 680) {
      if (const WorkloadInfo* w = Pick(InPhase({Phase::kPending}))) {
        if (w->workload->pod_group_name.empty()) {
          workload::Workload changed = *w->workload;
          changed.priority = changed.priority == 0 ? 10 : 0;
          for (workload::PodSet& ps : changed.pod_sets) ps.count = Uniform(1, 3);
          ++counters_.updates;
          ASSERT_THAT(s_->Update(changed, Tick()), IsOk());
        }
      }
    } else if (roll < 681) {
      // Quota lowered or raised.
      int m = static_cast<int>(Uniform(1, 3));
      if (m == multiplier_) m = m == 1 ? 3 : 1;
      multiplier_ = m;
      ++counters_.policy_changes;
      ASSERT_THAT(s_->SetPolicies(Policies(multiplier_), Tick()), IsOk());
      ASSERT_THAT(s_->CheckInvariants(), IsOk()) << "after quota x" << multiplier_;
    } else {
      ++counters_.schedules;
      ScheduleStats stats = s_->Schedule(Tick());
      if (pods_ready_) {
        for (const StateChange& c : s_->TakeChanges()) {
          counters_.ready_timeouts += c.type == StateChange::Type::kEvicted && c.reason == "PodsReadyTimeout";
        }
      }
      counters_.admitted += stats.admitted;
      counters_.preempted += stats.preempted;
      ASSERT_THAT(s_->CheckInvariants(), IsOk()) << "after schedule " << counters_.schedules;
      ASSERT_NO_FATAL_FAILURE(CheckFromOutside(*s_));
    }
    if ((++events_ & 255) == 0) s_->TakeChanges();
  }

  absl::Time Tick() {
    now_ += absl::Seconds(1);
    return now_;
  }
  Scheduler* scheduler() { return s_.get(); }
  const Counters& counters() const { return counters_; }

 private:
  struct Group {
    std::string name;
    int64_t total = 0;
    int64_t added = 0;
    std::string queue;
    int64_t gpus = 1;
  };
  std::mt19937_64 rng_;
  bool pods_ready_ = false;
  std::unique_ptr<Scheduler> s_;
  int multiplier_ = 2;
  int64_t next_ = 0;
  int64_t events_ = 0;
  Group group_;
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  Counters counters_;
};

void RunEvents(uint64_t seed, SchedulerOptions options, int64_t events) {
  RandomRun run(seed, options);
  ASSERT_NE(run.scheduler(), nullptr);
  for (int64_t i = 0; i < events; ++i) {
    ASSERT_NO_FATAL_FAILURE(run.Step()) << "event " << i;
  }
  // Drain: everything stops, finishes, and the usage goes back to zero.
  for (const WorkloadInfo* w : run.scheduler()->Workloads()) {
    if (w->phase == Phase::kEvicting) {
      ASSERT_THAT(run.scheduler()->Stopped(w->key, w->workload->uid, run.Tick()), IsOk());
    }
  }
  std::vector<WorkloadKey> keys;
  for (const WorkloadInfo* w : run.scheduler()->Workloads()) keys.push_back(w->key);
  for (const WorkloadKey& k : keys) ASSERT_THAT(run.scheduler()->Finish(k, "", run.Tick()), IsOk());
  run.scheduler()->Schedule(run.Tick());
  ASSERT_THAT(run.scheduler()->CheckInvariants(), IsOk());
  for (const ClusterQueueStatus& cq : run.scheduler()->ClusterQueues()) {
    for (const auto& [fr, st] : cq.resources) EXPECT_TRUE(st.usage.IsZero()) << cq.name << " " << fr.ToString();
  }
  const Counters& c = run.counters();
  // The stream must have exercised the interesting paths. (blockAdmission
  // admits one gang at a time, until it is ready or evicted: fewer
  // admissions, hardly any preemption.)
  const bool serial = options.wait_for_pods_ready.enabled && options.wait_for_pods_ready.block_admission;
  EXPECT_GT(c.admitted, serial ? events / 100 : events / 20);
  if (!serial) {
    EXPECT_GT(c.preempted, events / 100);
    EXPECT_GT(c.stopped, events / 100);
  }
  EXPECT_GT(c.release_failed, events / 500);
  EXPECT_GT(c.policy_changes, events / 3000);
  std::cout << "events " << events << ": adds " << c.adds << ", schedules " << c.schedules << ", admitted "
            << c.admitted << ", preempted " << c.preempted << ", finished " << c.finished << ", removed "
            << c.removed << ", stopped " << c.stopped << ", released " << c.release_ok << ", release failures "
            << c.release_failed << ", updates " << c.updates << ", policy changes " << c.policy_changes
            << ", readiness reports " << c.readiness << ", PodsReady timeouts " << c.ready_timeouts << "\n";
  if (run.scheduler()->wait_for_pods_ready().enabled) {
    EXPECT_GT(c.readiness, events / 100);
    EXPECT_GT(c.ready_timeouts, events / 1000);
  }
}

TEST(SchedulerRandomTest, InvariantsHoldOverALongEventStream) {
  RunEvents(0x9a49'6b65'6570'6572ULL, SchedulerOptions{}, kEvents);
}

// waitForPodsReady in the mix: timeouts evict, backoffs hold workloads
// out of the queues, deactivations park them, drops start recoveries.
TEST(SchedulerRandomTest, InvariantsHoldWithWaitForPodsReady) {
  SchedulerOptions o;
  o.wait_for_pods_ready.enabled = true;
  o.wait_for_pods_ready.timeout = absl::Seconds(40);
  o.wait_for_pods_ready.recovery_timeout = absl::Seconds(25);
  o.wait_for_pods_ready.backoff_base_seconds = 5;
  o.wait_for_pods_ready.backoff_max_seconds = 60;
  o.wait_for_pods_ready.backoff_limit_count = 3;
  RunEvents(20261206, o, kFairEvents);
}

TEST(SchedulerRandomTest, InvariantsHoldWithWaitForPodsReadyBlockingAdmission) {
  SchedulerOptions o;
  o.wait_for_pods_ready.enabled = true;
  o.wait_for_pods_ready.timeout = absl::Seconds(30);
  o.wait_for_pods_ready.block_admission = true;
  o.wait_for_pods_ready.timestamp = model::RequeuingTimestamp::kCreation;
  o.wait_for_pods_ready.backoff_base_seconds = 3;
  o.wait_for_pods_ready.backoff_max_seconds = 20;
  RunEvents(20261207, o, kFairEvents);
}

TEST(SchedulerRandomTest, InvariantsHoldWithFairSharing) {
  RunEvents(20261202, SchedulerOptions{.fair_sharing = true}, kFairEvents);
}

}  // namespace
}  // namespace gangkeeper::broker
