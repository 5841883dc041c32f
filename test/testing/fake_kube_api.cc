// gangkeeper tests: FakeKubeApi, an in-memory kube-apiserver over HTTPS.
//
// One mutex guards the store, the watch history, the list snapshots, the
// scripted failures and the call record; a condition variable is signalled
// on every event so watch streams (running on httplib's worker pool) wake up.
// nlohmann's patch functions throw: they are called only in ApplyPatch, which
// converts every exception into a 422 Status.
#include "test/testing/fake_kube_api.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gangkeeper/base/clock.h"

namespace gangkeeper::testing {
namespace {

using json = nlohmann::json;

constexpr char kMergePatch[] = "application/merge-patch+json";
constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kStrategicPatch[] = "application/strategic-merge-patch+json";
constexpr char kJobDeleteWarning[] =
    "299 - \"child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to "
    "remove them or set propagationPolicy=Orphan to suppress this warning\"";
constexpr char kTooManyRequests[] = "Too many requests, please try again later.\n";
constexpr int64_t kFirstResourceVersion = 100;

struct ResourceInfo {
  std::string group, version, resource, kind;
  bool namespaced = true;
  bool served = true;

  std::string api_version() const { return group.empty() ? version : absl::StrCat(group, "/", version); }
  std::string gvr() const { return absl::StrCat(api_version(), "/", resource); }
  // Objects are stored per group and resource, whatever the version.
  std::string store_key() const { return absl::StrCat(group, "/", resource); }
  // "jobs.batch", "pods"
  std::string group_resource() const { return group.empty() ? resource : absl::StrCat(resource, ".", group); }
  // "Job.batch", "Pod"
  std::string group_kind() const { return group.empty() ? kind : absl::StrCat(kind, ".", group); }
  // Built-in types list their items without kind/apiVersion; custom
  // resources (served as unstructured) keep them, like the real server.
  bool builtin() const { return group.empty() || group == "batch" || group == "apps"; }
};

std::vector<ResourceInfo> DefaultResources() {
  return {
      {"", "v1", "pods", "Pod"},
      {"", "v1", "namespaces", "Namespace", /*namespaced=*/false},
      {"batch", "v1", "jobs", "Job"},
      {"kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"},
      {"kubeflow.org", "v1", "tfjobs", "TFJob"},
      {"kubeflow.org", "v1", "xgboostjobs", "XGBoostJob"},
      {"kubeflow.org", "v1", "paddlejobs", "PaddleJob"},
      {"kubeflow.org", "v1", "mpijobs", "MPIJob"},
      {"kubeflow.org", "v2beta1", "mpijobs", "MPIJob"},
      {"jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"},
      {"ray.io", "v1", "rayjobs", "RayJob"},
      {"ray.io", "v1", "rayclusters", "RayCluster"},
      // Issue #25's kinds.
      {"kubeflow.org", "v1", "jaxjobs", "JAXJob"},
      {"leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"},
      {"apps", "v1", "statefulsets", "StatefulSet"},
      {"apps", "v1", "deployments", "Deployment"},
      // Issue #25's wrapper kind.
      {"workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper"},
      // Kubeflow Trainer v2 (its runtimes: TrainerRuntimeResources).
      {"trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"},
      // Events (gangkeeper writes them): events.k8s.io/v1 and the core/v1
      // fallback, one store each (the real server converts between them).
      {"events.k8s.io", "v1", "events", "Event"},
      {"", "v1", "events", "Event"},
  };
}

// ---- Kubeflow Trainer v2's runtimes (issue #25 item 5, TrainJob) ----
// What a TrainJob's pods are read from: ClusterTrainingRuntimes
// (cluster-scoped) and TrainingRuntimes (namespaced).
std::vector<ResourceInfo> TrainerRuntimeResources() {
  return {
      {"trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", /*namespaced=*/false},
      {"trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime"},
  };
}

// ---- Kueue's objects as gangkeeper writes them (issue #24 items 2-4) ----
// Kueue's group at v1beta1 and v1beta2 (one store per resource, like every
// group here), NOT served until a test calls set_served (as when Kueue's
// CRDs are not installed), and what tells whether Kueue's own controller
// runs: webhook configurations and Leases (served).
std::vector<ResourceInfo> KueueWriteResources() {
  std::vector<ResourceInfo> out;
  for (const char* v : {"v1beta1", "v1beta2"}) {
    out.push_back({"kueue.x-k8s.io", v, "clusterqueues", "ClusterQueue", /*namespaced=*/false, /*served=*/false});
    out.push_back({"kueue.x-k8s.io", v, "localqueues", "LocalQueue", /*namespaced=*/true, /*served=*/false});
    out.push_back({"kueue.x-k8s.io", v, "cohorts", "Cohort", /*namespaced=*/false, /*served=*/false});
    out.push_back({"kueue.x-k8s.io", v, "workloads", "Workload", /*namespaced=*/true, /*served=*/false});
  }
  out.push_back({"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                 "MutatingWebhookConfiguration", /*namespaced=*/false});
  out.push_back({"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                 "ValidatingWebhookConfiguration", /*namespaced=*/false});
  out.push_back({"coordination.k8s.io", "v1", "leases", "Lease"});
  return out;
}

// A custom resource with a status subresource: a create through the API
// ignores .status, as the real server does.
bool HasStatusSubresource(const ResourceInfo& r) { return r.group == "kueue.x-k8s.io"; }

// ---- Kueue's group (ServeKueue) -------------------------------------------
// The quota objects gangkeeper reads with --policy-source cluster.
std::vector<ResourceInfo> KueueResources(const std::string& version) {
  return {
      {"kueue.x-k8s.io", version, "resourceflavors", "ResourceFlavor", /*namespaced=*/false},
      {"kueue.x-k8s.io", version, "clusterqueues", "ClusterQueue", /*namespaced=*/false},
      {"kueue.x-k8s.io", version, "cohorts", "Cohort", /*namespaced=*/false},
      {"kueue.x-k8s.io", version, "workloadpriorityclasses", "WorkloadPriorityClass", /*namespaced=*/false},
      {"kueue.x-k8s.io", version, "localqueues", "LocalQueue"},
  };
}
// PUT is served for these groups only (the rest of the fake never needed it).
bool PutServed(const ResourceInfo& r) { return r.group == "kueue.x-k8s.io"; }
// ---- end of Kueue's group ----------------------------------------------------

struct ParsedPath {
  ResourceInfo res;
  std::string ns;           // "" = all namespaces (or cluster-scoped)
  std::string name;         // "" = the collection
  std::string subresource;  // "" or "status"
};

using ObjectKey = std::pair<std::string, std::string>;  // (namespace, name)

struct Event {
  int64_t rv = 0;
  std::string type;  // ADDED, MODIFIED, DELETED
  std::string store_key;
  std::string ns;
  json object;    // stored form (no kind/apiVersion)
  json previous;  // MODIFIED: the state before (for selector transitions)
};

json StatusJson(int code, const std::string& reason, const std::string& message, json details = nullptr) {
  json s = {{"kind", "Status"},  {"apiVersion", "v1"},  {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return s;
}

std::string ReasonFor(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "InternalError";
  }
}

void SendJson(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

void SendStatus(httplib::Response& res, int code, const std::string& message, json details = nullptr) {
  SendJson(res, code, StatusJson(code, ReasonFor(code), message, std::move(details)));
}

void SendTooManyRequests(httplib::Response& res, const std::string& retry_after) {
  res.status = 429;
  res.set_header("Retry-After", retry_after.empty() ? "1" : retry_after);
  res.set_content(kTooManyRequests, "text/plain; charset=utf-8");
}

struct FieldError {
  std::string field;
  std::string detail;
  std::string reason = "FieldValueInvalid";
};

void SendInvalid(httplib::Response& res, const ParsedPath& p, const FieldError& e) {
  std::string message = absl::StrCat(p.res.group_kind(), " \"", p.name, "\" is invalid: ", e.field, ": ", e.detail);
  json details = {{"name", p.name},
                  {"group", p.res.group},
                  {"kind", p.res.kind},
                  {"causes", json::array({{{"reason", e.reason}, {"message", e.detail}, {"field", e.field}}})}};
  SendStatus(res, 422, message, std::move(details));
}

void SendNotFound(httplib::Response& res, const ParsedPath& p) {
  SendStatus(res, 404, absl::StrCat(p.res.group_resource(), " \"", p.name, "\" not found"),
             {{"name", p.name}, {"group", p.res.group}, {"kind", p.res.resource}});
}

std::string ConflictMessage(const ParsedPath& p, const std::string& why) {
  return absl::StrCat("Operation cannot be fulfilled on ", p.res.group_resource(), " \"", p.name, "\": ", why);
}

std::string RandomUuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = (rng() & ~uint64_t{0xF000}) | uint64_t{0x4000};
  uint64_t b = (rng() & ~(uint64_t{0x3} << 62)) | (uint64_t{0x2} << 62);
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48,
                         b & 0xFFFFFFFFFFFFULL);
}

std::string RandomSuffix() {
  thread_local std::mt19937 rng{std::random_device{}()};
  static constexpr char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string s;
  for (int i = 0; i < 5; ++i) s += kChars[rng() % (sizeof(kChars) - 1)];
  return s;
}

std::optional<int64_t> ParseInt(absl::string_view s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// A value at a JSON pointer, or null when absent (never throws).
json At(const json& j, const std::string& pointer) {
  const json* cur = &j;
  for (absl::string_view part : absl::StrSplit(absl::string_view(pointer).substr(1), '/')) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return *cur;
}

void Erase(json& j, const std::string& parent_pointer, const std::string& key) {
  json* cur = &j;
  if (parent_pointer != "") {
    for (absl::string_view part : absl::StrSplit(absl::string_view(parent_pointer).substr(1), '/')) {
      if (!cur->is_object()) return;
      auto it = cur->find(std::string(part));
      if (it == cur->end()) return;
      cur = &*it;
    }
  }
  if (cur->is_object()) cur->erase(key);
}

std::string Meta(const json& obj, const char* field) {
  json v = At(obj, absl::StrCat("/metadata/", field));
  return v.is_string() ? v.get<std::string>() : "";
}

// ---- Selectors ----

struct LabelRequirement {
  enum class Op { kExists, kNotExists, kEquals, kNotEquals, kIn, kNotIn };
  Op op = Op::kExists;
  std::string key;
  std::set<std::string> values;
};

struct FieldRequirement {
  std::string field;  // JSON pointer
  bool equals = true;
  std::string value;
};

struct Selectors {
  std::vector<LabelRequirement> labels;
  std::vector<FieldRequirement> fields;

  bool Matches(const json& obj) const {
    json obj_labels = At(obj, "/metadata/labels");
    for (const LabelRequirement& r : labels) {
      std::optional<std::string> v;
      if (obj_labels.is_object() && obj_labels.contains(r.key) && obj_labels[r.key].is_string()) {
        v = obj_labels[r.key].get<std::string>();
      }
      bool ok = true;
      switch (r.op) {
        case LabelRequirement::Op::kExists: ok = v.has_value(); break;
        case LabelRequirement::Op::kNotExists: ok = !v.has_value(); break;
        case LabelRequirement::Op::kEquals:
        case LabelRequirement::Op::kIn: ok = v.has_value() && r.values.count(*v) > 0; break;
        case LabelRequirement::Op::kNotEquals:
        case LabelRequirement::Op::kNotIn: ok = !v.has_value() || r.values.count(*v) == 0; break;
      }
      if (!ok) return false;
    }
    for (const FieldRequirement& f : fields) {
      json v = At(obj, f.field);
      std::string s = v.is_string() ? v.get<std::string>() : "";
      if ((s == f.value) != f.equals) return false;
    }
    return true;
  }
};

bool ValidLabelKey(const std::string& k) {
  static const std::regex re(R"(^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$)");
  return k.size() <= 316 && std::regex_match(k, re);
}

bool ValidLabelValue(const std::string& v) {
  static const std::regex re(R"(^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$)");
  return v.size() <= 63 && std::regex_match(v, re);
}

absl::StatusOr<std::vector<LabelRequirement>> ParseLabelSelector(const std::string& s) {
  std::vector<LabelRequirement> out;
  if (absl::StripAsciiWhitespace(s).empty()) return out;
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  static const std::regex set_re(R"(^(\S+)\s+(in|notin)\s*\(([^()]*)\)$)");
  for (std::string part : parts) {
    part = std::string(absl::StripAsciiWhitespace(part));
    LabelRequirement r;
    std::smatch m;
    if (std::regex_match(part, m, set_re)) {
      r.key = m[1];
      r.op = m[2] == "in" ? LabelRequirement::Op::kIn : LabelRequirement::Op::kNotIn;
      for (absl::string_view v : absl::StrSplit(std::string(m[3]), ',')) {
        r.values.insert(std::string(absl::StripAsciiWhitespace(v)));
      }
    } else if (absl::StartsWith(part, "!")) {
      r.op = LabelRequirement::Op::kNotExists;
      r.key = std::string(absl::StripAsciiWhitespace(part.substr(1)));
    } else {
      size_t pos;
      size_t op_len = 0;
      if ((pos = part.find("!=")) != std::string::npos) {
        r.op = LabelRequirement::Op::kNotEquals;
        op_len = 2;
      } else if ((pos = part.find("==")) != std::string::npos) {
        r.op = LabelRequirement::Op::kEquals;
        op_len = 2;
      } else if ((pos = part.find('=')) != std::string::npos) {
        r.op = LabelRequirement::Op::kEquals;
        op_len = 1;
      }
      if (op_len == 0) {
        r.key = part;
      } else {
        r.key = std::string(absl::StripAsciiWhitespace(part.substr(0, pos)));
        r.values.insert(std::string(absl::StripAsciiWhitespace(part.substr(pos + op_len))));
      }
    }
    if (!ValidLabelKey(r.key)) {
      return absl::InvalidArgumentError(absl::StrCat("unable to parse requirement: invalid label key \"", r.key, "\""));
    }
    for (const std::string& v : r.values) {
      if (!ValidLabelValue(v)) {
        return absl::InvalidArgumentError(absl::StrCat("unable to parse requirement: invalid label value: \"", v, "\""));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<FieldRequirement>> ParseFieldSelector(const std::string& s) {
  static const std::map<std::string, std::string> kFields = {
      {"metadata.name", "/metadata/name"}, {"metadata.namespace", "/metadata/namespace"}, {"status.phase", "/status/phase"}};
  std::vector<FieldRequirement> out;
  if (absl::StripAsciiWhitespace(s).empty()) return out;
  for (absl::string_view raw : absl::StrSplit(s, ',')) {
    std::string part(absl::StripAsciiWhitespace(raw));
    FieldRequirement f;
    size_t pos;
    size_t op_len;
    if ((pos = part.find("!=")) != std::string::npos) {
      f.equals = false;
      op_len = 2;
    } else if ((pos = part.find("==")) != std::string::npos) {
      op_len = 2;
    } else if ((pos = part.find('=')) != std::string::npos) {
      op_len = 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("invalid selector: '", s, "'; can't understand '", part, "'"));
    }
    std::string field(absl::StripAsciiWhitespace(part.substr(0, pos)));
    auto it = kFields.find(field);
    if (it == kFields.end()) return absl::InvalidArgumentError(absl::StrCat("field label not supported: ", field));
    f.field = it->second;
    f.value = std::string(absl::StripAsciiWhitespace(part.substr(pos + op_len)));
    out.push_back(std::move(f));
  }
  return out;
}

absl::StatusOr<Selectors> ParseSelectors(const httplib::Request& req) {
  Selectors sel;
  auto labels = ParseLabelSelector(req.get_param_value("labelSelector"));
  if (!labels.ok()) return labels.status();
  auto fields = ParseFieldSelector(req.get_param_value("fieldSelector"));
  if (!fields.ok()) return fields.status();
  sel.labels = *std::move(labels);
  sel.fields = *std::move(fields);
  return sel;
}

// ---- Validation of updates ----

std::optional<FieldError> CheckImmutableMetadata(const json& old_obj, const json& new_obj) {
  for (const char* f : {"name", "namespace", "uid", "creationTimestamp"}) {
    std::string pointer = absl::StrCat("/metadata/", f);
    if (At(old_obj, pointer) != At(new_obj, pointer)) {
      return FieldError{absl::StrCat("metadata.", f),
                        absl::StrCat("Invalid value: ", At(new_obj, pointer).dump(), ": field is immutable")};
    }
  }
  return std::nullopt;
}

// batch/v1 Job: the pod template is immutable except a few scheduling fields
// while the Job is suspended and has never started. As in the API server,
// the OLD object decides: unsuspending and injecting a node selector in one
// update is allowed (Kueue does it), suspending a started Job and changing
// its template in one update is not.
std::optional<FieldError> ValidateJobUpdate(const json& old_obj, const json& new_obj) {
  json old_t = At(old_obj, "/spec/template");
  json new_t = At(new_obj, "/spec/template");
  if (old_t == new_t) return std::nullopt;
  bool suspended = At(old_obj, "/spec/suspend") == json(true);
  bool never_started = At(old_obj, "/status/startTime").is_null();
  for (json* t : {&old_t, &new_t}) {
    for (const char* f : {"nodeSelector", "tolerations", "schedulingGates"}) Erase(*t, "/spec", f);
    for (const char* f : {"labels", "annotations"}) Erase(*t, "/metadata", f);
  }
  if (suspended && never_started && old_t == new_t) return std::nullopt;
  return FieldError{"spec.template", absl::StrCat("Invalid value: ", At(new_obj, "/spec/template").dump(),
                                                  ": field is immutable")};
}

// v1 Pod: spec is immutable except gate removal, nodeSelector additions while
// gated, toleration additions and container images.
std::optional<FieldError> ValidatePodUpdate(const json& old_obj, const json& new_obj) {
  json old_spec = At(old_obj, "/spec");
  json new_spec = At(new_obj, "/spec");
  auto names = [](const json& gates) {
    std::set<std::string> out;
    if (gates.is_array()) {
      for (const json& g : gates) out.insert(At(g, "/name").is_string() ? At(g, "/name").get<std::string>() : "");
    }
    return out;
  };
  std::set<std::string> old_gates = names(At(old_spec, "/schedulingGates"));
  for (const std::string& g : names(At(new_spec, "/schedulingGates"))) {
    if (old_gates.count(g) == 0) {
      return FieldError{"spec.schedulingGates",
                        absl::StrCat("Forbidden: only deletion is allowed, but found new scheduling gate '", g, "'"),
                        "FieldValueForbidden"};
    }
  }
  json old_ns = At(old_spec, "/nodeSelector");
  json new_ns = At(new_spec, "/nodeSelector");
  if (old_ns != new_ns) {
    if (old_gates.empty()) {
      return FieldError{"spec.nodeSelector",
                        absl::StrCat("Invalid value: ", new_ns.dump(),
                                     ": field is immutable once the pod has no scheduling gates")};
    }
    if (old_ns.is_object()) {
      for (auto it = old_ns.begin(); it != old_ns.end(); ++it) {
        if (!new_ns.is_object() || !new_ns.contains(it.key()) || new_ns[it.key()] != it.value()) {
          return FieldError{"spec.nodeSelector",
                            absl::StrCat("Invalid value: ", new_ns.dump(),
                                         ": only additions to spec.nodeSelector are allowed (no mutations or deletions)")};
        }
      }
    }
  }
  json old_tol = At(old_spec, "/tolerations");
  json new_tol = At(new_spec, "/tolerations");
  if (old_tol != new_tol && old_tol.is_array()) {
    for (const json& t : old_tol) {
      if (!new_tol.is_array() || std::find(new_tol.begin(), new_tol.end(), t) == new_tol.end()) {
        return FieldError{"spec.tolerations", "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                          "FieldValueForbidden"};
      }
    }
  }
  for (json* s : {&old_spec, &new_spec}) {
    for (const char* f : {"schedulingGates", "nodeSelector", "tolerations", "activeDeadlineSeconds"}) Erase(*s, "", f);
    for (const char* list : {"containers", "initContainers"}) {
      if (s->is_object() && s->contains(list) && (*s)[list].is_array()) {
        for (json& c : (*s)[list]) {
          if (c.is_object()) c.erase("image");
        }
      }
    }
  }
  if (old_spec != new_spec) {
    return FieldError{"spec",
                      "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                      "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                      "to existing tolerations), `spec.schedulingGates` (only deletions), `spec.nodeSelector` (only "
                      "additions while gated)",
                      "FieldValueForbidden"};
  }
  return std::nullopt;
}

// Applies `patch_body` (already parsed) of `content_type` to `current`.
// Returns 0 and sets `out`, or an HTTP code (415 or 422) with a message.
int ApplyPatch(const std::string& content_type, const ResourceInfo& res, const json& current, const json& patch_body,
               json& out, std::string& message) {
  try {
    if (content_type == kMergePatch || content_type == kStrategicPatch) {
      if (content_type == kStrategicPatch && !res.builtin()) {
        message = "the body of the request was in an unknown format - accepted media types include: "
                  "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
        return 415;
      }
      if (!patch_body.is_object()) {
        message = "the server rejected our request due to an error in our request";
        return 422;
      }
      out = current;
      out.merge_patch(patch_body);
      return 0;
    }
    if (content_type == kJsonPatch) {
      if (!patch_body.is_array()) {
        message = "the server rejected our request due to an error in our request";
        return 422;
      }
      out = current.patch(patch_body);
      return 0;
    }
  } catch (const json::exception&) {
    // A failed `test`, a missing path, a malformed operation: the real server
    // does not say which operation failed.
    message = "the server rejected our request due to an error in our request";
    return 422;
  }
  message = absl::StrCat("the body of the request was in an unknown format - accepted media types include: ",
                         res.builtin() ? "application/json-patch+json, application/merge-patch+json, "
                                         "application/apply-patch+yaml, application/strategic-merge-patch+json"
                                       : "application/json-patch+json, application/merge-patch+json, "
                                         "application/apply-patch+yaml");
  return 415;
}

std::string MediaType(const std::string& header) {
  std::string t(absl::StripAsciiWhitespace(header.substr(0, header.find(';'))));
  absl::AsciiStrToLower(&t);
  return t;
}

json Decorate(json obj, const ResourceInfo& res) {
  obj["apiVersion"] = res.api_version();
  obj["kind"] = res.kind;
  return obj;
}

json Strip(json obj) {
  obj.erase("apiVersion");
  obj.erase("kind");
  return obj;
}

std::string Line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

bool IsWatch(const httplib::Request& req) {
  std::string w = req.get_param_value("watch");
  return w == "true" || w == "1";
}

}  // namespace

// ======================================================================
// FakeKubeApi::Impl
// ======================================================================

class FakeKubeApi::Impl {
 public:
  explicit Impl(FakeKubeOptions options) : options_(std::move(options)), token_(options_.token) {
    for (ResourceInfo& r : DefaultResources()) resources_[r.gvr()] = r;
    for (ResourceInfo& r : KueueWriteResources()) resources_.try_emplace(r.gvr(), r);
    for (ResourceInfo& r : TrainerRuntimeResources()) resources_.try_emplace(r.gvr(), r);
  }

  ~Impl() { Stop(); }

  absl::Status Start() {
    server_ = std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(), options_.key_file.c_str());
    if (!server_->is_valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load certificate ", options_.cert_file, " and key ", options_.key_file));
    }
    server_->new_task_queue = [n = options_.threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
    server_->set_keep_alive_timeout(1);  // bounds how long Stop waits for idle connections
    // As a kube-apiserver (Go's net/http): no Nagle delay on answers, and
    // connections kept for many requests (cpp-httplib closes after 5).
    server_->set_tcp_nodelay(true);
    server_->set_keep_alive_max_count(100000);
    server_->set_read_timeout(5);
    server_->set_write_timeout(5);
    server_->set_payload_max_length(16 << 20);
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
    server_->Get(".*", handler);
    server_->Patch(".*", handler);
    server_->Delete(".*", handler);
    server_->Post(".*", handler);
    server_->Put(".*", handler);
    server_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      SendStatus(res, 500, "Internal error occurred: the fake API server threw (a bug in the fake)");
    });
    // Debian's cpp-httplib is a compiled library that listens with a
    // backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed at its build): a burst
    // of new connections (the actuator's pool refilling, the benchmarks'
    // clients) overflowed the accept queue, and each dropped SYN came back
    // only after TCP's 1 s retransmission timeout, a wait the real API
    // server (backlog in the thousands) never imposes. So the listening
    // socket, the only one these options see, listens again with a backlog
    // of 1024: Linux takes a second listen() as a new backlog.
    int listening = -1;
    server_->set_socket_options([&listening](socket_t sock) {
      httplib::default_socket_options(sock);
      if (listening < 0) listening = sock;
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) return absl::UnavailableError("cannot bind 127.0.0.1");
    if (listening < 0 || ::listen(listening, 1024) != 0) {
      return absl::InternalError(absl::StrCat("cannot widen the listen backlog: ", std::strerror(errno)));
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() is a no-op before the listen loop runs: wait for it (bounded).
    for (int i = 0; i < 500 && !server_->is_running(); ++i) absl::SleepFor(absl::Milliseconds(10));
    if (!server_->is_running()) return absl::UnavailableError("the server thread did not start listening");
    return absl::OkStatus();
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    {
      // Taken and let go, so that waiting watches test their condition
      // again (WatchStep) and see stopping_.
      absl::MutexLock lock(&mu_);
    }
    if (server_ != nullptr) server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }

  // ---- Store API ----

  absl::StatusOr<json> Create(const std::string& collection_path, json object) {
    absl::MutexLock lock(&mu_);
    return CreateLocked(collection_path, std::move(object));
  }

  absl::StatusOr<json> CreateLocked(const std::string& collection_path, json object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto p = ParsePathLocked(collection_path);
    if (!p.ok()) return p.status();
    if (!p->name.empty()) return absl::InvalidArgumentError(absl::StrCat(collection_path, " is not a collection"));
    if (p->res.namespaced && p->ns.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(collection_path, " names no namespace"));
    }
    if (!object.is_object()) return absl::InvalidArgumentError("object is not a JSON object");
    json& meta = object["metadata"];
    if (!meta.is_object()) meta = json::object();
    if (!meta.contains("name") && meta.contains("generateName") && meta["generateName"].is_string()) {
      meta["name"] = meta["generateName"].get<std::string>() + RandomSuffix();
    }
    if (!meta.contains("name") || !meta["name"].is_string() || meta["name"].get<std::string>().empty()) {
      return absl::InvalidArgumentError("metadata.name is required");
    }
    if (p->res.namespaced) {
      if (meta.contains("namespace") && meta["namespace"] != p->ns) {
        return absl::InvalidArgumentError("metadata.namespace does not match the path");
      }
      meta["namespace"] = p->ns;
    } else {
      meta.erase("namespace");
    }
    p->name = meta["name"].get<std::string>();
    auto& objs = objects_[p->res.store_key()];
    ObjectKey key{p->ns, p->name};
    if (objs.count(key) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(p->res.group_resource(), " \"", p->name, "\" already exists"));
    }
    if (!meta.contains("uid") || !meta["uid"].is_string()) meta["uid"] = RandomUuid();
    meta["creationTimestamp"] =
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", base::RealClock().Now(), absl::UTCTimeZone());
    meta["generation"] = 1;
    meta["resourceVersion"] = std::to_string(++rv_);
    if (p->res.group.empty() && p->res.resource == "pods") AddDefaultTolerations(object);
    object = Strip(std::move(object));
    objs[key] = object;
    EmitLocked("ADDED", *p, object, nullptr);
    return Decorate(object, p->res);
  }

  absl::StatusOr<json> Get(const std::string& object_path) const {
    absl::MutexLock lock(&mu_);
    auto p = ParsePathLocked(object_path);
    if (!p.ok()) return p.status();
    const json* obj = FindLocked(*p);
    if (obj == nullptr) return absl::NotFoundError(absl::StrCat(object_path, " not found"));
    return Decorate(*obj, p->res);
  }

  absl::StatusOr<json> Replace(const std::string& object_path, json object) {
    absl::MutexLock lock(&mu_);
    auto p = ParsePathLocked(object_path);
    if (!p.ok()) return p.status();
    json* old = FindLocked(*p);
    if (old == nullptr) return absl::NotFoundError(absl::StrCat(object_path, " not found"));
    if (!object.is_object()) return absl::InvalidArgumentError("object is not a JSON object");
    object = Strip(std::move(object));
    if (!object["metadata"].is_object()) object["metadata"] = json::object();
    for (const char* f : {"name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation"}) {
      json v = At(*old, absl::StrCat("/metadata/", f));
      if (v.is_null()) {
        object["metadata"].erase(f);
      } else {
        object["metadata"][f] = v;
      }
    }
    CommitUpdateLocked(*p, *old, std::move(object));
    return Decorate(*old, p->res);
  }

  absl::Status Delete(const std::string& object_path) {
    absl::MutexLock lock(&mu_);
    auto p = ParsePathLocked(object_path);
    if (!p.ok()) return p.status();
    if (FindLocked(*p) == nullptr) return absl::NotFoundError(absl::StrCat(object_path, " not found"));
    DeleteLocked(*p);
    return absl::OkStatus();
  }

  std::vector<json> List(const std::string& collection_path) const {
    absl::MutexLock lock(&mu_);
    std::vector<json> out;
    auto p = ParsePathLocked(collection_path);
    if (!p.ok() || !p->name.empty()) return out;
    for (const json& o : MatchingLocked(*p, Selectors{})) out.push_back(Decorate(o, p->res));
    return out;
  }

  void set_token(const std::string& token) {
    absl::MutexLock lock(&mu_);
    token_ = token;
  }

  // --- Several clients told apart (AddToken, WritesByPath) ---
  void AddToken(const std::string& token) {
    absl::MutexLock lock(&mu_);
    extra_tokens_.insert(token);
  }
  bool ExtraTokenLocked(const std::string& authorization) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::StartsWith(authorization, "Bearer ") && extra_tokens_.count(authorization.substr(7)) > 0;
  }
  std::set<std::string> extra_tokens_ ABSL_GUARDED_BY(mu_);
  void SetTokenUser(const std::string& token, FakeUser user) {
    absl::MutexLock lock(&mu_);
    review_users_[token] = std::move(user);
  }
  void SetAccessRule(FakeAccessRule rule) {
    absl::MutexLock lock(&mu_);
    access_rule_ = std::move(rule);
  }
  void Fail(ScriptedFailure f) {
    absl::MutexLock lock(&mu_);
    failures_.push_back(std::move(f));
  }
  void ClearFailures() {
    absl::MutexLock lock(&mu_);
    failures_.clear();
  }
  void CloseWatches() {
    absl::MutexLock lock(&mu_);
    ++close_generation_;
  }
  void PauseWatches(bool paused) {
    absl::MutexLock lock(&mu_);
    watches_paused_ = paused;
  }
  void CompactHistory() {
    absl::MutexLock lock(&mu_);
    history_.clear();
    history_start_rv_ = rv_;
    for (auto& [token, page] : pages_) {
      if (page.offset == 0) {
        expired_[token] = page.resume_after;
      } else {
        const json& last = page.snapshot->items[page.offset - 1];
        expired_[token] = ObjectKey{Meta(last, "namespace"), Meta(last, "name")};
      }
    }
    pages_.clear();
  }
  void ServeKueue(const std::vector<std::string>& versions) {
    absl::MutexLock lock(&mu_);
    for (const std::string& v : versions) {
      for (ResourceInfo& r : KueueResources(v)) resources_[r.gvr()] = r;
    }
  }
  void set_served(const std::string& gvr, bool served) {
    absl::MutexLock lock(&mu_);
    auto it = resources_.find(gvr);
    if (it != resources_.end()) it->second.served = served;
  }
  std::vector<RecordedCall> Calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void ClearCalls() {
    absl::MutexLock lock(&mu_);
    calls_.clear();
  }
  int64_t resource_version() const {
    absl::MutexLock lock(&mu_);
    return rv_;
  }
  int open_watches() const { return open_watches_.load(); }

 private:
  struct ListSnapshot {
    std::vector<json> items;  // stored form, in (namespace, name) order
    int64_t rv = 0;
  };
  struct Page {
    std::shared_ptr<const ListSnapshot> snapshot;
    size_t offset = 0;  // first item of the page this token asks for
    // Where the snapshot itself resumed (a token handed out with a 410).
    ObjectKey resume_after;
  };
  struct WatchState {
    ParsedPath path;
    Selectors selectors;
    std::string pending;  // initial ADDED events not yet written
    int64_t last_rv = 0;
    bool expired = false;
    bool bookmarks = false;
    int64_t close_generation = 0;
    absl::Duration timeout;
    base::Stopwatch since_start;
    base::Stopwatch since_bookmark;
  };

  static void AddDefaultTolerations(json& pod) {
    json& spec = pod["spec"];
    if (!spec.is_object()) spec = json::object();
    json& tols = spec["tolerations"];
    if (!tols.is_array()) tols = json::array();
    for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
      bool present = std::any_of(tols.begin(), tols.end(), [&](const json& t) { return At(t, "/key") == json(key); });
      if (!present) {
        tols.push_back({{"key", key}, {"operator", "Exists"}, {"effect", "NoExecute"}, {"tolerationSeconds", 300}});
      }
    }
  }

  // ---- Request handling ----

  void Handle(const httplib::Request& req, httplib::Response& res) {
    // cpp-httplib would gzip/brotli-compress JSON bodies for clients that
    // accept it, and its compressors buffer: watch events would never reach
    // the client. kube-apiserver does not compress watches (nor small
    // bodies), so the fake ignores Accept-Encoding. The Request object is
    // non-const inside httplib; only the view handed to handlers is const.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    const absl::Time received = absl::Now();
    RecordedCall call;
    call.method = req.method;
    call.path = req.path;
    size_t q = req.target.find('?');
    call.query = q == std::string::npos ? "" : req.target.substr(q + 1);
    call.content_type = req.get_header_value("Content-Type");
    call.body = req.body;
    call.authorization = req.get_header_value("Authorization");
    HandleRequest(req, res);
    call.status = res.status;
    if (options_.on_call) {
      {
        absl::MutexLock lock(&mu_);
        calls_.push_back(call);
      }
      options_.on_call(call, received);
      return;
    }
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }

  void HandleRequest(const httplib::Request& req, httplib::Response& res) {
    bool watch = IsWatch(req);
    {
      absl::MutexLock lock(&mu_);
      if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_ &&
          !ExtraTokenLocked(req.get_header_value("Authorization"))) {
        SendStatus(res, 401, "Unauthorized");
        return;
      }
    }
    if (ApplyScriptedFailure(req, res, watch)) return;
    if (req.method == "POST" && (req.path == "/apis/authentication.k8s.io/v1/tokenreviews" ||
                                 req.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews")) {
      HandleReview(req, res);
      return;
    }
    absl::MutexLock lock(&mu_);
    if (req.method == "GET" && HandleGroupDiscoveryLocked(req, res)) return;
    auto p = ParsePathLocked(req.path);
    if (!p.ok()) {
      SendStatus(res, 404, "the server could not find the requested resource");
      return;
    }
    if (req.method == "GET" || req.method == "HEAD") {
      if (!p->name.empty()) {
        const json* obj = FindLocked(*p);
        if (obj == nullptr) {
          SendNotFound(res, *p);
        } else {
          SendJson(res, 200, Decorate(*obj, p->res));
        }
      } else if (watch) {
        HandleWatchLocked(req, res, *p);
      } else {
        HandleListLocked(req, res, *p);
      }
    } else if (req.method == "PATCH" && !p->name.empty()) {
      HandlePatchLocked(req, res, *p);
    } else if (req.method == "DELETE" && !p->name.empty() && p->subresource.empty()) {
      HandleDeleteLocked(req, res, *p);
    } else if (req.method == "POST" && p->name.empty() && p->subresource.empty() &&
               (!p->ns.empty() || (!p->res.namespaced && PutServed(p->res)))) {
      HandleCreateLocked(req, res, *p);
    } else if (req.method == "PUT" && !p->name.empty() && p->subresource.empty() && PutServed(p->res)) {
      HandlePutLocked(req, res, *p);
    } else {
      SendStatus(res, 405, absl::StrCat("the fake API server does not implement ", req.method, " on ", req.path));
    }
  }

  // TokenReview / SubjectAccessReview: the review back with its status
  // (201, as the API server answers a create of a review).
  void HandleReview(const httplib::Request& req, httplib::Response& res) {
    json review = json::parse(req.body, nullptr, false);
    if (review.is_discarded() || !review.is_object() || !review.contains("spec") || !review["spec"].is_object()) {
      SendStatus(res, 400, "the review is not JSON with a spec");
      return;
    }
    const json& spec = review["spec"];
    json status = json::object();
    if (absl::StrContains(req.path, "tokenreviews")) {
      const std::string token = spec.contains("token") && spec["token"].is_string() ? spec["token"].get<std::string>() : "";
      absl::MutexLock lock(&mu_);
      auto it = review_users_.find(token);
      if (it == review_users_.end()) {
        status = {{"authenticated", false}, {"error", "[invalid bearer token, token lookup failed]"}};
      } else {
        json user = {{"username", it->second.username}, {"uid", it->second.uid}, {"groups", it->second.groups}};
        if (!it->second.extra.empty()) user["extra"] = it->second.extra;
        status = {{"authenticated", true}, {"user", user}};
      }
    } else {
      FakeAccessRule rule;
      {
        absl::MutexLock lock(&mu_);
        rule = access_rule_;
      }
      const bool allowed = rule ? rule(spec) : false;
      status = {{"allowed", allowed}, {"reason", allowed ? "allowed by the fake's rule" : ""}};
    }
    review["status"] = std::move(status);
    SendJson(res, 201, review);
  }

  // Returns true when a scripted failure answered the request.
  bool ApplyScriptedFailure(const httplib::Request& req, httplib::Response& res, bool watch) {
    std::optional<ScriptedFailure> hit;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = failures_.begin(); it != failures_.end(); ++it) {
        if (!it->method.empty() && it->method != req.method) continue;
        if (!it->path_contains.empty() && !absl::StrContains(req.path, it->path_contains)) continue;
        if (it->watch_only && !watch) continue;
        if (it->non_watch_only && watch) continue;
        hit = *it;
        if (it->times > 0 && --it->times == 0) failures_.erase(it);
        break;
      }
    }
    if (!hit.has_value()) return false;
    SleepInterruptibly(hit->delay);
    if (hit->status == 0) return false;
    if (hit->status == 429) {
      SendTooManyRequests(res, hit->retry_after);
      return true;
    }
    if (!hit->retry_after.empty()) res.set_header("Retry-After", hit->retry_after);
    std::string message = hit->status == 409
                              ? "Operation cannot be fulfilled: the object has been modified; please apply your "
                                "changes to the latest version and try again"
                              : absl::StrCat("scripted failure ", hit->status, " for ", req.method, " ", req.path);
    SendStatus(res, hit->status, message);
    return true;
  }

  void SleepInterruptibly(absl::Duration d) const {
    base::Stopwatch watch;
    while (!stopping_.load() && watch.Elapsed() < d) {
      absl::SleepFor(std::min(absl::Milliseconds(50), d - watch.Elapsed()));
    }
  }

  void HandleListLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto sel = ParseSelectors(req);
    if (!sel.ok()) {
      SendStatus(res, 400, std::string(sel.status().message()));
      return;
    }
    int64_t limit = 0;
    if (req.has_param("limit")) {
      auto l = ParseInt(req.get_param_value("limit"));
      if (!l.has_value() || *l < 0) {
        SendStatus(res, 400, "limit: Invalid value: must be a non-negative integer");
        return;
      }
      limit = *l;
    }
    Page page;
    std::string cont = req.get_param_value("continue");
    if (!cont.empty()) {
      auto live = pages_.find(cont);
      auto dead = expired_.find(cont);
      if (live != pages_.end()) {
        page = live->second;
      } else if (dead != expired_.end()) {
        // Like the real server: 410 with a token that continues, without
        // consistency, from the current state after the last item returned.
        auto fresh = std::make_shared<ListSnapshot>();
        fresh->rv = rv_;
        for (json& o : MatchingLocked(p, *sel)) {
          if (ObjectKey{Meta(o, "namespace"), Meta(o, "name")} > dead->second) fresh->items.push_back(std::move(o));
        }
        json status = StatusJson(410, "Expired",
                                 "The provided continue parameter is too old to display a consistent list result. "
                                 "You can start a new list without the continue parameter, or use the continue value "
                                 "from this response.");
        status["metadata"]["continue"] = NewTokenLocked(Page{fresh, 0, dead->second});
        SendJson(res, 410, status);
        return;
      } else {
        SendStatus(res, 400, "continue key is not valid: unknown token");
        return;
      }
    } else {
      auto snap = std::make_shared<ListSnapshot>();
      snap->rv = rv_;
      snap->items = MatchingLocked(p, *sel);
      page.snapshot = snap;
    }
    const std::vector<json>& items = page.snapshot->items;
    size_t end = items.size();
    if (limit > 0) end = std::min(items.size(), page.offset + static_cast<size_t>(limit));
    json body = {{"kind", p.res.kind + "List"},
                 {"apiVersion", p.res.api_version()},
                 {"metadata", {{"resourceVersion", std::to_string(page.snapshot->rv)}}},
                 {"items", json::array()}};
    for (size_t i = page.offset; i < end; ++i) {
      body["items"].push_back(p.res.builtin() ? items[i] : Decorate(items[i], p.res));
    }
    if (end < items.size()) {
      body["metadata"]["continue"] = NewTokenLocked(Page{page.snapshot, end, {}});
      body["metadata"]["remainingItemCount"] = items.size() - end;
    }
    SendJson(res, 200, body);
  }

  std::string NewTokenLocked(Page page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::string token = absl::StrCat("fake-continue-", next_token_++, "-", RandomSuffix());
    pages_[token] = std::move(page);
    return token;
  }

  void HandleWatchLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto sel = ParseSelectors(req);
    if (!sel.ok()) {
      SendStatus(res, 400, std::string(sel.status().message()));
      return;
    }
    auto w = std::make_shared<WatchState>();
    w->path = p;
    w->selectors = *std::move(sel);
    w->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    w->close_generation = close_generation_;
    w->timeout = options_.default_watch_timeout;
    if (req.has_param("timeoutSeconds")) {
      auto t = ParseInt(req.get_param_value("timeoutSeconds"));
      if (!t.has_value() || *t < 0) {
        SendStatus(res, 400, "timeoutSeconds: Invalid value: must be a non-negative integer");
        return;
      }
      if (*t > 0) w->timeout = absl::Seconds(*t);
    }
    std::string rv = req.get_param_value("resourceVersion");
    if (rv.empty() || rv == "0") {
      for (const json& o : MatchingLocked(p, w->selectors)) w->pending += Line("ADDED", Decorate(o, p.res));
      w->last_rv = rv_;
    } else {
      auto r = ParseInt(rv);
      if (!r.has_value() || *r < 0) {
        SendStatus(res, 400, absl::StrCat("resourceVersion: Invalid value: \"", rv, "\": must be an integer"));
        return;
      }
      w->last_rv = *r;
      w->expired = *r < history_start_rv_;
    }
    res.status = 200;
    ++open_watches_;
    res.set_chunked_content_provider(
        "application/json",
        [this, w](size_t, httplib::DataSink& sink) {
          std::string out;
          bool end = WatchStep(*w, out);
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (end) sink.done();
          return true;
        },
        [this](bool) { --open_watches_; });
  }

  // One turn of a watch stream: waits briefly for news, then appends the
  // lines to send to `out`. Returns true when the stream must end.
  bool WatchStep(WatchState& w, std::string& out) {
    absl::MutexLock lock(&mu_);
    if (!w.pending.empty()) {
      out.swap(w.pending);
      return false;
    }
    const std::string store_key = w.path.res.store_key();
    // Woken only by news for this watch's resource (or its end): with a
    // CondVar every write woke every open watch, and the fake's one mutex
    // went to threads that found nothing to send (in the e2e bench, a
    // fifth of its CPU while gangkeeper released a burst of Jobs).
    const int64_t* latest = &latest_rv_by_key_[store_key];
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_.load() || close_generation_ != w.close_generation ||
             (!watches_paused_ && (w.expired || w.last_rv < history_start_rv_ || *latest > w.last_rv));
    };
    if (!ready()) mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
    if (stopping_.load() || close_generation_ != w.close_generation) return true;
    if (watches_paused_) return w.since_start.Elapsed() >= w.timeout;
    if (w.expired || w.last_rv < history_start_rv_) {
      json status = StatusJson(
          410, "Expired", absl::StrCat("too old resource version: ", w.last_rv, " (", history_start_rv_ + 1, ")"));
      status.erase("metadata");
      out += Line("ERROR", status);
      return true;
    }
    auto it = std::upper_bound(history_.begin(), history_.end(), w.last_rv,
                               [](int64_t rv, const Event& e) { return rv < e.rv; });
    for (; it != history_.end(); ++it) {
      const Event& e = *it;
      if (e.store_key != store_key || (!w.path.ns.empty() && e.ns != w.path.ns)) continue;
      std::string type = e.type;
      if (e.type == "MODIFIED") {
        bool now = w.selectors.Matches(e.object);
        bool before = w.selectors.Matches(e.previous);
        if (!now && !before) continue;
        if (now && !before) type = "ADDED";
        if (!now && before) type = "DELETED";
      } else if (!w.selectors.Matches(e.object)) {
        continue;
      }
      out += Line(type, Decorate(e.object, w.path.res));
    }
    w.last_rv = std::max(w.last_rv, rv_);
    if (w.bookmarks && w.since_bookmark.Elapsed() >= options_.bookmark_interval) {
      out += Line("BOOKMARK", {{"kind", w.path.res.kind},
                               {"apiVersion", w.path.res.api_version()},
                               {"metadata", {{"resourceVersion", std::to_string(w.last_rv)}}}});
      w.since_bookmark.Reset();
    }
    return w.since_start.Elapsed() >= w.timeout;
  }

