// gangkeeper api: POST /v1/apply, and the one way every quota change is
// made: an edit of the policy overlay, validated with every other object
// and written through the PolicyEditor (see handlers.h).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_store.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"

namespace gangkeeper::api {

using nlohmann::json;

namespace {

// An object as encoded, without the version the store gives it.
json ApplyComparable(json object) {
  if (object.contains("metadata") && object["metadata"].is_object()) object["metadata"].erase("resourceVersion");
  return object;
}

}  // namespace

server::HttpResponse Api::Apply(const Principal& who, const std::string& body) {
  model::PolicySet decoded;
  model::Diagnostics diagnostics;
  model::DecodeManifests(body, "request body", &decoded, &diagnostics);
  if (diagnostics.HasErrors()) return Invalid(diagnostics);
  std::vector<ObjectRef> refs = RefsOf(decoded);
  if (refs.empty()) return Error(absl::InvalidArgumentError("the bundle holds no quota object"), "items");
  for (const ObjectRef& ref : refs) {
    if (absl::Status may = MayWrite(who, ref, "patch"); !may.ok()) return Forbidden(who, std::string(may.message()));
  }
  json applied = json::array();
  return Edit(
      who,
      [&](const model::PolicySet& now, model::PolicyOverlay* overlay,
          std::string* what) -> std::optional<server::HttpResponse> {
        applied = json::array();
        // Like PUT: an object sent with a resourceVersion must still be at
        // it; one stale object and nothing is applied.
        std::vector<std::string> stale;
        for (const ObjectRef& ref : refs) {
          if (std::optional<std::string> s = Stale(now, ref, CurrentVersion(decoded, ref))) stale.push_back(*s);
        }
        if (!stale.empty()) {
          return Error(absl::AbortedError(
                           absl::StrCat(absl::StrJoin(stale, "; "),
                                        ": nothing was applied; GET them again and apply your changes to those")),
                       "metadata.resourceVersion");
        }
        std::vector<std::string> changed;
        for (const ObjectRef& ref : refs) {
          const std::vector<json> before = ObjectsOf(now, ref);
          // An object equal to the one in effect is reported unchanged.
          std::string action = before.empty() ? "created" : "configured";
          if (before.size() == 1 && ApplyComparable(before[0]) == ApplyComparable(ObjectsOf(decoded, ref).at(0))) {
            action = "unchanged";
          } else {
            changed.push_back(absl::StrCat(ref.kind, " ", ref.Display(), " ", action));
          }
          // Every object is put (the bundle is validated as sent), unless
          // none changed.
          PutObject(decoded, ref, absl::StrCat(overlay->generation), &overlay->put);
          overlay->deleted.erase(model::ObjectId(ref.kind, ref.namespace_name, ref.name));
          applied.push_back({{"kind", ref.kind}, {"namespace", ref.namespace_name}, {"name", ref.name},
                             {"action", action}});
        }
        // Nothing to write (and so nothing audited): answer as is.
        if (changed.empty()) return Ok({{"applied", applied}});
        *what = absl::StrCat("apply: ", absl::StrJoin(changed, ", "));
        return std::nullopt;
      },
      [&](const model::PolicySet&) { return Ok({{"applied", applied}}); });
}

// One change of the overlay: read what is in effect, let `change` edit a
// copy of the overlay (or answer early: 404, 409), validate the result
// with every other object, write it if nothing changed meanwhile, and
// answer with `answer` (given the set now in effect). A change that lost
// a race with another replica's is made again on the newer state.
server::HttpResponse Api::Edit(
    const Principal& who,
    const std::function<std::optional<server::HttpResponse>(const model::PolicySet&, model::PolicyOverlay*,
                                                            std::string*)>& change,
    const std::function<server::HttpResponse(const model::PolicySet&)>& answer) {
  if (cluster_ != nullptr) return EditInCluster(who, change, answer);
  constexpr int kAttempts = 8;
  absl::MutexLock lock(&edit_mu_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<PolicyEditor::Current> now = editor_->Read();
    if (!now.ok()) {
      return Error(absl::UnavailableError(absl::StrCat(
          "cannot read the quota objects in effect: ", now.status().message(), "; nothing changed, retry")));
    }
    auto overlay = std::make_shared<model::PolicyOverlay>(now->overlay != nullptr ? *now->overlay
                                                                                   : model::PolicyOverlay{});
    ++overlay->generation;
    std::string what;
    if (std::optional<server::HttpResponse> early = change(*now->policies, overlay.get(), &what)) return *early;
    model::Diagnostics problems;
    absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> next = policies_->Compose(overlay, &problems);
    if (!next.ok()) return Invalid(problems);
    absl::Status set = editor_->Write(*now, overlay, (*next)->policies, who.name, what);
    if (absl::IsAborted(set)) continue;  // another replica's change came first
    if (absl::IsInvalidArgument(set)) return server::ErrorResponse(422, set.message());
    if (!set.ok()) return Error(absl::UnavailableError(absl::StrCat(set.message(), "; retry")));
    // Durable: the store publishes it (no new version when this node's
    // leader did already).
    policies_->Adopt(overlay, nullptr);
    return answer(*(*next)->policies);
  }
  return Error(absl::AbortedError(absl::StrCat("the quota objects changed ", kAttempts,
                                               " times while this change was being made; nothing changed, retry")));
}

}  // namespace gangkeeper::api
