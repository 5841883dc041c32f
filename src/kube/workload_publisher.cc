// gangkeeper: WorkloadPublisher (see workload_publisher.h).
#include "gangkeeper/kube/workload_publisher.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "src/kube/write_pass.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::kube {

using json = nlohmann::json;

namespace {

std::string Key(const std::string& ns, const std::string& name) { return absl::StrCat(ns, "/", name); }

// What of a spec gangkeeper decides and compares: the API server defaults
// and normalizes the pod templates (quantities, empty fields), which would
// otherwise look like a change on every pass.
json SpecSummary(const json& spec) {
  json out = {{"queueName", JsonField(spec, "queueName")},
              {"priority", JsonField(spec, "priority")},
              {"priorityClassName", JsonField(spec, "priorityClassName")},
              {"priorityClassRef", JsonField(spec, "priorityClassRef")}};
  json sets = json::array();
  if (spec.contains("podSets") && spec["podSets"].is_array()) {
    for (const json& ps : spec["podSets"]) {
      if (!ps.is_object()) continue;
      sets.push_back({{"name", JsonField(ps, "name")},
                      {"count", JsonField(ps, "count")},
                      {"minCount", JsonField(ps, "minCount")}});
    }
  }
  out["podSets"] = std::move(sets);
  return out;
}

// The pods a Workload's ownerReferences name (a pod group's owners).
std::set<std::string> PodOwnerNames(const json& meta) {
  std::set<std::string> out;
  for (const json& r : JsonArray(meta, "ownerReferences")) {
    if (JsonString(r, "kind") == "Pod" && JsonString(r, "apiVersion") == "v1") out.insert(JsonString(r, "name"));
  }
  return out;
}

}  // namespace

WorkloadPublisher::WorkloadPublisher(Client* client, const broker::SnapshotSource* view, KueueWriterOptions options)
    : client_(client), view_(view), options_(std::move(options)) {
  GK_CHECK_MSG(options_.clock != nullptr, "KueueWriterOptions::clock is required");
}

WorkloadPublisher::~WorkloadPublisher() { Stop(); }

void WorkloadPublisher::OnDurable(const std::vector<broker::StateChange>& changes, const broker::Snapshot&) {
  absl::MutexLock lock(&mu_);
  for (const broker::StateChange& c : changes) {
    if (c.uid.empty() && !c.key.pod_group) continue;
    // Evictions and removals by the Workload's "NAMESPACE/NAME".
    const std::string workload = Key(c.key.namespace_name, KueueWorkloadNameFor(c.key, c.uid));
    switch (c.type) {
      case broker::StateChange::Type::kEvicted: {
        EvictionNote n;
        n.preempted = !c.preemptor.name.empty();
        n.reason = c.reason;
        n.message = c.message.empty() ? c.reason : c.message;
        if (n.preempted) {
          n.message = absl::StrCat("Preempted to accommodate ", c.preemptor.namespace_name, "/", c.preemptor.name,
                                   ": ", n.message);
        }
        evictions_[workload] = std::move(n);
        break;
      }
      case broker::StateChange::Type::kRemoved: {
        removed_.insert(workload);
        evictions_.erase(workload);
        break;
      }
      case broker::StateChange::Type::kFinished:
        evictions_.erase(workload);
        break;
      default:
        break;
    }
  }
}

void WorkloadPublisher::ResyncNext() {
  absl::MutexLock lock(&mu_);
  resync_next_ = true;
}

KueueWriterStats WorkloadPublisher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void WorkloadPublisher::Count(bool ok) {
  absl::MutexLock lock(&mu_);
  ++(ok ? stats_.writes : stats_.failures);
}

bool WorkloadPublisher::Allowed() {
  if (options_.leading && !options_.leading()) {
    listed_ = false;
    return false;
  }
  if (options_.refused && !options_.refused().empty()) {
    listed_ = false;
    absl::MutexLock lock(&mu_);
    ++stats_.refused;
    return false;
  }
  return true;
}

void WorkloadPublisher::List() {
  written_.clear();
  done_version_ = UINT64_MAX;
  ListOptions lo;
  lo.label_selector = absl::StrCat(kManagedByLabel, "=", kManagedByValue);
  absl::StatusOr<ListResult> list = client_->List(KueuePath(options_.version, "workloads"), lo);
  last_list_ = options_.clock->Now();
  {
    absl::MutexLock lock(&mu_);
    ++stats_.lists;
  }
  if (!list.ok()) {
    base::GetLogger("kube")->warn("kueue workloads: listing: {}", list.status().message());
    listed_ = false;
    return;
  }
  for (const json& item : list->items) {
    if (!item.contains("metadata")) continue;
    const json& meta = item["metadata"];
    Written w;
    w.object_uid = JsonString(meta, "uid");
    w.spec = SpecSummary(JsonObject(item, "spec"));
    const json status = JsonObject(item, "status");
    w.status = ObservedStatus(status, WorkloadStatusKeys());
    w.conditions = JsonArray(status, "conditions");
    w.owners = PodOwnerNames(meta);
    w.members = w.owners;
    written_[Key(JsonString(meta, "namespace"), JsonString(meta, "name"))] = std::move(w);
  }
  listed_ = true;
}

