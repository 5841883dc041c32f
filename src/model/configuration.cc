// gangkeeper model: Kueue's Configuration document (configuration.h,
// configuration_codec.h): decoding with a warning for every part that is
// not enforced, the canonical encoding, and the transformed requests.
#include "src/model/configuration_codec.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "src/model/reader.h"

namespace gangkeeper::model {
namespace {

using base::FieldErrors;
using base::FieldErrorType;
using base::FieldPath;
using nlohmann::json;
using quantity::Quantity;

constexpr char kConfigV1beta1[] = "config.kueue.x-k8s.io/v1beta1";

// Top-level members about the Kueue process itself (its listeners, leader
// election, certificates): nothing to do with admission, so no warning.
constexpr const char* kConfigProcessKeys[] = {"namespace",       "health",
                                              "metrics",         "webhook",
                                              "leaderElection",  "controller",
                                              "clientConnection", "internalCertManagement",
                                              "pprofBindAddress", "metadata"};

// Members that change what Kueue admits and gangkeeper does not do, with
// what a user should know.
struct ConfigUnenforced {
  const char* key;
  const char* why;
};
constexpr ConfigUnenforced kConfigUnenforced[] = {
    {"manageJobsWithoutQueueName",
     "not enforced: gangkeeper manages only objects with the kueue.x-k8s.io/queue-name label (or a defaulted queue)"},
    {"managedJobsNamespaceSelector", "not enforced: gangkeeper's webhook rules decide which namespaces it sees"},
    {"integrations", "not enforced: gangkeeper manages its own fixed list of kinds"},
    {"queueVisibility", "not enforced: gangkeeper serves pending workloads through its own API"},
    {"multiKueue", "not enforced: gangkeeper admits in one cluster only"},
    {"admissionFairSharing", "not enforced: queue order within a ClusterQueue ignores past usage"},
    {"featureGates", "not enforced: gangkeeper has no feature gates; its behaviour is that of Kueue's defaults"},
    {"objectRetentionPolicies", "not enforced: finished workloads are forgotten as gangkeeper's own retention says"},
    {"dra", "not enforced: dynamic resource allocation requests are not charged"},
};

const char* StrategyText(TransformationStrategy s) {
  return s == TransformationStrategy::kReplace ? "Replace" : "Retain";
}

void DecodeTransformation(const json& item, const FieldPath& path, KueueConfiguration* config, FieldErrors* errors,
                          FieldErrors* warnings) {
  ObjectReader r(&item, path, errors, warnings);
  if (!r.valid()) return;
  ResourceTransformation t;
  t.input = r.String("input", /*required=*/true);
  if (r.Enum("strategy", {"Retain", "Replace"}) == "Replace") t.strategy = TransformationStrategy::kReplace;
  t.multiply_by = r.String("multiplyBy");
  ObjectReader outputs = r.Object("outputs");
  if (outputs.valid()) {
    for (const auto& [name, value] : item.at("outputs").items()) {
      if (std::optional<Quantity> q = outputs.Quantity(name, /*required=*/true)) t.outputs[name] = *q;
    }
  }
  outputs.Finish();
  r.Finish();
  for (const ResourceTransformation& earlier : config->transformations) {
    if (!t.input.empty() && earlier.input == t.input) {
      errors->Add(path.Child("input"), FieldErrorType::kDuplicate,
                  absl::StrCat("a second transformation for ", t.input, "; merge the two"));
      return;
    }
  }
  if (!t.input.empty()) config->transformations.push_back(std::move(t));
}

void DecodeConfigResources(ObjectReader& top, KueueConfiguration* config) {
  ObjectReader res = top.Object("resources");
  if (!res.valid()) return;
  res.List("transformations", [&](const json& item, const FieldPath& path) {
    DecodeTransformation(item, path, config, res.errors(), res.warnings());
  });
  res.Unenforced("excludeResourcePrefixes",
                 "not enforced: resources with these prefixes are still charged when a ClusterQueue covers them");
  res.Unenforced("quotaCheckStrategy",
                 "not enforced: a request for a resource no ClusterQueue resource group covers is never admitted");
  res.Unenforced("deviceClassMappings", "not enforced: dynamic resource allocation requests are not charged");
  res.Finish();
}

void DecodeConfigFairSharing(ObjectReader& top, bool v1beta1, KueueConfiguration* config) {
  ObjectReader fs = top.Object("fairSharing");
  if (!fs.valid()) return;
  // v1beta1 turns it on with `enable`; from v1beta2 on, the section's
  // presence does.
  if (std::optional<bool> enable = fs.Bool("enable")) {
    config->fair_sharing = *enable;
  } else {
    config->fair_sharing = !v1beta1;
  }
  std::vector<FairPreemptionStrategy> order;
  bool listed = false;
  fs.List("preemptionStrategies", [&](const json& item, const FieldPath& path) {
    listed = true;
    const std::string s = item.is_string() ? item.get<std::string>() : "";
    if (s == "LessThanOrEqualToFinalShare") {
      order.push_back(FairPreemptionStrategy::kLessThanOrEqualToFinalShare);
    } else if (s == "LessThanInitialShare") {
      order.push_back(FairPreemptionStrategy::kLessThanInitialShare);
    } else {
      fs.errors()->Add(path, FieldErrorType::kNotSupported,
                       "must be LessThanOrEqualToFinalShare or LessThanInitialShare");
    }
  });
  if (listed) {
    using S = FairPreemptionStrategy;
    const bool valid = order == std::vector<S>{S::kLessThanOrEqualToFinalShare} ||
                       order == std::vector<S>{S::kLessThanInitialShare} ||
                       order == std::vector<S>{S::kLessThanOrEqualToFinalShare, S::kLessThanInitialShare};
    if (!valid) {
      fs.errors()->Add(fs.path().Child("preemptionStrategies"), FieldErrorType::kInvalid,
                       "must be [LessThanOrEqualToFinalShare], [LessThanInitialShare] or "
                       "[LessThanOrEqualToFinalShare, LessThanInitialShare]");
    } else {
      config->preemption_strategies = std::move(order);
    }
  }
  fs.Finish();
}

// A Kubernetes duration ("5m", "90s", "1h30m", "0s") at `key`; nullopt
// when absent or bad (with an error).
std::optional<absl::Duration> ConfigDuration(ObjectReader& r, const std::string& key) {
  if (!r.Has(key)) return std::nullopt;
  const std::string text = r.String(key);
  absl::Duration d;
  if (text.empty() || !absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    r.errors()->Add(r.path().Child(key), FieldErrorType::kInvalid,
                    absl::StrCat("\"", text, "\" is not a duration; write it as 30s, 5m or 1h30m"));
    return std::nullopt;
  }
  return d;
}

void DecodeConfigWaitForPodsReady(ObjectReader& top, bool v1beta1, KueueConfiguration* config) {
  ObjectReader w = top.Object("waitForPodsReady");
  if (!w.valid()) return;
  WaitForPodsReady out;
  // v1beta1: off unless `enable`, timeout 5m, blockAdmission as enable;
  // v1beta2: on by the section's presence, timeout 30m, blockAdmission false.
  if (v1beta1) {
    out.enabled = w.Bool("enable").value_or(false);
    out.timeout = absl::Minutes(5);
    out.block_admission = out.enabled;
  } else {
    out.enabled = true;
    out.timeout = absl::Minutes(30);
    out.block_admission = false;
  }
  if (std::optional<absl::Duration> t = ConfigDuration(w, "timeout")) {
    if (*t == absl::ZeroDuration()) {
      w.errors()->Add(w.path().Child("timeout"), FieldErrorType::kInvalid,
                      "must be more than 0s: a gang needs some time for its pods to start");
    } else {
      out.timeout = *t;
    }
  }
  out.recovery_timeout = ConfigDuration(w, "recoveryTimeout").value_or(out.timeout);
  if (std::optional<bool> block = w.Bool("blockAdmission")) out.block_admission = *block;
  ObjectReader rq = w.Object("requeuingStrategy");
  if (rq.valid()) {
    if (rq.Enum("timestamp", {"Eviction", "Creation"}) == "Creation") out.timestamp = RequeuingTimestamp::kCreation;
    if (std::optional<int64_t> n = rq.Int("backoffLimitCount", false, 0, INT32_MAX)) out.backoff_limit_count = *n;
    if (std::optional<int64_t> n = rq.Int("backoffBaseSeconds", false, 0, INT32_MAX)) out.backoff_base_seconds = *n;
    if (std::optional<int64_t> n = rq.Int("backoffMaxSeconds", false, 0, INT32_MAX)) out.backoff_max_seconds = *n;
    rq.Finish();
  }
  w.Finish();
  config->wait_for_pods_ready = out;
}

// `a` x `b`, exact, rounded up to the milli-unit; clamped to the range.
Quantity ConfigProduct(Quantity a, Quantity b) {
  const absl::int128 product = a.milli() * b.milli();
  absl::int128 milli = product / 1000;
  if (product % 1000 > 0) milli += 1;
  if (milli >= Quantity::Max().milli()) return Quantity::Max();
  if (milli <= Quantity::Min().milli()) return Quantity::Min();
  const Quantity units = Quantity::FromUnits(static_cast<int64_t>(milli / 1000));
  return units.SaturatingAdd(Quantity::FromMilli(static_cast<int64_t>(milli % 1000)));
}

bool ConfigKnownKey(const std::string& key) {
  if (key == "apiVersion" || key == "kind" || key == "resources" || key == "fairSharing" ||
      key == "waitForPodsReady") {
    return true;
  }
  for (const char* k : kConfigProcessKeys) {
    if (key == k) return true;
  }
  for (const ConfigUnenforced& u : kConfigUnenforced) {
    if (key == u.key) return true;
  }
  return false;
}

}  // namespace

absl::Duration PodsReadyBackoff(const WaitForPodsReady& w, int64_t count) {
  const int64_t max = std::max<int64_t>(w.backoff_max_seconds, 0);
  int64_t seconds = std::max<int64_t>(w.backoff_base_seconds, 0);
  for (int64_t i = 1; i < count && seconds < max; ++i) seconds *= 2;
  return absl::Seconds(std::min(seconds, max));
}

const char* FairPreemptionStrategyName(FairPreemptionStrategy s) {
  return s == FairPreemptionStrategy::kLessThanInitialShare ? "LessThanInitialShare" : "LessThanOrEqualToFinalShare";
}

bool IsConfigurationDocument(const std::string& api_version, const std::string& kind) {
  return kind == "Configuration" && api_version.rfind("config.kueue.x-k8s.io/", 0) == 0;
}

void DecodeConfigurationDocument(const json& doc, const std::string& api_version, const SourceRef& source,
                                 PolicySet* policies, Diagnostics* d) {
  FieldErrors errors;
  FieldErrors warnings;
  const std::string object = "Configuration";
  const bool v1beta1 = api_version == kConfigV1beta1;
  if (!v1beta1 && api_version != "config.kueue.x-k8s.io/v1beta2") {
    d->Add(Diagnostic::Severity::kError, source, object, "apiVersion",
           absl::StrCat("apiVersion ", api_version,
                        " is not supported for Configuration; use config.kueue.x-k8s.io/v1beta2 or v1beta1"));
    return;
  }
  if (policies->configuration.present) {
    d->Add(Diagnostic::Severity::kError, source, object, "",
           absl::StrCat("a second Kueue Configuration (the first is in ", policies->configuration_source.ToString(),
                        "); keep one"));
    return;
  }
  ObjectReader top(&doc, FieldPath(), &errors, &warnings);
  top.Get("apiVersion");
  top.Get("kind");
  for (const char* key : kConfigProcessKeys) top.Ignore(key);
  KueueConfiguration config;
  config.present = true;
  config.api_version = api_version;
  DecodeConfigResources(top, &config);
  DecodeConfigFairSharing(top, v1beta1, &config);
  DecodeConfigWaitForPodsReady(top, v1beta1, &config);
  for (const ConfigUnenforced& u : kConfigUnenforced) top.Unenforced(u.key, u.why);
  // Kueue adds members release by release: one gangkeeper does not know is
  // a warning here, not an error (it may well be a Kueue option).
  if (doc.is_object()) {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      if (ConfigKnownKey(it.key())) continue;
      warnings.Add(FieldPath().Child(it.key()), FieldErrorType::kNotSupported,
                   "not enforced: gangkeeper does not know this Kueue option");
    }
  }
  for (const base::FieldError& e : errors.errors()) d->Add(Diagnostic::Severity::kError, source, object, e.path, e.detail);
  for (const base::FieldError& e : warnings.errors()) {
    d->Add(Diagnostic::Severity::kWarning, source, object, e.path, e.detail);
  }
  if (!errors.empty()) return;
  policies->configuration = std::move(config);
  policies->configuration_source = source;
}

