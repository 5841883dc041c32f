// gangkeeper: the held job objects' stored text (see held_objects.h).
#include "gangkeeper/kube/held_objects.h"

#include <utility>

#include "gangkeeper/base/log.h"

namespace gangkeeper::kube {

void HeldObjects::Put(const broker::WorkloadKey& key, std::string uid, std::string resource_version,
                      std::string text) {
  if (uid.empty() || resource_version.empty()) {
    Forget(key);
    return;
  }
  bool first_refusal = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    const size_t kept = it == entries_.end() ? 0 : it->second.text->size();
    if (bytes_ - kept + text.size() > max_bytes_) {
      // Full: this object is not kept, and its older version goes too
      // (it would only cost its release a 422 and a read).
      first_refusal = refused_++ == 0;
      if (it != entries_.end()) {
        bytes_ -= kept;
        entries_.erase(it);
      }
    } else {
      bytes_ = bytes_ - kept + text.size();
      Entry& e = entries_[key];
      e.uid = std::move(uid);
      e.text = std::make_shared<const std::string>(std::move(text));
    }
  }
  if (first_refusal) {
    base::GetLogger("kube")->warn(
        "held objects: {} bytes of object text kept, the bound; releases of objects not kept read them first",
        max_bytes_);
  }
}

void HeldObjects::Forget(const broker::WorkloadKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= it->second.text->size();
  entries_.erase(it);
}

std::shared_ptr<const std::string> HeldObjects::Find(const broker::WorkloadKey& key, const std::string& uid) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.uid != uid) return nullptr;
  return it->second.text;
}

HeldObjectsStats HeldObjects::stats() const {
  absl::MutexLock lock(&mu_);
  return HeldObjectsStats{entries_.size(), bytes_, refused_};
}

}  // namespace gangkeeper::kube
