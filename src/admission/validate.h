// gangkeeper admission: the validating rules (see webhook.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/broker/registry.h"
#include "gangkeeper/workload/workload.h"
#include "src/admission/review.h"

namespace gangkeeper::admission {

// The registry write a review asks for (never for dryRun): its answer
// waits for it.
struct RegistryWrite {
  enum class Op { kNone, kRegister, kUpdate, kRemove, kFinish };
  Op op = Op::kNone;
  workload::Workload workload;  // kRegister, kUpdate
  std::string cluster_queue;    // kRegister
  broker::WorkloadKey key;      // kRemove, kFinish
  std::string uid;              // kRemove, kFinish
};

// What the checks decided: the answer if `write` succeeds.
struct Verdict {
  Response response;
  RegistryWrite write;
};

// Decides a validating review from the policies and what `registry` knows
// (reads only: cheap, never blocks), naming the write to do before
// answering.
Verdict DecideReview(const Review& review, const model::PolicySet& policies, const broker::WorkloadRegistry& registry,
                     const WebhookOptions& options);
// The answer once the verdict's write returned `written`: a failed
// registration or update is a 503 denial (retry); a failed removal or
// finish changes nothing (the watch catches up).
Response ConcludeReview(const Review& review, Verdict verdict, const absl::Status& written);
// Does `write` now (blocking) / through the registry's *Async form (which
// takes the write's workload: nothing copies it).
absl::Status WriteNow(const RegistryWrite& write, broker::WorkloadRegistry& registry);
void WriteAsync(RegistryWrite write, broker::WorkloadRegistry& registry, const broker::BlockingRunner& blocking,
                broker::WriteDone done);
// Moves the write out of `verdict` for WriteAsync, leaving what
// ConcludeReview reads of it (the operation and the object's name).
RegistryWrite TakeWrite(Verdict* verdict);

// All three at once: decides, writes (blocking) and answers.
Response ValidateReview(const Review& review, const model::PolicySet& policies, broker::WorkloadRegistry& registry,
                        const WebhookOptions& options);

}  // namespace gangkeeper::admission
