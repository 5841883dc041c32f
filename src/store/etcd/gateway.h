// gangkeeper store/etcd: the JSON of etcd's v3 gateway, for the client's
// files (transport.cc, watch.cc, kv.cc, lease.cc): bytes fields in base64,
// int64 fields as strings, fields holding their default value (0, false,
// "", PUT) left out of answers, and the gateway's error objects. Checked
// against etcd 3.4.23. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/store/etcd/client.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::etcd {

using Json = nlohmann::json;

// etcd's gRPC code for Unavailable (the same number as absl's).
inline constexpr int kGrpcUnavailable = 14;

// A key for messages: printable, escaped, at most ~80 bytes.
std::string Quote(absl::string_view key);
std::string B64(absl::string_view bytes);
// Never throws: invalid UTF-8 is replaced.
std::string Dump(const Json& j);

// Field readers of an answer object. A missing field reads as its default;
// false when the field has the wrong type (or `obj` is not an object).
// proto3 JSON writes int64 as a string; a plain number is accepted too.
bool GetInt64(const Json& obj, const char* name, int64_t* out);
bool GetBool(const Json& obj, const char* name, bool* out);
// A base64 bytes field; missing means empty.
bool GetBytes(const Json& obj, const char* name, std::string* out);
// "" when missing or not a string.
std::string GetString(const Json& obj, const char* name);
// Null when missing or not an object / a list.
const Json* GetObject(const Json& obj, const char* name);
const Json* GetArray(const Json& obj, const char* name);

// FailedPrecondition: `what` got an answer that is not the gateway's JSON.
absl::Status NotGateway(absl::string_view what, absl::string_view detail);
// header.revision of an answer (0 without a header).
absl::StatusOr<int64_t> HeaderRevision(absl::string_view what, const Json& answer);
absl::Status DecodeKv(absl::string_view what, const Json& j, KeyValue* kv);
// The answer's "kvs" (none when missing).
absl::StatusOr<std::vector<KeyValue>> DecodeKvs(absl::string_view what, const Json& answer);

// The gateway's error object: {"error":"..","message":"..","code":N} as an
// answer, or {"grpc_code":N,"message":".."} inside a stream. Sets *code.
bool ParseGatewayError(const Json& j, int64_t* code, std::string* message);
// The status of an error etcd answered: its gRPC code as the absl code.
absl::Status GatewayError(absl::string_view what, int64_t code, const std::string& message);

}  // namespace gangkeeper::etcd
