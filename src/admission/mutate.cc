// gangkeeper admission: the suspend mutation (see mutate.h).
//
// Patches use only `add` (which also replaces an existing member) on paths
// whose parent exists, creating parents when absent (the suspend itself is
// workload::HoldOps, from the kinds table), so they apply with
// `kubectl patch --type=json` and an RFC-strict applier alike; applying the
// mutation to its own output yields no further patch (reinvocation).
#include "src/admission/mutate.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/workload/extract.h"
#include "gangkeeper/workload/hold.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "src/admission/json.h"

namespace gangkeeper::admission {
namespace {

using workload::KindInfo;
using workload::PatchOp;

std::string JsonString(absl::string_view s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

std::string PatchText(const std::vector<PatchOp>& ops) {
  if (ops.empty()) return "";
  std::string out = "[";
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, R"({"op":)", JsonString(ops[i].op), R"(,"path":)", JsonString(ops[i].path));
    if (!ops[i].value_json.empty()) absl::StrAppend(&out, R"(,"value":)", ops[i].value_json);
    out += "}";
  }
  out += "]";
  return out;
}

// True when the object is controlled by an object of a managed kind (its
// gang is that owner's). A Deployment's pods are controlled by its
// ReplicaSet, which carries (and gives its pods) the pod-template-hash
// label: such a pod is the Deployment's (workload::IsDeploymentPodOwner).
bool OwnedByManaged(const rapidjson::Value* object) {
  const rapidjson::Value* refs = Get(Get(object, "metadata"), "ownerReferences");
  if (refs == nullptr || !refs->IsArray()) return false;
  const bool template_hash =
      Get(Get(Get(object, "metadata"), "labels"), workload::kPodTemplateHashLabel.data()) != nullptr;
  for (const rapidjson::Value& ref : refs->GetArray()) {
    if (!IsTrue(Get(&ref, "controller"))) continue;
    std::string api_version = Str(Get(&ref, "apiVersion"));
    std::string group = api_version.find('/') == std::string::npos ? "" : api_version.substr(0, api_version.find('/'));
    if (workload::FindKind(group, Str(Get(&ref, "kind"))) != nullptr) return true;
    if (template_hash && workload::IsDeploymentPodOwner(group, Str(Get(&ref, "kind")))) return true;
  }
  return false;
}

// True when the object's controller is a wrapper kind (an AppWrapper:
// workload::IsWrapperKind).
bool ControlledByWrapper(const rapidjson::Value* object) {
  const rapidjson::Value* refs = Get(Get(object, "metadata"), "ownerReferences");
  if (refs == nullptr || !refs->IsArray()) return false;
  for (const rapidjson::Value& ref : refs->GetArray()) {
    if (!IsTrue(Get(&ref, "controller"))) continue;
    std::string api_version = Str(Get(&ref, "apiVersion"));
    std::string group = api_version.find('/') == std::string::npos ? "" : api_version.substr(0, api_version.find('/'));
    if (workload::IsWrapperKind(group, Str(Get(&ref, "kind")))) return true;
  }
  return false;
}

}  // namespace

std::string EscapePointer(absl::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

Response MutateReview(const Review& review, const model::PolicySet& policies, const WebhookOptions& options) {
  Response response;
  response.uid = review.uid;
  response.allowed = true;
  if (review.operation != "CREATE" || review.object == nullptr || !review.sub_resource.empty()) return response;
  const KindInfo* info = workload::FindKind(review.group, review.kind);
  if (info == nullptr) return response;  // not a kind we manage

  // A Pod of a managed Job/JobSet/... belongs to its owner's gang, which
  // was suspended as a whole.
  // Likewise a LeaderWorkerSet's StatefulSets.
  if ((info->kind == workload::Kind::kPod || info->kind == workload::Kind::kStatefulSet ||
       info->kind == workload::Kind::kDeployment) &&
      OwnedByManaged(review.object)) {
    return response;
  }
  // And any object an AppWrapper's controller creates for its components:
  // the AppWrapper was held as a whole.
  if (ControlledByWrapper(review.object)) return response;
  const rapidjson::Value* metadata = Get(review.object, "metadata");
  const rapidjson::Value* labels = Get(metadata, "labels");
  std::vector<PatchOp> ops;
  std::string queue = Str(Get(labels, workload::kQueueNameLabel.data()));
  if (queue.empty()) {
    std::string ns = review.namespace_name.empty() ? Str(Get(metadata, "namespace")) : review.namespace_name;
    if (!options.manage_jobs_without_queue_name || policies.local_queues.count({ns, "default"}) == 0) {
      return response;  // not queued: not ours
    }
    const std::string label_path = absl::StrCat("/metadata/labels/", EscapePointer(workload::kQueueNameLabel));
    if (metadata == nullptr || !metadata->IsObject()) {
      ops.push_back({"add", "/metadata",
                     absl::StrCat(R"({"labels":{)", JsonString(workload::kQueueNameLabel), R"(:"default"}})")});
    } else if (labels == nullptr || !labels->IsObject()) {
      ops.push_back(
          {"add", "/metadata/labels", absl::StrCat("{", JsonString(workload::kQueueNameLabel), R"(:"default"})")});
    } else {
      ops.push_back({"add", label_path, R"("default")"});
    }
  }
  for (PatchOp& op : workload::HoldOps(*review.object, *info)) ops.push_back(std::move(op));
  response.patch = PatchText(ops);
  return response;
}

}  // namespace gangkeeper::admission
