// gangkeeper admission: AdmissionReview v1 decoding and encoding.
//
// DecodeReview parses the body once with RapidJSON (recursively when the
// body has few enough brackets to bound the depth, else iteratively, so
// nesting cannot exhaust the stack) and checks the envelope; the object stays
// in the Review's own document for the handlers to read. The document and
// the parser's stacks live in a recycled arena (a review of up to some tens
// of KB parses without touching the heap); the arena goes back to a
// bounded pool when the Review is destroyed, on whichever thread. EncodeResponse
// writes the AdmissionReview v1 answer with the patch base64-encoded.
// Thread-compatible.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rapidjson/document.h"

namespace gangkeeper::admission {

// The memory a Review is parsed into (review.cc).
struct ReviewArena;
struct ReviewArenaRecycler {
  void operator()(ReviewArena* arena) const;
};
using ReviewArenaPtr = std::unique_ptr<ReviewArena, ReviewArenaRecycler>;
using ReviewAllocator = rapidjson::MemoryPoolAllocator<>;
// A Document whose parse stacks are pooled too; its values are plain
// rapidjson::Value.
using ReviewDocument = rapidjson::GenericDocument<rapidjson::UTF8<>, ReviewAllocator, ReviewAllocator>;

struct Review {
  explicit Review(ReviewArenaPtr arena);
  Review(const Review&) = delete;
  Review& operator=(const Review&) = delete;

  ReviewArenaPtr arena;  // declared first: destroyed after the document in it
  ReviewDocument doc;    // owns everything below
  std::string uid;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  bool dry_run = false;
  std::string group, version, kind;  // request.kind
  std::string resource, sub_resource;
  std::string namespace_name, name;
  std::string username;
  const rapidjson::Value* object = nullptr;      // null for DELETE
  const rapidjson::Value* old_object = nullptr;  // UPDATE, DELETE
};

// InvalidArgument (naming the field) when `body` is not an AdmissionReview
// v1 with a request, a uid, an operation and a kind.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Review>> DecodeReview(absl::string_view body);

struct Response {
  std::string uid;
  bool allowed = true;
  int code = 0;  // status.code on a denial (403 for policy, 422 for invalid objects, 503 transient)
  std::string reason;   // status.reason, e.g. "Forbidden"
  std::string message;  // status.message
  std::string patch;    // RFC 6902 JSON text; empty = no patch
  std::vector<std::string> warnings;
};

// The AdmissionReview v1 answer. Warnings are cut to 4096 bytes in all, never
// inside a UTF-8 character (the API server's limit is per warning; kubectl
// prints them one per line).
std::string EncodeResponse(const Response& response);

}  // namespace gangkeeper::admission
