// gangkeeper: API authentication (see auth.h).
#include "gangkeeper/api/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "src/api/review_cache.h"

namespace gangkeeper::api {

std::string TokenSha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * SHA256_DIGEST_LENGTH);
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

namespace {

absl::StatusOr<Role> ParseRole(const std::string& s) {
  if (s == "admin") return Role::kAdmin;
  if (s == "team-admin") return Role::kTeamAdmin;
  if (s == "viewer") return Role::kViewer;
  if (s == "auditor") return Role::kAuditor;
  if (s == "metrics") return Role::kMetrics;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", s, "\" is not a role (admin, team-admin, viewer, auditor, metrics)"));
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin: return "admin";
    case Role::kTeamAdmin: return "team-admin";
    case Role::kViewer: return "viewer";
    case Role::kAuditor: return "auditor";
    case Role::kMetrics: return "metrics";
  }
  return "?";
}

bool Principal::MayRead(const std::string& namespace_name) const {
  if (authorizer != nullptr) return authorizer->Allowed(KindAttributes("Workload", "list", namespace_name));
  switch (role) {
    case Role::kAdmin:
    case Role::kViewer: return true;
    case Role::kTeamAdmin: return namespaces.count(namespace_name) != 0;
    case Role::kAuditor:
    case Role::kMetrics: return false;
  }
  return false;
}

bool Principal::MayReadLocalQueues(const std::string& namespace_name) const {
  if (authorizer != nullptr) return authorizer->Allowed(KindAttributes("LocalQueue", "list", namespace_name));
  return MayRead(namespace_name);
}

bool Principal::MayReadQuota() const {
  // Kubernetes: what of it is filtered per kind and namespace (auth.h).
  if (authorizer != nullptr) return true;
  return role == Role::kAdmin || role == Role::kViewer || role == Role::kTeamAdmin;
}

bool Principal::MayReadAll(const std::string& kind) const {
  if (authorizer != nullptr) return authorizer->Allowed(KindAttributes(kind, "list"));
  return role == Role::kAdmin || role == Role::kViewer;
}

bool Principal::MayReadAudit() const {
  if (authorizer != nullptr) return authorizer->Allowed(AccessAttributes{"get", "", "", "", "", "/v1/audit"});
  return role == Role::kAdmin || role == Role::kAuditor;
}

bool Principal::MayReadNamespaceAudit(const std::string& namespace_name) const {
  if (authorizer == nullptr && role != Role::kTeamAdmin) return false;
  return !namespace_name.empty() && MayRead(namespace_name);
}

bool Principal::MayReadMetrics() const {
  if (authorizer != nullptr) return authorizer->Allowed(AccessAttributes{"get", "", "", "", "", "/metrics"});
  return role == Role::kAdmin || role == Role::kViewer || role == Role::kMetrics;
}

absl::string_view BearerToken(absl::string_view authorization) {
  if (authorization.size() < 7 || !absl::EqualsIgnoreCase(authorization.substr(0, 7), "bearer ")) return {};
  authorization.remove_prefix(7);
  return authorization;
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokens(absl::string_view text, const std::string& source) {
  YAML::Node root;
  try {  // yaml-cpp reports errors by exception; they stop here
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not YAML or JSON: ", e.what()));
  }
  if (root.IsMap() && root["tokens"]) root = root["tokens"];
  if (!root.IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a list of {name, sha256, role, namespaces} (or {tokens: [...]})"));
  }
  std::vector<TokenEntry> out;
  std::set<std::string> names;
  std::map<std::string, std::string> digests;  // sha256 -> name
  for (size_t i = 0; i < root.size(); ++i) {
    const YAML::Node e = root[i];
    const std::string where = absl::StrCat(source, ": [", i, "]");
    if (!e.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a map"));
    TokenEntry t;
    auto scalar = [&](const char* key) -> std::string {
      return e[key] && e[key].IsScalar() ? e[key].as<std::string>() : std::string();
    };
    t.name = scalar("name");
    if (t.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".name: required"));
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: \"", t.name, "\" is given twice"));
    }
    t.sha256_hex = absl::AsciiStrToLower(scalar("sha256"));
    if (t.sha256_hex.size() != 64 || t.sha256_hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".sha256: expected 64 hex digits, the SHA-256 of the token (printf %s TOKEN | sha256sum)"));
    }
    if (auto [it, fresh] = digests.emplace(t.sha256_hex, t.name); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".sha256: the same token as \"", it->second,
                                                     "\"; every name needs its own token"));
    }
    absl::StatusOr<Role> role = ParseRole(scalar("role"));
    if (!role.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".role: ", role.status().message()));
    t.role = *role;
    if (e["namespaces"]) {
      if (!e["namespaces"].IsSequence()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".namespaces: expected a list"));
      }
      for (const YAML::Node& n : e["namespaces"]) {
        if (n.IsScalar()) t.namespaces.insert(n.as<std::string>());
      }
    }
    if (t.role == Role::kTeamAdmin && t.namespaces.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".namespaces: a team-admin needs its namespaces"));
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<TokenStore>> TokenStore::Load(const std::string& path) {
  std::unique_ptr<TokenStore> store(new TokenStore(path));
  if (path.empty()) return store;
  if (absl::Status s = store->Reload(); !s.ok()) return s;
  return store;
}

