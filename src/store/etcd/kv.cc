// gangkeeper store/etcd: the key-value calls of HttpEtcdClient (see
// http_client.h): range, put, delete, transactions, compaction.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"
#include "src/store/etcd/gateway.h"
#include "src/store/etcd/http_client.h"

namespace gangkeeper::etcd {
namespace {

std::string CompareTarget(Compare::Target t) {
  switch (t) {
    case Compare::Target::kVersion: return "VERSION";
    case Compare::Target::kCreateRevision: return "CREATE";
    case Compare::Target::kModRevision: return "MOD";
    case Compare::Target::kValue: return "VALUE";
    case Compare::Target::kLease: return "LEASE";
  }
  return "MOD";
}

std::string CompareResult(Compare::Result r) {
  switch (r) {
    case Compare::Result::kEqual: return "EQUAL";
    case Compare::Result::kNotEqual: return "NOT_EQUAL";
    case Compare::Result::kGreater: return "GREATER";
    case Compare::Result::kLess: return "LESS";
  }
  return "EQUAL";
}

Json CompareJson(const Compare& c) {
  Json j = {{"key", B64(c.key)}, {"target", CompareTarget(c.target)}, {"result", CompareResult(c.result)}};
  const std::string n = absl::StrCat(c.number);
  switch (c.target) {
    case Compare::Target::kVersion: j["version"] = n; break;
    case Compare::Target::kCreateRevision: j["create_revision"] = n; break;
    case Compare::Target::kModRevision: j["mod_revision"] = n; break;
    case Compare::Target::kLease: j["lease"] = n; break;
    case Compare::Target::kValue: j["value"] = B64(c.value); break;
  }
  if (!c.range_end.empty()) j["range_end"] = B64(c.range_end);
  return j;
}

Json OpJson(const Op& op) {
  Json body = {{"key", B64(op.key)}};
  switch (op.type) {
    case Op::Type::kPut:
      body["value"] = B64(op.value);
      if (op.lease != 0) body["lease"] = absl::StrCat(op.lease);
      return {{"request_put", std::move(body)}};
    case Op::Type::kDelete:
      if (!op.range_end.empty()) body["range_end"] = B64(op.range_end);
      return {{"request_delete_range", std::move(body)}};
    case Op::Type::kRange:
      if (!op.range_end.empty()) body["range_end"] = B64(op.range_end);
      return {{"request_range", std::move(body)}};
  }
  return Json::object();
}

}  // namespace

absl::StatusOr<RangeResult> HttpEtcdClient::Range(const std::string& key, const RangeOptions& options) {
  const std::string what = absl::StrCat("etcd range ", Quote(key));
  Json req = {{"key", B64(key)}};
  if (!options.range_end.empty()) req["range_end"] = B64(options.range_end);
  if (options.limit > 0) req["limit"] = absl::StrCat(options.limit);
  if (options.revision > 0) req["revision"] = absl::StrCat(options.revision);
  if (options.keys_only) req["keys_only"] = true;
  if (options.count_only) req["count_only"] = true;
  GK_ASSIGN_OR_RETURN(Json answer, transport_->Call(what, "/v3/kv/range", req, Retry::kSafe));
  RangeResult r;
  GK_ASSIGN_OR_RETURN(r.revision, HeaderRevision(what, answer));
  GK_ASSIGN_OR_RETURN(r.kvs, DecodeKvs(what, answer));
  if (!GetBool(answer, "more", &r.more) || !GetInt64(answer, "count", &r.count)) {
    return NotGateway(what, "more or count has the wrong type");
  }
  return r;
}

absl::StatusOr<int64_t> HttpEtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  const std::string what = absl::StrCat("etcd put ", Quote(key));
  Json req = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) req["lease"] = absl::StrCat(lease);
  GK_ASSIGN_OR_RETURN(Json answer, transport_->Call(what, "/v3/kv/put", req, Retry::kSafe));
  return HeaderRevision(what, answer);
}

absl::StatusOr<std::pair<int64_t, int64_t>> HttpEtcdClient::Delete(const std::string& key,
                                                                   const std::string& range_end) {
  const std::string what = absl::StrCat("etcd delete ", Quote(key));
  Json req = {{"key", B64(key)}};
  if (!range_end.empty()) req["range_end"] = B64(range_end);
  GK_ASSIGN_OR_RETURN(Json answer, transport_->Call(what, "/v3/kv/deleterange", req, Retry::kSafe));
  std::pair<int64_t, int64_t> out;
  GK_ASSIGN_OR_RETURN(out.first, HeaderRevision(what, answer));
  if (!GetInt64(answer, "deleted", &out.second)) return NotGateway(what, "deleted has the wrong type");
  return out;
}

absl::StatusOr<TxnResult> HttpEtcdClient::Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                                              const std::vector<Op>& failure) {
  const std::string what =
      absl::StrCat("etcd txn (", compares.size(), " compares, ", success.size(), "/", failure.size(), " ops)");
  Json req = {{"compare", Json::array()}, {"success", Json::array()}, {"failure", Json::array()}};
  for (const Compare& c : compares) req["compare"].push_back(CompareJson(c));
  for (const Op& op : success) req["success"].push_back(OpJson(op));
  for (const Op& op : failure) req["failure"].push_back(OpJson(op));
  GK_ASSIGN_OR_RETURN(Json answer, transport_->Call(what, "/v3/kv/txn", req, Retry::kIfUnsent));
  TxnResult r;
  GK_ASSIGN_OR_RETURN(r.revision, HeaderRevision(what, answer));
  if (!GetBool(answer, "succeeded", &r.succeeded)) return NotGateway(what, "succeeded has the wrong type");
  const std::vector<Op>& branch = r.succeeded ? success : failure;
  if (answer.contains("responses")) {
    const Json* list = GetArray(answer, "responses");
    if (list == nullptr) return NotGateway(what, "responses is not a list");
    for (const Json& one : *list) {
      if (const Json* range = GetObject(one, "response_range")) {
        GK_ASSIGN_OR_RETURN(std::vector<KeyValue> kvs, DecodeKvs(what, *range));
        r.responses.push_back(std::move(kvs));
      } else {
        r.responses.emplace_back();
      }
    }
  }
  if (r.responses.size() != branch.size()) {
    return NotGateway(what, absl::StrCat(r.responses.size(), " responses for ", branch.size(), " ops"));
  }
  return r;
}

absl::Status HttpEtcdClient::Compact(int64_t revision) {
  const std::string what = absl::StrCat("etcd compact to ", revision);
  return transport_->Call(what, "/v3/kv/compaction", {{"revision", absl::StrCat(revision)}}, Retry::kSafe).status();
}

}  // namespace gangkeeper::etcd