  // POST to a namespaced collection: a create, answered 201 with the object
  // (409 AlreadyExists, 400 for a body that is not a JSON object).
  void HandleCreateLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      SendStatus(res, 400, "the body of the request could not be decoded as a JSON object");
      return;
    }
    if (HasStatusSubresource(p.res)) body.erase("status");
    absl::StatusOr<json> created = CreateLocked(req.path, std::move(body));
    if (created.ok()) {
      SendJson(res, 201, *created);
    } else if (absl::IsAlreadyExists(created.status())) {
      SendStatus(res, 409, std::string(created.status().message()));
    } else {
      SendStatus(res, 422, std::string(created.status().message()));
    }
    (void)p;
  }

  // ---- Kueue's group (ServeKueue): discovery and PUT ----
  // GET /apis/GROUP: an APIGroup naming the versions with a served resource.
  bool HandleGroupDiscoveryLocked(const httplib::Request& req, httplib::Response& res)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> segs = absl::StrSplit(req.path, '/', absl::SkipEmpty());
    if (segs.size() != 2 || segs[0] != "apis") return false;
    std::set<std::string> versions;
    for (const auto& [gvr, r] : resources_) {
      if (r.group == segs[1] && r.served) versions.insert(r.version);
    }
    if (versions.empty()) return false;  // 404 below, as for a group without CRDs
    json list = json::array();
    for (const std::string& v : versions) list.push_back({{"groupVersion", segs[1] + "/" + v}, {"version", v}});
    // The newest version first is preferred (v1beta2 over v1beta1).
    json preferred = list.back();
    SendJson(res, 200,
             {{"kind", "APIGroup"}, {"apiVersion", "v1"}, {"name", segs[1]}, {"versions", list},
              {"preferredVersion", preferred}});
    return true;
  }

  // PUT: replace the whole object but its status; a resourceVersion in the
  // body must be the current one (409).
  void HandlePutLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      SendStatus(res, 400, "the body of the request could not be decoded as a JSON object");
      return;
    }
    json* old = FindLocked(p);
    if (old == nullptr) {
      SendNotFound(res, p);
      return;
    }
    const std::string sent = At(body, "/metadata/resourceVersion").is_string()
                                 ? At(body, "/metadata/resourceVersion").get<std::string>()
                                 : "";
    if (sent.empty()) {
      SendStatus(res, 422, "metadata.resourceVersion: Invalid value: 0: must be specified for an update");
      return;
    }
    if (sent != Meta(*old, "resourceVersion")) {
      SendStatus(res, 409,
                 absl::StrCat("Operation cannot be fulfilled on ", p.res.group_resource(), " \"", p.name,
                              "\": the object has been modified; please apply your changes to the latest version "
                              "and try again"));
      return;
    }
    json updated = Strip(std::move(body));
    if (!updated["metadata"].is_object()) updated["metadata"] = json::object();
    for (const char* f : {"name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation"}) {
      json v = At(*old, absl::StrCat("/metadata/", f));
      if (v.is_null()) {
        updated["metadata"].erase(f);
      } else {
        updated["metadata"][f] = v;
      }
    }
    if (old->contains("status")) {
      updated["status"] = (*old)["status"];
    } else {
      updated.erase("status");
    }
    CommitUpdateLocked(p, *old, std::move(updated));
    SendJson(res, 200, Decorate(*old, p.res));
  }
  // ---- end of Kueue's group ----

  void HandlePatchLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    json* old = FindLocked(p);
    if (old == nullptr) {
      SendNotFound(res, p);
      return;
    }
    json patch_body = json::parse(req.body, nullptr, false);
    if (patch_body.is_discarded()) {
      SendStatus(res, 400, "the body of the request could not be decoded as JSON");
      return;
    }
    json current = Decorate(*old, p.res);
    json patched;
    std::string message;
    int code = ApplyPatch(MediaType(req.get_header_value("Content-Type")), p.res, current, patch_body, patched, message);
    if (code != 0) {
      SendStatus(res, code, message);
      return;
    }
    if (!patched.is_object() || !patched["metadata"].is_object()) {
      SendInvalid(res, p, {"metadata", "Required value: the patched object has no metadata"});
      return;
    }
    if (auto e = CheckImmutableMetadata(*old, patched)) {
      SendInvalid(res, p, *e);
      return;
    }
    json patched_rv = At(patched, "/metadata/resourceVersion");
    if (!patched_rv.is_null() && patched_rv != At(*old, "/metadata/resourceVersion")) {
      SendStatus(res, 409,
                 ConflictMessage(p, "the object has been modified; please apply your changes to the latest version "
                                    "and try again"));
      return;
    }
    json updated;
    if (p.subresource == "status") {
      updated = *old;
      if (patched.contains("status")) {
        updated["status"] = patched["status"];
      } else {
        updated.erase("status");
      }
    } else {
      updated = Strip(std::move(patched));
      if (old->contains("status")) {
        updated["status"] = (*old)["status"];
      } else {
        updated.erase("status");
      }
      for (const char* f : {"resourceVersion", "generation"}) updated["metadata"][f] = (*old)["metadata"][f];
      std::optional<FieldError> e;
      if (p.res.group == "batch" && p.res.resource == "jobs") e = ValidateJobUpdate(*old, updated);
      if (p.res.group.empty() && p.res.resource == "pods") e = ValidatePodUpdate(*old, updated);
      if (e.has_value()) {
        SendInvalid(res, p, *e);
        return;
      }
    }
    CommitUpdateLocked(p, *old, std::move(updated));
    SendJson(res, 200, Decorate(*old, p.res));
  }

  void HandleDeleteLocked(const httplib::Request& req, httplib::Response& res, const ParsedPath& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const json* obj = FindLocked(p);
    if (obj == nullptr) {
      SendNotFound(res, p);
      return;
    }
    json options = json::object();
    if (!absl::StripAsciiWhitespace(req.body).empty()) {
      options = json::parse(req.body, nullptr, false);
      if (options.is_discarded() || !options.is_object()) {
        SendStatus(res, 400, "the body of the request could not be decoded as DeleteOptions");
        return;
      }
    }
    json want_uid = At(options, "/preconditions/uid");
    if (!want_uid.is_null() && want_uid != At(*obj, "/metadata/uid")) {
      SendStatus(res, 409,
                 ConflictMessage(p, absl::StrCat("Precondition failed: UID in precondition: ", want_uid.dump(),
                                                 ", UID in object meta: ", Meta(*obj, "uid"))));
      return;
    }
    json want_rv = At(options, "/preconditions/resourceVersion");
    if (!want_rv.is_null() && want_rv != At(*obj, "/metadata/resourceVersion")) {
      SendStatus(res, 409,
                 ConflictMessage(p, absl::StrCat("Precondition failed: ResourceVersion in precondition: ",
                                                 want_rv.dump(), ", ResourceVersion in object meta: ",
                                                 Meta(*obj, "resourceVersion"))));
      return;
    }
    std::string policy = At(options, "/propagationPolicy").is_string()
                             ? At(options, "/propagationPolicy").get<std::string>()
                             : req.get_param_value("propagationPolicy");
    if (!policy.empty() && policy != "Orphan" && policy != "Background" && policy != "Foreground") {
      SendInvalid(res, p,
                  {"propagationPolicy", absl::StrCat("Unsupported value: \"", policy,
                                                     "\": supported values: \"Foreground\", \"Background\", "
                                                     "\"Orphan\"")});
      return;
    }
    if (policy.empty() && p.res.group == "batch" && p.res.resource == "jobs") {
      res.set_header("Warning", kJobDeleteWarning);
    }
    SendJson(res, 200, Decorate(DeleteLocked(p), p.res));
  }

  // ---- Store internals ----

  absl::StatusOr<ParsedPath> ParsePathLocked(const std::string& path) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> segs = absl::StrSplit(path, '/', absl::SkipEmpty());
    std::string gv;
    size_t i;
    if (segs.size() >= 2 && segs[0] == "api") {
      gv = segs[1];
      i = 2;
    } else if (segs.size() >= 3 && segs[0] == "apis") {
      gv = absl::StrCat(segs[1], "/", segs[2]);
      i = 3;
    } else {
      return absl::NotFoundError(absl::StrCat("no API group in ", path));
    }
    std::vector<std::string> rest(segs.begin() + static_cast<std::ptrdiff_t>(i), segs.end());
    ParsedPath p;
    std::string resource;
    if (rest.size() >= 3 && rest[0] == "namespaces" && !(rest.size() == 3 && rest[2] == "status")) {
      p.ns = rest[1];
      resource = rest[2];
      rest.erase(rest.begin(), rest.begin() + 3);
    } else if (!rest.empty()) {
      resource = rest[0];
      rest.erase(rest.begin());
    } else {
      return absl::NotFoundError(absl::StrCat("no resource in ", path));
    }
    if (rest.size() > 2) return absl::NotFoundError(absl::StrCat("too many segments in ", path));
    if (!rest.empty()) p.name = rest[0];
    if (rest.size() == 2) p.subresource = rest[1];
    if (!p.subresource.empty() && p.subresource != "status") {
      return absl::NotFoundError(absl::StrCat("subresource ", p.subresource, " is not served"));
    }
    auto it = resources_.find(absl::StrCat(gv, "/", resource));
    if (it == resources_.end() || !it->second.served) {
      return absl::NotFoundError(absl::StrCat(gv, "/", resource, " is not served"));
    }
    p.res = it->second;
    if (!p.res.namespaced && !p.ns.empty()) return absl::NotFoundError(absl::StrCat(resource, " is cluster-scoped"));
    if (p.res.namespaced && p.ns.empty() && !p.name.empty()) {
      return absl::NotFoundError(absl::StrCat(resource, " is namespaced: the path needs a namespace"));
    }
    return p;
  }

  json* FindLocked(const ParsedPath& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto r = objects_.find(p.res.store_key());
    if (r == objects_.end()) return nullptr;
    auto o = r->second.find(ObjectKey{p.ns, p.name});
    return o == r->second.end() ? nullptr : &o->second;
  }
  const json* FindLocked(const ParsedPath& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return const_cast<Impl*>(this)->FindLocked(p);
  }

  std::vector<json> MatchingLocked(const ParsedPath& p, const Selectors& sel) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<json> out;
    auto r = objects_.find(p.res.store_key());
    if (r == objects_.end()) return out;
    for (const auto& [key, obj] : r->second) {
      if (!p.ns.empty() && key.first != p.ns) continue;
      if (sel.Matches(obj)) out.push_back(obj);
    }
    return out;
  }

  // Stores `updated` over `*old` unless nothing changed; bumps the
  // resourceVersion (and generation when spec changed) and emits MODIFIED.
  void CommitUpdateLocked(const ParsedPath& p, json& old, json updated) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (updated == old) return;
    if (At(updated, "/spec") != At(old, "/spec")) {
      json g = At(old, "/metadata/generation");
      updated["metadata"]["generation"] = (g.is_number_integer() ? g.get<int64_t>() : 0) + 1;
    }
    updated["metadata"]["resourceVersion"] = std::to_string(++rv_);
    json previous = std::move(old);
    old = std::move(updated);
    EmitLocked("MODIFIED", p, old, previous);
  }

  json DeleteLocked(const ParsedPath& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& objs = objects_[p.res.store_key()];
    auto it = objs.find(ObjectKey{p.ns, p.name});
    json last = std::move(it->second);
    objs.erase(it);
    last["metadata"]["resourceVersion"] = std::to_string(++rv_);
    EmitLocked("DELETED", p, last, nullptr);
    CollectOwnedWorkloadsLocked(Meta(last, "uid"));
    return last;
  }

  // Garbage collection of Kueue Workloads, as Kubernetes' collector does
  // it: a Workload with an ownerReference to the deleted object is deleted
  // when none of its owners exists any more (a job's Workload with its job;
  // a pod group's, owned by every pod of the group, with the last pod);
  // while some owner remains, only the dangling references are dropped.
  // Nothing else is collected.
  void CollectOwnedWorkloadsLocked(const std::string& owner_uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (owner_uid.empty()) return;
    for (const auto& [gvr, res] : resources_) {
      if (res.group != "kueue.x-k8s.io" || res.resource != "workloads") continue;
      auto store = objects_.find(res.store_key());
      if (store == objects_.end()) continue;
      std::vector<ObjectKey> owned;
      for (const auto& [key, obj] : store->second) {
        if (ReferencesOwner(obj, owner_uid)) owned.push_back(key);
      }
      for (const ObjectKey& key : owned) {
        ParsedPath wp;
        wp.res = res;
        wp.ns = key.first;
        wp.name = key.second;
        json* workload = FindLocked(wp);
        if (workload == nullptr) continue;
        json kept = json::array();
        for (const json& r : (*workload)["metadata"]["ownerReferences"]) {
          const std::string uid = r.is_object() ? r.value("uid", "") : "";
          if (uid != owner_uid && ExistsLocked(uid)) kept.push_back(r);
        }
        if (kept.empty()) {
          DeleteLocked(wp);
          continue;
        }
        json updated = *workload;
        updated["metadata"]["ownerReferences"] = std::move(kept);
        CommitUpdateLocked(wp, *workload, std::move(updated));
      }
      return;  // one store for every version
    }
  }
  static bool ReferencesOwner(const json& object, const std::string& owner_uid) {
    const json refs = At(object, "/metadata/ownerReferences");
    if (!refs.is_array()) return false;
    for (const json& r : refs) {
      if (r.is_object() && r.value("uid", "") == owner_uid) return true;
    }
    return false;
  }
  bool ExistsLocked(const std::string& uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (uid.empty()) return false;
    for (const auto& [store, objs] : objects_) {
      for (const auto& [key, obj] : objs) {
        if (Meta(obj, "uid") == uid) return true;
      }
    }
    return false;
  }

  void EmitLocked(const std::string& type, const ParsedPath& p, const json& object, const json& previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    history_.push_back(Event{rv_, type, p.res.store_key(), Meta(object, "namespace"), object, previous});
    latest_rv_by_key_[history_.back().store_key] = rv_;
    while (history_.size() > options_.history) {
      history_start_rv_ = history_.front().rv;
      history_.pop_front();
    }
  }

  const FakeKubeOptions options_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_watches_{0};

  mutable absl::Mutex mu_;
  // The newest event's resource version per store key: what a watch waits
  // on (WatchStep; with mu_'s Await, any change made under mu_ is seen
  // when it is let go). Nodes stay put, so a watch keeps a pointer to its own.
  std::map<std::string, int64_t> latest_rv_by_key_ ABSL_GUARDED_BY(mu_);
  bool watches_paused_ ABSL_GUARDED_BY(mu_) = false;  // PauseWatches
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ResourceInfo> resources_ ABSL_GUARDED_BY(mu_);  // by "group/version/resource"
  // store key ("group/resource") -> (namespace, name) -> object without kind/apiVersion
  std::map<std::string, std::map<ObjectKey, json>> objects_ ABSL_GUARDED_BY(mu_);
  int64_t rv_ ABSL_GUARDED_BY(mu_) = kFirstResourceVersion;
  std::deque<Event> history_ ABSL_GUARDED_BY(mu_);  // ascending rv
  // Every event with rv > history_start_rv_ is in history_.
  int64_t history_start_rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t close_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by CloseWatches
  std::map<std::string, Page> pages_ ABSL_GUARDED_BY(mu_);         // live continue tokens
  std::map<std::string, ObjectKey> expired_ ABSL_GUARDED_BY(mu_);  // token -> last key returned before it
  int64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<ScriptedFailure> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<RecordedCall> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, FakeUser> review_users_ ABSL_GUARDED_BY(mu_);  // TokenReview: token -> user
  FakeAccessRule access_rule_ ABSL_GUARDED_BY(mu_);
};

