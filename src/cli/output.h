// gangkeeper CLI: how the client subcommands print: tables padded to their
// widest cell, JSON, YAML (yaml-cpp's emitter), quantities in Kubernetes
// units. Pure formatting; private to src/cli.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gangkeeper::cli {

using TableRows = std::vector<std::vector<std::string>>;

// Columns padded to their widest cell, `gutter` spaces apart, no trailing
// blanks.
std::string FormatTable(const TableRows& rows, size_t gutter = 3);
void PrintTable(const TableRows& rows, size_t gutter = 3);

// `j` as block-style YAML (yaml-cpp's emitter). Strings that a YAML reader
// would take for a number, a boolean or null are quoted.
std::string FormatYaml(const nlohmann::json& j);

// -o json or -o yaml of a whole answer; false for other formats.
bool PrintStructured(const nlohmann::json& j, const std::string& output);

// A quantity for a person, in Kubernetes units: the canonical spelling when
// it is short ("36Gi", "500m", "8"), else, for a byte count, three
// significant digits with a binary suffix ("3.97Gi"). Text that is not a
// quantity comes back as it is.
std::string HumanQuantity(const std::string& text);

// A line-by-line diff of two texts (lines only in `before` with "-", only in
// `after` with "+", the rest with two spaces), showing three unchanged
// lines around each change ("  ..." for the lines left out); "" when the
// texts are equal.
std::string LineDiff(const std::string& before, const std::string& after);

}  // namespace gangkeeper::cli
