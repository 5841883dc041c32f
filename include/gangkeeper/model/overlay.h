// gangkeeper: quota objects changed through the API, kept over the policy
// files.
//
// The policy files (--policies) are the base; the API puts and deletes
// objects on top of them. The overlay is made durable with the broker's
// state, so a restart with the same files keeps every API change, and an
// edit of the files still applies to the objects the API never touched.
// Value types and pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::model {

struct PolicyOverlay {
  PolicySet put;                  // created or replaced through the API
  std::set<std::string> deleted;  // ObjectId()s deleted through the API
  // Bumped by every change; an object's resourceVersion is the generation
  // that last wrote it.
  uint64_t generation = 0;
};

// "Kind/namespace/name" ("Kind//name" for cluster-scoped kinds).
std::string ObjectId(absl::string_view kind, absl::string_view namespace_name, absl::string_view name);

// `base` with the overlay's deletions and puts applied.
PolicySet ApplyOverlay(const PolicySet& base, const PolicyOverlay& overlay);

}  // namespace gangkeeper::model
