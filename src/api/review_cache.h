// gangkeeper api: a small expiring, bounded cache of the API server's
// review answers (kube_auth.h), and the token digest its keys use.
//
// Entries expire at the time given to Put (allowed and denied answers get
// different TTLs); at most `max_entries` are kept, the least recently used
// dropping out first. Errors are never cached (the caller does not Put
// them). Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gangkeeper::api {

// Lower-case hex SHA-256 of `data`: how a token is named in memory (a
// tokens file entry, a cache key) instead of the token itself.
std::string TokenSha256Hex(absl::string_view data);

template <typename V>
class ReviewCache {
 public:
  explicit ReviewCache(size_t max_entries) : max_entries_(max_entries == 0 ? 1 : max_entries) {}

  // The value under `key` if it has not expired at `now`.
  std::optional<V> Get(const std::string& key, absl::Time now) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    if (now >= it->second.expires) {
      order_.erase(it->second.position);
      entries_.erase(it);
      return std::nullopt;
    }
    order_.splice(order_.begin(), order_, it->second.position);
    return it->second.value;
  }

  void Put(const std::string& key, V value, absl::Time expires) {
    absl::MutexLock lock(&mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      it->second.value = std::move(value);
      it->second.expires = expires;
      order_.splice(order_.begin(), order_, it->second.position);
      return;
    }
    while (entries_.size() >= max_entries_ && !order_.empty()) {
      entries_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    entries_.emplace(key, Entry{std::move(value), expires, order_.begin()});
  }

  size_t size() const {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    V value;
    absl::Time expires;
    std::list<std::string>::iterator position;  // in order_
  };
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);  // most recently used first
};

}  // namespace gangkeeper::api
