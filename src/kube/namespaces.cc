// gangkeeper: NamespaceWatcher (see namespaces.h).
#include "gangkeeper/kube/namespaces.h"

#include <utility>

#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::kube {
namespace {

constexpr char kNamespacesPath[] = "/api/v1/namespaces";

// metadata.labels of a Namespace object (string values only).
model::Labels NamespaceLabelsOf(const nlohmann::json& object) {
  model::Labels out;
  const nlohmann::json* meta = object.is_object() && object.contains("metadata") ? &object["metadata"] : nullptr;
  if (meta == nullptr || !meta->is_object() || !meta->contains("labels") || !(*meta)["labels"].is_object()) {
    return out;
  }
  for (const auto& [k, v] : (*meta)["labels"].items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string NamespaceNameOf(const nlohmann::json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  return object["metadata"].value("name", "");
}

}  // namespace

NamespaceWatcher::NamespaceWatcher(Client* client, OnChange on_change, NamespaceWatchOptions options)
    : client_(client),
      on_change_(std::move(on_change)),
      options_(options),
      current_(std::make_shared<const NamespaceLabels>()) {}

NamespaceWatcher::~NamespaceWatcher() { Stop(); }

void NamespaceWatcher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void NamespaceWatcher::Stop() {
  stopping_.store(true);
  {
    absl::MutexLock lock(&mu_);
    stop_flag_ = true;
  }
  if (thread_.joinable()) {
    client_->Shutdown();
    thread_.join();
  }
}

bool NamespaceWatcher::synced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

bool NamespaceWatcher::WaitSynced(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return synced_ || stop_flag_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return synced_;
}

std::shared_ptr<const NamespaceLabels> NamespaceWatcher::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

bool NamespaceWatcher::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_flag_), d);
  return !stop_flag_;
}

void NamespaceWatcher::Publish(std::shared_ptr<const NamespaceLabels> next) {
  {
    absl::MutexLock lock(&mu_);
    current_ = next;
  }
  if (on_change_) on_change_(std::move(next));
}

void NamespaceWatcher::Apply(const nlohmann::json& object, bool deleted) {
  const std::string name = NamespaceNameOf(object);
  if (name.empty()) return;
  std::shared_ptr<const NamespaceLabels> now = current();
  auto it = now->find(name);
  if (deleted) {
    if (it == now->end()) return;
    auto next = std::make_shared<NamespaceLabels>(*now);
    next->erase(name);
    Publish(std::move(next));
    return;
  }
  model::Labels labels = NamespaceLabelsOf(object);
  if (it != now->end() && it->second == labels) return;  // another field changed: nothing to re-evaluate
  auto next = std::make_shared<NamespaceLabels>(*now);
  (*next)[name] = std::move(labels);
  Publish(std::move(next));
}

bool NamespaceWatcher::WatchFrom(std::string rv) {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  int failures = 0;
  const base::Stopwatch since_list;
  while (!stopping_.load() && since_list.Elapsed() < options_.resync) {
    WatchOptions wo;
    wo.resource_version = rv;
    wo.timeout_seconds = options_.watch_timeout_seconds;
    absl::Status s = client_->Watch(kNamespacesPath, wo, [&](const WatchEvent& e) {
      if (e.object.is_object() && e.object.contains("metadata") && e.object["metadata"].is_object()) {
        std::string new_rv = e.object["metadata"].value("resourceVersion", "");
        if (!new_rv.empty()) rv = new_rv;
      }
      if (e.type == "ADDED" || e.type == "MODIFIED") Apply(e.object, /*deleted=*/false);
      if (e.type == "DELETED") Apply(e.object, /*deleted=*/true);
      failures = 0;
      return !stopping_.load();
    });
    if (stopping_.load()) return false;
    if (absl::IsOutOfRange(s)) {
      log->info("watch {} expired at resourceVersion {}; listing again", kNamespacesPath, rv);
      return true;
    }
    if (!s.ok()) {
      log->warn("watch {}: {}", kNamespacesPath, s.message());
      if (++failures > 5) return true;
      if (!Sleep(options_.error_backoff)) return false;
    }
  }
  return !stopping_.load();
}

void NamespaceWatcher::Run() {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  while (!stopping_.load()) {
    absl::StatusOr<ListResult> list = client_->List(kNamespacesPath);
    if (!list.ok()) {
      if (stopping_.load()) return;
      log->warn("list {}: {} (namespaceSelectors keep the labels known so far; RBAC must allow list and watch "
                "on namespaces)",
                kNamespacesPath, list.status().message());
      if (!Sleep(options_.error_backoff)) return;
      continue;
    }
    auto listed = std::make_shared<NamespaceLabels>();
    for (const nlohmann::json& item : list->items) {
      const std::string name = NamespaceNameOf(item);
      if (!name.empty()) (*listed)[name] = NamespaceLabelsOf(item);
    }
    // A list is authoritative; publish only when it differs (a resync of an
    // unchanged cluster re-evaluates nothing).
    bool first;
    {
      absl::MutexLock lock(&mu_);
      first = !synced_;
    }
    if (first || *listed != *current()) Publish(std::move(listed));
    {
      absl::MutexLock lock(&mu_);
      synced_ = true;
    }
    if (!WatchFrom(list->resource_version)) return;
  }
}

}  // namespace gangkeeper::kube
