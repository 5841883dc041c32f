// gangkeeper: where the HTTP API's changes to quota objects go.
//
// The API edits the overlay (model/overlay.h: what the API changed over
// the policy files) optimistically: it reads the overlay in effect, builds
// the new one and has the node's model::PolicyStore validate it with the
// files, and writes it only if nothing changed since the read. With one
// replica the broker takes the change directly (LocalPolicyEditor). With
// several replicas on etcd (replica/overlay.h) the overlay lives in one etcd
// key written with a revision compare by any replica, and the leader
// applies it; so two replicas changing quota at once never lose either
// change: one of them reads again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_store.h"

namespace gangkeeper::api {

// The interface is model::PolicyEditor (model/policy_store.h), beside the
// store whose overlay it writes; replica::EtcdPolicyEditor implements it too.
using PolicyEditor = model::PolicyEditor;

// One replica: the broker's snapshot is read, an Event::Policies to
// `events` writes. With `store` (may be null), the node's PolicyStore the
// API composes with, a write holds its publication() lock from a check
// that the store published nothing since Read (else Aborted: compose
// again) until the store has adopted the durable overlay, so a namespace
// change published meanwhile cannot undo it in the broker, nor it the
// namespace change. All must outlive the editor. Thread-safe.
std::unique_ptr<PolicyEditor> LocalPolicyEditor(broker::EventQueue* events, const broker::SnapshotSource* broker,
                                                model::PolicyStore* store = nullptr);

}  // namespace gangkeeper::api
