// gangkeeper: TrainingRuntimeCache (see training_runtimes.h), and the
// actuator's TrainJob steps (trainjob_ops.h).
#include "gangkeeper/kube/training_runtimes.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
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
    : client_(client), on_change_(std::move(on_change)), options_(options) {
  absl::MutexLock lock(&mu_);
  collections_ = {{kClusterKind, kClusterPath}, {kNamespacedKind, kNamespacedPath}};
}

TrainingRuntimeCache::~TrainingRuntimeCache() { Stop(); }

void TrainingRuntimeCache::Start() {
  if (!threads_.empty()) return;
  for (size_t i = 0; i < 2; ++i) threads_.emplace_back([this, i] { Run(i); });
}

void TrainingRuntimeCache::Stop() {
  stopping_.store(true);
  {
    absl::MutexLock lock(&mu_);
    stop_flag_ = true;
  }
  if (threads_.empty()) return;
  client_->Shutdown();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

bool TrainingRuntimeCache::synced() const {
  absl::MutexLock lock(&mu_);
  for (const Collection& c : collections_) {
    if (!c.listed) return false;
  }
  return true;
}

bool TrainingRuntimeCache::WaitSynced(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stop_flag_) return true;
    for (const Collection& c : collections_) {
      if (!c.listed) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  for (const Collection& c : collections_) {
    if (!c.listed) return false;
  }
  return true;
}

std::optional<std::string> TrainingRuntimeCache::Find(const workload::TrainingRuntimeRef& ref,
                                                      absl::string_view namespace_name) const {
  TrainingRuntimeId id{ref.kind, ref.kind == kNamespacedKind ? std::string(namespace_name) : "", ref.name};
  absl::MutexLock lock(&mu_);
  auto it = runtimes_.find(id);
  if (it == runtimes_.end()) return std::nullopt;
  return it->second;
}

bool TrainingRuntimeCache::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_flag_), d);
  return !stop_flag_;
}

void TrainingRuntimeCache::Apply(const std::string& kind, const nlohmann::json& object, bool deleted) {
  const TrainingRuntimeId id = IdOf(kind, object);
  if (id.name.empty()) return;
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
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

void TrainingRuntimeCache::Replace(size_t index, std::map<TrainingRuntimeId, std::string> listed) {
  std::vector<TrainingRuntimeId> changed;
  {
    absl::MutexLock lock(&mu_);
    const std::string kind = collections_[index].kind;
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

bool TrainingRuntimeCache::WatchFrom(size_t index, std::string rv) {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  std::string kind, path;
  {
    absl::MutexLock lock(&mu_);
    kind = collections_[index].kind;
    path = collections_[index].path;
  }
  int failures = 0;
  const base::Stopwatch since_list;
  while (!stopping_.load() && since_list.Elapsed() < options_.resync) {
    WatchOptions wo;
    wo.resource_version = rv;
    wo.timeout_seconds = options_.watch_timeout_seconds;
    absl::Status s = client_->Watch(path, wo, [&](const WatchEvent& e) {
      if (const nlohmann::json* meta = Metadata(e.object); meta != nullptr) {
        std::string new_rv = meta->value("resourceVersion", "");
        if (!new_rv.empty()) rv = new_rv;
      }
      if (e.type == "ADDED" || e.type == "MODIFIED") Apply(kind, e.object, /*deleted=*/false);
      if (e.type == "DELETED") Apply(kind, e.object, /*deleted=*/true);
      failures = 0;
      return !stopping_.load();
    });
    if (stopping_.load()) return false;
    if (absl::IsOutOfRange(s)) {
      log->info("watch {} expired at resourceVersion {}; listing again", path, rv);
      return true;
    }
    if (!s.ok()) {
      log->warn("watch {}: {}", path, s.message());
      if (++failures > 5) return true;
      if (!Sleep(options_.error_backoff)) return false;
    }
  }
  return !stopping_.load();
}

void TrainingRuntimeCache::Run(size_t index) {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  std::string kind, path;
  {
    absl::MutexLock lock(&mu_);
    kind = collections_[index].kind;
    path = collections_[index].path;
  }
  bool told_absent = false;
  while (!stopping_.load()) {
    absl::StatusOr<ListResult> list = client_->List(path);
    if (!list.ok()) {
      if (stopping_.load()) return;
      if (HttpCode(list.status()) == 404) {
        // The Trainer's CRDs are not installed: no runtimes, so a TrainJob
        // waits for its runtime; asked again now and then.
        if (!told_absent) {
          log->info("{} is not served (Kubeflow Trainer not installed?): TrainJobs wait for their runtimes", path);
          told_absent = true;
        }
        Replace(index, {});
        if (!Sleep(options_.absent_retry)) return;
        continue;
      }
      log->warn("list {}: {} (TrainJobs keep the runtimes known so far; RBAC must allow list and watch on {})", path,
                list.status().message(), kind == kClusterKind ? "clustertrainingruntimes" : "trainingruntimes");
      if (!Sleep(options_.error_backoff)) return;
      continue;
    }
    told_absent = false;
    std::map<TrainingRuntimeId, std::string> listed;
    for (const nlohmann::json& item : list->items) {
      TrainingRuntimeId id = IdOf(kind, item);
      if (!id.name.empty()) listed[std::move(id)] = Kept(item);
    }
    Replace(index, std::move(listed));
    if (!WatchFrom(index, list->resource_version)) return;
  }
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
