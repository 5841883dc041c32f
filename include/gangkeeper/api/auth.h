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
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gangkeeper::api {

enum class Role { kAdmin, kTeamAdmin, kViewer, kAuditor, kMetrics };
const char* RoleName(Role role);

struct Principal {
  std::string name;
  Role role = Role::kViewer;
  std::set<std::string> namespaces;  // team-admin only

  // Reads of workloads and LocalQueues in `namespace_name`.
  bool MayRead(const std::string& namespace_name) const;
  // Reads of quota objects and queue status at all (what of them: scope.h).
  bool MayReadQuota() const { return role == Role::kAdmin || role == Role::kViewer || role == Role::kTeamAdmin; }
  // Every audit event (a team-admin reads those of its namespaces only).
  bool MayReadAudit() const { return role == Role::kAdmin || role == Role::kAuditor; }
  bool MayReadMetrics() const { return role == Role::kAdmin || role == Role::kViewer || role == Role::kMetrics; }
};

struct TokenEntry {
  std::string name;
  std::string sha256_hex;  // lower-case
  Role role = Role::kViewer;
  std::set<std::string> namespaces;
};

// Parses a tokens file's text. InvalidArgument naming the entry and field.
[[nodiscard]] absl::StatusOr<std::vector<TokenEntry>> ParseTokens(absl::string_view text,
                                                                  const std::string& source);

class TokenStore {
 public:
  // An empty path: no tokens; every call is Unauthenticated with a message
  // saying how to configure them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TokenStore>> Load(const std::string& path);

  // The principal for an Authorization header value ("Bearer TOKEN"), from
  // any address. Otherwise Unauthenticated, or ResourceExhausted when
  // `client` failed too often in the last minute (the failure is not
  // counted then). `now` times the limiter.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization, const std::string& client,
                                         absl::Time now);

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
