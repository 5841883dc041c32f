// gangkeeper api: the JSON the API answers with for the broker's state:
// one workload, one ClusterQueue's status, and the times in them. Pure
// functions of a snapshot's values; used by the workload and ClusterQueue
// handlers (workloads.cc) and the audit reads. Private to the module.
#pragma once

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gangkeeper/broker/broker.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::api {

// RFC 3339 in UTC with microseconds; "" for an unset time.
std::string Time(absl::Time t);

// The API's state of a phase: pending, admitted (every phase between) or
// finished.
const char* ApiState(broker::Phase p);

// One workload as GET /v1/workloads answers it; `position` only for a
// pending one.
nlohmann::json WorkloadJson(const broker::WorkloadInfo& w, const std::optional<broker::QueuePosition>& position);

// One ClusterQueue's status as GET /v1/clusterqueues answers it.
nlohmann::json QueueJson(const broker::ClusterQueueView& v);

}  // namespace gangkeeper::api
