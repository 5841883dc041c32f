// gangkeeper: the broker's state as Prometheus metrics, with Kueue's names
// and labels where Kueue has the metric (KUEUE-SEMANTICS §Observability),
// so that existing Kueue dashboards work. Computed from the broker's
// published snapshot at scrape time; labels never name workloads.
#pragma once

#include "absl/status/status.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/metrics/registry.h"

namespace gangkeeper::api {

// `broker` must outlive `registry`'s scrapes.
[[nodiscard]] absl::Status RegisterBrokerMetrics(metrics::Registry& registry, broker::Broker* broker);

}  // namespace gangkeeper::api
