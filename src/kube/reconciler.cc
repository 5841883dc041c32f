// gangkeeper: the reconciler (see reconciler.h).
#include "gangkeeper/kube/reconciler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/workload/observe.h"

namespace gangkeeper::kube {
namespace {

using nlohmann::json;

// pod set -> resource -> flavor, from the admitted-flavors annotation.
std::map<std::string, std::map<std::string, std::string>> FlavorsOf(const workload::ObservedObject& o) {
  std::map<std::string, std::map<std::string, std::string>> out;
  auto it = o.annotations.find(std::string(workload::kAdmittedFlavorsAnnotation));
  if (it == o.annotations.end()) return out;
  json record = json::parse(it->second, nullptr, false);
  if (!record.is_object() || !record.contains("podSets") || !record["podSets"].is_array()) return out;
  for (const json& ps : record["podSets"]) {
    if (!ps.is_object() || !ps.contains("name") || !ps["name"].is_string()) continue;
    auto& m = out[ps["name"].get<std::string>()];
    if (ps.contains("flavors") && ps["flavors"].is_object()) {
      for (const auto& [res, flavor] : ps["flavors"].items()) {
        if (flavor.is_string()) m[res] = flavor.get<std::string>();
      }
    }
  }
  return out;
}

// The admission time the admitted-flavors annotation records, if any.
std::optional<absl::Time> AdmittedAtOf(const workload::ObservedObject& o) {
  auto it = o.annotations.find(std::string(workload::kAdmittedFlavorsAnnotation));
  if (it == o.annotations.end()) return std::nullopt;
  json record = json::parse(it->second, nullptr, false);
  if (!record.is_object() || !record.contains("admittedAt") || !record["admittedAt"].is_string()) return std::nullopt;
  absl::Time t;
  if (!base::ParseRfc3339(record["admittedAt"].get<std::string>(), &t)) return std::nullopt;
  return t;
}

bool SameTolerations(const std::vector<model::Toleration>& a, const std::vector<model::Toleration>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const model::Toleration& x, const model::Toleration& y) {
    return x.key == y.key && x.op == y.op && x.value == y.value && x.effect == y.effect &&
           x.toleration_seconds == y.toleration_seconds;
  });
}

// Whether the stored object asks for something else than the tracked
// image: what the scheduler places and orders by. Not limits: the broker
// keeps none (broker.cc, Lean), so comparing them would send an Update for
// every event of a pending workload that sets any.
bool SchedulingDiffers(const workload::Workload& a, const workload::Workload& b) {
  if (a.queue_name != b.queue_name || a.priority != b.priority || a.priority_class != b.priority_class ||
      a.preemption_policy != b.preemption_policy || a.pod_sets.size() != b.pod_sets.size()) {
    return true;
  }
  for (size_t i = 0; i < a.pod_sets.size(); ++i) {
    const workload::PodSet& x = a.pod_sets[i];
    const workload::PodSet& y = b.pod_sets[i];
    if (x.name != y.name || x.count != y.count || x.requests != y.requests ||
        x.node_selector != y.node_selector || !SameTolerations(x.tolerations, y.tolerations)) {
      return true;
    }
  }
  return false;
}

// One pod of a pod group, as last seen.
struct Member {
  std::string uid;
  bool held = false;
  bool finished = false;
  int64_t ready = 0;  // 1 when its Ready condition is True (or it succeeded)
  workload::Workload workload;
  std::map<std::string, std::map<std::string, std::string>> flavors;
  std::optional<absl::Time> admitted_at;
};

// What the reconciler has handed to the broker and not yet seen answered,
// per workload. Watch events go to the broker without waiting for each
// answer: the broker writes everything queued in one journal append, so a
// burst of events costs one fsync instead of one each (waiting for every
// answer made a watch as slow as the journal's fsync: Kueue's large-scale
// shape, a thousand Jobs created at once, queued behind it for seconds).
// Shared with the answers, which may come on any thread and after the
// reconciler is gone.
struct InFlight {
  absl::Mutex mu;
  std::map<broker::WorkloadKey, int> unanswered_of ABSL_GUARDED_BY(mu);
  size_t unanswered ABSL_GUARDED_BY(mu) = 0;
};

