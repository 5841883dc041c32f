// gangkeeper store/etcd: the lease calls of HttpEtcdClient (see
// http_client.h): grant, keep-alive, revoke, time-to-live.
#include <string>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"
#include "src/store/etcd/gateway.h"
#include "src/store/etcd/http_client.h"

namespace gangkeeper::etcd {

absl::StatusOr<LeaseGrant> HttpEtcdClient::Grant(absl::Duration ttl) {
  const std::string what = "etcd lease grant";
  if (ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ttl ", absl::FormatDuration(ttl), " is under etcd's unit of 1s"));
  }
  const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  GK_ASSIGN_OR_RETURN(Json answer,
                      transport_->Call(what, "/v3/lease/grant", {{"TTL", absl::StrCat(seconds)}}, Retry::kSafe));
  if (std::string error = GetString(answer, "error"); !error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", error));
  }
  LeaseGrant g;
  if (!GetInt64(answer, "ID", &g.id) || !GetInt64(answer, "TTL", &g.ttl_seconds) || g.id == 0) {
    return NotGateway(what, "ID or TTL");
  }
  return g;
}

absl::StatusOr<int64_t> HttpEtcdClient::KeepAlive(int64_t lease) {
  const std::string what = absl::StrCat("etcd lease keepalive ", lease);
  GK_ASSIGN_OR_RETURN(Json answer,
                      transport_->Call(what, "/v3/lease/keepalive", {{"ID", absl::StrCat(lease)}}, Retry::kSafe, true));
  int64_t ttl = 0;
  if (!GetInt64(answer, "TTL", &ttl)) return NotGateway(what, "TTL has the wrong type");
  // An unknown (expired, revoked) lease answers without TTL.
  if (ttl <= 0) return absl::NotFoundError(absl::StrCat(what, ": the lease expired or was revoked"));
  return ttl;
}

absl::Status HttpEtcdClient::Revoke(int64_t lease) {
  const std::string what = absl::StrCat("etcd lease revoke ", lease);
  return transport_->Call(what, "/v3/lease/revoke", {{"ID", absl::StrCat(lease)}}, Retry::kSafe).status();
}

absl::StatusOr<int64_t> HttpEtcdClient::TimeToLive(int64_t lease) {
  const std::string what = absl::StrCat("etcd lease timetolive ", lease);
  GK_ASSIGN_OR_RETURN(Json answer,
                      transport_->Call(what, "/v3/lease/timetolive", {{"ID", absl::StrCat(lease)}}, Retry::kSafe));
  int64_t ttl = 0;
  if (!GetInt64(answer, "TTL", &ttl)) return NotGateway(what, "TTL has the wrong type");
  if (ttl < 0) return absl::NotFoundError(absl::StrCat(what, ": the lease expired or was revoked"));
  return ttl;
}

}  // namespace gangkeeper::etcd
