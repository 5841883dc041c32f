// gangkeeper: what one principal may read of the quota objects, the
// ClusterQueues' status and the workloads (the rules are in auth.h).
//
// The API builds one ReadScope per request from the policies of the
// snapshot it answers from, and asks it for every object it would list or
// return, so lists, gets, status and workload routes agree. A team-admin's
// scope follows its LocalQueues; every other role reads all kinds or none.
// A value: thread-compatible, cheap to build (one pass over the
// LocalQueues, ClusterQueues and GPUNodePools).
#pragma once

#include <set>
#include <string>

#include "gangkeeper/api/auth.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::api {

class ReadScope {
 public:
  ReadScope(const Principal& who, const model::PolicySet& policies);

  // Whether the role reads quota objects, ClusterQueue status and workloads
  // at all (auditor and metrics do not: 403).
  bool ReadsQuota() const { return who_.MayReadQuota(); }
  // Workloads and LocalQueues of `namespace_name`.
  bool Namespace(const std::string& namespace_name) const { return who_.MayRead(namespace_name); }
  bool ClusterQueue(const std::string& name) const { return all_ || cluster_queues_.count(name) != 0; }
  // One object of `kind` (the API's kind names: "ResourceFlavor",
  // "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass",
  // "PriorityClass", "GPUNodePool").
  bool Object(const std::string& kind, const std::string& namespace_name, const std::string& name) const;

 private:
  const Principal who_;
  bool all_ = false;  // admin, viewer
  std::set<std::string> cluster_queues_, cohorts_, flavors_, gpu_node_pools_;
};

}  // namespace gangkeeper::api
