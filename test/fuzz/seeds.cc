// gangkeeper fuzzing: seed inputs from the fixtures (see seeds.h).
#include "test/fuzz/seeds.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "test/testing/yaml_json.h"

namespace gangkeeper::fuzz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Fixture directories holding Kubernetes manifests, relative to the source dir.
// The last one holds hand-written manifests of the objects and fields no
// fixture uses (Cohort trees, fair sharing, stop policies, a List).
constexpr const char* kManifestDirs[] = {"test/fixtures/kueue", "test/fixtures/seed", "policies",
                                         "test/fuzz/seeds/manifests"};
constexpr const char* kReviewDir = "test/fixtures/admission";
// Hand-written objects of the kinds no fixture has (MPIJob, XGBoostJob,
// PaddleJob, JobSet, RayJob, RayCluster, grouped and owned Pods).
constexpr const char* kObjectSeedDir = "test/fuzz/seeds/objects";

// The *.yaml, *.yml and *.json files directly in `dir`, sorted.
absl::StatusOr<std::vector<fs::path>> Files(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) out.push_back(it->path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir.string(), ": ", ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// "dir-file" for a fixture, so names from different folders cannot clash.
std::string SeedStem(const fs::path& path) {
  return absl::StrCat(path.parent_path().filename().string(), "-", path.stem().string());
}

struct Object {
  std::string name;  // "<fixture>.<document>"
  json value;
};

// Every fixture object with a spec (workloads and the like), the
// hand-written objects, and the objects inside the captured reviews.
absl::StatusOr<std::vector<Object>> FixtureObjects(const fs::path& source_dir) {
  std::vector<Object> out;
  for (const char* dir : {"test/fixtures/kueue", "test/fixtures/seed"}) {
    absl::StatusOr<std::vector<fs::path>> files = Files(source_dir / dir);
    if (!files.ok()) return files.status();
    for (const fs::path& file : *files) {
      absl::StatusOr<std::vector<std::string>> docs = testing::YamlFileToJson(file.string());
      if (!docs.ok()) return docs.status();
      for (size_t i = 0; i < docs->size(); ++i) {
        json value = json::parse((*docs)[i], nullptr, false);
        if (!value.is_object() || !value.contains("spec")) continue;
        out.push_back({absl::StrCat(SeedStem(file), ".", i + 1), std::move(value)});
      }
    }
  }
  absl::StatusOr<std::vector<fs::path>> written = Files(source_dir / kObjectSeedDir);
  if (!written.ok()) return written.status();
  for (const fs::path& file : *written) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) return text.status();
    json value = json::parse(*text, nullptr, false);
    if (!value.is_object()) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not a JSON object"));
    out.push_back({SeedStem(file), std::move(value)});
  }
  absl::StatusOr<std::vector<fs::path>> reviews = Files(source_dir / kReviewDir);
  if (!reviews.ok()) return reviews.status();
  for (const fs::path& file : *reviews) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) return text.status();
    json review = json::parse(*text, nullptr, false);
    if (review.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file.string(), ": not JSON"));
    for (const char* field : {"object", "oldObject"}) {
      if (review.contains("request") && review["request"].is_object() && review["request"].contains(field) &&
          review["request"][field].is_object()) {
        out.push_back({absl::StrCat(SeedStem(file), ".", field), review["request"][field]});
      }
    }
  }
  return out;
}

std::string StringOr(const json& object, const char* key, const char* fallback) {
  return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : fallback;
}

// `object` in an AdmissionReview v1 request, as the API server sends it.
json Review(const json& object, const std::string& operation, const std::string& uid) {
  const std::string api_version = StringOr(object, "apiVersion", "v1");
  const size_t slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  const std::string kind = StringOr(object, "kind", "Pod");
  const json meta = object.contains("metadata") && object["metadata"].is_object() ? object["metadata"] : json::object();
  json request = {
      {"uid", uid},
      {"kind", {{"group", group}, {"version", version}, {"kind", kind}}},
      {"resource", {{"group", group}, {"version", version}, {"resource", absl::AsciiStrToLower(kind) + "s"}}},
      {"namespace", StringOr(meta, "namespace", "default")},
      {"name", StringOr(meta, "name", "")},
      {"operation", operation},
      {"userInfo", {{"username", "alice@example.com"}, {"groups", {"system:authenticated"}}}},
      {"dryRun", false},
  };
  request["object"] = operation == "DELETE" ? json(nullptr) : object;
  request["oldObject"] = operation == "CREATE" ? json(nullptr) : object;
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

absl::StatusOr<std::vector<Seed>> ReviewSeeds(const fs::path& source_dir) {
  std::vector<Seed> out;
  absl::StatusOr<std::vector<fs::path>> reviews = Files(source_dir / kReviewDir);
  if (!reviews.ok()) return reviews.status();
  for (const fs::path& file : *reviews) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) return text.status();
    out.push_back({SeedStem(file) + ".json", *std::move(text)});
  }
  absl::StatusOr<std::vector<Object>> objects = FixtureObjects(source_dir);
  if (!objects.ok()) return objects.status();
  int n = 0;
  for (const Object& o : *objects) {
    for (const char* op : {"CREATE", "UPDATE", "DELETE"}) {
      const std::string uid = absl::StrCat("00000000-0000-4000-8000-", absl::StrFormat("%012d", ++n));
      out.push_back({absl::StrCat(o.name, ".", absl::AsciiStrToLower(op), ".json"), Dump(Review(o.value, op, uid))});
    }
  }
  return out;
}

absl::StatusOr<std::vector<Seed>> ObjectSeeds(const fs::path& source_dir) {
  absl::StatusOr<std::vector<Object>> objects = FixtureObjects(source_dir);
  if (!objects.ok()) return objects.status();
  std::vector<Seed> out;
  for (const Object& o : *objects) out.push_back({o.name + ".json", Dump(o.value)});
  return out;
}

absl::StatusOr<std::vector<Seed>> ManifestSeeds(const fs::path& source_dir) {
  std::vector<Seed> out;
  for (const char* dir : kManifestDirs) {
    absl::StatusOr<std::vector<fs::path>> files = Files(source_dir / dir);
    if (!files.ok()) return files.status();
    for (const fs::path& file : *files) {
      absl::StatusOr<std::string> text = ReadFile(file);
      if (!text.ok()) return text.status();
      out.push_back({SeedStem(file) + file.extension().string(), *std::move(text)});
      absl::StatusOr<std::vector<std::string>> docs = testing::YamlToJson(out.back().data);
      if (!docs.ok()) return docs.status();
      json array = json::array();
      for (const std::string& doc : *docs) array.push_back(json::parse(doc, nullptr, false));
      out.push_back({SeedStem(file) + ".array.json", Dump(array)});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Seed>> BuildSeeds(absl::string_view set, const std::string& source_dir) {
  if (set == "reviews") return ReviewSeeds(source_dir);
  if (set == "objects") return ObjectSeeds(source_dir);
  if (set == "manifests") return ManifestSeeds(source_dir);
  if (set == "none") return std::vector<Seed>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown seed set \"", set, "\" (reviews, objects, manifests or none)"));
}

}  // namespace gangkeeper::fuzz
