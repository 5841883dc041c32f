// gangkeeper: the HTTP API on the API listener (DESIGN §7).
//
// Built so far: authentication (auth.h) and the visibility reads
//   GET /v1/clusterqueues                      every ClusterQueue's status
//   GET /v1/clusterqueues/NAME/status          nominal, usage, borrowed, lent,
//                                              available per flavor/resource;
//                                              pending and admitted counts
//   GET /v1/workloads?namespace=&clusterQueue=&state=pending|admitted|all
//   GET /v1/workloads/NS/NAME                  one workload
//   GET|PUT|DELETE /apis/kueue.x-k8s.io/{v1beta1,v1beta2}/{resourceflavors,clusterqueues,
//                 cohorts,workloadpriorityclasses}[/NAME],
//                 .../namespaces/NS/localqueues[/NAME],
//                 /apis/scheduling.k8s.io/v1/priorityclasses[/NAME]
//                 quota objects in Kueue's own form, JSON or YAML bodies,
//                 answered at the version of the path;
//                 a change is validated with every other object (422 with
//                 the field), checked against metadata.resourceVersion
//                 (409), and durable before the answer
//   POST /v1/apply  a bundle of objects, applied all or nothing (each
//                 checked against its metadata.resourceVersion, 409)
//   GET /v1/audit?namespace=&name=&kind=&action=&actor=&clusterQueue=
//                 &since=&until=&limit=&cursor=   audit events, oldest
//                                              first, with a `next` cursor
//                                              (admin, auditor; a team-admin
//                                              for one of its namespaces)
//   GET /v1/audit/export?(same filters)        the events as JSON lines
// A workload's answer carries its audit history; one that has ended is
// still answered from the audit log (state finished / deleted).
// Each workload: pod sets, flavor assignment, priority, phase, positions in
// its ClusterQueue and LocalQueue, the pending reason in numbers,
// timestamps, and what the actuator sent for it. Reads come from the
// broker's published snapshot and never wait for the broker. What each role
// may read and write is in auth.h; lists hold only what the caller may
// read. Errors are {"error": {"code", "message", "field"}}.
#pragma once

#include <vector>

#include "gangkeeper/api/auth.h"
#include "gangkeeper/api/cluster_policy.h"
#include "gangkeeper/api/policy_editor.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/server/server.h"

namespace gangkeeper::api {

// The API's routes. They read the broker's state from `broker` and give
// changes (with no `editor`) to `events`. `tokens` says who calls (a
// TokenStore, or a KubeAuthenticator: kube_auth.h). `events`, `broker`, `tokens`,
// `clock` and `audit` (may be null:
// /v1/audit answers 503) must outlive them. `policies` (may be null: no
// policy files) is the node's policy store: quota changes are an overlay
// over its files (model/overlay.h), validated by it and published to it
// once written. `editor` (may be null: the broker takes changes directly)
// is where changes to quota objects go. Both must outlive the routes.
// `cluster` (may be null; --policy-source cluster) takes the changes of
// Kueue's objects instead: they are written to the cluster, which the node
// watches (cluster_policy.h); it must outlive the routes.
std::vector<server::Route> Routes(broker::EventQueue* events, const broker::SnapshotSource* broker, Authenticator* tokens,
                                  const base::Clock* clock,
                                  const audit::AuditLog* audit = nullptr,
                                  model::PolicyStore* policies = nullptr,
                                  PolicyEditor* editor = nullptr, ClusterPolicyWriter* cluster = nullptr);

// GET /metrics on the API listener: `registry`'s Prometheus text for a token
// of role admin, viewer or metrics (a Kubernetes identity: get on the
// non-resource path /metrics); 401 without a valid token, 403 for the
// other roles. It takes the place of the server's open /metrics (serve
// leaves it out with --metrics-public). `registry`, `tokens` and `clock`
// must outlive the route.
server::Route MetricsRoute(const metrics::Registry* registry, Authenticator* tokens, const base::Clock* clock);

}  // namespace gangkeeper::api
