// gangkeeper: Kubernetes identities for the API (see kube_auth.h).
#include "gangkeeper/api/kube_auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "src/api/review_cache.h"

namespace gangkeeper::api {

absl::StatusOr<AuthMode> ParseAuthMode(absl::string_view text) {
  if (text == "tokens") return AuthMode::kTokens;
  if (text == "kubernetes") return AuthMode::kKubernetes;
  if (text == "both") return AuthMode::kBoth;
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not an API auth mode (tokens, kubernetes, both)"));
}

const char* AuthModeName(AuthMode mode) {
  switch (mode) {
    case AuthMode::kTokens: return "tokens";
    case AuthMode::kKubernetes: return "kubernetes";
    case AuthMode::kBoth: return "both";
  }
  return "?";
}

AccessAttributes KindAttributes(const std::string& kind, const std::string& verb, const std::string& namespace_name,
                                const std::string& name) {
  static const std::map<std::string, std::pair<const char*, const char*>>* const kResources =
      new std::map<std::string, std::pair<const char*, const char*>>{
          {"ClusterQueue", {"kueue.x-k8s.io", "clusterqueues"}},
          {"LocalQueue", {"kueue.x-k8s.io", "localqueues"}},
          {"Workload", {"kueue.x-k8s.io", "workloads"}},
          {"ResourceFlavor", {"kueue.x-k8s.io", "resourceflavors"}},
          {"Cohort", {"kueue.x-k8s.io", "cohorts"}},
          {"WorkloadPriorityClass", {"kueue.x-k8s.io", "workloadpriorityclasses"}},
          {"PriorityClass", {"scheduling.k8s.io", "priorityclasses"}},
          {"GPUNodePool", {"gangkeeper.io", "gpunodepools"}},
          {"Namespace", {"", "namespaces"}},
      };
  AccessAttributes a;
  a.verb = verb;
  a.namespace_name = namespace_name;
  a.name = name;
  if (auto it = kResources->find(kind); it != kResources->end()) {
    a.group = it->second.first;
    a.resource = it->second.second;
  } else {
    // An unknown kind asks for a resource no role grants: denied.
    a.group = "gangkeeper.io";
    a.resource = absl::StrCat("unknown-kind-", kind);
  }
  return a;
}

struct KubeAuthenticator::State {
  State(IdentityReviews* r, KubeAuthOptions o)
      : reviews(r), options(o), token_cache(o.max_entries), access_cache(o.max_entries) {}
  IdentityReviews* const reviews;
  const KubeAuthOptions options;
  ReviewCache<TokenVerdict> token_cache;  // by TokenSha256Hex(token)
  ReviewCache<bool> access_cache;         // by KubeAccessKey
  std::atomic<uint64_t> token_reviews{0};
  std::atomic<uint64_t> access_reviews{0};
};

namespace {

// Fields joined by a separator no Kubernetes name or path contains.
std::string KubeAccessKey(const KubeUser& u, const AccessAttributes& a) {
  std::string key = absl::StrCat(u.username, "\x1f", u.uid, "\x1f", absl::StrJoin(u.groups, "\x1e"), "\x1f");
  for (const auto& [k, values] : u.extra) absl::StrAppend(&key, k, "=", absl::StrJoin(values, "\x1e"), "\x1d");
  absl::StrAppend(&key, "\x1f", a.verb, "\x1f", a.group, "\x1f", a.resource, "\x1f", a.namespace_name, "\x1f",
                  a.name, "\x1f", a.path);
  return key;
}

// One request's checks for one user: asks the shared caches, then the API
// server; the first failure is kept for the 503.
class KubeRequestAuthorizer : public Authorizer {
 public:
  KubeRequestAuthorizer(std::shared_ptr<KubeAuthenticator::State> state, KubeUser user)
      : state_(std::move(state)), user_(std::move(user)) {}

