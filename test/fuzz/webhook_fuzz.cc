// gangkeeper fuzzing: the whole webhook, /mutate and /validate, end to end.
//
// Input: an HTTP request body. Each input gets a fresh in-memory registry
// (no threads, no sockets) and the example policies of policies/ plus a
// "default" LocalQueue in team-a; each body goes through both values of
// manage_jobs_without_queue_name. Checked,
// beyond "no crash":
//   - 400 with {"error":{"message"}} exactly when DecodeReview refuses the
//     body, else 200 with an AdmissionReview answering the request's uid;
//   - the outcome matches the answer (patched <=> a patch, denied <=> not
//     allowed);
//   - a patch is an RFC 6902 array that applies to request.object with a
//     strict applier, and mutating the patched object again patches nothing
//     (mutate.cc's reinvocation promise);
//   - when every string in the request is valid UTF-8, so is the answer.
// Inputs with duplicate member names skip the patch checks: RapidJSON keeps
// the first, Go's decoder the last, and the API server never sends them. So
// do inputs nested deeper than kMaxCheckedDepth: the checks copy and write
// the document with RapidJSON's recursive copy and writer.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/model/manifest.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "src/admission/review.h"
#include "test/fuzz/fuzz_target.h"

namespace gangkeeper::fuzz {
namespace {

constexpr absl::string_view kDefaultQueue = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: default, namespace: team-a}
spec: {clusterQueue: team-a-gpu}
)";

constexpr size_t kMaxCheckedDepth = 512;

using admission::Webhook;
using admission::WebhookOptions;
using admission::WebhookResult;

// The example policies/ plus team-a's "default" LocalQueue (team-b has
// none), so manage_jobs_without_queue_name has a queue to default to.
std::shared_ptr<const model::PolicySet> ExamplePolicies() {
  static const std::shared_ptr<const model::PolicySet> policies = [] {
    absl::StatusOr<model::LoadResult> loaded = model::LoadPolicies(GK_SOURCE_DIR "/policies");
    GK_CHECK_OK(loaded.status());
    model::DecodeManifests(kDefaultQueue, "fuzz", &loaded->policies, &loaded->diagnostics);
    GK_CHECK_MSG(!loaded->diagnostics.HasErrors(), loaded->diagnostics.ErrorSummary().c_str());
    return std::make_shared<const model::PolicySet>(std::move(loaded->policies));
  }();
  return policies;
}

std::string Text(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString(), v.GetStringLength()) : std::string();
}

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

struct Shape {
  bool all_utf8 = true;      // every string and member name is valid UTF-8
  bool unique_names = true;  // no object has a member name twice
  size_t depth = 0;          // of the deepest value; the root is 1
};

// Walks `root` without recursion (the parser is iterative, so nesting is
// unbounded).
Shape Survey(const rapidjson::Value& root) {
  Shape shape;
  std::vector<std::pair<const rapidjson::Value*, size_t>> stack = {{&root, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    shape.depth = std::max(shape.depth, depth);
    if (v->IsString()) {
      shape.all_utf8 = shape.all_utf8 && IsValidUtf8(Text(*v));
    } else if (v->IsArray()) {
      for (const rapidjson::Value& item : v->GetArray()) stack.push_back({&item, depth + 1});
    } else if (v->IsObject()) {
      std::vector<std::string> names;
      for (auto it = v->MemberBegin(); it != v->MemberEnd(); ++it) {
        shape.all_utf8 = shape.all_utf8 && IsValidUtf8(Text(it->name));
        names.push_back(Text(it->name));
        stack.push_back({&it->value, depth + 1});
      }
      std::sort(names.begin(), names.end());
      shape.unique_names = shape.unique_names && std::adjacent_find(names.begin(), names.end()) == names.end();
    }
  }
  return shape;
}

// RFC 6901 reference tokens of `pointer`; false when malformed.
bool Tokens(const std::string& pointer, std::vector<std::string>* tokens) {
  tokens->clear();
  if (pointer.empty()) return true;
  if (pointer[0] != '/') return false;
  std::string token;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens->push_back(std::move(token));
      token.clear();
    } else if (pointer[i] == '~') {
      if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) return false;
      token.push_back(pointer[i + 1] == '0' ? '~' : '/');
      ++i;
    } else {
      token.push_back(pointer[i]);
    }
  }
  return true;
}

// An array index token: digits without a leading zero, below `limit`+1.
bool Index(const std::string& token, size_t limit, size_t* index) {
  if (token.empty() || token.size() > 9 || (token.size() > 1 && token[0] == '0')) return false;
  size_t n = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  *index = n;
  return n <= limit;
}

