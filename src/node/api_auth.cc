// gangkeeper node: --api-auth (see api_auth.h).
#include "src/node/api_auth.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/kube/access_review.h"

namespace gangkeeper::node {
namespace {

// api::IdentityReviews on kube's review client: the same fields, each
// module's own types.
class KubeIdentityReviews : public api::IdentityReviews {
 public:
  explicit KubeIdentityReviews(kube::Client* client) : reviews_(client) {}

  absl::StatusOr<api::TokenVerdict> ReviewToken(const std::string& token) override {
    absl::StatusOr<kube::TokenReviewResult> r = reviews_.ReviewToken(token);
    if (!r.ok()) return r.status();
    api::TokenVerdict v;
    v.authenticated = r->authenticated;
    v.error = r->error;
    v.user = api::KubeUser{r->user.username, r->user.uid, r->user.groups, r->user.extra};
    return v;
  }

  absl::StatusOr<api::AccessVerdict> ReviewAccess(const api::KubeUser& user,
                                                  const api::AccessAttributes& a) override {
    const kube::ReviewedUser u{user.username, user.uid, user.groups, user.extra};
    const kube::AccessAttributes attributes{a.verb, a.group, a.resource, a.namespace_name, a.name, a.path};
    absl::StatusOr<kube::AccessDecision> d = reviews_.ReviewAccess(u, attributes);
    if (!d.ok()) return d.status();
    return api::AccessVerdict{d->allowed, d->reason};
  }

 private:
  kube::AccessReviewClient reviews_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ApiAuth>> BuildApiAuth(const std::string& flag,
                                                     const std::optional<kube::ClusterConfig>& cluster,
                                                     api::TokenStore* tokens, const base::Clock* clock) {
  auto out = std::make_unique<ApiAuth>();
  if (flag.empty()) {
    out->mode = cluster.has_value() ? api::AuthMode::kBoth : api::AuthMode::kTokens;
  } else {
    absl::StatusOr<api::AuthMode> mode = api::ParseAuthMode(flag);
    if (!mode.ok()) return mode.status();
    out->mode = *mode;
  }
  out->authenticator = tokens;
  if (out->mode == api::AuthMode::kTokens) return out;
  if (!cluster.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(api::AuthModeName(out->mode),
                                                   " needs a cluster to ask (TokenReview); with --kube none use tokens"));
  }
  kube::ClientOptions co;
  co.clock = clock;
  co.timeout = kReviewTimeout;
  co.retry.max_attempts = 2;
  co.retry.initial_backoff = absl::Milliseconds(100);
  co.retry.max_backoff = absl::Milliseconds(200);
  co.retry.max_total = kReviewTimeout;
  absl::StatusOr<std::unique_ptr<kube::Client>> client = kube::Client::Create(*cluster, co);
  if (!client.ok()) return client.status();
  out->review_client = *std::move(client);
  out->reviews = std::make_unique<KubeIdentityReviews>(out->review_client.get());
  api::KubeAuthOptions ko;
  ko.clock = clock;
  out->kube = std::make_unique<api::KubeAuthenticator>(
      out->reviews.get(), out->mode == api::AuthMode::kBoth ? tokens : nullptr, ko);
  out->authenticator = out->kube.get();
  return out;
}

}  // namespace gangkeeper::node
