// gangkeeper admission: the validating rules (see webhook.h).
#pragma once

#include "gangkeeper/admission/webhook.h"
#include "gangkeeper/broker/registry.h"
#include "src/admission/review.h"

namespace gangkeeper::admission {

// Decides a validating review and, unless dryRun, tells `registry` about
// created, changed, deleted and finished workloads.
Response ValidateReview(const Review& review, const model::PolicySet& policies, broker::WorkloadRegistry& registry,
                        const WebhookOptions& options);

}  // namespace gangkeeper::admission
