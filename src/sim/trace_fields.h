// gangkeeper sim: the fields CSV and JSON Lines traces share, turned into a
// TraceWorkload with errors that name the line and field. Used by
// tabular_trace.cc only. Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gangkeeper/sim/trace.h"

namespace gangkeeper::sim {

// The columns / keys of a CSV or JSON Lines trace, in documentation order.
const std::vector<std::string>& TraceFieldNames();
bool IsRequiredTraceField(const std::string& name);

// Collects per-line problems, "file:line: field F: what and the fix", up to
// a limit.
class TraceErrors {
 public:
  explicit TraceErrors(std::string file) : file_(std::move(file)) {}
  void Add(int line, const std::string& field, const std::string& message);
  bool empty() const { return messages_.empty(); }
  bool full() const { return messages_.size() >= kMax; }
  // InvalidArgument with every message, one per line.
  absl::Status ToStatus() const;
  const std::string& file() const { return file_; }

 private:
  static constexpr size_t kMax = 20;
  std::string file_;
  std::vector<std::string> messages_;
  size_t dropped_ = 0;
};

// One record as text (CSV fields, or JSON values written as text), plus the
// pod sets when a JSON record gave them as an array (already parsed).
struct TraceRecord {
  int line = 0;
  std::map<std::string, std::string> fields;  // present, non-empty fields only
  std::optional<std::vector<workload::PodSet>> pod_sets;
};

// Builds the workload of `record` (the `index`-th, 1-based), or adds errors
// and returns nullopt.
std::optional<TraceWorkload> BuildTraceWorkload(const TraceRecord& record, int index, TraceErrors* errors);

// Adds an error for every (namespace, name) used twice.
void CheckUniqueNames(const std::vector<TraceWorkload>& workloads, const std::vector<int>& lines,
                      TraceErrors* errors);

}  // namespace gangkeeper::sim