// At most this many events unanswered; one more waits for all of them.
constexpr size_t kMaxInFlight = 1024;
// How long a wait for answers may last (the broker answers every event,
// within its acknowledgement timeout, or when it stops).
constexpr absl::Duration kSettleLimit = absl::Minutes(2);

}  // namespace

struct Reconciler::Impl {
  Client* client = nullptr;
  broker::EventQueue* events = nullptr;
  const broker::SnapshotSource* view = nullptr;
  ReconcilerOptions options;
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  absl::Mutex mu;
  bool stop_flag ABSL_GUARDED_BY(mu) = false;
  std::map<workload::Kind, bool> synced_kinds ABSL_GUARDED_BY(mu);
  // Pod groups: namespace/group -> pod name -> member (pod threads only).
  std::map<broker::WorkloadKey, std::map<std::string, Member>> groups;
  // How each kind is listed (the version served, the label selector the
  // API server accepts), once its thread listed it: for the confirmer.
  struct Listing {
    workload::KindInfo kind;
    std::string selector;
  };
  std::map<workload::Kind, Listing> listings ABSL_GUARDED_BY(mu);
  // The confirmer's bookkeeping: when each unconfirmed instance was first
  // seen unconfirmed (confirmer thread only).
  std::map<broker::InstanceKey, absl::Time> unconfirmed_since;
  // RereadTrainJobs was called (the confirmer's thread reads them).
  bool reread ABSL_GUARDED_BY(mu) = false;
  // Events handed to the broker, not yet answered (Send).
  std::shared_ptr<InFlight> in_flight = std::make_shared<InFlight>();