rapidjson::Value* Child(rapidjson::Value* v, const std::string& token) {
  if (v->IsObject()) {
    const rapidjson::Value name(rapidjson::StringRef(token.data(), static_cast<rapidjson::SizeType>(token.size())));
    return v->HasMember(name) ? &(*v)[name] : nullptr;
  }
  size_t i = 0;
  if (v->IsArray() && Index(token, v->Size(), &i) && i < v->Size()) return &(*v)[static_cast<rapidjson::SizeType>(i)];
  return nullptr;
}

// Applies one RFC 6902 operation strictly (add, remove, replace, test; the
// mutation writes nothing else). Returns why it does not apply.
absl::Status ApplyOp(const rapidjson::Value& op, rapidjson::Document* doc) {
  const rapidjson::Value* op_name = Member(op, "op");
  const rapidjson::Value* path = Member(op, "path");
  if (op_name == nullptr || !op_name->IsString() || path == nullptr || !path->IsString()) {
    return absl::InternalError("operation without a string op and path");
  }
  const std::string name = Text(*op_name);
  std::vector<std::string> tokens;
  if (!Tokens(Text(*path), &tokens)) return absl::InternalError(absl::StrCat("malformed path ", Text(*path)));
  if (tokens.empty()) return absl::InternalError("operation on the whole document");
  const rapidjson::Value* value = Member(op, "value");
  if ((name == "add" || name == "replace" || name == "test") && value == nullptr) {
    return absl::InternalError(absl::StrCat(name, " without a value"));
  }
  rapidjson::Value* parent = doc;
  for (size_t i = 0; i + 1 < tokens.size() && parent != nullptr; ++i) parent = Child(parent, tokens[i]);
  if (parent == nullptr) return absl::InternalError(absl::StrCat(name, " ", Text(*path), ": parent does not exist"));
  const std::string& last = tokens.back();
  auto& alloc = doc->GetAllocator();
  rapidjson::Value* target = Child(parent, last);
  if (name == "test") {
    return target != nullptr && *target == *value ? absl::OkStatus()
                                                  : absl::InternalError(absl::StrCat("test ", Text(*path), " fails"));
  }
  if (name == "replace" || name == "remove") {
    if (target == nullptr) return absl::InternalError(absl::StrCat(name, " ", Text(*path), ": no such member"));
    if (name == "replace") {
      target->CopyFrom(*value, alloc);
    } else if (parent->IsObject()) {
      parent->RemoveMember(rapidjson::Value(last.data(), static_cast<rapidjson::SizeType>(last.size()), alloc));
    } else {
      parent->Erase(target);
    }
    return absl::OkStatus();
  }
  if (name != "add") return absl::InternalError(absl::StrCat("unexpected op ", name));
  rapidjson::Value copy(*value, alloc);
  if (parent->IsObject()) {
    if (target != nullptr) {
      *target = std::move(copy);
    } else {
      parent->AddMember(rapidjson::Value(last.data(), static_cast<rapidjson::SizeType>(last.size()), alloc),
                        std::move(copy), alloc);
    }
    return absl::OkStatus();
  }
  if (!parent->IsArray()) return absl::InternalError(absl::StrCat("add ", Text(*path), ": parent is a scalar"));
  size_t index = 0;
  if (last == "-") {
    index = parent->Size();
  } else if (!Index(last, parent->Size(), &index)) {
    return absl::InternalError(absl::StrCat("add ", Text(*path), ": bad array index"));
  }
  parent->PushBack(rapidjson::Value(), alloc);
  for (size_t i = parent->Size() - 1; i > index; --i) {
    (*parent)[static_cast<rapidjson::SizeType>(i)].Swap((*parent)[static_cast<rapidjson::SizeType>(i - 1)]);
  }
  (*parent)[static_cast<rapidjson::SizeType>(index)] = std::move(copy);
  return absl::OkStatus();
}

// Applies the patch `patch_json` to a copy of request.object in `review`
// and returns the review body with the patched object.
// (`Review` is the decoder's document type, whatever its allocator.)
template <typename Review>
absl::StatusOr<std::string> ApplyPatch(const std::string& patch_json, const Review& review) {
  rapidjson::Document patch;
  patch.Parse<rapidjson::kParseIterativeFlag>(patch_json.data(), patch_json.size());
  if (patch.HasParseError() || !patch.IsArray()) return absl::InternalError("the patch is not a JSON array");
  rapidjson::Document body;
  body.CopyFrom(review, body.GetAllocator());
  rapidjson::Value* object = Child(Child(&body, "request"), "object");
  GK_CHECK(object != nullptr);  // DecodeReview accepted the body
  rapidjson::Document patched;
  patched.CopyFrom(*object, patched.GetAllocator());
  for (const rapidjson::Value& op : patch.GetArray()) {
    if (!op.IsObject()) return absl::InternalError("a patch operation is not an object");
    if (absl::Status s = ApplyOp(op, &patched); !s.ok()) return s;
  }
  object->CopyFrom(patched, body.GetAllocator());
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buf);
  body.Accept(writer);
  return std::string(buf.GetString(), buf.GetSize());
}

