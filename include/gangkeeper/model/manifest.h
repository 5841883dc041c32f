// gangkeeper: reading policy manifests and reporting what is wrong with them.
//
// DecodeManifests() reads one YAML (multi-document, `---`) or JSON text
// (one object, a JSON array, or a `kind: List`) and adds every policy object
// it finds to a PolicySet; Kinds that are not policy (Job, Deployment, ...)
// are skipped with a note. Problems are collected as Diagnostics, each
// naming the source (file#document), the object, the field path and the fix;
// nothing throws and nothing aborts on bad input. LoadPolicies() reads a
// file or a directory tree and then runs ValidatePolicySet (validate.h).
// Pure functions; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::model {

struct Diagnostic {
  enum class Severity { kError, kWarning, kNote };
  Severity severity = Severity::kError;
  SourceRef source;
  std::string object;  // "ClusterQueue team-a-gpu"; empty for document-level problems
  std::string path;    // "spec.resourceGroups[0].flavors[0].resources[2].nominalQuota"
  std::string message;

  // "policies/q.yaml#2: error: ClusterQueue team-a-gpu: spec.cohort: message"
  std::string ToString() const;
};

struct Diagnostics {
  std::vector<Diagnostic> items;

  bool HasErrors() const;
  int Count(Diagnostic::Severity severity) const;
  void Add(Diagnostic::Severity severity, const SourceRef& source, std::string object, std::string path,
           std::string message);
  // All errors joined, for a Status message.
  std::string ErrorSummary() const;
};

// Decodes every document in `text` into `policies`. `file` names the source
// in diagnostics. An object whose decoding fails is not added. A second
// object with the same kind and name is an error (the first one is kept).
// A ClusterQueue annotated kInactiveReasonAnnotation (encode.h: how
// EncodeManifests records a stand-in's inactive_reason) reads back with
// that inactive_reason.
void DecodeManifests(absl::string_view text, absl::string_view file, PolicySet* policies, Diagnostics* diagnostics);

struct LoadResult {
  PolicySet policies;
  Diagnostics diagnostics;
  int files = 0;
};

// Reads `path` (a file, or every *.yaml, *.yml and *.json under a directory,
// in sorted order), decodes and validates. NotFound/PermissionDenied when
// `path` or a file in it cannot be read; decoding and validation problems
// are diagnostics in the result, not a status.
[[nodiscard]] absl::StatusOr<LoadResult> LoadPolicies(const std::string& path);

}  // namespace gangkeeper::model
