// gangkeeper audit: the events the audit log writes about itself
// (audit.tail_missing, audit.retention_forced). Private to the module.
#pragma once

#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::audit {

// An event of the audit log about itself.
Event LogEvent(absl::Time now, const char* action, const char* reason, const nlohmann::json& details);

}  // namespace gangkeeper::audit
