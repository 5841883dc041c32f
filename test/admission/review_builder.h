// gangkeeper admission tests: AdmissionReview bodies and patch application.
#pragma once

#include <string>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"

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

}  // namespace gangkeeper::admission
