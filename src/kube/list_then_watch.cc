// gangkeeper: ListThenWatch (see list_then_watch.h).
#include "gangkeeper/kube/list_then_watch.h"

#include <utility>

#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::kube {

ListThenWatch::ListThenWatch(Client* client, std::string path, OnList on_list, OnObject on_object,
                             ListThenWatchOptions options)
    : client_(client),
      path_(std::move(path)),
      on_list_(std::move(on_list)),
      on_object_(std::move(on_object)),
      options_(std::move(options)) {}

ListThenWatch::~ListThenWatch() { Stop(); }

void ListThenWatch::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void ListThenWatch::RequestStop() {
  stopping_.store(true);
  absl::MutexLock lock(&mu_);
  stop_flag_ = true;
}

void ListThenWatch::Join() {
  if (thread_.joinable()) thread_.join();
}

void ListThenWatch::Stop() {
  RequestStop();
  if (thread_.joinable()) {
    client_->Shutdown();
    thread_.join();
  }
}

bool ListThenWatch::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_flag_), d);
  return !stop_flag_;
}

bool ListThenWatch::WatchFrom(std::string rv) {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  int failures = 0;
  const base::Stopwatch since_list;
  while (!stopping_.load() && since_list.Elapsed() < options_.resync) {
    WatchOptions wo;
    wo.resource_version = rv;
    wo.timeout_seconds = options_.watch_timeout_seconds;
    absl::Status s = client_->Watch(path_, wo, [&](const WatchEvent& e) {
      if (e.object.is_object() && e.object.contains("metadata") && e.object["metadata"].is_object()) {
        const nlohmann::json& v = e.object["metadata"].value("resourceVersion", nlohmann::json());
        if (v.is_string() && !v.get<std::string>().empty()) rv = v.get<std::string>();
      }
      if (e.type == "ADDED" || e.type == "MODIFIED") on_object_(e.object, /*deleted=*/false);
      if (e.type == "DELETED") on_object_(e.object, /*deleted=*/true);
      failures = 0;
      return !stopping_.load();
    });
    if (stopping_.load()) return false;
    if (absl::IsOutOfRange(s)) {
      log->info("watch {} expired at resourceVersion {}; listing again", path_, rv);
      return true;
    }
    if (!s.ok()) {
      log->warn("watch {}: {}", path_, s.message());
      if (++failures > options_.max_watch_failures) return true;
      if (!Sleep(options_.error_backoff)) return false;
    }
  }
  return !stopping_.load();
}

void ListThenWatch::Run() {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  bool told_absent = false;
  while (!stopping_.load()) {
    absl::StatusOr<ListResult> list = client_->List(path_);
    if (!list.ok()) {
      if (stopping_.load()) return;
      if (options_.absent_retry.has_value() && HttpCode(list.status()) == 404) {
        if (!told_absent) {
          log->info("{} is not served ({})", path_, options_.absent_note);
          told_absent = true;
        }
        lists_.fetch_add(1);
        on_list_(ListResult{});
        if (!Sleep(*options_.absent_retry)) return;
        continue;
      }
      if (options_.list_failure_note.empty()) {
        log->warn("list {}: {}", path_, list.status().message());
      } else {
        log->warn("list {}: {} ({})", path_, list.status().message(), options_.list_failure_note);
      }
      if (!Sleep(options_.error_backoff)) return;
      continue;
    }
    told_absent = false;
    lists_.fetch_add(1);
    on_list_(*list);
    if (!WatchFrom(list->resource_version)) return;
  }
}

void StartLoops(const std::vector<std::unique_ptr<ListThenWatch>>& loops) {
  for (const std::unique_ptr<ListThenWatch>& loop : loops) loop->Start();
}

void StopLoops(Client* client, const std::vector<std::unique_ptr<ListThenWatch>>& loops) {
  bool running = false;
  for (const std::unique_ptr<ListThenWatch>& loop : loops) {
    loop->RequestStop();
    running = running || loop->running();
  }
  if (!running) return;
  client->Shutdown();
  for (const std::unique_ptr<ListThenWatch>& loop : loops) loop->Join();
}

}  // namespace gangkeeper::kube
