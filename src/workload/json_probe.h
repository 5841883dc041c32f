// gangkeeper workload: a JsonProbe (workload/hold.h) over a RapidJSON value,
// for the tests written once over JsonProbe (holding, placement, the end of
// an object) when the object was parsed with RapidJSON. Private to the
// workload module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/workload/hold.h"
#include "rapidjson/document.h"

namespace gangkeeper::workload {

// JsonProbe over a RapidJSON value.
class RapidJsonProbe final : public JsonProbe {
 public:
  explicit RapidJsonProbe(const rapidjson::Value& root) : root_(root) {}

  Type TypeAt(absl::string_view pointer) const override {
    const rapidjson::Value* v = Find(pointer);
    if (v == nullptr) return Type::kAbsent;
    if (v->IsObject()) return Type::kObject;
    if (v->IsArray()) return Type::kArray;
    if (v->IsString()) return Type::kString;
    if (v->IsBool()) return Type::kBool;
    if (v->IsNumber()) return Type::kNumber;
    return Type::kNull;
  }
  bool BoolAt(absl::string_view pointer) const override {
    const rapidjson::Value* v = Find(pointer);
    return v != nullptr && v->IsBool() && v->GetBool();
  }
  std::string StringAt(absl::string_view pointer) const override {
    const rapidjson::Value* v = Find(pointer);
    return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
  }
  size_t SizeAt(absl::string_view pointer) const override {
    const rapidjson::Value* v = Find(pointer);
    return v != nullptr && v->IsArray() ? v->Size() : 0;
  }
  std::optional<int64_t> IntAt(absl::string_view pointer) const override {
    const rapidjson::Value* v = Find(pointer);
    if (v == nullptr || !v->IsInt64()) return std::nullopt;
    return v->GetInt64();
  }

 private:
  const rapidjson::Value* Find(absl::string_view pointer) const {
    absl::StatusOr<std::vector<std::string>> tokens = PointerTokens(pointer);
    if (!tokens.ok()) return nullptr;
    const rapidjson::Value* cur = &root_;
    for (const std::string& token : *tokens) {
      if (cur->IsObject()) {
        auto it = cur->FindMember(rapidjson::Value(rapidjson::StringRef(token.data(), token.size())));
        if (it == cur->MemberEnd()) return nullptr;
        cur = &it->value;
      } else if (cur->IsArray()) {
        size_t index = 0;
        if (!absl::SimpleAtoi(token, &index) || index >= cur->Size()) return nullptr;
        cur = &(*cur)[static_cast<rapidjson::SizeType>(index)];
      } else {
        return nullptr;
      }
    }
    return cur;
  }

  const rapidjson::Value& root_;
};

}  // namespace gangkeeper::workload
