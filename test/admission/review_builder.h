// gangkeeper admission tests: AdmissionReview bodies and patch application.
#pragma once

#include <string>

#include <fstream>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::admission {

struct ReviewSpec {
  std::string operation = "CREATE";
  std::string group = "batch";
  std::string version = "v1";
  std::string kind = "Job";
  std::string resource = "jobs";
  std::string sub_resource;
  std::string namespace_name = "team-a";
  std::string name = "train";
  std::string username = "alice";
  bool dry_run = false;
  nlohmann::json object = nullptr;
  nlohmann::json old_object = nullptr;
  std::string uid = "3f0f9a55-1b4e-4b8f-9e4c-6a1d1c2b7e11";
};

inline std::string ReviewBody(const ReviewSpec& s) {
  nlohmann::json request = {
      {"uid", s.uid},
      {"kind", {{"group", s.group}, {"version", s.version}, {"kind", s.kind}}},
      {"resource", {{"group", s.group}, {"version", s.version}, {"resource", s.resource}}},
      {"namespace", s.namespace_name},
      {"operation", s.operation},
      {"userInfo", {{"username", s.username}}},
      {"object", s.object},
      {"oldObject", s.old_object},
      {"dryRun", s.dry_run},
  };
  if (!s.name.empty()) request["name"] = s.name;
  if (!s.sub_resource.empty()) request["subResource"] = s.sub_resource;
  return nlohmann::json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}}
      .dump();
}

// The decoded "response" of an AdmissionReview answer, with the patch decoded.
struct Answer {
  nlohmann::json response;
  nlohmann::json patch = nullptr;  // null when none
  bool allowed() const { return response.value("allowed", false); }
  std::string message() const {
    return response.contains("status") ? response["status"].value("message", "") : "";
  }
  std::vector<std::string> warnings() const {
    return response.contains("warnings") ? response["warnings"].get<std::vector<std::string>>()
                                         : std::vector<std::string>{};
  }
};

inline Answer ParseAnswer(const std::string& body) {
  Answer a;
  nlohmann::json review = nlohmann::json::parse(body);
  a.response = review.at("response");
  if (a.response.contains("patch")) {
    std::string raw;
    absl::Base64Unescape(a.response["patch"].get<std::string>(), &raw);
    a.patch = nlohmann::json::parse(raw);
  }
  return a;
}

// Applies `patch` to `object` with `kubectl patch --local --type=json` (the
// issue's oracle for "applies like the API server would"); null on failure.
inline nlohmann::json KubectlPatch(const nlohmann::json& object, const nlohmann::json& patch) {
  testing::TempDir dir;
  { std::ofstream(dir.File("o.json")) << object.dump(); }
  auto r = testing::RunCommand({"/usr/bin/env", "kubectl", "patch", "--local", "-f", dir.File("o.json"), "--type=json",
                                "-p", patch.dump(), "-o", "json"},
                               absl::Seconds(60));
  if (!r.ok() || r->exit_code != 0) {
    ADD_FAILURE() << "kubectl patch failed: " << (r.ok() ? r->err : std::string(r.status().message()));
    return nullptr;
  }
  return nlohmann::json::parse(r->out);
}

// Whether the switch at `pointer` suspends the object: true, or a
// schedulingGates list holding gangkeeper's gate.
inline bool Suspended(const nlohmann::json& object, const std::string& pointer) {
  nlohmann::json::json_pointer p(pointer);
  if (!object.contains(p)) return false;
  const nlohmann::json& v = object.at(p);
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) {  // held at 0 replicas, the count kept in an annotation
    const nlohmann::json* annotations =
        object.contains("metadata") ? &object["metadata"] : nullptr;
    return v == 0 && annotations != nullptr && annotations->contains("annotations") &&
           (*annotations)["annotations"].contains("gangkeeper.io/held-replicas");
  }
  for (const auto& gate : v) {
    if (gate.value("name", "") == "gangkeeper.io/admission") return true;
  }
  return false;
}

}  // namespace gangkeeper::admission