  // Waits up to `d`, or until stopping or a reread is asked for. False when
  // stopping; `*do_reread` says whether one was asked for (and takes it).
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stop_flag || reread; }
  bool SleepOrReread(absl::Duration d, bool* do_reread) {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(this, &Impl::Woken), d);
    *do_reread = reread;
    reread = false;
    return !stop_flag;
  }

  bool Sleep(absl::Duration d) {
    absl::MutexLock lock(&mu);
    mu.AwaitWithTimeout(absl::Condition(&stop_flag), d);
    return !stop_flag;
  }

  void MarkSynced(workload::Kind k) {
    absl::MutexLock lock(&mu);
    synced_kinds[k] = true;
  }

  std::string Selector() const {
    return options.manage_jobs_without_queue_name ? "" : std::string(workload::kQueueNameLabel);
  }

  workload::ExtractOptions Extract() const {
    workload::ExtractOptions o;
    o.manage_jobs_without_queue_name = options.manage_jobs_without_queue_name;
    o.training_runtime = options.training_runtime;
    return o;
  }

  void Check(const absl::Status& s, const std::string& what) {
    if (!s.ok()) log->warn("reconcile {}: {}", what, s.message());
  }

  // Hands `e`, about workload `key`, to the broker without waiting for its
  // answer (InFlight). The broker applies events in the order they are
  // handed over, so what follows is applied after it; a failure is logged,
  // as Check does.
  void Send(const broker::WorkloadKey& key, broker::Event e, std::string what) {
    bool full = false;
    {
      absl::MutexLock lock(&in_flight->mu);
      full = in_flight->unanswered >= kMaxInFlight;
    }
    if (full) SettleAll();
    {
      absl::MutexLock lock(&in_flight->mu);
      ++in_flight->unanswered_of[key];
      ++in_flight->unanswered;
    }
    // Not under the lock: an answer may come at once, on this thread.
    events->SubmitAsync(std::move(e), [flights = in_flight, key, what = std::move(what), log = log](absl::Status s) {
      if (!s.ok()) log->warn("reconcile {}: {}", what, s.message());
      absl::MutexLock lock(&flights->mu);
      auto it = flights->unanswered_of.find(key);
      if (it != flights->unanswered_of.end() && --it->second <= 0) flights->unanswered_of.erase(it);
      --flights->unanswered;
    });
  }

  // Waits until the broker answered every event sent about `key`, so that
  // the snapshot shows them before a new event of it is decided on.
  void Settle(const broker::WorkloadKey& key) {
    InFlight* f = in_flight.get();
    auto answered = [f, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) { return f->unanswered_of.count(key) == 0; };
    absl::MutexLock lock(&f->mu);
    if (!f->mu.AwaitWithTimeout(absl::Condition(&answered), kSettleLimit)) {
      log->warn("reconcile: the broker has not answered for {} after {}", key.name, absl::FormatDuration(kSettleLimit));
    }
  }

  // Waits until the broker answered every event sent: before what reads
  // all workloads (a list's ForgetMissing) or says the kind is in sync.
  void SettleAll() {
    InFlight* f = in_flight.get();
    auto answered = [f]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) { return f->unanswered == 0; };
    absl::MutexLock lock(&f->mu);
    if (!f->mu.AwaitWithTimeout(absl::Condition(&answered), kSettleLimit)) {
      log->warn("reconcile: the broker has not answered {} event(s) after {}", f->unanswered,
                absl::FormatDuration(kSettleLimit));
    }
  }

  // A job kind (or a single pod) seen in a list or a watch event. `seen`
  // (a list) collects the instances the cluster has.
  void Observe(const workload::KindInfo& kind, const json& object, std::set<broker::InstanceKey>* seen) {
    std::string text = object.dump();
    absl::StatusOr<workload::ObservedObject> o =
        workload::ObserveObject(text, kind, *view->snapshot()->shared_policies(), Extract());
    if (o.ok()) KeepIfHeld(kind, *o, std::move(text));
    if (o.ok() && !o->workload.has_value() && workload::IsRuntimeUnknown(o->extract_error)) {
      WaitForRuntime(*o, seen);
      return;
    }
    if (!o.ok() || !o->workload.has_value()) return;  // not a workload gangkeeper can place
    const workload::Workload& w = *o->workload;
    if (w.queue_name.empty() || w.owned_by_managed_object) return;
    if (kind.kind == workload::Kind::kPod && !w.pod_group_name.empty()) {
      ObservePodOfGroup(*o, seen);
      return;
    }
    const broker::WorkloadKey key = broker::KeyOf(w);
    if (seen != nullptr) seen->insert(broker::InstanceOf(key, o->uid));
    const std::string name = absl::StrCat(kind.name, " ", key.namespace_name, "/", key.name);
    Settle(key);
    std::shared_ptr<const broker::Snapshot> snap = view->snapshot();
    const broker::WorkloadInfo* info = snap->FindInstance(key, o->uid);
    const bool same = info != nullptr && info->workload != nullptr;
    if (o->finished) {
      if (same) Send(key, broker::Event::Finish(key, o->uid), name);
      return;
    }
    if (o->deleting) return;  // its pods may still run: the quota goes with DELETED
    if (!same) {
      if (o->held) {
        Send(key, broker::Event::Add(w), name);
      } else {
        if (o->annotations.count(std::string(workload::kAdmittedFlavorsAnnotation)) == 0) {
          log->warn("{} runs but gangkeeper did not release it (unsuspended by someone else); its quota is counted",
                    name);
        }
        Send(key, broker::Event::Adopt(w, FlavorsOf(*o), AdmittedAtOf(*o), o->running_counts), name);
      }
      return;
    }
    if (!o->held && info->phase == broker::Phase::kPending) {
      log->warn("{} was unsuspended by someone else while queued; its quota is counted", name);
      Send(key, broker::Event::Adopt(w, FlavorsOf(*o), AdmittedAtOf(*o), o->running_counts), name);
      return;
    }
    ReportReadiness(*info, key, o->uid, o->ready_pods, name);
    // A workload known only from a review is confirmed (from now on as
    // stored); a pending one takes what changed in the stored object.
    if (info->workload->unconfirmed ||
        (info->phase == broker::Phase::kPending && SchedulingDiffers(*info->workload, w))) {
      Send(key, broker::Event::Update(w), name);
    }
  }

  // The release's starting point (HeldObjects): the text of a job object
  // that is held back, as read; anything else is forgotten. Pods are not
  // kept (a group is listed at release).
  void KeepIfHeld(const workload::KindInfo& kind, const workload::ObservedObject& o, std::string text) {
    if (options.held_objects == nullptr || kind.kind == workload::Kind::kPod) return;
    const broker::WorkloadKey key{o.namespace_name, o.name, kind.kind, false};
    const bool queued = o.workload.has_value() && !o.workload->queue_name.empty() && !o.workload->owned_by_managed_object;
    if (queued && o.held && !o.finished && !o.deleting) {
      options.held_objects->Put(key, o.uid, o.resource_version, std::move(text));
    } else {
      options.held_objects->Forget(key);
    }
  }

  // A TrainJob whose runtime is not known (yet) is not registered: its pod
  // sets are the runtime's. RereadTrainJobs reads it again when the runtime
  // shows. One the broker tracks already (its runtime deleted since) is
  // kept as it is: a list does not take it for gone.
  void WaitForRuntime(const workload::ObservedObject& o, std::set<broker::InstanceKey>* seen) {
    const broker::WorkloadKey key{o.namespace_name, o.name, workload::Kind::kTrainJob, false};
    if (seen != nullptr) seen->insert(broker::InstanceOf(key, o.uid));
    Settle(key);
    if (o.finished || o.deleting || view->snapshot()->FindInstance(key, o.uid) != nullptr) return;
    log->info("TrainJob {}/{} waits for its runtime, not queued yet: {}", o.namespace_name, o.name,
              o.extract_error.message());
  }

  // RereadTrainJobs: one list of TrainJobs (once their thread listed them),
  // each observed again.
  void Reread() {
    Listing listing;
    {
      absl::MutexLock lock(&mu);
      auto l = listings.find(workload::Kind::kTrainJob);
      if (l == listings.end()) return;  // its first list reads them all
      listing = l->second;
    }
    ListOptions lo;
    lo.label_selector = listing.selector;
    absl::StatusOr<ListResult> list = client->List(ResourcePath(listing.kind, ""), lo);
    if (!list.ok()) {
      log->warn("reading TrainJobs again for a changed runtime: {}", list.status().message());
      return;
    }
    for (const json& item : list->items) Observe(listing.kind, item, nullptr);
  }

  // waitForPodsReady: a gang holding quota hears how many of its pods are
  // ready whenever its object's count differs from what the broker has.
  void ReportReadiness(const broker::WorkloadInfo& info, const broker::WorkloadKey& key, const std::string& uid,
                       int64_t ready, const std::string& name) {
    if (info.phase != broker::Phase::kReserved && info.phase != broker::Phase::kRunning) return;
    if (info.ready_pods == ready) return;
    Send(key, broker::Event::PodsReady(key, uid, ready), name);
  }

  void ObservePodOfGroup(const workload::ObservedObject& o, std::set<broker::InstanceKey>* seen) {
    const workload::Workload& w = *o.workload;
    const broker::WorkloadKey key = broker::KeyOf(w);
    if (seen != nullptr) seen->insert(broker::InstanceOf(key, ""));
    Member& m = groups[key][o.name];
    m.uid = o.uid;
    m.held = o.held;
    m.finished = o.finished;
    m.ready = o.ready_pods;
    m.workload = w;
    m.flavors = FlavorsOf(o);
    m.admitted_at = AdmittedAtOf(o);
    EvaluateGroup(key);
  }

  void EvaluateGroup(const broker::WorkloadKey& key) {
    auto g = groups.find(key);
    const std::string name = absl::StrCat("pod group ", key.namespace_name, "/", key.name);
    Settle(key);
    std::shared_ptr<const broker::Snapshot> snap = view->snapshot();
    const broker::WorkloadInfo* info = snap->Find(key);
    if (g == groups.end() || g->second.empty()) {
      if (info != nullptr) Send(key, broker::Event::Remove(key, ""), name);
      if (g != groups.end()) groups.erase(g);
      return;
    }
    bool all_finished = true, any_running = false;
    for (const auto& [pod, m] : g->second) {
      all_finished = all_finished && m.finished;
      any_running = any_running || (!m.held && !m.finished);
    }
    if (all_finished) {
      if (info != nullptr) Send(key, broker::Event::Finish(key, ""), name);
      return;
    }
    // Every live pod is a member (the broker ignores names it knows).
    for (const auto& [pod, m] : g->second) {
      if (!m.finished) Send(key, broker::Event::Add(m.workload), name);
    }
    Settle(key);
    snap = view->snapshot();
    info = snap->Find(key);
    bool any_held = false;
    for (const auto& [pod, m] : g->second) any_held = any_held || (m.held && !m.finished);
    if (any_held && info != nullptr &&
        (info->phase == broker::Phase::kRunning || info->phase == broker::Phase::kReserved)) {
      // A replacement pod of a running group (or of one whose release is
      // still in flight: the actuator does the two in order).
      events->Submit(broker::Event::Rerelease(key));
      return;
    }
    if (info != nullptr) {
      int64_t ready = 0;
      for (const auto& [pod, m] : g->second) ready += m.ready;
      ReportReadiness(*info, key, "", ready, name);
    }
    if (any_running && info != nullptr && info->phase == broker::Phase::kPending) {
      const Member& first = g->second.begin()->second;
      Send(key, broker::Event::Adopt(info->workload ? *info->workload : first.workload, first.flavors, first.admitted_at),
           name);
    }
  }

  void Deleted(const workload::KindInfo& kind, const json& object) {
    const json& meta = object.contains("metadata") ? object["metadata"] : json();
    if (!meta.is_object()) return;
    const std::string ns = meta.value("namespace", "");
    const std::string obj_name = meta.value("name", "");
    const std::string uid = meta.value("uid", "");
    if (kind.kind == workload::Kind::kPod) {
      std::string group;
      if (meta.contains("labels") && meta["labels"].is_object()) {
        group = meta["labels"].value(std::string(workload::kPodGroupNameLabel), "");
      }
      if (!group.empty()) {
        const broker::WorkloadKey key{ns, group, workload::Kind::kPod, true};
        auto g = groups.find(key);
        if (g != groups.end()) g->second.erase(obj_name);
        EvaluateGroup(key);
        return;
      }
    }
    const broker::WorkloadKey key{ns, obj_name, kind.kind, false};
    if (options.held_objects != nullptr) options.held_objects->Forget(key);
    Send(key, broker::Event::Remove(key, uid), absl::StrCat(kind.name, " ", ns, "/", obj_name));
  }

  // After a full list (authoritative): every instance the broker tracks of
  // this kind that the list did not show is gone, compared by uid, so an
  // object deleted and recreated under its name while we were not
  // watching frees what the old one held. An instance registered since
  // shortly before the list (its object may not be stored yet) is left to
  // the watch that follows.
  void ForgetMissing(const workload::KindInfo& kind, const std::set<broker::InstanceKey>& seen,
                     absl::Time listed_at) {
    SettleAll();  // what the list itself registered shows in the snapshot
    std::vector<std::pair<broker::WorkloadKey, std::string>> gone;
    view->snapshot()->ForEachWorkload([&](const broker::WorkloadInfo& info) {
      if (info.workload == nullptr || info.key.kind != kind.kind) return;
      const broker::InstanceKey instance = broker::InstanceOf(info.key, info.workload->uid);
      if (seen.count(instance) != 0) return;
      if (info.phase == broker::Phase::kPending && info.created_at > listed_at - options.list_grace) return;
      gone.emplace_back(info.key, instance.uid);
    });
    for (const auto& [key, uid] : gone) {
      if (kind.kind == workload::Kind::kPod) groups.erase(key);
      Send(key, broker::Event::Remove(key, uid), absl::StrCat(kind.name, " ", key.namespace_name, "/", key.name));
    }
  }

  void Confirm();

  // Watches `path` from resourceVersion `rv` (that of the list just made)
  // until it expires; resumes after ordinary ends; returns to list again
  // every resync period (what the broker tracks for objects that were
  // never stored, e.g. refused by another webhook after ours, goes). False
  // when stopping.
  bool WatchUntilResync(const workload::KindInfo& kind, const std::string& path, const std::string& selector,
                        std::string rv) {
    int failures = 0;
    const base::Stopwatch since_list;
    while (!stopping.load() && since_list.Elapsed() < options.resync) {
      WatchOptions wo;
      wo.label_selector = selector;
      wo.resource_version = rv;
      wo.timeout_seconds = options.watch_timeout_seconds;
      absl::Status s = client->Watch(path, wo, [&](const WatchEvent& e) {
        if (e.object.is_object() && e.object.contains("metadata") && e.object["metadata"].is_object()) {
          std::string new_rv = e.object["metadata"].value("resourceVersion", "");
          if (!new_rv.empty()) rv = new_rv;
        }
        if (e.type == "ADDED" || e.type == "MODIFIED") {
          Observe(kind, e.object, nullptr);
        } else if (e.type == "DELETED") {
          Deleted(kind, e.object);
        }
        failures = 0;
        return !stopping.load();
      });
      if (stopping.load()) return false;
      if (absl::IsOutOfRange(s)) {
        log->info("watch {} expired at resourceVersion {}; listing again", path, rv);
        break;
      }
      if (!s.ok()) {
        log->warn("watch {}: {}", path, s.message());
        if (++failures > 5) break;  // list again
        if (!Sleep(options.error_backoff)) return false;
      }
    }
    return true;
  }

  void Run(const workload::KindInfo& served_kind) {
    // MPIJob is served as kubeflow.org/v2beta1 (mpi-operator) or v1 (the
    // training operator): a 404 tries the other.
    std::vector<workload::KindInfo> versions = {served_kind};
    if (served_kind.kind == workload::Kind::kMPIJob) {
      workload::KindInfo v1 = served_kind;
      v1.version = "v1";
      versions.push_back(v1);
    }
    size_t version = 0;
    // An API server that refuses the existence selector (400) is asked
    // without one; objects without the queue label are skipped here.
    std::string selector = Selector();
    while (!stopping.load()) {
      const workload::KindInfo& kind = versions[version];
      const std::string path = ResourcePath(kind, "");
      ListOptions lo;
      lo.label_selector = selector;
      const absl::Time listed_at = options.clock->Now();
      absl::StatusOr<ListResult> list = client->List(path, lo);
      if (!list.ok()) {
        if (stopping.load()) return;
        if (HttpCode(list.status()) == 400 && !selector.empty()) {
          log->warn("list {} refused the label selector {} ({}); listing everything and filtering here", path,
                    selector, list.status().message());
          selector.clear();
          continue;
        }
        if (HttpCode(list.status()) == 404 && version + 1 < versions.size()) {
          ++version;
          continue;
        }
        if (HttpCode(list.status()) == 404) {
          version = 0;
          log->info("{} is not served by the API server (CRD not installed?); checking again in {}", path,
                    absl::FormatDuration(options.not_served_recheck));
          MarkSynced(kind.kind);
          if (!Sleep(options.not_served_recheck)) return;
        } else {
          log->warn("list {}: {}", path, list.status().message());
          if (!Sleep(options.error_backoff)) return;
        }
        continue;
      }
      {
        absl::MutexLock lock(&mu);
        listings[kind.kind] = Listing{kind, selector};
      }
      if (kind.kind == workload::Kind::kPod) groups.clear();
      std::set<broker::InstanceKey> seen;
      for (const json& item : list->items) Observe(kind, item, &seen);
      ForgetMissing(kind, seen, listed_at);
      SettleAll();  // in sync once the broker has it all
      MarkSynced(kind.kind);
      if (!WatchUntilResync(kind, path, selector, list->resource_version)) return;
    }
  }
};

