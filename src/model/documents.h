// gangkeeper model: splitting a manifest text into JSON documents.
//
// YAML (multi-document) and JSON texts both become a list of nlohmann::json
// values, one per document, so every decoder works on one tree shape. YAML
// plain scalars become strings (quantities, integers and booleans are
// parsed later by the field reader, which accepts numbers and strings), and
// `null`/`~`/empty become null. Parse errors are reported per document with
// line and column (text that is not UTF-8 is one); aliases are expanded
// with a size cap.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::model {

struct Document {
  int index = 0;              // 1-based position in the text
  nlohmann::json value;       // null when the document is empty
  std::string error;          // non-empty when the document does not parse
};

// Splits and parses `text`. Never throws.
std::vector<Document> ParseDocuments(absl::string_view text);

}  // namespace gangkeeper::model
