// gangkeeper api: answers (see reply.h).
#include "src/api/reply.h"

#include "absl/strings/str_cat.h"

namespace gangkeeper::api {

server::HttpResponse Error(const absl::Status& status, absl::string_view field) {
  return server::ErrorResponse(status, field, server::ErrorNames::kKubernetes);
}

server::HttpResponse Ok(const nlohmann::json& body) {
  server::HttpResponse r;
  r.body = body.dump();
  return r;
}

server::HttpResponse Invalid(const model::Diagnostics& d) {
  std::string field;
  for (const model::Diagnostic& x : d.items) {
    if (x.severity == model::Diagnostic::Severity::kError) {
      field = x.path;
      break;
    }
  }
  // A body that is not YAML or JSON at all has no path inside an object.
  return server::ErrorResponse(422, d.ErrorSummary(), field.empty() ? "body" : field);
}

server::HttpResponse Forbidden(const Principal& who, const std::string& what) {
  if (who.authorizer != nullptr) {
    return Error(absl::PermissionDeniedError(absl::StrCat("user \"", who.name, "\" may not ", what)));
  }
  return Error(absl::PermissionDeniedError(
      absl::StrCat("token \"", who.name, "\" (role ", RoleName(who.role), ") may not ", what)));
}

}  // namespace gangkeeper::api
