// gangkeeper admission: AdmissionReview v1 (see review.h).
#include "src/admission/review.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace gangkeeper::admission {
namespace {

constexpr size_t kMaxWarningBytes = 4096;

// Arena sizes: a 5 KB Job review takes about 20 KB of values and a few KB
// of parse stack; larger reviews spill into heap chunks, freed when the
// arena is recycled.
constexpr size_t kReviewValueBytes = 48 * 1024;
constexpr size_t kReviewStackBytes = 16 * 1024;
// Arenas kept for reuse: about as many as reviews in flight at once.
constexpr size_t kReviewArenasKept = 64;
// The document's initial value stack (RapidJSON's default).
constexpr size_t kReviewDocStack = 1024;
// The review text an arena keeps room for between reviews stays below this.
constexpr size_t kMaxKeptTextBytes = 64 * 1024;
// The encoding buffer each thread keeps (EncodeResponse) stays below this.
constexpr size_t kMaxKeptAnswerBytes = 64 * 1024;
// RapidJSON's recursive parser takes about a sixth fewer instructions per
// review than its iterative one, but recurses once per nesting level: it
// parses a review only this deep (a few frames per level: well under a
// megabyte of stack), and a deeper body is parsed again iteratively (its
// depth costs heap, not stack). A Job review is about 12 deep.
constexpr int kMaxRecursiveDepth = 256;

}  // namespace

struct ReviewArena {
  ReviewArena()
      : values(value_buffer, sizeof(value_buffer)), stacks(stack_buffer, sizeof(stack_buffer)) {}
  // Back to empty (heap chunks a large review added are freed).
  void Clear() {
    values.Clear();
    stacks.Clear();
    if (text.capacity() > kMaxKeptTextBytes) {
      std::string().swap(text);
    } else {
      text.clear();
    }
  }
  // The review's text, parsed in place: the document's strings point into
  // it (RapidJSON's in-situ mode), so none is copied character by character
  // onto a parse stack and then again into `values`.
  std::string text;
  alignas(16) char value_buffer[kReviewValueBytes];
  alignas(16) char stack_buffer[kReviewStackBytes];
  ReviewAllocator values;
  ReviewAllocator stacks;
};

namespace {

// The recycled arenas, shared by every thread (a review may be decoded on
// a loop thread and destroyed on the broker's).
struct ReviewArenaPool {
  absl::Mutex mu;
  std::vector<ReviewArena*> free ABSL_GUARDED_BY(mu);
};

ReviewArenaPool& ReviewArenas() {
  static auto* pool = new ReviewArenaPool();
  return *pool;
}

ReviewArenaPtr TakeReviewArena() {
  ReviewArenaPool& pool = ReviewArenas();
  {
    absl::MutexLock lock(&pool.mu);
    if (!pool.free.empty()) {
      ReviewArena* arena = pool.free.back();
      pool.free.pop_back();
      return ReviewArenaPtr(arena);
    }
  }
  return ReviewArenaPtr(new ReviewArena());
}

// The document's own SAX handler, refusing to go deeper than
// kMaxRecursiveDepth (the parse then ends with kParseErrorTermination).
class DepthLimited {
 public:
  explicit DepthLimited(ReviewDocument& doc) : doc_(doc) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return doc_.Null(); }
  bool Bool(bool b) { return doc_.Bool(b); }
  bool Int(int i) { return doc_.Int(i); }
  bool Uint(unsigned u) { return doc_.Uint(u); }
  bool Int64(int64_t i) { return doc_.Int64(i); }
  bool Uint64(uint64_t u) { return doc_.Uint64(u); }
  bool Double(double d) { return doc_.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) { return doc_.RawNumber(s, n, copy); }
  bool String(const char* s, rapidjson::SizeType n, bool copy) { return doc_.String(s, n, copy); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) { return doc_.Key(s, n, copy); }
  bool StartObject() { return Deeper() && doc_.StartObject(); }
  bool EndObject(rapidjson::SizeType members) {
    --depth_;
    return doc_.EndObject(members);
  }
  bool StartArray() { return Deeper() && doc_.StartArray(); }
  bool EndArray(rapidjson::SizeType elements) {
    --depth_;
    return doc_.EndArray(elements);
  }

