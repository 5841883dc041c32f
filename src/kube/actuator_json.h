// gangkeeper: the JSON the Kubernetes actuator reads and writes (private to
// src/kube/actuator.cc): pointers into objects, JSON patch operations, the
// placement a release adds and a suspend takes out again, and the
// finished-object test. nlohmann::json throughout; no exceptions escape.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/status_macros.h"
#include "gangkeeper/broker/ports.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/hold.h"
#include "gangkeeper/workload/observe.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube::actuator_json {

using nlohmann::json;

// The node at RFC 6901 `pointer` in `doc`, or nullptr (also for a malformed
// pointer). No exceptions.
inline const json* At(const json& doc, const std::string& pointer) {
  absl::StatusOr<std::vector<std::string>> tokens = workload::PointerTokens(pointer);
  if (!tokens.ok()) return nullptr;
  const json* cur = &doc;
  for (const std::string& token : *tokens) {
    if (cur->is_object()) {
      auto it = cur->find(token);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      size_t index = 0;
      if (!absl::SimpleAtoi(token, &index) || index >= cur->size()) return nullptr;
      cur = &(*cur)[index];
    } else {
      return nullptr;
    }
  }
  return cur;
}

inline std::string Str(const json* j) { return j != nullptr && j->is_string() ? j->get<std::string>() : ""; }

inline json TolerationJson(const model::Toleration& t) {
  json j = json::object();
  if (!t.key.empty()) j["key"] = t.key;
  j["operator"] = t.op.empty() ? "Equal" : t.op;
  if (!t.value.empty()) j["value"] = t.value;
  if (!t.effect.empty()) j["effect"] = t.effect;
  if (t.toleration_seconds.has_value()) j["tolerationSeconds"] = *t.toleration_seconds;
  return j;
}

// Tolerations compare with the default operator filled in.
inline json Normalized(json t) {
  if (t.is_object() && !t.contains("operator")) t["operator"] = "Equal";
  return t;
}

inline bool Contains(const json* list, const json& t) {
  if (list == nullptr || !list->is_array()) return false;
  const json want = Normalized(t);
  for (const json& have : *list) {
    if (Normalized(have) == want) return true;
  }
  return false;
}

inline json Op(const char* op, const std::string& path, json value) {
  return json{{"op", op}, {"path", path}, {"value", std::move(value)}};
}
inline json Remove(const std::string& path) { return json{{"op", "remove"}, {"path", path}}; }

inline std::string AnnotationPath() {
  return absl::StrCat("/metadata/annotations/", workload::JsonPointerEscape(workload::kAdmittedFlavorsAnnotation));
}

inline std::string FullParallelismPath() {
  return absl::StrCat("/metadata/annotations/", workload::JsonPointerEscape(workload::kFullParallelismAnnotation));
}

// Partial admission of a Job: the admitted count becomes spec.parallelism
// and the Job's own count is kept in an annotation (a later suspend puts it
// back). Nothing for a Job admitted whole or another kind.
inline void AppendParallelismOps(const workload::KindInfo& kind, const broker::ReleaseOrder& order, json* ops) {
  if (kind.kind != workload::Kind::kJob || order.workload->pod_sets.size() != 1 ||
      order.assignment.pod_sets.size() != 1) {
    return;
  }
  const int64_t full = order.workload->pod_sets[0].count;
  const int64_t admitted = order.assignment.pod_sets[0].count;
  if (admitted >= full) return;
  ops->push_back(Op("add", FullParallelismPath(), absl::StrCat(full)));
  ops->push_back(Op("add", "/spec/parallelism", admitted));
}

// The kinds table's hold operations (workload/hold.h) read a json through this.
class JsonDocProbe final : public workload::JsonProbe {
 public:
  explicit JsonDocProbe(const json& doc) : doc_(doc) {}

  Type TypeAt(absl::string_view pointer) const override {
    const json* v = At(doc_, std::string(pointer));
    if (v == nullptr) return Type::kAbsent;
    if (v->is_object()) return Type::kObject;
    if (v->is_array()) return Type::kArray;
    if (v->is_string()) return Type::kString;
    if (v->is_boolean()) return Type::kBool;
    if (v->is_number()) return Type::kNumber;
    return Type::kNull;
  }
  bool BoolAt(absl::string_view pointer) const override {
    const json* v = At(doc_, std::string(pointer));
    return v != nullptr && v->is_boolean() && v->get<bool>();
  }
  std::string StringAt(absl::string_view pointer) const override { return Str(At(doc_, std::string(pointer))); }
  size_t SizeAt(absl::string_view pointer) const override {
    const json* v = At(doc_, std::string(pointer));
    return v != nullptr && v->is_array() ? v->size() : 0;
  }
  std::optional<int64_t> IntAt(absl::string_view pointer) const override {
    const json* v = At(doc_, std::string(pointer));
    if (v == nullptr || !v->is_number_integer()) return std::nullopt;
    return v->get<int64_t>();
  }

 private:
  const json& doc_;
};

// Whether the object's own status says it has ended (Job Complete or
// Failed, a Ray job's deployment status, ...), by the test the reconciler
// applies to what it watches (workload::IsFinishedObject). The broker hears
// of the end only through the watch, a little later; an order read against
// the object meanwhile finds nothing left to release or stop.
inline bool FinishedObject(const json& obj) { return workload::IsFinishedObject(JsonDocProbe(obj)); }