// Workloads known only from reviews for longer than confirm_grace: one
// list per kind that has some, authoritative as any list (one call, not a
// GET each: a flood of forged reviews must not become a flood of calls to
// the API server). Found, the object confirms it; not found, it is gone.
void Reconciler::Impl::Confirm() {
  const absl::Time now = options.clock->Now();
  std::shared_ptr<const broker::Snapshot> snap = view->snapshot();
  std::map<broker::InstanceKey, absl::Time> still;
  std::map<workload::Kind, std::vector<broker::InstanceKey>> stale;
  if (snap->unconfirmed_count() > 0) {
    snap->ForEachWorkload([&](const broker::WorkloadInfo& info) {
      if (info.workload == nullptr || !info.workload->unconfirmed) return;
      const broker::InstanceKey instance = broker::InstanceOf(info.key, info.workload->uid);
      auto seen = unconfirmed_since.find(instance);
      const absl::Time since = seen != unconfirmed_since.end() ? seen->second : now;
      still[instance] = since;
      if (now - since >= options.confirm_grace) stale[info.key.kind].push_back(instance);
    });
  }
  unconfirmed_since = std::move(still);
  for (const auto& [kind, instances] : stale) {
    Listing listing;
    {
      absl::MutexLock lock(&mu);
      auto l = listings.find(kind);
      if (l == listings.end()) continue;  // not listed yet: its first list decides
      listing = l->second;
    }
    ListOptions lo;
    lo.label_selector = listing.selector;
    absl::StatusOr<ListResult> list = client->List(ResourcePath(listing.kind, ""), lo);
    if (!list.ok()) {
      log->warn("confirming {} {} workload(s) known only from reviews: {}", instances.size(), listing.kind.name,
                list.status().message());
      continue;
    }
    std::map<std::string, const json*> by_uid;
    for (const json& item : list->items) {
      if (item.contains("metadata") && item["metadata"].is_object()) {
        by_uid[item["metadata"].value("uid", "")] = &item;
      }
    }
    for (const broker::InstanceKey& instance : instances) {
      const std::string name = absl::StrCat(listing.kind.name, " ", instance.key.namespace_name, "/",
                                            instance.key.name);
      auto found = by_uid.find(instance.uid);
      if (found != by_uid.end()) {
        // Confirmed, as stored (Update changes nothing it no longer tracks:
        // the kind's own thread may have seen the object go meanwhile).
        absl::StatusOr<workload::ObservedObject> o =
            workload::ObserveObject(found->second->dump(), listing.kind, *view->snapshot()->shared_policies(), Extract());
        if (o.ok() && o->workload.has_value()) {
          absl::Status s = events->SubmitAndWait(broker::Event::Update(*o->workload));
          if (!absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) Check(s, name);
        }
        continue;
      }
      log->info("{} (uid {}) was never stored by the API server: the review that registered it had no object "
                "behind it (refused by a later webhook, or not sent by the API server); dropped, it held nothing",
                name, instance.uid);
      Check(events->SubmitAndWait(broker::Event::Remove(instance.key, instance.uid)), name);
      unconfirmed_since.erase(instance);
    }
  }
}

