// gangkeeper deploy tests: a small structural schema for rendered manifests.
//
// Schema::Load reads test/deploy/schema.yaml (its header describes the
// format: per kind, the apiVersion, the scope, typed field paths with
// required markers, closed maps and enums). Validate() checks one object
// (JSON, as the API server would decode the YAML) and returns every problem
// as "Kind/name: path: what", or nothing when the object fits.
// Thread-compatible.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::deploy_test {

class Schema {
 public:
  // InvalidArgument when the file is not a schema in the format above.
  [[nodiscard]] static absl::StatusOr<Schema> Load(const std::string& path);

  bool Knows(const std::string& kind) const { return kinds_.count(kind) != 0; }
  std::vector<std::string> Validate(const nlohmann::json& object) const;

 private:
  struct Field {
    std::string path;
    std::string type;
    bool required = false;
  };
  struct Kind {
    std::string api_version;
    bool namespaced = false;
    std::vector<Field> fields;  // with the common ones
    std::vector<std::string> closed;
    std::map<std::string, std::set<std::string>> enums;
    std::vector<std::string> forbidden;
  };
  std::map<std::string, Kind> kinds_;
};

}  // namespace gangkeeper::deploy_test
