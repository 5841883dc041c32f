// gangkeeper: the hold operations on the kinds table's HoldField (see hold.h).
//
// The only code that knows how a hold is read, set and lifted; the table in
// kinds.cc says where each kind keeps it. Pointers in the table are
// followed token by token, so a kind whose flag sits deeper needs only a
// new row.
#include "gangkeeper/workload/hold.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/workload/extract.h"
#include "src/workload/json_probe.h"
#include "src/workload/kinds/kinds.h"

namespace gangkeeper::workload {
namespace {

// The tokens of a pointer gangkeeper wrote itself (the kinds table, paths
// built from it); a malformed one addresses nothing, like a missing field.
std::vector<std::string> TokensOrEmpty(absl::string_view pointer) {
  absl::StatusOr<std::vector<std::string>> tokens = PointerTokens(pointer);
  return tokens.ok() ? *std::move(tokens) : std::vector<std::string>();
}

std::string JsonText(absl::string_view s) { return absl::StrCat("\"", base::JsonEscape(s), "\""); }

std::string GateJson() { return absl::StrCat(R"({"name":)", JsonText(kSchedulingGate), "}"); }

std::string HeldReplicasPath() {
  return absl::StrCat("/metadata/annotations/", JsonPointerEscape(kHeldReplicasAnnotation));
}

// The count a replicas-held object keeps in its annotation, if valid.
std::optional<int64_t> HeldReplicas(const JsonProbe& object) {
  if (object.TypeAt(HeldReplicasPath()) != JsonProbe::Type::kString) return std::nullopt;
  int64_t n = 0;
  if (!absl::SimpleAtoi(object.StringAt(HeldReplicasPath()), &n) || n < 0) return std::nullopt;
  return n;
}

bool ReplicasHeld(const JsonProbe& object, absl::string_view pointer) {
  return HeldReplicas(object).has_value() && object.IntAt(pointer).value_or(-1) == 0;
}

// The index of gangkeeper's gate in the list at `gates`, if it is there.
std::optional<size_t> GateIndex(const JsonProbe& object, absl::string_view gates) {
  if (object.TypeAt(gates) != JsonProbe::Type::kArray) return std::nullopt;
  const size_t n = object.SizeAt(gates);
  for (size_t i = 0; i < n; ++i) {
    if (object.StringAt(absl::StrCat(gates, "/", i, "/name")) == kSchedulingGate) return i;
  }
  return std::nullopt;
}

// One `add` that puts `leaf_json` at `pointer`: at the first parent on the
// way that is not an object, as nested objects holding the rest of the path.
PatchOp AddAlongPath(const JsonProbe& object, absl::string_view pointer, const std::string& leaf_json) {
  const std::vector<std::string> tokens = TokensOrEmpty(pointer);
  std::string path;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    absl::StrAppend(&path, "/", JsonPointerEscape(tokens[i]));
    if (object.TypeAt(path) == JsonProbe::Type::kObject) continue;
    std::string value = leaf_json;
    for (size_t j = tokens.size(); j-- > i + 1;) value = absl::StrCat("{", JsonText(tokens[j]), ":", value, "}");
    return PatchOp{"add", path, value};
  }
  return PatchOp{"add", std::string(pointer), leaf_json};
}


}  // namespace

absl::StatusOr<std::vector<std::string>> PointerTokens(absl::string_view pointer) {
  std::vector<std::string> out;
  if (pointer.empty()) return out;
  if (pointer[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON pointer \"", pointer, "\": must be empty or start with \"/\" (RFC 6901)"));
  }
  for (absl::string_view raw : absl::StrSplit(pointer.substr(1), '/')) {
    std::string token;
    token.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '~') {
        token += raw[i];
        continue;
      }
      if (i + 1 == raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1')) {
        return absl::InvalidArgumentError(absl::StrCat("JSON pointer \"", pointer,
                                                       "\": \"~\" must be followed by 0 (for ~) or 1 (for /)"));
      }
      token += raw[i + 1] == '1' ? '/' : '~';
      ++i;
    }
    out.push_back(std::move(token));
  }
  return out;
}

