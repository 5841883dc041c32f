// gangkeeper: asking the API server who a bearer token is (TokenReview,
// authentication.k8s.io/v1) and whether a user may do something
// (SubjectAccessReview, authorization.k8s.io/v1).
//
// The API module consumes these answers through its own interface
// (api/kube_auth.h); the node wires this class in. Each review is one POST
// through a kube::Client, so its time is bounded by that client's
// ClientOptions (per-attempt timeout, retry budget): give reviews a client
// of their own with a short budget, as a request waits for them.
//
// Errors: the API server unreachable, timing out or answering 5xx is
// Unavailable (DeadlineExceeded for a timeout); 401/403 (gangkeeper's own
// service account may not create reviews) is PermissionDenied with a hint
// at the RBAC in deploy/. A token the server does not know is not an
// error: TokenReviewResult::authenticated is false. Thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangkeeper/kube/client.h"

namespace gangkeeper::kube {

// A user as the API server's authenticators describe it.
struct ReviewedUser {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
};

struct TokenReviewResult {
  bool authenticated = false;
  ReviewedUser user;
  std::string error;  // the server's status.error when not authenticated
};

// What a SubjectAccessReview asks: resource attributes (group, resource,
// namespace, name, verb) or, with `path` set, non-resource ones (path, verb).
struct AccessAttributes {
  std::string verb;
  std::string group;
  std::string resource;
  std::string namespace_name;  // "" = cluster-wide or all namespaces
  std::string name;            // "" = the collection
  std::string path;            // non-resource URL; then the fields above but verb are unused
};

struct AccessDecision {
  bool allowed = false;
  std::string reason;  // the authorizer's reason or evaluation error, for messages
};

class AccessReviewClient {
 public:
  // `client` must outlive this.
  explicit AccessReviewClient(Client* client) : client_(client) {}

  // POST /apis/authentication.k8s.io/v1/tokenreviews. `audiences` empty =
  // the API server's own audience.
  absl::StatusOr<TokenReviewResult> ReviewToken(const std::string& token,
                                                const std::vector<std::string>& audiences = {});
  // POST /apis/authorization.k8s.io/v1/subjectaccessreviews.
  absl::StatusOr<AccessDecision> ReviewAccess(const ReviewedUser& user, const AccessAttributes& attributes);

 private:
  Client* client_;
};

}  // namespace gangkeeper::kube