// Checks one answer. `patch` receives the decoded patch, if any.
absl::Status CheckAnswer(const WebhookResult& result, absl::string_view endpoint, const admission::Review* review,
                         bool strings_valid, std::string* patch) {
  patch->clear();
  const std::string outcome = result.outcome;
  if (review == nullptr) {
    // The route adapter answers `error` with server::ErrorResponse (400).
    return Expect(result.error.code() == absl::StatusCode::kInvalidArgument && !result.error.message().empty() &&
                      outcome == "bad_request" && result.body.empty(),
                  endpoint,
                  absl::StrCat("a refused body got ", result.error.ToString(), " ", outcome, " ", result.body));
  }
  if (!result.error.ok()) {
    return absl::InternalError(absl::StrCat(endpoint, ": a decodable review got ", result.error.ToString()));
  }
  rapidjson::Document answer;
  answer.Parse<rapidjson::kParseIterativeFlag>(result.body.data(), result.body.size());
  if (answer.HasParseError() || !answer.IsObject()) {
    return absl::InternalError(absl::StrCat(endpoint, ": body is not a JSON object: ", result.body.substr(0, 200)));
  }
  const rapidjson::Value* kind = Member(answer, "kind");
  const rapidjson::Value* response = Member(answer, "response");
  if (kind == nullptr || Text(*kind) != "AdmissionReview" || response == nullptr || !response->IsObject()) {
    return absl::InternalError(absl::StrCat(endpoint, ": not an AdmissionReview: ", result.body.substr(0, 200)));
  }
  const rapidjson::Value* uid = Member(*response, "uid");
  const rapidjson::Value* allowed = Member(*response, "allowed");
  if (uid == nullptr || Text(*uid) != review->uid) return absl::InternalError(absl::StrCat(endpoint, ": uid differs"));
  if (allowed == nullptr || !allowed->IsBool()) return absl::InternalError(absl::StrCat(endpoint, ": no allowed"));
  const rapidjson::Value* patch_b64 = Member(*response, "patch");
  if (patch_b64 != nullptr && !absl::Base64Unescape(Text(*patch_b64), patch)) {
    return absl::InternalError(absl::StrCat(endpoint, ": patch is not base64"));
  }
  const bool want_patched = patch_b64 != nullptr;
  if (outcome != (want_patched ? "patched" : allowed->GetBool() ? "allowed" : "denied")) {
    return absl::InternalError(absl::StrCat(endpoint, ": outcome ", outcome, " for ", result.body.substr(0, 300)));
  }
  if (strings_valid && (!IsValidUtf8(result.body) || !IsValidUtf8(*patch))) {
    return absl::InternalError(absl::StrCat(endpoint, ": valid UTF-8 in, invalid UTF-8 out"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FuzzOneInput(absl::string_view data) {
  std::shared_ptr<const model::PolicySet> policies = ExamplePolicies();
  absl::StatusOr<std::unique_ptr<admission::Review>> review = admission::DecodeReview(data);
  if (!review.ok()) {
    if (absl::Status s = ExpectCleanError(review.status(), "DecodeReview"); !s.ok()) return s;
  }
  const admission::Review* decoded = review.ok() ? review->get() : nullptr;
  const Shape shape = decoded != nullptr ? Survey(decoded->doc) : Shape();
  const bool strings_valid = decoded != nullptr && shape.all_utf8;
  const bool check_patch = decoded != nullptr && shape.unique_names && shape.depth <= kMaxCheckedDepth;

  for (bool manage_all : {false, true}) {
    std::unique_ptr<broker::WorkloadRegistry> registry = broker::NewInMemoryRegistry();
    WebhookOptions options;
    options.manage_jobs_without_queue_name = manage_all;
    const Webhook hook([policies] { return policies; }, *registry, options);
    const std::string endpoint = manage_all ? "mutate (manage all)" : "mutate";

    std::string patch;
    if (absl::Status s = CheckAnswer(hook.Mutate(data), endpoint, decoded, strings_valid, &patch); !s.ok()) return s;
    if (!patch.empty() && check_patch) {
      absl::StatusOr<std::string> patched = ApplyPatch(patch, decoded->doc);
      if (!patched.ok()) {
        return absl::InternalError(absl::StrCat(endpoint, ": the patch ", patch, " does not apply: ",
                                                patched.status().message()));
      }
      std::string again;
      if (absl::Status s = CheckAnswer(hook.Mutate(*patched), endpoint, decoded, strings_valid, &again); !s.ok()) {
        return s;
      }
      if (!again.empty()) {
        return absl::InternalError(absl::StrCat(endpoint, ": not idempotent: ", patch, " then ", again));
      }
    }
    if (absl::Status s = CheckAnswer(hook.Validate(data), "validate", decoded, strings_valid, &patch); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace gangkeeper::fuzz
