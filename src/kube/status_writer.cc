// gangkeeper: StatusWriter (see status_writer.h).
#include "gangkeeper/kube/status_writer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "src/kube/write_pass.h"

namespace gangkeeper::kube {

using json = nlohmann::json;

StatusWriter::StatusWriter(Client* client, const broker::SnapshotSource* view, KueueWriterOptions options)
    : client_(client), view_(view), options_(std::move(options)) {
  GK_CHECK_MSG(options_.clock != nullptr, "KueueWriterOptions::clock is required");
}

StatusWriter::~StatusWriter() { Stop(); }

void StatusWriter::ResyncNext() {
  absl::MutexLock lock(&mu_);
  resync_next_ = true;
}

KueueWriterStats StatusWriter::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool StatusWriter::Allowed() {
  if (options_.leading && !options_.leading()) {
    listed_ = false;  // leading again: list first
    return false;
  }
  if (options_.refused) {
    if (!options_.refused().empty()) {
      listed_ = false;
      absl::MutexLock lock(&mu_);
      ++stats_.refused;
      return false;
    }
  }
  return true;
}

void StatusWriter::List() {
  // Taken first: what it holds was in the cluster before the list began
  // when the cluster is where it came from (--policy-source cluster).
  std::shared_ptr<const broker::Snapshot> before = view_->snapshot();
  written_.clear();
  missing_.clear();
  done_version_ = UINT64_MAX;
  const KueueVersion v = options_.version;
  bool ok = true;
  auto take = [&](const std::string& collection, bool namespaced, const std::vector<std::string>& keys) {
    absl::StatusOr<ListResult> list = client_->List(KueuePath(v, collection));
    if (!list.ok()) {
      base::GetLogger("kube")->warn("kueue status: listing {}: {}", collection, list.status().message());
      ok = false;
      return;
    }
    for (const json& item : list->items) {
      if (!item.contains("metadata")) continue;
      const std::string name = JsonString(item["metadata"], "name");
      const std::string ns = namespaced ? JsonString(item["metadata"], "namespace") : "";
      const json status = JsonObject(item, "status");
      Written w;
      w.status = ObservedStatus(status, keys);
      w.conditions = JsonArray(status, "conditions");
      written_[KueuePath(v, collection, ns, name)] = std::move(w);
    }
  };
  take("clusterqueues", false, ClusterQueueStatusKeys());
  take("localqueues", true, LocalQueueStatusKeys(v));
  TakeCohorts(v);
  if (ok) MarkAbsent(*before);
  listed_ = ok;
  last_list_ = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  ++stats_.lists;
}

// The Cohorts in the cluster, as ClusterQueues are taken. A cluster whose
// CRDs have no Cohort (404) has no Cohort status to write: the queues'
// status is written all the same.
void StatusWriter::TakeCohorts(KueueVersion v) {
  absl::StatusOr<ListResult> list = client_->List(KueuePath(v, "cohorts"));
  if (!list.ok()) {
    if (HttpCode(list.status()) != 404) {
      base::GetLogger("kube")->warn("kueue status: listing cohorts: {}", list.status().message());
    }
    return;
  }
  for (const json& item : list->items) {
    if (!item.contains("metadata")) continue;
    const json status = JsonObject(item, "status");
    Written w;
    w.status = ObservedStatus(status, CohortStatusKeys());
    w.conditions = JsonArray(status, "conditions");
    written_[KueuePath(v, "cohorts", "", JsonString(item["metadata"], "name"))] = std::move(w);
  }
}

// The queues the broker had before the list and the list did not bring are
// not in the cluster: skipped until the next list, so that a new leader, or a
// restart, sends nothing for them (not even a PATCH answered 404). Queues
// that appear in the broker later are tried when they do (a ClusterQueue
// just applied in the cluster).
void StatusWriter::MarkAbsent(const broker::Snapshot& snap) {
  const KueueVersion v = options_.version;
  for (const auto& [name, view] : snap.cluster_queues()) {
    const std::string path = KueuePath(v, "clusterqueues", "", name);
    if (written_.count(path) == 0) missing_.insert(path);
  }
  for (const auto& [key, lq] : snap.policies().local_queues) {
    const std::string path = KueuePath(v, "localqueues", key.first, key.second);
    if (written_.count(path) == 0) missing_.insert(path);
  }
  for (const auto& [name, cohort] : snap.policies().cohorts) {  // the same for Cohort objects
    const std::string path = KueuePath(v, "cohorts", "", name);
    if (written_.count(path) == 0) missing_.insert(path);
  }
}

bool StatusWriter::WriteOne(const std::string& path, const std::string& key, const KueueStatus& want,
                            WritePass* pass) {
  (void)key;
  auto it = written_.find(path);
  if (it == written_.end() && missing_.count(path) > 0) return true;  // not in the cluster
  if (it != written_.end() && it->second.status == want) return true;
  const json previous = it != written_.end() ? it->second.conditions : json::array();
  const json status = StatusJson(want, previous, options_.clock->Now());
  absl::StatusOr<json> r = pass->Patch(absl::StrCat(path, "/status"), PatchType::kMerge, {{"status", status}});
  if (WritePass::Refused(r.status())) return false;
  absl::MutexLock lock(&mu_);
  if (!r.ok()) {
    if (HttpCode(r.status()) == 404) {
      missing_.insert(path);
      return true;
    }
    ++stats_.failures;
    base::GetLogger("kube")->warn("kueue status: {}: {}", path, r.status().message());
    return false;
  }
  ++stats_.writes;
  written_[path] = Written{want, JsonArray(status, "conditions")};
  return true;
}

int StatusWriter::Sync() {
  absl::MutexLock sync(&sync_mu_);
  if (!Allowed()) return 0;
  bool resync = false;
  {
    absl::MutexLock lock(&mu_);
    resync = resync_next_;
    resync_next_ = false;
    ++stats_.passes;
  }
  const absl::Time now = options_.clock->Now();
  if (!listed_ || resync || now - last_list_ >= options_.resync) List();
  if (!listed_) return 0;
  std::shared_ptr<const broker::Snapshot> snap = view_->snapshot();
  if (snap->version() == done_version_) return 0;  // nothing changed since everything was written
  uint64_t before;
  {
    absl::MutexLock lock(&mu_);
    before = stats_.writes;
  }
  // Every write asks the lease (a pass that outlives it sends nothing
  // more, and the next pass that leads lists again).
  WritePass pass(client_, options_.leading, options_.max_writes_per_pass);
  bool complete = true;
  const KueueVersion v = options_.version;
  for (const auto& [name, view] : snap->cluster_queues()) {
    complete &= WriteOne(KueuePath(v, "clusterqueues", "", name), name,
                         ClusterQueueStatusOf(*view, snap->policies()), &pass);
  }
  for (const auto& [key, status] : LocalQueueStatusesOf(*snap, v)) {
    complete &= WriteOne(KueuePath(v, "localqueues", key.first, key.second), key.second, status, &pass);
  }
  // Cohorts that are objects (the policies' Cohorts, or listed from the
  // cluster); a cohort named only by ClusterQueues has none to write to.
  for (const auto& [name, cohort] : snap->cohorts()) {
    const std::string path = KueuePath(v, "cohorts", "", name);
    if (snap->policies().cohorts.count(name) == 0 && written_.count(path) == 0) continue;
    complete &= WriteOne(path, name, CohortStatusOf(cohort), &pass);
  }
  if (pass.lost_lead()) listed_ = false;
  done_version_ = complete ? snap->version() : UINT64_MAX;
  absl::MutexLock lock(&mu_);
  return static_cast<int>(stats_.writes - before);
}

void StatusWriter::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void StatusWriter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StatusWriter::Run() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) return;
    }
    Sync();
  }
}

}  // namespace gangkeeper::kube
