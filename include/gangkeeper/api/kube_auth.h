// gangkeeper: Kubernetes identities for the API (`--api-auth`).
//
//   tokens      the bearer tokens of `--tokens FILE` (auth.h's TokenStore).
//   kubernetes  a bearer token is checked with a TokenReview; the user,
//               groups, uid and extra it names are then authorized for each
//               check of the request with a SubjectAccessReview (the
//               attributes are listed in auth.h and README "API roles").
//   both        a token found in the tokens file wins; any other goes to
//               TokenReview.
// The default is `both` when gangkeeper talks to a cluster (--kube) and
// `tokens` with --kube none.
//
// Answers are cached, allowed and denied alike, for short TTLs: token
// reviews keyed by the SHA-256 of the token (the token itself is never
// kept), access reviews by user, uid, groups, extra and attributes. Each
// cache holds at most `max_entries`, the least recently used dropping out.
// A review that fails (API server unreachable, 5xx, timeout, or
// gangkeeper's service account may not create reviews) is not cached: the
// request is answered 503 with the reason, never allowed. The time of a
// review is bounded by the IdentityReviews implementation (the node gives
// it a kube client of its own with a short timeout and retry budget).
//
// Without --tokens in `kubernetes` mode, failed authentications are not
// rate-limited per address (each unknown token costs one TokenReview, and
// repeats of it are cached); in `both` mode the tokens file's limiter
// answers for a token neither knows. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gangkeeper/api/auth.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::api {

enum class AuthMode { kTokens, kKubernetes, kBoth };
[[nodiscard]] absl::StatusOr<AuthMode> ParseAuthMode(absl::string_view text);
const char* AuthModeName(AuthMode mode);

// A user as a TokenReview names it.
struct KubeUser {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

struct TokenVerdict {
  bool authenticated = false;
  KubeUser user;
  std::string error;  // why not, as the API server says
};

struct AccessVerdict {
  bool allowed = false;
  std::string reason;
};

// The API server's reviews, as the API consumes them (the node implements
// it on kube::AccessReviewClient). An error means "could not ask".
class IdentityReviews {
 public:
  virtual ~IdentityReviews() = default;
  virtual absl::StatusOr<TokenVerdict> ReviewToken(const std::string& token) = 0;
  virtual absl::StatusOr<AccessVerdict> ReviewAccess(const KubeUser& user, const AccessAttributes& attributes) = 0;
};

struct KubeAuthOptions {
  absl::Duration allowed_ttl = absl::Seconds(10);
  absl::Duration denied_ttl = absl::Seconds(5);
  size_t max_entries = 4096;  // per cache (token reviews, access reviews)
  const base::Clock* clock = nullptr;  // required
};

class KubeAuthenticator : public Authenticator {
 public:
  // `reviews` must outlive this and every Principal it returned; `tokens`
  // (`both`; nullptr for `kubernetes`) is asked first.
  KubeAuthenticator(IdentityReviews* reviews, TokenStore* tokens, KubeAuthOptions options);
  ~KubeAuthenticator() override;

  absl::StatusOr<Principal> Authenticate(absl::string_view authorization, const std::string& client,
                                         absl::Time now) override;

  // Reviews sent to the API server (cache misses), and entries cached.
  uint64_t token_reviews() const;
  uint64_t access_reviews() const;
  size_t cached_tokens() const;
  size_t cached_access() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  TokenStore* tokens_;
};

}  // namespace gangkeeper::api
