// gangkeeper replica: the shared read-then-watch loop (see watch_loop.h).
#include "src/replica/watch_loop.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::replica::internal {

void RunSessions(absl::Notification* stop, const std::string& logger, absl::string_view what,
                 const std::function<absl::Status()>& session, const std::function<void()>& on_restart) {
  constexpr absl::Duration kFirst = absl::Milliseconds(100);
  absl::Duration backoff = kFirst;
  while (!stop->HasBeenNotified()) {
    absl::Status s = session();
    if (stop->HasBeenNotified()) break;
    if (s.ok()) backoff = kFirst;
    base::GetLogger(logger)->warn("{}: stopped ({}); again in {}", what, s.ok() ? "the watch ended" : s.message(),
                                  absl::FormatDuration(backoff));
    if (on_restart) on_restart();
    if (stop->WaitForNotificationWithTimeout(backoff)) break;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::Status WatchUntilEnd(etcd::Client* client, const std::string& key, const etcd::WatchOptions& options,
                           std::function<void(const std::vector<etcd::WatchEvent>&, int64_t)> on_events,
                           absl::Notification* stop, absl::Duration tick,
                           const std::function<absl::Status()>& on_tick) {
  // Shared with the watch's end callback, which may outlive this frame
  // only until Cancel() returns; shared anyway to keep that obvious.
  struct End {
    absl::Mutex mu;
    absl::Status why = absl::UnavailableError("the watch ended");
    absl::Notification ended;
  };
  auto end = std::make_shared<End>();
  absl::StatusOr<std::unique_ptr<etcd::Watch>> watch =
      client->StartWatch(key, options, std::move(on_events), [end](const absl::Status& s) {
        {
          absl::MutexLock lock(&end->mu);
          if (!s.ok()) end->why = s;
        }
        end->ended.Notify();
      });
  if (!watch.ok()) return watch.status();
  absl::Status out = absl::OkStatus();
  while (!stop->WaitForNotificationWithTimeout(tick)) {
    if (end->ended.HasBeenNotified()) {
      absl::MutexLock lock(&end->mu);
      out = end->why;
      break;
    }
    if (on_tick) {
      if (absl::Status s = on_tick(); !s.ok()) {
        out = s;
        break;
      }
    }
  }
  (*watch)->Cancel();
  watch->reset();
  return out;
}

}  // namespace gangkeeper::replica::internal
