// gangkeeper admission: the endpoints (see webhook.h).
#include "gangkeeper/admission/webhook.h"

#include "gangkeeper/workload/workload.h"
#include "src/admission/json.h"
#include "src/admission/mutate.h"
#include "src/admission/review.h"
#include "src/admission/validate.h"

namespace gangkeeper::admission {
namespace {

// A request that is not an AdmissionReview: the error is the value; the
// HTTP answer is the route adapter's (server::ErrorResponse of `error`).
WebhookResult BadRequest(const absl::Status& status) {
  WebhookResult out;
  out.error = absl::InvalidArgumentError(status.message());
  out.outcome = "bad_request";
  return out;
}

// The review's kind and operation as metric labels (never free text).
void Label(const Review& r, WebhookResult* out) {
  if (const workload::KindInfo* k = workload::FindKind(r.group, r.kind)) out->kind = std::string(k->name);
  if (r.operation == "CREATE" || r.operation == "UPDATE" || r.operation == "DELETE" || r.operation == "CONNECT") {
    out->operation = r.operation;
  }
}

// The result of a validating answer `r` to `rv` (the denial for the audit).
WebhookResult ValidateResult(const Review& rv, const Response& r) {
  WebhookResult out{absl::OkStatus(), EncodeResponse(r), r.allowed ? "allowed" : "denied", std::nullopt};
  Label(rv, &out);
  if (!r.allowed) {
    const rapidjson::Value* object = rv.object != nullptr ? rv.object : rv.old_object;
    const rapidjson::Value* meta = Get(object, "metadata");
    Denial d;
    d.operation = rv.operation;
    d.kind = rv.kind;
    d.namespace_name = rv.namespace_name;
    d.name = rv.name.empty() ? Str(Get(meta, "name")) : rv.name;
    d.uid = Str(Get(meta, "uid"));
    d.username = rv.username;
    d.code = r.code;
    d.reason = r.reason;
    d.message = r.message;
    d.dry_run = rv.dry_run;
    out.denial = std::move(d);
  }
  return out;
}

}  // namespace

Webhook::Webhook(PolicyProvider policies, broker::WorkloadRegistry& registry, WebhookOptions options)
    : policies_(std::move(policies)), registry_(registry), options_(std::move(options)) {}

WebhookResult Webhook::Mutate(absl::string_view body) const {
  absl::StatusOr<std::unique_ptr<Review>> review = DecodeReview(body);
  if (!review.ok()) return BadRequest(review.status());
  std::shared_ptr<const model::PolicySet> policies = policies_();
  static const model::PolicySet kEmpty;
  Response r = MutateReview(**review, policies ? *policies : kEmpty, options_);
  WebhookResult out{absl::OkStatus(), EncodeResponse(r), r.patch.empty() ? "allowed" : "patched"};
  Label(**review, &out);
  return out;
}

WebhookResult Webhook::Validate(absl::string_view body) const {
  absl::StatusOr<std::unique_ptr<Review>> review = DecodeReview(body);
  if (!review.ok()) return BadRequest(review.status());
  std::shared_ptr<const model::PolicySet> policies = policies_();
  static const model::PolicySet kEmpty;
  Response r = ValidateReview(**review, policies ? *policies : kEmpty, registry_, options_);
  return ValidateResult(**review, r);
}

void Webhook::ValidateAsync(absl::string_view body, const broker::BlockingRunner& blocking,
                            absl::AnyInvocable<void(WebhookResult)> done) const {
  absl::StatusOr<std::unique_ptr<Review>> review = DecodeReview(body);
  if (!review.ok()) {
    done(BadRequest(review.status()));
    return;
  }
  std::shared_ptr<const model::PolicySet> policies = policies_();
  static const model::PolicySet kEmpty;
  Verdict verdict = DecideReview(**review, policies ? *policies : kEmpty, registry_, options_);
  if (verdict.write.op == RegistryWrite::Op::kNone) {
    done(ValidateResult(**review, verdict.response));
    return;
  }
  // The write's workload goes to the registry (moved, not copied); the
  // callback keeps the rest for the answer.
  RegistryWrite write = TakeWrite(&verdict);
  struct Pending {
    std::unique_ptr<Review> review;
    Verdict verdict;
    absl::AnyInvocable<void(WebhookResult)> done;
  };
  auto pending = std::make_unique<Pending>(Pending{*std::move(review), std::move(verdict), std::move(done)});
  WriteAsync(std::move(write), registry_, blocking, [p = std::move(pending)](absl::Status s) mutable {
    const Response r = ConcludeReview(*p->review, std::move(p->verdict), s);
    p->done(ValidateResult(*p->review, r));
  });
}

}  // namespace gangkeeper::admission
