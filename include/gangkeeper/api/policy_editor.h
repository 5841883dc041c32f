// gangkeeper: where the HTTP API's changes to quota objects go.
//
// The API edits the overlay (model/overlay.h: what the API changed over
// the policy files) optimistically: it reads the overlay in effect, builds
// and validates the new one, and writes it only if nothing changed since
// the read. With one replica the broker takes the change directly
// (LocalPolicyEditor). With several replicas on etcd (replica/overlay.h)
// the overlay lives in one etcd key written with a revision compare by
// any replica, and the leader applies it; so two replicas changing quota
// at once never lose either change: one of them reads again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"

namespace gangkeeper::api {

class PolicyEditor {
 public:
  // What a change starts from.
  struct Current {
    std::shared_ptr<const model::PolicySet> policies;     // in effect; never null
    std::shared_ptr<const model::PolicyOverlay> overlay;  // the API's changes; may be null
    int64_t version = 0;                                  // opaque: handed back to Write
  };

  virtual ~PolicyEditor() = default;

  [[nodiscard]] virtual absl::StatusOr<Current> Read() = 0;
  // Makes `overlay` the API's changes, `policies` (the files with it) the
  // set in effect, if nothing changed since `base` was read; durable when
  // it returns OK. Aborted: changed meanwhile (read again and redo the
  // change). InvalidArgument: the policies cannot form a quota tree.
  // Anything else: not written (or not known to be), retry later.
  [[nodiscard]] virtual absl::Status Write(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                                           std::shared_ptr<const model::PolicySet> policies, const std::string& actor,
                                           const std::string& what) = 0;
};

// One replica: the broker's snapshot is read, an Event::Policies to
// `events` writes. Both must outlive the editor. Thread-safe.
std::unique_ptr<PolicyEditor> LocalPolicyEditor(broker::EventQueue* events, const broker::SnapshotSource* broker);

}  // namespace gangkeeper::api