inline bool Held(const json& obj, const workload::KindInfo& kind) { return workload::IsHeld(JsonDocProbe(obj), kind); }

// The table's operations as JSON patch entries (their values are JSON text
// the table wrote, so they parse).
inline void AppendOps(const std::vector<workload::PatchOp>& from, json* ops) {
  for (const workload::PatchOp& op : from) {
    if (op.value_json.empty()) {
      ops->push_back(Remove(op.path));
    } else {
      ops->push_back(Op(op.op.c_str(), op.path, json::parse(op.value_json, nullptr, false)));
    }
  }
}

// What release adds to one pod template (spec at `spec_pointer`): ops, and
// the record of what was added. InvalidArgument when the template selects
// another value for a label the flavor sets.
inline absl::Status PlacementOps(const json& obj, const std::string& spec_pointer,
                          const broker::ReleaseOrder::PodSetPlacement& placement, json* ops, json* added_selector,
                          json* added_tolerations) {
  *added_selector = json::object();
  *added_tolerations = json::array();
  const json* spec = At(obj, spec_pointer);
  if (spec == nullptr || !spec->is_object()) {
    return absl::FailedPreconditionError(absl::StrCat("the object has no pod spec at ", spec_pointer));
  }
  const json* selector = At(*spec, "/nodeSelector");
  const bool has_selector = selector != nullptr && selector->is_object();
  for (const auto& [k, v] : placement.node_selector) {
    if (has_selector && selector->contains(k)) {
      if (Str(&(*selector)[k]) == v) continue;
      return absl::InvalidArgumentError(absl::StrCat(spec_pointer, "/nodeSelector: ", k, "=", Str(&(*selector)[k]),
                                                     " conflicts with the admitted flavor's ", k, "=", v,
                                                     ": drop it from the template or the flavor"));
    }
    (*added_selector)[k] = v;
  }
  if (!added_selector->empty()) {
    if (!has_selector) {
      ops->push_back(Op("add", spec_pointer + "/nodeSelector", *added_selector));
    } else {
      for (const auto& [k, v] : added_selector->items()) {
        ops->push_back(Op("add", absl::StrCat(spec_pointer, "/nodeSelector/", workload::JsonPointerEscape(k)), v));
      }
    }
  }
  const json* tolerations = At(*spec, "/tolerations");
  const bool has_tolerations = tolerations != nullptr && tolerations->is_array();
  for (const model::Toleration& t : placement.tolerations) {
    json tj = TolerationJson(t);
    if (Contains(tolerations, tj) || Contains(added_tolerations, tj)) continue;
    added_tolerations->push_back(std::move(tj));
  }
  if (!added_tolerations->empty()) {
    if (!has_tolerations) {
      ops->push_back(Op("add", spec_pointer + "/tolerations", *added_tolerations));
    } else {
      for (const json& t : *added_tolerations) ops->push_back(Op("add", spec_pointer + "/tolerations/-", t));
    }
  }
  return absl::OkStatus();
}

// Ops that take out of the pod spec at `spec_pointer` what `record` says
// release added (entries changed since are left alone).
inline void RestoreOps(const json& obj, const std::string& spec_pointer, const json& record, json* ops) {
  const json* spec = At(obj, spec_pointer);
  if (spec == nullptr || !spec->is_object()) return;
  const json* selector = At(*spec, "/nodeSelector");
  if (const json* added = At(record, "/nodeSelector"); added != nullptr && added->is_object() && selector != nullptr &&
                                                      selector->is_object()) {
    for (const auto& [k, v] : added->items()) {
      if (selector->contains(k) && (*selector)[k] == v) {
        const std::string path = absl::StrCat(spec_pointer, "/nodeSelector/", workload::JsonPointerEscape(k));
        ops->push_back(Op("test", path, v));
        ops->push_back(Remove(path));
      }
    }
  }
  const json* tolerations = At(*spec, "/tolerations");
  const json* added = At(record, "/tolerations");
  if (tolerations == nullptr || !tolerations->is_array() || added == nullptr || !added->is_array()) return;
  std::vector<size_t> indices;
  for (const json& t : *added) {
    const json want = Normalized(t);
    for (size_t i = tolerations->size(); i-- > 0;) {  // the last copy: release appended it
      if (Normalized((*tolerations)[i]) == want &&
          std::find(indices.begin(), indices.end(), i) == indices.end()) {
        indices.push_back(i);
        break;
      }
    }
  }
  std::sort(indices.rbegin(), indices.rend());  // remove from the end so indices stay valid
  for (size_t i : indices) {
    const std::string path = absl::StrCat(spec_pointer, "/tolerations/", i);
    ops->push_back(Op("test", path, (*tolerations)[i]));
    ops->push_back(Remove(path));
  }
}

inline std::string Describe(const broker::ReleaseOrder& order) {
  std::vector<std::string> parts;
  for (const auto& p : order.placements) {
    std::vector<std::string> what;
    for (const auto& [k, v] : p.node_selector) what.push_back(absl::StrCat(k, "=", v));
    std::string s = absl::StrCat(p.name, ": nodeSelector {", absl::StrJoin(what, ", "), "}");
    if (!p.tolerations.empty()) absl::StrAppend(&s, ", ", p.tolerations.size(), " toleration(s)");
    parts.push_back(std::move(s));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace gangkeeper::kube::actuator_json