json EncodeConfiguration(const KueueConfiguration& config) {
  json out = json::object();
  out["apiVersion"] = config.api_version.empty() ? std::string(kConfigV1beta1) : config.api_version;
  out["kind"] = "Configuration";
  if (!config.transformations.empty()) {
    json list = json::array();
    for (const ResourceTransformation& t : config.transformations) {
      json item = json::object();
      item["input"] = t.input;
      item["strategy"] = StrategyText(t.strategy);
      if (!t.multiply_by.empty()) item["multiplyBy"] = t.multiply_by;
      json outputs = json::object();
      for (const auto& [name, q] : t.outputs) outputs[name] = q.Format();
      item["outputs"] = std::move(outputs);
      list.push_back(std::move(item));
    }
    out["resources"]["transformations"] = std::move(list);
  }
  const bool v1beta1 = out["apiVersion"] == kConfigV1beta1;
  if (config.fair_sharing || v1beta1) {
    json fs = json::object();
    if (v1beta1) fs["enable"] = config.fair_sharing;
    json order = json::array();
    for (FairPreemptionStrategy s : config.preemption_strategies) order.push_back(FairPreemptionStrategyName(s));
    fs["preemptionStrategies"] = std::move(order);
    out["fairSharing"] = std::move(fs);
  }
  if (const WaitForPodsReady& w = config.wait_for_pods_ready; w.enabled) {
    json section = json::object();
    if (v1beta1) section["enable"] = true;
    section["timeout"] = absl::FormatDuration(w.timeout);
    section["recoveryTimeout"] = absl::FormatDuration(w.recovery_timeout);
    section["blockAdmission"] = w.block_admission;
    json rq = json::object();
    rq["timestamp"] = w.timestamp == RequeuingTimestamp::kCreation ? "Creation" : "Eviction";
    rq["backoffBaseSeconds"] = w.backoff_base_seconds;
    rq["backoffMaxSeconds"] = w.backoff_max_seconds;
    if (w.backoff_limit_count.has_value()) rq["backoffLimitCount"] = *w.backoff_limit_count;
    section["requeuingStrategy"] = std::move(rq);
    out["waitForPodsReady"] = std::move(section);
  }
  return out;
}

