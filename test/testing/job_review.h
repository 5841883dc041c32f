// gangkeeper tests: batch/v1 Jobs and the AdmissionReviews the API server
// would send for them, and the token digest of a tokens file; shared by
// the integration tests that drive the real binary.
#pragma once

#include <openssl/sha.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::testing {

inline std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char b : d) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

inline nlohmann::json Job(const std::string& ns, const std::string& name, int pods, int gpus, bool complete = false) {
  using json = nlohmann::json;
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata",
               {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"labels", {{"kueue.x-k8s.io/queue-name", "q"}}}}},
              {"spec",
               {{"parallelism", pods},
                {"completions", pods},
                {"suspend", true},
                {"template",
                 {{"spec",
                   {{"restartPolicy", "Never"},
                    {"containers",
                     {{{"name", "w"},
                       {"image", "img"},
                       {"resources",
                        {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                         {"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}}}}}}};
  if (complete) job["status"] = {{"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
  return job;
}

inline nlohmann::json Review(const std::string& op, const std::string& uid, const std::string& ns, const std::string& name,
            const nlohmann::json& object, const nlohmann::json& old_object, const std::string& sub_resource = "") {
  using json = nlohmann::json;
  json req = {{"uid", uid},
              {"kind", {{"group", "batch"}, {"version", "v1"}, {"kind", "Job"}}},
              {"resource", {{"group", "batch"}, {"version", "v1"}, {"resource", "jobs"}}},
              {"namespace", ns},
              {"name", name},
              {"operation", op},
              {"userInfo", {{"username", "alice"}}},
              {"object", object},
              {"oldObject", old_object},
              {"dryRun", false}};
  if (!sub_resource.empty()) req["subResource"] = sub_resource;
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}};
}

}  // namespace gangkeeper::testing
