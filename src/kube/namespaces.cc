// gangkeeper: NamespaceWatcher (see namespaces.h).
#include "gangkeeper/kube/namespaces.h"

#include <utility>

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

ListThenWatchOptions LoopOptions(const NamespaceWatchOptions& o) {
  ListThenWatchOptions l;
  l.watch_timeout_seconds = o.watch_timeout_seconds;
  l.error_backoff = o.error_backoff;
  l.resync = o.resync;
  l.list_failure_note =
      "namespaceSelectors keep the labels known so far; RBAC must allow list and watch on namespaces";
  return l;
}

}  // namespace

NamespaceWatcher::NamespaceWatcher(Client* client, OnChange on_change, NamespaceWatchOptions options)
    : on_change_(std::move(on_change)),
      current_(std::make_shared<const NamespaceLabels>()),
      loop_(
          client, kNamespacesPath, [this](const ListResult& list) { Replace(list); },
          [this](const nlohmann::json& object, bool deleted) { Apply(object, deleted); }, LoopOptions(options)) {}

NamespaceWatcher::~NamespaceWatcher() { Stop(); }

void NamespaceWatcher::Start() { loop_.Start(); }

void NamespaceWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_flag_ = true;
  }
  loop_.Stop();
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

void NamespaceWatcher::Replace(const ListResult& list) {
  auto listed = std::make_shared<NamespaceLabels>();
  for (const nlohmann::json& item : list.items) {
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
}

}  // namespace gangkeeper::kube