 private:
  bool Deeper() {
    if (++depth_ <= kMaxRecursiveDepth) return true;
    too_deep_ = true;
    return false;
  }
  ReviewDocument& doc_;
  int depth_ = 0;
  bool too_deep_ = false;
};

// Parses `body` in place (a copy in the arena's text) into the review's
// document; the parse error, if any.
rapidjson::ParseResult ParseBody(Review* review, absl::string_view body) {
  std::string& text = review->arena->text;
  text.assign(body.data(), body.size());
  constexpr unsigned kFlags = rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag;
  rapidjson::ParseResult result;
  bool too_deep = false;
  auto recursively = [&](ReviewDocument& doc) {
    rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, ReviewAllocator> reader(&review->arena->stacks);
    rapidjson::GenericInsituStringStream<rapidjson::UTF8<>> in(text.data());
    DepthLimited handler(doc);
    result = reader.Parse<kFlags>(in, handler);
    too_deep = handler.too_deep();
    return !result.IsError();
  };
  review->doc.Populate(recursively);
  if (!too_deep) return result;
  // Deeper than the recursive parser goes: again, from a fresh copy (the
  // first parse rewrote the text in place), iteratively.
  text.assign(body.data(), body.size());
  review->doc.ParseInsitu<rapidjson::kParseIterativeFlag | rapidjson::kParseStopWhenDoneFlag>(text.data());
  return rapidjson::ParseResult(review->doc.GetParseError(), review->doc.GetErrorOffset());
}

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject()) return nullptr;
  auto it = v.FindMember(name);
  return it == v.MemberEnd() ? nullptr : &it->value;
}

std::string StringMember(const rapidjson::Value& v, const char* name) {
  const rapidjson::Value* m = Member(v, name);
  return m != nullptr && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : std::string();
}

// At most `max` bytes of `text`, never ending inside a UTF-8 sequence.
absl::string_view Utf8Prefix(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  for (int i = 0; i < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80; ++i) --end;
  return text.substr(0, end);
}

}  // namespace

void ReviewArenaRecycler::operator()(ReviewArena* arena) const {
  arena->Clear();
  ReviewArenaPool& pool = ReviewArenas();
  {
    absl::MutexLock lock(&pool.mu);
    if (pool.free.size() < kReviewArenasKept) {
      pool.free.push_back(arena);
      return;
    }
  }
  delete arena;
}

Review::Review(ReviewArenaPtr a)
    : arena(std::move(a)), doc(&arena->values, kReviewDocStack, &arena->stacks) {}

