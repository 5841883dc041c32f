// gangkeeper node: who the API's callers are (`--api-auth`): the tokens
// file, Kubernetes identities (TokenReview + SubjectAccessReview through a
// kube client of their own), or both. The API module states what it needs
// (api/kube_auth.h); this is where kube's review client is wired into it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gangkeeper/api/auth.h"
#include "gangkeeper/api/kube_auth.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"

namespace gangkeeper::node {

struct ApiAuth {
  api::AuthMode mode = api::AuthMode::kTokens;
  std::unique_ptr<kube::Client> review_client;
  std::unique_ptr<api::IdentityReviews> reviews;
  std::unique_ptr<api::KubeAuthenticator> kube;
  api::Authenticator* authenticator = nullptr;  // kube, or the tokens file
};

// How long one attempt of a review may take (two attempts at most): a
// request waits for it.
inline constexpr absl::Duration kReviewTimeout = absl::Seconds(2);

// `flag` is --api-auth ("" = both with a cluster, tokens without one).
// `tokens` must outlive the result. InvalidArgument for a bad mode or
// `kubernetes`/`both` without a cluster.
absl::StatusOr<std::unique_ptr<ApiAuth>> BuildApiAuth(const std::string& flag,
                                                     const std::optional<kube::ClusterConfig>& cluster,
                                                     api::TokenStore* tokens, const base::Clock* clock);

}  // namespace gangkeeper::node
