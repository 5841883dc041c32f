// gangkeeper: the Kubernetes actuator (see actuator.h).
#include "gangkeeper/kube/actuator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/base/status_macros.h"
#include "gangkeeper/workload/hold.h"
#include "gangkeeper/workload/observe.h"
#include "src/kube/actuator_json.h"
#include "src/kube/trainjob_ops.h"

namespace gangkeeper::kube {
namespace {

using nlohmann::json;

using actuator_json::At;
using actuator_json::Str;
using actuator_json::FinishedObject;
using actuator_json::TolerationJson;
using actuator_json::Normalized;
using actuator_json::Contains;
using actuator_json::Op;
using actuator_json::Remove;
using actuator_json::AnnotationPath;
using actuator_json::FullParallelismPath;
using actuator_json::AppendParallelismOps;
using actuator_json::JsonDocProbe;
using actuator_json::Held;
using actuator_json::AppendOps;
using actuator_json::PlacementOps;
using actuator_json::RestoreOps;
using actuator_json::Describe;

struct Order {
  bool release = true;
  absl::Time given;  // when the broker gave it (a retried suspend keeps it)
  broker::ReleaseOrder rel;
  broker::SuspendOrder sus;
  const broker::WorkloadKey& key() const { return release ? rel.key : sus.key; }
};

}  // namespace

struct KubeActuator::Impl {
  Client* client = nullptr;
  ActuatorOptions options;
  ActuatorCallbacks callbacks;
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");

  // The orders not yet in hand, per workload, in the order given.
  struct Line {
    std::deque<Order> orders;
    bool busy = false;  // a worker holds an order of this workload
  };
  mutable absl::Mutex mu;
  std::map<broker::WorkloadKey, Line> lines ABSL_GUARDED_BY(mu);
  // The workloads with queued orders and none in hand, in the order they
  // became so: a workload is here exactly when its line is not busy and
  // not empty, so Take is O(1) however many orders wait behind busy ones.
  std::deque<broker::WorkloadKey> ready ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  ActuatorStats stats ABSL_GUARDED_BY(mu);
  std::vector<std::thread> workers;

  // Queues `o` behind the orders given before it for its workload, first
  // taking out the queued orders of the same uid it makes pointless (the
  // rules in actuator.h). Orders in hand are never touched: they finish.
  // The dropped orders go unanswered; that is safe because the order that
  // replaces them answers the broker for the same instance: a suspend's
  // Stopped (the broker, having evicted the gang, ignores a release answer
  // for it: Scheduler::ReleaseSucceeded / ReleaseFailed take only a reserved
  // instance), or the newer release's or suspend's own answer.
  void Enqueue(Order o) {
    std::vector<Order> superseded;  // observed outside the lock
    {
      absl::MutexLock lock(&mu);
      if (stopping) return;
      ++stats.given;
      Line& line = lines[o.key()];
      const bool was_ready = !line.busy && !line.orders.empty();
      const std::string& uid = o.release ? o.rel.uid : o.sus.uid;
      for (auto it = line.orders.begin(); it != line.orders.end();) {
        const std::string& queued_uid = it->release ? it->rel.uid : it->sus.uid;
        // A suspend replaces releases and suspends of its uid; a release
        // replaces releases (a queued suspend of the uid stays before it).
        const bool replaced = queued_uid == uid && (!o.release || it->release);
        if (!replaced) {
          ++it;
          continue;
        }
        if (it->release && !o.release) {
          ++stats.coalesced_releases;
        } else {
          ++stats.merged;
        }
        superseded.push_back(std::move(*it));
        it = line.orders.erase(it);
      }
      if (!line.busy && !was_ready) ready.push_back(o.key());
      line.orders.push_back(std::move(o));
    }
    for (const Order& d : superseded) {
      log->info("{} of workload={}/{} not sent: a later order for it took its place",
                d.release ? "release" : "suspension", d.key().namespace_name, d.key().name);
      Observe(d, /*ok=*/true, "superseded");
    }
  }

