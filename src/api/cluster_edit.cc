// gangkeeper api: quota changes written to the cluster (--policy-source
// cluster; see cluster_policy.h and handlers.h).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gangkeeper/base/clock.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"

namespace gangkeeper::api {
namespace {

// The resourceVersion of the object `id` (model::ObjectId) in `p`; nullopt
// when it is not there.
std::optional<std::string> VersionIn(const model::PolicySet& p, const std::string& id) {
  std::vector<std::string> parts = absl::StrSplit(id, absl::MaxSplits('/', 2));
  if (parts.size() != 3) return std::nullopt;
  const std::string& kind = parts[0];
  const std::string& name = parts[2];
  auto find = [&](const auto& map, const auto& key) -> std::optional<std::string> {
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    return it->second.meta.resource_version;
  };
  if (kind == "ResourceFlavor") return find(p.flavors, name);
  if (kind == "ClusterQueue") return find(p.cluster_queues, name);
  if (kind == "Cohort") return find(p.cohorts, name);
  if (kind == "WorkloadPriorityClass") return find(p.workload_priority_classes, name);
  if (kind == "LocalQueue") return find(p.local_queues, std::make_pair(parts[1], name));
  return std::nullopt;
}

}  // namespace

server::HttpResponse Api::EditInCluster(
    const Principal& who,
    const std::function<std::optional<server::HttpResponse>(const model::PolicySet&, model::PolicyOverlay*,
                                                            std::string*)>& change,
    const std::function<server::HttpResponse(const model::PolicySet&)>& answer) {
  absl::MutexLock lock(&edit_mu_);
  std::shared_ptr<const model::EffectiveSet> now = policies_->current();
  // The change alone: nothing of an older overlay is written again.
  auto overlay = std::make_shared<model::PolicyOverlay>();
  overlay->generation = 1;
  std::string what;
  if (std::optional<server::HttpResponse> early = change(*now->policies, overlay.get(), &what)) return *early;
  bool local_kind = !overlay->put.priority_classes.empty() || !overlay->put.gpu_node_pools.empty();
  for (const std::string& id : overlay->deleted) {
    local_kind = local_kind || absl::StartsWith(id, "PriorityClass/") || absl::StartsWith(id, "GPUNodePool/");
  }
  if (local_kind) {
    return Error(absl::FailedPreconditionError(
        "with --policy-source cluster only Kueue's objects are written through the API (to the cluster); "
        "PriorityClasses and GPUNodePools come from the policy files (--policies) and kubectl"));
  }
  model::Diagnostics problems;
  absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> next = policies_->Compose(overlay, &problems);
  if (!next.ok()) return Invalid(problems);
  absl::StatusOr<std::map<std::string, std::string>> written = cluster_->Write(*overlay, who.name);
  if (!written.ok()) {
    const absl::Status& s = written.status();
    if (absl::IsAborted(s)) {
      return Error(absl::AbortedError(absl::StrCat(s.message(), "; GET it again and apply your change to that")),
                   "metadata.resourceVersion");
    }
    if (absl::IsPermissionDenied(s)) {
      return Error(absl::UnavailableError(
          absl::StrCat("the API server refused gangkeeper's write: ", s.message(),
                       " (RBAC: gangkeeper's service account needs create, update and delete on kueue.x-k8s.io)")));
    }
    if (absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s)) return server::ErrorResponse(422, s.message());
    return Error(absl::UnavailableError(absl::StrCat("writing to the cluster: ", s.message(), "; retry")));
  }
  // The watch brings the change back; answer once the broker shows it, so
  // a GET after the answer reads it (bounded: the write is done either way).
  auto shown = [&]() {
    const model::PolicySet& p = broker_->snapshot()->policies();
    for (const auto& [id, version] : *written) {
      if (VersionIn(p, id) != version) return false;
    }
    for (const std::string& id : overlay->deleted) {
      if (VersionIn(p, id).has_value()) return false;
    }
    return true;
  };
  absl::Notification never;
  const base::Stopwatch waited;
  while (!shown() && waited.Elapsed() < cluster_->view_wait()) {
    never.WaitForNotificationWithTimeout(absl::Milliseconds(10));
  }
  (void)what;
  return answer(broker_->snapshot()->policies());
}

}  // namespace gangkeeper::api