absl::Status TokenStore::Reload() {
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("--tokens ", path_, ": cannot read it"));
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokens(text.str(), path_);
  absl::MutexLock lock(&mu_);
  mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  size_ = st.st_size;
  if (!entries.ok()) return entries.status();
  entries_ = *std::move(entries);
  return absl::OkStatus();
}

void TokenStore::ReloadIfChanged() {
  if (path_.empty()) return;
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) return;
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    absl::MutexLock lock(&mu_);
    if (mtime == mtime_ns_ && st.st_size == size_) return;
  }
  if (absl::Status s = Reload(); !s.ok()) {
    base::GetLogger("api")->error("{}; keeping the tokens loaded before", s.message());
  } else {
    base::GetLogger("api")->info("--tokens {}: reloaded ({} tokens)", path_, size());
  }
}

size_t TokenStore::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

absl::StatusOr<Principal> TokenStore::Authenticate(absl::string_view authorization, const std::string& client,
                                                   absl::Time now) {
  // Without a tokens file there is nothing to guess: every call gets the
  // same answer saying how to configure tokens, never the limiter's.
  if (path_.empty()) {
    return absl::UnauthenticatedError("the API needs a bearer token: start gangkeeper with --tokens FILE");
  }
  ReloadIfChanged();
  const absl::string_view token = BearerToken(authorization);
  const bool bearer = !token.empty();
  const std::string digest = bearer ? TokenSha256Hex(token) : std::string();
  absl::MutexLock lock(&mu_);
  if (!bearer) return Fail(client, now, "missing bearer token: send \"Authorization: Bearer TOKEN\"");
  const TokenEntry* match = MatchLocked(digest);
  // A valid token is never limited: the limiter only slows guessing.
  if (match == nullptr) return Fail(client, now, "the bearer token is not known");
  return Principal{match->name, match->role, match->namespaces, nullptr};
}

std::optional<Principal> TokenStore::Lookup(absl::string_view token) {
  if (path_.empty() || token.empty()) return std::nullopt;
  ReloadIfChanged();
  const std::string digest = TokenSha256Hex(token);
  absl::MutexLock lock(&mu_);
  const TokenEntry* match = MatchLocked(digest);
  if (match == nullptr) return std::nullopt;
  return Principal{match->name, match->role, match->namespaces, nullptr};
}

const TokenEntry* TokenStore::MatchLocked(const std::string& digest) const {
  const TokenEntry* match = nullptr;
  for (const TokenEntry& e : entries_) {  // every entry, in constant time each
    if (CRYPTO_memcmp(e.sha256_hex.data(), digest.data(), digest.size()) == 0) match = &e;
  }
  return match;
}

absl::Status TokenStore::Fail(const std::string& client, absl::Time now, std::string message) {
  Failures& f = FailuresOf(client, now);
  if (now - f.window_start > absl::Minutes(1)) f = Failures{now, 0};
  if (f.count >= kMaxFailuresPerMinute) {
    return absl::ResourceExhaustedError(
        "too many failed authentications from this address; wait a minute (a valid token is still accepted)");
  }
  ++f.count;
  return absl::UnauthenticatedError(std::move(message));
}

TokenStore::Failures& TokenStore::FailuresOf(const std::string& client, absl::Time now) {
  if (auto it = failures_.find(client); it != failures_.end()) return it->second;
  if (failures_.size() >= kMaxTrackedAddresses && now >= next_sweep_) {
    absl::erase_if(failures_, [now](const auto& entry) { return now - entry.second.window_start > absl::Minutes(1); });
    next_sweep_ = now + absl::Seconds(1);
  }
  // Full of addresses that failed this minute (a scan from many
  // addresses): the rest share one count, so their invalid tokens are
  // limited together, and memory stays bounded.
  if (failures_.size() >= kMaxTrackedAddresses) return untracked_;
  return failures_[client];
}

}  // namespace gangkeeper::api
