// gangkeeper: the stored text of the held job objects, as the reconciler
// last read them, so that a release needs no GET (issue #26 item 2).
//
// The reconciler keeps here, per workload (namespace, name, kind), the
// newest version it read in a list or a watch event of a job object that
// is still held back (suspended), not finished and not being deleted, and
// takes it out when the object is released, ends or goes. The actuator
// builds a release's patch from that text and sends it guarded by the
// object's uid and resourceVersion (both `test` ops), exactly as it does
// after a GET: if the API server has stored anything since (the watch lags,
// someone edited the object), the guard fails with 422 and the actuator
// reads the object as before. An entry is a shortcut, never a source of
// truth: with it or without it the same patch reaches the same stored
// version.
//
// Bounded by `max_bytes` of object text: once full, objects not already
// here are not kept (their releases read the object first), and that is
// logged once. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/broker/registry.h"

namespace gangkeeper::kube {

struct HeldObjectsStats {
  size_t objects = 0;
  size_t bytes = 0;
  uint64_t refused = 0;  // objects not kept because the bound was reached
};

class HeldObjects {
 public:
  static constexpr size_t kDefaultMaxBytes = size_t{64} << 20;

  explicit HeldObjects(size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}
  HeldObjects(const HeldObjects&) = delete;
  HeldObjects& operator=(const HeldObjects&) = delete;

  // The stored object `text` (its JSON, as read) is instance `uid` of `key`
  // at `resource_version`, held back. Replaces what was kept for `key`.
  // An empty uid or resourceVersion keeps nothing (no guard could be built).
  void Put(const broker::WorkloadKey& key, std::string uid, std::string resource_version, std::string text);
  // Nothing is kept for `key` any more (released, ended, deleted, or no
  // longer a held workload).
  void Forget(const broker::WorkloadKey& key);
  // The text kept for instance `uid` of `key`; null when none is (or the
  // one kept is another instance's).
  std::shared_ptr<const std::string> Find(const broker::WorkloadKey& key, const std::string& uid) const;
  HeldObjectsStats stats() const;

 private:
  struct Entry {
    std::string uid;
    std::shared_ptr<const std::string> text;
  };
  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<broker::WorkloadKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gangkeeper::kube
