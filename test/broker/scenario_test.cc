// gangkeeper: table-driven scenarios for the gang-admission Scheduler
// (include/gangkeeper/broker/scheduler.h), with the expected behaviour taken
// from KUEUE-SEMANTICS.md §3 plus the deliberate differences scheduler.h
// describes (a cycle admits every workload of a queue that fits; preemptors
// wait until their victims are Stopped; releases confirm admissions).
//
// A scenario is a policy set (Kueue YAML) and a list of steps: events (add,
// finish, remove, stop, release, new policies, schedule) and expectations
// (phases, flavors, pending reasons, usage, queue order). Every Schedule()
// is followed by CheckInvariants() and an outside re-count of the usage.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
using ::gangkeeper::testing::StatusIs;
using Code = PendingReason::Code;

constexpr char kGpu[] = "nvidia.com/gpu";
constexpr char kMig1g[] = "nvidia.com/mig-1g.10gb";
constexpr char kMig3g[] = "nvidia.com/mig-3g.40gb";
constexpr char kNs[] = "team";

Quantity Q(int64_t units) { return Quantity::FromUnits(units); }

// ---------------------------------------------------------------------------
// Policy YAML helpers. Each returns one document; Docs() joins them.

std::string Trim(const std::string& body) {
  size_t start = body.find_first_not_of('\n');
  return start == std::string::npos ? "" : body.substr(start);
}

std::string Docs(const std::vector<std::string>& docs) { return absl::StrJoin(docs, "---\n"); }

std::string Rf(const std::string& name, const std::string& spec = "") {
  std::string out = absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: ", name,
                                 "}\n");
  if (!spec.empty()) absl::StrAppend(&out, "spec:\n", Trim(spec));
  return out;
}

// A ClusterQueue selecting every namespace (unless `body` sets a selector).
std::string Cq(const std::string& name, const std::string& body) {
  std::string out =
      absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: ", name, "}\nspec:\n");
  if (body.find("namespaceSelector") == std::string::npos) absl::StrAppend(&out, "  namespaceSelector: {}\n");
  absl::StrAppend(&out, Trim(body));
  return out;
}

std::string Lq(const std::string& name, const std::string& cq, const std::string& stop_policy = "",
               const std::string& ns = kNs) {
  return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: ", name,
                      ", namespace: ", ns, "}\nspec: {clusterQueue: ", cq,
                      stop_policy.empty() ? "" : absl::StrCat(", stopPolicy: ", stop_policy), "}\n");
}

std::string CohortDoc(const std::string& name, const std::string& body = "") {
  std::string out = absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: ", name, "}\n");
  absl::StrAppend(&out, body.empty() ? "spec: {}\n" : absl::StrCat("spec:\n", Trim(body)));
  return out;
}

std::string NsDoc(const std::string& name, const std::string& labels = "{}") {
  return absl::StrCat("apiVersion: v1\nkind: Namespace\nmetadata: {name: ", name, ", labels: ", labels, "}\n");
}

// A ClusterQueue with one resource group covering nvidia.com/gpu and one
// flavor per entry of `flavors` ("a100: 4", "a100: 4, borrowingLimit: 2").
// `extra` adds spec lines (cohort, strategy, preemption, ...).
std::string GpuCq(const std::string& name, const std::vector<std::string>& flavors, const std::string& extra = "") {
  std::string body = Trim(extra);
  absl::StrAppend(&body, "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n");
  for (const std::string& f : flavors) {
    std::vector<std::string> parts = absl::StrSplit(f, absl::MaxSplits(", ", 1));
    std::vector<std::string> nv = absl::StrSplit(parts[0], ": ");
    absl::StrAppend(&body, "    - {name: ", nv[0], ", resources: [{name: nvidia.com/gpu, nominalQuota: ", nv[1],
                    parts.size() > 1 ? absl::StrCat(", ", parts[1]) : "", "}]}\n");
  }
  return Cq(name, body);
}

const std::string kA100 = Rf("a100");
const std::string kH100 = Rf("h100");

// ---------------------------------------------------------------------------
// Workloads.

class Wl {
 public:
  explicit Wl(const std::string& name) {
    w_.kind = workload::Kind::kJob;
    w_.api_version = "batch/v1";
    w_.namespace_name = kNs;
    w_.name = name;
    w_.uid = name + "-uid";
    w_.queue_name = "lq-a";
  }
  Wl& Ns(const std::string& ns) {
    w_.namespace_name = ns;
    return *this;
  }
  Wl& Queue(const std::string& lq) {
    w_.queue_name = lq;
    return *this;
  }
  Wl& Prio(int32_t p) {
    w_.priority = p;
    return *this;
  }
  Wl& NeverPreempts() {
    w_.preemption_policy = model::PreemptionPolicy::kNever;
    return *this;
  }
  Wl& Uid(const std::string& uid) {
    w_.uid = uid;
    return *this;
  }
  // `count` pods, each requesting `requests` (whole units).
  Wl& PodSet(const std::string& name, int64_t count, const std::map<std::string, int64_t>& requests) {
    workload::PodSet ps;
    ps.name = name;
    ps.count = count;
    for (const auto& [r, v] : requests) {
      ps.requests[r] = Q(v);
      ps.limits[r] = Q(v);
    }
    w_.pod_sets.push_back(ps);
    return *this;
  }
  // Partial admission: the last pod set may shrink to `min` pods.
  Wl& Min(int64_t min) {
    w_.pod_sets.back().min_count = min;
    return *this;
  }
  // Per-pod requests in milli-units (fractions, MIG slices).
  Wl& PodSetMilli(const std::string& name, int64_t count, const std::map<std::string, int64_t>& milli) {
    workload::PodSet ps;
    ps.name = name;
    ps.count = count;
    for (const auto& [r, v] : milli) {
      ps.requests[r] = Quantity::FromMilli(v);
      ps.limits[r] = Quantity::FromMilli(v);
    }
    w_.pod_sets.push_back(ps);
    return *this;
  }
  // One pod set "main" of one pod with `n` GPUs.
  Wl& Gpus(int64_t n) { return PodSet("main", 1, {{kGpu, n}}); }
  Wl& Tolerate(const std::string& key, const std::string& op, const std::string& value = "",
               const std::string& effect = "") {
    model::Toleration t;
    t.key = key;
    t.op = op;
    t.value = value;
    t.effect = effect;
    w_.pod_sets.back().tolerations.push_back(t);
    return *this;
  }
  Wl& Select(const std::string& key, const std::string& value) {
    w_.pod_sets.back().node_selector[key] = value;
    return *this;
  }
  // A Pod of pod group `group` with `total` pods.
  Wl& PodOf(const std::string& group, int64_t total) {
    w_.kind = workload::Kind::kPod;
    w_.api_version = "v1";
    w_.pod_group_name = group;
    w_.pod_group_total_count = total;
    w_.labels[std::string(workload::kPodGroupNameLabel)] = group;
    w_.annotations[std::string(workload::kPodGroupTotalCountAnnotation)] = absl::StrCat(total);
    return *this;
  }
  const workload::Workload& Obj() const { return w_; }

 private:
  workload::Workload w_;
};

// ---------------------------------------------------------------------------
// The run: one Scheduler, a clock that moves one second per event.

// Re-counts from the outside what every ClusterQueue holds, and checks that
// nothing pending holds an admission.
void CheckUsageFromOutside(const Scheduler& s) {
  std::map<model::ClusterQueueName, ResourceAmounts> held;
  for (const WorkloadInfo* info : s.Workloads()) {
    const bool holds = info->phase == Phase::kReserved || info->phase == Phase::kRunning ||
                       info->phase == Phase::kEvicting;
    if (!holds) {
      EXPECT_FALSE(info->admission.has_value())
          << info->key.namespace_name << "/" << info->key.name << " is " << PhaseName(info->phase)
          << " but has an admission";
      continue;
    }
    if (!info->admission.has_value()) {
      ADD_FAILURE() << info->key.name << " holds quota without an admission";
      continue;
    }
    ResourceAmounts& sum = held[info->admission->cluster_queue];
    for (const auto& [fr, q] : info->admission->usage) sum[fr] = sum[fr].SaturatingAdd(q);
  }
  for (const ClusterQueueStatus& cq : s.ClusterQueues()) {
    const ResourceAmounts& sum = held[cq.name];
    for (const auto& [fr, st] : cq.resources) {
      auto it = sum.find(fr);
      EXPECT_EQ(st.usage, it == sum.end() ? Quantity() : it->second)
          << "usage of " << cq.name << " on " << fr.ToString();
    }
  }
}

class ScenarioRun {
 public:
  explicit ScenarioRun(std::unique_ptr<Scheduler> s) : s_(std::move(s)) {}

  Scheduler& s() { return *s_; }
  absl::Time Tick() {
    now_ += absl::Seconds(1);
    return now_;
  }
  // "name" or "ns/name": a Job, or the pod group of that name when one is
  // tracked (or was: the change log knows it).
  WorkloadKey Key(const std::string& ref) const {
    std::vector<std::string> parts = absl::StrSplit(ref, '/');
    WorkloadKey job = parts.size() == 2 ? WorkloadKey{parts[0], parts[1]} : WorkloadKey{kNs, ref};
    WorkloadKey group{job.namespace_name, job.name, workload::Kind::kPod, true};
    if (s_->Find(job) != nullptr) return job;
    if (s_->Find(group) != nullptr) return group;
    for (const StateChange& c : log_) {
      if (c.key == group) return group;
    }
    return job;
  }
  const WorkloadInfo* Get(const std::string& ref) {
    const WorkloadInfo* info = s_->Find(Key(ref));
    if (info == nullptr) ADD_FAILURE() << "workload " << ref << " is not tracked";
    return info;
  }
  void TakeChanges() {
    for (StateChange& c : s_->TakeChanges()) log_.push_back(std::move(c));
  }
  const std::vector<StateChange>& log() const { return log_; }

  void Invariants() {
    EXPECT_THAT(s_->CheckInvariants(), IsOk());
    CheckUsageFromOutside(*s_);
  }

  // Schedules; with `release`, confirms every admission like the actuator.
  void Schedule(bool release) {
    s_->Schedule(Tick());
    Invariants();
    const size_t from = log_.size();
    TakeChanges();
    if (!release) return;
    std::vector<StateChange> admitted;
    for (size_t i = from; i < log_.size(); ++i) {
      if (log_[i].type == StateChange::Type::kAdmitted) admitted.push_back(log_[i]);
    }
    for (const StateChange& c : admitted) {
      EXPECT_THAT(s_->ReleaseSucceeded(c.key, c.uid, Tick()), IsOk());
    }
    TakeChanges();
    Invariants();
  }

 private:
  std::unique_ptr<Scheduler> s_;
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  std::vector<StateChange> log_;
};

// ---------------------------------------------------------------------------
// Steps.

struct Step {
  std::string what;
  std::function<void(ScenarioRun&)> run;
};