bool WorkloadPublisher::WriteStatus(const std::string& path, Written* entry, const KueueStatus& want,
                                    WritePass* pass) {
  if (entry->status == want) return true;
  const json status = StatusJson(want, entry->conditions, options_.clock->Now());
  absl::StatusOr<json> r = pass->Patch(absl::StrCat(path, "/status"), PatchType::kMerge, {{"status", status}});
  if (WritePass::Refused(r.status())) return false;
  Count(r.ok());
  if (!r.ok()) {
    base::GetLogger("kube")->warn("kueue workloads: status of {}: {}", path, r.status().message());
    if (HttpCode(r.status()) == 404) ResyncNext();  // deleted meanwhile: list and create again
    return false;
  }
  entry->status = want;
  entry->conditions = JsonArray(status, "conditions");
  return true;
}

bool WorkloadPublisher::Publish(const broker::WorkloadInfo& w, WritePass* pass) {
  const std::string name = KueueWorkloadNameOf(w);
  const std::string key = Key(w.key.namespace_name, name);
  const std::string path = KueuePath(options_.version, "workloads", w.key.namespace_name, name);
  std::optional<EvictionNote> eviction;
  {
    absl::MutexLock lock(&mu_);
    auto e = evictions_.find(key);
    if (e != evictions_.end()) eviction = e->second;
  }
  auto it = written_.find(key);
  if (it == written_.end()) {
    if (w.phase == broker::Phase::kFinished) return true;  // none is created for a finished workload
    if (!pass->MayWrite()) return false;  // before the pods are read
    // A pod group's Workload is owned by its pods, as the cluster has them.
    std::vector<PodOwner> pods;
    if (w.key.pod_group) {
      absl::StatusOr<std::vector<PodOwner>> listed = GroupPods(w);
      if (!listed.ok()) {
        Count(false);
        base::GetLogger("kube")->warn("kueue workloads: pods of group {}: {}", key, listed.status().message());
        return false;
      }
      if (listed->empty()) return true;  // no pod left to own it
      pods = *std::move(listed);
    }
    json object = WorkloadObject(w, options_.version, pods);
    absl::StatusOr<json> created =
        pass->Post(KueuePath(options_.version, "workloads", w.key.namespace_name), object.dump());
    if (WritePass::Refused(created.status())) return false;
    if (!created.ok() && HttpCode(created.status()) == 409) {
      // Made by someone else since the list (another leader's last pass):
      // list again rather than guess what it holds.
      ResyncNext();
      return false;
    }
    Count(created.ok());
    if (!created.ok()) {
      base::GetLogger("kube")->warn("kueue workloads: creating {}: {}", key, created.status().message());
      return false;
    }
    Written entry;
    entry.object_uid = created->contains("metadata") ? JsonString((*created)["metadata"], "uid") : "";
    entry.spec = SpecSummary(JsonObject(*created, "spec"));
    const json status = JsonObject(*created, "status");
    entry.status = ObservedStatus(status, WorkloadStatusKeys());
    entry.conditions = JsonArray(status, "conditions");
    for (const PodOwner& p : pods) entry.owners.insert(p.name);
    if (w.pod_group != nullptr) entry.members.insert(w.pod_group->pods.begin(), w.pod_group->pods.end());
    it = written_.emplace(key, std::move(entry)).first;
  }
  Written& entry = it->second;
  if (w.key.pod_group && !SyncPodOwners(w, key, path, &entry, pass)) return false;
  if (w.phase != broker::Phase::kFinished) {
    const json spec = WorkloadSpec(w, options_.version);
    if (entry.spec != SpecSummary(spec)) {
      absl::StatusOr<json> r = pass->Patch(path, PatchType::kMerge, {{"spec", spec}});
      if (WritePass::Refused(r.status())) return false;
      Count(r.ok());
      if (!r.ok()) {
        base::GetLogger("kube")->warn("kueue workloads: spec of {}: {}", key, r.status().message());
        if (HttpCode(r.status()) == 404) ResyncNext();
        return false;
      }
      entry.spec = SpecSummary(spec);
    }
  }
  return WriteStatus(path, &entry, WorkloadStatusOf(w, &entry.status, eviction), pass);
}

