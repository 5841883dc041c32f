// gangkeeper: who is calling the API (DESIGN §7).
//
// Bearer tokens from `--tokens FILE`: a YAML or JSON list of
//   {name, sha256, role, namespaces}
// where sha256 is the hex SHA-256 of the token (the plain token is never
// stored, logged or kept in memory beyond the request), role is admin,
// team-admin, viewer or auditor, and namespaces (team-admin only) the
// namespaces it may act on. The file is re-read when it changes; a broken
// new file keeps the tokens already loaded. Digests are compared in
// constant time, against every entry. Failed authentications are limited
// per client address. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gangkeeper::api {

enum class Role { kAdmin, kTeamAdmin, kViewer, kAuditor };
const char* RoleName(Role role);

struct Principal {
  std::string name;
  Role role = Role::kViewer;
  std::set<std::string> namespaces;  // team-admin only

  // Reads of workloads and queues in `namespace_name`.
  bool MayRead(const std::string& namespace_name) const;
  bool MayReadAudit() const { return role == Role::kAdmin || role == Role::kAuditor; }
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

  // The principal for an Authorization header value ("Bearer TOKEN").
  // Unauthenticated otherwise; ResourceExhausted when `client` failed too
  // often in the last minute. `now` times the limiter.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization, const std::string& client,
                                         absl::Time now);

  // Re-reads the file if its size or modification time changed.
  void ReloadIfChanged();
  size_t size() const;

  // Failed attempts allowed per client address per minute.
  static constexpr int kMaxFailuresPerMinute = 20;

 private:
  explicit TokenStore(std::string path) : path_(std::move(path)) {}
  absl::Status Reload();

  const std::string path_;
  mutable absl::Mutex mu_;
  std::vector<TokenEntry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t size_ ABSL_GUARDED_BY(mu_) = -1;
  struct Failures {
    absl::Time window_start;
    int count = 0;
  };
  std::map<std::string, Failures> failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gangkeeper::api