  bool Allowed(const AccessAttributes& a) const override {
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok()) return false;  // one failure decides the request
    }
    const std::string key = KubeAccessKey(user_, a);
    const absl::Time now = state_->options.clock->Now();
    if (std::optional<bool> cached = state_->access_cache.Get(key, now)) return *cached;
    ++state_->access_reviews;
    absl::StatusOr<AccessVerdict> v = state_->reviews->ReviewAccess(user_, a);
    if (!v.ok()) {
      absl::MutexLock lock(&mu_);
      error_ = absl::UnavailableError(absl::StrCat(
          "the Kubernetes API server could not authorize this request (SubjectAccessReview): ", v.status().message()));
      return false;
    }
    const absl::Duration ttl = v->allowed ? state_->options.allowed_ttl : state_->options.denied_ttl;
    state_->access_cache.Put(key, v->allowed, now + ttl);
    return v->allowed;
  }

  absl::Status error() const override {
    absl::MutexLock lock(&mu_);
    return error_;
  }

 private:
  const std::shared_ptr<KubeAuthenticator::State> state_;
  const KubeUser user_;
  mutable absl::Mutex mu_;
  mutable absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

KubeAuthenticator::KubeAuthenticator(IdentityReviews* reviews, TokenStore* tokens, KubeAuthOptions options)
    : state_(std::make_shared<State>(reviews, options)), tokens_(tokens) {}

KubeAuthenticator::~KubeAuthenticator() = default;

absl::StatusOr<Principal> KubeAuthenticator::Authenticate(absl::string_view authorization, const std::string& client,
                                                          absl::Time now) {
  const absl::string_view token = BearerToken(authorization);
  if (tokens_ != nullptr) {
    if (std::optional<Principal> p = tokens_->Lookup(token)) return *std::move(p);
  }
  if (token.empty()) {
    if (tokens_ != nullptr) return tokens_->Authenticate(authorization, client, now);
    return absl::UnauthenticatedError("missing bearer token: send \"Authorization: Bearer TOKEN\"");
  }
  // Clock from the options, like the access reviews (`now` times the
  // tokens file's limiter).
  const absl::Time at = state_->options.clock->Now();
  const std::string digest = TokenSha256Hex(token);
  std::optional<TokenVerdict> verdict = state_->token_cache.Get(digest, at);
  if (!verdict.has_value()) {
    ++state_->token_reviews;
    absl::StatusOr<TokenVerdict> v = state_->reviews->ReviewToken(std::string(token));
    if (!v.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "the Kubernetes API server could not check the bearer token (TokenReview): ", v.status().message()));
    }
    const absl::Duration ttl = v->authenticated ? state_->options.allowed_ttl : state_->options.denied_ttl;
    state_->token_cache.Put(digest, *v, at + ttl);
    verdict = *std::move(v);
  }
  if (!verdict->authenticated) {
    // `both`: the tokens file's answer, so its limiter slows guessing.
    if (tokens_ != nullptr) {
      absl::StatusOr<Principal> p = tokens_->Authenticate(authorization, client, now);
      if (!p.ok() && absl::IsResourceExhausted(p.status())) return p.status();
      return absl::UnauthenticatedError("the bearer token is neither in --tokens nor known to the Kubernetes API server");
    }
    return absl::UnauthenticatedError(absl::StrCat("the Kubernetes API server does not know this bearer token",
                                                   verdict->error.empty() ? "" : ": ", verdict->error));
  }
  Principal p;
  p.name = verdict->user.username;
  p.authorizer = std::make_shared<KubeRequestAuthorizer>(state_, verdict->user);
  return p;
}

uint64_t KubeAuthenticator::token_reviews() const { return state_->token_reviews.load(); }
uint64_t KubeAuthenticator::access_reviews() const { return state_->access_reviews.load(); }
size_t KubeAuthenticator::cached_tokens() const { return state_->token_cache.size(); }
size_t KubeAuthenticator::cached_access() const { return state_->access_cache.size(); }

}  // namespace gangkeeper::api
