// gangkeeper admission: the suspend mutation (see mutate.h).
//
// Patches use only `add` (which also replaces an existing member) on paths
// whose parent exists, creating parents when absent, so they apply with
// `kubectl patch --type=json` and an RFC-strict applier alike; applying the
// mutation to its own output yields no further patch (reinvocation).
#include "src/admission/mutate.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/workload/workload.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "src/admission/json.h"

namespace gangkeeper::admission {
namespace {

using workload::KindInfo;
using workload::SuspendMechanism;

// One `add` operation with a JSON value given as text.
struct AddOp {
  std::string path;
  std::string value_json;
};

std::string JsonString(absl::string_view s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return std::string(buf.GetString(), buf.GetSize());
}

std::string PatchText(const std::vector<AddOp>& ops) {
  if (ops.empty()) return "";
  std::string out = "[";
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, R"({"op":"add","path":)", JsonString(ops[i].path), R"(,"value":)", ops[i].value_json, "}");
  }
  out += "]";
  return out;
}

// True when the object is controlled by an object of a managed kind (its
// gang is that owner's).
bool OwnedByManaged(const rapidjson::Value* object) {
  const rapidjson::Value* refs = Get(Get(object, "metadata"), "ownerReferences");
  if (refs == nullptr || !refs->IsArray()) return false;
  for (const rapidjson::Value& ref : refs->GetArray()) {
    if (!IsTrue(Get(&ref, "controller"))) continue;
    std::string api_version = Str(Get(&ref, "apiVersion"));
    std::string group = api_version.find('/') == std::string::npos ? "" : api_version.substr(0, api_version.find('/'));
    if (workload::FindKind(group, Str(Get(&ref, "kind"))) != nullptr) return true;
  }
  return false;
}

void AddSuspend(const KindInfo& info, const rapidjson::Value* object, std::vector<AddOp>* ops) {
  const rapidjson::Value* spec = Get(object, "spec");
  switch (info.suspend) {
    case SuspendMechanism::kSpecSuspend:
      if (!IsTrue(Get(spec, "suspend"))) {
        if (spec == nullptr || !spec->IsObject()) {
          ops->push_back({"/spec", R"({"suspend":true})"});
        } else {
          ops->push_back({"/spec/suspend", "true"});
        }
      }
      return;
    case SuspendMechanism::kRunPolicySuspend: {
      const rapidjson::Value* run_policy = Get(spec, "runPolicy");
      if (IsTrue(Get(run_policy, "suspend"))) return;
      if (spec == nullptr || !spec->IsObject()) {
        ops->push_back({"/spec", R"({"runPolicy":{"suspend":true}})"});
      } else if (run_policy == nullptr || !run_policy->IsObject()) {
        ops->push_back({"/spec/runPolicy", R"({"suspend":true})"});
      } else {
        ops->push_back({"/spec/runPolicy/suspend", "true"});
      }
      return;
    }
    case SuspendMechanism::kSchedulingGate: {
      const std::string gate = absl::StrCat(R"({"name":)", JsonString(workload::kSchedulingGate), "}");
      const rapidjson::Value* gates = Get(spec, "schedulingGates");
      if (gates != nullptr && gates->IsArray()) {
        for (const rapidjson::Value& g : gates->GetArray()) {
          if (Str(Get(&g, "name")) == workload::kSchedulingGate) return;
        }
        ops->push_back({"/spec/schedulingGates/-", gate});
      } else if (spec == nullptr || !spec->IsObject()) {
        ops->push_back({"/spec", absl::StrCat(R"({"schedulingGates":[)", gate, "]}")});
      } else {
        ops->push_back({"/spec/schedulingGates", absl::StrCat("[", gate, "]")});
      }
      return;
    }
  }
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
  if (info->kind == workload::Kind::kPod && OwnedByManaged(review.object)) return response;
  const rapidjson::Value* metadata = Get(review.object, "metadata");
  const rapidjson::Value* labels = Get(metadata, "labels");
  std::vector<AddOp> ops;
  std::string queue = Str(Get(labels, workload::kQueueNameLabel.data()));
  if (queue.empty()) {
    std::string ns = review.namespace_name.empty() ? Str(Get(metadata, "namespace")) : review.namespace_name;
    if (!options.manage_jobs_without_queue_name || policies.local_queues.count({ns, "default"}) == 0) {
      return response;  // not queued: not ours
    }
    const std::string label_path = absl::StrCat("/metadata/labels/", EscapePointer(workload::kQueueNameLabel));
    if (metadata == nullptr || !metadata->IsObject()) {
      ops.push_back({"/metadata", absl::StrCat(R"({"labels":{)", JsonString(workload::kQueueNameLabel),
                                               R"(:"default"}})")});
    } else if (labels == nullptr || !labels->IsObject()) {
      ops.push_back({"/metadata/labels", absl::StrCat("{", JsonString(workload::kQueueNameLabel), R"(:"default"})")});
    } else {
      ops.push_back({label_path, R"("default")"});
    }
  }
  AddSuspend(*info, review.object, &ops);
  response.patch = PatchText(ops);
  return response;
}

}  // namespace gangkeeper::admission
