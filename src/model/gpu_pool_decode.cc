// gangkeeper: GPUNodePool decoding from JSON (see the header for the rules).
//
// nlohmann accessors are used only after an is_*() check, and DecodeGpuNodePool additionally
// catches anything thrown so that no exception leaves this file. Pure functions; thread-safe.
#include "src/model/gpu_pool_decode.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::model {
namespace {

using base::FieldErrorType;
using base::FieldPath;
using nlohmann::json;

constexpr absl::string_view kSpecFields[] = {"flavor",      "gpu",         "gpusPerNode",
                                             "nodes",       "migStrategy", "migProfiles"};

// A short rendering of a JSON value for messages; never throws on invalid UTF-8.
std::string Show(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 64) text = absl::StrCat(text.substr(0, 61), "...");
  return absl::StrCat(value.type_name(), " ", text);
}

// The member `key` of `object`, or nullptr when absent or JSON null.
const json* Member(const json& object, absl::string_view key) {
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

bool DecodeString(const json& value, const FieldPath& path, std::string* out,
                  base::FieldErrors* errors) {
  if (!value.is_string()) {
    errors->Add(path, FieldErrorType::kInvalid, absl::StrCat("must be a string, got ", Show(value)));
    return false;
  }
  *out = value.get_ref<const std::string&>();
  return true;
}

bool DecodeInt(const json& value, const FieldPath& path, int64_t* out, base::FieldErrors* errors) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(kMax)) {
      errors->Add(path, FieldErrorType::kInvalid, absl::StrCat(u, " is out of range"));
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_float()) {
    // 2^53: beyond it a double no longer says which integer was meant.
    constexpr double kExact = 9007199254740992.0;
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) <= kExact) {
      *out = static_cast<int64_t>(d);
      return true;
    }
    errors->Add(path, FieldErrorType::kInvalid,
                absl::StrCat("must be a whole number, got ", Show(value)));
    return false;
  }
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    const char* begin = s.data();
    const char* end = s.data() + s.size();
    const bool digits_only =
        !s.empty() && std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(),
                                  [](char c) { return absl::ascii_isdigit(c); }) &&
        s != "-";
    int64_t v = 0;
    if (digits_only) {
      const std::from_chars_result r = std::from_chars(begin, end, v);
      if (r.ec == std::errc::result_out_of_range) {
        errors->Add(path, FieldErrorType::kInvalid, absl::StrCat("\"", s, "\" is out of range"));
        return false;
      }
      if (r.ec == std::errc() && r.ptr == end) {
        *out = v;
        return true;
      }
    }
    errors->Add(path, FieldErrorType::kInvalid,
                absl::StrCat("must be an integer, got ", Show(value)));
    return false;
  }
  errors->Add(path, FieldErrorType::kInvalid, absl::StrCat("must be an integer, got ", Show(value)));
  return false;
}

// Edit distance, for "did you mean" on field names (short strings only).
size_t PoolEditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t cost = (absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                           absl::ascii_tolower(static_cast<unsigned char>(b[j - 1])))
                              ? 0
                              : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string UnknownSpecField(absl::string_view key) {
  std::string msg = absl::StrCat("unknown field \"", key, "\"");
  if (key.size() <= 64) {
    absl::string_view best;
    size_t best_distance = 3;  // suggest only within 2 edits (case differences are free)
    for (absl::string_view field : kSpecFields) {
      const size_t d = PoolEditDistance(key, field);
      if (d < best_distance) {
        best_distance = d;
        best = field;
      }
    }
    if (!best.empty()) absl::StrAppend(&msg, ": did you mean \"", best, "\"?");
  }
  absl::StrAppend(&msg, "; supported fields: ", absl::StrJoin(kSpecFields, ", "));
  return msg;
}

void DecodeConstant(const json& object, absl::string_view key, absl::string_view want,
                    const FieldPath& path, base::FieldErrors* errors) {
  const json* value = Member(object, key);
  if (value == nullptr) {
    errors->Add(path, FieldErrorType::kRequired, absl::StrCat("must be ", want));
    return;
  }
  if (!value->is_string() || value->get_ref<const std::string&>() != want) {
    errors->Add(path, FieldErrorType::kNotSupported,
                absl::StrCat("must be ", want, ", got ", Show(*value)));
  }
}

