// gangkeeper fuzzing: the policy manifest loader and the cross-object checks.
//
// Input: the text of one manifest file (YAML, JSON, a JSON array or a List).
// DecodeManifests must report every problem as a Diagnostic with a message
// and the file it came from (it never throws, never aborts), keep no object
// without a name, and ValidatePolicySet must then run on whatever was
// decoded. Inputs of odd length are decoded on top of the example policies
// of policies/, so references to existing flavors, queues and cohorts (and
// duplicate names) are explored as well.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/validate.h"
#include "test/fuzz/fuzz_target.h"

namespace gangkeeper::fuzz {
namespace {

constexpr absl::string_view kFile = "fuzz.yaml";

const model::PolicySet& ExamplePolicies() {
  static const model::PolicySet* const policies = [] {
    absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(GK_SOURCE_DIR "/policies");
    GK_CHECK_OK(loaded.status());
    GK_CHECK_MSG(!loaded->diagnostics.HasErrors(), loaded->diagnostics.ErrorSummary().c_str());
    return new model::PolicySet(std::move(loaded->policies));
  }();
  return *policies;
}

template <typename Map>
absl::Status CheckNamed(const Map& objects, absl::string_view kind) {
  for (const auto& entry : objects) {
    if (entry.first.empty()) return absl::InternalError(absl::StrCat("DecodeManifests kept a ", kind, " without a name"));
  }
  return absl::OkStatus();
}

absl::Status CheckDiagnostics(const model::Diagnostics& diagnostics, absl::string_view phase) {
  for (const model::Diagnostic& d : diagnostics.items) {
    if (d.message.empty()) return absl::InternalError(absl::StrCat(phase, ": a diagnostic without a message"));
    if (d.ToString().empty()) return absl::InternalError(absl::StrCat(phase, ": an empty diagnostic line"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FuzzOneInput(absl::string_view data) {
  model::PolicySet policies = data.size() % 2 == 1 ? ExamplePolicies() : model::PolicySet();
  model::Diagnostics diagnostics;
  model::DecodeManifests(data, kFile, &policies, &diagnostics);
  if (absl::Status s = CheckDiagnostics(diagnostics, "DecodeManifests"); !s.ok()) return s;
  for (const model::Diagnostic& d : diagnostics.items) {
    if (d.source.file != kFile) {
      return absl::InternalError(absl::StrCat("DecodeManifests: a diagnostic names file \"", d.source.file, "\""));
    }
  }
  if (absl::Status s = CheckNamed(policies.flavors, "ResourceFlavor"); !s.ok()) return s;
  if (absl::Status s = CheckNamed(policies.cluster_queues, "ClusterQueue"); !s.ok()) return s;
  if (absl::Status s = CheckNamed(policies.workload_priority_classes, "WorkloadPriorityClass"); !s.ok()) return s;
  if (absl::Status s = CheckNamed(policies.priority_classes, "PriorityClass"); !s.ok()) return s;
  for (const auto& [key, queue] : policies.local_queues) {
    if (key.first.empty() || key.second.empty()) {
      return absl::InternalError("DecodeManifests kept a LocalQueue without a namespace or name");
    }
  }
  model::ValidatePolicySet(policies, &diagnostics);
  return CheckDiagnostics(diagnostics, "ValidatePolicySet");
}

}  // namespace gangkeeper::fuzz
