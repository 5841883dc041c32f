// gangkeeper: the list-then-watch loop every watcher of the cluster runs
// (NamespaceWatcher, KueueObjectWatcher, TrainingRuntimeCache).
//
// One thread lists a collection, hands the complete list to `on_list`, then
// watches from the list's resourceVersion, handing every ADDED, MODIFIED and
// DELETED object to `on_object`. A watch that ends (the server's timeout)
// resumes from the last resourceVersion seen (BOOKMARKs included); one that
// expired (410, the client's OutOfRange) lists again; so does a watch that
// failed more than `max_watch_failures` times in a row (each failure waits
// `error_backoff`), and a healthy watch every `resync`, since a list is
// authoritative and repairs anything a watch missed. A failed list is
// logged with `list_failure_note` (what stays in effect, what RBAC needs)
// and tried again after `error_backoff`. A collection the API does not
// serve (404: its CRD is not installed) is, when `absent_retry` is set,
// listed as empty and asked for again every `absent_retry`.
//
// Stop ends the loop promptly: it wakes a backoff wait, shuts the client
// down (which ends an open watch and any call in flight) and joins the
// thread. When several loops share one client, RequestStop each, shut the
// client down once, then Join each (StopLoops).
// Thread-safe. The callbacks run on the loop's thread, one at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gangkeeper/kube/client.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

struct ListThenWatchOptions {
  // The server ends each watch after this; the loop watches again from the
  // last resourceVersion.
  int64_t watch_timeout_seconds = 300;
  // The wait after a failed list or watch.
  absl::Duration error_backoff = absl::Seconds(1);
  // A full list again this often, even when the watch is healthy.
  absl::Duration resync = absl::Minutes(10);
  // Watch failures in a row (without an event between them) before the
  // loop lists again.
  int max_watch_failures = 5;
  // Appended in parentheses to the log line of a failed list.
  std::string list_failure_note;
  // A collection the API does not serve (the list answered 404: the CRD
  // is not installed). Set, the loop hands `on_list` an empty list (the
  // collection counts as listed and empty), logs "PATH is not served
  // (absent_note)" once (again only after a list succeeded), and lists
  // again after `absent_retry` (no watch). Unset, a 404 is a failed list
  // like any other.
  std::optional<absl::Duration> absent_retry;
  std::string absent_note;
};

class ListThenWatch {
 public:
  // A complete list (the first, after 410, after repeated failures, every
  // resync; with `absent_retry`, an empty one for a collection not served).
  using OnList = std::function<void(const ListResult& list)>;
  // One object from the watch; `deleted` for DELETED events.
  using OnObject = std::function<void(const nlohmann::json& object, bool deleted)>;

  // `client` must outlive the loop. `path` is the collection
  // ("/api/v1/namespaces").
  ListThenWatch(Client* client, std::string path, OnList on_list, OnObject on_object,
                ListThenWatchOptions options = {});
  ~ListThenWatch();  // Stop()
  ListThenWatch(const ListThenWatch&) = delete;
  ListThenWatch& operator=(const ListThenWatch&) = delete;

  void Start();
  // RequestStop(), the client's Shutdown(), Join().
  void Stop();
  // Marks the loop stopping and wakes its backoff wait; an open watch ends
  // only when the client is shut down.
  void RequestStop();
  void Join();
  // Started and not joined yet.
  bool running() const { return thread_.joinable(); }
  const std::string& path() const { return path_; }
  // Lists handed to `on_list` (the first, resyncs, after 410 or failures,
  // and the empty ones of a collection not served).
  uint64_t lists() const { return lists_.load(); }

 private:
  void Run();
  // Watches from `rv` until resync, an expired watch or repeated failures
  // (true: list again) or a stop (false).
  bool WatchFrom(std::string rv);
  // Waits `d` unless stopped first; false when stopped.
  bool Sleep(absl::Duration d);

  Client* const client_;
  const std::string path_;
  const OnList on_list_;
  const OnObject on_object_;
  const ListThenWatchOptions options_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> lists_{0};
  absl::Mutex mu_;
  bool stop_flag_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Loops of one watcher that share `client`: StartLoops starts each (again a
// no-op); StopLoops marks each stopping, shuts the client down once when
// any is running (ending every open watch) and joins each.
void StartLoops(const std::vector<std::unique_ptr<ListThenWatch>>& loops);
void StopLoops(Client* client, const std::vector<std::unique_ptr<ListThenWatch>>& loops);

}  // namespace gangkeeper::kube
