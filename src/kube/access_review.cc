// gangkeeper: TokenReview and SubjectAccessReview (see access_review.h).
#include "gangkeeper/kube/access_review.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gangkeeper::kube {
namespace {

using nlohmann::json;

constexpr char kTokenReviewPath[] = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr char kAccessReviewPath[] = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

// The client's error, with what gangkeeper was doing and (401/403) how to fix it.
absl::Status ReviewCallError(const absl::Status& s, const char* what) {
  const int code = HttpCode(s);
  if (code == 401 || code == 403) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, ": gangkeeper's service account may not create it (deploy/rbac.yaml grants create on tokenreviews "
              "and subjectaccessreviews): ",
        s.message()));
  }
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

std::string ReviewString(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<std::string> ReviewStrings(const json& value) {
  std::vector<std::string> out;
  if (!value.is_array()) return out;
  for (const json& v : value) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

ReviewedUser UserFromReview(const json& user) {
  ReviewedUser u;
  if (!user.is_object()) return u;
  u.username = ReviewString(user, "username");
  u.uid = ReviewString(user, "uid");
  if (auto g = user.find("groups"); g != user.end()) u.groups = ReviewStrings(*g);
  if (auto e = user.find("extra"); e != user.end() && e->is_object()) {
    for (auto it = e->begin(); it != e->end(); ++it) u.extra[it.key()] = ReviewStrings(it.value());
  }
  return u;
}

}  // namespace

absl::StatusOr<TokenReviewResult> AccessReviewClient::ReviewToken(const std::string& token,
                                                                  const std::vector<std::string>& audiences) {
  json spec = {{"token", token}};
  if (!audiences.empty()) spec["audiences"] = audiences;
  const json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"spec", spec}};
  absl::StatusOr<json> answer = client_->Post(kTokenReviewPath, review.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!answer.ok()) return ReviewCallError(answer.status(), "TokenReview");
  TokenReviewResult r;
  auto status = answer->find("status");
  if (status == answer->end() || !status->is_object()) {
    return absl::UnavailableError("TokenReview: the API server's answer has no status");
  }
  auto authenticated = status->find("authenticated");
  r.authenticated = authenticated != status->end() && authenticated->is_boolean() && authenticated->get<bool>();
  r.error = ReviewString(*status, "error");
  if (auto user = status->find("user"); user != status->end()) r.user = UserFromReview(*user);
  // An authenticated answer without a user name cannot be authorized.
  if (r.authenticated && r.user.username.empty()) {
    r.authenticated = false;
    r.error = "the TokenReview named no user";
  }
  return r;
}

absl::StatusOr<AccessDecision> AccessReviewClient::ReviewAccess(const ReviewedUser& user,
                                                                const AccessAttributes& a) {
  json spec = {{"user", user.username}};
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.groups.empty()) spec["groups"] = user.groups;
  if (!user.extra.empty()) {
    json extra = json::object();
    for (const auto& [key, values] : user.extra) extra[key] = values;
    spec["extra"] = std::move(extra);
  }
  if (!a.path.empty()) {
    spec["nonResourceAttributes"] = {{"path", a.path}, {"verb", a.verb}};
  } else {
    json attrs = {{"verb", a.verb}, {"group", a.group}, {"resource", a.resource}};
    if (!a.namespace_name.empty()) attrs["namespace"] = a.namespace_name;
    if (!a.name.empty()) attrs["name"] = a.name;
    spec["resourceAttributes"] = std::move(attrs);
  }
  const json review = {
      {"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", std::move(spec)}};
  absl::StatusOr<json> answer = client_->Post(kAccessReviewPath, review.dump(-1, ' ', false, json::error_handler_t::replace));
  if (!answer.ok()) return ReviewCallError(answer.status(), "SubjectAccessReview");
  auto status = answer->find("status");
  if (status == answer->end() || !status->is_object()) {
    return absl::UnavailableError("SubjectAccessReview: the API server's answer has no status");
  }
  AccessDecision d;
  auto allowed = status->find("allowed");
  auto denied = status->find("denied");
  d.allowed = allowed != status->end() && allowed->is_boolean() && allowed->get<bool>() &&
              !(denied != status->end() && denied->is_boolean() && denied->get<bool>());
  d.reason = ReviewString(*status, "reason");
  if (std::string e = ReviewString(*status, "evaluationError"); !e.empty()) {
    d.reason = d.reason.empty() ? e : absl::StrCat(d.reason, "; ", e);
  }
  return d;
}

}  // namespace gangkeeper::kube