bool IsHeld(const JsonProbe& object, const KindInfo& kind) {
  switch (kind.hold.method) {
    case HoldMethod::kSuspendFlag: return object.BoolAt(kind.hold.pointer);
    case HoldMethod::kGate: return GateIndex(object, kind.hold.pointer).has_value();
    case HoldMethod::kReplicas: return ReplicasHeld(object, kind.hold.pointer);
  }
  return false;
}

std::vector<PatchOp> HoldOps(const JsonProbe& object, const KindInfo& kind) {
  if (IsHeld(object, kind)) return {};
  switch (kind.hold.method) {
    case HoldMethod::kSuspendFlag: return {AddAlongPath(object, kind.hold.pointer, "true")};
    case HoldMethod::kGate:
      if (object.TypeAt(kind.hold.pointer) == JsonProbe::Type::kArray) {
        return {PatchOp{"add", absl::StrCat(kind.hold.pointer, "/-"), GateJson()}};
      }
      return {AddAlongPath(object, kind.hold.pointer, absl::StrCat("[", GateJson(), "]"))};
    case HoldMethod::kReplicas: {
      // The count it asks for (Kubernetes' default is 1); a count that is
      // not a whole number is kept as 1, like the API server's defaulting
      // would refuse it anyway.
      const int64_t asked = std::max<int64_t>(0, object.IntAt(kind.hold.pointer).value_or(1));
      std::vector<PatchOp> ops;
      ops.push_back(AddAlongPath(object, HeldReplicasPath(), JsonText(absl::StrCat(asked))));
      ops.push_back(AddAlongPath(object, kind.hold.pointer, "0"));
      return ops;
    }
  }
  return {};
}

std::vector<PatchOp> ReleaseOps(const JsonProbe& object, const KindInfo& kind) {
  switch (kind.hold.method) {
    case HoldMethod::kSuspendFlag:
      if (!IsHeld(object, kind)) return {};
      return {AddAlongPath(object, kind.hold.pointer, "false")};
    case HoldMethod::kGate: {
      const std::optional<size_t> index = GateIndex(object, kind.hold.pointer);
      if (!index.has_value()) return {};
      const std::string gate_path = absl::StrCat(kind.hold.pointer, "/", *index);
      return {PatchOp{"test", absl::StrCat(gate_path, "/name"), JsonText(kSchedulingGate)},
              PatchOp{"remove", gate_path, ""}};
    }
    case HoldMethod::kReplicas: {
      if (!IsHeld(object, kind)) return {};
      const int64_t count = *HeldReplicas(object);
      const std::string kept = JsonText(object.StringAt(HeldReplicasPath()));
      return {PatchOp{"test", HeldReplicasPath(), kept}, PatchOp{"remove", HeldReplicasPath(), ""},
              PatchOp{"add", std::string(kind.hold.pointer), absl::StrCat(count)}};
    }
  }
  return {};
}

std::string PodSpecPointer(const PodSet& pod_set) { return absl::StrCat(pod_set.template_pointer, "/spec"); }

std::string PlacementPointer(Kind kind, const PodSet& pod_set) {
  return TemplatesFor(kind).beside ? pod_set.template_pointer : PodSpecPointer(pod_set);
}

