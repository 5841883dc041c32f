// gangkeeper replica: the loop every etcd follower here shares (the
// follower's journal copy, the intake and overlay feeders):
// read what is there, watch for what comes after, and start again with a
// backoff when etcd or the watch goes away. Internal to src/replica.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::replica::internal {

// Calls `session` until `stop` is notified. After a session ends, logs why
// (on `logger`, naming `what`) and waits: 100 ms after one that ended OK
// (a watch closed by etcd), doubling up to 5 s while they keep failing.
// `on_restart` (may be empty) runs before each wait.
void RunSessions(absl::Notification* stop, const std::string& logger, absl::string_view what,
                 const std::function<absl::Status()>& session, const std::function<void()>& on_restart = {});

// Watches `key` with `options`, handing each batch of events to
// `on_events` (on the watch's thread), and calls `on_tick` (may be empty;
// on the caller's thread) every `tick`. Returns OK once `stop` is
// notified; otherwise when the watch ends (its error, or Unavailable) or
// `on_tick` fails (its error).
absl::Status WatchUntilEnd(etcd::Client* client, const std::string& key, const etcd::WatchOptions& options,
                           std::function<void(const std::vector<etcd::WatchEvent>&, int64_t)> on_events,
                           absl::Notification* stop, absl::Duration tick,
                           const std::function<absl::Status()>& on_tick = {});

}  // namespace gangkeeper::replica::internal
