// gangkeeper: holding a workload back and letting it go, per kind.
//
// Every managed kind is held until its gang is admitted: the webhook
// suspends it at CREATE, the reconciler reads whether it still is, the
// actuator releases it (and suspends it again on preemption). Where the hold
// lives is a row of the kinds table (KindInfo::hold); this header is the one
// set of operations on it, so that no caller knows "spec.suspend" or
// "spec.runPolicy.suspend" or the scheduling gate by itself.
//
// The operations read the object through JsonProbe, so that the admission
// side (RapidJSON, see extract.h for the overloads on a rapidjson::Value) and
// the actuator (nlohmann::json) share them; they return RFC 6902 operations
// as values for the caller to send. Pure functions; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::workload {

// The unescaped reference tokens of an RFC 6901 JSON pointer:
// "/spec/a~1b/c~0d" -> {"spec", "a/b", "c~d"}; "" (the whole document) -> {};
// "/" -> {""}. InvalidArgument when a non-empty pointer does not start with
// "/" or a "~" is not followed by "0" or "1". The one unescaping of pointers:
// the kinds table's operations and the actuator's JSON reads use it.
absl::StatusOr<std::vector<std::string>> PointerTokens(absl::string_view pointer);

// A read-only view of a parsed JSON object, addressed by RFC 6901 pointers
// ("" is the root). An implementation wraps one JSON library's value.
class JsonProbe {
 public:
  enum class Type { kAbsent, kNull, kBool, kNumber, kString, kArray, kObject };

  virtual ~JsonProbe() = default;
  virtual Type TypeAt(absl::string_view pointer) const = 0;
  // The boolean at `pointer`; false when absent or not a boolean.
  virtual bool BoolAt(absl::string_view pointer) const = 0;
  // The string at `pointer`; "" when absent or not a string.
  virtual std::string StringAt(absl::string_view pointer) const = 0;
  // The length of the array at `pointer`; 0 when absent or not an array.
  virtual size_t SizeAt(absl::string_view pointer) const = 0;
  // The whole number at `pointer`; nullopt when absent or not an integer.
  virtual std::optional<int64_t> IntAt(absl::string_view pointer) const = 0;
};

// One RFC 6902 operation. `value_json` is the value as compact JSON text;
// empty for "remove".
struct PatchOp {
  std::string op;    // "add", "replace", "test", "remove"
  std::string path;  // a JSON pointer
  std::string value_json;

  friend bool operator==(const PatchOp&, const PatchOp&) = default;
};

// True when `object` of kind `kind` is held: its suspend flag is true,
// (gate) gangkeeper's scheduling gate is in the list, or (replicas) its
// replica count is 0 and gangkeeper.io/held-replicas keeps the count.
bool IsHeld(const JsonProbe& object, const KindInfo& kind);

// The operations that hold `object`; none when it is held already. Only
// `add`, on paths whose parent exists: a missing or malformed parent is
// added (replaced) whole, e.g. {"op":"add","path":"/spec/runPolicy",
// "value":{"suspend":true}}. A gate is appended to an existing list.
std::vector<PatchOp> HoldOps(const JsonProbe& object, const KindInfo& kind);

// The operations that release `object`; none when it is not held. A flag is
// set false (`add`); a gate is taken out with a `test` of its name before
// the `remove`, so a list that changed in between fails the patch (422); a
// replica count is put back from gangkeeper.io/held-replicas (tested), and
// the annotation taken out.
//
// Replicas: HoldOps keeps the count (spec.replicas, default 1) in the
// annotation and sets spec.replicas to 0.
std::vector<PatchOp> ReleaseOps(const JsonProbe& object, const KindInfo& kind);

// The pointer of the PodSpec of `pod_set`'s template (its template_pointer,
// "" for a Pod, + "/spec").
std::string PodSpecPointer(const PodSet& pod_set);

// Where release adds `pod_set`'s nodeSelector and tolerations in an object
// of kind `kind` (and a suspend takes them out): the PodSpec of its
// template (PodSpecPointer) for most kinds; for a kind that takes placement
// beside its templates (an AppWrapper, kinds table column
// PodTemplates::beside) the pod set's template_pointer itself, an object
// with nodeSelector and tolerations members
// ("/spec/components/0/podSetInfos/1").
std::string PlacementPointer(Kind kind, const PodSet& pod_set);

// The operations that create, in `object`, the placement targets of `w`'s
// pod sets that it lacks, so that each PlacementPointer addresses an object
// before release adds to it: an AppWrapper component without a
// podSetInfos list gets one with an empty entry per pod set; a shorter
// list is extended; an entry that is not an object is replaced by an empty
// one. Only `add` and `replace`. None for kinds whose target is the
// template (it exists: the pod sets were read from it).
std::vector<PatchOp> PlacementTargetOps(const JsonProbe& object, const Workload& w);

}  // namespace gangkeeper::workload