// ======================================================================
// FakeKubeApi
// ======================================================================

absl::StatusOr<std::unique_ptr<FakeKubeApi>> FakeKubeApi::Start(FakeKubeOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<FakeKubeApi>(new FakeKubeApi(std::move(impl)));
}

FakeKubeApi::FakeKubeApi(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeKubeApi::~FakeKubeApi() = default;

int FakeKubeApi::port() const { return impl_->port(); }
std::string FakeKubeApi::url() const { return absl::StrCat("https://127.0.0.1:", impl_->port()); }
absl::StatusOr<json> FakeKubeApi::Create(const std::string& collection_path, json object) {
  return impl_->Create(collection_path, std::move(object));
}
absl::StatusOr<json> FakeKubeApi::Get(const std::string& object_path) const { return impl_->Get(object_path); }
absl::StatusOr<json> FakeKubeApi::Replace(const std::string& object_path, json object) {
  return impl_->Replace(object_path, std::move(object));
}
absl::Status FakeKubeApi::Delete(const std::string& object_path) { return impl_->Delete(object_path); }
std::vector<json> FakeKubeApi::List(const std::string& collection_path) const { return impl_->List(collection_path); }
void FakeKubeApi::set_token(const std::string& token) { impl_->set_token(token); }

// --- Several clients told apart ---
void FakeKubeApi::AddToken(const std::string& token) { impl_->AddToken(token); }
std::map<std::string, int> FakeKubeApi::WritesByPath(const std::string& path_prefix,
                                                     const std::string& authorization) const {
  std::map<std::string, int> out;
  for (const RecordedCall& c : Calls()) {
    if (c.method != "POST" && c.method != "PUT" && c.method != "PATCH" && c.method != "DELETE") continue;
    if (!absl::StartsWith(c.path, path_prefix)) continue;
    if (!authorization.empty() && c.authorization != authorization) continue;
    ++out[absl::StrCat(c.method, " ", c.path)];
  }
  return out;
}
void FakeKubeApi::SetTokenUser(const std::string& token, FakeUser user) { impl_->SetTokenUser(token, std::move(user)); }
void FakeKubeApi::SetAccessRule(FakeAccessRule rule) { impl_->SetAccessRule(std::move(rule)); }
void FakeKubeApi::Fail(ScriptedFailure f) { impl_->Fail(std::move(f)); }
void FakeKubeApi::ClearFailures() { impl_->ClearFailures(); }
void FakeKubeApi::CloseWatches() { impl_->CloseWatches(); }
void FakeKubeApi::CompactHistory() { impl_->CompactHistory(); }
void FakeKubeApi::PauseWatches(bool paused) { impl_->PauseWatches(paused); }
void FakeKubeApi::set_served(const std::string& gvr, bool served) { impl_->set_served(gvr, served); }
void FakeKubeApi::ServeKueue(const std::vector<std::string>& versions) { impl_->ServeKueue(versions); }
std::vector<RecordedCall> FakeKubeApi::Calls() const { return impl_->Calls(); }
void FakeKubeApi::ClearCalls() { impl_->ClearCalls(); }
int64_t FakeKubeApi::resource_version() const { return impl_->resource_version(); }
int FakeKubeApi::open_watches() const { return impl_->open_watches(); }

}  // namespace gangkeeper::testing
