// gangkeeper api: how a handler answers. Values as JSON; errors through
// the server's one Status->HTTP table (server/http.h), with their codes
// spelled as the Kubernetes API does ({"error":{"code","message","field"}}).
// Private to the module.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/api/auth.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/server/http.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::api {

// 200 with `body`.
server::HttpResponse Ok(const nlohmann::json& body);
// An error answer through the server's one Status->HTTP table, its code
// spelled as the Kubernetes API does (server/http.h).
server::HttpResponse Error(const absl::Status& status, absl::string_view field = "");
// 422 with every error, the first one's field path as `field`.
server::HttpResponse Invalid(const model::Diagnostics& d);
// 403: `who` may not `what` ("read ClusterQueue x").
server::HttpResponse Forbidden(const Principal& who, const std::string& what);

}  // namespace gangkeeper::api
