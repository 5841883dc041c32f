// gangkeeper fuzzing: the AdmissionReview decoder and the response encoder.
//
// Input: an HTTP request body. DecodeReview must accept it or refuse it with
// InvalidArgument; an accepted review must satisfy what review.h promises
// (uid, operation, kind set; an object for CREATE and UPDATE), and the
// response built from its strings must be an AdmissionReview that parses,
// carries the uid unchanged and is valid UTF-8 when those strings are
// (warnings are cut to 4096 bytes, which must not split a character).
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "src/admission/review.h"
#include "test/fuzz/fuzz_target.h"

namespace gangkeeper::fuzz {
namespace {

using admission::Review;

absl::Status CheckReview(const Review& r) {
  const std::string what = "DecodeReview";
  if (absl::Status s = Expect(!r.uid.empty(), what, "accepted an empty uid"); !s.ok()) return s;
  if (absl::Status s = Expect(r.operation == "CREATE" || r.operation == "UPDATE" || r.operation == "DELETE" ||
                                  r.operation == "CONNECT",
                              what, absl::StrCat("accepted operation \"", r.operation, "\""));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Expect(!r.kind.empty(), what, "accepted an empty request.kind.kind"); !s.ok()) return s;
  if (absl::Status s = Expect(r.object == nullptr || r.object->IsObject(), what, "object is not a JSON object");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          Expect(r.old_object == nullptr || r.old_object->IsObject(), what, "oldObject is not a JSON object");
      !s.ok()) {
    return s;
  }
  return Expect(r.object != nullptr || (r.operation != "CREATE" && r.operation != "UPDATE"), what,
                absl::StrCat(r.operation, " accepted without an object"));
}

}  // namespace

absl::Status FuzzOneInput(absl::string_view data) {
  absl::StatusOr<std::unique_ptr<Review>> decoded = admission::DecodeReview(data);
  if (!decoded.ok()) return ExpectCleanError(decoded.status(), "DecodeReview");
  const Review& review = **decoded;
  if (absl::Status s = CheckReview(review); !s.ok()) return s;

  // A denial that repeats the request's strings, the way the handlers quote
  // names in messages and warnings.
  admission::Response response;
  response.uid = review.uid;
  response.allowed = false;
  response.code = 403;
  response.reason = "Forbidden";
  response.message = absl::StrCat(review.kind, " ", review.namespace_name, "/", review.name, " by ", review.username);
  response.patch = absl::StrCat(R"([{"op":"add","path":"/metadata/labels/x","value":")", review.group, "\"}]");
  response.warnings = {review.name, review.username, review.namespace_name, review.resource, review.sub_resource};
  const std::string out = admission::EncodeResponse(response);

  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(out.data(), out.size());
  if (absl::Status s = Expect(!doc.HasParseError() && doc.IsObject(), "EncodeResponse", "output is not a JSON object");
      !s.ok()) {
    return s;
  }
  const rapidjson::Value& root = doc;
  auto response_it = root.FindMember("response");
  if (absl::Status s = Expect(response_it != root.MemberEnd() && response_it->value.IsObject(), "EncodeResponse",
                              "no response object");
      !s.ok()) {
    return s;
  }
  auto uid_it = response_it->value.FindMember("uid");
  if (absl::Status s = Expect(uid_it != response_it->value.MemberEnd() && uid_it->value.IsString() &&
                                  std::string(uid_it->value.GetString(), uid_it->value.GetStringLength()) == review.uid,
                              "EncodeResponse", "response.uid differs from request.uid");
      !s.ok()) {
    return s;
  }
  const bool inputs_valid = IsValidUtf8(response.message) && IsValidUtf8(response.patch) && IsValidUtf8(review.uid) &&
                            IsValidUtf8(review.name) && IsValidUtf8(review.username) &&
                            IsValidUtf8(review.namespace_name) && IsValidUtf8(review.resource) &&
                            IsValidUtf8(review.sub_resource);
  return Expect(!inputs_valid || IsValidUtf8(out), "EncodeResponse",
                "valid UTF-8 strings came out as invalid UTF-8 (a character cut in two?)");
}

}  // namespace gangkeeper::fuzz