absl::StatusOr<std::unique_ptr<Review>> DecodeReview(absl::string_view body) {
  auto review = std::make_unique<Review>(TakeReviewArena());
  // In place, in the arena's copy of the text (one memcpy; NUL-terminated,
  // as in-situ parsing needs: a NUL inside the body ends it there, which
  // the parse reports as an error, as it did a NUL before).
  const rapidjson::ParseResult parsed = ParseBody(review.get(), body);
  if (parsed.IsError()) {
    return absl::InvalidArgumentError(absl::StrCat("body is not JSON: ", rapidjson::GetParseError_En(parsed.Code()),
                                                   " at offset ", parsed.Offset()));
  }
  const rapidjson::Value& root = review->doc;
  if (!root.IsObject()) return absl::InvalidArgumentError("body must be a JSON object (an AdmissionReview)");
  if (StringMember(root, "kind") != "AdmissionReview") {
    return absl::InvalidArgumentError("kind: must be AdmissionReview");
  }
  if (StringMember(root, "apiVersion") != "admission.k8s.io/v1") {
    return absl::InvalidArgumentError(
        "apiVersion: must be admission.k8s.io/v1 (set admissionReviewVersions: [v1] in the webhook configuration)");
  }
  const rapidjson::Value* req = Member(root, "request");
  if (req == nullptr || !req->IsObject()) return absl::InvalidArgumentError("request: must be an object");
  review->uid = StringMember(*req, "uid");
  if (review->uid.empty()) return absl::InvalidArgumentError("request.uid: must be a non-empty string");
  review->operation = StringMember(*req, "operation");
  if (review->operation != "CREATE" && review->operation != "UPDATE" && review->operation != "DELETE" &&
      review->operation != "CONNECT") {
    return absl::InvalidArgumentError("request.operation: must be CREATE, UPDATE, DELETE or CONNECT");
  }
  const rapidjson::Value* kind = Member(*req, "kind");
  if (kind == nullptr || !kind->IsObject()) return absl::InvalidArgumentError("request.kind: must be an object");
  review->group = StringMember(*kind, "group");
  review->version = StringMember(*kind, "version");
  review->kind = StringMember(*kind, "kind");
  if (review->kind.empty()) return absl::InvalidArgumentError("request.kind.kind: must be set");
  if (const rapidjson::Value* res = Member(*req, "resource")) review->resource = StringMember(*res, "resource");
  review->sub_resource = StringMember(*req, "subResource");
  review->namespace_name = StringMember(*req, "namespace");
  review->name = StringMember(*req, "name");
  if (const rapidjson::Value* user = Member(*req, "userInfo")) review->username = StringMember(*user, "username");
  const rapidjson::Value* dry = Member(*req, "dryRun");
  if (dry != nullptr && !dry->IsNull() && !dry->IsBool()) {
    return absl::InvalidArgumentError("request.dryRun: must be a boolean");
  }
  review->dry_run = dry != nullptr && dry->IsBool() && dry->GetBool();
  const rapidjson::Value* object = Member(*req, "object");
  if (object != nullptr && !object->IsNull()) {
    if (!object->IsObject()) return absl::InvalidArgumentError("request.object: must be an object or null");
    review->object = object;
  }
  const rapidjson::Value* old_object = Member(*req, "oldObject");
  if (old_object != nullptr && !old_object->IsNull()) {
    if (!old_object->IsObject()) return absl::InvalidArgumentError("request.oldObject: must be an object or null");
    review->old_object = old_object;
  }
  if ((review->operation == "CREATE" || review->operation == "UPDATE") && review->object == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("request.object: must be set for ", review->operation));
  }
  return review;
}

std::string EncodeResponse(const Response& r) {
  // The thread's buffer, kept between answers: writing costs no
  // allocation once it has grown to an answer's size.
  thread_local rapidjson::StringBuffer buf;
  thread_local rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  buf.Clear();
  w.Reset(buf);
  w.StartObject();
  w.Key("apiVersion");
  w.String("admission.k8s.io/v1");
  w.Key("kind");
  w.String("AdmissionReview");
  w.Key("response");
  w.StartObject();
  w.Key("uid");
  w.String(r.uid.data(), static_cast<rapidjson::SizeType>(r.uid.size()));
  w.Key("allowed");
  w.Bool(r.allowed);
  if (!r.allowed || !r.message.empty()) {
    w.Key("status");
    w.StartObject();
    if (r.code != 0) {
      w.Key("code");
      w.Int(r.code);
    }
    if (!r.reason.empty()) {
      w.Key("reason");
      w.String(r.reason.data(), static_cast<rapidjson::SizeType>(r.reason.size()));
    }
    w.Key("message");
    w.String(r.message.data(), static_cast<rapidjson::SizeType>(r.message.size()));
    w.EndObject();
  }
  if (!r.patch.empty()) {
    std::string encoded = absl::Base64Escape(r.patch);
    w.Key("patchType");
    w.String("JSONPatch");
    w.Key("patch");
    w.String(encoded.data(), static_cast<rapidjson::SizeType>(encoded.size()));
  }
  if (!r.warnings.empty()) {
    w.Key("warnings");
    w.StartArray();
    size_t used = 0;
    for (const std::string& warning : r.warnings) {
      if (used >= kMaxWarningBytes) break;
      absl::string_view text = Utf8Prefix(warning, kMaxWarningBytes - used);
      used += text.size();
      w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
    }
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  std::string out(buf.GetString(), buf.GetSize());
  if (buf.GetSize() > kMaxKeptAnswerBytes) {  // an unusually long answer: not kept
    buf.Clear();
    buf.ShrinkToFit();
  }
  return out;
}

}  // namespace gangkeeper::admission
