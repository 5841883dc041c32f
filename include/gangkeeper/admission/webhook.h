// gangkeeper: the admission webhook's two endpoints (DESIGN §2, §6).
//
// Mutate() suspends managed workloads at CREATE (spec.suspend,
// spec.runPolicy.suspend, or the gangkeeper.io/admission scheduling gate on
// Pods) with minimal, idempotent RFC 6902 patches; it is a pure function of
// the review and the policies. Validate() denies what can never run, with
// the numbers and the fix, warns about what will happen, and tells the
// registry about created, changed, deleted and finished workloads (never
// for dryRun). A body that is not an AdmissionReview v1 is an error value
// (WebhookResult::error, InvalidArgument) that the route adapter answers
// through server::ErrorResponse, the one Status -> HTTP table (400); every
// other answer is HTTP 200 with an AdmissionReview.
// Thread-safe: handlers run on many server threads at once.
// ValidateAsync is Validate for an event loop: no thread waits for the
// registration's durable acknowledgement.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/trainjob.h"

namespace gangkeeper::admission {

struct WebhookOptions {
  // Manage workloads without a queue-name label when their namespace has a
  // LocalQueue named "default" (the label is added by /mutate).
  bool manage_jobs_without_queue_name = false;
  // The user allowed to un-suspend workloads / remove the scheduling gate
  // (gangkeeper's own service account in a cluster).
  std::string controller_username = "system:serviceaccount:gangkeeper-system:gangkeeper";
  // Whether a review's content is taken as the truth (DESIGN §2 trust
  // model). True without a Kubernetes API (--kube none): reviews are then
  // the only word on what exists. False with one: anything that can reach
  // the webhook port can send a review, so a review may deny and warn, and
  // registers a CREATE only as unconfirmed (Workload::unconfirmed: neither
  // queued nor admitted until the reconciler reads the stored object);
  // deletions, completions and changes are taken from the API server alone.
  bool trust_reviews = true;
  // Whether userInfo.username can be believed: the caller proved it is the
  // API server with a client certificate (--client-ca). Otherwise audit
  // events name the user as claimed.
  bool reviews_authenticated = false;
  // With untrusted reviews, at most this many workloads known only from
  // reviews are tracked; past it a CREATE registers nothing (the watch
  // registers what the API server stores), so a flood of forged reviews
  // cannot grow memory or the journal without bound.
  size_t max_unconfirmed = 10'000;
  // The Kubeflow Trainer runtimes TrainJobs name (a TrainJob's pod sets are
  // its runtime's). A TrainJob whose runtime is not known is allowed with a
  // warning naming it and left to the reconciler, which registers it once
  // the runtime shows.
  workload::TrainingRuntimeLookup training_runtime;
};

// A review the webhook denied, for the audit log.
struct Denial {
  std::string operation;  // CREATE, UPDATE, DELETE
  std::string kind;       // the object's kind (Job, PyTorchJob, ...)
  std::string namespace_name;
  std::string name;
  std::string uid;       // the object's metadata.uid, when it has one
  std::string username;  // request.userInfo.username
  int code = 0;          // status.code of the answer
  std::string reason;    // status.reason
  std::string message;   // status.message: what the user was told
  bool dry_run = false;
};

struct WebhookResult {
  // Not OK (InvalidArgument) when the request is not an AdmissionReview v1:
  // the HTTP answer is then this status, mapped by the route adapter
  // (node/wiring.cc: server::ErrorResponse, 400), its one owner; body is
  // empty.
  absl::Status error;
  std::string body;  // the AdmissionReview v1 answer (HTTP 200) when error is OK
  // For metrics: "allowed", "patched", "denied" or "bad_request".
  const char* outcome = "allowed";
  std::optional<Denial> denial;  // set when outcome is "denied"
  // For metrics, bounded: a workload kind gangkeeper knows (Job, PyTorchJob,
  // Pod, ...) or "other"; CREATE, UPDATE, DELETE, CONNECT or "other".
  std::string kind = "other";
  std::string operation = "other";
};

// The current policies; called once per review.
using PolicyProvider = std::function<std::shared_ptr<const model::PolicySet>()>;

class Webhook {
 public:
  Webhook(PolicyProvider policies, broker::WorkloadRegistry& registry, WebhookOptions options);

  WebhookResult Mutate(absl::string_view body) const;
  WebhookResult Validate(absl::string_view body) const;
  // Validate without a thread waiting on the registry: decodes and checks
  // on the caller's thread (cheap, never blocks), then hands the registry
  // write (registration, ...) to the registry's *Async form and calls
  // `done` exactly once with the same result Validate gives, once that
  // write is durable: on the thread that has the answer (the broker's, or
  // a `blocking` worker for a registry that can only block), or on the
  // caller's before returning when there is nothing to write. `done` must
  // not block.
  void ValidateAsync(absl::string_view body, const broker::BlockingRunner& blocking,
                     absl::AnyInvocable<void(WebhookResult)> done) const;

 private:
  PolicyProvider policies_;
  broker::WorkloadRegistry& registry_;
  WebhookOptions options_;
};

}  // namespace gangkeeper::admission