void DecodeSpec(const json& spec, const FieldPath& path, GpuNodePool* out,
                base::FieldErrors* errors) {
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(std::begin(kSpecFields), std::end(kSpecFields), key) == std::end(kSpecFields)) {
      errors->Add(path.Child(key), FieldErrorType::kNotSupported, UnknownSpecField(key));
    }
  }

  if (const json* flavor = Member(spec, "flavor"); flavor != nullptr) {
    DecodeString(*flavor, path.Child("flavor"), &out->flavor, errors);
  } else {
    errors->Add(path.Child("flavor"), FieldErrorType::kRequired,
                "name the ResourceFlavor whose nodeLabels select this pool's nodes");
  }

  const FieldPath gpu_path = path.Child("gpu");
  if (const json* gpu = Member(spec, "gpu"); gpu != nullptr) {
    std::string name;
    if (DecodeString(*gpu, gpu_path, &name, errors)) {
      absl::StatusOr<GpuModel> model = ParseGpuModel(name);
      if (model.ok()) {
        out->gpu = *model;
      } else {
        errors->Add(gpu_path, FieldErrorType::kNotSupported, model.status().message());
      }
    }
  } else {
    errors->Add(gpu_path, FieldErrorType::kRequired,
                "name the GPU model: A100-40GB, A100-80GB, H100-80GB or H200-141GB");
  }

  if (const json* n = Member(spec, "gpusPerNode"); n != nullptr) {
    DecodeInt(*n, path.Child("gpusPerNode"), &out->gpus_per_node, errors);
  } else {
    errors->Add(path.Child("gpusPerNode"), FieldErrorType::kRequired,
                "say how many GPUs each node has");
  }

  if (const json* n = Member(spec, "nodes"); n != nullptr) {
    DecodeInt(*n, path.Child("nodes"), &out->nodes, errors);
  } else {
    errors->Add(path.Child("nodes"), FieldErrorType::kRequired,
                "say how many nodes the pool has (0 is allowed)");
  }

  const FieldPath strategy_path = path.Child("migStrategy");
  if (const json* s = Member(spec, "migStrategy"); s != nullptr) {
    std::string name;
    if (DecodeString(*s, strategy_path, &name, errors)) {
      absl::StatusOr<MigStrategy> strategy = ParseMigStrategy(name);
      if (strategy.ok()) {
        out->mig_strategy = *strategy;
      } else {
        errors->Add(strategy_path, FieldErrorType::kNotSupported, strategy.status().message());
      }
    }
  }

  const FieldPath profiles_path = path.Child("migProfiles");
  if (const json* profiles = Member(spec, "migProfiles"); profiles != nullptr) {
    if (!profiles->is_array()) {
      errors->Add(profiles_path, FieldErrorType::kInvalid,
                  absl::StrCat("must be a list of profile names (e.g. [MIG3g, MIG2g, MIG1g, "
                               "MIG1g]), got ",
                               Show(*profiles)));
    } else {
      size_t i = 0;
      for (const json& item : *profiles) {
        std::string name;
        if (DecodeString(item, profiles_path.Index(i), &name, errors)) {
          out->mig_profiles.push_back(std::move(name));
        }
        ++i;
      }
    }
  }
}

void Decode(const json& object, const FieldPath& root, GpuNodePool* out,
            base::FieldErrors* errors) {
  if (!object.is_object()) {
    errors->Add(root, FieldErrorType::kInvalid,
                absl::StrCat("a GPUNodePool manifest must be an object, got ", Show(object)));
    return;
  }
  DecodeConstant(object, "apiVersion", kGpuNodePoolApiVersion, root.Child("apiVersion"), errors);
  DecodeConstant(object, "kind", kGpuNodePoolKind, root.Child("kind"), errors);

  const FieldPath metadata_path = root.Child("metadata");
  const FieldPath name_path = metadata_path.Child("name");
  const json* metadata = Member(object, "metadata");
  if (metadata == nullptr) {
    errors->Add(name_path, FieldErrorType::kRequired, "every GPUNodePool needs a name");
  } else if (!metadata->is_object()) {
    errors->Add(metadata_path, FieldErrorType::kInvalid,
                absl::StrCat("must be an object, got ", Show(*metadata)));
  } else if (const json* name = Member(*metadata, "name"); name == nullptr) {
    errors->Add(name_path, FieldErrorType::kRequired, "every GPUNodePool needs a name");
  } else if (DecodeString(*name, name_path, &out->name, errors)) {
    if (!IsDnsSubdomain(out->name)) {
      errors->Add(name_path, FieldErrorType::kInvalid,
                  absl::StrCat("\"", out->name,
                               "\" is not a valid name: use lower-case letters, digits, '-' and "
                               "'.', starting and ending with a letter or digit, at most 253 "
                               "characters"));
    }
    if (const json* version = Member(*metadata, "resourceVersion"); version != nullptr && version->is_string()) {
      out->resource_version = version->get<std::string>();
    }
  }

  const FieldPath spec_path = root.Child("spec");
  const json* spec = Member(object, "spec");
  if (spec == nullptr) {
    errors->Add(spec_path, FieldErrorType::kRequired,
                "a GPUNodePool needs spec.flavor, spec.gpu, spec.gpusPerNode and spec.nodes");
  } else if (!spec->is_object()) {
    errors->Add(spec_path, FieldErrorType::kInvalid,
                absl::StrCat("must be an object, got ", Show(*spec)));
  } else {
    DecodeSpec(*spec, spec_path, out, errors);
  }
}

}  // namespace

bool IsDnsSubdomain(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty()) return false;
    for (char c : label) {
      if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
  }
  return true;
}

void DecodeGpuNodePool(const json& object, const FieldPath& root, GpuNodePool* out,
                       base::FieldErrors* errors) {
  *out = GpuNodePool{};
  try {
    Decode(object, root, out, errors);
  } catch (const std::exception& e) {
    // Every accessor above is guarded; reaching this is a bug, but input must not crash us.
    errors->Add(root, FieldErrorType::kInvalid,
                absl::StrCat("could not decode GPUNodePool: ", e.what()));
  }
}

void DecodeAndValidateGpuNodePool(const json& object, const FieldPath& root, GpuNodePool* out,
                                  base::FieldErrors* errors) {
  const size_t before = errors->size();
  DecodeGpuNodePool(object, root, out, errors);
  if (errors->size() == before) ValidateGpuNodePool(*out, root.Child("spec"), errors);
}

}  // namespace gangkeeper::model
