// gangkeeper store/etcd: watches (client.h: Watch, Client::StartWatch), one
// streamed POST to /v3/watch on its own connection and thread each.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/store/etcd/client.h"
#include "src/store/etcd/transport.h"

namespace gangkeeper::etcd {

using EventsFn = std::function<void(const std::vector<WatchEvent>&, int64_t)>;
using EndFn = std::function<void(const absl::Status&)>;

// Client::StartWatch over `transport`'s endpoints, with its failover: the
// watch is the caller's once etcd confirmed it. `transport` must outlive
// the watch.
absl::StatusOr<std::unique_ptr<Watch>> StartHttpWatch(Transport& transport, const std::string& key,
                                                      const WatchOptions& options, EventsFn on_events, EndFn on_end);

}  // namespace gangkeeper::etcd
