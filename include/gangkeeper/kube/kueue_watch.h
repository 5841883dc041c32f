// gangkeeper: Kueue's quota objects read from the cluster (issue #24 item 1,
// --policy-source cluster).
//
// When the kueue.x-k8s.io CRDs are installed, the platform team's
// ResourceFlavors, ClusterQueues, LocalQueues, Cohorts and
// WorkloadPriorityClasses live in the cluster. DiscoverKueue
// (kueue_objects.h) asks the API server which version of the group it
// serves (v1beta2 preferred, v1beta1 when that is all there is). KueueObjectWatcher then runs one
// kube::ListThenWatch loop (list_then_watch.h) per resource, which lists it
// and watches from the list's resourceVersion (a watch that ends resumes
// from the last resourceVersion seen; one that expired, 410, lists again; a
// full list every `resync`), like NamespaceWatcher. Every object is decoded with the policy files' decoder
// and its messages (model::DecodeClusterObject): an object that does not
// decode is logged and left out, except a ClusterQueue, which stays as an
// inactive stand-in carrying the reason, so its workloads say why they
// wait and every other ClusterQueue keeps admitting.
//
// Only what scheduling reads counts as a change: an update of an object's
// status (Kueue's own controller or gangkeeper's status writer) or of
// server-set metadata publishes nothing. After every resource has been
// listed once, and after every change, `on_change` receives all the
// objects, so the caller republishes the policies.
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/kueue_objects.h"  // kKueueGroup, KueueVersion, KueuePath, DiscoverKueue
#include "gangkeeper/kube/list_then_watch.h"
#include "gangkeeper/model/policy_store.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

// One of the five resources: its plural name and kind, and whether it lives
// in a namespace (LocalQueue only).
struct KueueResource {
  std::string resource;  // "clusterqueues"
  std::string kind;      // "ClusterQueue"
  bool namespaced = false;
};
const std::vector<KueueResource>& KueueResources();

struct KueueWatchOptions {
  KueueVersion version = KueueVersion::kV1beta2;
  int64_t watch_timeout_seconds = 300;
  absl::Duration error_backoff = absl::Seconds(1);
  absl::Duration resync = absl::Minutes(10);
};

struct KueueWatchStats {
  uint64_t lists = 0;         // full lists (first, resync, after 410)
  uint64_t publications = 0;  // on_change calls
  uint64_t refused = 0;       // objects that did not decode (each time seen)
};

class KueueObjectWatcher {
 public:
  using OnChange = std::function<void(std::shared_ptr<const model::ClusterKueueObjects>)>;

  // `client` must outlive the watcher. `on_change` runs on one of the
  // watcher's threads (one call at a time) and must not block for long.
  KueueObjectWatcher(Client* client, OnChange on_change, KueueWatchOptions options = {});
  ~KueueObjectWatcher();  // Stop()
  KueueObjectWatcher(const KueueObjectWatcher&) = delete;
  KueueObjectWatcher& operator=(const KueueObjectWatcher&) = delete;

  void Start();
  // Ends the watches (through the client, once) and joins the loops.
  void Stop();
  // Every resource listed at least once.
  bool synced() const;
  bool WaitSynced(absl::Duration timeout) const;
  // The objects known now; never null (empty before the first lists).
  std::shared_ptr<const model::ClusterKueueObjects> current() const;
  KueueWatchStats stats() const;

 private:
  // What one object contributes: the fields scheduling reads (to tell a
  // real change from a status update) and its decoded form.
  struct Entry {
    nlohmann::json significant;
    std::string text;  // the object as JSON, for the decoder
  };
  using Objects = std::map<std::string, Entry>;  // "NS/NAME" or "NAME"

  // A complete list of resource `index`.
  void OnList(size_t index, const ListResult& list);
  // Applies one object of resource `index`; publishes when it changed.
  void Apply(size_t index, const nlohmann::json& object, bool deleted);
  // Replaces everything of resource `index` with a list; publishes when
  // anything changed (or on the first full sync).
  void Replace(size_t index, Objects listed);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Client* const client_;
  const OnChange on_change_;
  const KueueWatchOptions options_;
  // Held across building and handing over a publication, so on_change
  // sees them in order.
  absl::Mutex publish_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  bool stop_flag_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Objects> objects_ ABSL_GUARDED_BY(mu_);  // per resource
  std::vector<bool> listed_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const model::ClusterKueueObjects> current_ ABSL_GUARDED_BY(mu_);
  KueueWatchStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<ListThenWatch>> loops_;  // per resource
};

}  // namespace gangkeeper::kube
