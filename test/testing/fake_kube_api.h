// gangkeeper tests: an in-memory Kubernetes API server over real HTTPS.
//
// FakeKubeApi is the double the Kubernetes client in src/kube/ is tested
// against. It is a real cpp-httplib SSLServer on 127.0.0.1 (port 0) that keeps
// objects in memory under one global resourceVersion and reproduces the
// kube-apiserver behaviours listed in docs/KUBE-API-FACTS.md. Tests seed and
// inspect objects through the store methods (like a controller or kubectl
// would), script failures, and read back every request the client made.
//
// What it implements, over HTTP:
//   - GET object; LIST with labelSelector, fieldSelector (metadata.name,
//     metadata.namespace, status.phase; =, ==, !=), limit + continue
//     (consistent snapshots; 410 Expired with a fresh token after
//     CompactHistory);
//   - WATCH (watch=true|1) with resourceVersion ("" / "0" lists first),
//     allowWatchBookmarks, timeoutSeconds (default 30 s), selectors; a
//     too-old resourceVersion is HTTP 200 + one ERROR event with code 410;
//   - PATCH of objects and of the /status subresource with merge-patch,
//     json-patch and (core and batch only) strategic-merge-patch, with the
//     Job template and Pod spec mutability rules, immutable metadata, a
//     metadata.resourceVersion in the patch as a precondition (409), no-op
//     patches keeping the resourceVersion;
//   - POST to a namespaced collection: a create (201; 409 AlreadyExists),
//     used for Events (events.k8s.io/v1 and core/v1 events are served);
//   - DELETE with DeleteOptions preconditions (409) and propagationPolicy
//     (body or query), the Job orphaning Warning header;
//   - bearer-token auth (401), Status error bodies, 429 as plain text with
//     Retry-After, scripted failures and delays, a record of every call;
//   - POST of TokenReview (authentication.k8s.io/v1) and SubjectAccessReview
//     (authorization.k8s.io/v1), answered from SetTokenUser and
//     SetAccessRule (script their failures with Fail, path_contains
//     "tokenreviews" / "subjectaccessreviews").
// Kueue's objects (issue #24; KueueWriteResources in the .cc): the
// kueue.x-k8s.io clusterqueues, localqueues, cohorts and workloads at
// v1beta1 and v1beta2, not served until set_served (e.g.
// "kueue.x-k8s.io/v1beta2/workloads"); a POST of one drops .status (the
// status subresource); deleting any object deletes the Workloads that
// reference its uid in an ownerReference and have no other owner left, and
// drops the dangling reference from those that do (the only garbage
// collection);
// admissionregistration.k8s.io/v1 webhook configurations and
// coordination.k8s.io/v1 leases are served.
//   - Kueue's group (ServeKueue, off by default): discovery (GET /apis/GROUP
//     for every group with a served resource), POST to cluster-scoped
//     collections, and PUT (replace; metadata.resourceVersion in the body
//     is a precondition, 409; status is kept) of the kueue.x-k8s.io
//     resources it serves.
// What it does NOT implement: PUT of other kinds and other cluster-scoped POSTs (405; seed objects with Create),
// protobuf, Table output, field managers / server-side apply, admission,
// defaulting (except the two default tolerations on new Pods), garbage
// collection (deleting a Job never deletes Pods), finalizers and graceful
// deletion (objects vanish at once), resourceVersion/resourceVersionMatch on
// LIST (always served from the current state), sendInitialEvents, watching a
// single object by path, real strategic-merge semantics (lists replace the
// whole list, $patch directives are not understood), conversion between
// versions (one store per group/resource; objects are shown with the
// apiVersion of the request path), and any validation beyond the rules above.
//
// Thread-safe: store methods may be called from any thread while clients are
// connected. Watch streams run on the server's worker pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::testing {

struct RecordedCall;  // below

// Who a token is, as the fake's TokenReview answers.
struct FakeUser {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

// Decides a SubjectAccessReview from its spec, as sent (user, groups, uid,
// extra, resourceAttributes or nonResourceAttributes). Called without the
// fake's lock, on a server thread: must be thread-safe.
using FakeAccessRule = std::function<bool(const nlohmann::json& spec)>;

struct FakeKubeOptions {
  // Serving certificate and key (PEM). `gangkeeper certs --out DIR` writes
  // DIR/tls.crt and DIR/tls.key with SANs localhost and 127.0.0.1; the CA
  // to verify against is DIR/ca.crt.
  std::string cert_file, key_file;
  // Required bearer token; empty disables the auth check.
  std::string token = "fake-token";
  // Server threads. cpp-httplib holds one per open connection for as long
  // as it stays open (keep-alive idle included, up to a second here), and
  // every watch holds one for its length: a client with more connections
  // than this waits for a thread, which the real API server never makes it
  // do.
  int threads = 48;
  // Watch events kept; a watch from before the oldest kept event gets the
  // 410 ERROR event.
  size_t history = 10000;
  // Time between BOOKMARK events on watches with allowWatchBookmarks=true.
  absl::Duration bookmark_interval = absl::Seconds(1);
  // Watch length when the request has no timeoutSeconds.
  absl::Duration default_watch_timeout = absl::Seconds(30);
  // Optional: called once for every HTTP request, after it has been handled
  // and recorded, with the call (as Calls() will show it) and the time the
  // fake began handling it (the request had been read whole by then). It
  // runs on the server's worker thread that served the request, without the
  // fake's lock held, so it may call the store methods; keep it short, as
  // that connection waits for it. For a watch it runs once the stream has
  // been set up (status 200), not when the stream ends. Must be thread-safe:
  // requests on different connections are handled concurrently. Empty (the
  // default) = no callback.
  std::function<void(const RecordedCall&, absl::Time)> on_call;
};

// One HTTP request as the server saw it, with the status it answered (200
// for a watch that started streaming).
struct RecordedCall {
  std::string method;
  std::string path;           // decoded path, without the query
  std::string query;          // raw query string as sent, without '?'
  std::string content_type;
  std::string body;
  std::string authorization;  // the Authorization header, verbatim
  int status = 0;
};

// A failure (or delay) applied to matching requests before normal handling.
struct ScriptedFailure {
  std::string method;          // "" = any
  std::string path_contains;   // "" = any; matched against the path only
  bool watch_only = false;     // only requests with watch=true|1
  bool non_watch_only = false; // only requests without watch
  int status = 500;            // 0 = delay only, then answer normally
  std::string retry_after;     // Retry-After header value (seconds), if any
  absl::Duration delay;        // sleep before answering
  int times = 1;               // matching requests it applies to; -1 = until cleared
};

class FakeKubeApi {
 public:
  // Starts serving on 127.0.0.1 on a free port. InvalidArgument when the
  // certificate or key cannot be loaded; Unavailable when binding fails.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FakeKubeApi>> Start(FakeKubeOptions options);
  // Stops the server, ends every watch and joins the server thread.
  ~FakeKubeApi();
  FakeKubeApi(const FakeKubeApi&) = delete;
  FakeKubeApi& operator=(const FakeKubeApi&) = delete;