Step Add(const Wl& w) {
  workload::Workload obj = w.Obj();
  return {absl::StrCat("add ", obj.name), [obj](ScenarioRun& r) {
            EXPECT_THAT(r.s().Add(obj, r.Tick()), IsOk());
            r.TakeChanges();
          }};
}
Step Update(const Wl& w) {
  workload::Workload obj = w.Obj();
  return {absl::StrCat("update ", obj.name), [obj](ScenarioRun& r) {
            EXPECT_THAT(r.s().Update(obj, r.Tick()), IsOk());
            r.TakeChanges();
          }};
}
Step UpdateFails(const Wl& w, absl::StatusCode code) {
  workload::Workload obj = w.Obj();
  return {absl::StrCat("update ", obj.name, " fails"),
          [obj, code](ScenarioRun& r) { EXPECT_THAT(r.s().Update(obj, r.Tick()), StatusIs(code)); }};
}
Step Finish(const std::string& ref) {
  return {absl::StrCat("finish ", ref), [ref](ScenarioRun& r) {
            EXPECT_THAT(r.s().Finish(r.Key(ref), "", r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
Step Remove(const std::string& ref) {
  return {absl::StrCat("remove ", ref), [ref](ScenarioRun& r) {
            EXPECT_THAT(r.s().Remove(r.Key(ref), "", r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
// The evicted gang `ref` has stopped.
Step Stop(const std::string& ref) {
  return {absl::StrCat("stop ", ref), [ref](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_THAT(r.s().Stopped(info->key, info->workload->uid, r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
// Every evicting gang has stopped (`must`: at least one is evicting).
Step StopEvicting(bool must = true) {
  return {"stop every evicting workload", [must](ScenarioRun& r) {
            std::vector<std::pair<WorkloadKey, std::string>> victims;
            for (const WorkloadInfo* info : r.s().Workloads()) {
              if (info->phase == Phase::kEvicting) victims.emplace_back(info->key, info->workload->uid);
            }
            if (must) {
              EXPECT_FALSE(victims.empty()) << "nothing is evicting";
            }
            for (const auto& [key, uid] : victims) EXPECT_THAT(r.s().Stopped(key, uid, r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
Step ReleaseOk(const std::string& ref) {
  return {absl::StrCat("release ", ref, " succeeds"), [ref](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_THAT(r.s().ReleaseSucceeded(info->key, info->workload->uid, r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
Step ReleaseFail(const std::string& ref) {
  return {absl::StrCat("release ", ref, " fails"), [ref](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_THAT(r.s().ReleaseFailed(info->key, info->workload->uid, "pods rejected", r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
// A stale answer: the right key with another uid.
Step ReleaseOkWithOtherUid(const std::string& ref) {
  return {absl::StrCat("stale release of ", ref), [ref](ScenarioRun& r) {
            EXPECT_THAT(r.s().ReleaseSucceeded(r.Key(ref), "someone-else", r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
Step Policies(const std::string& yaml) {
  return {"new policies", [yaml](ScenarioRun& r) {
            auto set = std::make_shared<model::PolicySet>();
            model::Diagnostics d;
            model::DecodeManifests(yaml, "scenario.yaml", set.get(), &d);
            ASSERT_FALSE(d.HasErrors()) << d.ErrorSummary();
            EXPECT_THAT(r.s().SetPolicies(set, r.Tick()), IsOk());
            r.TakeChanges();
            r.Invariants();
          }};
}
// Schedules and releases every admitted gang (the actuator confirms).
Step Schedule() {
  return {"schedule", [](ScenarioRun& r) { r.Schedule(/*release=*/true); }};
}
// Schedules and leaves the admitted gangs reserved.
Step ScheduleNoRelease() {
  return {"schedule (no release)", [](ScenarioRun& r) { r.Schedule(/*release=*/false); }};
}

// --- Expectations. ---

bool HoldsQuota(Phase p) { return p == Phase::kReserved || p == Phase::kRunning || p == Phase::kEvicting; }

Step PhasesAre(const std::vector<std::string>& refs, std::set<Phase> phases, const std::string& label) {
  return {absl::StrCat(label, ": ", absl::StrJoin(refs, ", ")), [refs, phases, label](ScenarioRun& r) {
            for (const std::string& ref : refs) {
              const WorkloadInfo* info = r.Get(ref);
              if (info == nullptr) continue;
              EXPECT_TRUE(phases.count(info->phase))
                  << ref << " is " << PhaseName(info->phase) << ", want " << label
                  << (info->phase == Phase::kPending ? absl::StrCat(" (pending: ",
                                                                    PendingReasonCodeName(info->reason.code), ": ",
                                                                    info->reason.message, ")")
                                                     : "");
              if (phases.count(Phase::kPending) && phases.size() == 1) {
                EXPECT_FALSE(info->admission.has_value()) << ref << " is pending with an admission";
              }
            }
          }};
}
// Holding quota and not being evicted.
Step Admitted(const std::vector<std::string>& refs) {
  return PhasesAre(refs, {Phase::kReserved, Phase::kRunning}, "admitted");
}
Step Reserved(const std::vector<std::string>& refs) { return PhasesAre(refs, {Phase::kReserved}, "reserved"); }
Step Running(const std::vector<std::string>& refs) { return PhasesAre(refs, {Phase::kRunning}, "running"); }
Step Pending(const std::vector<std::string>& refs) { return PhasesAre(refs, {Phase::kPending}, "pending"); }
Step Evicting(const std::vector<std::string>& refs) { return PhasesAre(refs, {Phase::kEvicting}, "evicting"); }
// Exactly these workloads are evicting.
Step OnlyEvicting(const std::vector<std::string>& refs) {
  return {absl::StrCat("evicting exactly: ", absl::StrJoin(refs, ", ")), [refs](ScenarioRun& r) {
            std::set<std::string> want(refs.begin(), refs.end());
            std::set<std::string> got;
            for (const WorkloadInfo* info : r.s().Workloads()) {
              if (info->phase == Phase::kEvicting) got.insert(info->key.name);
            }
            EXPECT_EQ(got, want);
          }};
}
Step Gone(const std::vector<std::string>& refs) {
  return {absl::StrCat("gone: ", absl::StrJoin(refs, ", ")), [refs](ScenarioRun& r) {
            for (const std::string& ref : refs) EXPECT_EQ(r.s().Find(r.Key(ref)), nullptr) << ref;
          }};
}
// Exactly these workloads hold quota in `cq` (evicting ones included).
Step Holding(const std::string& cq, const std::vector<std::string>& refs) {
  return {absl::StrCat(cq, " holds: ", absl::StrJoin(refs, ", ")), [cq, refs](ScenarioRun& r) {
            std::set<std::string> want(refs.begin(), refs.end());
            std::set<std::string> got;
            for (const WorkloadInfo* info : r.s().Workloads()) {
              if (HoldsQuota(info->phase) && info->admission.has_value() && info->admission->cluster_queue == cq) {
                got.insert(info->key.name);
              }
            }
            EXPECT_EQ(got, want);
          }};
}
Step AdmittedIn(const std::string& ref, const std::string& cq) {
  return {absl::StrCat(ref, " admitted in ", cq), [ref, cq](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            ASSERT_TRUE(info->admission.has_value()) << ref << " has no admission";
            EXPECT_EQ(info->admission->cluster_queue, cq);
          }};
}
// Every resource of each named pod set got the given flavor.
Step Flavors(const std::string& ref, const std::map<std::string, std::string>& by_pod_set) {
  return {absl::StrCat("flavors of ", ref), [ref, by_pod_set](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            ASSERT_TRUE(info->admission.has_value()) << ref << " has no admission";
            std::map<std::string, std::string> got;
            for (const PodSetAssignment& ps : info->admission->pod_sets) {
              std::set<std::string> flavors;
              for (const auto& [res, f] : ps.flavors) flavors.insert(f);
              got[ps.name] = absl::StrJoin(flavors, "+");
            }
            EXPECT_EQ(got, by_pod_set);
          }};
}
Step FlavorOf(const std::string& ref, const std::string& pod_set, const std::string& resource,
              const std::string& flavor) {
  return {absl::StrCat(ref, "/", pod_set, " ", resource, " on ", flavor), [=](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            ASSERT_TRUE(info->admission.has_value()) << ref << " has no admission";
            for (const PodSetAssignment& ps : info->admission->pod_sets) {
              if (ps.name != pod_set) continue;
              auto it = ps.flavors.find(resource);
              ASSERT_NE(it, ps.flavors.end()) << resource << " not assigned";
              EXPECT_EQ(it->second, flavor);
              return;
            }
            ADD_FAILURE() << "no pod set " << pod_set;
          }};
}
Step BorrowingLevel(const std::string& ref, bool borrowing) {
  return {absl::StrCat(ref, borrowing ? " borrows" : " does not borrow"), [ref, borrowing](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            ASSERT_TRUE(info->admission.has_value()) << ref << " has no admission";
            if (borrowing) {
              EXPECT_GT(info->admission->borrowing_level, 0);
            } else {
              EXPECT_EQ(info->admission->borrowing_level, 0);
            }
          }};
}
Step Reason(const std::string& ref, Code code) {
  return {absl::StrCat(ref, " pending with ", PendingReasonCodeName(code)), [ref, code](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_EQ(info->phase, Phase::kPending) << PhaseName(info->phase);
            EXPECT_EQ(PendingReasonCodeName(info->reason.code), std::string(PendingReasonCodeName(code)))
                << info->reason.message;
          }};
}
Step ReasonIn(const std::string& ref, std::vector<Code> codes) {
  return {absl::StrCat(ref, " pending with one of several reasons"), [ref, codes](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_EQ(info->phase, Phase::kPending) << PhaseName(info->phase);
            std::vector<std::string> names;
            bool found = false;
            for (Code c : codes) {
              names.push_back(PendingReasonCodeName(c));
              found = found || c == info->reason.code;
            }
            EXPECT_TRUE(found) << "reason " << PendingReasonCodeName(info->reason.code) << " ("
                               << info->reason.message << "), want one of " << absl::StrJoin(names, ", ");
          }};
}
// Waiting for quota others hold (see WantReason::any_quota_wait).
Step QuotaWait(const std::string& ref) {
  return ReasonIn(ref, {Code::kWaitingForQuota, Code::kPreemptionNoCandidates});
}

struct WantReason {
  Code code = Code::kQueued;
  std::string pod_set;
  std::string flavor;
  std::string resource;
  std::optional<int64_t> requested;
  std::optional<int64_t> available;
  std::optional<int64_t> max_capacity;
  std::optional<int64_t> nominal;
  std::optional<int64_t> used;
  std::optional<int64_t> used_by;
  std::optional<int64_t> borrowing_limit;
  // Also accept kPreemptionNoCandidates for kWaitingForQuota (and the other
  // way round). A request within the nominal quota runs the preemption
  // oracle (§3.5); when it finds no candidates Kueue requeues with
  // PreemptionNoCandidates but reports QuotaReserved reason WaitingForQuota
  // (§3.3 step 5). The preemption scenarios below expect kWaitingForQuota
  // (the reported reason); elsewhere either code is accepted.
  bool any_quota_wait = false;
};
Step ReasonDetail(const std::string& ref, WantReason want) {
  return {absl::StrCat(ref, " pending reason in detail"), [ref, want](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            const PendingReason& got = info->reason;
            SCOPED_TRACE(got.message);
            EXPECT_EQ(info->phase, Phase::kPending);
            if (want.any_quota_wait) {
              EXPECT_TRUE(got.code == Code::kWaitingForQuota || got.code == Code::kPreemptionNoCandidates)
                  << PendingReasonCodeName(got.code);
            } else {
              EXPECT_EQ(PendingReasonCodeName(got.code), std::string(PendingReasonCodeName(want.code)));
            }
            if (!want.pod_set.empty()) {
              EXPECT_EQ(got.pod_set, want.pod_set);
            }
            if (!want.flavor.empty()) {
              EXPECT_EQ(got.flavor, want.flavor);
            }
            if (!want.resource.empty()) {
              EXPECT_EQ(got.resource, want.resource);
            }
            if (want.requested) {
              EXPECT_EQ(got.requested, Q(*want.requested)) << "requested";
            }
            if (want.available) {
              EXPECT_EQ(got.available, Q(*want.available)) << "available";
            }
            if (want.max_capacity) {
              EXPECT_EQ(got.max_capacity, Q(*want.max_capacity)) << "max_capacity";
            }
            if (want.nominal) {
              EXPECT_EQ(got.nominal, Q(*want.nominal)) << "nominal";
            }
            if (want.used) {
              EXPECT_EQ(got.used, Q(*want.used)) << "used";
            }
            if (want.used_by) {
              EXPECT_EQ(got.used_by, *want.used_by) << "used_by";
            }
            if (want.borrowing_limit) {
              EXPECT_EQ(got.borrowing_limit, std::optional<Quantity>(Q(*want.borrowing_limit)));
            }
            EXPECT_FALSE(got.message.empty());
          }};
}
std::optional<FlavorResourceStatus> StatusOf(ScenarioRun& r, const std::string& cq, const std::string& flavor,
                                             const std::string& resource) {
  std::optional<ClusterQueueStatus> st = r.s().ClusterQueue(cq);
  if (!st.has_value()) {
    ADD_FAILURE() << "no status for ClusterQueue " << cq;
    return std::nullopt;
  }
  auto it = st->resources.find(FlavorResource{flavor, resource});
  if (it == st->resources.end()) return FlavorResourceStatus{};
  return it->second;
}
Step Usage(const std::string& cq, const std::string& flavor, const std::string& resource, int64_t want) {
  return {absl::StrCat("usage of ", cq, " ", flavor, "/", resource, " is ", want), [=](ScenarioRun& r) {
            std::optional<FlavorResourceStatus> st = StatusOf(r, cq, flavor, resource);
            if (st) {
              EXPECT_EQ(st->usage, Q(want));
            }
          }};
}
Step GpuUsage(const std::string& cq, const std::string& flavor, int64_t want) {
  return Usage(cq, flavor, kGpu, want);
}
Step Available(const std::string& cq, const std::string& flavor, int64_t want) {
  return {absl::StrCat("available in ", cq, " ", flavor, " is ", want), [=](ScenarioRun& r) {
            std::optional<FlavorResourceStatus> st = StatusOf(r, cq, flavor, kGpu);
            if (st) {
              EXPECT_EQ(st->available, Q(want));
            }
          }};
}
Step Order(const std::string& cq, const std::vector<std::string>& refs) {
  return {absl::StrCat("queue order of ", cq), [cq, refs](ScenarioRun& r) {
            std::vector<std::string> got;
            for (const WorkloadInfo* info : r.s().PendingInQueueOrder(cq)) got.push_back(info->key.name);
            EXPECT_EQ(got, refs);
          }};
}
Step EvictedBy(const std::string& victim, const std::string& preemptor) {
  return {absl::StrCat(victim, " evicted for ", preemptor), [victim, preemptor](ScenarioRun& r) {
            const StateChange* last = nullptr;
            for (const StateChange& c : r.log()) {
              if (c.type == StateChange::Type::kEvicted && c.key == r.Key(victim)) last = &c;
            }
            ASSERT_NE(last, nullptr) << "no kEvicted change for " << victim;
            EXPECT_EQ(last->preemptor, r.Key(preemptor)) << last->preemptor.name;
            EXPECT_TRUE(last->assignment.has_value());
          }};
}
Step Counts(const std::string& ref, int64_t admissions, int64_t evictions) {
  return {absl::StrCat(ref, " admitted ", admissions, "x, evicted ", evictions, "x"), [=](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            EXPECT_EQ(info->admissions, admissions);
            EXPECT_EQ(info->evictions, evictions);
          }};
}
Step Members(const std::string& ref, int64_t n) {
  return {absl::StrCat(ref, " has ", n, " pods"), [ref, n](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info) {
              EXPECT_EQ(info->pod_group_members, n);
            }
          }};
}

// The pod counts of `ref`'s admission, by pod set.
Step PodCounts(const std::string& ref, const std::map<std::string, int64_t>& want) {
  return {absl::StrCat("pod counts of ", ref), [ref, want](ScenarioRun& r) {
            const WorkloadInfo* info = r.Get(ref);
            if (info == nullptr) return;
            ASSERT_TRUE(info->admission.has_value()) << ref << " has no admission";
            std::map<std::string, int64_t> got;
            for (const PodSetAssignment& ps : info->admission->pod_sets) got[ps.name] = ps.count;
            EXPECT_EQ(got, want);
          }};
}
// The last admission of `ref` in the change log says `message`.
Step AdmittedSaying(const std::string& ref, const std::string& message) {
  return {absl::StrCat(ref, "'s admission says \"", message, "\""), [ref, message](ScenarioRun& r) {
            std::string got = "(no admission)";
            for (const StateChange& c : r.log()) {
              if (c.type == StateChange::Type::kAdmitted && c.key.name == ref) got = c.message;
            }
            EXPECT_EQ(got, message);
          }};
}
// Usage in milli-units.
Step UsageMilli(const std::string& cq, const std::string& flavor, const std::string& resource, int64_t milli) {
  return {absl::StrCat("usage of ", cq, " ", flavor, "/", resource, " is ", milli, "m"), [=](ScenarioRun& r) {
            std::optional<FlavorResourceStatus> st = StatusOf(r, cq, flavor, resource);
            if (st) {
              EXPECT_EQ(st->usage, Quantity::FromMilli(milli));
            }
          }};
}

// ---------------------------------------------------------------------------
// The scenarios.

struct Scenario {
  std::string name;
  std::string policies;
  std::vector<Step> steps;
  SchedulerOptions options = {};
};

std::ostream& operator<<(std::ostream& os, const Scenario& s) { return os << s.name; }

std::string OneQueue(int64_t nominal, const std::string& extra = "") {
  return Docs({kA100, GpuCq("cq-a", {absl::StrCat("a100: ", nominal)}, extra), Lq("lq-a", "cq-a")});
}

// Two ClusterQueues in cohort `pool` with lq-a and lq-b.
std::string TwoInCohort(const std::string& a_flavors, const std::string& a_extra, const std::string& b_flavors,
                        const std::string& b_extra = "") {
  return Docs({kA100, GpuCq("cq-a", {a_flavors}, absl::StrCat("  cohort: pool\n", Trim(a_extra))),
               GpuCq("cq-b", {b_flavors}, absl::StrCat("  cohort: pool\n", Trim(b_extra))), Lq("lq-a", "cq-a"),
               Lq("lq-b", "cq-b")});
}

std::vector<Scenario> GangAndFlavorScenarios() {
  std::vector<Scenario> out;
  out.push_back({"GangTakesTheFirstFlavorThatFits",
                 Docs({kA100, kH100, GpuCq("cq-a", {"a100: 8", "h100: 8"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("train").PodSet("worker", 4, {{kGpu, 1}})), Schedule(), Running({"train"}),
                  Flavors("train", {{"worker", "a100"}}), GpuUsage("cq-a", "a100", 4), GpuUsage("cq-a", "h100", 0),
                  BorrowingLevel("train", false), Counts("train", 1, 0)}});
  // §3.5: usage accumulates across pod sets; pod set 1 no longer fits a100.
  out.push_back({"SecondPodSetSpillsToTheNextFlavor",
                 Docs({kA100, kH100, GpuCq("cq-a", {"a100: 4", "h100: 8"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("mpi").PodSet("launcher", 1, {{kGpu, 2}}).PodSet("worker", 2, {{kGpu, 2}})), Schedule(),
                  Admitted({"mpi"}), Flavors("mpi", {{"launcher", "a100"}, {"worker", "h100"}}),
                  GpuUsage("cq-a", "a100", 2), GpuUsage("cq-a", "h100", 4)}});
  out.push_back({"GangLargerThanTheQueueHoldsNothing",
                 OneQueue(4),
                 {Add(Wl("big").PodSet("driver", 1, {{kGpu, 2}}).PodSet("worker", 3, {{kGpu, 1}})), Schedule(),
                  Pending({"big"}),
                  ReasonDetail("big", {.code = Code::kExceedsMaxQuota, .pod_set = "worker", .flavor = "a100",
                                       .resource = kGpu, .requested = 5, .max_capacity = 4}),
                  GpuUsage("cq-a", "a100", 0), Add(Wl("small").Gpus(4)), Schedule(), Admitted({"small"}),
                  Pending({"big"}), GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"PartlyFittingGangWaitsWithoutHoldingQuota",
                 OneQueue(6),
                 {Add(Wl("x").Gpus(2)), Schedule(),
                  Add(Wl("gang").PodSet("driver", 1, {{kGpu, 2}}).PodSet("worker", 3, {{kGpu, 1}})), Schedule(),
                  Pending({"gang"}),
                  ReasonDetail("gang", {.code = Code::kWaitingForQuota, .pod_set = "worker", .flavor = "a100",
                                        .resource = kGpu, .requested = 5, .available = 4, .any_quota_wait = true}),
                  Holding("cq-a", {"x"}), GpuUsage("cq-a", "a100", 2), Finish("x"), Schedule(), Admitted({"gang"}),
                  GpuUsage("cq-a", "a100", 5)}});
  out.push_back(
      {"ResourcesOfOneGroupShareAFlavor",
       Docs({kA100, kH100, Cq("cq-a", R"(
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: cpu, nominalQuota: 8}, {name: nvidia.com/gpu, nominalQuota: 4}]}
    - {name: h100, resources: [{name: cpu, nominalQuota: 64}, {name: nvidia.com/gpu, nominalQuota: 8}]}
)"),
             Lq("lq-a", "cq-a")}),
       {Add(Wl("cpu-heavy").PodSet("main", 1, {{kGpu, 2}, {"cpu", 16}})), Schedule(), Admitted({"cpu-heavy"}),
        FlavorOf("cpu-heavy", "main", "cpu", "h100"), FlavorOf("cpu-heavy", "main", kGpu, "h100"),
        GpuUsage("cq-a", "a100", 0), GpuUsage("cq-a", "h100", 2), Usage("cq-a", "h100", "cpu", 16)}});
  out.push_back({"ResourceGroupsChooseTheirFlavorsIndependently",
                 Docs({Rf("general"), kA100, kH100, Cq("cq-a", R"(
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: general, resources: [{name: cpu, nominalQuota: 32}]}
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
    - {name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
)"),
                       Lq("lq-a", "cq-a")}),
                 {Add(Wl("w").PodSet("main", 1, {{kGpu, 6}, {"cpu", 4}})), Schedule(), Admitted({"w"}),
                  FlavorOf("w", "main", "cpu", "general"), FlavorOf("w", "main", kGpu, "h100"),
                  Usage("cq-a", "general", "cpu", 4), GpuUsage("cq-a", "h100", 6)}});
  // MIG partitions are resources of their own: full whole GPUs do not
  // block slices and the other way round.
  out.push_back(
      {"MigSlicesAreCountedApartFromWholeGpus",
       Docs({kA100, Cq("cq-a", R"(
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 2}
      - {name: nvidia.com/mig-1g.10gb, nominalQuota: 7}
      - {name: nvidia.com/mig-3g.40gb, nominalQuota: 2}
)"),
             Lq("lq-a", "cq-a")}),
       {Add(Wl("whole").Gpus(2)), Add(Wl("slices").PodSet("main", 7, {{kMig1g, 1}})),
        Add(Wl("fat-slices").PodSet("main", 2, {{kMig3g, 1}})), Schedule(),
        Admitted({"whole", "slices", "fat-slices"}), Usage("cq-a", "a100", kGpu, 2), Usage("cq-a", "a100", kMig1g, 7),
        Usage("cq-a", "a100", kMig3g, 2), Add(Wl("one-more-gpu").Gpus(1)),
        Add(Wl("one-more-slice").PodSet("main", 1, {{kMig1g, 1}})), Schedule(),
        Pending({"one-more-gpu", "one-more-slice"}),
        ReasonDetail("one-more-slice", {.code = Code::kWaitingForQuota, .flavor = "a100", .resource = kMig1g,
                                        .requested = 1, .available = 0, .nominal = 7, .used = 7,
                                        .any_quota_wait = true}),
        ReasonDetail("one-more-gpu",
                     {.code = Code::kWaitingForQuota, .resource = kGpu, .available = 0, .any_quota_wait = true}),
        Finish("whole"), Schedule(), Admitted({"one-more-gpu"}), Pending({"one-more-slice"}),
        Usage("cq-a", "a100", kGpu, 1), Usage("cq-a", "a100", kMig1g, 7)}});
  out.push_back({"MigSlicesSpillToTheNextFlavor",
                 Docs({kA100, kH100, Cq("cq-a", R"(
  resourceGroups:
  - coveredResources: [nvidia.com/mig-1g.10gb]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 7}]}
    - {name: h100, resources: [{name: nvidia.com/mig-1g.10gb, nominalQuota: 7}]}
)"),
                       Lq("lq-a", "cq-a")}),
                 {Add(Wl("sweep").PodSet("a", 4, {{kMig1g, 1}}).PodSet("b", 4, {{kMig1g, 1}})), Schedule(),
                  Admitted({"sweep"}), Flavors("sweep", {{"a", "a100"}, {"b", "h100"}}),
                  Usage("cq-a", "a100", kMig1g, 4), Usage("cq-a", "h100", kMig1g, 4)}});
  out.push_back({"FlavorsAreTriedInTheClusterQueuesOrder",
                 Docs({kA100, kH100, GpuCq("cq-a", {"h100: 8", "a100: 8"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("w").Gpus(1)), Schedule(), Flavors("w", {{"main", "h100"}}), GpuUsage("cq-a", "a100", 0)}});
  const std::string spot = Rf("spot", R"(
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
)");
  out.push_back(
      {"UntoleratedTaintSkipsTheFlavor",
       Docs({spot, Rf("ondemand"), GpuCq("cq-a", {"spot: 8", "ondemand: 8"}), Lq("lq-a", "cq-a")}),
       {Add(Wl("plain").Gpus(1)), Add(Wl("tolerant").Gpus(1).Tolerate("spot", "Exists")),
        Add(Wl("tolerant-equal").Gpus(1).Tolerate("spot", "Equal", "true", "NoSchedule")),
        Add(Wl("wrong-value").Gpus(1).Tolerate("spot", "Equal", "false")),
        Add(Wl("wrong-effect").Gpus(1).Tolerate("spot", "Exists", "", "NoExecute")), Schedule(),
        Flavors("plain", {{"main", "ondemand"}}), Flavors("tolerant", {{"main", "spot"}}),
        Flavors("tolerant-equal", {{"main", "spot"}}), Flavors("wrong-value", {{"main", "ondemand"}}),
        Flavors("wrong-effect", {{"main", "ondemand"}}), GpuUsage("cq-a", "spot", 2),
        GpuUsage("cq-a", "ondemand", 3)}});
  out.push_back({"TaintOnEveryFlavorIsNoMatchingFlavor",
                 Docs({spot, GpuCq("cq-a", {"spot: 8"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("plain").Gpus(1)), Add(Wl("tolerant").Gpus(1).Tolerate("spot", "Exists")), Schedule(),
                  Reason("plain", Code::kNoMatchingFlavor), Admitted({"tolerant"}), GpuUsage("cq-a", "spot", 1)}});
  out.push_back({"PreferNoScheduleTaintDoesNotKeepWorkloadsAway",
                 Docs({Rf("soft", R"(
  nodeTaints: [{key: busy, value: "yes", effect: PreferNoSchedule}]
)"),
                       kA100, GpuCq("cq-a", {"soft: 4", "a100: 4"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("w").Gpus(2)), Schedule(), Flavors("w", {{"main", "soft"}})}});
  // KUEUE-SEMANTICS §2.1: the flavor's own tolerations count in the check.
  out.push_back({"FlavorTolerationsCoverItsOwnTaints",
                 Docs({Rf("reserved", R"(
  nodeTaints: [{key: reserved, value: ml, effect: NoSchedule}]
  tolerations: [{key: reserved, operator: Equal, value: ml, effect: NoSchedule}]
)"),
                       kA100, GpuCq("cq-a", {"reserved: 4", "a100: 4"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("w").Gpus(2)), Schedule(), Flavors("w", {{"main", "reserved"}})}});
  const std::string labelled = Docs({Rf("a100", "  nodeLabels: {gpu.type: a100}\n"),
                                     Rf("h100", "  nodeLabels: {gpu.type: h100}\n"),
                                     GpuCq("cq-a", {"a100: 8", "h100: 8"}), Lq("lq-a", "cq-a")});
  out.push_back({"NodeSelectorPicksTheFlavorWithMatchingLabels",
                 labelled,
                 {Add(Wl("wants-h100").Gpus(1).Select("gpu.type", "h100")),
                  Add(Wl("other-key").Gpus(1).Select("zone", "west")), Add(Wl("no-selector").Gpus(1)), Schedule(),
                  Flavors("wants-h100", {{"main", "h100"}}), Flavors("other-key", {{"main", "a100"}}),
                  Flavors("no-selector", {{"main", "a100"}})}});
  out.push_back({"NodeSelectorMatchingNoFlavorIsNoMatchingFlavor",
                 labelled,
                 {Add(Wl("wants-v100").Gpus(1).Select("gpu.type", "v100")), Schedule(),
                  Reason("wants-v100", Code::kNoMatchingFlavor), GpuUsage("cq-a", "a100", 0)}});
  out.push_back({"UncoveredResourceIsNoMatchingFlavor",
                 OneQueue(4),
                 {Add(Wl("fpga").PodSet("main", 1, {{kGpu, 1}, {"example.com/fpga", 1}})), Schedule(),
                  ReasonDetail("fpga", {.code = Code::kNoMatchingFlavor, .resource = "example.com/fpga"}),
                  GpuUsage("cq-a", "a100", 0)}});
  return out;
}

std::vector<Scenario> FungibilityScenarios() {
  std::vector<Scenario> out;
  auto policies = [](const std::string& fungibility) {
    return Docs({kA100, kH100,
                 GpuCq("cq-a", {"a100: 2", "h100: 4"}, absl::StrCat("  cohort: pool\n", fungibility)),
                 GpuCq("cq-b", {"a100: 4"}, "  cohort: pool\n"), Lq("lq-a", "cq-a")});
  };
  // Default whenCanBorrow MayStopSearch: a100 fits by borrowing; stop there.
  out.push_back({"MayStopSearchBorrowsInTheFirstFlavor",
                 policies(""),
                 {Add(Wl("w").Gpus(4)), Schedule(), Flavors("w", {{"main", "a100"}}), BorrowingLevel("w", true),
                  GpuUsage("cq-a", "a100", 4), GpuUsage("cq-a", "h100", 0)}});
  out.push_back({"TryNextFlavorPrefersAFlavorWithoutBorrowing",
                 policies("  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n"),
                 {Add(Wl("w").Gpus(4)), Schedule(), Flavors("w", {{"main", "h100"}}), BorrowingLevel("w", false),
                  GpuUsage("cq-a", "a100", 0), GpuUsage("cq-a", "h100", 4)}});
  out.push_back({"TryNextFlavorStillBorrowsWhenNothingFitsInNominal",
                 policies("  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n"),
                 {Add(Wl("w").Gpus(5)), Schedule(), Flavors("w", {{"main", "a100"}}), BorrowingLevel("w", true),
                  GpuUsage("cq-a", "a100", 5)}});
  auto preempting = [](const std::string& fungibility) {
    return Docs({kA100, kH100,
                 GpuCq("cq-a", {"a100: 4", "h100: 4"},
                       absl::StrCat("  preemption: {withinClusterQueue: LowerPriority}\n", fungibility)),
                 Lq("lq-a", "cq-a")});
  };
  // Default whenCanPreempt TryNextFlavor: a flavor that fits beats one
  // that needs preemption.
  out.push_back({"WhenCanPreemptTryNextFlavorAvoidsPreemption",
                 preempting(""),
                 {Add(Wl("low").Gpus(4)), Schedule(), Flavors("low", {{"main", "a100"}}),
                  Add(Wl("high").Prio(10).Gpus(4)), Schedule(), OnlyEvicting({}), Admitted({"low", "high"}),
                  Flavors("high", {{"main", "h100"}})}});
  out.push_back({"WhenCanPreemptMayStopSearchPreemptsInTheFirstFlavor",
                 preempting("  flavorFungibility: {whenCanPreempt: MayStopSearch}\n"),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  OnlyEvicting({"low"}), Reason("high", Code::kWaitingForPreemption), StopEvicting(), Schedule(),
                  Admitted({"high", "low"}), Flavors("high", {{"main", "a100"}}), Flavors("low", {{"main", "h100"}}),
                  Counts("low", 2, 1)}});
  return out;
}

std::vector<Scenario> CohortScenarios() {
  std::vector<Scenario> out;
  out.push_back({"BorrowingStopsAtTheBorrowingLimit",
                 TwoInCohort("a100: 4, borrowingLimit: 2", "", "a100: 8"),
                 {Add(Wl("a1").Gpus(6)), Schedule(), Admitted({"a1"}), BorrowingLevel("a1", true),
                  Add(Wl("a2").Gpus(1)), Add(Wl("b1").Queue("lq-b").Gpus(6)), Schedule(),
                  ReasonDetail("a2", {.code = Code::kWaitingForQuota, .flavor = "a100", .resource = kGpu,
                                      .requested = 1, .available = 0, .nominal = 4, .used = 6, .used_by = 1,
                                      .borrowing_limit = 2, .any_quota_wait = true}),
                  Admitted({"b1"}), GpuUsage("cq-a", "a100", 6), GpuUsage("cq-b", "a100", 6)}});
  out.push_back({"BorrowingLimitBoundsTheMaximumCapacity",
                 TwoInCohort("a100: 4, borrowingLimit: 2", "", "a100: 8"),
                 {Add(Wl("a1").Gpus(7)), Schedule(),
                  ReasonDetail("a1", {.code = Code::kExceedsMaxQuota, .resource = kGpu, .requested = 7,
                                      .max_capacity = 6})}});
  out.push_back({"CohortCapacityBoundsAQueueWithoutBorrowingLimit",
                 TwoInCohort("a100: 4", "", "a100: 8"),
                 {Add(Wl("a1").Gpus(13)), Add(Wl("a2").Gpus(12)), Schedule(),
                  ReasonDetail("a1", {.code = Code::kExceedsMaxQuota, .requested = 13, .max_capacity = 12}),
                  Admitted({"a2"}), GpuUsage("cq-a", "a100", 12)}});
  // Lender 8 with lending limit 2 keeps 6 for itself.
  out.push_back({"LendingLimitReservesTheLendersQuota",
                 TwoInCohort("a100: 8, lendingLimit: 2", "", "a100: 2"),
                 {Add(Wl("b1").Queue("lq-b").Gpus(4)), Schedule(), Admitted({"b1"}),
                  Add(Wl("b2").Queue("lq-b").Gpus(1)), Schedule(),
                  ReasonDetail("b2", {.code = Code::kWaitingForQuota, .requested = 1, .available = 0, .any_quota_wait = true}),
                  Add(Wl("a1").Gpus(6)), Schedule(), Admitted({"a1"}), Add(Wl("a2").Gpus(1)), Schedule(),
                  Pending({"a2", "b2"}), GpuUsage("cq-a", "a100", 6), GpuUsage("cq-b", "a100", 4),
                  Available("cq-a", "a100", 0), Available("cq-b", "a100", 0)}});
  // KUEUE-SEMANTICS §3.4 worked example: lend-a (3, LL 2), lend-b (2, LL 2).
  out.push_back({"LendingLimitWorkedExample",
                 TwoInCohort("a100: 3, lendingLimit: 2", "", "a100: 2, lendingLimit: 2"),
                 {Add(Wl("b1").Queue("lq-b").Gpus(2)), Schedule(), Admitted({"b1"}), Available("cq-b", "a100", 2),
                  Add(Wl("b2").Queue("lq-b").Gpus(3)), Schedule(),
                  ReasonDetail("b2", {.code = Code::kWaitingForQuota, .requested = 3, .available = 2,
                                      .max_capacity = 4})}});
  out.push_back({"CohortQuotaIsLentToItsClusterQueues",
                 Docs({kA100, CohortDoc("org", R"(
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
)"),
                       GpuCq("cq-a", {"a100: 2"}, "  cohort: org\n"), Lq("lq-a", "cq-a")}),
                 {Add(Wl("a1").Gpus(6)), Add(Wl("a2").Gpus(1)), Schedule(), Admitted({"a1"}),
                  QuotaWait("a2"), GpuUsage("cq-a", "a100", 6), Add(Wl("a3").Gpus(7)),
                  Schedule(), ReasonDetail("a3", {.code = Code::kExceedsMaxQuota, .max_capacity = 6})}});
  // KUEUE-SEMANTICS §3.4: root -> child; lender 10/LL 3 at the root,
  // borrower 5/BL 10 in the child; with the borrower at 5 it can add 3.
  out.push_back({"NestedCohortWorkedExample",
                 Docs({kA100, CohortDoc("org"), CohortDoc("research", "  parentName: org\n"),
                       GpuCq("cq-a", {"a100: 10, lendingLimit: 3"}, "  cohort: org\n"),
                       GpuCq("cq-b", {"a100: 5, borrowingLimit: 10"}, "  cohort: research\n"), Lq("lq-a", "cq-a"),
                       Lq("lq-b", "cq-b")}),
                 {Add(Wl("b1").Queue("lq-b").Gpus(5)), Schedule(), Available("cq-b", "a100", 3),
                  Add(Wl("b2").Queue("lq-b").Gpus(3)), Add(Wl("b3").Queue("lq-b").Gpus(1)), Schedule(),
                  Admitted({"b1", "b2"}), Pending({"b3"}), Add(Wl("a1").Gpus(7)), Schedule(), Admitted({"a1"}),
                  Add(Wl("a2").Gpus(1)), Schedule(), Pending({"a2", "b3"}), GpuUsage("cq-a", "a100", 7),
                  GpuUsage("cq-b", "a100", 8)}});
  // Two sibling teams under an org Cohort with its own quota, and a
  // second root they cannot borrow from.
  out.push_back({"HierarchicalCohortsShareOnlyInsideTheirTree",
                 Docs({kA100, CohortDoc("org", R"(
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
)"),
                       CohortDoc("team-x", "  parentName: org\n"), CohortDoc("team-y", "  parentName: org\n"),
                       CohortDoc("other"), GpuCq("cq-a", {"a100: 2"}, "  cohort: team-x\n"),
                       GpuCq("cq-b", {"a100: 2"}, "  cohort: team-y\n"),
                       GpuCq("cq-c", {"a100: 8"}, "  cohort: other\n"), Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b"),
                       Lq("lq-c", "cq-c")}),
                 {Add(Wl("a1").Gpus(4)), Schedule(), Admitted({"a1"}), Add(Wl("b1").Queue("lq-b").Gpus(2)),
                  Add(Wl("b2").Queue("lq-b").Gpus(1)), Schedule(), Admitted({"b1"}), Pending({"b2"}),
                  Add(Wl("a2").Gpus(7)), Schedule(), Reason("a2", Code::kExceedsMaxQuota),
                  Add(Wl("c1").Queue("lq-c").Gpus(8)), Schedule(), Admitted({"c1"}), Finish("a1"), Schedule(),
                  Admitted({"b2"}), GpuUsage("cq-b", "a100", 3)}});
  // §3.2: a workload finishing anywhere in the cohort wakes the
  // inadmissible workloads of every queue in it.
  out.push_back({"FinishingInTheCohortAdmitsABorrower",
                 TwoInCohort("a100: 4", "", "a100: 4"),
                 {Add(Wl("a0").Gpus(4)), Add(Wl("b0").Queue("lq-b").Gpus(4)), Schedule(), Add(Wl("a1").Gpus(2)),
                  Schedule(), Reason("a1", Code::kWaitingForQuota), Finish("b0"), Schedule(), Admitted({"a1"}),
                  BorrowingLevel("a1", true), GpuUsage("cq-a", "a100", 6)}});
  // §3.3 step 4: entries that do not borrow go before borrowing ones,
  // whatever their priority.
  out.push_back({"NonBorrowingWorkloadGoesBeforeABorrowingOne",
                 TwoInCohort("a100: 4", "", "a100: 4"),
                 {Add(Wl("a1").Gpus(4)), Schedule(), Add(Wl("a2").Prio(100).Gpus(2)),
                  Add(Wl("b1").Queue("lq-b").Gpus(4)), Schedule(), Admitted({"b1"}), Pending({"a2"}),
                  GpuUsage("cq-a", "a100", 4), GpuUsage("cq-b", "a100", 4)}});
  return out;
}

std::vector<Scenario> QueueingScenarios() {
  std::vector<Scenario> out;
  out.push_back({"StrictFifoBlocksSmallerWorkloadsBehindTheHead",
                 OneQueue(4, "  queueingStrategy: StrictFIFO\n"),
                 {Add(Wl("big1").Gpus(3)), Schedule(), Add(Wl("big2").Gpus(2)), Add(Wl("small").Gpus(1)), Schedule(),
                  Admitted({"big1"}), QuotaWait("big2"), Reason("small", Code::kBlockedByHead),
                  Order("cq-a", {"big2", "small"}), GpuUsage("cq-a", "a100", 3), Finish("big1"), Schedule(),
                  Admitted({"big2", "small"}), GpuUsage("cq-a", "a100", 3)}});
  out.push_back({"BestEffortFifoLetsSmallerWorkloadsPass",
                 OneQueue(4),
                 {Add(Wl("big1").Gpus(3)), Schedule(), Add(Wl("big2").Gpus(2)), Add(Wl("small").Gpus(1)), Schedule(),
                  Admitted({"big1", "small"}), QuotaWait("big2"), Order("cq-a", {"big2"}),
                  GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"FinishingAWorkloadLetsTheBlockedOnesIn",
                 OneQueue(4),
                 {Add(Wl("w1").Gpus(4)), Add(Wl("w2").Gpus(2)), Add(Wl("w3").Gpus(2)), Schedule(), Admitted({"w1"}),
                  Pending({"w2", "w3"}), Finish("w1"), Gone({"w1"}), Schedule(), Admitted({"w2", "w3"}),
                  GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"HigherPriorityIsAdmittedFirst",
                 OneQueue(4),
                 {Add(Wl("filler").Gpus(4)), Schedule(), Add(Wl("low").Gpus(4)), Add(Wl("high").Prio(10).Gpus(4)),
                  Schedule(), Order("cq-a", {"high", "low"}), Finish("filler"), Schedule(), Admitted({"high"}),
                  Pending({"low"})}});
  out.push_back({"EqualPriorityIsFirstInFirstOut",
                 OneQueue(4),
                 {Add(Wl("filler").Gpus(4)), Schedule(), Add(Wl("first").Gpus(4)), Add(Wl("second").Gpus(4)),
                  Schedule(), Order("cq-a", {"first", "second"}), Finish("filler"), Schedule(), Admitted({"first"}),
                  Pending({"second"})}});
  out.push_back({"PendingPositionsFollowPriorityThenTime",
                 OneQueue(1),
                 {Add(Wl("filler").Gpus(1)), Schedule(), Add(Wl("a").Gpus(1)), Add(Wl("b").Prio(5).Gpus(1)),
                  Add(Wl("c").Gpus(1)), Add(Wl("d").Prio(5).Gpus(1)), Schedule(), Order("cq-a", {"b", "d", "a", "c"}),
                  Remove("d"), Gone({"d"}), Order("cq-a", {"b", "a", "c"}), Remove("filler"), Schedule(),
                  Admitted({"b"}), Order("cq-a", {"a", "c"})}});
  out.push_back({"RemovingAnAdmittedWorkloadFreesItsQuota",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), Add(Wl("b").Gpus(4)), Schedule(), Admitted({"a"}), Pending({"b"}),
                  Remove("a"), Gone({"a"}), GpuUsage("cq-a", "a100", 0), Schedule(), Admitted({"b"})}});
  out.push_back({"PendingReasonCarriesTheNumbers",
                 OneQueue(4),
                 {Add(Wl("x").Gpus(3)), Add(Wl("y").Gpus(2)), Schedule(),
                  ReasonDetail("y", {.code = Code::kWaitingForQuota, .pod_set = "main", .flavor = "a100",
                                     .resource = kGpu, .requested = 2, .available = 1, .max_capacity = 4,
                                     .nominal = 4, .used = 3, .used_by = 1, .any_quota_wait = true})}});
  out.push_back({"UpdateLetsAPendingGangFit",
                 OneQueue(4),
                 {Add(Wl("w").Gpus(8)), Schedule(), Reason("w", Code::kExceedsMaxQuota), Update(Wl("w").Gpus(4)),
                  Schedule(), Admitted({"w"}), UpdateFails(Wl("w").Gpus(2), absl::StatusCode::kFailedPrecondition),
                  GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"AddingTheSameUidAgainChangesNothing",
                 OneQueue(4),
                 {Add(Wl("w").Gpus(2)), Add(Wl("w").Gpus(2)), Schedule(), Admitted({"w"}), Add(Wl("w").Gpus(2)),
                  Admitted({"w"}), GpuUsage("cq-a", "a100", 2), Counts("w", 1, 0)}});
  out.push_back({"UnknownLocalQueueIsInactive",
                 OneQueue(4),
                 {Add(Wl("lost").Queue("lq-missing").Gpus(1)), Schedule(), Reason("lost", Code::kInactive)}});
  out.push_back({"NamespaceOutsideTheSelectorIsAMismatch",
                 Docs({kA100, NsDoc("team", "{team: a}"), NsDoc("other"), Cq("cq-a", R"(
  namespaceSelector: {matchLabels: {team: a}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
)"),
                       Lq("lq-a", "cq-a"), Lq("lq-a", "cq-a", "", "other")}),
                 {Add(Wl("inside").Gpus(1)), Add(Wl("outside").Ns("other").Gpus(1)), Schedule(),
                  Admitted({"inside"}), Reason("other/outside", Code::kNamespaceMismatch),
                  GpuUsage("cq-a", "a100", 1)}});
  return out;
}

std::vector<Scenario> PreemptionScenarios() {
  std::vector<Scenario> out;
  const std::string lower = "  preemption: {withinClusterQueue: LowerPriority}\n";
  out.push_back({"LowerPriorityPreemptsWithinTheClusterQueue",
                 OneQueue(4, lower),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  Evicting({"low"}), EvictedBy("low", "high"), Reason("high", Code::kWaitingForPreemption),
                  GpuUsage("cq-a", "a100", 4),
                  // Victims keep their quota; scheduling again changes nothing.
                  Schedule(), OnlyEvicting({"low"}), Pending({"high"}), Stop("low"), Pending({"low"}),
                  GpuUsage("cq-a", "a100", 0), Schedule(), Admitted({"high"}), Pending({"low"}),
                  Counts("low", 1, 1), Counts("high", 1, 0), GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"LowerPriorityDoesNotPreemptEqualPriority",
                 OneQueue(4, lower),
                 {Add(Wl("first").Gpus(4)), Schedule(), Add(Wl("peer").Gpus(4)), Schedule(), OnlyEvicting({}),
                  Admitted({"first"}), Reason("peer", Code::kWaitingForQuota)}});
  // The older (requeued) workload may preempt a newer one of equal priority.
  auto older_vs_newer = [](const std::string& policy, bool preempts) {
    std::vector<Step> steps = {Add(Wl("old").Gpus(4)), Schedule(), Add(Wl("high").Prio(5).Gpus(2)), Schedule(),
                               Evicting({"old"}), Stop("old"), Schedule(), Admitted({"high"}), Pending({"old"}),
                               Add(Wl("new").Gpus(2)), Schedule(), Admitted({"high", "new"}), Pending({"old"}),
                               OnlyEvicting({}), Finish("high"), Schedule()};
    if (preempts) {
      for (Step s : {OnlyEvicting({"new"}), EvictedBy("new", "old"), Reason("old", Code::kWaitingForPreemption),
                     Stop("new"), Schedule(), Admitted({"old"}), Pending({"new"}), GpuUsage("cq-a", "a100", 4)}) {
        steps.push_back(s);
      }
    } else {
      for (Step s : {OnlyEvicting({}), Admitted({"new"}), Reason("old", Code::kWaitingForQuota)}) {
        steps.push_back(s);
      }
    }
    return Scenario{preempts ? "LowerOrNewerEqualPriorityPreemptsANewerPeer" : "LowerPriorityKeepsANewerPeer",
                    OneQueue(4, absl::StrCat("  preemption: {withinClusterQueue: ", policy, "}\n")), steps};
  };
  out.push_back(older_vs_newer("LowerOrNewerEqualPriority", true));
  out.push_back(older_vs_newer("LowerPriority", false));
  out.push_back({"WithinClusterQueueNeverDoesNotPreempt",
                 OneQueue(4),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(), OnlyEvicting({}),
                  Admitted({"low"}), Reason("high", Code::kWaitingForQuota), Finish("low"), Schedule(),
                  Admitted({"high"})}});
  out.push_back({"PreemptionTakesTheLowestPriorityFirst",
                 OneQueue(6, lower),
                 {Add(Wl("v3").Prio(3).Gpus(2)), Add(Wl("v1").Prio(1).Gpus(2)), Add(Wl("v2").Prio(2).Gpus(2)),
                  Schedule(), Admitted({"v1", "v2", "v3"}), Add(Wl("high").Prio(10).Gpus(2)), Schedule(),
                  OnlyEvicting({"v1"}), Stop("v1"), Schedule(), Admitted({"high", "v2", "v3"}), Pending({"v1"})}});
  out.push_back({"PreemptionTakesTheNewestAdmittedAmongEqualPriority",
                 OneQueue(6, lower),
                 {Add(Wl("oldest").Gpus(2)), Schedule(), Add(Wl("middle").Gpus(2)), Schedule(), Add(Wl("newest").Gpus(2)),
                  Schedule(), Add(Wl("high").Prio(10).Gpus(2)), Schedule(), OnlyEvicting({"newest"})}});
  // Candidates: b (prio 0) then a (prio 1). Removing both fits; filling
  // back b still fits, so only a goes.
  out.push_back({"FillBackKeepsVictimsThatAreNotNeeded",
                 OneQueue(6, lower),
                 {Add(Wl("a").Prio(1).Gpus(4)), Add(Wl("b").Gpus(2)), Schedule(), Admitted({"a", "b"}),
                  Add(Wl("high").Prio(10).Gpus(4)), Schedule(), OnlyEvicting({"a"}), Admitted({"b"}), StopEvicting(),
                  Schedule(), Admitted({"high", "b"}), Pending({"a"})}});
  out.push_back({"PreemptionEvictsOnlyAsManyAsNeeded",
                 OneQueue(8, lower),
                 {Add(Wl("w1").Gpus(2)), Schedule(), Add(Wl("w2").Gpus(2)), Schedule(), Add(Wl("w3").Gpus(2)),
                  Schedule(), Add(Wl("w4").Gpus(2)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  OnlyEvicting({"w3", "w4"}), EvictedBy("w3", "high"), EvictedBy("w4", "high"), StopEvicting(),
                  Schedule(), Admitted({"high", "w1", "w2"}), Pending({"w3", "w4"}), GpuUsage("cq-a", "a100", 8)}});
  out.push_back({"PreemptionPolicyNeverWaitsInsteadOfPreempting",
                 OneQueue(4, lower),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("meek").Prio(10).NeverPreempts().Gpus(4)), Schedule(),
                  OnlyEvicting({}), Admitted({"low"}),
                  ReasonIn("meek", {Code::kPreemptionNoCandidates, Code::kWaitingForQuota}), Finish("low"), Schedule(),
                  Admitted({"meek"})}});
  // §3.6 and scheduler.h: a stopped victim is pending again with its
  // original queue position, ahead of later workloads of its priority.
  out.push_back({"StoppedVictimKeepsItsQueuePosition",
                 OneQueue(4, lower),
                 {Add(Wl("victim").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  Evicting({"victim"}), Add(Wl("late").Gpus(4)), Stop("victim"), Schedule(), Admitted({"high"}),
                  Order("cq-a", {"victim", "late"}), Finish("high"), Schedule(), Admitted({"victim"}),
                  Pending({"late"}), Counts("victim", 2, 1)}});
  out.push_back({"FinishingAVictimFreesItsQuota",
                 OneQueue(4, lower),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  Evicting({"low"}), Finish("low"), Gone({"low"}), GpuUsage("cq-a", "a100", 0), Schedule(),
                  Admitted({"high"})}});
  out.push_back({"RemovedPreemptorLeavesItsVictimsToComeBack",
                 OneQueue(4, lower),
                 {Add(Wl("low").Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)), Schedule(),
                  Evicting({"low"}), Remove("high"), Evicting({"low"}), GpuUsage("cq-a", "a100", 4), Stop("low"),
                  Schedule(), Admitted({"low"}), Counts("low", 2, 1)}});
  // Two preemptors, four GPUs each, and two victims: whatever the order of
  // evictions, both preemptors end up admitted and the victims pending.
  out.push_back({"TwoPreemptorsTakeTwoVictims",
                 OneQueue(8, lower),
                 {Add(Wl("l1").Gpus(4)), Schedule(), Add(Wl("l2").Gpus(4)), Schedule(), Add(Wl("h1").Prio(10).Gpus(4)),
                  Add(Wl("h2").Prio(10).Gpus(4)), Schedule(), Evicting({"l2"}), StopEvicting(), Schedule(),
                  StopEvicting(false), Schedule(), StopEvicting(false), Schedule(), Admitted({"h1", "h2"}),
                  Pending({"l1", "l2"}), OnlyEvicting({}), GpuUsage("cq-a", "a100", 8)}});
  out.push_back({"UpdatedPriorityReordersTheQueue",
                 OneQueue(4),
                 {Add(Wl("filler").Gpus(4)), Schedule(), Add(Wl("a").Gpus(4)), Add(Wl("b").Gpus(4)), Schedule(),
                  Order("cq-a", {"a", "b"}), Update(Wl("b").Prio(20).Gpus(4)), Order("cq-a", {"b", "a"}),
                  Finish("filler"), Schedule(), Admitted({"b"}), Pending({"a"})}});
  // A workload of preemptionPolicy Never can still be preempted.
  out.push_back({"PreemptionPolicyNeverWorkloadsCanBeVictims",
                 OneQueue(4, lower),
                 {Add(Wl("meek").Prio(1).NeverPreempts().Gpus(4)), Schedule(), Add(Wl("high").Prio(10).Gpus(4)),
                  Schedule(), OnlyEvicting({"meek"}), StopEvicting(), Schedule(), Admitted({"high"})}});
  return out;
}

std::vector<Scenario> ReclaimScenarios() {
  std::vector<Scenario> out;
  auto reclaim = [](const std::string& policy) {
    return TwoInCohort("a100: 4", absl::StrCat("  preemption: {reclaimWithinCohort: ", policy, "}\n"), "a100: 4");
  };
  out.push_back({"ReclaimLowerPriorityTakesBackLentQuota",
                 reclaim("LowerPriority"),
                 {Add(Wl("b1").Queue("lq-b").Gpus(8)), Schedule(), Admitted({"b1"}), Add(Wl("a1").Prio(5).Gpus(4)),
                  Schedule(), OnlyEvicting({"b1"}), EvictedBy("b1", "a1"), Reason("a1", Code::kWaitingForPreemption),
                  Stop("b1"), Schedule(), Admitted({"a1"}), Reason("b1", Code::kWaitingForQuota),
                  GpuUsage("cq-a", "a100", 4), GpuUsage("cq-b", "a100", 0)}});
  out.push_back({"ReclaimLowerPriorityLeavesEqualPriorityBorrowers",
                 reclaim("LowerPriority"),
                 {Add(Wl("b1").Queue("lq-b").Prio(5).Gpus(8)), Schedule(), Add(Wl("a1").Prio(5).Gpus(4)), Schedule(),
                  OnlyEvicting({}), Admitted({"b1"}), Reason("a1", Code::kWaitingForQuota)}});
  out.push_back({"ReclaimAnyTakesBackFromHigherPriority",
                 reclaim("Any"),
                 {Add(Wl("b1").Queue("lq-b").Prio(100).Gpus(8)), Schedule(), Add(Wl("a1").Gpus(4)), Schedule(),
                  OnlyEvicting({"b1"}), StopEvicting(), Schedule(), Admitted({"a1"}), Pending({"b1"})}});
  out.push_back({"ReclaimNeverWaitsForTheBorrowerToFinish",
                 reclaim("Never"),
                 {Add(Wl("b1").Queue("lq-b").Gpus(8)), Schedule(), Add(Wl("a1").Prio(5).Gpus(4)), Schedule(),
                  OnlyEvicting({}), Reason("a1", Code::kWaitingForQuota), Finish("b1"), Schedule(),
                  Admitted({"a1"})}});
  out.push_back({"ReclaimEvictsTheNewestBorrowerOnly",
                 reclaim("LowerPriority"),
                 {Add(Wl("b0").Queue("lq-b").Gpus(4)), Schedule(), Add(Wl("b1").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("b2").Queue("lq-b").Gpus(2)), Schedule(), GpuUsage("cq-b", "a100", 8),
                  Add(Wl("a1").Prio(5).Gpus(2)), Schedule(), OnlyEvicting({"b2"}), StopEvicting(), Schedule(),
                  Admitted({"a1", "b0", "b1"}), Pending({"b2"})}});
  // A queue within its nominal quota is not a reclaim target.
  out.push_back({"ReclaimLeavesQueuesWithinTheirNominalQuota",
                 Docs({kA100,
                       GpuCq("cq-a", {"a100: 4"}, "  cohort: pool\n  preemption: {reclaimWithinCohort: Any}\n"),
                       GpuCq("cq-b", {"a100: 4"}, "  cohort: pool\n"), GpuCq("cq-c", {"a100: 4"}, "  cohort: pool\n"),
                       Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b"), Lq("lq-c", "cq-c")}),
                 {Add(Wl("c1").Queue("lq-c").Gpus(4)), Schedule(), Add(Wl("b1").Queue("lq-b").Gpus(6)), Schedule(),
                  Add(Wl("a1").Gpus(4)), Add(Wl("a2").Gpus(2)), Schedule(), Admitted({"c1"}),
                  OnlyEvicting({"b1"}),
                  // §3.2: the preemptor stays at the head of its BestEffortFIFO
                  // queue until its victims are gone; a2 waits behind it.
                  Reason("a1", Code::kWaitingForPreemption), Pending({"a2"}), StopEvicting(), Schedule(),
                  Admitted({"a1", "a2", "c1"}), Pending({"b1"}), GpuUsage("cq-c", "a100", 4)}});
  auto bwc = [](const std::string& bwc_policy) {
    return TwoInCohort("a100: 2",
                       absl::StrCat("  preemption: {reclaimWithinCohort: LowerPriority, borrowWithinCohort: ",
                                    bwc_policy, "}\n"),
                       "a100: 2");
  };
  out.push_back({"BorrowWithinCohortPreemptsBelowTheThreshold",
                 bwc("{policy: LowerPriority, maxPriorityThreshold: 10}"),
                 {Add(Wl("b1").Queue("lq-b").Prio(5).Gpus(4)), Schedule(), Add(Wl("a1").Prio(20).Gpus(4)), Schedule(),
                  OnlyEvicting({"b1"}), EvictedBy("b1", "a1"), StopEvicting(), Schedule(), Admitted({"a1"}),
                  BorrowingLevel("a1", true), Pending({"b1"}), GpuUsage("cq-a", "a100", 4)}});
  out.push_back({"BorrowWithinCohortRespectsTheMaxPriorityThreshold",
                 bwc("{policy: LowerPriority, maxPriorityThreshold: 10}"),
                 {Add(Wl("b1").Queue("lq-b").Prio(15).Gpus(4)), Schedule(), Add(Wl("a1").Prio(20).Gpus(4)),
                  Schedule(), OnlyEvicting({}), Admitted({"b1"}), Reason("a1", Code::kWaitingForQuota)}});
  // Without borrowWithinCohort a preemptor that would borrow does not
  // consider preemption at all: plain no fit.
  out.push_back({"BorrowingPreemptorWithoutBorrowWithinCohortDoesNotPreempt",
                 bwc("{policy: Never}"),
                 {Add(Wl("b1").Queue("lq-b").Prio(5).Gpus(4)), Schedule(), Add(Wl("a1").Prio(20).Gpus(4)), Schedule(),
                  OnlyEvicting({}), Admitted({"b1"}), Reason("a1", Code::kWaitingForQuota)}});
  return out;
}

std::vector<Scenario> FairSharingScenarios() {
  std::vector<Scenario> out;
  auto contest = [](const std::string& a_weight) {
    return Docs({kA100, GpuCq("cq-a", {"a100: 2"}, absl::StrCat("  cohort: pool\n", a_weight)),
                 GpuCq("cq-b", {"a100: 2"}, "  cohort: pool\n"), GpuCq("cq-c", {"a100: 8"}, "  cohort: pool\n"),
                 Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b")});
  };
  // a already borrows 4 of 12; after admission a2 would make a's share
  // 6/12, b1 would make b's 4/12: b1 goes first and takes the rest.
  const std::vector<Step> race = {Add(Wl("a1").Gpus(6)), Schedule(), Add(Wl("a2").Gpus(2)),
                                  Add(Wl("b1").Queue("lq-b").Gpus(6))};
  auto with = [](std::vector<Step> steps, const std::vector<Step>& more) {
    steps.insert(steps.end(), more.begin(), more.end());
    return steps;
  };
  out.push_back({"FairSharingAdmitsTheLowerShareFirst", contest(""),
                 with(race, {Schedule(), Admitted({"a1", "b1"}), Pending({"a2"}), GpuUsage("cq-b", "a100", 6)}),
                 SchedulerOptions{.fair_sharing = true}});
  out.push_back({"WithoutFairSharingTheEarlierBorrowerGoesFirst", contest(""),
                 with(race, {Schedule(), Admitted({"a1", "a2"}), Reason("b1", Code::kWaitingForQuota),
                             GpuUsage("cq-a", "a100", 8)})});
  out.push_back({"FairSharingWeightLowersTheShare", contest("  fairSharing: {weight: 4}\n"),
                 with(race, {Schedule(), Admitted({"a1", "a2"}), Pending({"b1"})}),
                 SchedulerOptions{.fair_sharing = true}});
  auto two = Docs({kA100, GpuCq("cq-a", {"a100: 4"}, "  cohort: pool\n  preemption: {reclaimWithinCohort: Any}\n"),
                   GpuCq("cq-b", {"a100: 4"}, "  cohort: pool\n  preemption: {reclaimWithinCohort: Any}\n"),
                   Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b")});
  // The preemptor stays within its nominal quota: it reclaims without
  // comparing shares, newest borrower first.
  out.push_back({"FairSharingReclaimsWithinNominal", two,
                 {Add(Wl("b1").Queue("lq-b").Gpus(2)), Schedule(), Add(Wl("b2").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("b3").Queue("lq-b").Gpus(2)), Schedule(), Add(Wl("b4").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("a1").Gpus(4)), Schedule(), OnlyEvicting({"b3", "b4"}), StopEvicting(), Schedule(),
                  Admitted({"a1", "b1", "b2"}), GpuUsage("cq-a", "a100", 4), GpuUsage("cq-b", "a100", 4)},
                 SchedulerOptions{.fair_sharing = true}});
  // a would borrow 2 (share 2/8); b borrows 2 now (2/8) and 0 after losing
  // a workload: neither strategy lets a preempt.
  out.push_back({"FairSharingDoesNotPreemptToEndAboveTheVictim", two,
                 {Add(Wl("a0").Gpus(2)), Schedule(), Add(Wl("b1").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("b2").Queue("lq-b").Gpus(2)), Schedule(), Add(Wl("b3").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("a1").Gpus(4)), Schedule(), OnlyEvicting({}), Admitted({"a0", "b1", "b2", "b3"}),
                  Reason("a1", Code::kWaitingForQuota)},
                 SchedulerOptions{.fair_sharing = true}});
  // b borrows 6 of 8; a borrowing 2 (share 250) may preempt b down to an
  // equal share: b at 6 (500) then 4 (250).
  out.push_back({"FairSharingPreemptsUntilSharesAreEven",
                 Docs({kA100, GpuCq("cq-a", {"a100: 2"}, "  cohort: pool\n  preemption: {reclaimWithinCohort: Any}\n"),
                       GpuCq("cq-b", {"a100: 2"}, "  cohort: pool\n  preemption: {reclaimWithinCohort: Any}\n"),
                       GpuCq("cq-c", {"a100: 4"}, "  cohort: pool\n"), Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b")}),
                 {Add(Wl("b1").Queue("lq-b").Gpus(2)), Schedule(), Add(Wl("b2").Queue("lq-b").Gpus(2)), Schedule(),
                  Add(Wl("b3").Queue("lq-b").Gpus(2)), Schedule(), Add(Wl("b4").Queue("lq-b").Gpus(2)), Schedule(),
                  Admitted({"b1", "b2", "b3", "b4"}), Add(Wl("a1").Gpus(4)), Schedule(), OnlyEvicting({"b3", "b4"}),
                  StopEvicting(), Schedule(), Admitted({"a1", "b1", "b2"}), Pending({"b3", "b4"}),
                  GpuUsage("cq-a", "a100", 4), GpuUsage("cq-b", "a100", 4)},
                 SchedulerOptions{.fair_sharing = true}});
  return out;
}

std::vector<Scenario> PolicyChangeScenarios() {
  std::vector<Scenario> out;
  out.push_back({"LoweredQuotaKeepsAdmittedWorkloadsAndBlocksNewOnes",
                 OneQueue(8),
                 {Add(Wl("a").Gpus(4)), Add(Wl("b").Gpus(4)), Schedule(), Policies(OneQueue(4)), Schedule(),
                  Admitted({"a", "b"}), OnlyEvicting({}), GpuUsage("cq-a", "a100", 8), Add(Wl("c").Gpus(1)),
                  Schedule(), Pending({"c"}), Finish("a"), Schedule(), Pending({"c"}), GpuUsage("cq-a", "a100", 4),
                  Finish("b"), Schedule(), Admitted({"c"})}});
  out.push_back({"RaisedQuotaAdmitsWaitingWorkloads",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), Add(Wl("b").Gpus(4)), Schedule(), Pending({"b"}), Policies(OneQueue(8)),
                  Schedule(), Admitted({"a", "b"}), GpuUsage("cq-a", "a100", 8)}});
  const std::string both = Docs({kA100, GpuCq("cq-a", {"a100: 4"}), GpuCq("cq-b", {"a100: 4"}), Lq("lq-a", "cq-a"),
                                 Lq("lq-b", "cq-b")});
  const std::string without_a = Docs({kA100, GpuCq("cq-b", {"a100: 4"}), Lq("lq-a", "cq-a"), Lq("lq-b", "cq-b")});
  out.push_back({"DeletedClusterQueueKeepsItsAdmittedWorkloads",
                 both,
                 {Add(Wl("a").Gpus(4)), Add(Wl("waiting").Gpus(1)), Schedule(), Policies(without_a), Schedule(),
                  Admitted({"a"}), Holding("cq-a", {"a"}), GpuUsage("cq-a", "a100", 4), Reason("waiting", Code::kInactive),
                  Add(Wl("c").Gpus(1)), Schedule(), Reason("c", Code::kInactive), Finish("a"), Schedule(),
                  Pending({"c", "waiting"}), Policies(both), Schedule(), Admitted({"c", "waiting"})}});
  out.push_back({"DeletedLocalQueueLeavesNewWorkloadsInactive",
                 both,
                 {Add(Wl("a").Gpus(2)), Schedule(), Policies(Docs({kA100, GpuCq("cq-a", {"a100: 4"}), Lq("lq-b", "cq-b"),
                                                                    GpuCq("cq-b", {"a100: 4"})})),
                  Add(Wl("c").Gpus(1)), Schedule(), Admitted({"a"}), Reason("c", Code::kInactive),
                  GpuUsage("cq-a", "a100", 2)}});
  out.push_back({"RemovedResourceFlavorStopsNewAdmissions",
                 OneQueue(4),
                 {Add(Wl("x").Gpus(2)), Schedule(),
                  Policies(Docs({GpuCq("cq-a", {"a100: 4"}), Lq("lq-a", "cq-a")})), Add(Wl("y").Gpus(1)), Schedule(),
                  Admitted({"x"}), ReasonIn("y", {Code::kInactive, Code::kNoMatchingFlavor}), Finish("x"), Schedule(),
                  Pending({"y"}), Policies(OneQueue(4)), Schedule(), Admitted({"y"})}});
  out.push_back({"FlavorDroppedFromTheClusterQueueKeepsItsAdmissions",
                 Docs({kA100, kH100, GpuCq("cq-a", {"a100: 4", "h100: 4"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("x").Gpus(4)), Schedule(), Flavors("x", {{"main", "a100"}}),
                  Policies(Docs({kA100, kH100, GpuCq("cq-a", {"h100: 4"}), Lq("lq-a", "cq-a")})),
                  Add(Wl("y").Gpus(4)), Add(Wl("z").Gpus(1)), Schedule(), Admitted({"x", "y"}),
                  Flavors("y", {{"main", "h100"}}), Pending({"z"}), Holding("cq-a", {"x", "y"}), Finish("x"),
                  Schedule(), Pending({"z"}), Finish("y"), Schedule(), Admitted({"z"})}});
  out.push_back({"ReloadMovesALocalQueueToAnotherClusterQueue",
                 Docs({kA100, GpuCq("cq-a", {"a100: 2"}), GpuCq("cq-b", {"a100: 8"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("x").Gpus(2)), Add(Wl("w").Gpus(4)), Schedule(), Admitted({"x"}),
                  Reason("w", Code::kExceedsMaxQuota),
                  Policies(Docs({kA100, GpuCq("cq-a", {"a100: 2"}), GpuCq("cq-b", {"a100: 8"}), Lq("lq-a", "cq-b")})),
                  Schedule(), Admitted({"w", "x"}), AdmittedIn("w", "cq-b"), AdmittedIn("x", "cq-a"),
                  GpuUsage("cq-a", "a100", 2), GpuUsage("cq-b", "a100", 4), Add(Wl("y").Gpus(4)), Schedule(),
                  AdmittedIn("y", "cq-b"), GpuUsage("cq-b", "a100", 8)}});
  // ResourceTree::Build refuses a FlavorResource declared twice.
  out.push_back({"InvalidPoliciesChangeNothing",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), Schedule(),
                  {"policies declaring a100 twice in cq-a are refused",
                   [](ScenarioRun& r) {
                     auto set = std::make_shared<model::PolicySet>();
                     model::Diagnostics d;
                     model::DecodeManifests(Docs({kA100, GpuCq("cq-a", {"a100: 8", "a100: 8"}), Lq("lq-a", "cq-a")}),
                                            "twice.yaml", set.get(), &d);
                     EXPECT_THAT(r.s().SetPolicies(set, r.Tick()), StatusIs(absl::StatusCode::kInvalidArgument));
                     const model::ClusterQueue& cq = r.s().policies().cluster_queues.at("cq-a");
                     ASSERT_EQ(cq.resource_groups.at(0).flavors.size(), 1u);
                     r.Invariants();
                   }},
                  Add(Wl("b").Gpus(4)), Schedule(), Admitted({"a"}), QuotaWait("b"), GpuUsage("cq-a", "a100", 4),
                  Finish("a"), Schedule(), Admitted({"b"})}});
  // Parent cycles are not an error: their ClusterQueues cannot admit.
  out.push_back({"CohortCycleDisablesItsClusterQueues",
                 Docs({kA100, GpuCq("cq-a", {"a100: 4"}, "  cohort: x\n"), Lq("lq-a", "cq-a")}),
                 {Add(Wl("a").Gpus(2)), Schedule(), Admitted({"a"}),
                  Policies(Docs({kA100, CohortDoc("x", "  parentName: y\n"), CohortDoc("y", "  parentName: x\n"),
                                 GpuCq("cq-a", {"a100: 4"}, "  cohort: x\n"), Lq("lq-a", "cq-a")})),
                  Add(Wl("b").Gpus(1)), Schedule(), Admitted({"a"}), Pending({"b"}),
                  ReasonIn("b", {Code::kInactive, Code::kWaitingForQuota}), GpuUsage("cq-a", "a100", 2),
                  Policies(Docs({kA100, GpuCq("cq-a", {"a100: 4"}, "  cohort: x\n"), Lq("lq-a", "cq-a")})), Schedule(),
                  Admitted({"a", "b"}), GpuUsage("cq-a", "a100", 3)}});
  return out;
}

std::vector<Scenario> StopAndReleaseScenarios() {
  std::vector<Scenario> out;
  out.push_back({"ClusterQueueHoldAdmitsNothingNew",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(2)), Schedule(), Policies(OneQueue(4, "  stopPolicy: Hold\n")),
                  Add(Wl("b").Gpus(1)), Schedule(), Running({"a"}), Reason("b", Code::kStopped), OnlyEvicting({}),
                  Policies(OneQueue(4)), Schedule(), Admitted({"b"})}});
  out.push_back({"ClusterQueueHoldAndDrainEvictsAdmittedWorkloads",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(2)), Schedule(), Policies(OneQueue(4, "  stopPolicy: HoldAndDrain\n")),
                  Add(Wl("b").Gpus(1)), Schedule(), Evicting({"a"}), Reason("b", Code::kStopped),
                  GpuUsage("cq-a", "a100", 2), Stop("a"), Schedule(), Reason("a", Code::kStopped),
                  GpuUsage("cq-a", "a100", 0), Policies(OneQueue(4)), Schedule(), Admitted({"a", "b"})}});
  const std::string two_lqs = Docs({kA100, GpuCq("cq-a", {"a100: 8"}), Lq("lq-a", "cq-a"), Lq("lq-b", "cq-a")});
  auto with_lq_a = [](const std::string& stop) {
    return Docs({kA100, GpuCq("cq-a", {"a100: 8"}), Lq("lq-a", "cq-a", stop), Lq("lq-b", "cq-a")});
  };
  out.push_back({"LocalQueueHoldStopsOnlyThatQueue",
                 two_lqs,
                 {Add(Wl("a0").Gpus(2)), Schedule(), Policies(with_lq_a("Hold")), Add(Wl("a1").Gpus(1)),
                  Add(Wl("b1").Queue("lq-b").Gpus(1)), Schedule(), Running({"a0", "b1"}), Reason("a1", Code::kStopped),
                  Policies(two_lqs), Schedule(), Admitted({"a1"})}});
  out.push_back({"LocalQueueHoldAndDrainEvictsOnlyItsWorkloads",
                 two_lqs,
                 {Add(Wl("a0").Gpus(2)), Add(Wl("b0").Queue("lq-b").Gpus(2)), Schedule(),
                  Policies(with_lq_a("HoldAndDrain")), Schedule(), OnlyEvicting({"a0"}), Running({"b0"}),
                  StopEvicting(), Schedule(), Reason("a0", Code::kStopped), GpuUsage("cq-a", "a100", 2)}});
  out.push_back({"ReleaseFailureFreesQuotaAndRetries",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), Add(Wl("b").Gpus(4)), ScheduleNoRelease(), Reserved({"a"}), Pending({"b"}),
                  GpuUsage("cq-a", "a100", 4), ReleaseFail("a"), Reason("a", Code::kReleaseFailed),
                  GpuUsage("cq-a", "a100", 0), ScheduleNoRelease(), Reserved({"a"}), Pending({"b"}),
                  ReleaseOk("a"), Running({"a"}), Counts("a", 2, 0)}});
  out.push_back({"ReleaseFailureLetsTheNextWorkloadIn",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), ScheduleNoRelease(), Add(Wl("b").Gpus(2)), ScheduleNoRelease(),
                  Pending({"b"}), ReleaseFail("a"), Update(Wl("a").Gpus(3)), ScheduleNoRelease(),
                  Reserved({"a"}), Pending({"b"}), ReleaseFail("a"), Remove("a"), ScheduleNoRelease(),
                  Reserved({"b"}), GpuUsage("cq-a", "a100", 2)}});
  out.push_back({"StaleReleaseAnswersAreIgnored",
                 OneQueue(4),
                 {Add(Wl("a").Gpus(4)), ScheduleNoRelease(), ReleaseOkWithOtherUid("a"), Reserved({"a"}),
                  ReleaseOk("a"), Running({"a"}), ReleaseFail("a"), Running({"a"}), GpuUsage("cq-a", "a100", 4),
                  ReleaseOkWithOtherUid("nobody"), Running({"a"})}});
  out.push_back({"PodGroupIsAdmittedOnlyWhenComplete",
                 OneQueue(4),
                 {Add(Wl("p1").PodOf("g", 3).Gpus(1)), Add(Wl("p2").PodOf("g", 3).Gpus(1)), Schedule(),
                  Reason("g", Code::kIncompletePodGroup), Members("g", 2), GpuUsage("cq-a", "a100", 0),
                  Add(Wl("p2").PodOf("g", 3).Gpus(1)), Members("g", 2), Add(Wl("p3").PodOf("g", 3).Gpus(1)),
                  Schedule(), Admitted({"g"}), Members("g", 3), GpuUsage("cq-a", "a100", 3), Finish("g"),
                  GpuUsage("cq-a", "a100", 0)}});
  out.push_back({"CompletePodGroupThatCannotFitHoldsNothing",
                 OneQueue(4),
                 {Add(Wl("p1").PodOf("g", 3).Gpus(2)), Add(Wl("p2").PodOf("g", 3).Gpus(2)),
                  Add(Wl("p3").PodOf("g", 3).Gpus(2)), Add(Wl("solo").Gpus(4)), Schedule(),
                  ReasonDetail("g", {.code = Code::kExceedsMaxQuota, .requested = 6, .max_capacity = 4}),
                  Admitted({"solo"}), Holding("cq-a", {"solo"})}});
  return out;
}

// Partial admission (KUEUE-SEMANTICS.md §3.8), from Kueue's own cases
// (pkg/scheduler/scheduler_test.go "partial admission ...",
// flavorassigner/podset_reducer_test.go): each pod asks for one GPU, so a
// quota of N GPUs is Kueue's "count limit" N.
std::vector<Scenario> PartialAdmissionScenarios() {
  std::vector<Scenario> out;
  const std::string preempting = OneQueue(20, "  preemption: {withinClusterQueue: LowerPriority}\n");
  out.push_back({"PartialSingleVariablePodSet", OneQueue(50),
                 {Add(Wl("new").PodSet("one", 50, {{kGpu, 2}}).Min(20)), Schedule(), Admitted({"new"}),
                  PodCounts("new", {{"one", 25}}), GpuUsage("cq-a", "a100", 50),
                  AdmittedSaying("new", "admitted with 25 of 50 pods")}});
  out.push_back({"PartialNotNeededWhenTheWholeGangFits", OneQueue(50),
                 {Add(Wl("new").PodSet("one", 20, {{kGpu, 2}}).Min(5)), Schedule(), Admitted({"new"}),
                  PodCounts("new", {{"one", 20}}), AdmittedSaying("new", "")}});
  out.push_back({"PartialBelowTheMinimumStaysPending", OneQueue(9),
                 {Add(Wl("new").PodSet("one", 20, {{kGpu, 1}}).Min(10)), Schedule(), Pending({"new"}),
                  GpuUsage("cq-a", "a100", 0)}});
  // The whole gang finds victims: preemption first, no reduction.
  out.push_back({"PartialPreemptsFirstWhenTheWholeGangCan", preempting,
                 {Add(Wl("old").Prio(-4).PodSet("one", 10, {{kGpu, 1}})), Schedule(), Admitted({"old"}),
                  Add(Wl("new").Prio(4).PodSet("one", 20, {{kGpu, 1}}).Min(10)), Schedule(), Evicting({"old"}),
                  Pending({"new"}), StopEvicting(), Schedule(), Admitted({"new"}), PodCounts("new", {{"one", 20}})}});
  // 30 can never fit in 20: reduced to 20, with old preempted for it.
  out.push_back({"PartialPreemptsForTheReducedCount", preempting,
                 {Add(Wl("old").Prio(-4).PodSet("one", 10, {{kGpu, 1}})), Schedule(), Admitted({"old"}),
                  Add(Wl("new").Prio(4).PodSet("one", 30, {{kGpu, 1}}).Min(10)), Schedule(), Evicting({"old"}),
                  Pending({"new"}), StopEvicting(), Schedule(), Admitted({"new"}), PodCounts("new", {{"one", 20}}),
                  GpuUsage("cq-a", "a100", 20)}});
  // Room for 10 next to old, and new may not preempt: 10 without victims.
  out.push_back({"PartialTakesWhatIsFreeWhenItCannotPreempt", OneQueue(20),
                 {Add(Wl("old").PodSet("one", 10, {{kGpu, 1}})), Schedule(), Admitted({"old"}),
                  Add(Wl("new").Prio(4).PodSet("one", 30, {{kGpu, 1}}).Min(10)), Schedule(), Admitted({"old", "new"}),
                  PodCounts("new", {{"one", 10}}), GpuUsage("cq-a", "a100", 20)}});
  out.push_back({"PartialMultipleVariablePodSets", OneQueue(50),
                 {Add(Wl("new")
                          .PodSet("one", 20, {{kGpu, 1}})
                          .PodSet("two", 30, {{kGpu, 1}})
                          .Min(10)
                          .PodSet("three", 15, {{kGpu, 1}})
                          .Min(5)),
                  Schedule(), Admitted({"new"}), PodCounts("new", {{"one", 20}, {"two", 20}, {"three", 10}}),
                  GpuUsage("cq-a", "a100", 50)}});
  out.push_back({"PartialNotAvailableWhenNoPodSetMayShrink", OneQueue(2),
                 {Add(Wl("new").PodSet("ps1", 1, {{kGpu, 1}}).PodSet("ps2", 2, {{kGpu, 1}}).Min(2)), Schedule(),
                  Pending({"new"})}});
  const auto four = [](const std::string& name) {
    return Wl(name)
        .PodSet("ps1", 5, {{kGpu, 1}})
        .Min(3)
        .PodSet("ps2", 5, {{kGpu, 1}})
        .Min(4)
        .PodSet("ps3", 5, {{kGpu, 1}})
        .Min(1)
        .PodSet("ps4", 5, {{kGpu, 1}})
        .Min(2);
  };
  out.push_back({"PartialAvailable", OneQueue(15),
                 {Add(four("new")), Schedule(), Admitted({"new"}),
                  PodCounts("new", {{"ps1", 4}, {"ps2", 5}, {"ps3", 3}, {"ps4", 3}}), GpuUsage("cq-a", "a100", 15)}});
  out.push_back({"PartialOnePodSetAvailable", OneQueue(19),
                 {Add(Wl("new")
                          .PodSet("ps1", 5, {{kGpu, 1}})
                          .Min(3)
                          .PodSet("ps2", 5, {{kGpu, 1}})
                          .PodSet("ps3", 5, {{kGpu, 1}})
                          .PodSet("ps4", 5, {{kGpu, 1}})),
                  Schedule(), Admitted({"new"}), PodCounts("new", {{"ps1", 4}, {"ps2", 5}, {"ps3", 5}, {"ps4", 5}})}});
  out.push_back({"PartialDownToTheMinimum", OneQueue(10),
                 {Add(four("new")), Schedule(), Admitted({"new"}),
                  PodCounts("new", {{"ps1", 3}, {"ps2", 4}, {"ps3", 1}, {"ps4", 2}}), GpuUsage("cq-a", "a100", 10)}});
  out.push_back({"PartialUpToTheMaximum", OneQueue(20),
                 {Add(four("new")), Schedule(), Admitted({"new"}),
                  PodCounts("new", {{"ps1", 5}, {"ps2", 5}, {"ps3", 5}, {"ps4", 5}})}});
  {
    Wl big("new");
    for (int i = 1; i <= 8; ++i) big.PodSet(absl::StrCat("ps", i), 150'000, {{kGpu, 1}}).Min(1);
    out.push_back({"PartialWithoutOverflow", OneQueue(150'000),
                   {Add(big), Schedule(), Admitted({"new"}), GpuUsage("cq-a", "a100", 150'000)}});
  }
  // Kueue's partial-admission sample Job (20 pods of 1 cpu and 200Mi, at
  // least 5) in Kueue's quick-start ClusterQueue (9 cpu, 9Gi).
  out.push_back({"PartialTheKueueSampleJobInTheQuickStartQueue",
                 Docs({Rf("default-flavor"), Cq("cluster-queue", R"(
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 9Gi}
)"),
                       Lq("user-queue", "cluster-queue")}),
                 {Add(Wl("sample-job-partial-admission")
                          .Queue("user-queue")
                          .PodSet("main", 20, {{"cpu", 1}, {"memory", 200 * 1024 * 1024}})
                          .Min(5)),
                  Schedule(), Admitted({"sample-job-partial-admission"}),
                  PodCounts("sample-job-partial-admission", {{"main", 9}}),
                  AdmittedSaying("sample-job-partial-admission", "admitted with 9 of 20 pods"),
                  Usage("cluster-queue", "default-flavor", "cpu", 9)}});
  // A partially admitted gang that is preempted is admitted again, never
  // below its minimum meanwhile.
  out.push_back({"PartialGangIsAdmittedAgainAfterEviction",
                 OneQueue(20, "  preemption: {withinClusterQueue: LowerPriority}\n"),
                 {Add(Wl("new").PodSet("one", 30, {{kGpu, 1}}).Min(10)), Schedule(), PodCounts("new", {{"one", 20}}),
                  Add(Wl("vip").Prio(10).PodSet("one", 15, {{kGpu, 1}})), Schedule(), Evicting({"new"}),
                  StopEvicting(), Schedule(), Admitted({"vip"}), Pending({"new"}), Finish("vip"), Schedule(),
                  Admitted({"new"}),
                  PodCounts("new", {{"one", 20}})}});
  return out;
}

// resources.transformations (Kueue's Configuration): MIG slices charged as
// fractions of a GPU.
std::vector<Scenario> TransformationScenarios() {
  std::vector<Scenario> out;
  const std::string config = Trim(R"(
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
resources:
  transformations:
  - input: nvidia.com/mig-1g.10gb
    strategy: Replace
    outputs:
      nvidia.com/gpu: 125m
  - input: nvidia.com/mig-3g.40gb
    strategy: Retain
    outputs:
      nvidia.com/gpu: 500m
)");
  // Quota only in nvidia.com/gpu: one GPU is eight 1g.10gb slices.
  out.push_back({"MigSlicesAreChargedAsFractionsOfAGpu", Docs({kA100, GpuCq("cq-a", {"a100: 1"}), Lq("lq-a", "cq-a"), config}),
                 {Add(Wl("a").PodSet("main", 4, {{kMig1g, 1}})), Add(Wl("b").PodSet("main", 3, {{kMig1g, 1}})),
                  Add(Wl("c").PodSet("main", 2, {{kMig1g, 1}})), Schedule(), Admitted({"a", "b"}), Pending({"c"}),
                  UsageMilli("cq-a", "a100", kGpu, 875), Finish("a"), Schedule(), Admitted({"b", "c"}),
                  UsageMilli("cq-a", "a100", kGpu, 625)}});
  // Without the transformation the same slices have no quota at all.
  out.push_back({"MigSlicesWithoutATransformationHaveNoQuota", Docs({kA100, GpuCq("cq-a", {"a100: 1"}), Lq("lq-a", "cq-a")}),
                 {Add(Wl("a").PodSet("main", 1, {{kMig1g, 1}})), Schedule(), Reason("a", Code::kNoMatchingFlavor)}});
  // Retain keeps the input: the queue must cover it as well.
  out.push_back({"RetainChargesTheInputAndItsOutputs",
                 Docs({kA100,
                       Cq("cq-a", R"(
  resourceGroups:
  - coveredResources: [nvidia.com/gpu, nvidia.com/mig-3g.40gb]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 2}
      - {name: nvidia.com/mig-3g.40gb, nominalQuota: 4}
)"),
                       Lq("lq-a", "cq-a"), config}),
                 {Add(Wl("a").PodSet("main", 3, {{kMig3g, 1}})), Schedule(), Admitted({"a"}),
                  UsageMilli("cq-a", "a100", kGpu, 1500), Usage("cq-a", "a100", kMig3g, 3),
                  Add(Wl("b").PodSet("main", 2, {{kMig3g, 1}})), Schedule(), Pending({"b"})}});
  return out;
}

std::vector<Scenario> AllScenarios() {
  std::vector<Scenario> all;
  for (auto group : {GangAndFlavorScenarios, FungibilityScenarios, CohortScenarios, QueueingScenarios,
                     PreemptionScenarios, ReclaimScenarios, FairSharingScenarios, PolicyChangeScenarios,
                     StopAndReleaseScenarios, PartialAdmissionScenarios, TransformationScenarios}) {
    for (Scenario& s : group()) all.push_back(std::move(s));
  }
  return all;
}

class SchedulerScenarioTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(SchedulerScenarioTest, Runs) {
  const Scenario& sc = GetParam();
  auto policies = std::make_shared<model::PolicySet>();
  model::Diagnostics d;
  model::DecodeManifests(sc.policies, "scenario.yaml", policies.get(), &d);
  ASSERT_FALSE(d.HasErrors()) << d.ErrorSummary() << "\n" << sc.policies;
  absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(policies, sc.options);
  ASSERT_THAT(s, IsOk());
  ScenarioRun run(std::move(s).value());
  for (size_t i = 0; i < sc.steps.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("step ", i + 1, ": ", sc.steps[i].what));
    sc.steps[i].run(run);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, SchedulerScenarioTest, ::testing::ValuesIn(AllScenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& p) { return p.param.name; });

TEST(SchedulerScenarioTest, ScenarioNamesAreUnique) {
  std::set<std::string> names;
  for (const Scenario& s : AllScenarios()) EXPECT_TRUE(names.insert(s.name).second) << s.name;
  EXPECT_GE(names.size(), 45u);
}

}  // namespace
}  // namespace gangkeeper::broker
