// gangkeeper: KueueObjectWatcher (see kueue_watch.h).
#include "gangkeeper/kube/kueue_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"

namespace gangkeeper::kube {
namespace {

using nlohmann::json;

std::string MetaString(const json& object, const char* field) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& v = object["metadata"].value(field, json());
  return v.is_string() ? v.get<std::string>() : "";
}

// What scheduling reads of an object: its spec, labels and (priority
// classes) value and description. Status, resourceVersion, managedFields
// and the like change without changing a decision.
json Significant(const json& object) {
  json out = json::object();
  if (!object.is_object()) return out;
  for (const char* f : {"apiVersion", "kind", "spec", "value", "description"}) {
    if (object.contains(f)) out[f] = object[f];
  }
  if (object.contains("metadata") && object["metadata"].is_object() && object["metadata"].contains("labels")) {
    out["labels"] = object["metadata"]["labels"];
  }
  return out;
}

// Items of a list may lack kind and apiVersion: the decoder needs them.
json WithType(const json& object, const KueueResource& r, KueueVersion version) {
  json out = object;
  if (!out.contains("kind")) out["kind"] = r.kind;
  if (!out.contains("apiVersion")) out["apiVersion"] = absl::StrCat(kKueueGroup, "/", KueueVersionName(version));
  return out;
}

}  // namespace

const std::vector<KueueResource>& KueueResources() {
  static const std::vector<KueueResource>* const kResources = new std::vector<KueueResource>{
      {"resourceflavors", "ResourceFlavor", false},
      {"cohorts", "Cohort", false},
      {"clusterqueues", "ClusterQueue", false},
      {"localqueues", "LocalQueue", true},
      {"workloadpriorityclasses", "WorkloadPriorityClass", false},
  };
  return *kResources;
}

KueueObjectWatcher::KueueObjectWatcher(Client* client, OnChange on_change, KueueWatchOptions options)
    : client_(client),
      on_change_(std::move(on_change)),
      options_(std::move(options)),
      objects_(KueueResources().size()),
      listed_(KueueResources().size(), false),
      current_(std::make_shared<const model::ClusterKueueObjects>()) {
  for (size_t i = 0; i < KueueResources().size(); ++i) {
    const KueueResource& r = KueueResources()[i];
    ListThenWatchOptions lo;
    lo.watch_timeout_seconds = options_.watch_timeout_seconds;
    lo.error_backoff = options_.error_backoff;
    lo.resync = options_.resync;
    lo.list_failure_note = absl::StrCat("the ", r.kind, "s known so far stay in effect; RBAC must allow list and watch on ",
                                        r.resource, ".", kKueueGroup);
    loops_.push_back(std::make_unique<ListThenWatch>(
        client_, KueuePath(options_.version, r.resource), [this, i](const ListResult& list) { OnList(i, list); },
        [this, i](const json& object, bool deleted) { Apply(i, object, deleted); }, std::move(lo)));
  }
}

KueueObjectWatcher::~KueueObjectWatcher() { Stop(); }

void KueueObjectWatcher::Start() { StartLoops(loops_); }

void KueueObjectWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_flag_ = true;
  }
  StopLoops(client_, loops_);
}

bool KueueObjectWatcher::synced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

bool KueueObjectWatcher::WaitSynced(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return synced_ || stop_flag_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return synced_;
}

std::shared_ptr<const model::ClusterKueueObjects> KueueObjectWatcher::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

KueueWatchStats KueueObjectWatcher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

// Decodes every object known (each with the policy files' decoder); an
// object that does not decode is logged (ClusterQueues stay, inactive).
void KueueObjectWatcher::PublishLocked() {
  auto next = std::make_shared<model::ClusterKueueObjects>();
  for (size_t i = 0; i < objects_.size(); ++i) {
    const KueueResource& r = KueueResources()[i];
    for (const auto& [key, entry] : objects_[i]) {
      const std::string source = absl::StrCat("the cluster (", r.resource, "/", key, ")");
      const size_t slash = key.find('/');
      const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
      model::Diagnostics problems;
      if (!model::DecodeClusterObject(entry.text, source, r.kind, name, next.get(), &problems)) {
        ++stats_.refused;
        base::GetLogger("kube")->warn("{} {}: refused for scheduling: {}", r.kind, key,
                                      problems.HasErrors() ? problems.ErrorSummary() : "not a " + r.kind);
      }
    }
  }
  current_ = std::move(next);
  ++stats_.publications;
}

void KueueObjectWatcher::Apply(size_t index, const json& object, bool deleted) {
  const KueueResource& r = KueueResources()[index];
  const std::string name = MetaString(object, "name");
  if (name.empty()) return;
  const std::string key = r.namespaced ? absl::StrCat(MetaString(object, "namespace"), "/", name) : name;
  std::shared_ptr<const model::ClusterKueueObjects> publish;
  absl::MutexLock order(&publish_mu_);
  {
    absl::MutexLock lock(&mu_);
    Objects& objects = objects_[index];
    auto it = objects.find(key);
    if (deleted) {
      if (it == objects.end()) return;
      objects.erase(it);
    } else {
      json full = WithType(object, r, options_.version);
      json significant = Significant(full);
      if (it != objects.end() && it->second.significant == significant) return;  // a status update
      Entry& e = objects[key];
      e.significant = std::move(significant);
      e.text = full.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (!synced_) return;  // published once every resource is listed
    PublishLocked();
    publish = current_;
  }
  if (on_change_) on_change_(std::move(publish));
}

void KueueObjectWatcher::Replace(size_t index, Objects listed) {
  std::shared_ptr<const model::ClusterKueueObjects> publish;
  absl::MutexLock order(&publish_mu_);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.lists;
    bool changed = listed.size() != objects_[index].size();
    for (auto a = listed.begin(), b = objects_[index].begin(); !changed && a != listed.end(); ++a, ++b) {
      changed = a->first != b->first || a->second.significant != b->second.significant;
    }
    objects_[index] = std::move(listed);
    listed_[index] = true;
    const bool first = !synced_ && std::all_of(listed_.begin(), listed_.end(), [](bool b) { return b; });
    if (first) synced_ = true;
    if (!synced_ || (!first && !changed)) return;
    PublishLocked();
    publish = current_;
  }
  if (on_change_) on_change_(std::move(publish));
}

void KueueObjectWatcher::OnList(size_t index, const ListResult& list) {
  const KueueResource& r = KueueResources()[index];
  Objects listed;
  for (const json& item : list.items) {
    const std::string name = MetaString(item, "name");
    if (name.empty()) continue;
    const std::string key = r.namespaced ? absl::StrCat(MetaString(item, "namespace"), "/", name) : name;
    Entry& e = listed[key];
    json object = WithType(item, r, options_.version);
    e.significant = Significant(object);
    e.text = object.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  Replace(index, std::move(listed));
}

}  // namespace gangkeeper::kube