  int port() const;
  // "https://127.0.0.1:PORT"
  std::string url() const;

  // ---- Object store (acts like a controller or kubectl) ----
  // Paths are real API paths: "/apis/batch/v1/namespaces/team-a/jobs"
  // (collection) and ".../jobs/NAME" (object).
  //
  // Create fills metadata.uid (random UUID) when missing, namespace,
  // resourceVersion, creationTimestamp and generation, adds the two default
  // NoExecute tolerations to Pods, and emits ADDED. Returns the object with
  // kind and apiVersion. InvalidArgument for a bad path or object;
  // AlreadyExists; NotFound for a resource that is not served.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Create(const std::string& collection_path, nlohmann::json object);
  // NotFound when absent.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Get(const std::string& object_path) const;
  // Replaces the whole object, status included, without any validation
  // (controllers do this); metadata.name/namespace/uid/creationTimestamp are
  // kept. A no-op keeps the resourceVersion and emits nothing; otherwise
  // MODIFIED. NotFound when absent.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Replace(const std::string& object_path, nlohmann::json object);
  // Emits DELETED with the last state under a new resourceVersion.
  [[nodiscard]] absl::Status Delete(const std::string& object_path);
  // Objects of a collection (all namespaces when the path has none), ordered
  // by namespace and name, with kind and apiVersion. Empty for a bad path.
  std::vector<nlohmann::json> List(const std::string& collection_path) const;

  // ---- Behaviour ----
  void set_token(const std::string& token);
  // TokenReview: `token` is `user` (authenticated); unknown tokens are not.
  void SetTokenUser(const std::string& token, FakeUser user);
  // SubjectAccessReview: allowed when `rule` says so; without a rule every
  // review is denied.
  void SetAccessRule(FakeAccessRule rule);
  void Fail(ScriptedFailure f);
  void ClearFailures();
  // Ends every open watch stream now (clean end of the chunked body).
  void CloseWatches();
  // While paused, watch streams send no events (they still end on
  // CloseWatches, Stop or their timeout); what happened meanwhile is sent
  // once resumed, unless CompactHistory took it. For tests that need a
  // watch to be behind: without it, whether a watch saw an event before a
  // compaction is a race.
  void PauseWatches(bool paused);
  // Forgets all watch history: a watch from an older resourceVersion gets
  // the 410 ERROR event and outstanding continue tokens expire (410).
  void CompactHistory();
  // "group/version/resource" ("v1/pods" for core), e.g.
  // "kubeflow.org/v1/pytorchjobs": false answers 404 for it, like a CRD that
  // is not installed. Unknown names are ignored.
  void set_served(const std::string& group_version_resource, bool served);
  // Installs Kueue's CRDs: serves resourceflavors, clusterqueues, cohorts,
  // workloadpriorityclasses (cluster-scoped) and localqueues at each of
  // `versions` of kueue.x-k8s.io, with discovery, create, replace (PUT),
  // delete, list and watch. Without it the group is not served (404), as
  // in a cluster without Kueue.
  void ServeKueue(const std::vector<std::string>& versions = {"v1beta2"});

  // ---- Several clients told apart (HA tests) ----
  // Accepts `token` as a bearer token besides the one of FakeKubeOptions:
  // give each replica its own, and RecordedCall::authorization says which
  // one made a request.
  void AddToken(const std::string& token);
  // The writes (POST, PUT, PATCH, DELETE) recorded so far whose path starts
  // with `path_prefix`, counted by "METHOD path" (the /status subresource
  // apart), and only those sent with `authorization` when it is not empty.
  std::map<std::string, int> WritesByPath(const std::string& path_prefix = "",
                                          const std::string& authorization = "") const;

  // ---- Inspection ----
  std::vector<RecordedCall> Calls() const;
  void ClearCalls();
  // The current global resourceVersion.
  int64_t resource_version() const;
  // Number of watch streams currently open.
  int open_watches() const;

 private:
  class Impl;  // the server and the store; defined in fake_kube_api.cc
  explicit FakeKubeApi(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gangkeeper::testing
