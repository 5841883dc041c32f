// gangkeeper api: the handlers behind the API's routes (api.cc holds the
// routes table). One Api per Routes() call, shared by its routes; reads
// come from the broker's published snapshot, quota changes go through the
// PolicyEditor one at a time. Thread-safe. Private to the module.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/api/auth.h"
#include "gangkeeper/api/cluster_policy.h"
#include "gangkeeper/api/policy_editor.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"
#include "gangkeeper/server/http.h"
#include "nlohmann/json.hpp"
#include "src/api/object_ref.h"

namespace gangkeeper::api {

class Api {
 public:
  Api(broker::EventQueue* events, const broker::SnapshotSource* broker, Authenticator* tokens, const base::Clock* clock, const audit::AuditLog* audit,
      model::PolicyStore* policies, PolicyEditor* editor, ClusterPolicyWriter* cluster = nullptr);

  // Authenticates, then runs `f` with the principal.
  server::HttpResponse Guard(const server::HttpRequest& req,
                             const std::function<server::HttpResponse(const Principal&)>& f) const;

  // --- Quota objects (Kubernetes-style paths; quota.cc, apply.cc). ---

  // GET list or one: a list holds what `who` may read; one object outside
  // that is 403 whether or not it exists (auth.h).
  server::HttpResponse GetObjects(const Principal& who, const ObjectRef& ref) const;
  // PUT (create or replace) and DELETE of one object.
  server::HttpResponse Change(const Principal& who, const ObjectRef& ref, const std::string& method,
                              const std::string& body);
  // POST /v1/apply: a bundle, all or nothing.
  server::HttpResponse Apply(const Principal& who, const std::string& body);

  // --- ClusterQueues and workloads (workloads.cc). ---

  server::HttpResponse ClusterQueues(const Principal& who) const;
  server::HttpResponse ClusterQueueStatus(const Principal& who, const std::string& name) const;
  server::HttpResponse Workloads(const Principal& who, const server::HttpRequest& req) const;
  // GET /v1/workloads/NS/NAME (any kind; 409 when two kinds share the
  // name) and /v1/workloads/KIND/NS/NAME.
  server::HttpResponse Workload(const Principal& who, const std::optional<std::string>& kind_ref, const std::string& ns,
                                const std::string& name) const;

  // --- The audit log (audit_reads.cc). ---

  // GET /v1/audit: one page of events.
  server::HttpResponse Audit(const Principal& who, const server::HttpRequest& req) const;
  // The newest audit record and its chain value, for an external system to
  // anchor (src/audit/FORMAT.md §5).
  server::HttpResponse AuditHead(const Principal& who) const;
  // Every matching event as JSON lines (at most 100,000 per answer; the
  // X-Gangkeeper-Next-Cursor header says where to go on).
  server::HttpResponse Export(const Principal& who, const server::HttpRequest& req) const;

 private:
  // One change of the overlay: read what is in effect, let `change` edit a
  // copy of the overlay (or answer early: 404, 409), validate the result
  // with every other object, write it if nothing changed meanwhile, and
  // answer with `answer` (given the set now in effect). A change that lost
  // a race with another replica's is made again on the newer state.
  server::HttpResponse Edit(
      const Principal& who,
      const std::function<std::optional<server::HttpResponse>(const model::PolicySet&, model::PolicyOverlay*,
                                                              std::string*)>& change,
      const std::function<server::HttpResponse(const model::PolicySet&)>& answer);
  // Edit with --policy-source cluster (cluster_policy.h): the change is
  // validated as always, then written to the cluster, and answered once
  // the broker's policies show it (bounded by the writer's view_wait).
  server::HttpResponse EditInCluster(
      const Principal& who,
      const std::function<std::optional<server::HttpResponse>(const model::PolicySet&, model::PolicyOverlay*,
                                                              std::string*)>& change,
      const std::function<server::HttpResponse(const model::PolicySet&)>& answer);
  // The audit query of `req`, checked against `who`'s role; or the error
  // to answer with.
  std::optional<server::HttpResponse> AuditQuery(const Principal& who, const server::HttpRequest& req,
                                                 audit::Query* q) const;
  // The audit events of one workload, oldest first (the last 100).
  // `kind` "" takes every workload kind. Events from before kinds were
  // recorded (kind "Workload") belong to any kind of that name.
  nlohmann::json History(const std::string& ns, const std::string& name, const std::string& kind) const;

  const broker::SnapshotSource* broker_;
  Authenticator* tokens_;
  const base::Clock* clock_;
  const audit::AuditLog* audit_;
  model::PolicyStore* policies_;  // the files + the overlay in effect
  std::unique_ptr<model::PolicyStore> own_policies_;  // when none was given
  PolicyEditor* editor_;
  std::unique_ptr<PolicyEditor> local_editor_;  // when none was given
  ClusterPolicyWriter* cluster_;  // --policy-source cluster; null: the overlay
  absl::Mutex edit_mu_;  // one quota change at a time on this replica
};

}  // namespace gangkeeper::api