std::vector<PatchOp> PlacementTargetOps(const JsonProbe& object, const Workload& w) {
  std::vector<PatchOp> ops;
  if (!TemplatesFor(w.kind).beside) return ops;
  // Each target is `list/index`; the lists in the order the pod sets name
  // them, each with the length its pod sets need.
  std::vector<std::pair<std::string, size_t>> lists;
  for (const PodSet& ps : w.pod_sets) {
    const size_t slash = ps.template_pointer.rfind('/');
    size_t index = 0;
    if (slash == std::string::npos || slash == 0 ||
        !absl::SimpleAtoi(absl::string_view(ps.template_pointer).substr(slash + 1), &index) || index >= kMaxPodSets) {
      continue;  // not a list entry: nothing this function can create
    }
    const std::string list = ps.template_pointer.substr(0, slash);
    auto it = std::find_if(lists.begin(), lists.end(), [&](const auto& l) { return l.first == list; });
    if (it == lists.end()) {
      lists.emplace_back(list, index + 1);
    } else {
      it->second = std::max(it->second, index + 1);
    }
  }
  for (const auto& [list, needed] : lists) {
    if (object.TypeAt(list) != JsonProbe::Type::kArray) {
      std::string entries;
      for (size_t i = 0; i < needed; ++i) absl::StrAppend(&entries, i == 0 ? "" : ",", "{}");
      ops.push_back(PatchOp{"add", list, absl::StrCat("[", entries, "]")});
      continue;
    }
    const size_t have = object.SizeAt(list);
    for (size_t i = 0; i < std::min(have, needed); ++i) {
      const std::string entry = absl::StrCat(list, "/", i);
      if (object.TypeAt(entry) != JsonProbe::Type::kObject) ops.push_back(PatchOp{"replace", entry, "{}"});
    }
    for (size_t i = have; i < needed; ++i) ops.push_back(PatchOp{"add", absl::StrCat(list, "/-"), "{}"});
  }
  return ops;
}

bool IsHeld(const rapidjson::Value& object, const KindInfo& kind) { return IsHeld(RapidJsonProbe(object), kind); }

std::vector<PatchOp> HoldOps(const rapidjson::Value& object, const KindInfo& kind) {
  return HoldOps(RapidJsonProbe(object), kind);
}

std::vector<PatchOp> ReleaseOps(const rapidjson::Value& object, const KindInfo& kind) {
  return ReleaseOps(RapidJsonProbe(object), kind);
}

std::vector<PatchOp> PlacementTargetOps(const rapidjson::Value& object, const Workload& w) {
  return PlacementTargetOps(RapidJsonProbe(object), w);
}

bool ReadHeld(const JsonNode& root, const KindInfo& kind, base::FieldErrors* errors) {
  const std::vector<std::string> tokens = TokensOrEmpty(kind.hold.pointer);
  if (tokens.empty()) return false;
  if (kind.hold.method == HoldMethod::kReplicas) {
    // The count and the annotation are read (and their errors reported
    // once) by the kind's extractor, which counts the pods.
    base::FieldErrors reported_by_the_extractor;
    std::optional<JsonNode> parent = root;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      parent = ObjectField(*parent, tokens[i], &reported_by_the_extractor);
      if (!parent.has_value()) return false;
    }
    std::optional<int64_t> replicas =
        IntField(*parent, tokens.back(), 0, kMaxPodCount, &reported_by_the_extractor);
    return replicas.has_value() && *replicas == 0 && HeldReplicas(RapidJsonProbe(root.value())).has_value();
  }
  std::optional<JsonNode> parent = root;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    parent = ObjectField(*parent, tokens[i], errors);
    if (!parent.has_value()) return false;
  }
  switch (kind.hold.method) {
    case HoldMethod::kSuspendFlag: return BoolField(*parent, tokens.back(), errors).value_or(false);
    case HoldMethod::kReplicas: return false;  // above
    case HoldMethod::kGate: {
      std::optional<JsonNode> gates = ListField(*parent, tokens.back(), errors);
      if (!gates.has_value()) return false;
      bool gated = false;
      for (const JsonNode& gate : Items(*gates)) {
        if (!ExpectObject(gate, errors)) continue;
        if (StringField(gate, "name", errors) == kSchedulingGate) gated = true;
      }
      return gated;
    }
  }
  return false;
}

}  // namespace gangkeeper::workload
