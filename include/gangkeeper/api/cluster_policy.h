// gangkeeper: the HTTP API's quota changes written to the cluster
// (--policy-source cluster; issue #24 item 1).
//
// When Kueue's objects are read from the cluster there is one truth: the
// API server's objects. A PUT, DELETE or POST /v1/apply of a
// ResourceFlavor, ClusterQueue, LocalQueue, Cohort or WorkloadPriorityClass
// is authorized and validated as always (with every other object in
// effect: 422 with the field), and then written to the cluster through
// this interface instead of the overlay; the node's watch of Kueue's
// objects brings it back into the policies, and the API answers once this
// node's policies show it (bounded). The node implements it with its
// Kubernetes client (api does not depend on kube).
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/model/overlay.h"

namespace gangkeeper::api {

class ClusterPolicyWriter {
 public:
  virtual ~ClusterPolicyWriter() = default;

  // Creates or replaces every object of `change.put` (five Kueue kinds;
  // anything else is FailedPrecondition before anything is written) and
  // deletes every model::ObjectId in `change.deleted`. Returns the
  // resourceVersion the API server gave each written object, by ObjectId
  // (deleted ones are absent). Not a transaction: objects are written one
  // by one in dependency order, and an error names what was written before
  // it. Aborted: an object changed in the cluster meanwhile (409).
  [[nodiscard]] virtual absl::StatusOr<std::map<std::string, std::string>> Write(const model::PolicyOverlay& change,
                                                                                 const std::string& actor) = 0;

  // How long the API waits for this node's policies to show a write.
  virtual absl::Duration view_wait() const { return absl::Seconds(10); }
};

}  // namespace gangkeeper::api
