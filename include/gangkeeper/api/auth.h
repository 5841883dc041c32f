// gangkeeper: who is calling the API (DESIGN §7), and what each role may do.
//
// Bearer tokens from `--tokens FILE`: a YAML or JSON list of
//   {name, sha256, role, namespaces}
// where sha256 is the hex SHA-256 of the token (the plain token is never
// stored, logged or kept in memory beyond the request), role is admin,
// team-admin, viewer, auditor or metrics, and namespaces (team-admin only)
// the namespaces it may act on. The file is re-read when it changes; a
// broken new file keeps the tokens already loaded. Digests are compared in
// constant time, against every entry. Thread-safe.
//
// Failed authentications are counted per client address: after
// kMaxFailuresPerMinute failures in a minute, further *invalid* tokens from
// that address get ResourceExhausted (429) until the minute is over. A valid
// token always authenticates, whatever its address did (behind an ingress
// or a port-forward every caller shares one address). At most
// kMaxTrackedAddresses addresses are tracked; beyond them, failures from
// untracked addresses share one count.
//
// Authorization (enforced by the handlers in src/api/ and scope.h; README "API roles" and
// docs/decisions.md say the same):
//   admin       reads and writes everything; audit; /metrics.
//   viewer      reads every quota object, ClusterQueue status and workload;
//               /metrics; no writes, no audit.
//   auditor     the audit log (/v1/audit, /v1/audit/export) only.
//   metrics     GET /metrics only (for Prometheus).
//   team-admin  with `namespaces` N:
//     reads   workloads and LocalQueues in N; the ClusterQueues a LocalQueue
//             in N points at *and* whose namespaceSelector selects that
//             namespace (object and status); the Cohorts above those
//             ClusterQueues (parents included); the ResourceFlavors they and
//             those Cohorts name; the GPUNodePools of those flavors; every
//             WorkloadPriorityClass and PriorityClass (the names jobs may
//             use); the audit log with namespace= one of N (the history
//             its workloads already carry).
//     writes  LocalQueues in N (PUT, DELETE, and in POST /v1/apply).
// Lists are filtered to what the caller may read (200, maybe empty). A list
// scoped to a namespace outside N (.../namespaces/NS/localqueues,
// ?namespace=NS) is 403, as is a role that may not read the kind at all.
// Getting one object outside what the caller may read is 403 whether or not
// it exists, so a 404 never tells a team-admin that another team's object
// exists; inside, a missing object is 404. Writes are checked before
// existence (403 before 404).
//
// Kubernetes identities (`--api-auth kubernetes|both`, api/kube_auth.h): a
// Principal with an `authorizer` has no role; each check below becomes a
// SubjectAccessReview of these attributes (README "API roles" lists them
// and deploy/rbac-api-roles.yaml grants them):
//   reads of one kind      list  <resource>.<group>, cluster-wide: every object of it
//   LocalQueues in NS      list  localqueues.kueue.x-k8s.io in NS
//   workloads in NS        list  workloads.kueue.x-k8s.io in NS (also the audit log with namespace=NS)
//   PUT of an object       update <resource>.<group> [in NS] NAME
//   DELETE of an object    delete <resource>.<group> [in NS] NAME
//   POST /v1/apply         patch on each object of the bundle (server-side apply's verb)
//   the audit log          get on the non-resource path /v1/audit (also /v1/audit/head, /export)
//   /metrics               get on the non-resource path /metrics
// with resources clusterqueues, localqueues, workloads, resourceflavors,
// cohorts, workloadpriorityclasses (group kueue.x-k8s.io), gpunodepools
// (gangkeeper.io), priorityclasses (scheduling.k8s.io). Whoever may list
// LocalQueues in a namespace but not a cluster-scoped kind reads of it what
// a team-admin of that namespace reads (the ClusterQueues its LocalQueues
// use, their Cohorts, flavors, pools, and every priority class): the
// per-namespace check replaces a check per object, and a Role's
// resourceNames are not consulted for lists. A list the caller may read
// nothing of is 200 and empty. A review that fails (API server down, 5xx,
// timeout) answers the request 503 and never allows.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gangkeeper::api {

enum class Role { kAdmin, kTeamAdmin, kViewer, kAuditor, kMetrics };
const char* RoleName(Role role);

// What a Kubernetes authorizer is asked (a SubjectAccessReview's spec):
// resource attributes, or with `path` set non-resource ones.
struct AccessAttributes {
  std::string verb;
  std::string group;
  std::string resource;
  std::string namespace_name;  // "" = cluster-wide
  std::string name;            // "" = the collection
  std::string path;            // non-resource URL (/v1/audit, /metrics)
};

