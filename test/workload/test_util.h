// gangkeeper workload tests: parsing JSON, extracting, quantities, seeds.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/extract.h"
#include "gangkeeper/workload/workload.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::workload {

// Parses `json`; a parse error fails the test (and yields a null document).
inline rapidjson::Document ParseJson(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) {
    ADD_FAILURE() << "bad test JSON at offset " << doc.GetErrorOffset() << ": "
                  << rapidjson::GetParseError_En(doc.GetParseError()) << "\n"
                  << json;
  }
  return doc;
}

inline absl::StatusOr<Workload> Extract(const std::string& json, Kind kind, const model::PolicySet& policies = {},
                                        const ExtractOptions& options = {}) {
  rapidjson::Document doc = ParseJson(json);
  return ExtractWorkload(doc, InfoFor(kind), policies, options);
}

inline quantity::Quantity Q(const std::string& text) { return quantity::ParseQuantity(text).value(); }

// A resource map with canonical spellings, for readable expectations:
// {"cpu": "4", "memory": "16Gi"}.
inline std::map<std::string, std::string> Formatted(const std::map<std::string, quantity::Quantity>& m) {
  std::map<std::string, std::string> out;
  for (const auto& [name, q] : m) out[name] = q.Format();
  return out;
}

inline std::vector<std::string> PodSetNames(const Workload& w) {
  std::vector<std::string> out;
  for (const PodSet& ps : w.pod_sets) out.push_back(ps.name);
  return out;
}

inline std::vector<int64_t> PodSetCounts(const Workload& w) {
  std::vector<int64_t> out;
  for (const PodSet& ps : w.pod_sets) out.push_back(ps.count);
  return out;
}

inline std::string SeedPath(const std::string& file) {
  return std::string(GK_SOURCE_DIR) + "/test/fixtures/seed/" + file;
}

// The JSON of every document in a seed file whose kind is `kind`.
inline std::vector<std::string> SeedDocuments(const std::string& file, const std::string& kind) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<std::string>> docs = testing::YamlFileToJson(SeedPath(file));
  if (!docs.ok()) {
    ADD_FAILURE() << docs.status();
    return out;
  }
  for (const std::string& json : *docs) {
    rapidjson::Document doc = ParseJson(json);
    if (!doc.IsObject()) continue;
    const rapidjson::Value& root = doc;  // const iterators: C++20-safe comparisons
    rapidjson::Value::ConstMemberIterator k = root.FindMember("kind");
    if (k != root.MemberEnd() && k->value.IsString() && kind == k->value.GetString()) out.push_back(json);
  }
  return out;
}

// The policy objects of YAML manifests (Kueue objects, PriorityClasses).
inline model::PolicySet Policies(const std::string& yaml) {
  model::PolicySet policies;
  model::Diagnostics diagnostics;
  model::DecodeManifests(yaml, "test.yaml", &policies, &diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors()) << diagnostics.ErrorSummary();
  return policies;
}

}  // namespace gangkeeper::workload
