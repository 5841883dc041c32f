// gangkeeper model: splitting a manifest text into JSON documents.
//
// YAML (multi-document) and JSON texts both become a list of nlohmann::json
// values, one per document, so every decoder works on one tree shape. YAML
// plain scalars become strings (quantities, integers and booleans are
// parsed later by the field reader, which accepts numbers and strings), and
// `null`/`~`/empty become null. Parse errors are reported per document with
// line and column (text that is not UTF-8 is one); aliases are expanded
// with a size cap. A key written twice in one map is an error naming both
// places: YAML and JSON parsers keep only one of the values, so the other
// would be lost without a word. This is the only place manifests are
// parsed, so every caller (policy files, check-policies, API bodies,
// bundles) gets the same checks.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::model {

struct DocumentError {
  std::string path;     // the key path of a duplicate key; empty otherwise
  std::string message;  // with line and column in the whole text
};

struct Document {
  int index = 0;                     // 1-based position in the text
  // null when the document is empty or does not parse. With duplicate keys
  // it holds one of the values (for naming the object in messages only).
  nlohmann::json value;
  std::vector<DocumentError> errors;  // non-empty: the document must not be used
};

// Splits and parses `text`. Never throws.
std::vector<Document> ParseDocuments(absl::string_view text);

}  // namespace gangkeeper::model
