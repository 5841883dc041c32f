// gangkeeper model tests: decoding helpers.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/validate.h"

namespace gangkeeper::model {

struct Decoded {
  PolicySet policies;
  Diagnostics diagnostics;

  std::vector<std::string> Lines(Diagnostic::Severity severity) const {
    std::vector<std::string> out;
    for (const Diagnostic& d : diagnostics.items) {
      if (d.severity == severity) out.push_back(d.ToString());
    }
    return out;
  }
  std::vector<std::string> Errors() const { return Lines(Diagnostic::Severity::kError); }
  std::vector<std::string> Warnings() const { return Lines(Diagnostic::Severity::kWarning); }
  std::vector<std::string> Notes() const { return Lines(Diagnostic::Severity::kNote); }
  std::string All() const {
    std::vector<std::string> out;
    for (const Diagnostic& d : diagnostics.items) out.push_back(d.ToString());
    return absl::StrJoin(out, "\n");
  }
};

// Decodes `text` as file "test.yaml" and, when `validate`, runs the
// cross-object checks.
inline Decoded Decode(const std::string& text, bool validate = true) {
  Decoded d;
  DecodeManifests(text, "test.yaml", &d.policies, &d.diagnostics);
  if (validate) ValidatePolicySet(d.policies, &d.diagnostics);
  return d;
}

}  // namespace gangkeeper::model
