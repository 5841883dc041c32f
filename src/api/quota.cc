// gangkeeper api: GET, PUT and DELETE of quota objects by their
// Kubernetes-style paths (see handlers.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "src/api/handlers.h"
#include "src/api/reply.h"
#include "src/api/scope.h"

namespace gangkeeper::api {

using nlohmann::json;

// GET list or one: a list holds what `who` may read; one object outside
// that is 403 whether or not it exists (auth.h).
server::HttpResponse Api::GetObjects(const Principal& who, const ObjectRef& ref) const {
  std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
  const ReadScope scope(who, snap->policies());
  if (!scope.ReadsQuota()) return Forbidden(who, absl::StrCat("read ", ref.kind, " objects"));
  if (!ref.namespace_name.empty() && !scope.Namespace(ref.namespace_name)) {
    return Forbidden(who, absl::StrCat("read ", ref.kind, " objects in ", ref.namespace_name));
  }
  if (!ref.name.empty() && !scope.Object(ref.kind, ref.namespace_name, ref.name)) {
    return Forbidden(who, absl::StrCat("read ", ref.kind, " ", ref.Display()));
  }
  std::vector<json> items;
  Visit(snap->policies(), ref, [&](const auto& object) {
    if (scope.Object(ref.kind, NamespaceOf(object), NameOf(object))) items.push_back(EncodeAt(object, ref.api_version));
  });
  if (ref.name.empty()) return Ok({{"apiVersion", ref.api_version}, {"kind", ref.kind + "List"}, {"items", items}});
  if (items.empty()) {
    return Error(absl::NotFoundError(absl::StrCat(ref.kind, " \"", ref.Display(), "\" does not exist")));
  }
  return Ok(items[0]);
}

// PUT (create or replace) and DELETE of one object; POST /v1/apply of a bundle.
server::HttpResponse Api::Change(const Principal& who, const ObjectRef& ref, const std::string& method,
                                 const std::string& body) {
  if (absl::Status may = MayWrite(who, ref, method == "DELETE" ? "delete" : "update"); !may.ok()) return Forbidden(who, std::string(may.message()));
  const bool remove = method == "DELETE";
  model::PolicySet decoded;
  std::string sent_version;
  if (!remove) {
    model::Diagnostics diagnostics;
    model::DecodeManifests(body, "request body", &decoded, &diagnostics);
    if (diagnostics.HasErrors()) return Invalid(diagnostics);
    std::vector<json> got = ObjectsOf(decoded, ObjectRef{ref.api_version, ref.kind, ref.namespace_name, ""});
    if (got.size() != 1 || CountObjects(decoded) != 1) {
      return Error(absl::InvalidArgumentError(absl::StrCat("the body must hold exactly one ", ref.kind, " (it holds ",
                                                           CountObjects(decoded), " object(s), ", got.size(),
                                                           " of that kind)")),
                   "kind");
    }
    const json& object = got[0];
    const std::string name = object["metadata"].value("name", "");
    if (name != ref.name) {
      return Error(absl::InvalidArgumentError(
                       absl::StrCat("metadata.name \"", name, "\" does not match the path's \"", ref.name, "\"")),
                   "metadata.name");
    }
    sent_version = object["metadata"].value("resourceVersion", "");
  }
  const std::string id = model::ObjectId(ref.kind, ref.namespace_name, ref.name);
  int status = 200;
  return Edit(
      who,
      [&](const model::PolicySet& now, model::PolicyOverlay* overlay,
          std::string* what) -> std::optional<server::HttpResponse> {
        const bool exists = !ObjectsOf(now, ref).empty();
        if (remove) {
          if (!exists) {
            return Error(absl::NotFoundError(absl::StrCat(ref.kind, " \"", ref.Display(), "\" does not exist")));
          }
          EraseObject(&overlay->put, ref);
          overlay->deleted.insert(id);
          *what = absl::StrCat("DELETE ", ref.kind, " ", ref.Display());
          return std::nullopt;
        }
        if (std::optional<std::string> stale = Stale(now, ref, sent_version)) {
          return Error(absl::AbortedError(absl::StrCat(*stale, ": GET it again and apply your change to that")),
                       "metadata.resourceVersion");
        }
        PutObject(decoded, ref, absl::StrCat(overlay->generation), &overlay->put);
        overlay->deleted.erase(id);
        *what = absl::StrCat("PUT ", ref.kind, " ", ref.Display());
        status = exists ? 200 : 201;
        return std::nullopt;
      },
      [&](const model::PolicySet& effective) {
        json answer;
        if (remove) {
          answer = {{"kind", "Status"}, {"status", "Success"}, {"details", {{"kind", ref.kind}, {"name", ref.name}}}};
        } else {
          std::vector<json> now = ObjectsOf(effective, ref);
          if (!now.empty()) answer = now[0];
        }
        server::HttpResponse r = Ok(answer);
        r.status = status;
        return r;
      });
}

}  // namespace gangkeeper::api