namespace {

const ResourceTransformation* TransformationOf(const KueueConfiguration& config, const std::string& input) {
  for (const ResourceTransformation& t : config.transformations) {
    if (t.input == input) return &t;
  }
  return nullptr;
}

bool AnyTransformed(const KueueConfiguration& config, const std::map<std::string, Quantity>& requests) {
  if (config.transformations.empty()) return false;
  for (const auto& [name, q] : requests) {
    if (TransformationOf(config, name) != nullptr) return true;
  }
  return false;
}

}  // namespace

const std::map<std::string, Quantity>& QuotaRequestsOf(const KueueConfiguration& config,
                                                       const std::map<std::string, Quantity>& requests,
                                                       std::map<std::string, Quantity>* storage) {
  if (!AnyTransformed(config, requests)) return requests;
  *storage = QuotaRequests(config, requests);
  return *storage;
}

std::map<std::string, Quantity> QuotaRequests(const KueueConfiguration& config,
                                              const std::map<std::string, Quantity>& requests) {
  if (!AnyTransformed(config, requests)) return requests;
  // What the transformations generate stays apart from the requests until
  // the end, so that a negative factor (an allowance) only offsets other
  // generated charges, never a request made directly.
  std::map<std::string, Quantity> kept;
  std::map<std::string, Quantity> generated;
  for (const auto& [name, q] : requests) {
    const ResourceTransformation* t = TransformationOf(config, name);
    if (t == nullptr) {
      kept[name] = q;
      continue;
    }
    Quantity base = q;
    if (!t->multiply_by.empty()) {
      auto m = requests.find(t->multiply_by);
      if (m != requests.end()) base = ConfigProduct(q, m->second);
    }
    for (const auto& [out, factor] : t->outputs) generated[out] = generated[out].SaturatingAdd(ConfigProduct(base, factor));
    if (t->strategy == TransformationStrategy::kRetain) kept[name] = q;
  }
  for (const auto& [name, q] : generated) {
    const Quantity g = q.IsNegative() ? Quantity() : q;
    kept[name] = kept[name].SaturatingAdd(g);
  }
  return kept;
}

}  // namespace gangkeeper::model