absl::StatusOr<std::vector<PodOwner>> WorkloadPublisher::GroupPods(const broker::WorkloadInfo& w) {
  ListOptions lo;
  lo.label_selector = absl::StrCat(workload::kPodGroupNameLabel, "=", w.key.name);
  absl::StatusOr<ListResult> list =
      client_->List(absl::StrCat("/api/v1/namespaces/", w.key.namespace_name, "/pods"), lo);
  if (!list.ok()) return list.status();
  std::vector<PodOwner> pods;
  for (const json& item : list->items) {
    const json meta = JsonObject(item, "metadata");
    PodOwner p{JsonString(meta, "name"), JsonString(meta, "uid")};
    if (!p.name.empty() && !p.uid.empty()) pods.push_back(std::move(p));
  }
  std::sort(pods.begin(), pods.end(), [](const PodOwner& a, const PodOwner& b) { return a.name < b.name; });
  return pods;
}

// The broker saw the group's members change since the owners were last
// set: the ownerReferences become the group's pods as the cluster has them
// now (a pod that joined owns the Workload too; the garbage collector
// drops a deleted one by itself).
bool WorkloadPublisher::SyncPodOwners(const broker::WorkloadInfo& w, const std::string& key, const std::string& path,
                                      Written* entry, WritePass* pass) {
  if (w.pod_group == nullptr || w.phase == broker::Phase::kFinished) return true;
  const std::set<std::string> members(w.pod_group->pods.begin(), w.pod_group->pods.end());
  if (members == entry->members) return true;
  if (!pass->MayWrite()) return false;  // before the pods are read
  absl::StatusOr<std::vector<PodOwner>> pods = GroupPods(w);
  if (!pods.ok()) {
    Count(false);
    base::GetLogger("kube")->warn("kueue workloads: pods of group {}: {}", key, pods.status().message());
    return false;
  }
  std::set<std::string> owners;
  for (const PodOwner& p : *pods) owners.insert(p.name);
  if (!pods->empty() && owners != entry->owners) {
    absl::StatusOr<json> r =
        pass->Patch(path, PatchType::kMerge, {{"metadata", {{"ownerReferences", PodOwnerReferences(*pods)}}}});
    if (WritePass::Refused(r.status())) return false;
    Count(r.ok());
    if (!r.ok()) {
      base::GetLogger("kube")->warn("kueue workloads: owners of {}: {}", key, r.status().message());
      if (HttpCode(r.status()) == 404) ResyncNext();
      return false;
    }
    entry->owners = std::move(owners);
  }
  entry->members = members;
  return true;
}

int WorkloadPublisher::Sync() {
  absl::MutexLock sync(&sync_mu_);
  if (!Allowed()) return 0;
  bool resync = false;
  std::set<std::string> removed;
  uint64_t before;
  {
    absl::MutexLock lock(&mu_);
    resync = resync_next_;
    resync_next_ = false;
    removed.swap(removed_);
    ++stats_.passes;
    before = stats_.writes;
  }
  if (!listed_ || resync || options_.clock->Now() - last_list_ >= options_.resync) List();
  if (!listed_) {
    absl::MutexLock lock(&mu_);
    removed_.insert(removed.begin(), removed.end());
    return 0;
  }
  // Every write asks the lease (a pass that outlives it sends nothing
  // more, and the next pass that leads lists again).
  WritePass pass(client_, options_.leading, options_.max_writes_per_pass);
  bool complete = true;
  // 1. The Workloads of deleted jobs.
  for (const std::string& key : removed) {
    auto it = written_.find(key);
    if (it == written_.end()) continue;  // never published, or gone already
    const size_t slash = key.find('/');
    const std::string path =
        KueuePath(options_.version, "workloads", key.substr(0, slash), key.substr(slash + 1));
    absl::StatusOr<json> r = pass.Delete(path, it->second.object_uid, "Background");
    if (WritePass::Refused(r.status())) {
      absl::MutexLock lock(&mu_);
      removed_.insert(key);
      complete = false;
      continue;
    }
    if (r.ok() || HttpCode(r.status()) == 404 || HttpCode(r.status()) == 409) {
      written_.erase(it);
      if (r.ok()) Count(true);
    } else {
      Count(false);
      absl::MutexLock lock(&mu_);
      removed_.insert(key);
      complete = false;
    }
  }
  // 2. Every tracked workload, then the finished ones still remembered.
  std::shared_ptr<const broker::Snapshot> snap = view_->snapshot();
  if (snap->version() != done_version_ || !removed.empty()) {
    snap->ForEachWorkload([&](const broker::WorkloadInfo& w) {
      if (PublishesWorkload(w)) complete &= Publish(w, &pass);
    });
    for (const std::shared_ptr<const broker::WorkloadInfo>& w : snap->finished()) {
      if (PublishesWorkload(*w) && snap->FindInstance(w->key, w->workload->uid) == nullptr) {
        complete &= Publish(*w, &pass);
      }
    }
    done_version_ = complete ? snap->version() : UINT64_MAX;
  }
  if (pass.lost_lead()) listed_ = false;
  absl::MutexLock lock(&mu_);
  return static_cast<int>(stats_.writes - before);
}

void WorkloadPublisher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void WorkloadPublisher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void WorkloadPublisher::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) return;
    }
    Sync();
  }
}

}  // namespace gangkeeper::kube
