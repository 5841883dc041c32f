// gangkeeper: TrainingRuntimeCache (see training_runtimes.h), and the
// actuator's TrainJob steps (trainjob_ops.h).
#include "gangkeeper/kube/training_runtimes.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/kube/trainjob_ops.h"

namespace gangkeeper::kube {
namespace {

constexpr char kClusterKind[] = "ClusterTrainingRuntime";
constexpr char kNamespacedKind[] = "TrainingRuntime";
constexpr char kClusterPath[] = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes";
constexpr char kNamespacedPath[] = "/apis/trainer.kubeflow.org/v1alpha1/trainingruntimes";

const nlohmann::json* Metadata(const nlohmann::json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return nullptr;
  return &object["metadata"];
}

// The id of a runtime object of `kind`; an empty name when it has none.
TrainingRuntimeId IdOf(const std::string& kind, const nlohmann::json& object) {
  TrainingRuntimeId id{kind, "", ""};
  if (const nlohmann::json* meta = Metadata(object); meta != nullptr) {
    id.name = meta->value("name", "");
    if (kind == kNamespacedKind) id.namespace_name = meta->value("namespace", "");
  }
  return id;
}

// What the cache keeps of a runtime: {"spec": ...}.
std::string Kept(const nlohmann::json& object) {
  nlohmann::json kept = nlohmann::json::object();
  if (object.is_object() && object.contains("spec")) kept["spec"] = object["spec"];
  return kept.dump();
}

}  // namespace

TrainingRuntimeCache::TrainingRuntimeCache(Client* client, OnChange on_change, TrainingRuntimeWatchOptions options)
    : client_(client), on_change_(std::move(on_change)) {
  struct Served {
    const char* kind;
    const char* path;
    const char* resource;
  };
  const Served served[] = {{kClusterKind, kClusterPath, "clustertrainingruntimes"},
                           {kNamespacedKind, kNamespacedPath, "trainingruntimes"}};
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < 2; ++i) {
    collections_.push_back({served[i].kind});
    ListThenWatchOptions lo;
    lo.watch_timeout_seconds = options.watch_timeout_seconds;
    lo.error_backoff = options.error_backoff;
    lo.resync = options.resync;
    lo.list_failure_note = absl::StrCat("TrainJobs keep the runtimes known so far; RBAC must allow list and watch on ",
                                        served[i].resource);
    // The Trainer's CRDs are not installed: no runtimes, so a TrainJob
    // waits for its runtime; asked again now and then.
    lo.absent_retry = options.absent_retry;
    lo.absent_note = "Kubeflow Trainer not installed?; TrainJobs wait for their runtimes";
    loops_.push_back(std::make_unique<ListThenWatch>(
        client_, served[i].path, [this, i](const ListResult& list) { Replace(i, list); },
        [this, i](const nlohmann::json& object, bool deleted) { Apply(i, object, deleted); }, std::move(lo)));
  }
}

TrainingRuntimeCache::~TrainingRuntimeCache() { Stop(); }

void TrainingRuntimeCache::Start() { StartLoops(loops_); }

void TrainingRuntimeCache::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_flag_ = true;
  }
  StopLoops(client_, loops_);
}

bool TrainingRuntimeCache::SyncedLocked() const {
  for (const Collection& c : collections_) {
    if (!c.listed) return false;
  }
  return true;
}

bool TrainingRuntimeCache::synced() const {
  absl::MutexLock lock(&mu_);
  return SyncedLocked();
}

bool TrainingRuntimeCache::WaitSynced(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_flag_ || SyncedLocked(); };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return SyncedLocked();
}

std::optional<std::string> TrainingRuntimeCache::Find(const workload::TrainingRuntimeRef& ref,
                                                      absl::string_view namespace_name) const {
  TrainingRuntimeId id{ref.kind, ref.kind == kNamespacedKind ? std::string(namespace_name) : "", ref.name};
  absl::MutexLock lock(&mu_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return std::nullopt;
  return it->second;
}

void TrainingRuntimeCache::Apply(size_t index, const nlohmann::json& object, bool deleted) {
  bool changed = false;
  TrainingRuntimeId id;
  {
    absl::MutexLock lock(&mu_);
    id = IdOf(collections_[index].kind, object);
    if (id.name.empty()) return;
    auto it = runtimes_.find(id);
    if (deleted) {
      if (it != runtimes_.end()) {
        runtimes_.erase(it);
        changed = true;
      }
    } else {
      std::string kept = Kept(object);
      if (it == runtimes_.end() || it->second != kept) {
        runtimes_[id] = std::move(kept);
        changed = true;
      }
    }
  }
  if (changed && on_change_) on_change_(id);
}

void TrainingRuntimeCache::Replace(size_t index, const ListResult& list) {
  std::vector<TrainingRuntimeId> changed;
  {
    absl::MutexLock lock(&mu_);
    const std::string& kind = collections_[index].kind;
    std::map<TrainingRuntimeId, std::string> listed;
    for (const nlohmann::json& item : list.items) {
      TrainingRuntimeId id = IdOf(kind, item);
      if (!id.name.empty()) listed[std::move(id)] = Kept(item);
    }
    for (auto it = runtimes_.begin(); it != runtimes_.end();) {
      if (it->first.kind != kind) {
        ++it;
        continue;
      }
      auto now = listed.find(it->first);
      if (now == listed.end()) {
        changed.push_back(it->first);
        it = runtimes_.erase(it);
        continue;
      }
      if (now->second != it->second) {
        changed.push_back(it->first);
        it->second = now->second;
      }
      listed.erase(now);
      ++it;
    }
    for (auto& [id, kept] : listed) {
      changed.push_back(id);
      runtimes_[id] = std::move(kept);
    }
  }
  if (on_change_) {
    for (const TrainingRuntimeId& id : changed) on_change_(id);
  }
  // Listed only once every change of the list has been announced: whoever
  // waited for the sync sees the announcements too.
  absl::MutexLock lock(&mu_);
  collections_[index].listed = true;
}

// ---- The actuator's TrainJob steps (trainjob_ops.h) ----

absl::StatusOr<std::vector<workload::PatchOp>> TrainJobReleaseOps(const nlohmann::json& trainjob,
                                                                 const broker::ReleaseOrder& order) {
  std::vector<workload::TrainJobPlacement> placements;
  for (const broker::ReleaseOrder::PodSetPlacement& p : order.placements) {
    placements.push_back(workload::TrainJobPlacement{p.name, p.node_selector, p.tolerations});
  }
  absl::StatusOr<std::vector<workload::PatchOp>> ops =
      workload::TrainJobPlacementOps(trainjob.dump(), order.workload->pod_sets, placements);
  if (!ops.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the TrainJob cannot take its placement in spec.runtimePatches: ", ops.status().message()));
  }
  return ops;
}

absl::StatusOr<std::vector<workload::PatchOp>> TrainJobSuspendOps(const nlohmann::json& trainjob,
                                                                 absl::string_view path) {
  const std::string text = trainjob.dump();
  std::vector<workload::PatchOp> ops = workload::TrainJobRestoreOps(text);
  if (!ops.empty() && workload::TrainJobActive(text)) {
    return absl::UnavailableError(absl::StrCat(path,
                                               ": suspended, but its Jobs are still active: its placement stays in "
                                               "spec.runtimePatches until they are gone (tried again)"));
  }
  return ops;
}

}  // namespace gangkeeper::kube
