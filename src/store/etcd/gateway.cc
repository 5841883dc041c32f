// gangkeeper store/etcd: the gateway's JSON (see gateway.h).
#include "src/store/etcd/gateway.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/status_macros.h"

namespace gangkeeper::etcd {
namespace {

// etcd's gRPC code as the absl code (the two share their numbering).
absl::StatusCode FromGrpc(int64_t code) {
  if (code <= 0 || code > 16) return absl::StatusCode::kUnknown;
  return static_cast<absl::StatusCode>(code);
}

}  // namespace

std::string Quote(absl::string_view key) {
  constexpr size_t kMax = 80;
  std::string out = absl::StrCat("\"", absl::CHexEscape(key.substr(0, kMax)), "\"");
  if (key.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

std::string B64(absl::string_view bytes) { return absl::Base64Escape(bytes); }

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// proto3 JSON writes int64 as a string (and a missing field means 0);
// a plain number is accepted too.
bool GetInt64(const Json& obj, const char* name, int64_t* out) {
  *out = 0;
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (it->is_string()) return absl::SimpleAtoi(it->get_ref<const std::string&>(), out);
  return false;
}

bool GetBool(const Json& obj, const char* name, bool* out) {
  *out = false;
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

bool GetBytes(const Json& obj, const char* name, std::string* out) {
  out->clear();
  if (!obj.is_object()) return false;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  return absl::Base64Unescape(it->get_ref<const std::string&>(), out);
}

std::string GetString(const Json& obj, const char* name) {
  if (!obj.is_object()) return "";
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json* GetObject(const Json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it != obj.end() && it->is_object() ? &*it : nullptr;
}

const Json* GetArray(const Json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  return it != obj.end() && it->is_array() ? &*it : nullptr;
}

absl::Status NotGateway(absl::string_view what, absl::string_view detail) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": the answer is not etcd's v3 JSON gateway: ", detail));
}

absl::StatusOr<int64_t> HeaderRevision(absl::string_view what, const Json& answer) {
  int64_t rev = 0;
  const Json* header = GetObject(answer, "header");
  if (header != nullptr && !GetInt64(*header, "revision", &rev)) return NotGateway(what, "header.revision");
  return rev;
}

absl::Status DecodeKv(absl::string_view what, const Json& j, KeyValue* kv) {
  if (!j.is_object()) return NotGateway(what, "a kv is not an object");
  if (!GetBytes(j, "key", &kv->key) || !GetBytes(j, "value", &kv->value) ||
      !GetInt64(j, "create_revision", &kv->create_revision) || !GetInt64(j, "mod_revision", &kv->mod_revision) ||
      !GetInt64(j, "version", &kv->version) || !GetInt64(j, "lease", &kv->lease)) {
    return NotGateway(what, "a kv field has the wrong type");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KeyValue>> DecodeKvs(absl::string_view what, const Json& answer) {
  std::vector<KeyValue> kvs;
  if (!answer.is_object() || !answer.contains("kvs")) return kvs;
  const Json* list = GetArray(answer, "kvs");
  if (list == nullptr) return NotGateway(what, "kvs is not a list");
  kvs.reserve(list->size());
  for (const Json& j : *list) {
    KeyValue kv;
    GK_RETURN_IF_ERROR(DecodeKv(what, j, &kv));
    kvs.push_back(std::move(kv));
  }
  return kvs;
}

bool ParseGatewayError(const Json& j, int64_t* code, std::string* message) {
  if (!j.is_object()) return false;
  if (!GetInt64(j, "code", code) || *code == 0) {
    if (!GetInt64(j, "grpc_code", code) || *code == 0) return false;
  }
  *message = GetString(j, "message");
  if (message->empty()) *message = GetString(j, "error");
  return true;
}

absl::Status GatewayError(absl::string_view what, int64_t code, const std::string& message) {
  return absl::Status(FromGrpc(code), absl::StrCat(what, ": ", message.empty() ? "no message" : message));
}

}  // namespace gangkeeper::etcd
