// gangkeeper: the cluster's namespaces and their labels (DESIGN §4; issue
// #23, "Namespaces from the cluster").
//
// A ClusterQueue's namespaceSelector matches a namespace's labels. In a
// cluster those labels live on the Namespace objects, not in the policy
// files: one kube::ListThenWatch loop (list_then_watch.h) lists
// /api/v1/namespaces, then watches from the list's resourceVersion (a watch
// that ends resumes from the last resourceVersion seen; one that expired,
// 410, lists again; a full list every `resync`).
// After the first list and after every change of a namespace's labels (a
// namespace added, relabelled or deleted; not a change of anything else)
// `on_change` receives the whole map, name -> labels, so the caller
// republishes the policies that selectors read. synced() turns true after
// the first list: /readyz waits for it, so no workload is judged against an
// empty namespace list.
//
// Only labels are kept (metadata.labels); the list is not filtered, so RBAC
// must allow list and watch on namespaces (deploy/).
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/list_then_watch.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::kube {

using NamespaceLabels = std::map<std::string, model::Labels>;  // name -> labels

struct NamespaceWatchOptions {
  int64_t watch_timeout_seconds = 300;
  absl::Duration error_backoff = absl::Seconds(1);
  // A full list again this often, even when the watch is healthy.
  absl::Duration resync = absl::Minutes(10);
};

class NamespaceWatcher {
 public:
  using OnChange = std::function<void(std::shared_ptr<const NamespaceLabels>)>;

  // `client` must outlive the watcher. `on_change` runs on the watcher's
  // thread and must not block for long.
  NamespaceWatcher(Client* client, OnChange on_change, NamespaceWatchOptions options = {});
  ~NamespaceWatcher();  // Stop()
  NamespaceWatcher(const NamespaceWatcher&) = delete;
  NamespaceWatcher& operator=(const NamespaceWatcher&) = delete;

  void Start();
  // Ends the watch (through the client) and joins the thread.
  void Stop();
  bool synced() const;
  // Waits up to `timeout` for the first list; synced().
  bool WaitSynced(absl::Duration timeout) const;
  // The namespaces known now; never null (empty before the first list).
  std::shared_ptr<const NamespaceLabels> current() const;

 private:
  // A complete list: published when it differs (or is the first).
  void Replace(const ListResult& list);
  // Applies one namespace object; publishes when its labels changed.
  void Apply(const nlohmann::json& object, bool deleted);
  void Publish(std::shared_ptr<const NamespaceLabels> next);

  const OnChange on_change_;
  mutable absl::Mutex mu_;
  bool stop_flag_ ABSL_GUARDED_BY(mu_) = false;
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const NamespaceLabels> current_ ABSL_GUARDED_BY(mu_);
  ListThenWatch loop_;
};

}  // namespace gangkeeper::kube