// The attributes of `verb` on the API's `kind` ("ClusterQueue",
// "LocalQueue", "Workload", ..., the names ReadScope::Object takes).
AccessAttributes KindAttributes(const std::string& kind, const std::string& verb,
                                const std::string& namespace_name = "", const std::string& name = "");

// Decides for a Principal that has no role (a Kubernetes identity). One per
// request: a check that could not be made answers false and is kept in
// error(), and the API answers that request 503.
class Authorizer {
 public:
  virtual ~Authorizer() = default;
  virtual bool Allowed(const AccessAttributes& attributes) const = 0;
  // The first failed check of this request (OK when none failed).
  virtual absl::Status error() const = 0;
};

struct Principal {
  std::string name;
  Role role = Role::kViewer;         // tokens only
  std::set<std::string> namespaces;  // team-admin only
  // Set for Kubernetes identities: every check below asks it (the table
  // at the top), and `role` is not used.
  std::shared_ptr<const Authorizer> authorizer;

  // Reads of workloads (and, with tokens, LocalQueues) in `namespace_name`.
  bool MayRead(const std::string& namespace_name) const;
  bool MayReadLocalQueues(const std::string& namespace_name) const;
  // Reads of quota objects and queue status at all (what of them: scope.h).
  bool MayReadQuota() const;
  // Every object of `kind` (admin, viewer; Kubernetes: list it cluster-wide).
  bool MayReadAll(const std::string& kind) const;
  // Every audit event (a team-admin reads those of its namespaces only).
  bool MayReadAudit() const;
  // The audit events of one namespace it may read workloads of.
  bool MayReadNamespaceAudit(const std::string& namespace_name) const;
  bool MayReadMetrics() const;
};

// Answers who sends an Authorization header value ("Bearer TOKEN") from
// address `client`. Unauthenticated (401), ResourceExhausted (429: the
// address failed too often) or Unavailable (503: the identity could not
// be checked).
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  virtual absl::StatusOr<Principal> Authenticate(absl::string_view authorization, const std::string& client,
                                                 absl::Time now) = 0;
};

// The token of an Authorization header value "Bearer TOKEN" (the scheme
// is case-insensitive, RFC 7235); empty when there is none.
absl::string_view BearerToken(absl::string_view authorization);

struct TokenEntry {
  std::string name;
  std::string sha256_hex;  // lower-case
  Role role = Role::kViewer;
  std::set<std::string> namespaces;
};

// Parses a tokens file's text. InvalidArgument naming the entry and field.
[[nodiscard]] absl::StatusOr<std::vector<TokenEntry>> ParseTokens(absl::string_view text,
                                                                  const std::string& source);

class TokenStore : public Authenticator {
 public:
  // An empty path: no tokens; every call is Unauthenticated with a message
  // saying how to configure them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TokenStore>> Load(const std::string& path);

  // The principal for an Authorization header value ("Bearer TOKEN"), from
  // any address. Otherwise Unauthenticated, or ResourceExhausted when
  // `client` failed too often in the last minute (the failure is not
  // counted then). `now` times the limiter.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization, const std::string& client,
                                         absl::Time now) override;
  // The principal of a bare `token`, without counting anything (nullopt
  // when the file has no such token). For `--api-auth both`.
  std::optional<Principal> Lookup(absl::string_view token);

  // Re-reads the file if its size or modification time changed.
  void ReloadIfChanged();
  size_t size() const;

  // Failed attempts allowed per client address per minute.
  static constexpr int kMaxFailuresPerMinute = 20;
  // Addresses whose failures are counted one by one (about 100 bytes each).
  static constexpr size_t kMaxTrackedAddresses = 10000;

 private:
  explicit TokenStore(std::string path) : path_(std::move(path)) {}
  absl::Status Reload();
  // The entry whose digest is `digest` (compared with every entry).
  const TokenEntry* MatchLocked(const std::string& digest) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Failures {
    absl::Time window_start;
    int count = 0;
  };
  // Counts a failure of `client` (answered with `message`), or refuses it
  // when the address is over its limit.
  absl::Status Fail(const std::string& client, absl::Time now, std::string message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Failures& FailuresOf(const std::string& client, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  std::vector<TokenEntry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t size_ ABSL_GUARDED_BY(mu_) = -1;
  absl::flat_hash_map<std::string, Failures> failures_ ABSL_GUARDED_BY(mu_);
  // Shared by the addresses that found failures_ full.
  Failures untracked_ ABSL_GUARDED_BY(mu_);
  // Expired entries are swept at most once a second when failures_ is full.
  absl::Time next_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace gangkeeper::api
