// gangkeeper deploy tests: the structural schema (see schema.h).
#include "test/deploy/schema.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <regex>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gangkeeper::deploy_test {
namespace {

using json = nlohmann::json;

// One step of a path: a map key, optionally followed by "every element of
// the list there" ([]), or * (every value of a map).
struct Step {
  std::string key;
  bool each_element = false;
  bool each_value = false;
};

std::vector<Step> Parse(const std::string& path) {
  std::vector<Step> steps;
  if (path == ".") return steps;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    Step s;
    if (part == "*") {
      s.each_value = true;
    } else if (absl::EndsWith(part, "[]")) {
      s.key = std::string(part.substr(0, part.size() - 2));
      s.each_element = true;
    } else {
      s.key = std::string(part);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// Calls `visit(where, value)` for every place `steps` reaches in `node`:
// value is null when the last key is missing from a parent that is there.
// Parents that are missing or of the wrong type end the walk quietly (the
// parent's own field reports them).
void Walk(const json& node, const std::vector<Step>& steps, size_t i, const std::string& where,
          const std::function<void(const std::string&, const json*)>& visit) {
  if (i == steps.size()) {
    visit(where, &node);
    return;
  }
  const Step& s = steps[i];
  const std::string sep = where.empty() ? "" : ".";
  if (s.each_value) {
    if (!node.is_object()) return;
    for (const auto& [k, v] : node.items()) Walk(v, steps, i + 1, absl::StrCat(where, sep, k), visit);
    return;
  }
  if (!node.is_object()) return;
  auto it = node.find(s.key);
  const std::string here = absl::StrCat(where, sep, s.key);
  if (it == node.end()) {
    if (i + 1 == steps.size() && !s.each_element) visit(here, nullptr);
    return;
  }
  if (!s.each_element) {
    Walk(*it, steps, i + 1, here, visit);
    return;
  }
  if (!it->is_array()) return;
  for (size_t j = 0; j < it->size(); ++j) Walk((*it)[j], steps, i + 1, absl::StrCat(here, "[", j, "]"), visit);
}

bool IsDnsSubdomain(const std::string& s) {
  static const std::regex kName("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s, kName);
}

bool IsQuantity(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>() >= 0;
  if (!v.is_string()) return false;
  static const std::regex kQuantity("[0-9]+(\\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?");
  return std::regex_match(v.get<std::string>(), kQuantity);
}

// Empty when `v` has type `type`, else what it is instead.
std::string TypeProblem(const std::string& type, const json& v) {
  bool ok = false;
  if (type == "string") {
    ok = v.is_string();
  } else if (type == "name") {
    ok = v.is_string() && IsDnsSubdomain(v.get<std::string>());
  } else if (type == "int") {
    ok = v.is_number_integer();
  } else if (type == "bool") {
    ok = v.is_boolean();
  } else if (type == "map") {
    ok = v.is_object();
  } else if (type == "list") {
    ok = v.is_array();
  } else if (type == "quantity") {
    ok = IsQuantity(v);
  } else if (type == "int-or-string") {
    ok = v.is_number_integer() || (v.is_string() && !v.get<std::string>().empty());
  } else if (type == "cidr") {
    static const std::regex kCidr(
        "(([0-9]{1,3}\\.){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2]))|([0-9a-fA-F:]*:[0-9a-fA-F:.]*/([0-9]{1,2}|1[01][0-9]|12[0-8]))");
    ok = v.is_string() && std::regex_match(v.get<std::string>(), kCidr);
  } else if (type == "base64") {
    std::string decoded;
    ok = v.is_string() && absl::Base64Unescape(v.get<std::string>(), &decoded) && !decoded.empty();
  } else {
    return absl::StrCat("unknown schema type ", type);
  }
  if (ok) return "";
  return absl::StrCat("want ", type, ", got ", v.dump().substr(0, 60));
}

// The schema path of a key under `parent` (both in schema syntax).
bool IsChildOf(const std::string& field, const std::string& parent, std::string* key) {
  const std::string prefix = parent == "." ? "" : parent + ".";
  if (!absl::StartsWith(field, prefix)) return false;
  std::string rest = field.substr(prefix.size());
  if (rest.empty() || absl::StrContains(rest, '.')) return false;
  if (absl::EndsWith(rest, "[]")) rest.resize(rest.size() - 2);
  if (rest == "*") return false;
  *key = rest;
  return true;
}

absl::StatusOr<std::vector<std::string>> Strings(const YAML::Node& n, const std::string& what) {
  std::vector<std::string> out;
  if (!n) return out;
  if (!n.IsSequence()) return absl::InvalidArgumentError(absl::StrCat(what, ": expected a list"));
  for (const YAML::Node& e : n) out.push_back(e.as<std::string>());
  return out;
}

}  // namespace

absl::StatusOr<Schema> Schema::Load(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  Schema schema;
  std::vector<Field> common;
  auto read_fields = [](const YAML::Node& fields, std::vector<Field>* out) -> absl::Status {
    if (!fields) return absl::OkStatus();
    if (!fields.IsMap()) return absl::InvalidArgumentError("fields: expected a map");
    for (const auto& kv : fields) {
      Field f;
      f.path = kv.first.as<std::string>();
      f.type = kv.second.as<std::string>();
      if (absl::EndsWith(f.type, "!")) {
        f.required = true;
        f.type.pop_back();
      }
      static const std::set<std::string> kTypes = {"string", "name",     "int",    "bool", "map",
                                                   "list",   "int-or-string", "quantity", "base64", "cidr"};
      if (kTypes.count(f.type) == 0) return absl::InvalidArgumentError(absl::StrCat(f.path, ": unknown type ", f.type));
      out->push_back(std::move(f));
    }
    return absl::OkStatus();
  };
  try {
    if (absl::Status s = read_fields(root["common"]["fields"], &common); !s.ok()) return s;
    absl::StatusOr<std::vector<std::string>> common_closed = Strings(root["common"]["closed"], "common.closed");
    if (!common_closed.ok()) return common_closed.status();
    // Shared templates: fields, closed paths and enums relative to where a
    // kind puts them.
    struct Template {
      std::vector<Field> fields;
      std::vector<std::string> closed;
      std::map<std::string, std::set<std::string>> enums;
    };
    std::map<std::string, Template> templates;
    for (const auto& kv : root["templates"]) {
      const std::string name = kv.first.as<std::string>();
      Template& t = templates[name];
      if (absl::Status s = read_fields(kv.second["fields"], &t.fields); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("templates.", name, ": ", s.message()));
      }
      absl::StatusOr<std::vector<std::string>> closed = Strings(kv.second["closed"], "templates." + name + ".closed");
      if (!closed.ok()) return closed.status();
      t.closed = *closed;
      for (const auto& e : kv.second["enums"]) {
        absl::StatusOr<std::vector<std::string>> values = Strings(e.second, "templates." + name + ".enums");
        if (!values.ok()) return values.status();
        t.enums[e.first.as<std::string>()] = std::set<std::string>(values->begin(), values->end());
      }
    }
    if (!root["kinds"].IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": kinds: expected a map"));
    for (const auto& kv : root["kinds"]) {
      const std::string name = kv.first.as<std::string>();
      const YAML::Node& k = kv.second;
      Kind kind;
      kind.api_version = k["apiVersion"].as<std::string>();
      kind.namespaced = k["namespaced"].as<bool>();
      kind.fields = common;
      if (absl::Status s = read_fields(k["fields"], &kind.fields); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
      }
      absl::StatusOr<std::vector<std::string>> closed = Strings(k["closed"], name + ".closed");
      if (!closed.ok()) return closed.status();
      kind.closed = *common_closed;
      kind.closed.push_back(".");
      kind.closed.insert(kind.closed.end(), closed->begin(), closed->end());
      if (k["enums"]) {
        for (const auto& e : k["enums"]) {
          absl::StatusOr<std::vector<std::string>> values = Strings(e.second, name + ".enums");
          if (!values.ok()) return values.status();
          kind.enums[e.first.as<std::string>()] = std::set<std::string>(values->begin(), values->end());
        }
      }
      for (const auto& use : k["templates"]) {
        const std::string at = use.first.as<std::string>();
        auto t = templates.find(use.second.as<std::string>());
        if (t == templates.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ".templates: no template \"", use.second.as<std::string>(), "\""));
        }
        for (Field f : t->second.fields) {
          f.path = absl::StrCat(at, ".", f.path);
          kind.fields.push_back(std::move(f));
        }
        for (const std::string& c : t->second.closed) kind.closed.push_back(absl::StrCat(at, ".", c));
        for (const auto& [e, values] : t->second.enums) kind.enums[absl::StrCat(at, ".", e)] = values;
      }
      absl::StatusOr<std::vector<std::string>> forbidden = Strings(k["forbidden"], name + ".forbidden");
      if (!forbidden.ok()) return forbidden.status();
      kind.forbidden = *forbidden;
      schema.kinds_[name] = std::move(kind);
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  if (schema.kinds_.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no kinds"));
  return schema;
}

std::vector<std::string> Schema::Validate(const json& object) const {
  std::vector<std::string> problems;
  if (!object.is_object()) return {"not an object"};
  const std::string kind_name = object.value("kind", "");
  const std::string name = object.contains("metadata") && object["metadata"].is_object()
                               ? object["metadata"].value("name", "?")
                               : "?";
  const std::string subject = absl::StrCat(kind_name.empty() ? "?" : kind_name, "/", name);
  auto problem = [&](const std::string& where, const std::string& what) {
    problems.push_back(absl::StrCat(subject, ": ", where.empty() ? "(root)" : where, ": ", what));
  };
  auto it = kinds_.find(kind_name);
  if (it == kinds_.end()) {
    problem("kind", "no schema for kind \"" + kind_name + "\"");
    return problems;
  }
  const Kind& kind = it->second;
  if (object.value("apiVersion", "") != kind.api_version) {
    problem("apiVersion", absl::StrCat("want ", kind.api_version, ", got ", object.value("apiVersion", "")));
  }
  const bool has_namespace = object.contains("metadata") && object["metadata"].is_object() &&
                             object["metadata"].contains("namespace");
  if (kind.namespaced && !has_namespace) problem("metadata.namespace", "required for a namespaced kind");
  if (!kind.namespaced && has_namespace) problem("metadata.namespace", "set on a cluster-scoped kind");

  for (const Field& f : kind.fields) {
    Walk(object, Parse(f.path), 0, "", [&](const std::string& where, const json* v) {
      if (v == nullptr) {
        if (f.required) problem(where, "required");
        return;
      }
      if (std::string p = TypeProblem(f.type, *v); !p.empty()) problem(where, p);
    });
  }
  for (const std::string& c : kind.closed) {
    std::set<std::string> allowed;
    for (const Field& f : kind.fields) {
      std::string key;
      if (IsChildOf(f.path, c, &key)) allowed.insert(key);
    }
    Walk(object, Parse(c), 0, "", [&](const std::string& where, const json* v) {
      if (v == nullptr || !v->is_object()) return;
      for (const auto& [k, unused] : v->items()) {
        if (allowed.count(k) == 0) {
          problem(where.empty() ? k : absl::StrCat(where, ".", k),
                  absl::StrCat("unknown field (known here: ", absl::StrJoin(allowed, ", "), ")"));
        }
      }
    });
  }
  for (const auto& [path, values] : kind.enums) {
    Walk(object, Parse(path), 0, "", [&](const std::string& where, const json* v) {
      if (v == nullptr) return;
      if (!v->is_string() || values.count(v->get<std::string>()) == 0) {
        problem(where, absl::StrCat(v->dump(), " is not one of ", absl::StrJoin(values, ", ")));
      }
    });
  }
  for (const std::string& path : kind.forbidden) {
    Walk(object, Parse(path), 0, "", [&](const std::string& where, const json* v) {
      if (v != nullptr) problem(where, "not a field of this kind");
    });
  }
  return problems;
}

}  // namespace gangkeeper::deploy_test
