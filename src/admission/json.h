// gangkeeper admission: checked RapidJSON reads used by the handlers.
// Every accessor checks the type first (RapidJSON asserts otherwise).
#pragma once

#include <map>
#include <string>

#include "rapidjson/document.h"

namespace gangkeeper::admission {

// v[name] when v is an object that has it, else nullptr.
inline const rapidjson::Value* Get(const rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

inline std::string Str(const rapidjson::Value* v) {
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

inline bool IsTrue(const rapidjson::Value* v) { return v != nullptr && v->IsBool() && v->GetBool(); }

inline std::map<std::string, std::string> StringMap(const rapidjson::Value* v) {
  std::map<std::string, std::string> out;
  if (v == nullptr || !v->IsObject()) return out;
  for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
    if (it->name.IsString() && it->value.IsString()) {
      out[std::string(it->name.GetString(), it->name.GetStringLength())] =
          std::string(it->value.GetString(), it->value.GetStringLength());
    }
  }
  return out;
}

}  // namespace gangkeeper::admission
