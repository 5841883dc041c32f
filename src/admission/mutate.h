// gangkeeper admission: the suspend mutation (pure; see webhook.h).
#pragma once

#include "gangkeeper/admission/webhook.h"
#include "src/admission/review.h"

namespace gangkeeper::admission {

// The response to a mutating review: allowed, with a patch that suspends a
// managed workload at CREATE, or none when nothing needs to change.
Response MutateReview(const Review& review, const model::PolicySet& policies, const WebhookOptions& options);

// RFC 6902 pointer escaping of one token: "~" -> "~0", "/" -> "~1".
std::string EscapePointer(absl::string_view token);

}  // namespace gangkeeper::admission
