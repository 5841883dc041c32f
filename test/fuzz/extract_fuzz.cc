// gangkeeper fuzzing: the workload extractor.
//
// Input: the JSON text of a Kubernetes object (a review's request.object, or
// what the reconciler lists). The kind comes from the object's apiVersion
// and kind when they name a managed kind; otherwise the input's length picks
// one, so every kind's extractor also sees every shape. ExtractWorkload
// (with the example policies of policies/ plus a "default" LocalQueue in
// team-a, so priority classes and queue defaulting resolve) must return a
// Workload or InvalidArgument; a Workload has pod sets with non-negative
// counts and requests and a total that does not overflow. ObserveObject,
// the reconciler's reading of the same text, must agree with it.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/workload/extract.h"
#include "gangkeeper/workload/observe.h"
#include "rapidjson/document.h"
#include "test/fuzz/fuzz_target.h"

namespace gangkeeper::fuzz {
namespace {

constexpr absl::string_view kDefaultQueue = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: default, namespace: team-a}
spec: {clusterQueue: team-a-gpu}
)";

using workload::KindInfo;
using workload::Workload;

// The example policies/ plus team-a's "default" LocalQueue (team-b has
// none), so manage_jobs_without_queue_name has a queue to default to.
const model::PolicySet& ExamplePolicies() {
  static const model::PolicySet* const policies = [] {
    absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(GK_SOURCE_DIR "/policies");
    GK_CHECK_OK(loaded.status());
    model::DecodeManifests(kDefaultQueue, "fuzz", &loaded->policies, &loaded->diagnostics);
    GK_CHECK_MSG(!loaded->diagnostics.HasErrors(), loaded->diagnostics.ErrorSummary().c_str());
    return new model::PolicySet(std::move(loaded->policies));
  }();
  return *policies;
}

std::string Text(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return "";
  auto it = v.FindMember(name);
  if (it == v.MemberEnd() || !it->value.IsString()) return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

const KindInfo& KindOf(const rapidjson::Value& object, size_t size) {
  const std::string api_version = Text(object, "apiVersion");
  const size_t slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  if (const KindInfo* info = workload::FindKind(group, Text(object, "kind")); info != nullptr) return *info;
  const std::vector<KindInfo>& kinds = workload::ManagedKinds();
  return kinds[size % kinds.size()];
}

absl::Status CheckWorkload(const Workload& w, const KindInfo& info) {
  const std::string what = absl::StrCat("ExtractWorkload(", info.name, ")");
  if (w.kind != info.kind) return absl::InternalError(absl::StrCat(what, ": wrong kind"));
  if (w.pod_sets.empty()) return absl::InternalError(absl::StrCat(what, ": a workload without pod sets"));
  int64_t total = 0;
  for (const workload::PodSet& ps : w.pod_sets) {
    if (ps.count < 0) return absl::InternalError(absl::StrCat(what, ": pod set ", ps.name, " counts ", ps.count));
    if (__builtin_add_overflow(total, ps.count, &total)) {
      return absl::InternalError(absl::StrCat(what, ": the pod total overflows int64"));
    }
    for (const auto& [resource, q] : ps.requests) {
      if (q.IsNegative()) return absl::InternalError(absl::StrCat(what, ": negative request for ", resource));
    }
    for (const auto& [resource, q] : ps.limits) {
      if (q.IsNegative()) return absl::InternalError(absl::StrCat(what, ": negative limit for ", resource));
    }
  }
  return Expect(w.TotalPods() == total, what, "TotalPods() disagrees with the pod sets");
}

// A clean error of ExtractWorkload: InvalidArgument with a message, or a
// TrainJob's runtime not known (IsRuntimeUnknown) with one.
absl::Status ExpectCleanExtractError(const absl::Status& status, absl::string_view what) {
  if (workload::IsRuntimeUnknown(status) && !status.message().empty()) return absl::OkStatus();
  return ExpectCleanError(status, what);
}

// The runtime the lookup finds for every TrainJob (when it finds one): the
// Trainer's torch-distributed shape.
constexpr char kRuntime[] = R"({"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template":
    {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch"}]}}}}}]}}}})";

}  // namespace

absl::Status FuzzOneInput(absl::string_view data) {
  const model::PolicySet& policies = ExamplePolicies();
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(data.data(), data.size());
  const KindInfo& info = KindOf(doc, data.size());
  workload::ExtractOptions options;
  options.manage_jobs_without_queue_name = data.size() % 2 == 0;
  // A TrainJob's runtime is known for two inputs in three.
  if (data.size() % 3 != 0) {
    options.training_runtime = [](const workload::TrainingRuntimeRef&, absl::string_view) {
      return std::optional<std::string>(kRuntime);
    };
  }

  // Text that is not JSON never reaches ExtractWorkload (DecodeReview
  // refuses it), but ObserveObject reads raw text.
  if (!doc.HasParseError()) {
    absl::StatusOr<Workload> w = workload::ExtractWorkload(doc, info, policies, options);
    if (!w.ok()) {
      if (absl::Status s = ExpectCleanExtractError(w.status(), "ExtractWorkload"); !s.ok()) return s;
    } else if (absl::Status s = CheckWorkload(*w, info); !s.ok()) {
      return s;
    }
  }

  absl::StatusOr<workload::ObservedObject> observed = workload::ObserveObject(data, info, policies, options);
  if (!observed.ok()) return ExpectCleanError(observed.status(), "ObserveObject");
  if (observed->workload.has_value() == !observed->extract_error.ok()) {
    return absl::InternalError("ObserveObject: workload and extract_error disagree");
  }
  if (observed->workload.has_value()) return CheckWorkload(*observed->workload, info);
  return ExpectCleanExtractError(observed->extract_error, "ObserveObject's ExtractWorkload");
}

}  // namespace gangkeeper::fuzz