  // The oldest order of a workload that has none in hand; false once
  // stopping.
  bool Take(Order* out) {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu) { return self->stopping || !self->ready.empty(); },
        this));
    if (stopping) return false;
    const broker::WorkloadKey key = std::move(ready.front());
    ready.pop_front();
    Line& line = lines[key];
    GK_DCHECK(!line.busy && !line.orders.empty());
    *out = std::move(line.orders.front());
    line.orders.pop_front();
    line.busy = true;
    return true;
  }

  // The worker is done with `key`'s order in hand; `retry`, when set, goes
  // back in its line unless a later order of the same uid is queued (that
  // one carries the broker's current wish).
  void Done(const broker::WorkloadKey& key, std::optional<Order> retry = std::nullopt) {
    absl::MutexLock lock(&mu);
    auto it = lines.find(key);
    if (it == lines.end()) return;
    Line& line = it->second;
    line.busy = false;
    if (retry.has_value() && !stopping) {
      const std::string& uid = retry->release ? retry->rel.uid : retry->sus.uid;
      const bool newer = std::any_of(line.orders.begin(), line.orders.end(), [&](const Order& q) {
        return (q.release ? q.rel.uid : q.sus.uid) == uid;
      });
      if (!newer) line.orders.push_back(*std::move(retry));
    }
    if (line.orders.empty()) {
      lines.erase(it);
    } else {
      ready.push_back(key);
    }
  }

  void Observe(const Order& o, bool ok, const char* dropped = nullptr) {
    if (!options.observe) return;
    ActuationOutcome out;
    out.action = o.release ? "release" : "suspend";
    const std::shared_ptr<const workload::Workload>& w = o.release ? o.rel.workload : o.sus.workload;
    out.kind = w != nullptr ? std::string(workload::InfoFor(w->kind).name) : "other";
    out.ok = ok;
    out.took = options.clock->Now() - o.given;
    out.dropped = dropped;
    options.observe(out);
  }

  // Whether the broker still wants `o` (ActuatorOptions::release_wanted /
  // suspend_wanted).
  bool Wanted(const Order& o) const {
    if (o.release) return !options.release_wanted || options.release_wanted(o.rel);
    return !options.suspend_wanted || options.suspend_wanted(o.sus);
  }

  void Run() {
    Order o;
    while (Take(&o)) {
      if (!Gate().ok()) {
        // Not the leader (any more): the leader sends again what no one
        // confirmed, so the order goes unanswered.
        log->info("{} of workload={}/{} dropped: this replica does not lead", o.release ? "release" : "suspension",
                  o.release ? o.rel.key.namespace_name : o.sus.key.namespace_name,
                  o.release ? o.rel.key.name : o.sus.key.name);
        Done(o.key());
        continue;
      }
      if (!Wanted(o)) {
        // Stale: the instance finished, went, or its phase moved on. Its
        // answer would be dropped by the broker as stale, and nothing waits
        // for it, so it goes unanswered (ActuatorOptions::release_wanted).
        log->info("{} of workload={}/{} not sent: the broker no longer wants it",
                  o.release ? "release" : "suspension", o.key().namespace_name, o.key().name);
        {
          absl::MutexLock lock(&mu);
          ++(o.release ? stats.stale_releases : stats.stale_suspends);
        }
        Observe(o, /*ok=*/true, "stale");
        Done(o.key());
        continue;
      }
      {
        absl::MutexLock lock(&mu);
        ++stats.carried_out;
      }
      if (o.release) {
        std::string detail;
        absl::Status s = DoRelease(o.rel, &detail);
        if (s.ok()) {
          log->info("released workload={}/{} {}", o.rel.key.namespace_name, o.rel.key.name, detail);
        } else {
          log->warn("release failed workload={}/{}: {}", o.rel.key.namespace_name, o.rel.key.name, s.message());
        }
        Observe(o, s.ok());
        if (callbacks.released) callbacks.released(o.rel.key, o.rel.uid, s, detail);
      } else {
        std::string detail;
        absl::Status s = DoSuspend(o.sus, &detail);
        Observe(o, s.ok());
        if (s.ok()) {
          log->info("stopped workload={}/{} {}", o.sus.key.namespace_name, o.sus.key.name, detail);
          if (callbacks.stopped) callbacks.stopped(o.sus.key, o.sus.uid, detail);
        } else {
          // Quota stays held while the gang may still run; try again after
          // a pause (Stop ends it), unless a later order of the same uid
          // came meanwhile. The workload stays busy, so nothing of it
          // overtakes the retry.
          log->warn("suspend failed workload={}/{}: {}; retrying", o.sus.key.namespace_name, o.sus.key.name,
                    s.message());
          const broker::WorkloadKey key = o.key();
          {
            absl::MutexLock lock(&mu);
            if (!stopping) mu.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(2));
          }
          Done(key, std::move(o));
          continue;
        }
      }
      Done(o.key());
    }
  }

  // The kind at the version the object was made with: MPIJob exists as
  // kubeflow.org/v2beta1 (mpi-operator) and kubeflow.org/v1 (the training
  // operator).
  const workload::KindInfo* KindOf(const std::shared_ptr<const workload::Workload>& w) {
    if (w == nullptr) return nullptr;
    const workload::KindInfo& base = workload::InfoFor(w->kind);
    static const workload::KindInfo kMpiJobV1 = [] {
      workload::KindInfo k = workload::InfoFor(workload::Kind::kMPIJob);
      k.version = "v1";
      return k;
    }();
    if (w->kind == workload::Kind::kMPIJob && absl::EndsWith(w->api_version, "/v1")) return &kMpiJobV1;
    return &base;
  }

  // FailedPrecondition when this replica may not send (may_send).
  absl::Status Gate() const {
    if (!options.may_send || options.may_send()) return absl::OkStatus();
    return absl::FailedPreconditionError("this replica no longer leads: nothing sent");
  }

  // The tests that open a release's or suspension's PATCH: the object is
  // still `uid`, and still at the resourceVersion of the read `obj` the
  // patch was built from. Without the second, a Job that finished between
  // the GET and the PATCH was patched all the same (the e2e bench counted
  // 2 to 5 suspensions a run that reached completed Jobs); with it the
  // PATCH fails with 422, the object is read again, and FinishedObject
  // stops there.
  static json Guards(const json& obj, const std::string& uid) {
    json ops = json::array({Op("test", "/metadata/uid", uid)});
    const std::string version = Str(At(obj, "/metadata/resourceVersion"));
    if (!version.empty()) ops.push_back(Op("test", "/metadata/resourceVersion", version));
    return ops;
  }

  // --- release -------------------------------------------------------------

  // The ops that release a job kind's object `obj`, after the uid test:
  // each pod set's placement, the admitted-flavors record (what a later
  // suspend takes out again) and the unsuspend.
  absl::Status AppendReleaseOps(const json& obj, const workload::KindInfo& kind, const broker::ReleaseOrder& order,
                                json* ops) {
    const json* annotations = At(obj, "/metadata/annotations");
    // A kind that takes its placement beside its templates (an AppWrapper's
    // podSetInfos) may lack the targets: create them first, and place into
    // the object as it will be after that.
    // (A copy only then: the object is a few KB, copied per release.)
    json with_targets;
    const json* placed_in = &obj;
    if (std::vector<workload::PatchOp> targets = workload::PlacementTargetOps(JsonDocProbe(obj), *order.workload);
        !targets.empty()) {
      json target_ops = json::array();
      AppendOps(targets, &target_ops);
      try {  // nlohmann reports a patch that does not apply by exception; it stops here
        with_targets = obj.patch(target_ops);
        placed_in = &with_targets;
      } catch (const std::exception& e) {
        return absl::FailedPreconditionError(absl::StrCat("the object has no place for its placement: ", e.what()));
      }
      for (const json& op : target_ops) ops->push_back(op);
    }
    const bool trainjob = order.workload->kind == workload::Kind::kTrainJob;  // placed in its runtimePatches
    if (trainjob) {
      GK_ASSIGN_OR_RETURN(std::vector<workload::PatchOp> placement, TrainJobReleaseOps(obj, order));
      AppendOps(placement, ops);
    }
    json record = json{{"podSets", json::array()}};
    for (const broker::ReleaseOrder::PodSetPlacement& p : order.placements) {
      auto ps = std::find_if(order.workload->pod_sets.begin(), order.workload->pod_sets.end(),
                             [&](const workload::PodSet& x) { return x.name == p.name; });
      if (ps == order.workload->pod_sets.end()) continue;
      json added_selector = json::object(), added_tolerations = json::array();
      if (!trainjob) {
        GK_RETURN_IF_ERROR(PlacementOps(*placed_in, workload::PlacementPointer(order.workload->kind, *ps), p, ops,
                                        &added_selector, &added_tolerations));
      }
      json flavors = json::object();
      for (const broker::PodSetAssignment& a : order.assignment.pod_sets) {
        if (a.name != p.name) continue;
        for (const auto& [res, flavor] : a.flavors) flavors[res] = flavor;
      }
      record["podSets"].push_back(json{{"name", p.name},
                                       {"flavors", flavors},
                                       {"nodeSelector", added_selector},
                                       {"tolerations", added_tolerations}});
    }
    record["clusterQueue"] = order.assignment.cluster_queue;
    record["admittedAt"] = absl::FormatTime(absl::RFC3339_full, order.admitted_at, absl::UTCTimeZone());
    if (annotations == nullptr || !annotations->is_object()) {
      ops->push_back(Op("add", "/metadata/annotations", json::object()));
    }
    ops->push_back(Op("add", AnnotationPath(), record.dump()));
    AppendParallelismOps(kind, order, ops);
    AppendOps(workload::ReleaseOps(JsonDocProbe(obj), kind), ops);
    return absl::OkStatus();
  }

  absl::Status DoRelease(const broker::ReleaseOrder& order, std::string* detail) {
    const workload::KindInfo* kind = KindOf(order.workload);
    if (kind == nullptr) return absl::FailedPreconditionError("the workload's object is unknown");
    const std::string path = ResourcePath(*kind, order.key.namespace_name,
                                          kind->kind == workload::Kind::kPod && !order.workload->pod_group_name.empty()
                                              ? ""
                                              : order.key.name);
    if (options.dry_run) {
      *detail = absl::StrCat("not sent (--kube none): PATCH ", path, " unsuspend; ", Describe(order));
      return absl::OkStatus();
    }
    if (kind->kind == workload::Kind::kPod) return ReleasePods(order, *kind, detail);
    absl::Status last;
    std::optional<json> kept = KeptObject(order);
    // The try from the kept version, whatever ends it, is not one of the
    // max_conflicts: it is followed by a read.
    bool unread = false;
    for (int attempt = 0; attempt <= options.max_conflicts; attempt += unread ? 0 : 1) {
      unread = kept.has_value();
      absl::StatusOr<json> obj = unread ? *std::move(kept) : GetCreated(path);
      kept.reset();
      if (!obj.ok()) return obj.status();
      if (Str(At(*obj, "/metadata/uid")) != order.uid) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, " is another object now (uid ", Str(At(*obj, "/metadata/uid")), ", admitted ",
                         order.uid, ")"));
      }
      const json* annotations = At(*obj, "/metadata/annotations");
      const bool annotated = annotations != nullptr && annotations->is_object() &&
                             annotations->contains(std::string(workload::kAdmittedFlavorsAnnotation));
      if (unread && (FinishedObject(*obj) || !Held(*obj, *kind) || annotated)) {
        // From the kept version only a patch guarded by its resourceVersion
        // is sent; what is decided without one (nothing to do, or the
        // unguarded restore below) is decided on a fresh read.
        continue;
      }
      if (FinishedObject(*obj)) {
        // Ended before its release reached it (its end is on its way to the
        // broker through the watch): nothing to unsuspend.
        *detail = "not sent: the object has already finished";
        return absl::OkStatus();
      }
      if (!Held(*obj, *kind)) {
        *detail = annotated ? "already released" : "already running: unsuspended by someone else";
        return absl::OkStatus();
      }
      if (annotated) {
        // Suspended by someone else after a release, never restored: take
        // the old additions out first, so that this release records (and a
        // later suspend removes) exactly what it adds.
        json ops = json::array({Op("test", "/metadata/uid", order.uid)});
        AppendRestoreOps(*obj, (*annotations)[std::string(workload::kAdmittedFlavorsAnnotation)], order, &ops);
        absl::StatusOr<json> restored = JsonPatch(path, *obj, ops);
        if (!restored.ok() && HttpCode(restored.status()) != 422) return restored.status();
        last = restored.status();
        continue;  // read it again
      }
      json ops = Guards(*obj, order.uid);
      if (absl::Status built = AppendReleaseOps(*obj, *kind, order, &ops); !built.ok()) {
        if (!unread) return built;
        continue;  // refused for what the kept version says: read it
      }
      absl::StatusOr<json> patched = JsonPatch(path, *obj, ops);
      if (unread) {
        absl::MutexLock lock(&mu);
        ++(patched.ok() || HttpCode(patched.status()) != 422 ? stats.unread_releases : stats.unread_misses);
      }
      if (patched.ok()) {
        if (options.held_objects != nullptr) options.held_objects->Forget(order.key);
        *detail = absl::StrCat("PATCH ", path, " unsuspend; ", Describe(order));
        return absl::OkStatus();
      }
      if (HttpCode(patched.status()) != 422) return patched.status();
      // A test failed (the object changed under us, or since the reconciler
      // read it) or the server refused the change: read it again.
      last = patched.status();
    }
    return absl::AbortedError(absl::StrCat(path, " could not be released after ", options.max_conflicts + 1,
                                           " attempts; last answer: ", last.message()));
  }

  // The object of `order` as the reconciler read it last, when it kept it
  // (HeldObjects) with a resourceVersion to guard the patch by; else none,
  // and the release reads the object.
  std::optional<json> KeptObject(const broker::ReleaseOrder& order) const {
    if (options.held_objects == nullptr) return std::nullopt;
    std::shared_ptr<const std::string> text = options.held_objects->Find(order.key, order.uid);
    if (text == nullptr) return std::nullopt;
    json obj = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!obj.is_object() || Str(At(obj, "/metadata/uid")) != order.uid ||
        Str(At(obj, "/metadata/resourceVersion")).empty()) {
      return std::nullopt;
    }
    return obj;
  }

  // Ops that take out what the admitted-flavors annotation `record_text`
  // says a release added, and the annotation itself.
  template <typename Order>
  static void AppendRestoreOps(const json& obj, const json& record_text, const Order& order, json* ops) {
    json record = json::parse(Str(&record_text), nullptr, false);
    if (record.is_object() && At(record, "/podSets") != nullptr && At(record, "/podSets")->is_array()) {
      for (const json& ps : *At(record, "/podSets")) {
        const std::string name = Str(At(ps, "/name"));
        auto it = std::find_if(order.workload->pod_sets.begin(), order.workload->pod_sets.end(),
                               [&](const workload::PodSet& x) { return x.name == name; });
        if (it == order.workload->pod_sets.end()) continue;
        RestoreOps(obj, workload::PlacementPointer(order.workload->kind, *it), ps, ops);
      }
    }
    ops->push_back(Remove(AnnotationPath()));
    // A Job released with fewer pods gets its own parallelism back.
    const json* annotations = At(obj, "/metadata/annotations");
    if (annotations != nullptr && annotations->is_object()) {
      auto full = annotations->find(std::string(workload::kFullParallelismAnnotation));
      int64_t count = 0;
      if (full != annotations->end() && full->is_string() && absl::SimpleAtoi(full->get<std::string>(), &count) &&
          count > 0) {
        ops->push_back(Op("add", "/spec/parallelism", count));
      }
      if (full != annotations->end()) ops->push_back(Remove(FullParallelismPath()));
    }
  }

  // Sends `ops` as a JSON patch. A server that takes no JSON patches (415)
  // gets the same change as a merge patch, guarded by metadata.uid (a merge
  // patch naming another uid is refused) and metadata.resourceVersion (a
  // stale one is a conflict); a guard that fails comes back as 422, like a
  // failed `test`, so that the caller reads the object again.
  absl::StatusOr<json> JsonPatch(const std::string& path, const json& current, const json& ops) {
    if (absl::Status gate = Gate(); !gate.ok()) return gate;
    absl::StatusOr<json> r = client->Patch(path, PatchType::kJson, ops);
    if (r.ok() || HttpCode(r.status()) != 415) return r;
    json target;
    try {  // nlohmann reports a failed `test` by exception; it stops here
      target = current.patch(ops);
    } catch (const std::exception& e) {
      return WithHttpCode(absl::FailedPreconditionError(absl::StrCat(path, ": the object changed: ", e.what())), 422);
    }
    json merge = MergePatch(current, target);
    merge["metadata"]["uid"] = Str(At(current, "/metadata/uid"));
    merge["metadata"]["resourceVersion"] = Str(At(current, "/metadata/resourceVersion"));
    absl::StatusOr<json> m = client->Patch(path, PatchType::kMerge, merge, /*retry_conflict=*/false);
    if (!m.ok() && HttpCode(m.status()) == 409) return WithHttpCode(m.status(), 422);
    return m;
  }

  // The RFC 7386 merge patch that turns `from` into `to`.
  static json MergePatch(const json& from, const json& to) {
    if (!from.is_object() || !to.is_object()) return to;
    json p = json::object();
    for (const auto& [k, v] : from.items()) {
      if (!to.contains(k)) p[k] = nullptr;
    }
    for (const auto& [k, v] : to.items()) {
      auto it = from.find(k);
      if (it == from.end()) {
        p[k] = v;
      } else if (*it != v) {
        p[k] = it->is_object() && v.is_object() ? MergePatch(*it, v) : v;
      }
    }
    return p;
  }

  // The validating webhook registers a workload before the API server
  // stores the object, so a release can come first: a 404 is asked again
  // for a little while before it counts.
  absl::StatusOr<json> GetCreated(const std::string& path) {
    absl::StatusOr<json> obj = client->Get(path);
    for (int i = 0; i < options.not_found_retries && !obj.ok() && HttpCode(obj.status()) == 404; ++i) {
      absl::SleepFor(NotFoundWait(i));
      obj = client->Get(path);
    }
    return obj;
  }

  // The wait before the (i+1)-th look for an object not stored yet.
  absl::Duration NotFoundWait(int i) const {
    absl::Duration d = options.not_found_wait / 10;
    for (int k = 0; k < i && d < options.not_found_wait; ++k) d *= 2;
    return std::min(d, options.not_found_wait);
  }

  // The pods of the gang, not ended and not being deleted.
  // `wait_for_creation`: a missing single pod may not be stored yet (release).
  absl::StatusOr<std::vector<json>> GangPods(const std::shared_ptr<const workload::Workload>& w,
                                             const broker::WorkloadKey& key, const workload::KindInfo& kind,
                                             bool wait_for_creation) {
    std::vector<json> pods;
    if (w->pod_group_name.empty()) {
      const std::string path = ResourcePath(kind, key.namespace_name, key.name);
      absl::StatusOr<json> pod = wait_for_creation ? GetCreated(path) : client->Get(path);
      if (!pod.ok()) return pod.status();
      pods.push_back(*std::move(pod));
    } else {
      ListOptions lo;
      lo.label_selector = absl::StrCat(workload::kPodGroupNameLabel, "=", w->pod_group_name);
      absl::StatusOr<ListResult> list = client->List(ResourcePath(kind, key.namespace_name), lo);
      if (!list.ok()) return list.status();
      pods = std::move(list->items);
    }
    std::vector<json> live;
    for (json& p : pods) {
      const std::string phase = Str(At(p, "/status/phase"));
      if (phase == "Succeeded" || phase == "Failed") continue;
      const json* deleting = At(p, "/metadata/deletionTimestamp");
      if (deleting != nullptr && !deleting->is_null()) continue;
      live.push_back(std::move(p));
    }
    return live;
  }

  // The pods of the gang `order` releases, all of them: the last pod of a
  // group may be registered (by the webhook) before the API server stores
  // it, so wait for the whole group to be listable. FailedPrecondition when
  // some never show.
  absl::StatusOr<std::vector<json>> WholeGang(const broker::ReleaseOrder& order, const workload::KindInfo& kind) {
    const size_t expected =
        order.workload->pod_group_name.empty() ? 1 : static_cast<size_t>(std::max<int64_t>(1, order.workload->pod_group_total_count));
    absl::StatusOr<std::vector<json>> pods = GangPods(order.workload, order.key, kind, /*wait_for_creation=*/true);
    for (int i = 0; i < options.not_found_retries && pods.ok() && pods->size() < expected; ++i) {
      absl::SleepFor(NotFoundWait(i));
      pods = GangPods(order.workload, order.key, kind, /*wait_for_creation=*/true);
    }
    if (!pods.ok()) return pods.status();
    if (pods->size() < expected) {
      return absl::FailedPreconditionError(absl::StrCat("only ", pods->size(), " of the group's ", expected,
                                                        " pods exist; none was released"));
    }
    return pods;
  }

  // The admission recorded on a released pod, as on job kinds, for an
  // adoption after a restart.
  static json AdmissionRecord(const broker::ReleaseOrder& order) {
    json record = json{{"clusterQueue", order.assignment.cluster_queue},
                       {"admittedAt", absl::FormatTime(absl::RFC3339_full, order.admitted_at, absl::UTCTimeZone())},
                       {"podSets", json::array()}};
    for (const broker::PodSetAssignment& a : order.assignment.pod_sets) {
      json flavors = json::object();
      for (const auto& [res, flavor] : a.flavors) flavors[res] = flavor;
      record["podSets"].push_back(json{{"name", a.name}, {"flavors", flavors}});
    }
    return record;
  }

  // Phase 1 for one gated pod: its nodeSelector, tolerations and admission
  // record, while it is still gated.
  absl::Status PlacePod(const json& pod, const std::string& name, const std::string& path,
                        const broker::ReleaseOrder::PodSetPlacement& placement, const broker::ReleaseOrder& order) {
    json ops = json::array({Op("test", "/metadata/uid", Str(At(pod, "/metadata/uid")))});
    json added_selector, added_tolerations;
    // A Pod is its own template (workload::PodSpecPointer of its pod set).
    if (absl::Status s = PlacementOps(pod, "/spec", placement, &ops, &added_selector, &added_tolerations); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("pod ", name, ": ", s.message()));
    }
    const json* annotations = At(pod, "/metadata/annotations");
    if (annotations == nullptr || !annotations->is_object()) {
      ops.push_back(Op("add", "/metadata/annotations", json::object()));
    }
    ops.push_back(Op("add", AnnotationPath(), AdmissionRecord(order).dump()));
    absl::StatusOr<json> patched = JsonPatch(path, pod, ops);
    if (!patched.ok()) {
      return absl::Status(patched.status().code(),
                          absl::StrCat("pod ", name, " could not take its placement (no pod was ungated): ",
                                       patched.status().message()));
    }
    return absl::OkStatus();
  }

  // Phase 2 for one pod: removes gangkeeper's scheduling gate (OK when it
  // is gone already), again after a conflict.
  absl::Status UngatePod(const std::string& path, const workload::KindInfo& kind) {
    absl::Status failure;
    for (int attempt = 0; attempt <= options.max_conflicts; ++attempt) {
      absl::StatusOr<json> pod = client->Get(path);
      if (!pod.ok()) return pod.status();
      if (!Held(*pod, kind)) return absl::OkStatus();
      json ops = json::array({Op("test", "/metadata/uid", Str(At(*pod, "/metadata/uid")))});
      AppendOps(workload::ReleaseOps(JsonDocProbe(*pod), kind), &ops);
      absl::StatusOr<json> patched = JsonPatch(path, *pod, ops);
      failure = patched.status();
      if (patched.ok() || HttpCode(patched.status()) != 422) break;
    }
    return failure;
  }

  // After a failed group release. Gates cannot be put back: delete what was
  // let go; the owner recreates those pods and the webhook gates them. The
  // uid precondition spares a pod recreated under the same name (409).
  void DeleteUngated(const broker::ReleaseOrder& order, const workload::KindInfo& kind,
                     const std::vector<std::string>& ungated, const std::map<std::string, std::string>& uid_of) {
    for (const std::string& done : ungated) {
      absl::StatusOr<json> d = Gate().ok() ? client->Delete(ResourcePath(kind, order.key.namespace_name, done),
                                                            uid_of.at(done), "Background")
                                           : absl::StatusOr<json>(Gate());
      if (!d.ok() && HttpCode(d.status()) != 404 && HttpCode(d.status()) != 409) {
        log->error("pod {}/{} was ungated but could not be deleted after a failed group release: {}",
                   order.key.namespace_name, done, d.status().message());
      }
    }
  }

  absl::Status ReleasePods(const broker::ReleaseOrder& order, const workload::KindInfo& kind, std::string* detail) {
    absl::StatusOr<std::vector<json>> pods = WholeGang(order, kind);
    if (!pods.ok()) return pods.status();
    const broker::ReleaseOrder::PodSetPlacement* placement =
        order.placements.empty() ? nullptr : &order.placements.front();
    // The pods of a group are merged by shape into pod sets; a gang of
    // pods gets one placement (flavors are assigned per resource group,
    // and pods of one group ask for the same resources).
    // Phase 1: nodeSelector and tolerations while gated.
    std::vector<std::string> gated;
    std::map<std::string, std::string> uid_of;  // of the gated pods, for the deletes below
    for (const json& pod : *pods) {
      const std::string name = Str(At(pod, "/metadata/name"));
      if (!Held(pod, kind)) continue;  // released already
      gated.push_back(name);
      uid_of[name] = Str(At(pod, "/metadata/uid"));
      if (placement == nullptr) continue;
      GK_RETURN_IF_ERROR(PlacePod(pod, name, ResourcePath(kind, order.key.namespace_name, name), *placement, order));
    }
    // Phase 2: remove the gate, pod by pod.
    std::vector<std::string> ungated;
    for (const std::string& name : gated) {
      absl::Status failure = UngatePod(ResourcePath(kind, order.key.namespace_name, name), kind);
      if (!failure.ok()) {
        DeleteUngated(order, kind, ungated, uid_of);
        return absl::Status(failure.code(),
                            absl::StrCat("pod ", name, " could not be ungated (", ungated.size(),
                                         " ungated pod(s) deleted again): ", failure.message()));
      }
      ungated.push_back(name);
    }
    *detail = absl::StrCat("ungated ", ungated.size(), " pod(s) of ", order.key.namespace_name, "/", order.key.name,
                           "; ", Describe(order));
    return absl::OkStatus();
  }

  // --- suspend -------------------------------------------------------------

  // A pod gang is suspended by deleting its pods; the uid precondition
  // spares a pod recreated under the same name (409), and one already gone
  // (404) counts as deleted.
  absl::Status SuspendPods(const broker::SuspendOrder& order, const workload::KindInfo& kind, std::string* detail) {
    absl::StatusOr<std::vector<json>> pods = GangPods(order.workload, order.key, kind, /*wait_for_creation=*/false);
    if (!pods.ok()) return HttpCode(pods.status()) == 404 ? absl::OkStatus() : pods.status();
    int deleted = 0;
    for (const json& pod : *pods) {
      const std::string name = Str(At(pod, "/metadata/name"));
      if (absl::Status gate = Gate(); !gate.ok()) return gate;
      absl::StatusOr<json> d = client->Delete(ResourcePath(kind, order.key.namespace_name, name),
                                              Str(At(pod, "/metadata/uid")), "Background");
      if (!d.ok() && HttpCode(d.status()) != 404 && HttpCode(d.status()) != 409) return d.status();
      ++deleted;
    }
    *detail = absl::StrCat("deleted ", deleted, " pod(s) (", order.reason, ")");
    return absl::OkStatus();
  }

  absl::Status DoSuspend(const broker::SuspendOrder& order, std::string* detail) {
    const workload::KindInfo* kind = KindOf(order.workload);
    if (kind == nullptr) return absl::OkStatus();  // nothing to stop
    if (options.dry_run) {
      *detail = absl::StrCat("not sent (--kube none): suspend ", order.key.namespace_name, "/", order.key.name);
      return absl::OkStatus();
    }
    if (kind->kind == workload::Kind::kPod) return SuspendPods(order, *kind, detail);
    const std::string path = ResourcePath(*kind, order.key.namespace_name, order.key.name);
    for (int attempt = 0; attempt <= options.max_conflicts; ++attempt) {
      absl::StatusOr<json> obj = client->Get(path);
      if (!obj.ok()) {
        if (HttpCode(obj.status()) == 404) {
          *detail = "already gone";
          return absl::OkStatus();
        }
        return obj.status();
      }
      if (Str(At(*obj, "/metadata/uid")) != order.uid) {
        *detail = "already gone (the name belongs to another object now)";
        return absl::OkStatus();
      }
      if (FinishedObject(*obj)) {
        // Ended before the suspension reached it: nothing runs any more, and
        // a PATCH now would only touch a finished object.
        *detail = "not sent: the object has already finished";
        return absl::OkStatus();
      }
      std::vector<std::string> steps;
      // 1. Suspend.
      if (!Held(*obj, *kind)) {
        json ops = Guards(*obj, order.uid);
        AppendOps(workload::HoldOps(JsonDocProbe(*obj), *kind), &ops);
        absl::StatusOr<json> patched = JsonPatch(path, *obj, ops);
        if (!patched.ok()) {
          if (HttpCode(patched.status()) == 422) continue;
          return patched.status();
        }
        *obj = *std::move(patched);
        steps.push_back("suspended");
      }
      // 2. A Job that ran keeps status.startTime, and with it an immutable
      // template, until the startTime is cleared.
      if (kind->kind == workload::Kind::kJob && At(*obj, "/status/startTime") != nullptr &&
          !At(*obj, "/status/startTime")->is_null()) {
        json ops = json::array({Op("test", "/metadata/uid", order.uid), Remove("/status/startTime")});
        absl::StatusOr<json> patched = JsonPatch(path + "/status", *obj, ops);
        if (!patched.ok()) {
          if (HttpCode(patched.status()) == 422) continue;
          return patched.status();
        }
        *obj = *std::move(patched);
        steps.push_back("startTime cleared");
      }
      // 3. Take out what release put in.
      const json* annotations = At(*obj, "/metadata/annotations");
      const json* record_text = nullptr;
      if (annotations != nullptr && annotations->is_object()) {
        auto it = annotations->find(std::string(workload::kAdmittedFlavorsAnnotation));
        if (it != annotations->end()) record_text = &*it;
      }
      std::vector<workload::PatchOp> trainjob_ops;  // its runtimePatches entry, once its Jobs are gone
      if (kind->kind == workload::Kind::kTrainJob) {
        GK_ASSIGN_OR_RETURN(trainjob_ops, TrainJobSuspendOps(*obj, path));
      }
      if (record_text != nullptr || !trainjob_ops.empty()) {
        json ops = json::array({Op("test", "/metadata/uid", order.uid)});
        AppendOps(trainjob_ops, &ops);
        if (record_text != nullptr) AppendRestoreOps(*obj, *record_text, order, &ops);
        absl::StatusOr<json> patched = JsonPatch(path, *obj, ops);
        if (!patched.ok()) {
          if (HttpCode(patched.status()) == 422) continue;
          return patched.status();
        }
        steps.push_back("templates restored");
      }
      *detail = absl::StrCat("PATCH ", path, ": ", steps.empty() ? "already suspended" : absl::StrJoin(steps, ", "),
                             " (", order.reason, ")");
      return absl::OkStatus();
    }
    return absl::AbortedError(absl::StrCat(path, " kept changing while being suspended"));
  }
};