Reconciler::Reconciler(Client* client, broker::EventQueue* events, const broker::SnapshotSource* view,
                       ReconcilerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->client = client;
  impl_->events = events;
  impl_->view = view;
  impl_->options = options;
  GK_CHECK(options.clock != nullptr);
}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  for (const workload::KindInfo& kind : workload::ManagedKinds()) {
    {
      absl::MutexLock lock(&impl_->mu);
      impl_->synced_kinds[kind.kind] = false;
    }
    impl_->threads.emplace_back([this, &kind] { impl_->Run(kind); });
  }
  impl_->threads.emplace_back([this] {
    const base::Stopwatch since_confirm;
    absl::Duration last_confirm = absl::ZeroDuration();
    bool do_reread = false;
    while (impl_->SleepOrReread(impl_->options.confirm_check, &do_reread)) {
      if (do_reread) impl_->Reread();
      if (since_confirm.Elapsed() - last_confirm >= impl_->options.confirm_check || !do_reread) {
        last_confirm = since_confirm.Elapsed();
        impl_->Confirm();
      }
    }
  });
}

void Reconciler::Stop() {
  impl_->stopping.store(true);
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stop_flag = true;
  }
  if (!impl_->threads.empty()) impl_->client->Shutdown();
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
}

void Reconciler::RereadTrainJobs() {
  absl::MutexLock lock(&impl_->mu);
  impl_->reread = true;
}

bool Reconciler::synced() const {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->synced_kinds.empty()) return false;
  for (const auto& [kind, done] : impl_->synced_kinds) {
    if (!done) return false;
  }
  return true;
}

}  // namespace gangkeeper::kube
