// gangkeeper: what one principal may read of the quota objects, the
// ClusterQueues' status and the workloads (the rules are in auth.h).
//
// The API builds one ReadScope per request from the policies of the
// snapshot it answers from, and asks it for every object it would list or
// return, so lists, gets, status and workload routes agree. A team-admin's
// scope follows its LocalQueues; every other role reads all kinds or none.
// A Kubernetes identity reads a kind whole when it may list it
// cluster-wide, and otherwise follows the LocalQueues of the namespaces it
// may list them in, like a team-admin (auth.h). Thread-compatible, cheap
// to build (one pass over the LocalQueues, ClusterQueues and GPUNodePools,
// on first use); it refers to `policies`, which must outlive it.
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
  bool Namespace(const std::string& namespace_name) const { return who_.MayReadLocalQueues(namespace_name); }
  bool ClusterQueue(const std::string& name) const;
  // One object of `kind` (the API's kind names: "ResourceFlavor",
  // "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass",
  // "PriorityClass", "GPUNodePool").
  bool Object(const std::string& kind, const std::string& namespace_name, const std::string& name) const;

 private:
  // Kubernetes identities: a kind read whole, else what a team-admin of
  // the namespaces it may list LocalQueues in would read.
  bool KindWhole(const std::string& kind) const { return who_.authorizer != nullptr && who_.MayReadAll(kind); }
  // The team-admin's sets, from the namespaces whose LocalQueues it reads;
  // computed on first use (a Kubernetes identity pays one review per
  // namespace only when a kind is not read whole).
  void Derive() const;

  const Principal who_;
  const model::PolicySet& policies_;
  bool all_ = false;  // admin, viewer
  mutable bool derived_ = false;
  mutable bool any_namespace_ = false;  // reads the LocalQueues of some namespace
  mutable std::set<std::string> cluster_queues_, cohorts_, flavors_, gpu_node_pools_;
};

}  // namespace gangkeeper::api