ActuatorStats KubeActuator::stats() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

bool OrderWanted(const broker::Snapshot& snapshot, const broker::WorkloadKey& key, const std::string& uid,
                 bool release) {
  const broker::WorkloadInfo* info = snapshot.FindInstance(key, uid);
  if (info == nullptr) return false;  // finished, deleted, or replaced and forgotten
  if (release) return info->phase == broker::Phase::kReserved || info->phase == broker::Phase::kRunning;
  return info->phase == broker::Phase::kEvicting;
}

KubeActuator::KubeActuator(Client* client, ActuatorOptions options) : impl_(std::make_unique<Impl>()) {
  GK_CHECK(options.clock != nullptr);
  impl_->client = client;
  impl_->options = options;
  if (client == nullptr) impl_->options.dry_run = true;
  for (int i = 0; i < std::max(1, options.workers); ++i) impl_->workers.emplace_back([this] { impl_->Run(); });
}

KubeActuator::~KubeActuator() { Stop(); }

void KubeActuator::Bind(broker::EventQueue* events) {
  ActuatorCallbacks c;
  c.released = [events](const broker::WorkloadKey& key, const std::string& uid, absl::Status result,
                        const std::string& detail) { events->Submit(broker::Event::ReleaseResult(key, uid, result, detail)); };
  c.stopped = [events](const broker::WorkloadKey& key, const std::string& uid, const std::string& detail) {
    events->Submit(broker::Event::Stopped(key, uid, detail));
  };
  Bind(std::move(c));
}

void KubeActuator::Bind(ActuatorCallbacks callbacks) { impl_->callbacks = std::move(callbacks); }

void KubeActuator::Release(const broker::ReleaseOrder& order) {
  Order o;
  o.release = true;
  o.given = impl_->options.clock->Now();
  o.rel = order;
  impl_->Enqueue(std::move(o));
}

void KubeActuator::Suspend(const broker::SuspendOrder& order) {
  Order o;
  o.release = false;
  o.given = impl_->options.clock->Now();
  o.sus = order;
  impl_->Enqueue(std::move(o));
}

void KubeActuator::Stop() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    impl_->lines.clear();
    impl_->ready.clear();
  }
  for (std::thread& t : impl_->workers) {
    if (t.joinable()) t.join();
  }
  impl_->workers.clear();
}

}  // namespace gangkeeper::kube
